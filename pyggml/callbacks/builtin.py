"""Keras's callbacks: EarlyStopping, ReduceLROnPlateau, LearningRateScheduler,
ModelCheckpoint, LambdaCallback, TerminateOnNaN, CSVLogger."""

import csv
import inspect
import json
import math
import os

import numpy as np

from pyggml.callbacks.callback import Callback

__all__ = ["EarlyStopping", "ReduceLROnPlateau", "LearningRateScheduler", "ModelCheckpoint", "LambdaCallback",
           "TerminateOnNaN", "CSVLogger", "BackupAndRestore"]


# the metrics that are better higher, by the words of their Keras names (the rest, losses and
# errors, are better lower)
_UP_WORDS = ("acc", "accuracy", "auc", "precision", "recall", "f1", "fbeta", "iou", "r2", "fmeasure", "cosine",
             "specificity", "sensitivity")


def _auto_mode(monitor, model=None):
    """Keras's mode "auto": "max" for a metric that is better higher (accuracy, AUC, precision,
    recall, F-scores, IoU, R2: what a metric object's ``_direction`` says, else its name), "min"
    for losses and errors."""
    name = monitor[4:] if monitor.startswith("val_") else monitor
    if name == "loss" or name.endswith("_loss"):
        return "min"
    spec = getattr(model, "_compile_spec", None) if model is not None else None
    try:
        metrics = [m for _, m, _, _ in spec.all_metric_keys()] if spec is not None else []
    except Exception:
        metrics = []
    for m in metrics:
        direction = getattr(m, "_direction", None)
        if getattr(m, "name", None) == name and direction in ("up", "down"):
            return "max" if direction == "up" else "min"
    words = name.lower().split("_")
    if any(w.startswith(u) for w in words for u in _UP_WORDS) or "true_positives" in name \
            or "true_negatives" in name or "io_u" in name:          # (MeanIoU's name: "mean_io_u")
        return "max"
    return "min"


def _is_better(mode, monitor, current, best, min_delta, model=None):
    if mode == "auto":
        mode = _auto_mode(monitor, model)
    if mode == "min":
        return current < best - abs(min_delta)
    return current > best + abs(min_delta)


def _initial(mode, monitor, model=None):
    if mode == "auto":
        mode = _auto_mode(monitor, model)
    return np.inf if mode == "min" else -np.inf


class EarlyStopping(Callback):
    def __init__(self, monitor="val_loss", patience=0, min_delta=0, mode="auto",
                 restore_best_weights=False, verbose=0, baseline=None, start_from_epoch=0):
        super().__init__()
        if mode not in ("auto", "min", "max"):
            raise ValueError(f"mode must be 'auto', 'min' or 'max', got {mode!r}")
        self.monitor, self.patience, self.min_delta, self.mode = monitor, int(patience), min_delta, mode
        self.restore_best_weights, self.verbose, self.baseline = restore_best_weights, verbose, baseline
        self.start_from_epoch = start_from_epoch

    def on_train_begin(self, logs=None):
        self.wait = 0
        self.stopped_epoch = 0
        self.best = _initial(self.mode, self.monitor, self.model)
        self.best_weights = None
        self.best_epoch = 0

    def on_epoch_end(self, epoch, logs=None):
        """Keras 3's: the best epoch is tracked whatever the baseline, which only decides whether
        an improvement resets the patience."""
        current = (logs or {}).get(self.monitor)
        if current is None or epoch < self.start_from_epoch:
            return
        if self.restore_best_weights and self.best_weights is None:
            self.best_weights = self.model.get_weights()
            self.best_epoch = epoch
        self.wait += 1
        if _is_better(self.mode, self.monitor, current, self.best, self.min_delta, self.model):
            self.best = current
            self.best_epoch = epoch
            if self.restore_best_weights:
                self.best_weights = self.model.get_weights()
            if self.baseline is None or _is_better(self.mode, self.monitor, current, self.baseline, self.min_delta,
                                                   self.model):
                self.wait = 0
            return
        if self.wait >= self.patience and epoch > 0:
            self.stopped_epoch = epoch
            self.model.stop_training = True

    def on_train_end(self, logs=None):
        if self.stopped_epoch > 0 and self.verbose > 0:
            print(f"Epoch {self.stopped_epoch + 1}: early stopping")
        # Keras 3's: the best epoch's weights come back however training ended
        if self.restore_best_weights and self.best_weights is not None:
            if self.verbose > 0:
                print(f"Restoring model weights from the end of the best epoch: {self.best_epoch + 1}.")
            self.model.set_weights(self.best_weights)


