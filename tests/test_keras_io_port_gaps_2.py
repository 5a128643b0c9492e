"""What a second round of keras-io ports needed (issue 19's stop 36), one test per behaviour,
each checked against numpy or Keras's documented result."""

import numpy as np
import pytest

import pyggml as keras
from pyggml import layers, ops

RNG = np.random.default_rng(36)


def _asymmetric_images(n=8, size=6):
    # left and right halves differ: a horizontal flip changes every image
    x = RNG.random((n, size, size, 1)).astype(np.float32)
    x[:, :, : size // 2] += 2.0
    return x


class _AugmentedProjection(keras.Model):
    """keras-io shiftvit's pattern: the call starts with a data_augmentation Sequential."""

    def __init__(self):
        super().__init__()
        self.data_augmentation = keras.Sequential([layers.RandomFlip("horizontal")])
        self.flatten = layers.Flatten()
        self.head = layers.Dense(3, use_bias=False)

    def call(self, images):
        return self.head(self.flatten(self.data_augmentation(images)))


def test_augmentation_first_in_a_subclassed_call_augments_in_training_only():
    keras.utils.set_random_seed(1)
    x = _asymmetric_images()
    model = _AugmentedProjection()
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.0), loss="mse")
    target = model.predict(x, verbose=0)                      # inference: the identity
    flat = x.reshape(len(x), -1)
    kernel = model.head.kernel.numpy()
    np.testing.assert_allclose(target, flat @ kernel, rtol=1e-5, atol=1e-5)
    assert model.evaluate(x, target, verbose=0) < 1e-10
    # training: some of the 8 images are flipped, so the loss against the unflipped projection
    # is the mean square of the flipped ones' differences
    losses = [float(model.train_on_batch(x, target)) for _ in range(6)]
    kept, flipped = flat @ kernel, x[:, :, ::-1].reshape(len(x), -1) @ kernel
    most = ((flipped - kept) ** 2).mean()                    # every image flipped
    assert all(0.0 <= loss <= most * 1.0001 for loss in losses)
    assert len({round(loss, 4) for loss in losses}) > 1      # new draws on every batch
    model.free()


def test_an_augmentation_sequential_on_an_array_inside_a_gradient_tape():
    keras.utils.set_random_seed(2)
    aug = keras.Sequential([layers.Rescaling(0.5), layers.RandomCrop(4, 4), layers.RandomFlip("horizontal")])
    dense = layers.Dense(2)
    x = _asymmetric_images(size=6) * 10
    with keras.GradientTape() as tape:
        seen = aug(x, training=True)
        y = dense(layers.Flatten()(seen))
        loss = ops.mean(y ** 2)
    grads = tape.gradient(loss, dense.trainable_weights)
    assert [tuple(g.shape) for g in grads] == [(2, 16), (2,)]
    got = np.asarray(seen)
    assert got.shape == (8, 4, 4, 1)
    # every crop is 0.5 * a 4 x 4 window of its image, flipped or not
    for img, crop in zip(x, got):
        windows = [0.5 * img[i:i + 4, j:j + 4] for i in range(3) for j in range(3)]
        assert any(np.allclose(crop, w, atol=1e-5) or np.allclose(crop, w[:, ::-1], atol=1e-5) for w in windows)
    # and the gradient is that of the loss on those crops
    flat = got.reshape(8, -1)
    out = flat @ dense.kernel.numpy() + dense.bias.numpy()
    want = flat.T @ (2 * out / out.size)
    np.testing.assert_allclose(np.asarray(grads[0]).T, want, rtol=1e-4, atol=1e-6)


def test_a_preprocessing_layer_without_graph_ops_refuses_a_tensor_computed_in_the_graph():
    # (flips, affine resampling, contrast and brightness run as graph ops there: test_keras_io_port_gaps_5)
    class Bad(keras.Model):
        def __init__(self):
            super().__init__()
            self.conv = layers.Conv2D(2, 3, padding="same")
            self.flip = layers.RandomPerspective(seed=1)
            self.head = layers.Dense(1)

        def call(self, x):
            return self.head(layers.Flatten()(self.flip(self.conv(x))))

    with pytest.raises(TypeError, match="runs on the host"):
        Bad()(np.zeros((2, 4, 4, 1), np.float32))


