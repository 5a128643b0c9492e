"""Preprocessing layers (Keras's).

In the graph (their state is non-trainable weights or config): ``Normalization``,
``Rescaling``, ``CategoryEncoding``, ``STFTSpectrogram`` (its kernels are weights).
On the host, in numpy, before the graph (``HostLayer``s; their state is in their config): ``StringLookup``,
``IntegerLookup``, ``Discretization``, ``TextVectorization``, ``Hashing``,
``HashedCrossing``, ``MelSpectrogram``, and the image layers ``Resizing``, ``CenterCrop`` and the
augmentations ``RandomCrop``, ``RandomFlip``, ``RandomRotation``, ``RandomZoom``,
``RandomTranslation``, ``RandomContrast``, ``RandomBrightness``, ``RandomShear``,
``RandomPerspective``, ``RandomErasing``, ``RandomElasticTransform``, ``MixUp``,
``CutMix``, the colour ones ``RandomGrayscale``, ``RandomHue``, ``RandomSaturation``,
``RandomSharpness``, ``Solarization``, ``RandomInvert``, ``RandomPosterization``,
``RandomColorDegeneration``, ``RandomColorJitter``, ``RandomGaussianBlur``,
``Equalization`` and the policies ``RandAugment``, ``AugMix`` (random in training
only), ``AutoContrast`` (always), and ``Pipeline`` (layers in order, on the host
or in the graph as its layers are)."""

from pyggml.layers.preprocessing.aug_mix import AugMix
from pyggml.layers.preprocessing.auto_contrast import AutoContrast
from pyggml.layers.preprocessing.clahe import ContrastLimitedAdaptiveHistogramEqualization
from pyggml.layers.preprocessing.category_encoding import CategoryEncoding
from pyggml.layers.preprocessing.center_crop import CenterCrop
from pyggml.layers.preprocessing.cut_mix import CutMix
from pyggml.layers.preprocessing.discretization import Discretization
from pyggml.layers.preprocessing.equalization import Equalization
from pyggml.layers.preprocessing.hashed_crossing import HashedCrossing
from pyggml.layers.preprocessing.hashing import Hashing
from pyggml.layers.preprocessing.host_layer import HostLayer
from pyggml.layers.preprocessing.image_layer import ImagePreprocessingLayer
from pyggml.layers.preprocessing.integer_lookup import IntegerLookup
from pyggml.layers.preprocessing.mel_spectrogram import MelSpectrogram
from pyggml.layers.preprocessing.mix_up import MixUp
from pyggml.layers.preprocessing.normalization import Normalization
from pyggml.layers.preprocessing.pipeline import Pipeline
from pyggml.layers.preprocessing.rand_augment import RandAugment
from pyggml.layers.preprocessing.random_brightness import RandomBrightness
from pyggml.layers.preprocessing.random_color_degeneration import RandomColorDegeneration
from pyggml.layers.preprocessing.random_color_jitter import RandomColorJitter
from pyggml.layers.preprocessing.random_contrast import RandomContrast
from pyggml.layers.preprocessing.random_crop import RandomCrop
from pyggml.layers.preprocessing.random_elastic_transform import RandomElasticTransform
from pyggml.layers.preprocessing.random_erasing import RandomErasing
from pyggml.layers.preprocessing.random_flip import RandomFlip
from pyggml.layers.preprocessing.random_gaussian_blur import RandomGaussianBlur
from pyggml.layers.preprocessing.random_grayscale import RandomGrayscale
from pyggml.layers.preprocessing.random_hue import RandomHue
from pyggml.layers.preprocessing.random_invert import RandomInvert
from pyggml.layers.preprocessing.random_perspective import RandomPerspective
from pyggml.layers.preprocessing.random_posterization import RandomPosterization
from pyggml.layers.preprocessing.random_rotation import RandomRotation
from pyggml.layers.preprocessing.random_saturation import RandomSaturation
from pyggml.layers.preprocessing.random_sharpness import RandomSharpness
from pyggml.layers.preprocessing.random_shear import RandomShear
from pyggml.layers.preprocessing.random_translation import RandomTranslation
from pyggml.layers.preprocessing.random_zoom import RandomZoom
from pyggml.layers.preprocessing.rescaling import Rescaling
from pyggml.layers.preprocessing.resizing import Resizing
from pyggml.layers.preprocessing.solarization import Solarization
from pyggml.layers.preprocessing.stft_spectrogram import STFTSpectrogram
from pyggml.layers.preprocessing.string_lookup import StringLookup
from pyggml.layers.preprocessing.text_vectorization import TextVectorization

__all__ = ["HostLayer", "Normalization", "Rescaling", "CategoryEncoding", "StringLookup", "IntegerLookup",
           "Discretization", "TextVectorization", "Hashing", "HashedCrossing", "ImagePreprocessingLayer", "Resizing",
           "CenterCrop", "RandomCrop", "RandomFlip", "RandomRotation", "RandomZoom", "RandomTranslation",
           "RandomContrast", "RandomBrightness", "RandomGrayscale", "RandomHue", "RandomSaturation",
           "RandomSharpness", "Solarization", "RandomInvert", "RandomPosterization", "RandomColorDegeneration",
           "RandomColorJitter", "AutoContrast", "ContrastLimitedAdaptiveHistogramEqualization", "Equalization", "RandomGaussianBlur", "RandAugment", "AugMix",
           "RandomShear", "RandomPerspective", "RandomErasing", "RandomElasticTransform", "MixUp", "CutMix",
           "Pipeline", "MelSpectrogram", "STFTSpectrogram"]
