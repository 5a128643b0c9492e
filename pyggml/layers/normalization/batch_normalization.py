"""BatchNormalization: normalise each channel (the last axis, or ``axis``) by the
batch's statistics while training and by the running ones at inference.

Another axis than the last (``axis=1`` for channels-first data) is moved last
for the normalisation and back after it.

The running statistics move inside the training graph, after each step:
``running = momentum * running + (1 - momentum) * batch statistic`` (Keras's
moving averages; the variance is the biased batch variance, as Keras).

On the CPU, training mode is pyggml's ``batch_norm`` op (one pass forward, one
backward), which writes the batch's mean and variance into a (2, C) side
tensor of its own each time the graph runs; the running-statistics updates
read that tensor.  They are built into the training graph by the executor
after the whole backward pass (``add_update``), so they come after the
batch_norm node in the graph's order, which is the order the CPU backend
computes its nodes in (one backend: the scheduler keeps the order; the test
of the running statistics fails if they read the tensor before the op has
written it).  Inference mode is ``bias_act(x * scale, shift)`` with
``scale = gamma / sqrt(running_var + eps)`` and
``shift = beta - running_mean * scale`` (tiny per-channel ops).

``center=False`` drops beta (the weight "bias"), ``scale=False`` gamma ("weight"),
as Keras makes no such weight then."""

import numpy as np

from pyggml import _fold, _scope, initializers, ops
from pyggml._validation import check_bool, check_fraction, check_number
from pyggml.core import ops as core_ops
from pyggml.layers._helpers import contiguous, fused, set_weight_options, weight_options_config
from pyggml.layers.layer import Layer
from pyggml.layers.normalization._moments import mean_rows, rsqrt
from pyggml.saving.object_registration import register_builtin
from pyggml.initializers import config_value as _init_config

__all__ = ["BatchNormalization"]

_OPTIONS = ("beta_regularizer", "gamma_regularizer", "beta_constraint", "gamma_constraint")
_INITIALIZERS = ("beta_initializer", "gamma_initializer", "moving_mean_initializer", "moving_variance_initializer")


