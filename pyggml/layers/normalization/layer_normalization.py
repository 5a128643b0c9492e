"""LayerNormalization over the last axis: on the CPU ggml's norm (pyggml's patches
give it a backward pass) times gamma plus beta; elsewhere composed from sums.

Other axes (``axis=[1, 2, 3]``, ``axis=1``, Keras's int or list) are moved last
and joined into one, normalised the same way, and moved back; gamma and beta
have the normalised axes' shape, as Keras's.

``center=False`` drops beta (the weight "bias"), ``scale=False`` gamma ("weight"),
as Keras makes no such weight then."""

from pyggml import _fold, ops
from pyggml.core import ops as core_ops
from pyggml.layers._helpers import contiguous, fused
from pyggml.layers.layer import Layer
from pyggml.layers.normalization._moments import affine_config, mean_rows, rsqrt, set_affine_options
from pyggml.layers.normalization.unit_normalization import normalized_axes
from pyggml.saving.object_registration import register_builtin

__all__ = ["LayerNormalization"]

_OPTIONS = ("beta_regularizer", "gamma_regularizer", "beta_constraint", "gamma_constraint")


@register_builtin
class LayerNormalization(Layer):
    supports_masking = True

    @property
    def build_shape_rule(self):
        # weights on the last axis: a later call may have other lengths (Layer._fits_built)
        return "last" if self.axis in (-1, [-1]) else None

    def takes_5d(self, shapes):
        """volumes are normalised over their channels (the last axis) only (pyggml._fold)."""
        rank = len(shapes[0])
        return normalized_axes(self.axis, rank, "LayerNormalization") == [rank - 1]

    def __init__(self, axis=-1, epsilon=1e-3, center=True, scale=True, beta_initializer="zeros",
                 gamma_initializer="ones", beta_regularizer=None, gamma_regularizer=None, beta_constraint=None,
                 gamma_constraint=None, rms_scaling=False, **kwargs):
        super().__init__(**kwargs)
        # Keras's rms_scaling: x / sqrt(mean(x^2) + epsilon) * gamma (no centring, no beta)
        self.rms_scaling = bool(rms_scaling)
        if self.rms_scaling:
            center, scale = False, True
        items = list(axis) if isinstance(axis, (list, tuple)) else [axis]
        if not items:
            raise ValueError("LayerNormalization: axis must name at least one axis")
        normalized_axes(items, 64, "LayerNormalization")            # ints, no repeats
        self.axis = list(axis) if isinstance(axis, (list, tuple)) else int(axis)
        set_affine_options(self, epsilon, center, scale, beta_initializer, gamma_initializer,
                           beta_regularizer=beta_regularizer, gamma_regularizer=gamma_regularizer,
                           beta_constraint=beta_constraint, gamma_constraint=gamma_constraint)

    def compute_output_shape(self, input_shape):
        return input_shape

    # Keras's names for these weights (the same Variables)
    gamma = property(lambda self: self.weight, doc="Keras's gamma: the weight Variable.")
    beta = property(lambda self: self.bias, doc="Keras's beta: the bias Variable.")

    def _axes(self, rank):
        keras_shape = _fold.in_shape(self) if _fold.active() else None
        if keras_shape is not None and _fold.folds(keras_shape):
            return [rank - 1]                    # a folded volume: its channels, as takes_5d asked
        axes = normalized_axes(self.axis, rank, "LayerNormalization")
        if 0 in axes:
            raise ValueError(f"LayerNormalization: the batch axis (0) cannot be normalized, got axis={self.axis!r}")
        return axes

    def build(self, input_shape):
        axes = self._axes(len(input_shape))
        c = tuple(input_shape[a] for a in axes)
        if any(d is None for d in c):
            raise ValueError(f"LayerNormalization: the normalized axes of inputs of shape {tuple(input_shape)} need "
                             f"known sizes, got {c}")
        self.weight = self.add_weight("weight", c, self.gamma_initializer, regularizer=self.gamma_regularizer,
                                      constraint=self.gamma_constraint) if self.scale else None
        self.bias = self.add_weight("bias", c, self.beta_initializer, regularizer=self.beta_regularizer,
                                    constraint=self.beta_constraint) if self.center else None

    def call(self, inputs, training=None):
        x = contiguous(inputs)
        rank = len(x.shape)
        axes = self._axes(rank)
        if axes == [rank - 1]:
            return self._normalise(x, self.weight, self.bias)
        # the normalised axes moved last (in order) and joined into one
        k = len(axes)
        moved = ops.moveaxis(x, tuple(axes), tuple(range(rank - k, rank))) if axes != list(range(rank - k, rank)) \
            else x
        lead = tuple(moved.shape[:rank - k])
        n = 1
        for a in axes:
            n *= x.shape[a]
        flat = [None if w is None else ops.reshape(w.graph_tensor(), (n,)) for w in (self.weight, self.bias)]
        y = self._normalise(ops.reshape(contiguous(moved), lead + (n,)), *flat)
        y = ops.reshape(y, tuple(moved.shape))
        return ops.moveaxis(y, tuple(range(rank - k, rank)), tuple(axes)) if moved is not x else y

    def _normalise(self, x, weight, bias):
        """x normalised over its last axis, times ``weight``, plus ``bias`` (either may be None)."""
        if self.rms_scaling:
            # Keras's: the inputs (not centred) over the root of their variance, times gamma
            y = ops.multiply(x, ops.rsqrt(ops.var(x, axis=-1, keepdims=True) + self.epsilon))
            return ops.mul(contiguous(y), weight) if weight is not None else y
        if fused():
            y = core_ops.norm(x, self.epsilon)
            if weight is not None:
                y = ops.mul(y, weight)
            return ops.bias_act(y, bias) if bias is not None else y
        xc = ops.sub(x, ops.repeat(mean_rows(x), x))
        var = mean_rows(ops.sqr(xc))
        y = ops.mul(xc, rsqrt(var, self.epsilon))
        if weight is not None:
            y = ops.mul(y, weight)
        return ops.add(y, bias) if bias is not None else y

    def get_config(self):
        cfg = super().get_config()
        cfg.update(axis=self.axis)
        cfg.update(affine_config(self, _OPTIONS))
        cfg["rms_scaling"] = self.rms_scaling
        return cfg
