"""keras-io's structured-data example of collaborative filtering (structured_data/
collaborative_filtering_movielens.py) as a Keras user ports it (``import pyggml as keras``;
MovieLens replaced by small offline ratings of the same form): a subclassed
model of four Embeddings, ``inputs[:, 0]`` slicing, ``ops.tensordot(u, m, 2)`` and
``ops.nn.sigmoid`` (Keras's ``keras.ops.nn`` namespace)."""

import numpy as np
import pytest

import pyggml as keras
from pyggml import layers, ops

EMBEDDING_SIZE = 50


class RecommenderNet(keras.Model):
    def __init__(self, num_users, num_movies, embedding_size, **kwargs):
        super().__init__(**kwargs)
        self.num_users = num_users
        self.num_movies = num_movies
        self.embedding_size = embedding_size
        self.user_embedding = layers.Embedding(
            num_users,
            embedding_size,
            embeddings_initializer="he_normal",
            embeddings_regularizer=keras.regularizers.l2(1e-6),
        )
        self.user_bias = layers.Embedding(num_users, 1)
        self.movie_embedding = layers.Embedding(
            num_movies,
            embedding_size,
            embeddings_initializer="he_normal",
            embeddings_regularizer=keras.regularizers.l2(1e-6),
        )
        self.movie_bias = layers.Embedding(num_movies, 1)

    def call(self, inputs):
        user_vector = self.user_embedding(inputs[:, 0])
        user_bias = self.user_bias(inputs[:, 0])
        movie_vector = self.movie_embedding(inputs[:, 1])
        movie_bias = self.movie_bias(inputs[:, 1])
        dot_user_movie = ops.tensordot(user_vector, movie_vector, 2)
        # Add all the components (including bias)
        x = dot_user_movie + user_bias + movie_bias
        # The sigmoid activation forces the rating to between 0 and 1
        return ops.nn.sigmoid(x)


def _ratings(n):
    rng = np.random.default_rng(3)
    x = np.stack([rng.integers(0, 30, n), rng.integers(0, 40, n)], axis=1)
    user_lean, movie_lean = rng.normal(0, 1.5, 30), rng.normal(0, 1.5, 40)
    return x, (1 / (1 + np.exp(-(user_lean[x[:, 0]] + movie_lean[x[:, 1]])))).astype("float32")


def test_collaborative_filtering_fits_as_the_example_does():
    x, y = _ratings(2000)
    model = RecommenderNet(30, 40, EMBEDDING_SIZE)
    model.compile(loss=keras.losses.BinaryCrossentropy(), optimizer=keras.optimizers.Adam(learning_rate=0.001))
    history = model.fit(x=x, y=y, batch_size=64, epochs=2, verbose=0, validation_split=0.1)
    assert len(history.history["val_loss"]) == 2 and np.all(np.isfinite(history.history["loss"]))
    pred = model.predict(x[:64], verbose=0)
    assert pred.shape == (64, 1) and np.all((pred > 0) & (pred < 1))


def test_collaborative_filtering_steps_as_its_pytorch_twin():
    torch = pytest.importorskip("torch")
    x, y = _ratings(64)
    model = RecommenderNet(30, 40, EMBEDDING_SIZE)
    model.compile(loss=keras.losses.BinaryCrossentropy(), optimizer=keras.optimizers.SGD(learning_rate=0.5))
    model(x[:1])                                                     # built on its first data
    w = model.get_weights()
    assert [k.split(".")[-2] for k in w] == ["user_embedding", "user_bias", "movie_embedding", "movie_bias"]
    ue, ub, me, mb = (torch.tensor(w[k].copy(), requires_grad=True) for k in w)
    u, m, t = torch.tensor(x[:, 0]), torch.tensor(x[:, 1]), torch.tensor(y)[:, None]
    # tensordot over both axes: one sum of every row's dot product, as Keras computes it; the
    # sigmoid's cross-entropy from its logits, as Keras takes it (and both L2 penalties)
    logits = (ue[u] * me[m]).sum() + ub[u] + mb[m]
    loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, t) + \
        1e-6 * ((ue ** 2).sum() + (me ** 2).sum())
    loss.backward()
    assert model.train_on_batch(x, y) == pytest.approx(float(loss.detach()), rel=1e-5)
    for k, v in zip(w, (ue, ub, me, mb)):
        np.testing.assert_allclose(model.get_weights()[k], (v - 0.5 * v.grad).detach().numpy(), rtol=1e-4,
                                   atol=1e-6)


def test_keras_s_ops_namespaces_are_the_same_functions():
    a = np.array([-1.0, 0.5, 2.0], np.float32)
    np.testing.assert_allclose(ops.nn.sigmoid(a), 1 / (1 + np.exp(-a)), rtol=1e-6)
    np.testing.assert_allclose(ops.nn.relu(a), np.maximum(a, 0))
    assert ops.numpy.add(1, 2) == 3
    np.testing.assert_allclose(ops.linalg.inv(np.diag([2.0, 4.0])), np.diag([0.5, 0.25]))
    assert ops.nn.softmax is ops.softmax and "sigmoid" in dir(ops.nn)
    with pytest.raises(AttributeError, match=r"pyggml.ops.nn has no function 'not_an_op'"):
        ops.nn.not_an_op
    inp = keras.Input((3,))
    model = keras.Model(inp, ops.nn.sigmoid(inp))                # on symbolic tensors too
    np.testing.assert_allclose(model.predict(a[None], verbose=0), 1 / (1 + np.exp(-a[None])), rtol=1e-6)