def test_multi_head_attention_takes_query_value_and_key_masks_as_keras():
    q = RNG.random((2, 5, 8)).astype(np.float32)
    v = RNG.random((2, 6, 8)).astype(np.float32)
    qm = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], bool)
    km = np.array([[1, 1, 0, 1, 1, 0], [1, 1, 1, 1, 1, 1]], bool)
    mha = layers.MultiHeadAttention(num_heads=2, key_dim=4)
    # Keras 3.15's MultiHeadAttention replaces an explicit query_mask by the mask the query
    # carries (none here): only the key/value mask holds (checked on real Keras)
    want = np.asarray(mha(q, v, v, attention_mask=km[:, None, :]))
    np.testing.assert_array_equal(np.asarray(mha(query=q, value=v, key=v, query_mask=qm, key_mask=km)), want)
    np.testing.assert_array_equal(np.asarray(mha(query=q, value=v, query_mask=qm, value_mask=km)), want)
    # with an attention mask too: all of them hold
    extra = RNG.random((2, 5, 6)) > 0.3
    np.testing.assert_array_equal(
        np.asarray(mha(query=q, value=v, query_mask=qm, key_mask=km, attention_mask=extra)),
        np.asarray(mha(q, v, attention_mask=km[:, None, :] & extra)))
    # on a functional model's inputs
    qi, vi, qmi, kmi = keras.Input((5, 8)), keras.Input((6, 8)), keras.Input((5,)), keras.Input((6,))
    model = keras.Model([qi, vi, qmi, kmi], mha(query=qi, value=vi, key=vi, query_mask=qmi, key_mask=kmi))
    got = model.predict([q, v, qm.astype(np.float32), km.astype(np.float32)], verbose=0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="query_mask must be of shape"):
        mha(query=q, value=v, query_mask=qm[:, :, None])


@pytest.mark.parametrize("name", ["sparse_categorical_crossentropy", "categorical_crossentropy", "kl_divergence"])
def test_a_loss_function_on_a_tape_gives_one_value_per_sample(name):
    inputs = layers.Input(shape=(4,))
    model = keras.Model(inputs, layers.Dense(5, activation="softmax")(inputs))
    x = RNG.random((25, 4)).astype(np.float32)
    y = RNG.integers(0, 5, 25)
    yt = y if name.startswith("sparse") else np.eye(5, dtype=np.float32)[y]
    fn = getattr(keras.losses, name)
    with keras.GradientTape() as tape:
        loss = fn(yt, model(x))
    assert loss.shape == (25,)
    np.testing.assert_allclose(np.asarray(loss), np.asarray(fn(yt, model.predict(x, verbose=0))), rtol=1e-5)


def test_ops_on_a_tape_s_tensors_after_its_block_keep_keras_s_meaning_and_gradients():
    inp = keras.Input((4,))
    enc = keras.Model(inp, layers.Dense(3)(inp))
    x = RNG.random((8, 4)).astype(np.float32)
    with keras.GradientTape() as tape:
        f = enc(x)
    value = np.asarray(f)
    np.testing.assert_allclose(float(ops.mean(f)), value.mean(), rtol=1e-5)       # not a row mean
    np.testing.assert_allclose(np.asarray(ops.mean(f, axis=0)), value.mean(axis=0), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(ops.normalize(f, axis=1)),
                               value / np.linalg.norm(value, axis=1, keepdims=True), rtol=1e-5)
    # still recorded: a target made after the block has its gradient
    grads = tape.gradient(ops.sum(f), enc.trainable_weights)
    np.testing.assert_allclose(np.asarray(grads[0]), np.tile(x.sum(axis=0), (3, 1)), rtol=1e-5)


