"""Core layers: Dense, EinsumDense, activations, Dropout, reshaping, Embedding, Lambda,
Masking, the noise layers and ActivityRegularization."""

from pyggml.layers.core.activation import ELU, Activation, LeakyReLU, ReLU, Softmax
from pyggml.layers.core.activity_regularization import ActivityRegularization
from pyggml.layers.core.dense import Dense
from pyggml.layers.core.dropout import Dropout, SpatialDropout1D, SpatialDropout2D
from pyggml.layers.core.einsum_dense import EinsumDense
from pyggml.layers.core.embedding import Embedding
from pyggml.layers.core.reversible_embedding import ReversibleEmbedding
from pyggml.layers.core.lambda_layer import Lambda
from pyggml.layers.core.masking import Masking
from pyggml.layers.core import symbolic_op  # noqa: F401  (Keras's ops on symbolic nodes)
from pyggml.layers.core.noise import AlphaDropout, GaussianDropout, GaussianNoise
from pyggml.layers.core.padding import Cropping1D, Cropping2D, ZeroPadding1D, ZeroPadding2D
from pyggml.layers.core.prelu import PReLU
from pyggml.layers.core.reshaping import Flatten, Identity, Permute, RepeatVector, Reshape
from pyggml.layers.core.up_sampling import UpSampling1D, UpSampling2D
from pyggml.layers.core.volumes import Cropping3D, SpatialDropout3D, UpSampling3D, ZeroPadding3D

__all__ = ["Dense", "Activation", "ReLU", "LeakyReLU", "ELU", "Softmax", "Dropout", "Flatten", "Reshape",
           "Permute", "RepeatVector", "Embedding", "ReversibleEmbedding", "PReLU", "UpSampling1D", "UpSampling2D", "SpatialDropout1D",
           "SpatialDropout2D", "Identity", "ZeroPadding1D", "ZeroPadding2D", "Cropping1D", "Cropping2D", "EinsumDense",
           "Lambda", "Masking", "GaussianNoise", "GaussianDropout", "AlphaDropout", "ActivityRegularization",
           "ZeroPadding3D", "Cropping3D", "UpSampling3D", "SpatialDropout3D"]
