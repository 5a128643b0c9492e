"""``pg.utils``: Keras's utilities for data and models.

- ``to_categorical(y, num_classes=None, dtype="float32")``, ``normalize(x, axis=-1, order=2)``
- ``pad_sequences(sequences, maxlen=None, dtype="int32", padding="pre", truncating="pre", value=0.0)``
- ``PyDataset`` (alias ``Sequence``): a base class for batches made on demand,
  which ``fit``, ``evaluate`` and ``predict`` take
- ``timeseries_dataset_from_array(data, targets, sequence_length, ...)``: sliding windows
  over an array, in batches (a ``PyDataset``; ``take``/``skip``, ``.numpy()`` on its arrays)
- ``Dataset`` (also ``pg.data.Dataset``): tf.data's pipeline calls (``from_tensor_slices``,
  ``map``, ``batch``, ``shuffle``, ``take``, ``prefetch``, ...) on numpy, which ``fit`` takes
- ``text_dataset_from_directory``, ``image_dataset_from_directory``: files in class
  folders as a ``Dataset`` of batches (images need Pillow); ``split_dataset(data, left_size, ...)``
- ``load_img``, ``img_to_array``, ``array_to_img``, ``save_img`` (Pillow)
- ``set_random_seed(seed)``
- ``FeatureSpace(features, output_mode="concat", crosses=None, ...)``: Keras's preprocessing of
  dicts of structured features (normalized, discretized, categorical, hashed, crossed) into one vector
- ``plot_model(model, to_file="model.png", ...)`` and ``model_to_dot(model, ...)``:
  a picture of the layer graph (through graphviz's ``dot`` when it is installed;
  its DOT source and a text rendering otherwise)
- ``get_file(fname=None, origin=None, ..., extract=False, cache_dir=None, force_download=False)``: a
  download into ``$KERAS_HOME`` or ``~/.keras``, atomic, hash-checked, safely unpacked
- ``audio_dataset_from_directory(directory, ..., sampling_rate=None, output_sequence_length=None,
  ragged=False, ...)``: WAV files in class folders (the stdlib's ``wave``)
- ``pack_x_y_sample_weight(x, y=None, sample_weight=None)``, ``unpack_x_y_sample_weight(data)``
- ``Progbar(target, width=20, verbose=1, interval=0.05, stateful_metrics=None, unit_name="step")``
- ``clear_session``, ``enable_interactive_logging``, ``disable_interactive_logging``,
  ``is_interactive_logging_enabled``: the same functions as ``pg.backend``'s and ``pg.config``'s
- Keras's serialization names (the same functions as ``pg.saving``'s): ``register_keras_serializable``,
  ``serialize_keras_object``, ``deserialize_keras_object``, ``custom_object_scope`` (``CustomObjectScope``),
  ``get_custom_objects``, ``get_registered_name``, ``get_registered_object``
"""

from pyggml.backend import clear_session, is_keras_tensor, standardize_dtype
from pyggml.config import disable_interactive_logging, enable_interactive_logging, is_interactive_logging_enabled
from pyggml.saving.object_registration import (CustomObjectScope, custom_object_scope, get_custom_objects,
                                               get_registered_name, register_keras_serializable)
from pyggml.saving.serialization_lib import deserialize_keras_object, get_registered_object, serialize_keras_object
from pyggml.utils.audio_dataset_utils import audio_dataset_from_directory
from pyggml.utils.config_utils import Config
from pyggml.utils.data_packing import pack_x_y_sample_weight, unpack_x_y_sample_weight
from pyggml.utils.dataset_utils import Dataset
from pyggml.utils.feature_space import FeatureSpace
from pyggml.utils.file_utils import get_file
from pyggml.utils.directory_utils import image_dataset_from_directory, split_dataset, text_dataset_from_directory
from pyggml.utils.image_utils import array_to_img, img_to_array, load_img, save_img
from pyggml.utils.model_visualization import model_to_dot, plot_model
from pyggml.utils.numerical_utils import normalize, to_categorical
from pyggml.utils.progbar import Progbar
from pyggml.utils.py_dataset import PyDataset, Sequence
from pyggml.utils.rng_utils import set_random_seed
from pyggml.utils.sequence_utils import pad_sequences
from pyggml.utils.timeseries_utils import timeseries_dataset_from_array

__all__ = ["Config", "to_categorical", "normalize", "pad_sequences", "PyDataset", "Sequence", "set_random_seed",
           "plot_model", "model_to_dot", "timeseries_dataset_from_array", "Dataset", "text_dataset_from_directory",
           "image_dataset_from_directory", "split_dataset", "load_img", "img_to_array", "array_to_img", "save_img",
           "FeatureSpace", "register_keras_serializable", "serialize_keras_object", "deserialize_keras_object",
           "custom_object_scope", "CustomObjectScope", "get_custom_objects", "get_registered_name",
           "get_registered_object", "Progbar", "get_file",
           "pack_x_y_sample_weight", "unpack_x_y_sample_weight", "audio_dataset_from_directory",
           "clear_session", "enable_interactive_logging", "disable_interactive_logging",
           "is_interactive_logging_enabled", "get_source_inputs", "is_keras_tensor", "standardize_dtype"]


def get_source_inputs(tensor):
    """Keras's: the ``Input`` tensors a functional model's tensor is computed from, in the
    order they are first reached (an ``Input`` itself gives ``[tensor]``)."""
    from pyggml.layers.node import Node
    if not isinstance(tensor, Node):
        raise TypeError(f"get_source_inputs takes a functional model's tensor (an Input or a layer's output on "
                        f"one), got {type(tensor).__name__}")
    out, seen, todo = [], set(), [tensor]
    while todo:
        node = todo.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if not node.inputs:
            out.append(node)
        todo.extend(reversed(node.inputs))
    return out
