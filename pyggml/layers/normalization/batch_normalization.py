"""BatchNormalization: normalise each channel (the last axis) by the batch's
statistics while training and by the running ones at inference.

The running statistics move inside the training graph, after each step:
``running = momentum * running + (1 - momentum) * batch statistic`` (Keras's
moving averages; the variance is the biased batch variance, as Keras)."""

from pyggml import _scope, ops
from pyggml._validation import check_fraction, check_number
from pyggml.layers._helpers import contiguous
from pyggml.layers.layer import Layer
from pyggml.layers.normalization._moments import mean_rows, rsqrt
from pyggml.saving.object_registration import register_builtin

__all__ = ["BatchNormalization"]


@register_builtin
class BatchNormalization(Layer):
    supports_masking = True

    def __init__(self, axis=-1, momentum=0.99, epsilon=1e-3, center=True, scale=True, **kwargs):
        super().__init__(**kwargs)
        if axis != -1:
            raise ValueError("BatchNormalization normalises the last axis (axis=-1)")
        if not center or not scale:
            raise ValueError("BatchNormalization: center=False / scale=False are not supported")
        self.axis = -1
        self.momentum = check_fraction("momentum", momentum)
        self.epsilon = check_number("epsilon", epsilon, 0.0, low_open=True)

    def compute_output_shape(self, input_shape):
        return input_shape

    def build(self, input_shape):
        c = input_shape[-1]
        self.weight = self.add_weight("weight", (c,), "ones")
        self.bias = self.add_weight("bias", (c,), "zeros")
        self.running_mean = self.add_weight("running_mean", (c,), "zeros", trainable=False)
        self.running_var = self.add_weight("running_var", (c,), "ones", trainable=False)

    def call(self, inputs, training=None):
        shape = inputs.shape
        c = shape[-1]
        m = inputs.nelements // c
        x2 = ops.reshape(contiguous(inputs), (m, c))                    # ggml [C, M]
        if training:
            xt = ops.cont(ops.transpose(x2))                            # ggml [M, C]
            mean = ops.reshape(mean_rows(xt), (1, c))
            xc = ops.sub(x2, ops.repeat(mean, x2))                      # sub trains only with equal shapes
            var = ops.reshape(mean_rows(ops.cont(ops.transpose(ops.sqr(xc)))), (1, c))
            y = ops.mul(xc, rsqrt(var, self.epsilon))
            b = _scope.require("BatchNormalization")
            mom = self.momentum
            for stat, batch in ((self.running_mean, mean), (self.running_var, var)):
                moved = ops.add(ops.scale(stat.graph_tensor(), mom), ops.scale(ops.reshape(batch, (c,)), 1.0 - mom))
                b.add_update(stat, moved)
        else:
            xc = ops.sub(x2, self.running_mean)
            y = ops.mul(xc, rsqrt(self.running_var.graph_tensor(), self.epsilon))
        y = ops.add(ops.mul(y, self.weight), self.bias)
        return ops.reshape(y, tuple(shape))

    def get_config(self):
        cfg = super().get_config()
        cfg.update(axis=self.axis, momentum=self.momentum, epsilon=self.epsilon)
        return cfg