@register_builtin
class BatchNormalization(Layer):
    supports_masking = True

    @property
    def build_shape_rule(self):
        # weights on the last axis: a later call may have other lengths (Layer._fits_built)
        return "last" if self.axis in (-1, [-1]) else None

    def __init__(self, axis=-1, momentum=0.99, epsilon=1e-3, center=True, scale=True, beta_initializer="zeros",
                 gamma_initializer="ones", moving_mean_initializer="zeros", moving_variance_initializer="ones",
                 beta_regularizer=None, gamma_regularizer=None, beta_constraint=None, gamma_constraint=None,
                 synchronized=False, renorm=False, renorm_clipping=None, renorm_momentum=0.99, **kwargs):
        super().__init__(**kwargs)
        # Keras's: synchronized statistics across devices (one device here: the batch's own, the same);
        # batch renormalization is not computed, so only its defaults are taken
        self.synchronized = check_bool("synchronized", synchronized)
        if renorm is not False or renorm_clipping is not None:
            raise ValueError("BatchNormalization: batch renormalization (renorm=True, renorm_clipping) is not "
                             "computed by pyggml; use renorm=False (Keras's default)")
        self.renorm, self.renorm_clipping = False, None
        self.renorm_momentum = check_fraction("renorm_momentum", renorm_momentum)
        if isinstance(axis, (list, tuple)) and len(axis) == 1:
            axis = axis[0]
        if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)) or axis == 0:
            raise ValueError(f"BatchNormalization: axis must be the int index of the channels' axis (not the "
                             f"batch's, 0), got {axis!r}")
        self.axis = int(axis)            # checked against the inputs' rank in build
        self.momentum = check_fraction("momentum", momentum)
        self.epsilon = check_number("epsilon", epsilon, 0.0, low_open=True)
        self.center = check_bool("center", center)
        self.scale = check_bool("scale", scale)
        for k, init in zip(_INITIALIZERS, (beta_initializer, gamma_initializer, moving_mean_initializer,
                                           moving_variance_initializer)):
            initializers.get(init)              # unknown names fail here, not at compile
            setattr(self, k, init)
        set_weight_options(self, beta_regularizer=beta_regularizer, gamma_regularizer=gamma_regularizer,
                           beta_constraint=beta_constraint, gamma_constraint=gamma_constraint)

    def compute_output_shape(self, input_shape):
        return input_shape

    # Keras's names for these weights (the same Variables)
    gamma = property(lambda self: self.weight, doc="Keras's gamma: the weight Variable.")
    beta = property(lambda self: self.bias, doc="Keras's beta: the bias Variable.")
    moving_mean = property(lambda self: self.running_mean, doc="Keras's moving_mean: the running_mean Variable.")
    moving_variance = property(lambda self: self.running_var, doc="Keras's moving_variance: the running_var Variable.")

    def takes_5d(self, shapes):
        """volumes are normalised over their channels (the last axis) only (pyggml._fold)."""
        return self.axis in (-1, len(shapes[0]) - 1)

    def _channel_axis(self, rank, shape=None):
        """The channels' axis as a positive index for inputs of this rank (a folded volume's
        axis is its Keras shape's: the last, as takes_5d asked)."""
        keras_shape = _fold.in_shape(self) if _fold.active() else None
        if keras_shape is not None and _fold.folds(keras_shape) and self.axis == len(keras_shape) - 1:
            return rank - 1
        a = self.axis + rank if self.axis < 0 else self.axis
        if not 1 <= a < rank:
            raise ValueError(f"BatchNormalization: axis={self.axis} is not a channels' axis of inputs of shape "
                             f"{tuple(shape) if shape is not None else rank} (1 to {rank - 1}, or -1 to "
                             f"{1 - rank})")
        return a

    def build(self, input_shape):
        c = input_shape[self._channel_axis(len(input_shape), input_shape)]
        if c is None:
            raise ValueError(f"BatchNormalization: the channels' axis {self.axis} of inputs of shape "
                             f"{tuple(input_shape)} must have a known length")
        self.weight = self.add_weight("weight", (c,), self.gamma_initializer, regularizer=self.gamma_regularizer,
                                      constraint=self.gamma_constraint) if self.scale else None
        self.bias = self.add_weight("bias", (c,), self.beta_initializer, regularizer=self.beta_regularizer,
                                    constraint=self.beta_constraint) if self.center else None
        self.running_mean = self.add_weight("running_mean", (c,), self.moving_mean_initializer, trainable=False)
        self.running_var = self.add_weight("running_var", (c,), self.moving_variance_initializer, trainable=False)

    def _gamma_beta(self, c):
        """gamma and beta as tensors: the weights, or ones and zeros without them."""
        gamma = self.weight.graph_tensor() if self.scale else ops.constant(np.ones(c, dtype=np.float32))
        beta = self.bias.graph_tensor() if self.center else ops.constant(np.zeros(c, dtype=np.float32))
        return gamma, beta

    def call(self, inputs, training=None, mask=None):
        # Keras 3: a frozen BatchNormalization runs in inference mode (its moving statistics, never
        # updated), also in training (a frozen base model in transfer learning)
        training = bool(training) and self.trainable
        rank = len(inputs.shape)
        a = self._channel_axis(rank, inputs.shape)
        if mask is not None:
            mask = self._weights_of(mask, inputs) if training else None
        if a != rank - 1:
            mask = None if mask is None else ops.moveaxis(mask, a, -1)
            return ops.moveaxis(self._normalise(ops.moveaxis(inputs, a, -1), training, mask), -1, a)
        return self._normalise(inputs, training, mask)

    @staticmethod
    def _weights_of(mask, inputs):
        """A padding mask (the inputs' shape less the last axis; 1 for a real step) as the
        float weights of the inputs' entries in the batch statistics, shaped as the inputs."""
        m = ops.as_tensor(mask)
        want = tuple(inputs.shape[:-1])
        if tuple(m.shape) != want:
            raise ValueError(f"BatchNormalization: the mask must have the inputs' shape less the last axis, "
                             f"{want} for inputs of shape {tuple(inputs.shape)}, got {tuple(m.shape)}")
        return ops.repeat(ops.reshape(ops.cast(m, "float32") if m.dtype != "float32" else m, want + (1,)),
                          inputs)

    def _normalise(self, inputs, training, weights=None):
        if fused() and weights is None:
            return self.fused_call(inputs, training)
        shape = inputs.shape
        c = shape[-1]
        m = inputs.nelements // c
        x2 = ops.reshape(contiguous(inputs), (m, c))                    # ggml [C, M]
        if training and weights is not None:
            # Keras's masked moments: the steps the mask leaves out count for nothing in the
            # batch's mean and variance (so neither in the output nor in the moving statistics)
            w2 = ops.reshape(contiguous(weights), (m, c))
            count = ops.scale_bias(ops.sum_rows(ops.cont(core_ops.transpose(w2))), 1.0, 1e-7)    # (C, 1)
            mean = ops.reshape(ops.div(ops.sum_rows(ops.cont(core_ops.transpose(ops.mul(x2, w2)))), count), (1, c))
            xc = ops.sub(x2, ops.repeat(mean, x2))
            sq = ops.sum_rows(ops.cont(core_ops.transpose(ops.mul(ops.sqr(xc), w2))))
            var = ops.reshape(ops.div(sq, count), (1, c))
        elif training:
            xt = ops.cont(core_ops.transpose(x2))                            # ggml [M, C]
            mean = ops.reshape(mean_rows(xt), (1, c))
            xc = ops.sub(x2, ops.repeat(mean, x2))                      # sub trains only with equal shapes
            var = ops.reshape(mean_rows(ops.cont(core_ops.transpose(ops.sqr(xc)))), (1, c))
        if training:
            y = ops.mul(xc, rsqrt(var, self.epsilon))
            b = _scope.require("BatchNormalization")
            mom = self.momentum
            for stat, batch in ((self.running_mean, mean), (self.running_var, var)):
                moved = ops.add(ops.scale(stat.graph_tensor(), mom), ops.scale(ops.reshape(batch, (c,)), 1.0 - mom))
                b.add_update(stat, moved)
        else:
            xc = ops.sub(x2, self.running_mean)
            y = ops.mul(xc, rsqrt(self.running_var.graph_tensor(), self.epsilon))
        if self.scale:
            y = ops.mul(y, self.weight)
        if self.center:
            y = ops.add(y, self.bias)
        return ops.reshape(y, tuple(shape))

    def fused_call(self, inputs, training):
        x = contiguous(inputs)
        c = x.shape[-1]
        if training:
            b = _scope.require("BatchNormalization")
            # the op's side tensor (mean; var), memory of its own: a constant the op overwrites
            stats = ops.constant(np.zeros((2, c), dtype=np.float32))
            gamma, beta = self._gamma_beta(c)
            y = ops.batch_norm(x, gamma, beta, stats, self.epsilon)
            mom = self.momentum
            for row, stat in enumerate((self.running_mean, self.running_var)):
                batch = ops.view(stats, (c,), offset=row * c * 4)
                b.add_update(stat, ops.add(ops.scale(stat.graph_tensor(), mom), ops.scale(batch, 1.0 - mom)))
            return y
        inv = rsqrt(self.running_var.graph_tensor(), self.epsilon)
        scale = ops.mul(self.weight, inv) if self.scale else inv
        moved = ops.mul(self.running_mean.graph_tensor(), scale)
        shift = ops.sub(self.bias.graph_tensor(), moved) if self.center else ops.neg(moved)
        return ops.bias_act(ops.mul(x, scale), shift)

    def get_config(self):
        cfg = super().get_config()
        cfg.update(axis=self.axis, momentum=self.momentum, epsilon=self.epsilon, center=self.center, scale=self.scale,
                   synchronized=self.synchronized, renorm=self.renorm, renorm_clipping=self.renorm_clipping,
                   renorm_momentum=self.renorm_momentum)
        for k in _INITIALIZERS:
            if _init_config(getattr(self, k)) is not None:      # a name or an Initializer instance
                cfg[k] = _init_config(getattr(self, k))
        cfg.update(weight_options_config(self, _OPTIONS))
        return cfg
