"""Adaptive pooling (Keras's ``AdaptiveAveragePooling1D/2D/3D`` and ``AdaptiveMaxPooling1D/2D/3D``,
PyTorch's ``AdaptiveAvgPool``/``AdaptiveMaxPool``): each spatial axis of length L is split
into ``output_size`` windows, window i covering [floor(i L / O), ceil((i + 1) L / O)), and
each window is averaged (or its maximum taken), whatever the input's size.

1-D and 2-D are ``pyggml.ops.adaptive_average_pool`` / ``adaptive_max_pool``.  3-D volumes
are folded in the graph to (batch * D, H, W, C) (pyggml._fold): the windows are separable
boxes, so each plane is pooled as an image, then the depths, each sample as a sequence of
D steps of OH * OW * C channels; channels-first volumes (batch, C, D, H, W) are moved
to channels-last and back (pyggml.layers._channels_first)."""

from pyggml import _fold, ops
from pyggml._validation import is_int
from pyggml.layers._channels_first import TransposesChannelsFirst, data_format_of
from pyggml.layers._helpers import contiguous
from pyggml.layers.layer import Layer
from pyggml.saving.object_registration import register_builtin

__all__ = ["AdaptiveAveragePooling1D", "AdaptiveAveragePooling2D", "AdaptiveAveragePooling3D",
           "AdaptiveMaxPooling1D", "AdaptiveMaxPooling2D", "AdaptiveMaxPooling3D"]


class _Adaptive(Layer):
    rank = 2
    op = "average"

    def __init__(self, output_size, data_format=None, **kwargs):
        super().__init__(**kwargs)
        name = type(self).__name__
        if is_int(output_size) and not isinstance(output_size, bool):
            size = (int(output_size),) * self.rank
        elif isinstance(output_size, (tuple, list)) and len(output_size) == self.rank and \
                all(is_int(o) and not isinstance(o, bool) for o in output_size):
            size = tuple(int(o) for o in output_size)
        else:
            raise TypeError(f"{name}: output_size must be an int or a tuple of {self.rank} ints, got "
                            f"{output_size!r}")
        if any(o < 1 for o in size):
            raise ValueError(f"{name}: output_size must be positive, got {output_size!r}")
        self.output_size = size
        if data_format is None:
            from pyggml import backend
            data_format = backend.image_data_format()
        self.data_format = data_format_of(data_format, name)

    def _check_rank(self, input_shape):
        if len(input_shape) != self.rank + 2:
            raise ValueError(f"{type(self).__name__} expects inputs of {self.rank + 2} dims (batch, "
                             f"{'spatial, ' * self.rank}channels), got shape {tuple(input_shape)}")

    def compute_output_shape(self, input_shape):
        self._check_rank(input_shape)
        if self.data_format == "channels_last":
            return (input_shape[0],) + self.output_size + (input_shape[-1],)
        return (input_shape[0], input_shape[1]) + self.output_size

    def _pool(self, x, size, data_format):
        fn = ops.adaptive_average_pool if self.op == "average" else ops.adaptive_max_pool
        return fn(x, size, data_format=data_format)

    def call(self, inputs, training=None):
        return self._pool(inputs, self.output_size, self.data_format)

    def get_config(self):
        c = super().get_config()
        c.update(output_size=self.output_size, data_format=self.data_format)
        return c


class _Adaptive3D(TransposesChannelsFirst, _Adaptive):
    rank = 3
    takes_5d = True

    def compute_output_shape(self, input_shape):
        # channels-last (a channels-first layer's shapes are transposed around it)
        if len(input_shape) != 5:
            raise ValueError(f"{type(self).__name__} expects 5-D inputs, (batch, D, H, W, C) (channels_first: "
                             f"(batch, C, D, H, W)), got {len(input_shape)}-D ones")
        return (input_shape[0],) + self.output_size + (input_shape[-1],)

    def call(self, inputs, training=None):
        if len(inputs.shape) == 5:                  # on arrays (a call outside a model's graph)
            n, d, h, w, c = (int(s) for s in inputs.shape)
            folded = ops.reshape(inputs, (n * d, h, w, c))
        else:
            shape = _fold.in_shape(self)
            n, d = _fold.batch_of(inputs, shape), shape[1]
            folded = inputs
            _, h, w, c = (int(s) for s in inputs.shape)
        od, oh, ow = self.output_size
        y = self._pool(contiguous(folded), (oh, ow), "channels_last")            # each plane
        y = self._pool(ops.reshape(contiguous(y), (n, d, oh * ow * c)), od, "channels_last")   # the depths
        if len(inputs.shape) == 5:
            return ops.reshape(y, (n, od, oh, ow, c))
        return ops.reshape(contiguous(y), (n * od, oh, ow, c))


@register_builtin
class AdaptiveAveragePooling1D(_Adaptive):
    rank = 1


@register_builtin
class AdaptiveAveragePooling2D(_Adaptive):
    rank = 2


@register_builtin
class AdaptiveAveragePooling3D(_Adaptive3D):
    pass


@register_builtin
class AdaptiveMaxPooling1D(_Adaptive):
    rank = 1
    op = "max"


@register_builtin
class AdaptiveMaxPooling2D(_Adaptive):
    rank = 2
    op = "max"


@register_builtin
class AdaptiveMaxPooling3D(_Adaptive3D):
    op = "max"
