"""STFTSpectrogram (Keras's layer): the short-time Fourier transform of 1-D
signals as a strided convolution in the graph.

Inputs ``(batch, time, channels)`` (``channels_first``: ``(batch, channels,
time)``); each channel is framed on its own: ``frame_length`` samples every
``frame_step`` (``padding="same"``: zero-padded as a "same" convolution), and
each frame multiplied by two kernels of shape ``(frame_length, 1, fft_length //
2 + 1)``, ``real_kernel = cos(-2 pi t f / fft_length) w(t) / s`` and
``imag_kernel = sin(...) w(t) / s``: the window ``w`` (``periodic`` or
symmetric hann/hamming, an array, or None) and ``s`` its L2 norm
(``scaling="density"``), its sum (``"spectrum"``) or 1 (None).  The kernels are
weights (trainable, as Keras's: pass ``trainable=False`` for a fixed
transform).

``mode``: "real", "imag", "stft" (real then imaginary parts along the
frequency axis), "magnitude" ``sqrt(max(power, 1e-7))``, "log" (its log, at
least log 1e-7), "psd" (the power, the bins other than the first and the last
doubled) or "angle" (``atan2(imag, real)``, computed from ggml's ops by a
polynomial arctangent accurate to about 1e-6 rad).

Output: ``(batch, frames, channels * bins)`` (a channel's bins together),
with ``expand_dims`` ``(batch, frames, bins, channels)``; channels_first
``(batch, channels * bins, frames)`` and ``(batch, channels, frames, bins)``.
"""

import math

import numpy as np

from pyggml import _scope, ops
from pyggml._validation import check_bool, check_choice, check_positive_int
from pyggml.layers._helpers import contiguous
from pyggml.layers.convolutional.base_conv import pad_nchw, same_pads
from pyggml.layers.layer import Layer
from pyggml._windows import stft_kernels
from pyggml.layers.preprocessing import _audio
from pyggml.layers.preprocessing.image_layer import check_data_format
from pyggml.saving.object_registration import register_builtin

__all__ = ["STFTSpectrogram", "stft_kernels"]

MODES = ("log", "magnitude", "psd", "real", "imag", "angle", "stft")
_EPSILON = 1e-7                          # Keras's backend.epsilon()


def _atan_coefficients():
    """Odd polynomial p(z) ~ atan(z) on [0, 1] (least squares on Chebyshev points, degree 19)."""
    z = np.cos(np.pi * (np.arange(400) + 0.5) / 800)          # in (0, 1]
    powers = np.stack([z ** (2 * k + 1) for k in range(10)], axis=1)
    coef, *_ = np.linalg.lstsq(powers, np.arctan(z), rcond=None)
    return coef


_ATAN = _atan_coefficients()


def _atan2(y, x):
    """atan2(y, x) from ops with backward passes: the arctangent of min/max of |x| and |y| by a polynomial,
    then moved to its octant."""
    ax, ay = ops.abs(x), ops.abs(y)
    big = ops.maximum(ax, ay)
    small = ops.minimum(ax, ay)
    z = small / (big + 1e-30)
    z2 = z * z
    acc = z2 * float(_ATAN[-1])
    for c in _ATAN[-2:0:-1]:
        acc = (acc + float(c)) * z2
    r = (acc + float(_ATAN[0])) * z
    r = ops.where(ops.greater(ay, ax), (math.pi / 2) - r, r)
    r = ops.where(ops.less(x, 0.0), math.pi - r, r)
    return ops.where(ops.less(y, 0.0), -r, r)


