"""The noise layers (Keras's regularization layers): GaussianNoise, GaussianDropout and
AlphaDropout.  Each is active only while training (``fit``, or a call with
``training=True``) and the identity at inference.

The noise is drawn on the host before each training step, as Dropout's masks are:
from the library's generator (``pg.set_seed``), or, when the layer has a ``seed``,
from the layer's own generator started at that seed (runs repeat exactly)."""

import math

import numpy as np

from pyggml import _scope, ops
from pyggml._validation import check_number, is_int
from pyggml.layers._helpers import contiguous
from pyggml.layers.core.dropout import _check_noise_shape, noise_mask_shape
from pyggml.layers.layer import Layer
from pyggml.saving.object_registration import register_builtin

__all__ = ["GaussianNoise", "GaussianDropout", "AlphaDropout"]

# SELU's constants (Klambauer et al. 2017): AlphaDropout sets dropped values to SELU's
# negative saturation, -alpha * scale
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _check_rate(cls, name, value, high_open):
    who = f"{cls}: {name}"
    v = check_number(who, value, 0.0, 1.0)
    if high_open and v == 1.0:
        raise ValueError(f"{who} must be in [0, 1), got {value!r} (a rate of 1 leaves no signal to rescale)")
    return v


class _Noise(Layer):
    """The shared part: identity shapes, masks pass through, the seed and its generator."""

    supports_masking = True

    def __init__(self, seed=None, **kwargs):
        super().__init__(**kwargs)
        if seed is not None and (not is_int(seed) or seed < 0):
            raise ValueError(f"{type(self).__name__}: seed must be a non-negative int or None, got {seed!r}")
        self.seed = None if seed is None else int(seed)
        self._generator = None if seed is None else np.random.default_rng(self.seed)

    def compute_output_shape(self, input_shape):
        return input_shape

    def _random(self, shape, draw):
        """A tensor of ``shape`` holding draw(generator, shape), redrawn before each step."""
        own = self._generator

        def values(rng, s):
            return draw(own if own is not None else rng, s)
        return _scope.require(type(self).__name__).random_values(tuple(int(d) for d in shape), values)

    @staticmethod
    def _active(training):
        return bool(training if training is not None else _scope.require("a noise layer").training)

    def get_config(self):
        c = super().get_config()
        c["seed"] = self.seed
        return c


@register_builtin
class GaussianNoise(_Noise):
    """``GaussianNoise(stddev, seed=None)``: adds zero-mean normal noise of standard
    deviation ``stddev`` (in [0, 1], as Keras) to its input while training."""

    def __init__(self, stddev, seed=None, **kwargs):
        super().__init__(seed=seed, **kwargs)
        self.stddev = _check_rate("GaussianNoise", "stddev", stddev, high_open=False)

    def call(self, inputs, training=None):
        if not self._active(training) or self.stddev == 0:
            return inputs
        x = contiguous(ops.as_tensor(inputs))
        sd = self.stddev
        return ops.add(x, self._random(x.shape, lambda g, s: g.normal(0.0, sd, s)))

    def get_config(self):
        c = super().get_config()
        c["stddev"] = self.stddev
        return c


@register_builtin
class GaussianDropout(_Noise):
    """``GaussianDropout(rate, seed=None)``: multiplies its input by normal noise of mean 1
    and standard deviation ``sqrt(rate / (1 - rate))`` while training; ``rate`` in [0, 1)."""

    def __init__(self, rate, seed=None, **kwargs):
        super().__init__(seed=seed, **kwargs)
        self.rate = _check_rate("GaussianDropout", "rate", rate, high_open=True)

    def call(self, inputs, training=None):
        if not self._active(training) or self.rate == 0:
            return inputs
        x = contiguous(ops.as_tensor(inputs))
        sd = math.sqrt(self.rate / (1.0 - self.rate))
        return ops.mul(x, self._random(x.shape, lambda g, s: g.normal(1.0, sd, s)))

    def get_config(self):
        c = super().get_config()
        c["rate"] = self.rate
        return c


@register_builtin
class AlphaDropout(_Noise):
    """``AlphaDropout(rate, noise_shape=None, seed=None)``: Dropout for SELU networks.  While
    training, a fraction ``rate`` of the values is set to SELU's saturation value
    ``-alpha * scale`` and the result is shifted and scaled so that inputs of zero mean and
    unit variance keep them; ``rate`` in [0, 1).  ``noise_shape`` as Dropout's (the batch
    included, a None entry takes the input's size, 1 shares the draw along that axis)."""

    def __init__(self, rate, noise_shape=None, seed=None, **kwargs):
        super().__init__(seed=seed, **kwargs)
        self.rate = _check_rate("AlphaDropout", "rate", rate, high_open=True)
        self.noise_shape = _check_noise_shape(noise_shape)

    def build(self, input_shape):
        if self.noise_shape is not None and not isinstance(input_shape, list):
            self._mask_shape(tuple(input_shape))         # a noise_shape that cannot fit fails here

    def _mask_shape(self, shape):
        if self.noise_shape is None:
            return tuple(shape)
        return noise_mask_shape("AlphaDropout", self.noise_shape, shape)

    def call(self, inputs, training=None):
        if not self._active(training) or self.rate == 0:
            return inputs
        x = contiguous(ops.as_tensor(inputs))
        rate = self.rate
        alpha_p = -_SELU_ALPHA * _SELU_SCALE
        a = ((1.0 - rate) * (1.0 + rate * alpha_p ** 2)) ** -0.5
        b = -a * alpha_p * rate
        keep = self._random(self._mask_shape(tuple(x.shape)), lambda g, s: (g.random(s) >= rate))
        if tuple(keep.shape) != tuple(x.shape):
            keep = ops.repeat(keep, x)
        # a * (x * keep + alpha_p * (1 - keep)) + b, with the mask a constant of the step
        return ops.add(ops.mul(x, ops.scale(keep, a)), ops.scale_bias(keep, -a * alpha_p, a * alpha_p + b))

    def get_config(self):
        c = super().get_config()
        c["rate"] = self.rate
        c["noise_shape"] = None if self.noise_shape is None else list(self.noise_shape)
        return c