class ReduceLROnPlateau(Callback):
    def __init__(self, monitor="val_loss", factor=0.1, patience=10, min_delta=1e-4, min_lr=0,
                 mode="auto", cooldown=0, verbose=0):
        super().__init__()
        if not 0 < factor < 1:
            raise ValueError("ReduceLROnPlateau: factor must be in (0, 1)")
        self.monitor, self.factor, self.patience, self.min_delta = monitor, factor, patience, min_delta
        self.min_lr, self.mode, self.cooldown, self.verbose = min_lr, mode, cooldown, verbose

    def on_train_begin(self, logs=None):
        self.wait = 0
        self.cooldown_counter = 0
        self.best = _initial(self.mode, self.monitor, self.model)

    def on_epoch_end(self, epoch, logs=None):
        logs = logs if logs is not None else {}
        logs["learning_rate"] = self.model.optimizer.learning_rate
        current = logs.get(self.monitor)
        if current is None:
            return
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.wait = 0
        if _is_better(self.mode, self.monitor, current, self.best, self.min_delta, self.model):
            self.best = current
            self.wait = 0
        elif self.cooldown_counter <= 0:
            self.wait += 1
            if self.wait >= self.patience:
                for opt in _rated(self.model.optimizer):
                    old = opt.learning_rate
                    new = max(old * self.factor, self.min_lr)
                    if new < old and new > 0:
                        opt.learning_rate = new
                        if self.verbose > 0:
                            print(f"\nEpoch {epoch + 1}: ReduceLROnPlateau reducing learning rate to {new}.")
                self.cooldown_counter = self.cooldown
                self.wait = 0


class LearningRateScheduler(Callback):
    """``schedule(epoch, lr) -> new lr``, called at the start of each epoch."""

    def __init__(self, schedule, verbose=0):
        super().__init__()
        if not callable(schedule):
            raise TypeError("schedule must be callable")
        self.schedule, self.verbose = schedule, verbose
        self._takes_lr = _takes_two(schedule)

    def on_epoch_begin(self, epoch, logs=None):
        # Keras's: schedule(epoch, lr), or schedule(epoch) for a function of the epoch alone
        for opt in _rated(self.model.optimizer):
            lr = self.schedule(epoch, opt.learning_rate) if self._takes_lr else self.schedule(epoch)
            opt.learning_rate = float(lr)
            if self.verbose > 0:
                print(f"\nEpoch {epoch + 1}: LearningRateScheduler setting learning rate to {float(lr)}.")


def _rated(optimizer):
    """The optimizers whose rates a callback sets: a MultiOptimizer's inner ones (each its own,
    as Keras's callbacks treat them), else the optimizer."""
    inner = getattr(optimizer, "optimizers", None)
    return list(inner) if isinstance(inner, list) and inner else [optimizer]


