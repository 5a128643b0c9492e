"""Callbacks with Keras's hooks, arguments and defaults."""

from pyggml.callbacks.builtin import (BackupAndRestore, CSVLogger, EarlyStopping, LambdaCallback,
                                      LearningRateScheduler, ModelCheckpoint, ReduceLROnPlateau, TerminateOnNaN)
from pyggml.callbacks.callback import Callback, CallbackList, History
from pyggml.callbacks.progbar_logger import ProgbarLogger
from pyggml.callbacks.remote_monitor import RemoteMonitor
from pyggml.callbacks.swap_ema_weights import SwapEMAWeights
from pyggml.callbacks.tensorboard import TensorBoard

__all__ = ["Callback", "CallbackList", "History", "EarlyStopping", "ReduceLROnPlateau", "LearningRateScheduler",
           "ModelCheckpoint", "LambdaCallback", "TerminateOnNaN", "CSVLogger", "BackupAndRestore",
           "ProgbarLogger", "TensorBoard", "RemoteMonitor", "SwapEMAWeights"]
