"""Keras's ``TensorBoard`` callback: the logs as TensorBoard event files, written
by hand (pyggml.callbacks.event_file: no tensorflow or protobuf needed).

As Keras writes them: ``<log_dir>/train`` gets ``epoch_<metric>`` (and
``epoch_learning_rate``) at each epoch's end, ``batch_<metric>`` every
``update_freq`` batches (a global batch count as the step) when update_freq is
"batch" or an int, ``epoch_steps_per_second`` with ``write_steps_per_second``,
weight histograms (``<weight name>/histogram``) every ``histogram_freq`` epochs
(with ``write_images``, also the weights as images, ``<weight name>/image/<i>``, made
Keras's way from its layouts: values clipped to [0, 1], a 2-D kernel with its longer
side across, a bias as a column, a 3-D kernel one image per last-axis channel, at most
3 images a weight), and with ``write_graph`` the model's config (TensorBoard's Graphs tab shows it as
Keras's conceptual graph); ``<log_dir>/validation`` gets the ``val_`` metrics
as ``epoch_<metric>``, and ``evaluate`` outside ``fit`` writes
``evaluation_<metric>_vs_iterations`` there, at the optimizer's iteration count.

Not available: ``profile_batch`` (TensorFlow's profiler) and ``embeddings_freq``
(the projector) raise a ValueError that names them.
"""

import json
import os
import time

import numpy as np

from pyggml._validation import is_int
from pyggml.callbacks.callback import Callback
from pyggml.callbacks.event_file import EventFileWriter, histogram_value, image_value, scalar_value, text_value

__all__ = ["TensorBoard"]


