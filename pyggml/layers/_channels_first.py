"""``data_format="channels_first"`` for layers computed channels-last.

ggml's fused CPU convolutions and pooling read channels-last images, so a
layer given channels-first inputs (Keras's ``data_format="channels_first"``,
or ``keras.config.set_image_data_format("channels_first")`` with none given)
transposes its input to channels-last, computes as usual, and transposes the
result back: the same numbers as a channels-first kernel, at the cost of two
copies.  Its weights keep their layout (Keras's kernel does not depend on the
data format either).

Volumes (batch, C, D, H, W) are folded in the graph, (batch * C, D, H, W)
(pyggml._fold): such an input is moved to the channels-last fold (batch * D, H,
W, C) as a wide tensor (pyggml._wide), the layer's call sees that volume's
channels-last shape, and its result is moved back the same way."""

from pyggml import _fold, _wide, ops

__all__ = ["TransposesChannelsFirst", "data_format_of", "last_shape", "first_shape"]


def data_format_of(value, owner):
    fmt = "channels_last" if value is None else (value.lower() if isinstance(value, str) else value)
    if fmt not in ("channels_last", "channels_first"):
        raise ValueError(f"{owner}: data_format must be 'channels_last' or 'channels_first', got {value!r}")
    return fmt


def last_shape(shape):
    """(batch, channels, *spatial) -> (batch, *spatial, channels)."""
    shape = tuple(shape)
    return (shape[0],) + shape[2:] + (shape[1],)


def first_shape(shape):
    """(batch, *spatial, channels) -> (batch, channels, *spatial)."""
    shape = tuple(shape)
    return (shape[0], shape[-1]) + shape[1:-1]


def _to_last(x):
    rank = len(x.shape)
    return ops.transpose(x, (0,) + tuple(range(2, rank)) + (1,))


def _to_first(x):
    rank = len(x.shape)
    return ops.transpose(x, (0, rank - 1) + tuple(range(1, rank - 1)))


def _folded_shape(self, inputs):
    """The Keras (channels-first) shape of ``inputs`` where it is a folded volume, else None."""
    if len(inputs.shape) != 4:
        return None
    shape = _fold.in_shape(self)
    if shape is None or not _fold.folds(shape):
        return None
    return (_fold.batch_of(inputs, shape),) + tuple(shape[1:])


def _moved(x, shape, perm):
    """The folded volume x of Keras shape ``shape`` with its axes in ``perm``, folded again
    (a result of at most four dimensions as it is)."""
    out = _wide.transpose(_wide.wrap(x, shape), perm)
    return _wide.reshape(out, _fold.graph_shape(out.shape)) if len(out.shape) >= 5 else out


def _call_folded(self, fn, inputs, shape, *args, **kwargs):
    """fn (a call) on the folded channels-first volume ``inputs`` of Keras shape ``shape``."""
    rank = len(shape)
    last = last_shape(shape)
    x = _moved(inputs, shape, (0,) + tuple(range(2, rank)) + (1,))
    with _fold.inputs([last]):
        y = _in_last(self, fn, x, *args, **kwargs)
    out = tuple(self.compute_output_shape(shape))          # channels-first (this call's batch)
    if len(out) < 5:
        return _to_first(y)
    return _moved(y, last_shape(out), (0, len(out) - 1) + tuple(range(1, len(out) - 1)))


def _in_last(self, fn, *args, **kwargs):
    """fn(self, *args) with this layer's own methods taking channels-last (no transposing inside)."""
    self.__dict__["_in_last"] = True
    try:
        return fn(self, *args, **kwargs)
    finally:
        self.__dict__["_in_last"] = False


def _first(self):
    """Whether this call of a layer's method is to transpose: channels-first, not inside another."""
    return self.__dict__.get("data_format") == "channels_first" and not self.__dict__.get("_in_last")


def _checked(self, shape):
    if len(shape) < 3:
        raise ValueError(f"{type(self).__name__} (data_format='channels_first') expects inputs of shape "
                         f"(batch, channels, ...), got {tuple(shape)}")
    return last_shape(shape)


def _wrap(name, fn):
    if name == "build":
        def method(self, input_shape):
            return _in_last(self, fn, _checked(self, input_shape)) if _first(self) else fn(self, input_shape)
    elif name == "compute_output_shape":
        def method(self, input_shape):
            if not _first(self):
                return fn(self, input_shape)
            return first_shape(_in_last(self, fn, _checked(self, input_shape)))
    else:                                   # call, pre_activation: tensors
        def method(self, inputs, *args, **kwargs):
            if not _first(self):
                return fn(self, inputs, *args, **kwargs)
            folded = _folded_shape(self, inputs)
            if folded is not None:
                return _call_folded(self, fn, inputs, folded, *args, **kwargs)
            _checked(self, inputs.shape)
            return _to_first(_in_last(self, fn, _to_last(inputs), *args, **kwargs))
    method.__name__, method.__qualname__, method.__doc__ = fn.__name__, fn.__qualname__, fn.__doc__
    method._transposing = True
    return method


class TransposesChannelsFirst:
    """A base (first among the bases) of channels-last layer classes: with
    ``self.data_format == "channels_first"``, the build, output shape, call and pre-activation
    of each subclass (its own or inherited) see channels-last shapes and tensors, transposed
    once on the way in and out (a call of one from another passes through)."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for name in ("build", "compute_output_shape", "call", "pre_activation"):
            fn = getattr(cls, name, None)         # its own, or one it inherits from a base after this one
            if fn is not None and not getattr(fn, "_transposing", False):
                setattr(cls, name, _wrap(name, fn))