def test_a_model_called_on_arrays_augments_as_keras_s_eager_call():
    x = _asymmetric_images(64)
    seq = keras.Sequential([layers.Input((6, 6, 1)), layers.RandomFlip("horizontal"), layers.Rescaling(1.0)])
    flipped = lambda y: int(np.sum(np.any(np.abs(np.asarray(y) - x) > 1e-6, axis=(1, 2, 3))))
    assert 10 < flipped(seq(x)) < 54                 # no training=: the augmentation's own default
    assert 10 < flipped(seq(x, training=True)) < 54
    assert flipped(seq(x, training=False)) == 0
    assert flipped(seq.predict(x, verbose=0)) == 0


def test_layer_activation_is_the_function_as_in_keras():
    dense = layers.Dense(3, activation="relu")
    assert dense.activation is keras.activations.relu
    assert dense.activation.__name__ == "relu" and dense.activation_name == "relu"
    assert dense.get_config()["activation"] == "relu"
    np.testing.assert_array_equal(np.asarray(dense.activation(np.array([-1.0, 2.0]))), [0.0, 2.0])
    assert layers.Dense(2).activation is keras.activations.linear


class _ExtraKeysInTestStep(keras.Model):
    def __init__(self):
        super().__init__()
        self.d = layers.Dense(2, activation="softmax")

    def call(self, x):
        return self.d(x)

    def test_step(self, data):
        x, y = data
        self.compiled_metrics.update_state(y, self(x, training=False))
        return {"loss": 0.5, "aaa": 123.0, **{m.name: m.result() for m in self.metrics if m.name != "loss"}}


def test_evaluate_lists_a_custom_step_s_logs_in_keras_s_order():
    m = _ExtraKeysInTestStep()
    m.compile(optimizer="adam", loss="categorical_crossentropy", metrics=["accuracy", "mse"])
    x = RNG.random((16, 3)).astype(np.float32)
    y = keras.utils.to_categorical(np.arange(16) % 2, 2)
    m.fit(x, y, epochs=1, verbose=0)
    logs = m.evaluate(x, y, verbose=0, return_dict=True)
    # the loss, the compiled metrics in their order, then the other keys sorted (mnist_moe's score[1])
    assert m.evaluate(x, y, verbose=0) == [logs["loss"], logs["accuracy"], logs["mse"], logs["aaa"]]
    assert m.test_on_batch(x, y) == pytest.approx([0.5, logs["accuracy"], logs["mse"], 123.0])


def test_save_and_load_weights_take_keras_s_arguments(tmp_path):
    m = keras.Sequential([keras.Input((3,)), layers.Dense(4), layers.Dense(2)])
    path = str(tmp_path / "w.weights.h5")
    m.save_weights(filepath=path, overwrite=True)
    before = open(path, "rb").read()
    with pytest.raises(FileExistsError, match="overwrite=False"):
        m.save_weights(path, overwrite=False)
    assert open(path, "rb").read() == before
    other = keras.Sequential([keras.Input((3,)), layers.Dense(4), layers.Dense(5)])
    kept = other.get_weights()
    with pytest.raises(keras.errors.GGUFError, match="has shape"):
        other.load_weights(path)
    with pytest.warns(UserWarning, match="kept 2 weight"):
        other.load_weights(filepath=path, skip_mismatch=True)
    got = other.get_weights()
    np.testing.assert_array_equal(got["dense.weight"], m.get_weights()["dense.weight"])
    np.testing.assert_array_equal(got["dense_1.weight"], kept["dense_1.weight"])
    with pytest.raises(TypeError, match="unexpected keyword"):
        m.save(str(tmp_path / "m.keras"), nonsense=1)


def test_random_draws_take_one_value_results_of_ops_as_bounds():
    keras.utils.set_random_seed(3)
    lo, hi = ops.log(3 / 4), ops.log(4 / 3)
    d = np.asarray(keras.random.uniform((1000,), lo, hi))
    assert d.min() >= float(lo) and d.max() < float(hi) and d.std() > 0.1
    n = np.asarray(keras.random.normal((2000,), mean=ops.convert_to_tensor(2.0), stddev=np.array(0.5)))
    assert abs(n.mean() - 2.0) < 0.1 and abs(n.std() - 0.5) < 0.05


