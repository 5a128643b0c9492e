"""The metric contract (Keras's): ``update_state(y_true, y_pred, sample_weight=None)``
accumulates a batch, ``result()`` gives the value so far, ``reset_state()``
starts over.  Metrics run on the host, on numpy arrays: ``y_pred`` is what
``predict`` returns for the batch, ``y_true`` the targets as given (class
indices for a sparse loss).

Write your own by subclassing ``Metric``; ``MeanMetricWrapper(fn)`` turns a
function ``fn(y_true, y_pred) -> per-sample values`` into one.
"""

import numpy as np

from pyggml.saving.object_registration import register_builtin

__all__ = ["Metric", "MetricValue", "Mean", "MeanMetricWrapper"]


class MetricValue(float):
    """A metric's result: a float that answers TensorFlow's eager ``.numpy()`` (Keras's
    ``metric.result().numpy()``)."""

    dtype = np.dtype("float32")     # Keras's result is a float32 scalar tensor
    shape = ()
    ndim = 0

    def numpy(self):
        return np.float32(self)


def _answering_numpy(result):
    import functools

    @functools.wraps(result)
    def wrapped(self):
        r = result(self)
        if not isinstance(r, (np.ndarray, float, np.floating, dict, list, tuple)) and hasattr(r, "numpy"):
            r = np.asarray(r.numpy())            # a state variable given as the result (Keras's guides)
            if r.size == 1:
                r = r.reshape(())[()]
        return MetricValue(r) if type(r) is float or isinstance(r, np.floating) else r
    wrapped._answers_numpy = True
    return wrapped


def _refusing_graph_tensors(update_state):
    import functools

    from pyggml import _scope
    from pyggml.core import Tensor
    from pyggml.errors import GGMLError

    @functools.wraps(update_state)
    def wrapped(self, *args, **kwargs):
        if any(isinstance(a, Tensor) for a in (*args, *kwargs.values())):
            # in a layer's call (keras-io's endpoint layer): the graph being built reads the values
            # back after each compute and updates the metric on the host with them
            record = getattr(_scope.current(), "add_metric_update", None)
            if record is not None:
                record(self, args, kwargs)
                return None
        try:
            return update_state(self, *args, **kwargs)
        except (GGMLError, TypeError):
            if any(isinstance(a, Tensor) for a in (*args, *kwargs.values())) and _scope.current() is not None:
                raise TypeError(
                    f"{type(self).__name__}.update_state got tensors of a graph being built (a layer's call "
                    f"in a model), which hold no values yet: metrics run on the host, on arrays. Return the "
                    f"values as an output of the model and give the metric to compile(metrics=...), or "
                    f"update it in a train_step") from None
            raise
    wrapped._refuses_graph_tensors = True
    return wrapped


class MetricUpdate:
    """A metric's ``update_state`` called in a layer's call with tensors of a graph being built:
    the graph reads ``tensors()`` back after each compute, and ``apply`` updates the metric with
    their values (the other arguments as given)."""

    def __init__(self, metric, args, kwargs):
        from pyggml.core import Tensor
        self.metric, self.args, self.kwargs = metric, tuple(args), dict(kwargs)
        self.graph_tensors = [a for a in (*self.args, *self.kwargs.values()) if isinstance(a, Tensor)]

    def tensors(self):
        return self.graph_tensors

    def apply(self, values):
        from pyggml.core import Tensor
        it = iter(values)
        args = [next(it) if isinstance(a, Tensor) else a for a in self.args]
        kwargs = {k: next(it) if isinstance(v, Tensor) else v for k, v in self.kwargs.items()}
        self.metric.update_state(*args, **kwargs)


