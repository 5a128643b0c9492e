"""Keras's ``ProgbarLogger``: the progress that ``fit`` (and ``evaluate``) print.

``fit(verbose=1)`` and ``evaluate(verbose=1)`` add one themselves (unless you
passed one): "Epoch i/n" then a ``pg.utils.Progbar`` per epoch with the running
logs, finished with the epoch's logs (validation included); ``verbose=2`` writes
one line per epoch.  The logs fit gives are already averages, so the bar shows
them as given.
"""

from pyggml.callbacks.callback import Callback
from pyggml.utils.progbar import Progbar

__all__ = ["ProgbarLogger"]


class ProgbarLogger(Callback):
    """Prints the metrics to stdout (or the "pyggml" logger, see ``pg.config``)."""

    def __init__(self):
        super().__init__()
        self.seen = 0
        self.progbar = None
        self.target = None
        self.verbose = 1
        self.epochs = 1
        self._called_in_fit = False

    def set_params(self, params):
        super().set_params(params)
        verbose = params.get("verbose", 1)
        self.verbose = 1 if verbose in ("auto", True, None) else int(verbose)
        self.epochs = params.get("epochs", 1)
        self.target = params.get("steps")

    def _reset(self):
        self.seen = 0
        self.progbar = None

    def _make_bar(self):
        if self.progbar is None:
            self.progbar = Progbar(target=self.target, verbose=self.verbose if self.verbose in (0, 1, 2) else 1,
                                   unit_name="step")

    def _update(self, batch, logs):
        self._make_bar()
        self.seen = batch + 1
        logs = dict(logs or {})
        self.progbar.stateful_metrics.update(logs)
        # the last step's line is the finished one, written at the end (with the epoch's logs)
        if self.verbose == 1 and (self.target is None or self.seen < self.target):
            self.progbar.update(self.seen, list(logs.items()), finalize=False)

    def _finalize(self, logs):
        self._make_bar()
        logs = dict(logs or {})
        self.progbar.stateful_metrics.update(logs)
        if self.target is None:
            self.target = self.seen
            self.progbar.target = self.seen
        self.progbar.update(self.target, list(logs.items()), finalize=True)

    def on_train_begin(self, logs=None):
        self._called_in_fit = True

    def on_epoch_begin(self, epoch, logs=None):
        self._reset()
        if self.verbose and self.epochs > 1:
            from pyggml import config
            config.print_msg(f"Epoch {epoch + 1}/{self.epochs}")
        self._make_bar()              # its clock starts with the epoch (the time per step counts step 1)

    def on_train_batch_end(self, batch, logs=None):
        self._update(batch, logs)

    def on_epoch_end(self, epoch, logs=None):
        self._finalize(logs)

    def on_train_end(self, logs=None):
        self._called_in_fit = False

    def on_test_begin(self, logs=None):
        if not self._called_in_fit:
            self._reset()
            self._make_bar()

    def on_test_batch_end(self, batch, logs=None):
        if not self._called_in_fit:
            self._update(batch, logs)

    def on_test_end(self, logs=None):
        if not self._called_in_fit:
            self._finalize(logs)

    def on_predict_begin(self, logs=None):
        self._reset()
        self._make_bar()

    def on_predict_batch_end(self, batch, logs=None):
        self._update(batch, {})

    def on_predict_end(self, logs=None):
        self._finalize({})
