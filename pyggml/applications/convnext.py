"""``keras.applications.convnext``: ConvNeXtTiny, ConvNeXtSmall, ConvNeXtBase,
ConvNeXtLarge and ConvNeXtXLarge (Liu et al., "A ConvNet for the 2020s", 2022): a
patchify stem (4x4 convolution of stride 4, layer normalization), four stages of
ConvNeXt blocks separated by downsampling blocks (layer normalization, 2x2 convolution
of stride 2).  A block is a 7x7 depthwise convolution, layer normalization, a pointwise
MLP (Dense 4x wide, GELU, Dense back), a learned per-channel scale (``LayerScale``) and
the residual sum, the branch optionally dropped per sample (``StochasticDepth``).

Keras's layer names, with the model's name as prefix (``convnext_tiny`` ...):
``{name}_prestem_normalization``, ``{name}_stem`` and
``{name}_downsampling_block_{0,1,2}`` (nested Sequential models, as in Keras),
``{name}_stage_{i}_block_{j}_depthwise_conv``, ``..._layernorm``,
``..._pointwise_conv_1``, ``..._gelu``, ``..._pointwise_conv_2``,
``..._layer_scale``, ``..._identity``, then ``{name}_head_gap``,
``{name}_head_layernorm``, ``{name}_head_dense``.  Without the top the (optional)
pooling is followed by an unnamed layer normalization, as in Keras.

As Keras's, the models take pixels in [0, 255]: with ``include_preprocessing`` (and 3
channels) a ``Normalization`` layer with ImageNet's mean and variance starts them.
``preprocess_input`` returns its input unchanged."""

import numpy as np

from pyggml import ops
from pyggml.applications import imagenet_utils
from pyggml.applications._base import (add_arguments_doc, arguments_doc, check_arguments, check_flag, finish,
                                       image_input, refuse_imagenet)
from pyggml.initializers import Constant
from pyggml.layers import (Activation, Conv2D, Dense, Dropout, GlobalAveragePooling2D, GlobalMaxPooling2D, Layer,
                           LayerNormalization, Normalization)
from pyggml.models import Sequential
from pyggml.saving.object_registration import register_serializable

__all__ = ["ConvNeXtTiny", "ConvNeXtSmall", "ConvNeXtBase", "ConvNeXtLarge", "ConvNeXtXLarge", "LayerScale",
           "StochasticDepth", "preprocess_input", "decode_predictions"]

# (blocks per stage, channels per stage); all at 224x224 by default
_CONFIGS = {"tiny": ((3, 3, 9, 3), (96, 192, 384, 768)),
            "small": ((3, 3, 27, 3), (96, 192, 384, 768)),
            "base": ((3, 3, 27, 3), (128, 256, 512, 1024)),
            "large": ((3, 3, 27, 3), (192, 384, 768, 1536)),
            "xlarge": ((3, 3, 27, 3), (256, 512, 1024, 2048))}
_EPS = 1e-6
_IMAGENET_MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]
_IMAGENET_VAR = [(0.229 * 255) ** 2, (0.224 * 255) ** 2, (0.225 * 255) ** 2]


@register_serializable(package="pyggml_applications")
class LayerScale(Layer):
    """Multiplies its input's last axis by a learned vector ``gamma`` of
    ``projection_dim`` values, all ``init_values`` at first (Touvron et al., CaiT)."""

    def __init__(self, init_values, projection_dim, **kwargs):
        super().__init__(**kwargs)
        self.init_values = float(init_values)
        self.projection_dim = int(projection_dim)

    def build(self, input_shape):
        if input_shape[-1] is not None and input_shape[-1] != self.projection_dim:
            raise ValueError(f"LayerScale: the input's last axis has {input_shape[-1]} values, expected "
                             f"projection_dim={self.projection_dim}")
        self.gamma = self.add_weight(name="gamma", shape=(self.projection_dim,),
                                     initializer=Constant(self.init_values), trainable=True)

    def compute_output_shape(self, input_shape):
        return input_shape

    def call(self, x):
        return ops.multiply(x, self.gamma)

    def get_config(self):
        config = super().get_config()
        config.update(init_values=self.init_values, projection_dim=self.projection_dim)
        return config


@register_serializable(package="pyggml_applications")
class StochasticDepth(Dropout):
    """Drops a residual branch for whole samples while training: each sample's values
    are kept (scaled by ``1 / (1 - drop_path_rate)``) or zeroed together, with
    probability ``drop_path_rate`` of zeroing; the identity at inference."""

    def __init__(self, drop_path_rate, **kwargs):
        kwargs.pop("rate", None)
        kwargs.pop("noise_shape", None)
        super().__init__(rate=drop_path_rate, **kwargs)
        self.drop_path_rate = self.rate

    def build(self, input_shape):
        # one draw per sample: the mask spans the batch axis only
        self.noise_shape = (None,) + (1,) * (len(input_shape) - 1)
        super().build(input_shape)

    def get_config(self):
        config = super().get_config()
        for key in ("rate", "noise_shape", "seed"):
            config.pop(key, None)
        config["drop_path_rate"] = self.drop_path_rate
        return config


