"""Preprocessing layers (Keras's).

In the graph (their state is non-trainable weights or config): ``Normalization``,
``Rescaling``, ``CategoryEncoding``.  On the host, in numpy, before the graph
(``HostLayer``s; their state is in their config): ``StringLookup``,
``IntegerLookup``, ``Discretization``,
``TextVectorization``, ``Hashing``, ``HashedCrossing``."""

from pyggml.layers.preprocessing.category_encoding import CategoryEncoding
from pyggml.layers.preprocessing.discretization import Discretization
from pyggml.layers.preprocessing.hashed_crossing import HashedCrossing
from pyggml.layers.preprocessing.hashing import Hashing
from pyggml.layers.preprocessing.host_layer import HostLayer
from pyggml.layers.preprocessing.integer_lookup import IntegerLookup
from pyggml.layers.preprocessing.normalization import Normalization
from pyggml.layers.preprocessing.rescaling import Rescaling
from pyggml.layers.preprocessing.string_lookup import StringLookup
from pyggml.layers.preprocessing.text_vectorization import TextVectorization

__all__ = ["HostLayer", "Normalization", "Rescaling", "CategoryEncoding", "StringLookup", "IntegerLookup",
           "Discretization", "TextVectorization", "Hashing", "HashedCrossing"]
