"""ZeroPadding3D, Cropping3D, UpSampling3D and SpatialDropout3D: Keras's layers over
volumes (batch, D, H, W, C), folded in the graph to (batch * D, H, W, C)
(pyggml._fold).  The depth axis is each sample's run of planes: it is padded,
cut and repeated as axis 1 of (batch, D, H * W * C).

With ``data_format="channels_first"`` a volume (batch, C, D, H, W) is folded to
(batch * C, D, H, W): its spatial axes are the fold's last three, padded, cut and
repeated as they are, and a channel of a sample is one row of the fold."""

from pyggml import _fold, _scope, ops
from pyggml._validation import int_tuple
from pyggml.layers._channels_first import data_format_of
from pyggml.layers._helpers import contiguous, fused
from pyggml.layers.convolutional.conv3d import depth_pad, depth_taps
from pyggml.layers.core.dropout import _SpatialDropout
from pyggml.layers.core.padding import crop, edged_shape, pairs_nd, zero_pad
from pyggml.layers.core.up_sampling import _gather, _nearest_rows
from pyggml.layers.layer import Layer
from pyggml.saving.object_registration import register_builtin

__all__ = ["ZeroPadding3D", "Cropping3D", "UpSampling3D", "SpatialDropout3D"]


def _check_5d(layer, input_shape):
    if len(input_shape) != 5:
        what = "(batch, C, D, H, W)" if layer.data_format == "channels_first" else "(batch, D, H, W, C)"
        raise ValueError(f"{type(layer).__name__} expects 5-D inputs {what} (data_format={layer.data_format!r}), "
                         f"got shape {tuple(input_shape)}")


def _spatial_axes(layer):
    """The axes D, H, W of the layer's (Keras) volumes."""
    return (2, 3, 4) if layer.data_format == "channels_first" else (1, 2, 3)


class _Edges3D(Layer):
    key = "padding"
    takes_5d = True

    def compute_output_shape(self, input_shape):
        _check_5d(self, input_shape)
        return edged_shape(self, input_shape, _spatial_axes(self), getattr(self, self.key))

    def call(self, inputs):
        shape = _fold.in_shape(self)
        self.compute_output_shape(shape)
        pairs = getattr(self, self.key)
        if self.data_format == "channels_first":
            # the fold (batch * C, D, H, W): its last three axes are the volume's
            edges = [(0, 0)] + list(pairs)
            return zero_pad(inputs, edges) if self.key == "padding" else crop(inputs, edges)
        n = _fold.batch_of(inputs, shape)
        (d0, d1), hp, wp = pairs
        edges = [(0, 0), hp, wp, (0, 0)]
        if self.key == "padding":
            return zero_pad(depth_pad(inputs, n, d0, d1), edges)
        x = depth_taps(inputs, n, d0, 1, shape[1] - d0 - d1)
        return crop(x, edges) if any(hp + wp) else x

    def get_config(self):
        c = super().get_config()
        c[self.key] = [list(p) for p in getattr(self, self.key)]
        c["data_format"] = self.data_format
        return c


@register_builtin
class ZeroPadding3D(_Edges3D):
    """``ZeroPadding3D(padding=(1, 1, 1))``: zero planes, rows and columns around each volume."""

    def __init__(self, padding=(1, 1, 1), data_format=None, **kwargs):
        super().__init__(**kwargs)
        self.data_format = data_format_of(data_format, "ZeroPadding3D")
        self.padding = pairs_nd(padding, "padding", "ZeroPadding3D", 3)


@register_builtin
class Cropping3D(_Edges3D):
    """``Cropping3D(cropping=((1, 1), (1, 1), (1, 1)))``: planes, rows and columns cut from the
    edges of each volume."""

    key = "cropping"

    def __init__(self, cropping=((1, 1), (1, 1), (1, 1)), data_format=None, **kwargs):
        super().__init__(**kwargs)
        self.data_format = data_format_of(data_format, "Cropping3D")
        self.cropping = pairs_nd(cropping, "cropping", "Cropping3D", 3)


