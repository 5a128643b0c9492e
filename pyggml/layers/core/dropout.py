"""Dropout: zero a fraction ``rate`` of the values while training, scale the rest by 1/(1-rate).

``noise_shape`` (Keras's): the shape of the mask, batch included, broadcast over
the input's axes where it is 1 (``(None, 1, features)`` drops the same features
at every step); a None entry takes the input's size."""

import numpy as np

from pyggml import _random, _scope, ops
from pyggml._validation import check_fraction, is_int
from pyggml.layers._helpers import contiguous
from pyggml.layers.layer import Layer
from pyggml.saving.object_registration import register_builtin

__all__ = ["Dropout", "SpatialDropout1D", "SpatialDropout2D"]


def _check_noise_shape(noise_shape):
    if noise_shape is None:
        return None
    if isinstance(noise_shape, (str, bytes)):
        raise ValueError(f"Dropout: noise_shape must be a tuple of ints or None, got {noise_shape!r}")
    try:
        t = tuple(noise_shape)
    except TypeError:
        raise TypeError(f"Dropout: noise_shape must be a tuple of ints or None, got {noise_shape!r}") from None
    if not t or len(t) > 4:
        raise ValueError(f"Dropout: noise_shape must have 1 to 4 entries (the batch's included), got {t}")
    for d in t:
        if d is not None and (not is_int(d) or d < 1):
            raise ValueError(f"Dropout: noise_shape entries must be positive ints or None, got {t}")
    return tuple(None if d is None else int(d) for d in t)



def noise_mask_shape(what, noise_shape, shape):
    """A layer's noise_shape for inputs of ``shape`` (batch included): None filled in from
    the inputs, each entry 1 or the input's size (Dropout's and AlphaDropout's rule)."""
    ns = noise_shape
    if len(ns) != len(shape):
        raise ValueError(f"{what}: noise_shape {ns} has {len(ns)} entries, the inputs {len(shape)} "
                         f"(shape {tuple(shape)}, batch included)")
    out = tuple(s if d is None else d for d, s in zip(ns, shape))
    for d, s in zip(out, shape):
        if s is not None and d not in (1, s):
            raise ValueError(f"{what}: noise_shape {ns} does not broadcast to the inputs' shape "
                             f"{tuple(shape)}: each entry must be 1, the input's size or None")
    return out

@register_builtin
class Dropout(Layer):
    supports_masking = True

    def takes_5d(self, shapes):
        """volumes take a Dropout without a noise_shape (SpatialDropout3D drops channels) (pyggml._fold)."""
        return self.noise_shape is None

    def __init__(self, rate, noise_shape=None, seed=None, **kwargs):
        super().__init__(**kwargs)
        self.rate = check_fraction("Dropout rate", rate)       # 1.0 drops everything, as Keras's
        self.noise_shape = _check_noise_shape(noise_shape)
        self.seed = seed

    def compute_output_shape(self, input_shape):
        return input_shape

    def build(self, input_shape):
        if self.noise_shape is not None and not isinstance(input_shape, list):
            self.mask_shape(tuple(input_shape))              # a noise_shape that cannot fit fails here

    def mask_shape(self, shape):
        """The mask's shape for inputs of ``shape`` (batch included): noise_shape with
        None filled in, each entry 1 or the input's size."""
        return noise_mask_shape(type(self).__name__, self.noise_shape, shape)

    def call(self, inputs, training=None):
        if self.noise_shape is None and self.seed is None:
            return ops.dropout(inputs, self.rate, training=training)
        x = ops.as_tensor(inputs)
        b = _scope.require("Dropout")
        shape = self.mask_shape(tuple(x.shape)) if self.noise_shape is not None else tuple(x.shape)
        if training is None:
            training = b.training
        if not training or self.rate == 0:
            return x
        if self.seed is None:
            return ops.mul(contiguous(x), b.random_keep_mask(shape, self.rate))
        # Keras's Dropout(seed=s): the masks come from the layer's own generator, seeded by s (two
        # layers of one seed draw the same masks, and a run draws what the last did), one per step
        gen = self.__dict__.get("_seed_generator")
        if gen is None:
            gen = self.__dict__["_seed_generator"] = np.random.default_rng(self.seed)
        rate = self.rate
        return ops.mul(contiguous(x), b.random_values(shape, lambda rng, s: _random.draw_values(gen, s, rate)))

    def get_config(self):
        c = super().get_config()
        c["rate"] = self.rate
        c["noise_shape"] = None if self.noise_shape is None else list(self.noise_shape)
        c["seed"] = self.seed
        return c


class _SpatialDropout(Dropout):
    """Dropout with one mask per row and channel, shared by the steps or pixels."""

    takes_5d = False

    rank = 3

    def build(self, input_shape):
        if len(input_shape) != self.rank:
            what = "(steps, channels)" if self.rank == 3 else "(height, width, channels)"
            raise ValueError(f"{type(self).__name__} takes inputs of shape {what}, got {tuple(input_shape[1:])}")

    def get_config(self):
        c = super().get_config()
        c.pop("noise_shape", None)                # Keras's config has none: the layer makes it
        c.pop("trainable", None)                  # (nor this)
        return c


@register_builtin
class SpatialDropout1D(_SpatialDropout):
    """``SpatialDropout1D(rate, seed=None)``: Dropout of whole channels of (batch, steps,
    channels) sequences."""

    def __init__(self, rate, seed=None, **kwargs):
        kwargs.pop("noise_shape", None)
        super().__init__(rate, noise_shape=(None, 1, None), seed=seed, **kwargs)


@register_builtin
class SpatialDropout2D(_SpatialDropout):
    """``SpatialDropout2D(rate, data_format=None, seed=None)``: Dropout of whole channels of
    images."""

    rank = 4

    def __init__(self, rate, data_format=None, seed=None, **kwargs):
        kwargs.pop("noise_shape", None)
        fmt = "channels_last" if data_format is None else data_format
        if fmt not in ("channels_last", "channels_first"):
            raise ValueError(f"SpatialDropout2D: data_format must be 'channels_last' or 'channels_first', "
                             f"got {data_format!r}")
        shape = (None, 1, 1, None) if fmt == "channels_last" else (None, None, 1, 1)
        super().__init__(rate, noise_shape=shape, seed=seed, **kwargs)
        self.data_format = fmt

    def get_config(self):
        c = super().get_config()
        c["data_format"] = self.data_format
        return c
