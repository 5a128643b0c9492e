"""Keras's ``text_dataset_from_directory``, ``image_dataset_from_directory`` and
``split_dataset``: files in class folders as a ``Dataset`` of batches.

The folder layout is Keras's: with ``labels="inferred"`` every subfolder of
``directory`` is a class (in alphanumeric order, or ``class_names``'s), and its
files, at any depth, are that class's samples.  Files are listed in sorted
order; with ``shuffle`` (the default) the list is shuffled once with ``seed``
before any validation split (the last ``validation_split`` of it is the
validation subset), and the batches are shuffled again every epoch.  The
returned dataset has ``class_names`` and ``file_paths``.  Files are read when a
batch is made, not up front.
"""

import os
import stat

import numpy as np

from pyggml import config
from pyggml._validation import is_int, is_number
from pyggml.utils.dataset_utils import Dataset
from pyggml.utils.image_utils import INTERPOLATIONS, img_to_array, load_img, resize_images

__all__ = ["text_dataset_from_directory", "image_dataset_from_directory", "split_dataset"]

TEXT_EXTENSIONS = (".txt",)
IMAGE_EXTENSIONS = (".bmp", ".gif", ".jpeg", ".jpg", ".png")


def _regular_file(path):
    """Only regular files (or links to them) are read: a named pipe would block forever,
    and a link to a device (/dev/zero) would be read until memory runs out."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode)


def _list_files(directory, extensions, labels, class_names, follow_links):
    """(paths, integer labels or None, class names) in Keras's order (sorted)."""
    if not isinstance(directory, (str, os.PathLike)) or not os.path.isdir(directory):
        raise ValueError(f"directory must be an existing folder, got {directory!r}")

    def files_under(root):
        found = []
        seen = set()                     # folders by (device, inode): a symlink cycle is walked once
        for dirpath, dirnames, filenames in os.walk(root, followlinks=bool(follow_links)):
            st = os.stat(dirpath)
            if (st.st_dev, st.st_ino) in seen:
                dirnames[:] = []
                continue
            seen.add((st.st_dev, st.st_ino))
            dirnames.sort()
            found += [p for p in (os.path.join(dirpath, f) for f in sorted(filenames) if f.lower().endswith(extensions))
                      if _regular_file(p)]
        return sorted(found)

    if labels == "inferred":
        folders = sorted(d for d in os.listdir(directory) if os.path.isdir(os.path.join(directory, d)))
        if class_names is not None:
            if not isinstance(class_names, (list, tuple)) or not all(isinstance(c, str) for c in class_names):
                raise ValueError(f"class_names must be a list of folder names, got {class_names!r}")
            if sorted(class_names) != folders:
                raise ValueError(f"class_names {list(class_names)} must name exactly the subfolders of "
                                 f"{directory}: {folders}")
            folders = list(class_names)
        paths, ids = [], []
        for k, name in enumerate(folders):
            found = files_under(os.path.join(directory, name))
            paths += found
            ids += [k] * len(found)
        return paths, np.asarray(ids, dtype=np.int64), folders
    if class_names is not None:
        raise ValueError("class_names is only used with labels='inferred'")
    paths = files_under(directory)
    if labels is None:
        return paths, None, None
    if not isinstance(labels, (list, tuple, np.ndarray)):
        raise ValueError(f"labels must be 'inferred', None, or a list of labels, one per file, got {labels!r}")
    ids = np.asarray(labels)
    if ids.ndim != 1 or len(ids) != len(paths):
        raise ValueError(f"labels must hold one label per file: {len(paths)} files found in {directory}, "
                         f"got {ids.shape[0] if ids.ndim else 0} labels")
    if ids.dtype.kind not in "iu":
        raise ValueError(f"labels given as a list must be ints, got dtype {ids.dtype}")
    return paths, ids.astype(np.int64), None


