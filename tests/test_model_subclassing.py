"""Keras's model subclassing (layers made in __init__, the forward pass in
call), as keras-io's collaborative_filtering_movielens writes its
RecommenderNet; and Keras's initializers by name and as objects."""

import numpy as np
import pytest

import pyggml as pg
from pyggml import layers, ops

RNG = np.random.default_rng(5)


class RecommenderNet(pg.Model):
    def __init__(self, num_users, num_movies, embedding_size, **kwargs):
        super().__init__(**kwargs)
        self.user_embedding = layers.Embedding(num_users, embedding_size, embeddings_initializer="he_normal",
                                               embeddings_regularizer=pg.regularizers.l2(1e-6))
        self.user_bias = layers.Embedding(num_users, 1)
        self.movie_embedding = layers.Embedding(num_movies, embedding_size, embeddings_initializer="he_normal",
                                                embeddings_regularizer=pg.regularizers.l2(1e-6))
        self.movie_bias = layers.Embedding(num_movies, 1)

    def call(self, inputs):
        users, movies = inputs                  # id vectors (n,), as Keras gives them
        dot = ops.sum(self.user_embedding(users) * self.movie_embedding(movies), axis=1, keepdims=True)
        return ops.sigmoid(dot + self.user_bias(users) + self.movie_bias(movies))


def _reference(w, users, movies):
    ue, me = w["recommender_net.user_embedding.weight"], w["recommender_net.movie_embedding.weight"]
    ub, mb = w["recommender_net.user_bias.weight"], w["recommender_net.movie_bias.weight"]
    z = (ue[users] * me[movies]).sum(1, keepdims=True) + ub[users] + mb[movies]
    return 1 / (1 + np.exp(-z))


def test_recommender_net_compiles_before_its_graph_exists_and_trains(tmp_path):
    users, movies = RNG.integers(0, 20, 200), RNG.integers(0, 30, 200)
    y = RNG.uniform(0, 1, 200)
    model = RecommenderNet(20, 30, 6)
    with pytest.raises(ValueError, match="not built yet"):
        model.summary()
    model.compile(loss=pg.losses.BinaryCrossentropy(), optimizer=pg.optimizers.Adam(learning_rate=0.01))
    assert isinstance(model.optimizer, pg.optimizers.Adam)
    history = model.fit([users, movies], y, batch_size=64, epochs=3, verbose=0,
                        validation_data=([users[:20], movies[:20]], y[:20]))
    assert history.history["loss"][-1] < history.history["loss"][0]
    w = model.get_weights()
    assert sorted(w) == ["recommender_net.movie_bias.weight", "recommender_net.movie_embedding.weight",
                         "recommender_net.user_bias.weight", "recommender_net.user_embedding.weight"]
    np.testing.assert_allclose(model.predict([users[:7], movies[:7]], verbose=0),
                               _reference(w, users[:7], movies[:7]), rtol=1e-5)
    # the weights go to a model made by the same code; the architecture itself is code, not config
    path = str(tmp_path / "w.gguf")
    model.save_weights(path)
    twin = RecommenderNet(20, 30, 6)
    twin([users[:1], movies[:1]])                 # built on a first call (int inputs: Embedding indices)
    twin.load_weights(path)
    np.testing.assert_allclose(twin([users[:7], movies[:7]]), _reference(w, users[:7], movies[:7]), rtol=1e-5)
    # Keras 3 saves a subclassed model whose constructor took basic values (recorded), with the
    # shapes its graph was built for; loading makes it again by that code
    model.save(str(tmp_path / "m.gguf"))
    back = pg.load_model(str(tmp_path / "m.gguf"), custom_objects={"RecommenderNet": RecommenderNet})
    np.testing.assert_allclose(back.predict([users[:7], movies[:7]], verbose=0),
                               _reference(w, users[:7], movies[:7]), rtol=1e-5)
    back.free()
    model.free()
    twin.free()


class Classifier(pg.Model):
    def __init__(self):
        super().__init__()
        self.hidden = layers.Dense(8, activation="relu")
        self.dropout = layers.Dropout(0.5)
        self.out = layers.Dense(3, activation="softmax")

    def call(self, inputs, training=False):
        return self.out(self.dropout(self.hidden(inputs), training=training))


