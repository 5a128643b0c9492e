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
    LayerCase("reversible_embedding", lambda: L.ReversibleEmbedding(7, 3), [(4,)], embedding_ref, pre=False,
              int_input=7),
    # the reverse direction: vectors (after the pre-Dense) to scores over the vocabulary (untied:
    # test_keras_io_port_gaps_9, where the forward table trains too)
    LayerCase("reversible_embedding_reverse_tied", lambda: L.ReversibleEmbedding(6, 3, logit_soft_cap=2.0), [(4, 3)],
              lambda hs, w, t: 2.0 * np.tanh(hs[0] @ w["weight"].T / 2.0), call=lambda l, xs: l(xs[0], reverse=True),
              sequential=False),
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


class _Lookup(pg.layers.Layer):
    """A user's layer holding an Embedding, fed the model's Input as it is (keras-io's
    TokenAndPositionEmbedding on ``layers.Input(shape=(maxlen,))``, float32 by default)."""

    def __init__(self, scale=None, **kwargs):
        super().__init__(**kwargs)
        self.scale = scale
        self.emb = L.Embedding(6, 2)

    def call(self, x):
        return self.emb(x if self.scale is None else x * self.scale)


def test_embedding_takes_float_indices_fed_to_the_graph_as_keras_casts_them():
    x = pg.Input(shape=(3,))                        # float32, as in the keras-io example
    m = pg.Model(x, _Lookup()(x)).compile(loss="mse")
    (table,) = m.get_weights().values()
    idx = np.array([[0, 5, 2], [1, 1, 4]], dtype=np.float32)
    np.testing.assert_array_equal(m.predict(idx), table[idx.astype(np.int64)])
    # out of range is refused before it reaches ggml (get_rows would abort)
    with pytest.raises(ValueError, match="out of range"):
        m.predict(np.array([[0, 6, 1]], dtype=np.float32))
    m.free()


def test_embedding_of_float_indices_computed_in_the_graph_casts_them_as_keras():
    # ids computed in the graph cannot be checked before compute: a one-hot picks their rows
    # (Keras's cast drops a fraction; an id out of range picks none)
    x = pg.Input(shape=(3,))
    m = pg.Model(x, _Lookup(scale=2.0)(x))
    (table,) = m.get_weights().values()
    idx = np.array([[0.0, 1.25, 2.0], [0.5, 2.9, 3.0]], dtype=np.float32)   # x 2: 0, 2.5, 4 / 1, 5.8, 6
    got = m.predict(idx)
    want = np.stack([table[[0, 2, 4]], np.concatenate([table[[1, 5]], np.zeros((1, 2))])])
    np.testing.assert_allclose(got, want, rtol=1e-6)
    m.free()
