"""MaxPooling3D, AveragePooling3D, GlobalAveragePooling3D and GlobalMaxPooling3D over
volumes (batch, D, H, W, C), folded in the graph to (batch * D, H, W, C)
(pyggml._fold).

A box window is separable: its maximum is the maximum over the depth window of
each plane's (H, W) maxima, and an average over its real cells (Keras's "same")
is the average over the depth window of the planes' averages, each window's
real cells being the product of its real lengths along the axes.  So the
layers pool each plane as an image, then the depths: each sample as an image
of height D, width 1 and H'W'C channels.

``data_format="channels_first"`` volumes (batch, C, D, H, W) are moved to channels-last
and back (pyggml.layers._channels_first).
"""

from pyggml import _fold, ops
from pyggml.layers._helpers import contiguous
from pyggml.layers.pooling.base_pooling import BasePooling, pool_images
from pyggml.layers.pooling.global_pooling import GlobalAveragePooling2D, GlobalMaxPooling2D
from pyggml.saving.object_registration import register_builtin

__all__ = ["MaxPooling3D", "AveragePooling3D", "GlobalAveragePooling3D", "GlobalMaxPooling3D"]


class _Pooling3D(BasePooling):
    rank = 3
    op = "max"
    takes_5d = True

    def __init__(self, pool_size=(2, 2, 2), strides=None, padding="valid", data_format=None, **kwargs):
        super().__init__(pool_size, strides, padding, data_format, **kwargs)

    def compute_output_shape(self, input_shape):
        if len(input_shape) != 5:
            raise ValueError(f"{type(self).__name__} expects 5-D inputs, (batch, D, H, W, C) (channels_first: "
                             f"(batch, C, D, H, W)), got {len(input_shape)}-D ones")
        return (input_shape[0],) + self.spatial_out(input_shape[1:4]) + (input_shape[4],)

    def call(self, inputs, training=None):
        shape = _fold.in_shape(self)
        n = _fold.batch_of(inputs, shape)
        d = shape[1]
        _, h, w, c = inputs.shape
        od, oh, ow = self.spatial_out((d, h, w))
        (kd, kh, kw), (sd, sh, sw) = self.pool_size, self.strides
        y = inputs
        if (kh, kw, sh, sw) != (1, 1, 1, 1):
            y = pool_images(contiguous(y), self.op, (kh, kw), (sh, sw), self.padding)
        if (kd, sd) != (1, 1):
            # each sample's depths as an image of height D, width 1, channels OH * OW * C
            y = ops.reshape(contiguous(y), (n, d, 1, oh * ow * c))
            y = pool_images(y, self.op, (kd, 1), (sd, 1), self.padding)
        return ops.reshape(contiguous(y), (n * od, oh, ow, c))


@register_builtin
class MaxPooling3D(_Pooling3D):
    op = "max"


@register_builtin
class AveragePooling3D(_Pooling3D):
    """Average over each window; with padding="same" over the window's real cells, as Keras."""
    op = "avg"


class _Global3D:
    """The 2-D global pooling over (batch, D * H, W, C): the same cells per sample."""

    takes_5d = True

    def compute_output_shape(self, input_shape):
        if len(input_shape) != 5:
            raise ValueError(f"{type(self).__name__} expects 5-D inputs, (batch, D, H, W, C) (channels_first: "
                             f"(batch, C, D, H, W)), got {len(input_shape)}-D ones")
        c = input_shape[-1]
        return (input_shape[0], 1, 1, 1, c) if self.keepdims else (input_shape[0], c)

    def call(self, inputs, training=None):
        shape = _fold.in_shape(self)
        n = _fold.batch_of(inputs, shape)
        nd, h, w, c = inputs.shape
        y = self.pool(ops.reshape(contiguous(inputs), (n, (nd // n) * h, w, c)))
        # keepdims: (batch, 1, 1, 1, C) folds to (batch, 1, 1, C)
        return ops.reshape(y, (n, 1, 1, c) if self.keepdims else (n, c))


@register_builtin
class GlobalAveragePooling3D(_Global3D, GlobalAveragePooling2D):
    pass


@register_builtin
class GlobalMaxPooling3D(_Global3D, GlobalMaxPooling2D):
    pass
