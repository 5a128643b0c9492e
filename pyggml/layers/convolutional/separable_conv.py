"""SeparableConv1D and SeparableConv2D: a depthwise convolution (each input channel
with its own ``depth_multiplier`` kernels, no bias) then a pointwise (1x1)
convolution to ``filters`` channels, then the bias and the activation.

The depthwise step is depthwise_conv.depthwise_rows (its rows (N * OH * OW, C * M));
the pointwise step is one matmul of those rows with the pointwise kernel.

PyTorch has no module of this kind: the weights keep Keras's names and shapes, so
Keras's weights set as they are: ``depthwise_kernel`` (kh, kw, C, M) (1-D: (k, C, M)),
``pointwise_kernel`` (1, 1, C * M, filters) (1-D: (1, C * M, filters)), ``bias``
(filters,).
"""

from pyggml import ops
from pyggml._validation import check_positive_int
from pyggml.layers._helpers import cached, set_weight_options, weight_options_config
from pyggml.layers.convolutional.depthwise_conv import BaseDepthwise, drawn_with_fans, rows_to_output
from pyggml.saving.object_registration import register_builtin

__all__ = ["SeparableConv1D", "SeparableConv2D"]


class _SeparableConv(BaseDepthwise):
    def __init__(self, filters, kernel_size, strides=1, padding="valid", data_format=None, dilation_rate=1,
                 depth_multiplier=1, activation=None, use_bias=True, depthwise_initializer="glorot_uniform",
                 pointwise_initializer="glorot_uniform", bias_initializer="zeros", depthwise_regularizer=None,
                 pointwise_regularizer=None, bias_regularizer=None, depthwise_constraint=None,
                 pointwise_constraint=None, bias_constraint=None, **kwargs):
        super().__init__(kernel_size, strides, padding, depth_multiplier, data_format, dilation_rate, activation,
                         use_bias, depthwise_initializer, bias_initializer, depthwise_regularizer,
                         bias_regularizer, depthwise_constraint, bias_constraint, **kwargs)
        name = type(self).__name__
        self.filters = check_positive_int(f"{name}: filters", filters, 1 << 20)
        set_weight_options(self, pointwise_regularizer=pointwise_regularizer,
                           pointwise_constraint=pointwise_constraint)
        from pyggml import initializers
        try:
            initializers.get(pointwise_initializer)
        except ValueError as e:
            raise ValueError(f"{name}: pointwise_initializer: {e}") from None
        self.pointwise_initializer = pointwise_initializer

    def compute_output_shape(self, input_shape):
        return self.output_shape_for(input_shape, self.filters)

    def build(self, input_shape):
        c, _ = self.split_shape(input_shape)
        self.compute_output_shape(input_shape)
        self.in_channels = c
        m, k = self.depth_multiplier, self.kernel_size
        ones = (1,) * self.rank
        # Keras's fans: depthwise (*k, C, M): in C * k, out M * k; pointwise (1.., C * M, F): in C * M, out F
        self.depthwise_kernel = self.add_weight(
            "depthwise_kernel", k + (c, m), drawn_with_fans(self.depthwise_initializer, (m, c) + k),
            regularizer=self.depthwise_regularizer, constraint=self.depthwise_constraint)
        self.pointwise_kernel = self.add_weight(
            "pointwise_kernel", ones + (c * m, self.filters),
            drawn_with_fans(self.pointwise_initializer, (self.filters, c * m) + ones),
            regularizer=self.pointwise_regularizer, constraint=self.pointwise_constraint)
        self.bias = self.add_weight("bias", (self.filters,), self.bias_initializer,
                                    regularizer=self.bias_regularizer,
                                    constraint=self.bias_constraint) if self.use_bias else None

    def depthwise_kernel_cmk(self):
        taps = 1
        for k in self.kernel_size:
            taps *= k
        c, m = self.in_channels, self.depth_multiplier

        def make():
            flat = ops.reshape(self.depthwise_kernel, (taps, c, m))
            return ops.permute_axes(flat, (1, 2, 0))                 # (C, M, taps)
        return cached("depthwise_cmk", self.depthwise_kernel, make)

    def pre_activation(self, inputs, training=None):
        rows, out = self.depthwise(inputs)
        cm = self.in_channels * self.depth_multiplier
        y = ops.matmul(rows, ops.reshape(self.pointwise_kernel, (cm, self.filters)))   # (N * OH * OW, filters)
        if self.use_bias:
            y = ops.add(y, self.bias)
        return rows_to_output(y, inputs.shape[0], out, self.filters, self.channels_first)

    def get_config(self):
        cfg = self.geometry_config()
        cfg["filters"] = self.filters
        cfg.update(self.initializers_config(("depthwise_initializer", "pointwise_initializer", "bias_initializer")))
        cfg.update(weight_options_config(self, ("depthwise_regularizer", "pointwise_regularizer", "bias_regularizer",
                                                "depthwise_constraint", "pointwise_constraint", "bias_constraint")))
        return cfg


@register_builtin
class SeparableConv2D(_SeparableConv):
    """Depthwise separable 2-D convolution over (H, W, C) images (or (C, H, W) with
    ``data_format="channels_first"``)."""

    rank = 2

    def __init__(self, filters, kernel_size, strides=(1, 1), padding="valid", data_format=None,
                 dilation_rate=(1, 1), depth_multiplier=1, activation=None, use_bias=True,
                 depthwise_initializer="glorot_uniform", pointwise_initializer="glorot_uniform",
                 bias_initializer="zeros", depthwise_regularizer=None, pointwise_regularizer=None,
                 bias_regularizer=None, depthwise_constraint=None, pointwise_constraint=None, bias_constraint=None,
                 **kwargs):
        super().__init__(filters, kernel_size, strides, padding, data_format, dilation_rate, depth_multiplier,
                         activation, use_bias, depthwise_initializer, pointwise_initializer, bias_initializer,
                         depthwise_regularizer, pointwise_regularizer, bias_regularizer, depthwise_constraint,
                         pointwise_constraint, bias_constraint, **kwargs)


@register_builtin
class SeparableConv1D(_SeparableConv):
    """Depthwise separable 1-D convolution over (steps, channels) (or (channels, steps)
    with ``data_format="channels_first"``)."""

    rank = 1
