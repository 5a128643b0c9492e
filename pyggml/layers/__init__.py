"""Layers with Keras's names, arguments and defaults.

Write your own by subclassing ``Layer`` (see ``pyggml.layers.layer`` for the
contract); register it with ``@pyggml.saving.register_serializable()`` so
that saved models holding it load.
"""

from pyggml import _fold
from pyggml.layers.attention import AdditiveAttention, Attention, GroupedQueryAttention, MultiHeadAttention
from pyggml.layers.convolutional import (Conv1D, Conv1DTranspose, Conv2D, Conv2DTranspose, Conv3D, Conv3DTranspose,
                                         DepthwiseConv1D, DepthwiseConv2D, SeparableConv1D, SeparableConv2D)
from pyggml.layers.core import (Activation, ActivityRegularization, AlphaDropout, Cropping1D, Cropping2D, Cropping3D,
                                Dense, Dropout, ELU, EinsumDense, Embedding, ReversibleEmbedding, Flatten, GaussianDropout, GaussianNoise,
                                Identity, Lambda, LeakyReLU, Masking, PReLU, Permute, ReLU, RepeatVector, Reshape,
                                Softmax, SpatialDropout1D, SpatialDropout2D, SpatialDropout3D, UpSampling1D,
                                UpSampling2D, UpSampling3D, ZeroPadding1D, ZeroPadding2D, ZeroPadding3D)
from pyggml.layers.input_layer import Input, InputLayer
from pyggml.layers.input_spec import InputSpec
from pyggml.layers.layer import Layer
from pyggml.layers.merging import (Add, Average, Concatenate, Dot, Maximum, Minimum, Multiply, Subtract, add, average,
                                   concatenate, dot, maximum, minimum, multiply, subtract)
from pyggml.layers.node import Node
from pyggml.layers.normalization import (BatchNormalization, GroupNormalization, LayerNormalization, RMSNormalization,
                                         UnitNormalization)
from pyggml.layers.pooling import (AdaptiveAveragePooling1D, AdaptiveAveragePooling2D, AdaptiveAveragePooling3D,
                                   AdaptiveMaxPooling1D, AdaptiveMaxPooling2D, AdaptiveMaxPooling3D, AveragePooling1D, AveragePooling2D, AveragePooling3D, GlobalAveragePooling1D,
                                      GlobalAveragePooling2D, GlobalAveragePooling3D, GlobalMaxPooling1D,
                                   GlobalMaxPooling2D, GlobalMaxPooling3D, MaxPooling1D, MaxPooling2D, MaxPooling3D)
from pyggml.layers.preprocessing import (AugMix, AutoContrast, ContrastLimitedAdaptiveHistogramEqualization,
                                         CategoryEncoding, CenterCrop, CutMix, Discretization,
                                         Equalization, HashedCrossing, Hashing, HostLayer, IntegerLookup,
                                         MelSpectrogram, MixUp, Normalization, Pipeline, RandAugment, RandomBrightness,
                                         RandomColorDegeneration, RandomColorJitter, RandomContrast, RandomCrop,
                                         RandomElasticTransform, RandomErasing, RandomFlip, RandomGaussianBlur,
                                         RandomGrayscale, RandomHue, RandomInvert, RandomPerspective,
                                         RandomPosterization, RandomRotation, RandomSaturation, RandomSharpness,
                                         RandomShear, RandomTranslation, RandomZoom, Rescaling, Resizing,
                                         STFTSpectrogram, Solarization, StringLookup, TextVectorization)
from pyggml.layers.recurrent import (Bidirectional, ConvLSTM1D, ConvLSTM2D, GRU, GRUCell, LSTM, LSTMCell, RNN,
                                     SimpleRNN, SimpleRNNCell, StackedRNNCells)
from pyggml.layers.wrappers import SpectralNormalization, TimeDistributed, Wrapper