class Metric:
    """Base class: ``name``; ``update_state``, ``result``, ``reset_state``."""

    dtype = "float32"          # Keras's: its state and result dtype (float32 here)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        r = cls.__dict__.get("result")
        if r is not None and not getattr(r, "_answers_numpy", False):
            cls.result = _answering_numpy(r)          # a float result answers .numpy() too
        u = cls.__dict__.get("update_state")
        if u is not None and not getattr(u, "_refuses_graph_tensors", False):
            cls.update_state = _refusing_graph_tensors(u)

    def __init__(self, name=None, dtype=None):
        self.name = name or _snake(type(self).__name__)

    def update_state(self, y_true, y_pred, sample_weight=None):
        raise NotImplementedError

    def result(self):
        raise NotImplementedError

    def reset_state(self):
        """Keras's default: every variable made by add_variable back to its first values."""
        own = self.__dict__.get("_metric_variables")
        if not own:
            raise NotImplementedError(f"{type(self).__name__} must define reset_state (or keep its state in "
                                      f"variables made by add_variable, which this resets)")
        for v, first in own:
            v.assign(first)

    def reset_states(self):
        """tf.keras's name of ``reset_state`` (the metric's own, where it defines one)."""
        return self.reset_state()

    def add_variable(self, shape=(), initializer="zeros", dtype=None, aggregation="sum", name=None):
        """Keras's: a state variable of the metric (not trained), updated in ``update_state``
        (``self.total.assign_add(...)``), put back to its first values by ``reset_state``."""
        from pyggml.variables import Variable
        own = self.__dict__.setdefault("_metric_variables", [])
        shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(shape)
        v = Variable(initializer, shape=shape, dtype=dtype or "float32", trainable=False,
                     name=name or f"variable_{len(own)}")
        own.append((v, v.numpy().copy()))
        return v

    def add_weight(self, name=None, shape=(), initializer="zeros", dtype=None, aggregation="sum", **kwargs):
        """Keras's older name of add_variable."""
        return self.add_variable(shape=shape, initializer=initializer, dtype=dtype, aggregation=aggregation,
                                 name=name)

    @property
    def variables(self):
        return [v for v, _ in self.__dict__.get("_metric_variables", [])]

    def __call__(self, *args, **kwargs):
        """Keras's: ``update_state(*args, **kwargs)``, then the result so far (the state
        accumulates, as ``metric(loss)`` in a custom loop expects)."""
        self.update_state(*args, **kwargs)
        return self.result()

    def get_config(self):
        return {"name": self.name}

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def __repr__(self):
        return f"<{type(self).__name__} name={self.name!r}>"


def _snake(name):
    out = []
    for i, c in enumerate(name):
        if c.isupper() and i and not name[i - 1].isupper():
            out.append("_")
        out.append(c.lower())
    return "".join(out)


def keras_weights(sample_weight, shape, what="metric"):
    """Keras's sample weights against values of ``shape``: a number for every value, a weight
    of lower rank given trailing axes of 1 (one per sample), then numpy's broadcasting; the
    same number of values in another shape is taken in order."""
    w = np.asarray(sample_weight, dtype=np.float64)
    shape = tuple(shape)
    if w.size == int(np.prod(shape)) and w.shape != shape and w.ndim != len(shape):
        return w.reshape(shape)
    while w.ndim < len(shape):
        w = w[..., None]
    while w.ndim > len(shape) and w.shape[-1] == 1:
        w = w[..., 0]
    try:
        return np.broadcast_to(w, shape)
    except ValueError:
        raise ValueError(f"{what}: sample_weight of shape {np.shape(sample_weight)} does not broadcast to values of "
                         f"shape {shape}") from None


def as_arrays(y_true, y_pred, sample_weight=None):
    yt = np.asarray(y_true)
    yp = np.asarray(y_pred, dtype=np.float64)
    w = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64).reshape(len(yp), -1)
    return yt, yp, w


@register_builtin
class Mean(Metric):
    """The (weighted) mean of the values given to update_state."""

    def __init__(self, name="mean", dtype=None):
        super().__init__(name)
        self.reset_state()

    def reset_state(self):
        self.total = 0.0
        self.count = 0.0

    def update_state(self, values, sample_weight=None):
        v = np.asarray(values, dtype=np.float64)
        if sample_weight is None:
            v = v.reshape(-1)
            self.total += float(v.sum())
            self.count += v.size
        else:
            w = keras_weights(sample_weight, v.shape, self.name)
            v = v.reshape(-1)
            w = w.reshape(-1)
            self.total += float((v * w).sum())
            self.count += float(w.sum())

    def result(self):
        return float(self.total / self.count) if self.count else 0.0


@register_builtin
class MeanMetricWrapper(Mean):
    """A function ``fn(y_true, y_pred) -> per-sample values`` averaged over samples."""

    def __init__(self, fn, name=None, dtype=None, **kwargs):
        super().__init__(name=name or getattr(fn, "__name__", "metric"))
        self.fn = fn
        self.fn_kwargs = kwargs

    def update_state(self, y_true, y_pred, sample_weight=None):
        v = np.asarray(self.fn(y_true, y_pred, **self.fn_kwargs), dtype=np.float64)
        if sample_weight is None:
            v = v.reshape(len(np.asarray(y_pred)), -1).mean(axis=1) if v.ndim > 1 else v.reshape(-1)
        # with weights: the values as the function gives them, each weighed as Keras's Mean
        # broadcasts the weights (one per sample, per step, per value, or a row for every sample)
        super().update_state(v, sample_weight)

    def get_config(self):
        return {"name": self.name}

    @classmethod
    def from_config(cls, config):
        raise TypeError("a MeanMetricWrapper is rebuilt from its function, not from a config")