@register_builtin
class STFTSpectrogram(Layer):
    """``STFTSpectrogram(mode="log", frame_length=256, frame_step=None, fft_length=None, window="hann",
    periodic=False, scaling="density", padding="valid", expand_dims=False, data_format=None)``."""

    def __init__(self, mode="log", frame_length=256, frame_step=None, fft_length=None, window="hann",
                 periodic=False, scaling="density", padding="valid", expand_dims=False, data_format=None, **kwargs):
        super().__init__(**kwargs)
        owner = "STFTSpectrogram"
        self.mode = check_choice(f"{owner}: mode", mode, MODES)
        self.frame_length = check_positive_int(f"{owner}: frame_length", frame_length, 1 << 16)
        if frame_step is not None:
            frame_step = check_positive_int(f"{owner}: frame_step", frame_step, 1 << 16)
            if frame_step > self.frame_length:
                raise ValueError(f"{owner}: frame_step must be a positive int not above frame_length "
                                 f"({self.frame_length}), got {frame_step}")
        self.frame_step = frame_step
        self._frame_step = frame_step or max(self.frame_length // 2, 1)
        if fft_length is not None:
            fft_length = check_positive_int(f"{owner}: fft_length", fft_length, 1 << 16)
            if fft_length < self.frame_length:
                raise ValueError(f"{owner}: fft_length must be at least frame_length ({self.frame_length}), got "
                                 f"{fft_length}")
        self.fft_length = fft_length
        self._fft_length = fft_length or 2 ** int(math.ceil(math.log2(self.frame_length)))
        self.window = _audio.check_window(window, owner)
        if isinstance(self.window, list) and len(self.window) != self.frame_length:
            raise ValueError(f"{owner}: the window array has {len(self.window)} values; it must have frame_length="
                             f"{self.frame_length}")
        self.periodic = check_bool(f"{owner}: periodic", periodic)
        if scaling is not None:
            check_choice(f"{owner}: scaling", scaling, ("density", "spectrum"))
        self.scaling = scaling
        self.padding = check_choice(f"{owner}: padding", padding, ("valid", "same"))
        self.expand_dims = check_bool(f"{owner}: expand_dims", expand_dims)
        self.data_format = check_data_format(data_format)

    @property
    def bins(self):
        return self._fft_length // 2 + 1

    def _split(self, input_shape):
        shape = tuple(input_shape)
        if len(shape) != 3:
            expected = "(batch, channels, time)" if self.data_format == "channels_first" else \
                "(batch, time, channels)"
            raise ValueError(f"STFTSpectrogram takes signals of shape {expected} (data_format="
                             f"{self.data_format!r}), got {shape}")
        time, channels = (shape[1], shape[2]) if self.data_format == "channels_last" else (shape[2], shape[1])
        return time, channels

    def _frames(self, time):
        if time is None:
            return None
        if self.padding == "same":
            return same_pads(time, self.frame_length, self._frame_step)[0]
        return (time - self.frame_length) // self._frame_step + 1 if time >= self.frame_length else 0

    def build(self, input_shape):
        time, channels = self._split(input_shape)
        if time is not None and self._frames(time) < 1:
            raise ValueError(f"STFTSpectrogram: signals of {time} samples are shorter than frame_length="
                             f"{self.frame_length} (padding='valid')")
        real, imag = stft_kernels(self.frame_length, self._fft_length, self.window, self.periodic, self.scaling)
        shape = (self.frame_length, 1, self.bins)
        if self.mode != "imag":
            self.real_kernel = self.add_weight("real_kernel", shape, lambda s, rng, layout: real.astype(np.float32))
        if self.mode != "real":
            self.imag_kernel = self.add_weight("imag_kernel", shape, lambda s, rng, layout: imag.astype(np.float32))

    def compute_output_shape(self, input_shape):
        time, channels = self._split(input_shape)
        frames = self._frames(time)
        bins = self.bins * (2 if self.mode == "stft" else 1)
        if self.data_format == "channels_last":
            return (input_shape[0], frames, bins, channels) if self.expand_dims else \
                (input_shape[0], frames, None if channels is None else channels * bins)
        return (input_shape[0], channels, frames, bins) if self.expand_dims else \
            (input_shape[0], None if channels is None else channels * bins, frames)

    def _framed(self, x):
        """(batch, channels, time) -> (batch * channels * frames, frame_length) rows of samples."""
        b, c, t = x.shape
        x = ops.reshape(contiguous(x), (b * c, 1, 1, t))
        if self.padding == "same":
            _, left, right = same_pads(t, self.frame_length, self._frame_step)
            if left or right:
                x = pad_nchw(x, 0, 0, left, right)
        kernel_shape = _scope.require("STFTSpectrogram").ctx.new_tensor((self.bins, 1, 1, self.frame_length))
        cols = ops.im2col(kernel_shape, x, self._frame_step, 1, 0, 0, 1, 1, True, "f32")
        frames = cols.shape[2]
        return ops.reshape(cols, (b * c * frames, self.frame_length)), frames

    def call(self, inputs, training=None):
        x = inputs if self.data_format == "channels_first" else ops.transpose(inputs, (0, 2, 1))
        b, c = x.shape[0], x.shape[1]
        rows, frames = self._framed(x)
        real = rows @ ops.reshape(self.real_kernel, (self.frame_length, self.bins)) if self.mode != "imag" else None
        imag = rows @ ops.reshape(self.imag_kernel, (self.frame_length, self.bins)) if self.mode != "real" else None
        if self.mode == "real":
            y = real
        elif self.mode == "imag":
            y = imag
        elif self.mode == "angle":
            y = _atan2(imag, real)
        elif self.mode == "stft":
            # [real | imag] along the bins, by constant matrices (ggml's concat has no backward pass)
            eye = np.eye(self.bins, dtype=np.float32)
            zero = np.zeros_like(eye)
            y = real @ ops.constant(np.concatenate([eye, zero], 1)) + \
                imag @ ops.constant(np.concatenate([zero, eye], 1))
        else:
            power = real * real + imag * imag
            if self.mode == "psd":
                double = np.full((self.bins,), 2.0, np.float32)
                double[0] = 1.0
                double[-1] = 1.0
                y = power * double
            else:
                y = ops.sqrt(ops.maximum(power, _EPSILON))
                if self.mode == "log":
                    y = ops.log(ops.maximum(y, _EPSILON))
        bins = y.shape[-1]
        y = ops.reshape(contiguous(y), (b, c, frames, bins))
        if self.data_format == "channels_last":
            if self.expand_dims:
                return ops.transpose(y, (0, 2, 3, 1))
            return ops.reshape(contiguous(ops.transpose(y, (0, 2, 1, 3))), (b, frames, c * bins))
        if self.expand_dims:
            return y
        return ops.reshape(contiguous(ops.transpose(y, (0, 1, 3, 2))), (b, c * bins, frames))

    def get_config(self):
        cfg = super().get_config()
        cfg.update(mode=self.mode, frame_length=self.frame_length, frame_step=self.frame_step,
                   fft_length=self.fft_length, window=self.window, periodic=self.periodic, scaling=self.scaling,
                   padding=self.padding, expand_dims=self.expand_dims, data_format=self.data_format)
        return cfg
