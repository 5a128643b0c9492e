"""Core layers: Dense, Activation, Dropout, Flatten, Reshape, Permute, Add, Concatenate."""

import numpy as np

from pyggml import activations
from pyggml.core import ops
from pyggml.layers.base import Layer, _shape_tuple

__all__ = ["Dense", "Activation", "Dropout", "Flatten", "Reshape", "Permute", "Add", "Concatenate"]


def _positive_int(name, v, limit=2 ** 31):
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{name} must be a positive int, got {v!r}")
    if v < 1:
        raise ValueError(f"{name} must be a positive int, got {v}")
    if v > limit:
        raise ValueError(f"{name}={v} is too large")
    return int(v)


class _Activated(Layer):
    """A layer whose output goes through ``activation``; the training graph may
    take its pre-activation (logits) for a fused loss."""

    def __init__(self, activation=None, **kwargs):
        super().__init__(**kwargs)
        self._act = activations.get(activation)
        self.activation = activations.name_of(activation)

    def call_pre(self, g, x, training):
        raise NotImplementedError

    def call(self, g, x, training):
        return self._act(self.call_pre(g, x, training), g.ctx)

    def call_logits(self, g, x, training):
        return self.call_pre(g, x, training)


class Dense(_Activated):
    def __init__(self, units, activation=None, use_bias=True, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", **kwargs):
        super().__init__(activation=activation, **kwargs)
        self.units = _positive_int("units", units)
        self.use_bias = bool(use_bias)
        self.kernel_initializer = kernel_initializer
        self.bias_initializer = bias_initializer

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.units,)

    def build(self, input_shape):
        self.add_weight("weight", (self.units, input_shape[-1]), self.kernel_initializer)
        if self.use_bias:
            self.add_weight("bias", (self.units,), self.bias_initializer)

    def call_pre(self, g, x, training):
        lead = tuple(x.shape[:-1])
        if len(lead) > 1:
            # ggml's mul_mat has no backward pass for a weight broadcast over batch
            # dims: apply it to the rows of a 2-D view, as Keras applies Dense to the last axis
            x = ops.reshape(_cont(x, g), (int(np.prod(lead)), x.shape[-1]), ctx=g.ctx)
        y = ops.mul_mat(g.weight(self, "weight"), x, ctx=g.ctx)
        if self.use_bias:
            y = ops.add(y, g.weight(self, "bias"), ctx=g.ctx)
        if len(lead) > 1:
            y = ops.reshape(y, lead + (self.units,), ctx=g.ctx)
        return y

    def get_config(self):
        c = super().get_config()
        c.update(units=self.units, activation=self.activation, use_bias=self.use_bias)
        return c


class Activation(_Activated):
    def __init__(self, activation, **kwargs):
        super().__init__(activation=activation, **kwargs)

    def call_pre(self, g, x, training):
        return x

    def get_config(self):
        c = super().get_config()
        c["activation"] = self.activation
        return c


class Dropout(Layer):
    def __init__(self, rate, seed=None, **kwargs):
        super().__init__(**kwargs)
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 <= rate < 1:
            raise ValueError(f"Dropout rate must be in [0, 1), got {rate!r}")
        self.rate = float(rate)
        self.seed = seed

    def call(self, g, x, training):
        if not training or self.rate == 0:
            return x
        return ops.mul(x, g.dropout_mask(x.shape, self.rate), ctx=g.ctx)

    def get_config(self):
        c = super().get_config()
        c["rate"] = self.rate
        return c


def _cont(x, g):
    return x if x.is_contiguous else ops.cont(x, ctx=g.ctx)


class Flatten(Layer):
    def compute_output_shape(self, input_shape):
        return (int(np.prod(input_shape)),)

    def call(self, g, x, training):
        return ops.reshape(_cont(x, g), (g.batch,) + self.output_shape, ctx=g.ctx)


