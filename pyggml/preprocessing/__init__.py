"""``pg.preprocessing``: Keras's older home of the data utilities, kept for the
scripts that use it (``keras.preprocessing.sequence.pad_sequences``,
``keras.preprocessing.timeseries_dataset_from_array``).  The same
functions live in ``pg.utils``; the preprocessing *layers* are in ``pg.layers``."""

from pyggml.preprocessing import sequence
from pyggml.utils.timeseries_utils import timeseries_dataset_from_array

__all__ = ["sequence", "timeseries_dataset_from_array"]
