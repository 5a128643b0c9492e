"""GroupNormalization (Keras's): the channels of ``axis`` split into ``groups``
groups; each sample's values of one group (its channels at every position)
are normalised to mean 0 and variance 1 (the biased variance, plus
``epsilon``), then scaled by gamma ("weight") and shifted by beta ("bias"),
one per channel.  ``groups=-1`` makes one group per channel (instance
normalisation); ``groups=1`` one group for all (PyTorch's GroupNorm(1, C)).

Equal to ``torch.nn.GroupNorm(groups, C, eps=epsilon)`` on the channels moved
to dim 1.  On the CPU the normalisation is ggml's norm over each group's rows
(pyggml's patches give it a backward pass); elsewhere it is composed from sums.
"""

import numpy as np

from pyggml import ops
from pyggml._validation import check_int, is_int
from pyggml.core import ops as core_ops
from pyggml.layers._helpers import contiguous, fused
from pyggml.layers.layer import Layer
from pyggml.layers.normalization._moments import affine_config, mean_rows, rsqrt, set_affine_options
from pyggml.saving.object_registration import register_builtin

__all__ = ["GroupNormalization"]

_OPTIONS = ("beta_regularizer", "gamma_regularizer", "beta_constraint", "gamma_constraint")


@register_builtin
class GroupNormalization(Layer):
    """``GroupNormalization(groups=32, axis=-1, epsilon=1e-3, center=True, scale=True,
    beta_initializer="zeros", gamma_initializer="ones", beta_regularizer=None,
    gamma_regularizer=None, beta_constraint=None, gamma_constraint=None)``."""

    supports_masking = True

    @property
    def build_shape_rule(self):
        # weights on the last axis: a later call may have other lengths (Layer._fits_built)
        return "last" if self.axis in (-1, [-1]) else None

    def __init__(self, groups=32, axis=-1, epsilon=1e-3, center=True, scale=True, beta_initializer="zeros",
                 gamma_initializer="ones", beta_regularizer=None, gamma_regularizer=None, beta_constraint=None,
                 gamma_constraint=None, **kwargs):
        super().__init__(**kwargs)
        if isinstance(groups, bool) or not is_int(groups):
            raise ValueError(f"GroupNormalization: groups must be an int (a positive number of groups, or -1), "
                             f"got {groups!r}")           # Keras's ValueError
        self.groups = check_int("groups", groups, -1, 1 << 20)
        if self.groups == 0:
            raise ValueError("GroupNormalization: groups must be a positive number of groups, or -1 for one "
                             "group per channel; got 0")
        if isinstance(axis, (list, tuple)) and len(axis) == 1:
            axis = axis[0]
        self.axis = check_int("axis", axis)
        if self.axis == 0:
            raise ValueError("GroupNormalization: axis 0 is the batch; give the channels' axis (e.g. -1)")
        set_affine_options(self, epsilon, center, scale, beta_initializer, gamma_initializer,
                           beta_regularizer=beta_regularizer, gamma_regularizer=gamma_regularizer,
                           beta_constraint=beta_constraint, gamma_constraint=gamma_constraint)

    def _channel_axis(self, shape):
        r = len(shape)
        ax = self.axis + r if self.axis < 0 else self.axis
        if not 1 <= ax < r:
            raise ValueError(f"GroupNormalization: axis {self.axis} is out of range for inputs of shape "
                             f"{tuple(shape)} (the batch included)")
        return ax

    def _groups_for(self, shape):
        ax = self._channel_axis(shape)
        dim = shape[ax]
        if dim is None:
            raise ValueError(f"GroupNormalization: axis {self.axis} of the input should have a defined dimension, "
                             f"got an input of shape {tuple(shape)}")
        groups = dim if self.groups == -1 else self.groups
        if groups > dim:
            raise ValueError(f"GroupNormalization: the number of groups ({groups}) cannot be more than the number "
                             f"of channels ({dim})")
        if dim % groups:
            raise ValueError(f"GroupNormalization: the number of channels ({dim}) must be a multiple of the "
                             f"number of groups ({groups})")
        return ax, dim, groups

    def compute_output_shape(self, input_shape):
        return input_shape

    # Keras's names for these weights (the same Variables)
    gamma = property(lambda self: self.weight, doc="Keras's gamma: the weight Variable.")
    beta = property(lambda self: self.bias, doc="Keras's beta: the bias Variable.")

    def build(self, input_shape):
        if isinstance(input_shape, list):
            raise ValueError("GroupNormalization takes one input")
        _, dim, _ = self._groups_for(tuple(input_shape))
        self.weight = self.add_weight("weight", (dim,), self.gamma_initializer, regularizer=self.gamma_regularizer,
                                      constraint=self.gamma_constraint) if self.scale else None
        self.bias = self.add_weight("bias", (dim,), self.beta_initializer, regularizer=self.beta_regularizer,
                                    constraint=self.beta_constraint) if self.center else None

    def _normalize_rows(self, rows):
        if fused():
            return core_ops.norm(rows, self.epsilon)
        xc = ops.sub(rows, ops.repeat(mean_rows(rows), rows))
        return ops.mul(xc, rsqrt(mean_rows(ops.sqr(xc)), self.epsilon))

    def call(self, inputs, training=None):
        x = contiguous(inputs)
        shape = tuple(x.shape)
        ax, dim, groups = self._groups_for(shape)
        r = len(shape)
        # the channels last: (batch, positions..., channels)
        order = [i for i in range(r) if i != ax] + [ax]
        x = ops.permute_axes(x, order)
        moved = tuple(x.shape)
        b, per = moved[0], dim // groups
        positions = int(np.prod(moved[1:-1])) if r > 2 else 1
        # (b, positions, groups, per) -> (b, groups, positions, per): one row per sample and group
        g = ops.permute_axes(ops.reshape(x, (b, positions, groups, per)), (0, 2, 1, 3))
        y = self._normalize_rows(ops.reshape(g, (b * groups, positions * per)))
        y = ops.permute_axes(ops.reshape(y, (b, groups, positions, per)), (0, 2, 1, 3))
        y = ops.reshape(contiguous(y), moved)
        if self.scale:
            y = ops.mul(y, self.weight)
        if self.center:
            y = ops.add(y, self.bias)
        return ops.permute_axes(y, tuple(int(i) for i in np.argsort(order)))

    def get_config(self):
        cfg = super().get_config()
        cfg.update(groups=self.groups, axis=self.axis)
        cfg.update(affine_config(self, _OPTIONS))
        return cfg
