"""Keras's ``SwapEMAWeights``: evaluate (and predict) with the weights' moving averages.

For an optimizer with ``use_ema=True``: before each evaluation (the validation
inside ``fit`` included) the model's trainable weights and their ``ema`` slots
trade places, and trade back after it, so the validation metrics are those of the
averaged weights while training goes on with the raw ones.  With
``swap_on_epoch=True`` the swap happens at each epoch's end instead (callbacks
after this one, such as ModelCheckpoint, see the averages) and is undone when the
next epoch begins; after the last epoch the averages stay, as fit leaves them.
"""

from pyggml.callbacks.callback import Callback

__all__ = ["SwapEMAWeights"]


class SwapEMAWeights(Callback):
    def __init__(self, swap_on_epoch=False):
        super().__init__()
        if not isinstance(swap_on_epoch, bool):
            raise TypeError(f"SwapEMAWeights: swap_on_epoch must be True or False, got {swap_on_epoch!r}")
        self.swap_on_epoch = swap_on_epoch
        self._ema_in_model = False

    def _optimizer(self):
        opt = getattr(self.model, "optimizer", None)
        if opt is None or not getattr(opt, "use_ema", False):
            raise ValueError("SwapEMAWeights needs a model compiled with an optimizer that has use_ema=True")
        return opt

    def _pairs(self):
        """(Variable, its ema slot Tensor) of every trainable weight that has been trained."""
        opt = self._optimizer()
        out = []
        for v in self.model.trainable_variables:
            home = getattr(v, "home", None)
            state = None if home is None else getattr(getattr(home, "owner", None), "state_of",
                                                      lambda o: None)(opt)
            if state is None:
                continue
            ema = state.slots(v).get("ema") if hasattr(state, "slots") else None
            if ema is not None:
                out.append((v, ema))
        return out

    def _swap(self):
        for v, ema in self._pairs():
            average = ema.numpy().reshape(v.shape)
            ema.set(v.numpy().reshape(ema.shape))
            v.assign(average)
        self._ema_in_model = not self._ema_in_model

    def on_train_begin(self, logs=None):
        self._optimizer()
        self._ema_in_model = False

    def on_epoch_begin(self, epoch, logs=None):
        if self.swap_on_epoch and self._ema_in_model:
            self._swap()

    def on_epoch_end(self, epoch, logs=None):
        if self.swap_on_epoch and not self._ema_in_model:
            self._swap()
            self._averages = [(v, v.numpy()) for v in self.model.trainable_variables]

    def on_train_end(self, logs=None):
        if self.swap_on_epoch and self._ema_in_model:
            # fit has just given each weight its ema slot (finalize_variable_values), which held the
            # raw values while the averages were in the model: the averages go back, where fit leaves them
            for v, average in getattr(self, "_averages", ()):
                v.assign(average)
            self._ema_in_model = False

    def on_test_begin(self, logs=None):
        if not self._ema_in_model:
            self._swap()
            self._swapped_for_test = True

    def on_test_end(self, logs=None):
        if getattr(self, "_swapped_for_test", False):
            self._swap()
            self._swapped_for_test = False

    def on_predict_begin(self, logs=None):
        self.on_test_begin(logs)

    def on_predict_end(self, logs=None):
        self.on_test_end(logs)