def _select(paths, ids, shuffle, seed, validation_split, subset, verbose):
    """Shuffle once with the seed, then cut the validation subset (Keras's rules)."""
    if validation_split is not None:
        if not is_number(validation_split) or not 0 < validation_split < 1:
            raise ValueError(f"validation_split must be a number between 0 and 1, got {validation_split!r}")
        if subset not in ("training", "validation", "both"):
            raise ValueError(f"with validation_split, subset must be 'training', 'validation' or 'both', "
                             f"got {subset!r}")
        if shuffle and seed is None:
            raise ValueError("validation_split with shuffle needs a seed, so that the training and validation "
                             "subsets do not overlap")
    elif subset is not None:
        raise ValueError("subset is only used with validation_split")
    if seed is not None and (not is_int(seed) or seed < 0):
        raise ValueError(f"seed must be a non-negative int or None, got {seed!r}")
    if shuffle:
        seed = int(np.random.randint(1_000_000)) if seed is None else int(seed)
        order = np.random.RandomState(seed).permutation(len(paths))
        paths = [paths[i] for i in order]
        ids = None if ids is None else ids[order]
    if validation_split is None:
        return [(paths, ids)], seed
    n_val = int(validation_split * len(paths))
    train = (paths[:len(paths) - n_val], None if ids is None else ids[:len(paths) - n_val])
    val = (paths[len(paths) - n_val:], None if ids is None else ids[len(paths) - n_val:])
    if verbose:
        if subset in ("training", "both"):
            config.print_msg(f"Using {len(train[0])} files for training.")
        if subset in ("validation", "both"):
            config.print_msg(f"Using {len(val[0])} files for validation.")
    parts = {"training": [train], "validation": [val], "both": [train, val]}[subset]
    return parts, seed


def _label_array(ids, label_mode, num_classes):
    if label_mode == "int":
        return ids.astype(np.int32)
    if label_mode == "binary":
        return ids.astype(np.float32)[:, None]
    out = np.zeros((len(ids), num_classes), dtype=np.float32)
    out[np.arange(len(ids)), ids] = 1.0
    return out


def _check_label_mode(label_mode, labels, num_classes):
    if label_mode not in ("int", "categorical", "binary", None):
        raise ValueError(f"label_mode must be 'int', 'categorical', 'binary' or None, got {label_mode!r}")
    if labels is None and label_mode is not None:
        return None                          # no labels at all: the dataset yields inputs only
    if label_mode == "binary" and num_classes != 2:
        raise ValueError(f"label_mode='binary' needs exactly 2 classes, found {num_classes}")
    return label_mode


def _build(directory, extensions, what, labels, label_mode, class_names, batch_size, shuffle, seed,
           validation_split, subset, follow_links, verbose, read, batch=None):
    """The datasets of a *_dataset_from_directory call: read(path) -> one sample's array;
    batch(dataset, batch_size) -> its batches (default: ``dataset.batch``)."""
    if batch_size is not None and (not is_int(batch_size) or batch_size <= 0):
        raise ValueError(f"batch_size must be a positive int or None, got {batch_size!r}")
    paths, ids, names = _list_files(directory, extensions, labels, class_names, follow_links)
    num_classes = len(names) if names is not None else (int(ids.max()) + 1 if ids is not None and len(ids) else 0)
    label_mode = _check_label_mode(label_mode, ids, num_classes)
    if verbose:
        config.print_msg(f"Found {len(paths)} files" +
                         (f" belonging to {num_classes} classes." if ids is not None else "."))
    if not paths:
        raise ValueError(f"no {what} files found in {directory} (allowed: {', '.join(extensions)})")
    parts, seed = _select(paths, ids, shuffle, seed, validation_split, subset, verbose)
    datasets = []
    for k, (ps, ys) in enumerate(parts):
        samples = Dataset(len(ps), lambda i, ps=ps: read(ps[i]))
        if label_mode is not None:
            labels_ds = Dataset.from_tensor_slices(_label_array(ys, label_mode, num_classes))
            samples = Dataset.zip((samples, labels_ds))
        if shuffle:
            samples = samples.shuffle(8 * (batch_size or 1), seed=seed + k)
        if batch_size is not None:
            samples = samples.batch(batch_size) if batch is None else batch(samples, batch_size)
        samples.class_names = names
        samples.file_paths = list(ps)
        datasets.append(samples)
    return datasets[0] if len(datasets) == 1 else tuple(datasets)


def text_dataset_from_directory(directory, labels="inferred", label_mode="int", class_names=None, batch_size=32,
                                max_length=None, shuffle=True, seed=None, validation_split=None, subset=None,
                                follow_links=False, verbose=True):
    """The ``.txt`` files under ``directory`` as a dataset of (texts, labels) batches: the
    texts a numpy array of str (at most ``max_length`` characters each), the labels ints
    (``label_mode="int"``), one-hot floats ("categorical") or (n, 1) floats ("binary")."""
    if max_length is not None and (not is_int(max_length) or max_length <= 0):
        raise ValueError(f"max_length must be a positive int or None, got {max_length!r}")

    def read(path):
        with open(path, "rb") as f:
            text = f.read().decode("utf-8", errors="replace")
        return np.asarray(text if max_length is None else text[:max_length])
    return _build(directory, TEXT_EXTENSIONS, "text", labels, label_mode, class_names, batch_size, shuffle, seed,
                  validation_split, subset, follow_links, verbose, read)