def test_summary_of_a_sequential_that_waits_for_data():
    m = keras.Sequential([layers.Conv2D(4, 3), layers.Flatten(), layers.Dense(2)])
    lines = []
    m.summary(print_fn=lines.append)
    text = "\n".join(lines)
    assert "conv2d (Conv2D)" in text and "0 (unbuilt)" in text and "Total params: 0 (unbuilt)" in text
    m.build((None, 8, 8, 1))
    lines.clear()
    m.summary(print_fn=lines.append)
    assert f"Total params: {m.count_params()}" in "\n".join(lines)


def test_concatenate_joins_along_the_batch_axis():
    a, b = RNG.random((2, 3)).astype(np.float32), RNG.random((3, 3)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(layers.Concatenate(axis=0)([a, b])), np.concatenate([a, b]))
    i = keras.Input((3,))
    model = keras.Model(i, layers.Concatenate(axis=0)([i, i * 2.0]))
    np.testing.assert_allclose(model.predict(a, verbose=0), np.concatenate([a, 2 * a]), rtol=1e-6)
    with pytest.raises(ValueError, match="differ outside axis"):
        layers.Concatenate(axis=0)([a, np.ones((2, 4), np.float32)])


def test_long_layer_names_save_and_load(tmp_path):
    name = "input_transformation_block_1_1_batch_norm" * 3
    m = keras.Sequential([keras.Input((3,)), layers.Dense(4, name=name + "_dense"), layers.BatchNormalization(name=name)])
    m.compile(optimizer="adam", loss="mse")
    x = RNG.random((8, 3)).astype(np.float32)
    m.fit(x, np.ones((8, 4), np.float32), epochs=1, verbose=0)
    m.save(str(tmp_path / "m.gguf"))
    back = keras.models.load_model(str(tmp_path / "m.gguf"))
    np.testing.assert_allclose(back.predict(x, verbose=0), m.predict(x, verbose=0), rtol=1e-6)
    with pytest.raises(ValueError, match="1 to 200 chars"):
        layers.Dense(2, name="x" * 201)


class _DictHeads(keras.Model):
    def __init__(self):
        super().__init__()
        self.d = layers.Dense(3)
        self.e = layers.Dense(1)

    def call(self, x):
        h = self.d(x)
        return {"h": h, "score": self.e(h)}


