"""SpectralNormalization(layer, power_iterations=1): Keras's spectral normalization
of a layer's kernel (Miyato et al. 2018).

The wrapped layer (Dense, Conv1D, Conv2D, their transposes, EinsumDense, or a
layer of yours with a ``kernel`` or ``weight`` weight) computes with
``kernel / sigma``, where ``sigma`` estimates the kernel's largest singular
value by power iteration.  The kernel is seen as Keras's matrix: Keras's layout
reshaped to (everything else, Keras's last axis), so ``sigma`` is the same as
Keras's for the same kernel.  ``vector_u`` (1, Keras's last axis), a
non-trainable weight drawn from a truncated normal (stddev 0.02) as Keras,
starts each iteration:

    v = normalize(u W^T);  u = normalize(v W);  sigma = v W u^T

(``W`` Keras's matrix; ``normalize(x) = x / sqrt(sum(x^2) + 1e-12)``).  As Keras,
``u`` and ``v`` pass no gradient (``stop_gradient``).  In training the new ``u``
is written back into ``vector_u`` after each step (as BatchNormalization's moving
statistics are), so the estimate improves as the model trains; in inference
(``predict``, ``evaluate``, calls on arrays) ``vector_u`` stays as it is.

Departing from Keras: Keras overwrites the wrapped layer's kernel with ``kernel /
sigma`` at each training step and predicts with the stored kernel; here the
kernel weight stays the raw, trained one and every graph (training and
inference) normalizes it with the current ``vector_u`` (one more power iteration
from it), so the wrapped layer's ``weight`` is never rescaled in place.
"""

import numpy as np

from pyggml import _scope, ops
from pyggml._validation import check_positive_int, is_int
from pyggml.core import ops as core_ops
from pyggml.initializers import TruncatedNormal
from pyggml.layers._helpers import contiguous
from pyggml.layers._lora import StandIn
from pyggml.layers.wrappers.wrapper import Wrapper
from pyggml.saving.object_registration import register_builtin
from pyggml.variables import Variable

__all__ = ["SpectralNormalization"]

_EPS = 1e-12


def _normalize(x):
    """x / sqrt(sum(x^2) + eps) for a (1, n) tensor."""
    ss = core_ops.sum(ops.sqr(x))                                            # (1,)
    norm = ops.sqrt(ops.add(ss, ops.constant(np.full((1,), _EPS, np.float32))))
    like = _scope.require("SpectralNormalization").ctx.new_tensor(tuple(x.shape))
    return ops.div(x, ops.repeat(ops.reshape(norm, (1, 1)), like))


@register_builtin
class SpectralNormalization(Wrapper):
    # integer inputs go to the wrapped layer as they are: it converts them if it computes in float
    def __init__(self, layer, power_iterations=1, **kwargs):
        super().__init__(layer, **kwargs)
        if isinstance(power_iterations, bool) or not is_int(power_iterations):
            raise TypeError(f"SpectralNormalization: power_iterations must be an int, got {power_iterations!r}")
        if power_iterations < 1:
            raise ValueError(f"SpectralNormalization: power_iterations should be greater than zero, got "
                             f"{power_iterations}")
        self.power_iterations = check_positive_int("power_iterations", power_iterations, 1 << 12)
        self._kernel_attr = None

    # --- the kernel ------------------------------------------------------------------
    def _find_kernel(self):
        for attr in ("kernel", "weight"):
            v = self.layer.__dict__.get(attr)
            if isinstance(v, Variable):
                return attr, v
        raise ValueError(f"SpectralNormalization: {type(self.layer).__name__} object has no attribute 'kernel' "
                         f"(it wraps a layer with a kernel: Dense, Conv1D, Conv2D, ...)")

    def _keras_axes(self, v):
        """(the kernel's shape in the order its Keras layout is read from, the axis of that shape
        that is Keras's last)."""
        base = tuple(v.keras_shape) if v.keras_shape is not None else tuple(v.shape)
        axes = tuple(v.keras_axes) if v.keras_axes is not None else tuple(range(len(base)))
        return base, axes[-1]

    def build(self, input_shape=None):
        super().build(input_shape)
        if not self.layer.built:
            raise ValueError(f"SpectralNormalization: the wrapped {type(self.layer).__name__} could not be built")
        self._kernel_attr, v = self._find_kernel()
        if len(v.shape) < 2:
            raise ValueError(f"SpectralNormalization: the kernel of {type(self.layer).__name__} must have at least "
                             f"2 dimensions, got shape {v.shape}")
        base, last = self._keras_axes(v)
        self.vector_u = self.add_weight("vector_u", (1, base[last]), TruncatedNormal(stddev=0.02), trainable=False)

    def _matrix(self, w, v):
        """The kernel tensor as (Keras's last axis, everything else): Keras's matrix, transposed."""
        base, last = self._keras_axes(v)
        t = ops.reshape(contiguous(w), base) if tuple(w.shape) != base else w
        if last != 0:
            t = ops.cont(ops.permute_axes(t, (last,) + tuple(a for a in range(len(base)) if a != last)))
        n = base[last]
        return ops.reshape(contiguous(t), (n, int(np.prod(base)) // n))

    def normalized_kernel(self, training):
        """kernel / sigma (the kernel's shape), and the new u (1, n)."""
        v_kernel = self.layer.__dict__[self._kernel_attr]
        w = v_kernel.graph_tensor()
        m = self._matrix(w, v_kernel)                                       # (n, rest)
        mt = ops.cont(core_ops.transpose(m))                                # (rest, n)
        u_old = u = self.vector_u.graph_tensor()                            # (1, n)
        for _ in range(self.power_iterations):
            v = _normalize(ops.mul_mat(mt, u))                              # u W^T: (1, rest)
            u = _normalize(ops.mul_mat(m, v))                               # v W: (1, n)
        u, v = ops.stop_gradient(u), ops.stop_gradient(v)
        sigma = core_ops.sum(ops.mul(ops.mul_mat(m, v), u))                 # v W u^T
        # as Keras: an all-zero kernel (sigma 0) is used as it is and keeps its u
        zero = ops.stop_gradient(ops.sub(ops.constant(np.ones((1,), np.float32)), ops.step(ops.abs(sigma))))
        sigma = ops.add(sigma, zero)
        u = ops.add(u, ops.mul(ops.repeat(ops.reshape(zero, (1, 1)), u), u_old))
        builder = _scope.require("SpectralNormalization")
        like = builder.ctx.new_tensor(tuple(w.shape))
        return ops.div(w, ops.repeat(ops.reshape(sigma, (1,) * len(w.shape)), like)), u

    def call(self, inputs, training=None):
        kernel, u = self.normalized_kernel(training)
        if training:
            _scope.require("SpectralNormalization").add_update(self.vector_u, u)
        attr = self._kernel_attr
        old = self.layer.__dict__[attr]
        # the wrapped layer's call reads its kernel attribute: the normalized tensor stands in for it
        object.__setattr__(self.layer, attr, StandIn(old, kernel))
        try:
            return self.layer(inputs, training=training)
        finally:
            object.__setattr__(self.layer, attr, old)

    def get_config(self):
        cfg = super().get_config()
        cfg["power_iterations"] = self.power_iterations
        return cfg