def _takes_two(fn):
    """Whether ``fn`` takes two positional arguments (a schedule of the epoch and the rate)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return True
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return True
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params) >= 2


class ModelCheckpoint(Callback):
    """Save the model (GGUF) after each epoch, or every ``save_freq`` batches;
    ``{epoch:02d}`` counts from 1 (``{batch}`` too with an integer save_freq), and
    the logs' keys fill the rest of the name (``{val_loss:.3f}``)."""

    def __init__(self, filepath, monitor="val_loss", verbose=0, save_best_only=False, save_weights_only=False,
                 mode="auto", save_freq="epoch", initial_value_threshold=None):
        super().__init__()
        if mode not in ("auto", "min", "max"):
            raise ValueError(f"mode must be 'auto', 'min' or 'max', got {mode!r}")
        if save_freq != "epoch" and (isinstance(save_freq, bool) or not isinstance(save_freq, int) or save_freq < 1):
            raise ValueError(f"save_freq must be 'epoch' or a positive number of batches, got {save_freq!r}")
        self.filepath, self.monitor, self.save_best_only = os.fspath(filepath), monitor, save_best_only
        self.mode, self.save_weights_only, self.verbose = mode, save_weights_only, verbose
        self.save_freq = save_freq
        self.best = _initial(mode, monitor) if initial_value_threshold is None else initial_value_threshold
        self._batches = 0
        self._epoch = 0

    def on_train_begin(self, logs=None):
        if self.mode == "auto" and self.best in (np.inf, -np.inf):
            # nothing saved as best yet: the direction from the compiled metric, now that it is known
            self.best = _initial(self.mode, self.monitor, self.model)

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        if self.save_freq == "epoch":
            return
        self._batches += 1
        if self._batches % self.save_freq == 0:
            self._save(self._epoch, batch, logs or {})

    def on_epoch_end(self, epoch, logs=None):
        if self.save_freq == "epoch":
            self._save(epoch, None, logs or {})

    def _save(self, epoch, batch, logs):
        fields = dict(logs)
        fields["epoch"] = epoch + 1
        if batch is not None:
            fields["batch"] = batch + 1
        try:
            path = self.filepath.format(**fields)
        except (KeyError, IndexError) as e:
            raise ValueError(f"ModelCheckpoint: the file name {self.filepath!r} names {e}, which the logs "
                             f"do not have ({sorted(fields)})") from None
        said = f"saving model to {path}"
        if self.save_best_only:
            current = logs.get(self.monitor)
            if current is None or not _is_better(self.mode, self.monitor, current, self.best, 0, self.model):
                if self.verbose > 0 and current is not None:
                    print(f"\nEpoch {epoch + 1}: {self.monitor} did not improve from {self.best:.5f}")
                return
            said = f"{self.monitor} improved from {self.best:.5f} to {current:.5f}, {said}"
            self.best = current
        folder = os.path.dirname(path)
        if folder:
            os.makedirs(folder, exist_ok=True)      # Keras makes the folder of the (formatted) path
        if self.save_weights_only:
            self.model.save_weights(path)
        else:
            self.model.save(path)
        if self.verbose > 0:
            print(f"\nEpoch {epoch + 1}: {said}")               # (Keras's words)


class LambdaCallback(Callback):
    """Keras's: functions for the hooks given, by the hooks' names (``on_batch_end`` and the
    other older names, and the test and predict hooks, by keyword too)."""

    def __init__(self, on_epoch_begin=None, on_epoch_end=None, on_train_batch_begin=None,
                 on_train_batch_end=None, on_train_begin=None, on_train_end=None, **kwargs):
        super().__init__()
        hooks = {"on_epoch_begin": on_epoch_begin, "on_epoch_end": on_epoch_end,
                 "on_train_batch_begin": on_train_batch_begin, "on_train_batch_end": on_train_batch_end,
                 "on_train_begin": on_train_begin, "on_train_end": on_train_end}
        for name, fn in kwargs.items():
            if not name.startswith("on_") or not callable(getattr(Callback, name, None)):
                raise TypeError(f"LambdaCallback: {name!r} is not a callback hook (on_epoch_end, on_batch_end, ...)")
            hooks[name] = fn
        for name, fn in hooks.items():
            if fn is not None:
                if not callable(fn):
                    raise TypeError(f"LambdaCallback: {name} must be a function, got {fn!r}")
                setattr(self, name, fn)


