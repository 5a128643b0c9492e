"""``pg.preprocessing.image``: Keras's older home of the image file helpers, the
same functions as ``pg.utils``'s."""

from pyggml.utils.image_utils import array_to_img, img_to_array, load_img, save_img

__all__ = ["load_img", "img_to_array", "array_to_img", "save_img"]