class Reshape(Layer):
    def __init__(self, target_shape, **kwargs):
        super().__init__(**kwargs)
        t = tuple(target_shape) if not isinstance(target_shape, int) else (target_shape,)
        if sum(1 for d in t if d == -1) > 1:
            raise ValueError("Reshape: at most one -1 in target_shape")
        for d in t:
            if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or (d < 1 and d != -1):
                raise ValueError(f"Reshape: target_shape entries must be positive ints or -1, got {t}")
        if len(t) > 3:
            raise ValueError("Reshape: at most 3 dimensions besides the batch")
        self.target_shape = tuple(int(d) for d in t)

    def compute_output_shape(self, input_shape):
        n = int(np.prod(input_shape))
        t = self.target_shape
        if -1 in t:
            known = int(np.prod([d for d in t if d != -1]))
            if n % known:
                raise ValueError(f"Reshape: cannot reshape {input_shape} to {t}")
            t = tuple(n // known if d == -1 else d for d in t)
        if int(np.prod(t)) != n:
            raise ValueError(f"Reshape: cannot reshape {input_shape} ({n} values) to {t}")
        return t

    def call(self, g, x, training):
        return ops.reshape(_cont(x, g), (g.batch,) + self.output_shape, ctx=g.ctx)

    def get_config(self):
        c = super().get_config()
        c["target_shape"] = self.target_shape
        return c


def permute_numpy(x, perm, g):
    """Permute numpy axes (batch included): output axis i is input axis perm[i]."""
    r = len(perm)
    ax = list(range(4))
    for i, p in enumerate(perm):
        ax[r - 1 - p] = r - 1 - i
    return ops.cont(ops.permute(x, ax, ctx=g.ctx), ctx=g.ctx)


class Permute(Layer):
    """Permute the non-batch axes; ``dims`` counts from 1, as Keras."""

    def __init__(self, dims, **kwargs):
        super().__init__(**kwargs)
        d = tuple(dims)
        if sorted(d) != list(range(1, len(d) + 1)):
            raise ValueError(f"Permute: dims must be a permutation of 1..{len(d)}, got {d}")
        self.dims = d

    def compute_output_shape(self, input_shape):
        if len(self.dims) != len(input_shape):
            raise ValueError(f"Permute: dims {self.dims} do not match input shape {input_shape}")
        return tuple(input_shape[d - 1] for d in self.dims)

    def call(self, g, x, training):
        perm = (0,) + self.dims
        if perm == tuple(range(len(perm))):
            return x
        return ops.reshape(permute_numpy(x, perm, g), (g.batch,) + self.output_shape, ctx=g.ctx)

    def get_config(self):
        c = super().get_config()
        c["dims"] = self.dims
        return c


class Add(Layer):
    def compute_output_shape(self, input_shape):
        if not isinstance(input_shape, list) or len(input_shape) < 2:
            raise ValueError("Add must be called on a list of at least two inputs")
        if any(s != input_shape[0] for s in input_shape):
            raise ValueError(f"Add: all inputs must have the same shape, got {input_shape}")
        return input_shape[0]

    def call(self, g, xs, training):
        y = xs[0]
        for x in xs[1:]:
            y = ops.add(y, x, ctx=g.ctx)
        return y


class Concatenate(Layer):
    """Join inputs along ``axis``.  ggml's concat has no backward pass, so the
    join is a sum of products with constant 0/1 placement matrices."""

    def __init__(self, axis=-1, **kwargs):
        super().__init__(**kwargs)
        if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)) or axis == 0:
            raise ValueError("Concatenate: axis must be a non-zero int (the batch axis cannot be joined)")
        self.axis = int(axis)

    def compute_output_shape(self, input_shape):
        if not isinstance(input_shape, list) or len(input_shape) < 2:
            raise ValueError("Concatenate must be called on a list of at least two inputs")
        r = len(input_shape[0])
        if any(len(s) != r for s in input_shape):
            raise ValueError(f"Concatenate: inputs must have the same rank, got {input_shape}")
        ax = self.axis if self.axis > 0 else r + 1 + self.axis
        if not 1 <= ax <= r:
            raise ValueError(f"Concatenate: axis {self.axis} out of range for inputs of rank {r + 1}")
        self._ax = ax
        for s in input_shape:
            if any(s[i] != input_shape[0][i] for i in range(r) if i != ax - 1):
                raise ValueError(f"Concatenate: shapes {input_shape} differ outside axis {self.axis}")
        out = list(input_shape[0])
        out[ax - 1] = sum(s[ax - 1] for s in input_shape)
        return tuple(out)

    def call(self, g, xs, training):
        r = len(self.output_shape) + 1
        ax = self._ax
        perm = None
        if ax != r - 1:
            perm = list(range(r))
            perm[ax], perm[r - 1] = perm[r - 1], perm[ax]
            xs = [permute_numpy(x, perm, g) for x in xs]
        total = sum(int(x.shape[-1]) for x in xs)
        y = None
        off = 0
        for x in xs:
            f = int(x.shape[-1])
            m = int(np.prod(x.shape[:-1]))
            place = np.zeros((total, f), dtype=np.float32)
            place[off + np.arange(f), np.arange(f)] = 1.0
            part = ops.mul_mat(g.const(place), ops.reshape(_cont(x, g), (m, f), ctx=g.ctx), ctx=g.ctx)
            y = part if y is None else ops.add(y, part, ctx=g.ctx)
            off += f
        shape = tuple(xs[0].shape[:-1]) + (total,)
        y = ops.reshape(y, shape, ctx=g.ctx)
        if perm is not None:
            y = permute_numpy(y, perm, g)
        return y

    def get_config(self):
        c = super().get_config()
        c["axis"] = self.axis
        return c
