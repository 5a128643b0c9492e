"""``pg.data``: the tf.data names Keras scripts use, on numpy: ``Dataset`` (see
``pyggml.utils.dataset_utils``) and ``AUTOTUNE``.  ``tf.data.Dataset.from_tensor_slices(...)``
in a script becomes ``pg.data.Dataset.from_tensor_slices(...)``."""

from pyggml.utils.dataset_utils import AUTOTUNE, INFINITE_CARDINALITY, UNKNOWN_CARDINALITY, Dataset, TextLineDataset

__all__ = ["Dataset", "TextLineDataset", "AUTOTUNE", "INFINITE_CARDINALITY", "UNKNOWN_CARDINALITY"]
