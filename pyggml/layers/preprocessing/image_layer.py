"""ImagePreprocessingLayer: the base of Keras's image preprocessing and
augmentation layers, computed on the host in numpy (HostLayers).

They take images ``(batch, height, width, channels)`` (``data_format=
"channels_first"``: ``(batch, channels, height, width)``) of any real dtype and
give float32; called on arrays they also take a single image (rank 3).

The Random* layers (``random = True``) change their inputs only in training:
``fit`` runs them with ``training=True`` on every batch (new draws each batch
and epoch), ``predict``/``evaluate`` with ``training=False`` (the identity).  As
in Keras, a call on arrays without ``training`` augments.  Draws come from the
layer's own generator when it has a ``seed`` (the same seed, the same
sequence of draws), else from the library's (``pg.set_seed``).
"""

import numpy as np

from pyggml import _random
from pyggml._validation import check_choice, check_number, is_int, is_number
from pyggml.layers.node import Node
from pyggml.layers.preprocessing import _image_ops
from pyggml.layers.preprocessing.host_layer import HostLayer, host_call_in_graph, is_fed

__all__ = ["ImagePreprocessingLayer", "RandomImageLayer", "AffineAugmentation", "check_data_format", "check_size",
           "check_seed", "factor_range"]


_MAX_VALUES = 1 << 31            # 8 GiB of float32 in one array: refused rather than run out of memory


def check_data_format(value):
    if value is None:
        return "channels_last"
    return check_choice("data_format", value, ("channels_last", "channels_first"))


def check_size(name, value, owner):
    if not is_int(value):
        raise TypeError(f"{owner}: {name} must be a positive int, got {value!r}")
    if not 1 <= value <= 1 << 16:
        raise ValueError(f"{owner}: {name} must be a positive int (at most 65536), got {value!r}")
    return int(value)


def check_seed(value, owner):
    if value is not None and (not is_int(value) or value < 0):
        raise ValueError(f"{owner}: seed must be a non-negative int or None, got {value!r}")
    return None if value is None else int(value)


def factor_range(value, name, owner, low, high, symmetric=True, low_open=False):
    """(lower, upper) from a number or a pair, each in [low, high] (``low_open``: (low, high]).
    A number f gives (-f, f) when ``symmetric``, else (f, f)."""
    what = f"{owner}: {name} must be a number or a pair of numbers in {'(' if low_open else '['}{low}, {high}]"
    if isinstance(value, (tuple, list, np.ndarray)):
        pair = list(value)
        if len(pair) != 2 or not all(is_number(v) for v in pair):
            raise ValueError(f"{what}, got {value!r}")
        pair = [float(v) for v in pair]
    elif is_number(value):
        pair = [float(value)]
    else:
        raise TypeError(f"{what}, got {value!r}")
    for v in pair:
        if not np.isfinite(v) or v < low or v > high or (low_open and v == low):
            raise ValueError(f"{what}, got {value!r}")
    if len(pair) == 1:
        f = abs(pair[0]) if symmetric else pair[0]
        pair = [-f, f] if symmetric else [f, f]
    return tuple(sorted(pair))


class ImagePreprocessingLayer(HostLayer):
    """Images in, images out, on the host.  Subclasses define ``transform(images,
    training)`` on channels-last float32 batches and, when the size changes,
    ``output_size(height, width)``."""

    random = False                      # augments only in training

    def __init__(self, data_format=None, **kwargs):
        super().__init__(**kwargs)
        self.data_format = check_data_format(data_format)

    @property
    def host_training(self):
        return self.random

    def output_size(self, height, width):
        """The output's (height, width) for images of that size (None: any)."""
        return height, width

    def transform(self, images, training):
        raise NotImplementedError

    def _axes(self):
        return (2, 3) if self.data_format == "channels_first" else (1, 2)

    def compute_output_shape(self, input_shape):
        shape = tuple(input_shape)
        if len(shape) != 4:
            raise ValueError(f"{type(self).__name__} takes images: inputs of shape (batch, height, width, channels)"
                             f"{' (channels_first: (batch, channels, height, width))' if self._axes()[0] == 2 else ''}"
                             f", got {shape}")
        hi, wi = self._axes()
        if any(d is not None and d < 1 for d in shape[1:]):
            raise ValueError(f"{type(self).__name__}: images need a positive height, width and channels, got {shape}")
        out = list(shape)
        out[hi], out[wi] = self.output_size(shape[hi], shape[wi])       # None (any size) passes through
        return tuple(out)

    def host_call(self, inputs, training=None):
        a = np.asarray(inputs)
        if a.dtype == object or a.dtype.kind not in "biuf":
            raise TypeError(f"{type(self).__name__} takes images of numbers, got an array of dtype {a.dtype}")
        if a.ndim not in (3, 4):
            raise ValueError(f"{type(self).__name__} takes images (batch, height, width, channels) or one image "
                             f"(height, width, channels), got an array of shape {a.shape}")
        single = a.ndim == 3
        x = a[None] if single else a
        if self.data_format == "channels_first":
            x = x.transpose(0, 2, 3, 1)
        if min(x.shape[1:]) < 1:
            raise ValueError(f"{type(self).__name__}: images need a positive height, width and channels, got an "
                             f"array of shape {a.shape}")
        oh, ow = self.output_size(*x.shape[1:3])
        if max(x.size, len(x) * oh * ow * x.shape[3]) > _MAX_VALUES:
            raise ValueError(f"{type(self).__name__}: images of shape {a.shape} (or their output, {oh} x {ow}) are "
                             f"too large to process at once (more than 2**31 values): give fewer images a call")
        x = np.ascontiguousarray(x, dtype=np.float32)
        y = self.transform(x, True if training is None else bool(training)) if len(x) else \
            np.zeros((0,) + self.output_size(*x.shape[1:3]) + x.shape[3:], np.float32)
        if self.data_format == "channels_first":
            y = y.transpose(0, 3, 1, 2)
        y = np.ascontiguousarray(y, dtype=np.float32)
        return y[0] if single else y

    def __call__(self, *args, **kwargs):
        if args and isinstance(args[0], (list, tuple)) and not any(isinstance(v, Node) for v in args[0]):
            return self.host_apply(np.asarray(args[0]), kwargs.get("training"))      # nested lists of pixels
        return super().__call__(*args, **kwargs)

    def get_config(self):
        cfg = super().get_config()
        cfg["data_format"] = self.data_format
        return cfg


