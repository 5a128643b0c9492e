"""Embedding through the layer harness (integer inputs, no pre-Dense: the
gradient checked is the table's), and its refusal of bad indices."""

import numpy as np
import pytest

import pyggml as pg
from harness import LayerCase, harness_tests

L = pg.layers


def embedding_ref(hs, w, training):
    return w["weight"][hs[0]]


CASES = [
    LayerCase("embedding", lambda: L.Embedding(7, 3), [(4,)], embedding_ref, pre=False, int_input=7),
    LayerCase("embedding_2d_indices", lambda: L.Embedding(5, 2), [(2, 3)], embedding_ref, pre=False, int_input=5),
    LayerCase("embedding_single_index", lambda: L.Embedding(4, 6), [(1,)], embedding_ref, pre=False,
              int_input=4, batch=5),
]


# the harness's four checks over every case (forward, gradient, config, a training step)
test_forward, test_gradient, test_config, test_training_step = harness_tests(CASES)


def test_embedding_weight_layout_and_bad_indices():
    m = pg.Sequential([L.Embedding(10, 4), L.Flatten(), L.Dense(1)], input_shape=(3,)).compile(loss="mse")
    assert m.get_weights()["embedding.weight"].shape == (10, 4)      # (input_dim, output_dim), as PyTorch
    for bad in (np.array([[0, 1, 10]]), np.array([[-1, 0, 0]]), np.array([[0.0, np.nan, 1.0]])):
        with pytest.raises(ValueError, match="indices"):
            m.predict(bad)
    assert m.predict(np.array([[0, 9, 3]])).shape == (1, 1)
    m.free()