def image_dataset_from_directory(directory, labels="inferred", label_mode="int", class_names=None,
                                 color_mode="rgb", batch_size=32, image_size=(256, 256), shuffle=True, seed=None,
                                 validation_split=None, subset=None, interpolation="bilinear", follow_links=False,
                                 crop_to_aspect_ratio=False, pad_to_aspect_ratio=False, data_format=None,
                                 verbose=True):
    """The image files (bmp, gif, jpeg, png) under ``directory`` as a dataset of
    (images, labels) batches: float32 images of ``image_size`` (height, width), values
    0-255, channels last (or first), resized with ``interpolation``, center-cropped
    (``crop_to_aspect_ratio``) or padded with zeros (``pad_to_aspect_ratio``) to the
    target's aspect ratio first.  Needs Pillow."""
    from pyggml.utils.image_utils import _data_format, _size
    channels = {"grayscale": 1, "rgb": 3, "rgba": 4}
    if not isinstance(color_mode, str) or color_mode not in channels:
        raise ValueError(f"color_mode must be 'grayscale', 'rgb' or 'rgba', got {color_mode!r}")
    size = _size("image_size", image_size)
    if interpolation not in INTERPOLATIONS:
        raise ValueError(f"interpolation must be one of {', '.join(INTERPOLATIONS)}, got {interpolation!r}")
    if crop_to_aspect_ratio and pad_to_aspect_ratio:
        raise ValueError("crop_to_aspect_ratio and pad_to_aspect_ratio cannot both be set")
    fmt = _data_format(data_format)

    def read(path):
        if pad_to_aspect_ratio:
            a = img_to_array(load_img(path, color_mode=color_mode))
            a = _pad_to_ratio(a, *size)
            a = a if a.shape[:2] == size else resize_images(a, size, interpolation)
        else:
            a = img_to_array(load_img(path, color_mode=color_mode, target_size=size, interpolation=interpolation,
                                      keep_aspect_ratio=bool(crop_to_aspect_ratio)))
        return np.ascontiguousarray(a.transpose(2, 0, 1)) if fmt == "channels_first" else a
    return _build(directory, IMAGE_EXTENSIONS, "image", labels, label_mode, class_names, batch_size, shuffle, seed,
                  validation_split, subset, follow_links, verbose, read)


def _pad_to_ratio(a, th, tw):
    """Zeros around the image (centered) up to the target's aspect ratio."""
    h, w = a.shape[:2]
    ph, pw = max(h, int(round(w * th / tw))), max(w, int(round(h * tw / th)))
    out = np.zeros((ph, pw, a.shape[2]), dtype=a.dtype)
    top, left = (ph - h) // 2, (pw - w) // 2
    out[top:top + h, left:left + w] = a
    return out


def split_dataset(dataset, left_size=None, right_size=None, shuffle=False, seed=None):
    """Two datasets from one (arrays, a tuple or dict of arrays, or a finite Dataset of
    elements): ``left_size`` and ``right_size`` as counts (ints) or fractions (floats);
    one of them None takes the rest (both None: 0.5 each)."""
    if isinstance(dataset, Dataset):
        n = dataset._finite("split_dataset")
        source = dataset
    else:
        source = Dataset.from_tensor_slices(dataset if not isinstance(dataset, list) else tuple(dataset))
        n = len(source)

    def count(name, v):
        if v is None:
            return None
        if is_int(v):
            if not 0 <= v <= n:
                raise ValueError(f"{name} as a count must be from 0 to the dataset's size {n}, got {v}")
            return int(v)
        if is_number(v):
            if not 0 < v < 1:
                raise ValueError(f"{name} as a fraction must be between 0 and 1, got {v}")
            return int(round(v * n))
        raise TypeError(f"{name} must be an int, a float or None, got {type(v).__name__}")
    left, right = count("left_size", left_size), count("right_size", right_size)
    if left is None and right is None:
        left = n // 2
    if left is None:
        left = n - right
    if right is None:
        right = n - left
    if left + right > n:
        raise ValueError(f"left_size and right_size add up to {left + right}, more than the dataset's {n} elements")
    if shuffle:
        if seed is not None and (not is_int(seed) or seed < 0):
            raise ValueError(f"seed must be a non-negative int or None, got {seed!r}")
        order = np.random.default_rng(seed).permutation(n)
    else:
        order = np.arange(n)
    lo, hi = order[:left], order[left:left + right]
    return (Dataset(left, lambda i: source[int(lo[i])], [source]),
            Dataset(right, lambda i: source[int(hi[i])], [source]))