def repeat_axis1(x, scale):
    """Nearest up-sampling of axis 1 of x (lead, size, inner): each entry ``scale`` times."""
    if scale == 1:
        return x
    lead, size, inner = x.shape
    if fused():
        return ops.upscale(contiguous(x), (1, scale, 1))
    y = _gather(ops.reshape(contiguous(x), (lead * size, inner)), _nearest_rows(lead, size, scale))
    return ops.reshape(y, (lead, size * scale, inner))


@register_builtin
class UpSampling3D(Layer):
    """``UpSampling3D(size=(2, 2, 2))``: each plane, row and column repeated (nearest)."""

    takes_5d = True

    def __init__(self, size=(2, 2, 2), data_format=None, **kwargs):
        super().__init__(**kwargs)
        self.data_format = data_format_of(data_format, "UpSampling3D")
        self.size = int_tuple("size", size, 3)

    def compute_output_shape(self, input_shape):
        _check_5d(self, input_shape)
        out = list(input_shape)
        for a, s in zip(_spatial_axes(self), self.size):
            out[a] = None if out[a] is None else out[a] * s
        return tuple(out)

    def call(self, inputs, training=None):
        shape = _fold.in_shape(self)
        self.compute_output_shape(shape)
        sd, sh, sw = self.size
        if self.data_format == "channels_first":
            # the fold (batch * C, D, H, W): columns, rows, then planes, each a run of one value
            nc, d, h, w = inputs.shape
            y = repeat_axis1(ops.reshape(contiguous(inputs), (nc * d * h, w, 1)), sw)
            y = repeat_axis1(ops.reshape(contiguous(y), (nc * d, h, w * sw)), sh)
            y = repeat_axis1(ops.reshape(contiguous(y), (nc, d, h * sh * w * sw)), sd)
            return ops.reshape(contiguous(y), (nc, d * sd, h * sh, w * sw))
        n = _fold.batch_of(inputs, shape)
        nd, h, w, c = inputs.shape
        y = repeat_axis1(ops.reshape(contiguous(inputs), (nd * h, w, c)), sw)            # columns
        y = repeat_axis1(ops.reshape(contiguous(y), (nd, h, w * sw * c)), sh)             # rows
        y = repeat_axis1(ops.reshape(contiguous(y), (n, nd // n, h * sh * w * sw * c)), sd)   # planes
        return ops.reshape(contiguous(y), (n * (nd // n) * sd, h * sh, w * sw, c))

    def get_config(self):
        c = super().get_config()
        c["size"] = list(self.size)
        c["data_format"] = self.data_format
        return c


@register_builtin
class SpatialDropout3D(_SpatialDropout):
    """``SpatialDropout3D(rate, data_format=None, seed=None)``: Dropout of whole channels of
    volumes, one mask per sample and channel."""

    rank = 5
    takes_5d = True

    def __init__(self, rate, data_format=None, seed=None, **kwargs):
        kwargs.pop("noise_shape", None)
        fmt = data_format_of(data_format, "SpatialDropout3D")
        super().__init__(rate, noise_shape=(None, 1, 1, None), seed=seed, **kwargs)
        self.data_format = fmt

    def build(self, input_shape):
        _check_5d(self, input_shape)

    def call(self, inputs, training=None):
        shape = _fold.in_shape(self)
        n = _fold.batch_of(inputs, shape)
        nd, h, w, c = inputs.shape
        if self.data_format == "channels_first":
            # the fold (batch * C, D, H, W): one row per sample and channel, its mask (batch * C, 1, 1, 1)
            return self._drop(inputs, training, per_row=True)
        # the planes of a sample in one run: (n, D * H, W, C), its mask (n, 1, 1, C)
        y = self._drop(ops.reshape(contiguous(inputs), (n, (nd // n) * h, w, c)), training)
        return ops.reshape(contiguous(y), (nd, h, w, c))

    def _drop(self, x, training, per_row=False):
        b = _scope.require("SpatialDropout3D")
        if training is None:
            training = b.training
        if not training or self.rate == 0:
            return x
        mask = (x.shape[0], 1, 1, 1) if per_row else (x.shape[0], 1, 1, x.shape[3])
        return ops.mul(contiguous(x), b.random_keep_mask(mask, self.rate))

    def get_config(self):
        c = super().get_config()
        c["data_format"] = self.data_format
        return c

