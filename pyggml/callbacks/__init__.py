"""Callbacks with Keras's hooks, arguments and defaults."""

from pyggml.callbacks.builtin import (BackupAndRestore, CSVLogger, EarlyStopping, LambdaCallback,
                                      LearningRateScheduler, ModelCheckpoint, ReduceLROnPlateau, TerminateOnNaN)
from pyggml.callbacks.callback import Callback, CallbackList, History
from pyggml.callbacks.progbar_logger import ProgbarLogger

__all__ = ["Callback", "CallbackList", "History", "EarlyStopping", "ReduceLROnPlateau", "LearningRateScheduler",
           "ModelCheckpoint", "LambdaCallback", "TerminateOnNaN", "CSVLogger", "BackupAndRestore",
           "ProgbarLogger"]