def _block(x, dim, drop_path_rate, layer_scale_init_value, name):
    """One ConvNeXt block of ``dim`` channels, its layers named ``{name}_...``."""
    inputs = x
    x = Conv2D(dim, 7, padding="same", groups=dim, name=f"{name}_depthwise_conv")(x)
    x = LayerNormalization(epsilon=_EPS, name=f"{name}_layernorm")(x)
    x = Dense(4 * dim, name=f"{name}_pointwise_conv_1")(x)
    x = Activation("gelu", name=f"{name}_gelu")(x)
    x = Dense(dim, name=f"{name}_pointwise_conv_2")(x)
    if layer_scale_init_value is not None:
        x = LayerScale(layer_scale_init_value, dim, name=f"{name}_layer_scale")(x)
    if drop_path_rate:
        x = StochasticDepth(drop_path_rate, name=f"{name}_stochastic_depth")(x)
    else:
        x = Activation("linear", name=f"{name}_identity")(x)
    return inputs + x


def build_convnext(depths, projection_dims, name, include_preprocessing, include_top, weights, input_tensor,
                   input_shape, pooling, classes, classifier_activation, drop_path_rate=0.0,
                   layer_scale_init_value=1e-6, default_size=224):
    """ConvNeXt of ``depths`` blocks per stage with ``projection_dims`` channels; the stochastic
    depth rate grows linearly from 0 (first block) to ``drop_path_rate`` (last block)."""
    check_flag("include_preprocessing", include_preprocessing)
    input_shape, weights, include_top = check_arguments(include_top, weights, input_tensor, input_shape, pooling,
                                                        classes, classifier_activation, default_size, 32)
    refuse_imagenet(weights)
    img_input = image_input(input_tensor, input_shape)
    x = img_input
    if include_preprocessing and x.shape[-1] == 3:
        x = Normalization(mean=_IMAGENET_MEAN, variance=_IMAGENET_VAR, name=f"{name}_prestem_normalization")(x)
    stem = Sequential([Conv2D(projection_dims[0], 4, strides=4, name=f"{name}_stem_conv"),
                       LayerNormalization(epsilon=_EPS, name=f"{name}_stem_layernorm")], name=f"{name}_stem")
    downsampling = [stem] + [
        Sequential([LayerNormalization(epsilon=_EPS, name=f"{name}_downsampling_layernorm_{i}"),
                    Conv2D(projection_dims[i + 1], 2, strides=2, name=f"{name}_downsampling_conv_{i}")],
                   name=f"{name}_downsampling_block_{i}") for i in range(3)]
    rates = [float(r) for r in np.linspace(0.0, drop_path_rate, sum(depths))]
    b = 0
    for i, (depth, dim) in enumerate(zip(depths, projection_dims)):
        x = downsampling[i](x)
        for j in range(depth):
            x = _block(x, dim, rates[b], layer_scale_init_value, f"{name}_stage_{i}_block_{j}")
            b += 1
    if include_top:
        x = GlobalAveragePooling2D(name=f"{name}_head_gap")(x)
        x = LayerNormalization(epsilon=_EPS, name=f"{name}_head_layernorm")(x)
        x = Dense(classes, activation=classifier_activation, name=f"{name}_head_dense")(x)
    else:
        if pooling == "avg":
            x = GlobalAveragePooling2D()(x)
        elif pooling == "max":
            x = GlobalMaxPooling2D()(x)
        x = LayerNormalization(epsilon=_EPS)(x)
    return finish(input_tensor, img_input, x, name, weights)


def _constructor(variant, params):
    depths, dims = _CONFIGS[variant]

    def constructor(include_top=True, include_preprocessing=True, weights="imagenet", input_tensor=None,
                    input_shape=None, pooling=None, classes=1000, classifier_activation="softmax",
                    name=f"convnext_{variant}"):
        return build_convnext(depths, dims, name, include_preprocessing, include_top, weights, input_tensor,
                              input_shape, pooling, classes, classifier_activation)
    title = f"ConvNeXt{'XLarge' if variant == 'xlarge' else variant.capitalize()}"
    constructor.__name__ = constructor.__qualname__ = title
    constructor.__doc__ = (f"{title}: stages of {', '.join(map(str, depths))} ConvNeXt blocks with "
                           f"{', '.join(map(str, dims))}\n    channels ({params} parameters with the top).")
    add_arguments_doc((constructor,), arguments_doc(224, 32, top="global average pooling, layer normalization, "
                                                                 "then a Dense layer of ``classes`` units", extra="""
        include_preprocessing: whether a Normalization layer with ImageNet's mean and
            variance starts the model (for 3-channel inputs), so that it takes pixels in
            [0, 255]."""))
    return constructor


ConvNeXtTiny = _constructor("tiny", "28.6M")
ConvNeXtSmall = _constructor("small", "50.2M")
ConvNeXtBase = _constructor("base", "88.6M")
ConvNeXtLarge = _constructor("large", "197.8M")
ConvNeXtXLarge = _constructor("xlarge", "350.2M")


def preprocess_input(x, data_format=None):
    """Returns ``x`` as it is: ConvNeXt models normalize their inputs themselves (their
    first layer), so images go in with pixels in [0, 255].  Kept so that code written for
    the other families runs unchanged."""
    return x


decode_predictions = imagenet_utils.decode_predictions
