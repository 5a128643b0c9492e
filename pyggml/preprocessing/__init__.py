"""``pg.preprocessing``: Keras's older home of the data utilities, kept for the
scripts that use it (``keras.preprocessing.sequence.pad_sequences``,
``keras.preprocessing.timeseries_dataset_from_array``,
``keras.preprocessing.image_dataset_from_directory``, ``text_dataset_from_directory``,
``keras.preprocessing.image.load_img`` and its neighbours).  The same
functions live in ``pg.utils``; the preprocessing *layers* are in ``pg.layers``."""

from pyggml.preprocessing import image, sequence
from pyggml.utils.directory_utils import image_dataset_from_directory, text_dataset_from_directory
from pyggml.utils.timeseries_utils import timeseries_dataset_from_array

__all__ = ["sequence", "image", "timeseries_dataset_from_array", "image_dataset_from_directory",
           "text_dataset_from_directory"]
