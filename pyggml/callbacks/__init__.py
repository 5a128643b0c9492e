"""Callbacks with Keras's hooks, arguments and defaults."""

from pyggml.callbacks.builtin import (BackupAndRestore, CSVLogger, EarlyStopping, LambdaCallback,
                                      LearningRateScheduler, ModelCheckpoint, ReduceLROnPlateau, TerminateOnNaN)
from pyggml.callbacks.callback import Callback, CallbackList, History

__all__ = ["Callback", "CallbackList", "History", "EarlyStopping", "ReduceLROnPlateau", "LearningRateScheduler",
           "ModelCheckpoint", "LambdaCallback", "TerminateOnNaN", "CSVLogger", "BackupAndRestore"]