class TensorBoard(Callback):
    """Writes the logs of fit and evaluate for TensorBoard (see the module's notes)."""

    def __init__(self, log_dir="logs", histogram_freq=0, write_graph=True, write_images=False,
                 write_steps_per_second=False, update_freq="epoch", profile_batch=0, embeddings_freq=0,
                 embeddings_metadata=None):
        super().__init__()
        if not isinstance(log_dir, (str, os.PathLike)):
            raise TypeError(f"TensorBoard: log_dir must be a path, got {log_dir!r}")
        if not is_int(histogram_freq) or histogram_freq < 0:
            raise ValueError(f"TensorBoard: histogram_freq must be an int >= 0, got {histogram_freq!r}")
        if update_freq not in ("epoch", "batch") and (not is_int(update_freq) or update_freq < 1):
            raise ValueError(f"TensorBoard: update_freq must be 'epoch', 'batch' or a positive int, "
                             f"got {update_freq!r}")
        if profile_batch not in (0, None, (0, 0)) and profile_batch != [0, 0]:
            raise ValueError("TensorBoard: profile_batch needs TensorFlow's profiler, which pyggml does not have; "
                             "leave it 0")
        if embeddings_freq:
            raise ValueError("TensorBoard: embeddings_freq (the embedding projector) is not available in pyggml; "
                             "leave it 0")
        self.log_dir = os.fspath(log_dir)
        self.histogram_freq = int(histogram_freq)
        self.write_graph = bool(write_graph)
        self.write_images = bool(write_images)
        self.write_steps_per_second = bool(write_steps_per_second)
        self.update_freq = 1 if update_freq == "batch" else update_freq
        self.profile_batch = profile_batch
        self.embeddings_freq = 0
        self.embeddings_metadata = embeddings_metadata
        self._writers = {}
        self._train_step = 0
        self._in_fit = False
        self._epoch_start = None
        self._epoch_steps = 0

    @property
    def _train_dir(self):
        return os.path.join(self.log_dir, "train")

    @property
    def _val_dir(self):
        return os.path.join(self.log_dir, "validation")

    def _writer(self, which):
        w = self._writers.get(which)
        if w is None:
            w = self._writers[which] = EventFileWriter(self._train_dir if which == "train" else self._val_dir)
        return w

    def _close(self):
        for w in self._writers.values():
            w.close()
        self._writers = {}

    def on_train_begin(self, logs=None):
        self._in_fit = True
        self._train_step = int(getattr(getattr(self.model, "optimizer", None), "iterations", 0) or 0)
        if self.write_graph:
            self._write_model_config()

    def _write_model_config(self):
        get_config = getattr(self.model, "get_config", None)
        if get_config is None:
            return
        try:
            cfg = {"class_name": type(self.model).__name__, "config": get_config()}
            text = json.dumps(cfg, default=str)
        except Exception:                            # noqa: BLE001 - a model without a usable config
            return                                   # (subclassed): no graph, training goes on
        self._writer("train").add_values(0, [text_value("keras", text, "graph_keras_model", b"1")])

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch_start = time.time()
        self._epoch_steps = 0

    def on_train_batch_end(self, batch, logs=None):
        self._train_step += 1
        self._epoch_steps += 1
        if self.update_freq == "epoch" or self._train_step % self.update_freq:
            return
        values = [scalar_value(f"batch_{k}", v) for k, v in (logs or {}).items() if _is_number(v)]
        if values:
            self._writer("train").add_values(self._train_step, values)

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        train = [scalar_value(f"epoch_{k}", v) for k, v in logs.items() if not k.startswith("val_") and _is_number(v)]
        if self.write_steps_per_second and self._epoch_start is not None:
            elapsed = max(time.time() - self._epoch_start, 1e-9)
            train.append(scalar_value("epoch_steps_per_second", self._epoch_steps / elapsed))
        if train:
            self._writer("train").add_values(epoch, train)
        val = [scalar_value(f"epoch_{k[4:]}", v) for k, v in logs.items() if k.startswith("val_") and _is_number(v)]
        if val:
            self._writer("validation").add_values(epoch, val)
        if self.histogram_freq and epoch % self.histogram_freq == 0:
            self._write_histograms(epoch)

    def _write_histograms(self, epoch):
        named = getattr(self.model, "named_variables", None)
        if named is None:
            return
        values = [histogram_value(f"{name}/histogram", v.numpy()) for name, v in named()]
        if self.write_images:
            for name, w in self._keras_weights():
                for i, img in enumerate(_weight_images(w)[:3]):
                    values.append(image_value(f"{name}/image/{i}", img))
        if values:
            self._writer("train").add_values(epoch, values)

    def _keras_weights(self):
        """(model weight name, value in Keras's layout) of every layer's weights."""
        out = []
        prefix = {id(v): n for n, v in self.model.named_variables()}
        for layer in getattr(self.model, "layers", []):
            named = layer.named_variables()
            if not named:
                continue
            keras_values = layer.get_weights()            # an int index: Keras's layout
            for k, (n, v) in enumerate(named):
                out.append((prefix.get(id(v), f"{layer.name}.{n}"), np.asarray(keras_values[k])))
        return out

    def on_train_end(self, logs=None):
        self._in_fit = False
        self._close()

    def on_test_end(self, logs=None):
        if self._in_fit:
            return
        step = int(getattr(getattr(self.model, "optimizer", None), "iterations", 0) or 0)
        values = [scalar_value(f"evaluation_{k}_vs_iterations", v) for k, v in (logs or {}).items()
                  if _is_number(v)]
        if values:
            self._writer("validation").add_values(step, values)
        self._close()


def _weight_images(w):
    """Keras's images of one weight: uint8 (height, width, 1) arrays, values clipped to [0, 1]."""
    w = np.squeeze(np.asarray(w, dtype=np.float64))
    if w.ndim == 1:                                       # a bias: one column
        imgs = w.reshape(1, -1, 1, 1)
    elif w.ndim == 2:                                     # a Dense kernel, its longer side across
        imgs = (w.T if w.shape[0] > w.shape[1] else w)[None, :, :, None]
    elif w.ndim == 3:                                     # a 1-D conv kernel: one image per channel
        imgs = np.transpose(w, (2, 0, 1))[..., None]
    elif w.ndim == 4 and w.shape[-1] in (1, 3, 4):       # as Keras: its first axis as the images,
        imgs = w                                          # its last as their channels
    else:
        return []
    return [np.round(np.clip(im, 0.0, 1.0) * 255).astype(np.uint8) for im in imgs]


def _is_number(v):
    try:
        float(v)
    except (TypeError, ValueError):
        return False
    return not isinstance(v, (str, bytes))