def test_a_subclassed_call_returning_a_dict_trains_and_predicts_a_dict():
    m = _DictHeads()
    m.compile(optimizer="adam", loss={"score": "mse", "h": None})
    x = RNG.random((16, 4)).astype(np.float32)
    hist = m.fit(x, {"score": np.ones((16, 1), np.float32)}, epochs=2, verbose=0)   # no targets for "h"
    assert len(hist.history["loss"]) == 2
    p = m.predict(x, verbose=0)
    assert set(p) == {"h", "score"}
    np.testing.assert_allclose(p["h"], x @ m.d.kernel.numpy() + m.d.bias.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(p["score"], p["h"] @ m.e.kernel.numpy() + m.e.bias.numpy(), rtol=1e-5, atol=1e-6)


class _Center(layers.Layer):
    """Mixes the rows of its batch and counts them in a state."""

    def __init__(self):
        super().__init__()
        self.n = keras.Variable(np.zeros((1,), np.float32), trainable=False)

    def call(self, x):
        self.n.assign(self.n + ops.sum(ops.ones_like(x[:, :1]), axis=0))
        return x - ops.mean(x, axis=0, keepdims=True)


def test_predict_runs_a_short_last_batch_as_its_own_batch():
    inp = keras.Input((3,))
    c = _Center()
    m = keras.Model(inp, c(inp))
    x = RNG.random((100, 3)).astype(np.float32)
    p = m.predict(x, batch_size=32, verbose=0)
    want = np.concatenate([b - b.mean(0, keepdims=True) for b in np.split(x, [32, 64, 96])])
    np.testing.assert_allclose(p, want, rtol=1e-5, atol=1e-6)
    assert float(c.n.numpy()[0]) == 100.0                          # no padded rows counted
    joined = keras.Model(inp, layers.Concatenate(axis=0)([inp, inp * 2.0]))
    got = joined.predict(x[:5], batch_size=4, verbose=0)           # per batch: its rows, then twice them
    np.testing.assert_allclose(got, np.concatenate([x[:4], 2 * x[:4], x[4:5], 2 * x[4:5]]), rtol=1e-6)


def test_the_progress_bar_times_every_step_and_shows_an_array_s_mean(capsys):
    import time

    class Slow(keras.Model):
        def __init__(self):
            super().__init__()
            self.d = layers.Dense(1)

        def call(self, x):
            return self.d(x)

        def train_step(self, data):
            time.sleep(0.2)
            return {"vec": np.array([1.0, 3.0])}

    m = Slow()
    m.compile(optimizer="adam", loss="mse")
    m.fit(np.zeros((8, 3), np.float32), np.zeros((8, 1), np.float32), batch_size=4, epochs=1, verbose=1)
    last = capsys.readouterr().out.strip().splitlines()[-1]
    per_step = float(last.split("ms/step")[0].split()[-1])
    assert per_step >= 190                   # both steps counted (it divided one step's time by two)
    assert "vec: 2.0000" in last


def test_a_metric_result_answers_numpy_and_stays_a_float():
    import json
    m = keras.metrics.Mean()
    m.update_state([1.0, 2.0])
    r = m.result()
    assert isinstance(r, float) and r == 1.5 and r.numpy() == np.float32(1.5)
    assert json.loads(json.dumps({"v": r})) == {"v": 1.5}
    acc = keras.metrics.BinaryAccuracy()
    acc.update_state([1, 0], [0.9, 0.2])
    assert acc.result().numpy() == 1.0


def test_a_sequential_starting_with_text_vectorization_builds_on_a_batch_of_texts():
    texts = np.array(["a b c", "b c d", "c d e", "a a b"])
    tv = layers.TextVectorization(output_mode="tf_idf")
    tv.adapt(texts)
    mlp = keras.Sequential([layers.Dense(4, activation="relu"), layers.Dense(2, activation="sigmoid")])
    mlp.compile(loss="binary_crossentropy", optimizer="adam")
    mlp.fit(tv(texts), np.ones((4, 2), np.float32), epochs=1, verbose=0)
    want = mlp.predict(np.asarray(tv(texts)), verbose=0)
    np.testing.assert_allclose(keras.Sequential([tv, mlp]).predict(texts, verbose=0), want, rtol=1e-6)
    np.testing.assert_allclose(keras.Sequential([tv, mlp]).predict(texts[:, None], verbose=0), want, rtol=1e-6)


def test_string_lookup_takes_ragged_rows_as_keras_s_ragged_tensors():
    terms = [["cs.CV"], ["cs.LG", "stat.ML"], ["cs.CV", "cs.LG", "cs.AI"], []]
    lookup = layers.StringLookup(output_mode="multi_hot")
    lookup.adapt(terms)
    vocab = lookup.get_vocabulary()
    assert sorted(vocab[1:]) == ["cs.AI", "cs.CV", "cs.LG", "stat.ML"]
    want = np.zeros((4, len(vocab)), np.float32)
    for i, row in enumerate(terms):
        for t in row:
            want[i, vocab.index(t)] = 1.0
    np.testing.assert_array_equal(lookup(terms), want)
    np.testing.assert_array_equal(lookup(np.array(terms, dtype=object)), want)
    counts = layers.StringLookup(vocabulary=vocab[1:], output_mode="count")
    np.testing.assert_array_equal(counts([["cs.CV", "cs.CV"], ["x"]])[:, [0, vocab.index("cs.CV")]], [[0, 2], [1, 0]])
    with pytest.raises(ValueError, match="pad them"):
        layers.StringLookup(vocabulary=vocab[1:])(terms)


class _QuotientRemainder(layers.Layer):
    """keras-io memory_efficient_embeddings' quotient-remainder trick."""

    def __init__(self, cast=False):
        super().__init__()
        self.cast = cast
        self.q = layers.Embedding(4, 3)
        self.r = layers.Embedding(4, 3)

    def call(self, idx):
        q, r = ops.floor_divide(idx, 4), ops.mod(idx, 4)
        if self.cast:
            q, r = ops.cast(q, "int32"), ops.cast(r, "int32")
        return self.q(q) * self.r(r)


@pytest.mark.parametrize("cast", [False, True])
def test_embedding_of_ids_computed_in_the_graph_picks_their_rows_and_trains(cast):
    inp = layers.Input(shape=(), dtype="int32")
    qr = _QuotientRemainder(cast)
    model = keras.Model(inp, qr(inp))
    ids = np.arange(16)
    q, r = qr.q.embeddings.numpy(), qr.r.embeddings.numpy()
    np.testing.assert_allclose(model.predict(ids, verbose=0), q[ids // 4] * r[ids % 4], rtol=1e-6)
    # one SGD step on sum(out): d/dq[i] = sum over the ids with i = id // 4 of r[id % 4]
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.1), loss=lambda y, p: ops.sum(p))
    model.train_on_batch(ids, np.zeros((16, 3), np.float32))
    want_q = q - 0.1 * np.stack([r[ids[ids // 4 == i] % 4].sum(axis=0) for i in range(4)])
    np.testing.assert_allclose(qr.q.embeddings.numpy(), want_q, rtol=1e-5, atol=1e-6)
    # an id out of range picks no row (zeros), never reading past the table
    np.testing.assert_array_equal(model.predict(np.array([16, 17]), verbose=0)[:, :], np.zeros((2, 3)))


def test_a_nested_sequential_starting_with_a_lookup_takes_a_string_input(tmp_path):
    vocab = [f"user_{i}" for i in range(10)]
    enc = keras.Sequential([layers.StringLookup(vocabulary=vocab, mask_token=None, num_oov_indices=0),
                            layers.Embedding(10, 4)])
    inp = layers.Input(shape=(), dtype="string", name="user_id")
    head = layers.Dense(1)
    model = keras.Model(inp, head(enc(inp)))
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.1), loss="mse")
    x = np.array(["user_3", "user_0", "user_9"])
    table = enc.layers[1].embeddings.numpy()
    want = table[[3, 0, 9]] @ head.kernel.numpy() + head.bias.numpy()
    np.testing.assert_allclose(model.predict(x, verbose=0), want, rtol=1e-5, atol=1e-6)
    before = table.copy()
    model.fit(np.array(vocab * 4), np.ones(40, np.float32), epochs=1, batch_size=40, verbose=0)
    after = enc.layers[1].embeddings.numpy()
    assert not np.allclose(after, before)                          # the nested table trains
    model.save(str(tmp_path / "m.gguf"))
    back = keras.models.load_model(str(tmp_path / "m.gguf"))
    np.testing.assert_allclose(back.predict(x, verbose=0), model.predict(x, verbose=0), rtol=1e-6)
    assert [l.name for l in model.layers] == [l.name for l in back.layers]


def test_shape_ops_on_a_string_input_run_on_the_host_before_a_lookup(tmp_path):
    inp = layers.Input(name="soil", shape=(), dtype="string")
    lookup = layers.StringLookup(vocabulary=["a", "b", "c"], mask_token=None, num_oov_indices=0, output_mode="binary")
    x = lookup(ops.expand_dims(inp, -1))
    head = layers.Dense(2)
    model = keras.Model(inp, head(x))
    got = model.predict(np.array(["a", "c"]), verbose=0)
    hot = np.array([[1, 0, 0], [0, 0, 1]], np.float32)
    np.testing.assert_allclose(got, hot @ head.kernel.numpy() + head.bias.numpy(), rtol=1e-6)
    model.save(str(tmp_path / "m.gguf"))
    back = keras.models.load_model(str(tmp_path / "m.gguf"))
    np.testing.assert_allclose(back.predict(np.array(["a", "c"]), verbose=0), got, rtol=1e-6)
    inp2 = layers.Input(shape=(1,), dtype="string")
    flat = ops.reshape(inp2, (-1,))
    assert flat.shape == (None,) and flat.dtype == "string"


def test_tape_gradients_answer_numpy():
    inp = keras.Input((4,))
    model = keras.Model(inp, layers.Dense(3, activation="softmax")(inp))
    images = RNG.random((1, 4)).astype(np.float32)
    with keras.GradientTape() as tape:
        tape.watch(images)
        top = model(images)[:, 0]
    grads = tape.gradient(top, images)
    assert grads.numpy().shape == (1, 4) and grads[0].numpy().shape == (4,)


class _Block(layers.Layer):
    def __init__(self):
        super().__init__()
        self.dense = layers.Dense(4, kernel_initializer="ones")
        self.drop = layers.Dropout(0.5)

    def call(self, x, height, training):
        return ops.reshape(self.drop(self.dense(x), training), (-1, height, 2))


def test_numbers_and_flags_given_by_position_reach_call_by_name():
    # CaiT's self.drop(x, training); focal modulation's block(x, height, width, channels)
    inp = keras.Input((4,))
    block = _Block()
    model = keras.Model(inp, block(inp, 2, False))
    x = np.ones((3, 4), np.float32)
    np.testing.assert_allclose(model.predict(x, verbose=0), np.full((3, 2, 2), 4.0) + 0.0, rtol=1e-6)
    dropped = np.asarray(block(x, 2, True))                     # training: half of them dropped, x2
    assert set(np.unique(dropped)) <= {0.0, 8.0} and (dropped == 0).any()


class _OwnBuild(keras.Model):
    def build(self, input_shape):
        self.w = self.add_weight(shape=(input_shape[-1], 2), initializer="ones")
        self.dense = layers.Dense(1, kernel_initializer="ones")
        super().build(input_shape)

    def call(self, x):
        return self.dense(x @ self.w)


def test_a_subclassed_model_s_own_build_runs_before_its_first_call():
    m = _OwnBuild()
    m.compile(optimizer="adam", loss="mse")
    x = RNG.random((8, 4)).astype(np.float32)
    m.fit(x, np.zeros((8, 1), np.float32), epochs=1, verbose=0)
    assert len(m.trainable_weights) == 3
    np.testing.assert_allclose(m.predict(x, verbose=0), x @ m.w.numpy() @ m.dense.kernel.numpy() + m.dense.bias.numpy(),
                               rtol=1e-5, atol=1e-6)


def test_an_image_preprocessing_sequential_takes_one_image():
    img = RNG.integers(0, 255, size=(8, 8, 3)).astype(np.uint8)
    aug = keras.Sequential([layers.Rescaling(1 / 255.0), layers.Resizing(12, 12)])
    out = np.asarray(aug(img))
    assert out.shape == (12, 12, 3)
    np.testing.assert_allclose(out, np.asarray(aug(img[None]))[0], rtol=1e-6)


def test_attention_broadcasts_a_query_batch_of_one():
    att = layers.Attention(use_scale=False)
    q = RNG.random((1, 3, 8)).astype(np.float32)
    kv = RNG.random((5, 6, 8)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(att([q, kv, kv])), np.asarray(att([np.repeat(q, 5, 0), kv, kv])),
                               rtol=1e-6)


def test_an_embedding_of_computed_ids_refuses_a_one_hot_too_large():
    class Big(layers.Layer):
        def __init__(self):
            super().__init__()
            self.e = layers.Embedding(200_000, 2)

        def call(self, x):
            return self.e(ops.mod(x, 7))

    i = keras.Input((1000,), dtype="int32")
    model = keras.Model(i, Big()(i))                    # traced on a stand-in batch: shapes only
    with pytest.raises(ValueError, match="one-hot of 1000 x 200000"):
        model.predict(np.zeros((1, 1000), np.int32), verbose=0)
