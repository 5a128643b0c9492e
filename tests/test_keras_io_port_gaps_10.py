"""Gaps found by the tenth round of keras-io ports (handwriting recognition, MelGAN, ...),
each checked against what Keras 3.15 does with the same code."""

import numpy as np
import pytest

import pyggml as keras
from pyggml import layers, ops

RNG = np.random.default_rng(10)


def test_where_with_the_condition_alone_gives_the_indices_of_true_entries():
    # handwriting_recognition: ops.take(label, ops.where(ops.not_equal(label, pad))) strips padding
    label = np.array([3, 4, 99, 99, 7])
    idx = ops.where(ops.not_equal(label, 99))
    assert isinstance(idx, tuple) and len(idx) == 1
    np.testing.assert_array_equal(idx[0], [0, 1, 4])
    np.testing.assert_array_equal(ops.take(label, idx), [[3, 4, 7]])       # Keras's shape (1, 3)
    rows, cols = ops.where(np.array([[0, 2], [1, 0]]))
    np.testing.assert_array_equal(rows, [0, 1])
    np.testing.assert_array_equal(cols, [1, 0])
    assert ops.where(np.zeros(3))[0].shape == (0,)
    # the picking form is unchanged, and one of x1 or x2 alone is refused
    np.testing.assert_array_equal(ops.where(np.array([1, 0, 1]), 5, 6), [5, 6, 5])
    with pytest.raises(ValueError, match="x1 and x2, or neither"):
        ops.where(np.array([1, 0]), 1)


def test_where_alone_inside_a_model_on_computed_values_is_refused_clearly():
    class Strip(layers.Layer):
        def call(self, x):
            return ops.where(x)
    inp = keras.Input((3,))
    with pytest.raises(TypeError, match="nonzero: the number of non-zero entries depends on values"):
        Strip()(inp)


class _OwnStep(keras.Model):
    def __init__(self):
        super().__init__()
        self.d = layers.Dense(1)

    def call(self, x):
        return self.d(x)

    def train_step(self, batch):
        x, y = batch
        with keras.GradientTape() as tape:
            loss = ops.mean(ops.square(self(x) - y))
        grads = tape.gradient(loss, self.trainable_weights)
        self.optimizer.apply_gradients(zip(grads, self.trainable_weights))
        self.seen.append(np.asarray(x)[:, 0].copy())
        return {"loss": loss}


def test_custom_train_step_takes_steps_per_epoch_from_a_repeating_dataset():
    # melgan_spectrogram_inversion: Dataset(...).repeat() with fit(steps_per_epoch=...) and an own
    # train_step; the repeating dataset has no length, which the custom loop asked for
    x = np.arange(10, dtype="f4")[:, None] * np.ones((1, 3), "f4")
    y = x.sum(1, keepdims=True)
    ds = keras.data.Dataset.from_tensor_slices((x, y)).batch(4).repeat()
    m = _OwnStep()
    m.seen = []
    m.compile(optimizer="adam")
    h = m.fit(ds, epochs=3, steps_per_epoch=2, verbose=0)
    assert len(h.history["loss"]) == 3
    # six batches, going on through the repeats: rows 0-3, 4-7, 8-9, 0-3, 4-7, 8-9
    assert [list(b) for b in m.seen] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]] * 2