for _cls in (Dense, Activation, ReLU, LeakyReLU, ELU, Softmax, PReLU, Dropout, SpatialDropout1D, SpatialDropout2D,
             ZeroPadding1D, ZeroPadding2D, Cropping1D, Cropping2D, Conv1D, Conv2D, Conv1DTranspose, Conv2DTranspose,
             BatchNormalization, LayerNormalization, LSTM, GRU, MultiHeadAttention, AveragePooling1D, AveragePooling2D,
             MaxPooling1D, MaxPooling2D, GlobalAveragePooling1D, GlobalAveragePooling2D, GlobalMaxPooling1D,
             GlobalMaxPooling2D, UpSampling1D, UpSampling2D, Add, Subtract, Multiply, Average, Maximum, Minimum,
             Concatenate, RNN, SimpleRNNCell, LSTMCell, GRUCell, StackedRNNCells, DepthwiseConv1D, DepthwiseConv2D,
             SeparableConv1D, SeparableConv2D, Attention, AdditiveAttention, GroupNormalization, EinsumDense, Masking,
             GaussianNoise, GaussianDropout, AlphaDropout, ActivityRegularization, UnitNormalization, Dot,
             RMSNormalization, GroupedQueryAttention, ConvLSTM1D, STFTSpectrogram, Conv3D, Conv3DTranspose,
             MaxPooling3D, AveragePooling3D, GlobalAveragePooling3D, GlobalMaxPooling3D, ZeroPadding3D, UpSampling3D,
             SpatialDropout3D, AdaptiveAveragePooling1D, AdaptiveAveragePooling2D, AdaptiveAveragePooling3D,
             AdaptiveMaxPooling1D, AdaptiveMaxPooling2D, AdaptiveMaxPooling3D):
    _cls.float_inputs = True          # integer inputs reach them as float32 (Layer.float_inputs)

# Keras's other names for the same classes (keras.layers.GlobalAvgPool2D is GlobalAveragePooling2D)
AvgPool1D, AvgPool2D, MaxPool1D, MaxPool2D = AveragePooling1D, AveragePooling2D, MaxPooling1D, MaxPooling2D
GlobalAvgPool1D, GlobalAvgPool2D = GlobalAveragePooling1D, GlobalAveragePooling2D
GlobalMaxPool1D, GlobalMaxPool2D = GlobalMaxPooling1D, GlobalMaxPooling2D
Convolution1D, Convolution2D = Conv1D, Conv2D
Convolution1DTranspose, Convolution2DTranspose = Conv1DTranspose, Conv2DTranspose
SeparableConvolution1D, SeparableConvolution2D = SeparableConv1D, SeparableConv2D
GroupQueryAttention = GroupedQueryAttention
AvgPool3D, MaxPool3D, GlobalAvgPool3D, GlobalMaxPool3D = AveragePooling3D, MaxPooling3D, GlobalAveragePooling3D, \
    GlobalMaxPooling3D
Convolution3D, Convolution3DTranspose = Conv3D, Conv3DTranspose
_ALIASES = ["AvgPool3D", "MaxPool3D", "GlobalAvgPool3D", "GlobalMaxPool3D", "Convolution3D", "Convolution3DTranspose",
            "AvgPool1D", "AvgPool2D", "MaxPool1D", "MaxPool2D", "GlobalAvgPool1D", "GlobalAvgPool2D",
            "GlobalMaxPool1D", "GlobalMaxPool2D", "Convolution1D", "Convolution2D", "Convolution1DTranspose",
            "Convolution2DTranspose", "SeparableConvolution1D", "SeparableConvolution2D", "GroupQueryAttention"]