def test_training_flag_and_a_symbolic_first_call():
    model = Classifier()
    inputs = pg.Input((4,))
    outputs = model(inputs)                       # as keras-io does: builds on the input's shape
    assert outputs.shape == (None, 3)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    x, y = RNG.normal(size=(32, 4)), RNG.integers(0, 3, 32)
    model.fit(x, y, epochs=2, batch_size=8, verbose=0)
    w = model.get_weights()
    h = np.maximum(x @ w["classifier.hidden.weight"].T + w["classifier.hidden.bias"], 0)
    z = h @ w["classifier.out.weight"].T + w["classifier.out.bias"]
    want = np.exp(z - z.max(1, keepdims=True))
    want /= want.sum(1, keepdims=True)
    np.testing.assert_allclose(model.predict(x, verbose=0), want, rtol=1e-4, atol=1e-6)    # dropout off
    assert model.count_params() == 4 * 8 + 8 + 8 * 3 + 3
    model.free()


class _Regressor(pg.Model):
    def __init__(self):
        super().__init__()
        self.hidden = layers.Dense(8, activation="relu")
        self.out = layers.Dense(3)

    def call(self, inputs):
        return self.out(self.hidden(inputs))


def test_a_generator_builds_it_from_its_first_batch_and_trains_on_every_batch():
    # Keras peeks at a generator's first batch to build the model; that batch is then trained on
    rng = np.random.default_rng(5)
    batches = [(rng.standard_normal((2, 4)).astype(np.float32), rng.standard_normal((2, 3)).astype(np.float32))
               for _ in range(3)]
    model = _Regressor().compile(optimizer=pg.optimizers.SGD(learning_rate=0.1), loss="mse", seed=3)
    model.fit((b for b in batches), epochs=1, shuffle=False, verbose=0)
    assert model.optimizer.iterations == 3
    # the same three steps by hand, from the same drawn weights
    twin = _Regressor().compile(optimizer=pg.optimizers.SGD(learning_rate=0.1), loss="mse", seed=3)
    twin.build((None, 4))
    for bx, by in batches:
        twin.train_on_batch(bx, by)
    got, want = model.get_weights(), twin.get_weights()
    assert sorted(got) == sorted(want)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=1e-6)


def test_an_empty_generator_cannot_build_it():
    model = Classifier().compile(loss="mse")
    with pytest.raises(ValueError, match="yields no batch"):
        model.fit((b for b in []), epochs=1, verbose=0)


# --- initializers ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name, scale, fan, truncated", [
    ("he_normal", 2.0, "in", True), ("he_uniform", 2.0, "in", False), ("lecun_normal", 1.0, "in", True),
    ("lecun_uniform", 1.0, "in", False), ("glorot_normal", 1.0, "avg", True), ("HeNormal", 2.0, "in", True),
])
def test_variance_scaling_initializers_have_keras_s_spread(name, scale, fan, truncated):
    rng = np.random.default_rng(0)
    shape = (300, 200)                                     # pyggml's (out, in): fan_in 200, fan_out 300
    a = pg.initializers.get(name)(shape, rng, "out_in").astype(np.float64)
    n = 200 if fan == "in" else 250
    np.testing.assert_allclose(a.std(), np.sqrt(scale / n), rtol=0.03)
    assert abs(a.mean()) < 0.01 * np.sqrt(scale / n) * 10
    if truncated:
        assert np.abs(a).max() <= 2 * np.sqrt(scale / n) / 0.87962566103423978 + 1e-9
    else:
        assert np.abs(a).max() <= np.sqrt(3 * scale / n) + 1e-9


def test_initializer_objects_and_layers_taking_them():
    a = pg.initializers.HeNormal(seed=3)((4, 5))
    np.testing.assert_array_equal(a, pg.initializers.HeNormal(seed=3)((4, 5)))          # seeded: the same
    np.testing.assert_array_equal(pg.initializers.Constant(0.5)((2, 2)), np.full((2, 2), 0.5))
    r = pg.initializers.RandomNormal(mean=1.0, stddev=0.1, seed=1)((200, 200))
    np.testing.assert_allclose([r.mean(), r.std()], [1.0, 0.1], rtol=0.02)
    t = pg.initializers.TruncatedNormal(stddev=0.1, seed=1)((100, 100))
    assert np.abs(t).max() <= 0.2 + 1e-7
    np.testing.assert_array_equal(pg.initializers.get("identity")((3, 3), None), np.eye(3))
    d = layers.Dense(4, kernel_initializer=pg.initializers.Constant(0.25))
    m = pg.Sequential([pg.Input((2,)), d]).compile(loss="mse")
    np.testing.assert_array_equal(m.get_weights()["dense.weight"], np.full((4, 2), 0.25))
    m.free()
    with pytest.raises(ValueError, match="unknown initializer"):
        pg.initializers.get("he_normalish")
    with pytest.raises(ValueError, match="mode"):
        pg.initializers.VarianceScaling(mode="fan")
    with pytest.raises(ValueError, match="maxval"):
        pg.initializers.RandomUniform(1.0, 0.0)
    with pytest.raises(TypeError, match="seed"):
        pg.initializers.HeNormal(seed="x")