class TerminateOnNaN(Callback):
    """Stops training at a NaN or infinite loss; ``raise_error=True`` raises a RuntimeError
    instead (Keras's)."""

    def __init__(self, raise_error=False):
        super().__init__()
        self.raise_error = bool(raise_error)

    def on_train_batch_end(self, batch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is not None and not math.isfinite(loss):
            if self.raise_error:
                raise RuntimeError(f"TerminateOnNaN: batch {batch} gave the loss {loss}; training stops")
            self.model.stop_training = True


class CSVLogger(Callback):
    def __init__(self, filename, separator=",", append=False):
        super().__init__()
        self.filename, self.separator, self.append = os.fspath(filename), separator, append
        self._keys = None

    def on_train_begin(self, logs=None):
        self._keys = None
        if not self.append and os.path.exists(self.filename):
            os.unlink(self.filename)

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        new = not os.path.exists(self.filename) or os.path.getsize(self.filename) == 0
        if self._keys is None:
            self._keys = sorted(logs)
        with open(self.filename, "a", newline="") as f:
            w = csv.writer(f, delimiter=self.separator)
            if new:
                w.writerow(["epoch"] + self._keys)
            w.writerow([epoch] + [logs.get(k, "") for k in self._keys])


class BackupAndRestore(Callback):
    """Resume an interrupted ``fit``: the model (weights and optimizer state; the weights alone
    for a model written as code, which has no config to save) is backed
    up in ``backup_dir`` at the end of every epoch (or every ``save_freq`` batches, atomically:
    a save either completes or leaves the last backup), and a later ``fit`` with
    this callback starts from the epoch after the backup.  Once training completes
    the backup is deleted (``delete_checkpoint=True``)."""

    FILE = "backup.gguf"
    STATE = "backup.json"

    def __init__(self, backup_dir, save_freq="epoch", delete_checkpoint=True):
        super().__init__()
        if save_freq != "epoch" and (isinstance(save_freq, bool) or not isinstance(save_freq, int) or save_freq < 1):
            raise ValueError(f"save_freq must be 'epoch' or a positive number of batches, got {save_freq!r}")
        self.backup_dir = os.fspath(backup_dir)
        self.save_freq = save_freq
        self.delete_checkpoint = bool(delete_checkpoint)
        self.resume_epoch = None
        self._batches = 0
        self._epoch = 0

    def _paths(self):
        return os.path.join(self.backup_dir, self.FILE), os.path.join(self.backup_dir, self.STATE)

    def on_train_begin(self, logs=None):
        from pyggml.saving import restore
        model_path, state_path = self._paths()
        self.resume_epoch = None
        if os.path.exists(model_path) and os.path.exists(state_path):
            with open(state_path) as f:
                state = json.load(f)
            if state.get("weights_only"):
                self.model.load_weights(model_path)
            else:
                restore(self.model, model_path)
            self.resume_epoch = int(state["epoch"])

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        if self.save_freq != "epoch":
            self._batches += 1
            if self._batches % self.save_freq == 0:
                self._backup(self._epoch)          # the epoch reruns from its start when resumed

    def on_epoch_end(self, epoch, logs=None):
        self._backup(epoch + 1)

    def _backup(self, next_epoch):
        os.makedirs(self.backup_dir, exist_ok=True)
        model_path, state_path = self._paths()
        weights_only = False
        try:
            self.model.save(model_path)
        except (TypeError, ValueError):
            # a model written as code (subclassed, or holding other models with its own train_step)
            # has no config to save: its weights are backed up, the optimizer's state is not
            self.model.save_weights(model_path)
            weights_only = True
        tmp = state_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"epoch": next_epoch, "weights_only": weights_only}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, state_path)

    def on_train_end(self, logs=None):
        if self.delete_checkpoint and not self.model.stop_training:
            for p in self._paths():
                if os.path.exists(p):
                    os.unlink(p)