__all__ = ["Layer", "InputLayer", "Input", "InputSpec", "Node", "Dense", "Activation", "ReLU", "LeakyReLU", "ELU", "Softmax",
           "Dropout", "Flatten", "Reshape", "Permute", "Embedding", "ReversibleEmbedding", "Add", "Subtract", "Multiply", "Average",
           "Concatenate", "add", "subtract", "multiply", "average", "concatenate", "Conv1D", "Conv2D", "MaxPooling2D",
           "AveragePooling2D", "GlobalAveragePooling2D", "GlobalMaxPooling2D", "BatchNormalization",
           "LayerNormalization", "LSTM", "GRU", "MultiHeadAttention", "HostLayer", "Normalization", "Rescaling",
           "CategoryEncoding", "StringLookup", "IntegerLookup", "Discretization", "MaxPooling1D", "AveragePooling1D",
           "GlobalAveragePooling1D", "GlobalMaxPooling1D", "UpSampling1D", "UpSampling2D", "Conv1DTranspose",
           "Conv2DTranspose", "Bidirectional", "TimeDistributed", "PReLU", "Maximum", "Minimum", "maximum", "minimum",
           "SimpleRNN", "RepeatVector", "SpatialDropout1D", "SpatialDropout2D", "Identity", "ZeroPadding1D",
           "ZeroPadding2D", "Cropping1D", "Cropping2D", "RNN", "SimpleRNNCell", "LSTMCell", "GRUCell",
           "StackedRNNCells", "DepthwiseConv1D", "DepthwiseConv2D", "SeparableConv1D", "SeparableConv2D", "Attention",
           "AdditiveAttention", "GroupNormalization", "EinsumDense", "TextVectorization", "Hashing", "HashedCrossing",
           "Lambda", "Masking", "GaussianNoise", "GaussianDropout", "AlphaDropout", "ActivityRegularization",
           "UnitNormalization", "RMSNormalization", "Dot", "dot", "Resizing", "CenterCrop", "RandomCrop", "RandomFlip", "RandomRotation",
           "RandomZoom", "RandomTranslation", "RandomContrast", "RandomBrightness", "RandomGrayscale", "RandomHue",
           "RandomSaturation", "RandomSharpness", "Solarization", "RandomInvert", "RandomPosterization",
           "RandomColorDegeneration", "RandomColorJitter", "AutoContrast", "ContrastLimitedAdaptiveHistogramEqualization", "Equalization",
           "RandomGaussianBlur",
           "RandAugment", "AugMix", "GroupedQueryAttention", "ConvLSTM1D", "SpectralNormalization", "Wrapper",
           "RandomShear", "RandomPerspective", "RandomErasing", "RandomElasticTransform", "MixUp", "CutMix",
           "Pipeline", "MelSpectrogram", "STFTSpectrogram", "Conv3D", "MaxPooling3D", "AveragePooling3D",
           "GlobalAveragePooling3D", "GlobalMaxPooling3D", "ZeroPadding3D", "Cropping3D", "UpSampling3D",
           "SpatialDropout3D", "ConvLSTM2D", "Conv3DTranspose", "AdaptiveAveragePooling1D", "AdaptiveAveragePooling2D",
           "AdaptiveAveragePooling3D", "AdaptiveMaxPooling1D", "AdaptiveMaxPooling2D", "AdaptiveMaxPooling3D",
           "serialize", "deserialize"] + _ALIASES


def serialize(layer):
    """Keras's ``keras.layers.serialize``: the layer's class and config as a dict."""
    from pyggml.saving.serialization_lib import serialize_keras_object
    return serialize_keras_object(layer)


def deserialize(config, custom_objects=None):
    """Keras's ``keras.layers.deserialize``: the layer ``serialize`` described, made anew."""
    from pyggml.saving.serialization_lib import deserialize_keras_object
    return deserialize_keras_object(config, custom_objects=custom_objects)

# the layers that take 5-D inputs (volumes, videos), folded (pyggml._fold); element-wise
# and last-axis layers take them as they are, where their arguments keep to the last axis
for _cls in (Activation, ReLU, LeakyReLU, ELU, Dense, Identity, GaussianNoise, GaussianDropout, AlphaDropout,
             ActivityRegularization):
    _cls.takes_5d = True
_fold.FIVE_D_LAYERS[:] = sorted(n for n in __all__ if isinstance(globals().get(n), type) and n not in _ALIASES and
                                issubclass(globals()[n], Layer) and globals()[n].takes_5d is not False)