class RandomImageLayer(ImagePreprocessingLayer):
    """An augmentation: random in training, the identity in inference (unless it says otherwise)."""

    random = True

    def __init__(self, seed=None, data_format=None, **kwargs):
        super().__init__(data_format=data_format, **kwargs)
        self.seed = check_seed(seed, type(self).__name__)
        self._generator = None

    def rng(self):
        """The layer's generator (seeded once from ``seed``), else the library's."""
        if self.seed is None:
            return _random.rng()
        if self._generator is None:
            self._generator = np.random.default_rng(self.seed)
        return self._generator

    def transform(self, images, training):
        return self.augment(images) if training else images

    def augment(self, images):
        raise NotImplementedError

    def graph_augment(self, images):
        """The augmentation as graph ops on channels-last images (a tensor of the graph being
        built), drawing on the host before each step as ``augment`` does; None where the layer
        has none (its call then takes only the data a graph is fed)."""
        return None

    @property
    def graph_call(self):
        """The call in a graph for a layer with a graph_augment (as Resizing's: such a layer
        runs in a model's graph after graph layers), else None (host only)."""
        return None if type(self).graph_augment is RandomImageLayer.graph_augment else self._graph_call

    def _graph_call(self, inputs, training=None):
        """In a graph: data it is fed goes through the host path; a tensor it computes (gan_ada's
        generated images) is augmented by graph ops, the same augmentation on the same draws,
        through which the gradient reaches that tensor."""
        if is_fed(inputs):
            return host_call_in_graph(self, inputs, training)
        from pyggml import _scope, ops
        active = training if training is not None else _scope.require(type(self).__name__).training
        if not active:
            return inputs
        if len(inputs.shape) != 4:
            raise ValueError(f"{type(self).__name__} takes images (batch, height, width, channels) in a graph, got "
                             f"a tensor of shape {tuple(inputs.shape)}")
        first = self.data_format == "channels_first"
        y = self.graph_augment(ops.transpose(inputs, (0, 2, 3, 1)) if first else inputs)
        return ops.transpose(y, (0, 3, 1, 2)) if first else y

    def graph_draw(self, shape, draw):
        """A tensor of ``shape`` set to ``draw(generator)`` before each step (the layer's own
        generator when seeded)."""
        from pyggml import _scope
        return _scope.require(type(self).__name__).random_values(tuple(shape), lambda rng, s: draw(self.rng()))

    def get_config(self):
        cfg = super().get_config()
        cfg["seed"] = self.seed
        return cfg


class AffineAugmentation(RandomImageLayer):
    """Random rotations, zooms and translations: an affine resampling per image."""

    def __init__(self, fill_mode="reflect", interpolation="bilinear", seed=None, fill_value=0.0, data_format=None,
                 **kwargs):
        super().__init__(seed=seed, data_format=data_format, **kwargs)
        owner = type(self).__name__
        if fill_mode not in _image_ops.FILL_MODES:
            raise ValueError(f"{owner}: fill_mode must be one of {_image_ops.FILL_MODES}, got {fill_mode!r}")
        if interpolation not in _image_ops.AFFINE_INTERPOLATIONS:
            raise ValueError(f"{owner}: interpolation must be one of {_image_ops.AFFINE_INTERPOLATIONS}, got "
                             f"{interpolation!r}")
        self.fill_mode = fill_mode
        self.interpolation = interpolation
        self.fill_value = check_number(f"{owner}: fill_value", fill_value)

    def matrices(self, n, height, width):
        """(n, 6): where each output pixel reads its input (see _image_ops.affine_sample)."""
        raise NotImplementedError

    def augment(self, images):
        m = self.matrices(len(images), images.shape[1], images.shape[2])
        return _image_ops.affine_sample(images, m, self.interpolation, self.fill_mode, self.fill_value)

    def graph_augment(self, images):
        from pyggml.layers.preprocessing import _augment_graph

        def plan(n, h, w):
            sx, sy = _image_ops.affine_points(self.matrices(n, h, w), h, w)
            return _augment_graph.sample_plan(sx, sy, h, w, self.interpolation, self.fill_mode, self.fill_value)
        constant = self.fill_mode == "constant"
        return _augment_graph.resample(self, images, plan, 1 if self.interpolation == "nearest" else 4,
                                       self.interpolation != "nearest" or constant, constant and self.fill_value != 0)

    def get_config(self):
        cfg = super().get_config()
        cfg.update(fill_mode=self.fill_mode, interpolation=self.interpolation, fill_value=self.fill_value)
        return cfg
