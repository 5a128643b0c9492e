"""The callback contract (Keras's hooks, each with ``logs``), the list that
calls them, and History."""

__all__ = ["Callback", "CallbackList", "History"]


class Callback:
    """Base class: override the hooks you need; ``self.model`` and ``self.params``
    are set before training starts; ``self.model.stop_training = True`` stops it."""

    def __init__(self):
        self.model = None
        self.params = {}

    def set_model(self, model):
        self.model = model

    def set_params(self, params):
        self.params = params

    def on_train_begin(self, logs=None): pass
    def on_train_end(self, logs=None): pass
    def on_epoch_begin(self, epoch, logs=None): pass
    def on_epoch_end(self, epoch, logs=None): pass
    def on_train_batch_begin(self, batch, logs=None): pass
    def on_train_batch_end(self, batch, logs=None): pass
    def on_test_begin(self, logs=None): pass
    def on_test_end(self, logs=None): pass
    def on_test_batch_begin(self, batch, logs=None): pass
    def on_test_batch_end(self, batch, logs=None): pass
    def on_predict_begin(self, logs=None): pass
    def on_predict_end(self, logs=None): pass
    def on_predict_batch_begin(self, batch, logs=None): pass
    def on_predict_batch_end(self, batch, logs=None): pass

    # Keras's older names, called alongside the train-batch hooks
    def on_batch_begin(self, batch, logs=None): pass
    def on_batch_end(self, batch, logs=None): pass


_ALIASES = {"on_train_batch_begin": "on_batch_begin", "on_train_batch_end": "on_batch_end"}


class CallbackList:
    """Calls a hook on every callback, in order, with one copy of the logs that they share (as
    Keras's list does): a key one callback adds (a metric of its own) reaches those after it, the
    History and the progress bar among them."""

    def __init__(self, callbacks, model, params):
        self.callbacks = list(callbacks)
        for c in self.callbacks:
            c.set_model(model)
            c.set_params(dict(params))

    def call(self, hook, *args):
        alias = _ALIASES.get(hook)
        a = list(args)
        if a and isinstance(a[-1], dict):
            a[-1] = dict(a[-1])
        for c in self.callbacks:
            getattr(c, hook)(*a)
            if alias is not None and _overrides(c, alias):
                getattr(c, alias)(*a)


def _overrides(c, name):
    if name in c.__dict__:                    # a function set on the instance (LambdaCallback's)
        return True
    for klass in type(c).__mro__:
        if klass is Callback:
            return False
        if name in klass.__dict__:
            return True
    return False


class History(Callback):
    """What fit returns: ``history`` (a dict of per-epoch lists) and ``epoch``."""

    def __init__(self):
        super().__init__()
        self.history = {}
        self.epoch = []

    def on_train_begin(self, logs=None):
        self.epoch = []
        self.history = {}

    def on_epoch_end(self, epoch, logs=None):
        self.epoch.append(epoch)
        for k, v in (logs or {}).items():
            self.history.setdefault(k, []).append(v)
        if self.model is not None:
            self.model.history = self            # Keras's model.history, the latest fit's
