"""What a third round of keras-io ports needed (graph networks, recipes, generative and RL
examples), one test per behaviour, each checked against numpy or Keras's documented result."""

import numpy as np
import pytest

import pyggml as keras
from pyggml import layers, ops

RNG = np.random.default_rng(37)


def _dense_np(layer, x):
    return x @ layer.kernel.numpy() + layer.bias.numpy()


# --- names -----------------------------------------------------------------------------------

class ProjectionBlock(layers.Layer):
    """A custom layer naming its sublayer after itself in __init__ (a common Keras habit)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.proj = layers.Dense(2, name=self.name + "_proj")

    def call(self, x):
        return self.proj(x)


def test_a_layer_has_its_class_s_name_before_it_is_in_a_model():
    assert layers.Dense(3).name == "dense"
    assert ProjectionBlock().proj.name == "projection_block_proj"
    assert ProjectionBlock(name="enc").proj.name == "enc_proj"


def test_a_sequential_names_its_layers_as_they_are_added():
    m = keras.Sequential([keras.Input((4,)), layers.Dense(3), layers.Dense(3), layers.Dense(2, name="head")])
    assert [l.name for l in m.layers] == ["dense", "dense_1", "head"]
    assert m.get_layer("dense_1") is m.layers[1]
    assert [l for l in m.layers if "dense" in l.name] == m.layers[:2]
    assert list(m.get_weights())[:4] == ["dense.weight", "dense.bias", "dense_1.weight", "dense_1.bias"]
    with pytest.raises(ValueError, match="two layers are named 'a'"):
        keras.Sequential([layers.Dense(3, name="a"), layers.Dense(3, name="a")])


# --- compile, then build -----------------------------------------------------------------------

def test_compile_before_build_keeps_the_compile():
    m = keras.Sequential([layers.Dense(3), layers.Dense(1)])
    m.compile(optimizer=keras.optimizers.SGD(0.0), loss="mse")
    m.build((None, 5))
    x, y = RNG.random((8, 5)).astype(np.float32), RNG.random((8, 1)).astype(np.float32)
    p = _dense_np(m.layers[1], _dense_np(m.layers[0], x))
    assert m.evaluate(x, y, verbose=0) == pytest.approx(float(np.mean((p - y) ** 2)), rel=1e-5)
    m.fit(x, y, epochs=1, verbose=0)


# --- subclassed models: dict inputs, id vectors ------------------------------------------------

class _TwoInputs(keras.Model):
    def __init__(self):
        super().__init__()
        self.dense = layers.Dense(1)

    def call(self, inputs):
        return self.dense(inputs["a"]) + inputs["b"]


def test_a_subclassed_model_takes_a_dict_of_inputs_by_key():
    m = _TwoInputs()
    m.compile(optimizer="adam", loss="mse")
    xa, xb = RNG.random((16, 4)).astype(np.float32), RNG.random((16, 1)).astype(np.float32)
    m.fit({"a": xa, "b": xb}, RNG.random((16, 1)), epochs=2, verbose=0)
    want = _dense_np(m.dense, xa) + xb
    np.testing.assert_allclose(m.predict({"b": xb, "a": xa}, verbose=0), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(m({"a": xa, "b": xb}), want, rtol=1e-5, atol=1e-6)


class _NodeLookup(keras.Model):
    """gnn_citations' pattern: node indices (n,) pick rows of a table the model keeps."""

    def __init__(self, table):
        super().__init__()
        self.table = table
        self.dense = layers.Dense(3)

    def call(self, idx):
        return self.dense(ops.take(self.table, idx, axis=0))


def test_a_subclassed_model_takes_a_vector_of_ids_as_keras_gives_it():
    table = RNG.random((50, 8)).astype(np.float32)
    m = _NodeLookup(table)
    idx = np.array([1, 10, 20])
    np.testing.assert_allclose(m(idx), _dense_np(m.dense, table[idx]), rtol=1e-5, atol=1e-6)
    m.compile(optimizer="adam", loss="mse")
    m.fit(np.arange(8), RNG.random((8, 3)), batch_size=4, epochs=1, verbose=0)
    np.testing.assert_allclose(m.predict(np.array([5, 6]), verbose=0), _dense_np(m.dense, table[[5, 6]]),
                               rtol=1e-5, atol=1e-6)


def test_an_array_kept_as_an_attribute_is_read_again_once_replaced():
    m = _NodeLookup(np.ones((5, 8), np.float32))
    idx = np.array([0, 4])
    m.predict(idx, verbose=0)
    m.table = np.full((5, 8), 10.0, np.float32)            # gnn_citations swaps its graph this way
    want = _dense_np(m.dense, m.table[idx])
    np.testing.assert_allclose(m.predict(idx, verbose=0), want, rtol=1e-5)
    np.testing.assert_allclose(m(idx), want, rtol=1e-5)


class _Offset(layers.Layer):
    def __init__(self, offset):
        super().__init__()
        self.offset = offset

    def call(self, x):
        return x + self.offset


def test_a_layer_s_array_attribute_replaced_reaches_a_functional_model():
    layer = _Offset(np.ones((1, 2), np.float32))
    inp = keras.Input((2,))
    m = keras.Model(inp, layer(inp))
    np.testing.assert_array_equal(m.predict(np.zeros((1, 2)), verbose=0), [[1, 1]])
    layer.offset = np.full((1, 2), 5.0, np.float32)
    np.testing.assert_array_equal(m.predict(np.zeros((1, 2)), verbose=0), [[5, 5]])


# --- data: extra keys ---------------------------------------------------------------------------

def test_keys_of_x_no_input_takes_are_ignored_with_a_warning_and_of_y_refused():
    ins = {k: keras.Input((1,), name=k) for k in ("age", "hours")}
    dense = layers.Dense(1)
    m = keras.Model(ins, dense(layers.Concatenate()([ins["age"], ins["hours"]])))
    m.compile(optimizer="adam", loss="mse")
    x = {"age": RNG.random((6, 1)), "hours": RNG.random((6, 1)), "fnlwgt_unused": RNG.random((6, 1))}
    with pytest.warns(UserWarning, match=r"\['fnlwgt_unused'\] that match no model input"):
        p = m.predict(x, verbose=0)
    np.testing.assert_allclose(p, _dense_np(dense, np.hstack([x["age"], x["hours"]])), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="which the model does not have"):
        m.fit(x, {"dense": RNG.random((6, 1)), "other": RNG.random((6, 1))}, verbose=0)


# --- layers ---------------------------------------------------------------------------------------

class _ScaleNoBuildArgs(layers.Layer):
    """keras-io's GRN/VSN: a build() of no arguments ("to remove the build warnings")."""

    def __init__(self):
        super().__init__()
        self.dense = layers.Dense(2)

    def build(self):
        self.built = True

    def call(self, x):
        return self.dense(x) * 2.0


def test_a_build_of_no_arguments_is_called_without_the_shape():
    layer = _ScaleNoBuildArgs()
    inp = keras.Input((3,))
    m = keras.Model(inp, layer(inp))
    x = RNG.random((4, 3)).astype(np.float32)
    np.testing.assert_allclose(m.predict(x, verbose=0), 2 * _dense_np(layer.dense, x), rtol=1e-5, atol=1e-6)


class _Endpoint(layers.Layer):
    def __init__(self):
        super().__init__()
        self.acc = keras.metrics.BinaryAccuracy()

    def call(self, logits, targets):
        self.acc.update_state(targets, logits)
        return ops.sigmoid(logits)


def test_a_metric_updated_in_a_layer_s_call_is_updated_with_each_batch_s_values():
    # (tests/test_metric_in_call.py has keras-io's endpoint layer)
    x, t = keras.Input((4,)), keras.Input((1,))
    dense = layers.Dense(1)
    m = keras.Model([x, t], _Endpoint()(dense(x), t))
    m.compile("adam", "mse")
    xs = RNG.normal(size=(8, 4)).astype(np.float32)
    ts = (RNG.random((8, 1)) > 0.5).astype(np.float32)
    logs = m.evaluate([xs, ts], ts, verbose=0, return_dict=True)
    logits = xs @ dense.kernel.numpy() + dense.bias.numpy()
    assert logs["binary_accuracy"] == pytest.approx(float(np.mean((logits > 0.5) == ts)))


# --- strings into a call of the user's own ---------------------------------------------------------

class _WordEmbedding(layers.Layer):
    """A lookup wrapped in a custom layer (recommender and structured-data examples)."""

    def __init__(self, vocabulary, **kwargs):
        super().__init__(**kwargs)
        self.lookup = layers.StringLookup(vocabulary=vocabulary, mask_token=None, num_oov_indices=0)
        self.emb = layers.Embedding(len(vocabulary), 4)

    def call(self, inputs):
        return self.emb(self.lookup(inputs))


def test_a_string_lookup_in_a_custom_layer_s_call_reads_the_strings():
    inp = keras.Input(shape=(), dtype="string")
    words = _WordEmbedding(["a", "b", "c"])
    head = layers.Dense(1)
    m = keras.Model(inp, head(words(inp)))
    x = np.array(["a", "c", "b", "c"])
    rows = words.emb.embeddings.numpy()[[0, 2, 1, 2]]
    np.testing.assert_allclose(m.predict(x, verbose=0), _dense_np(head, rows), rtol=1e-5, atol=1e-6)
    m.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    before = words.emb.embeddings.numpy()
    m.fit(x, np.ones((4, 1)), epochs=1, verbose=0)
    after = words.emb.embeddings.numpy()
    assert not np.allclose(before[[0, 1, 2]], after[[0, 1, 2]])     # the rows looked up trained


class _Retrieval(keras.Model):
    """keras-rs's retrieval pattern: string ids through Sequential([StringLookup, Embedding])."""

    def __init__(self, users, items):
        super().__init__()
        self.user = keras.Sequential([layers.StringLookup(vocabulary=users), layers.Embedding(len(users) + 1, 8)])
        self.item = keras.Sequential([layers.StringLookup(vocabulary=items), layers.Embedding(len(items) + 1, 8)])

    def call(self, inputs):
        return ops.sum(self.user(inputs["user_id"]) * self.item(inputs["item_id"]), axis=1, keepdims=True)


def test_a_subclassed_model_takes_a_dict_of_string_ids_through_its_lookups():
    m = _Retrieval(["u1", "u2", "u3"], ["i1", "i2"])
    x = {"user_id": np.array(["u1", "u3", "u9"]), "item_id": np.array(["i2", "i1", "i1"])}
    p = m.predict(x, verbose=0)
    users, items = m.user.layers[1].embeddings.numpy(), m.item.layers[1].embeddings.numpy()
    # index 0 is the OOV index ("u9"), then the vocabulary in order
    np.testing.assert_allclose(p[:, 0], (users[[1, 3, 0]] * items[[2, 1, 1]]).sum(1), rtol=1e-5, atol=1e-6)
    m.compile(optimizer="adam", loss="mse")
    history = m.fit(x, np.ones((3, 1)), epochs=5, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0]


# --- logical ops: any non-zero number is true, as Keras's bool ----------------------------------

def test_logical_ops_take_negative_numbers_as_true_in_a_graph_and_on_arrays():
    a = np.array([[-2.0, 0.0, 1.5, -0.5]], np.float32)
    b = np.array([[1.0, -1.0, 0.0, 0.0]], np.float32)
    want = {"and": np.logical_and(a, b), "or": np.logical_or(a, b), "not": np.logical_not(a),
            "xor": np.logical_xor(a, b)}
    got_arrays = {"and": ops.logical_and(a, b), "or": ops.logical_or(a, b), "not": ops.logical_not(a),
                  "xor": ops.logical_xor(a, b)}
    ia, ib = keras.Input((4,)), keras.Input((4,))
    m = keras.Model([ia, ib], [ops.logical_and(ia, ib), ops.logical_or(ia, ib), ops.logical_not(ia),
                               ops.logical_xor(ia, ib)])
    got_graph = dict(zip(["and", "or", "not", "xor"], m.predict([a, b], verbose=0)))
    for k in want:
        np.testing.assert_array_equal(np.asarray(got_arrays[k], np.float32), want[k].astype(np.float32), err_msg=k)
        np.testing.assert_array_equal(got_graph[k], want[k].astype(np.float32), err_msg=k)


# --- fourth round: NLP ports ------------------------------------------------------------------------

class _NormalizedTagger(keras.Model):
    """A subclassed transformer's shape: Embedding, then a normalization layer, then a head."""

    def __init__(self, norm):
        super().__init__()
        self.emb = layers.Embedding(10, 4)
        self.norm = norm
        self.out = layers.Dense(3)

    def call(self, x):
        return self.out(self.norm(self.emb(x)))


@pytest.mark.parametrize("norm", [layers.LayerNormalization, layers.BatchNormalization, layers.RMSNormalization,
                                  lambda: layers.GroupNormalization(groups=2)])
def test_a_subclassed_model_with_a_normalization_takes_other_sequence_lengths(norm):
    m = _NormalizedTagger(norm())
    m.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    m.fit(np.ones((4, 3), np.int32), np.zeros((4, 3), np.int32), verbose=0)
    assert m.predict(np.ones((2, 5), np.int32), verbose=0).shape == (2, 5, 3)


def test_a_nested_model_s_mask_reaches_the_outer_model_s_loss_and_metrics():
    i2 = keras.Input((None,), dtype="int32")
    sub = keras.Model(i2, layers.Dense(3, activation="softmax")(layers.Embedding(10, 4, mask_zero=True)(i2)))
    inp = keras.Input((None,), dtype="int32")
    m = keras.Model(inp, sub(inp))
    m.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    x = np.array([[1, 2, 0, 0], [3, 0, 0, 0]])
    y = np.array([[1, 2, 0, 0], [1, 0, 0, 0]])
    p = m.predict(x, verbose=0)
    ce = -np.log(np.take_along_axis(p, y[..., None], -1)[..., 0])
    real = x != 0                                   # the padded steps count in neither
    loss, acc = m.evaluate(x, y, verbose=0)
    assert loss == pytest.approx(float(ce[real].mean()), rel=1e-5)
    assert acc == pytest.approx(float((p.argmax(-1) == y)[real].mean()), abs=1e-6)


def test_a_lookup_s_output_on_arrays_answers_numpy():
    lookup = layers.StringLookup(output_mode="multi_hot")
    lookup.adapt([["a", "b"], ["b"]])
    got = lookup([["a"], ["b"]]).numpy()
    assert type(got) is np.ndarray and got.shape == (2, 3)


@keras.saving.register_keras_serializable(package="gaps3")
class _OwnLoss(keras.Model):
    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None):
        return ops.mean((y - y_pred) ** 2)


def test_a_model_with_its_own_compute_loss_compiled_without_a_loss_saves_and_loads(tmp_path):
    inp = keras.Input((3,))
    m = _OwnLoss(inp, layers.Dense(1)(inp))
    m.compile(optimizer=keras.optimizers.Adam(0.01))
    x, y = RNG.random((16, 3)).astype(np.float32), RNG.random((16, 1)).astype(np.float32)
    m.fit(x, y, epochs=1, verbose=0)
    path = str(tmp_path / "own_loss.keras")
    m.save(path)
    back = keras.saving.load_model(path)
    assert type(back) is _OwnLoss and back.optimizer.learning_rate == pytest.approx(0.01)
    np.testing.assert_allclose(back.predict(x, verbose=0), m.predict(x, verbose=0), rtol=1e-6)
    back.fit(x, y, epochs=1, verbose=0)


# --- fourth round: vision, timeseries and audio ports ------------------------------------------------

def test_fit_leaves_its_history_on_the_model():
    m = keras.Sequential([keras.Input((3,)), layers.Dense(1)])
    m.compile(optimizer="adam", loss="mse")
    h = m.fit(RNG.random((8, 3)), RNG.random((8, 1)), epochs=2, verbose=0)
    assert m.history is h and len(m.history.history["loss"]) == 2


def test_extract_patches_takes_the_earlier_image_keyword():
    x = RNG.random((1, 4, 4, 2)).astype(np.float32)
    np.testing.assert_array_equal(ops.image.extract_patches(image=x, size=2), ops.image.extract_patches(x, 2))
    with pytest.raises(TypeError, match="give the images once"):
        ops.image.extract_patches(x, 2, image=x)


def test_lowercase_initializer_names_are_keras_s_class_aliases():
    init = keras.initializers.glorot_uniform(seed=3)
    assert isinstance(init, keras.initializers.GlorotUniform)
    np.testing.assert_array_equal(init(shape=(2, 3)), keras.initializers.GlorotUniform(seed=3)(shape=(2, 3)))
    assert isinstance(keras.initializers.zeros(), keras.initializers.Zeros)
    np.testing.assert_array_equal(keras.initializers.constant(value=2.0)(shape=(2,)), [2.0, 2.0])
    layer = layers.Dense(3, kernel_initializer=keras.initializers.he_normal)       # the alias itself
    assert layer(np.ones((1, 2), np.float32)).shape == (1, 3)


@keras.saving.register_keras_serializable(package="gaps3")
class _ScaleNoConfig(layers.Layer):
    """A custom layer without get_config (Keras 3 records its constructor's arguments)."""

    def __init__(self, factor, offsets=(0.0, 0.0, 0.0), **kwargs):
        super().__init__(**kwargs)
        self.factor = factor
        self.offsets = offsets

    def call(self, x):
        return x * self.factor + np.asarray(self.offsets, np.float32)


def test_a_custom_layer_without_get_config_saves_its_arguments_and_loads(tmp_path):
    inp = keras.Input((3,))
    m = keras.Model(inp, _ScaleNoConfig(2.0, offsets=[1.0, 0.0, -1.0], name="scale")(inp))
    path = str(tmp_path / "auto.keras")
    m.save(path)
    back = keras.saving.load_model(path)
    assert back.get_layer("scale").factor == 2.0
    np.testing.assert_allclose(back.predict(np.ones((1, 3)), verbose=0), [[3.0, 2.0, 1.0]])


def test_channels_first_global_pooling_1d_and_flatten_as_keras():
    x = RNG.random((2, 4, 3)).astype(np.float32)                 # (batch, channels, steps)
    np.testing.assert_allclose(layers.GlobalAveragePooling1D(data_format="channels_first")(x), x.mean(-1),
                               rtol=1e-6)
    np.testing.assert_allclose(layers.GlobalMaxPooling1D(data_format="channels_first", keepdims=True)(x),
                               x.max(-1, keepdims=True))
    y = np.arange(12, dtype=np.float32).reshape(1, 2, 6)
    np.testing.assert_array_equal(layers.Flatten(data_format="channels_first")(y),
                                  y.transpose(0, 2, 1).reshape(1, -1))
    inp = keras.Input((4, 3))
    m = keras.Model(inp, layers.GlobalAveragePooling1D(data_format="channels_first")(inp))
    assert m.output_shape == (None, 4)
    np.testing.assert_allclose(m.predict(x, verbose=0), x.mean(-1), rtol=1e-6)


def test_timeseries_datasets_are_datasets_that_zip_and_map():
    a = np.arange(100, dtype=np.float32).reshape(50, 2)
    inputs = keras.utils.timeseries_dataset_from_array(a[:-3], None, sequence_length=5, batch_size=8)
    targets = keras.utils.timeseries_dataset_from_array(a[7:], None, sequence_length=1, batch_size=8)
    pairs = keras.data.Dataset.zip((inputs, targets)).map(lambda x, y: (x, y[:, 0]))
    x, y = next(iter(pairs))
    np.testing.assert_array_equal(x[1], a[1:6])                 # window i: steps i .. i+4
    np.testing.assert_array_equal(y[1], a[8])                   # its target: 7 steps on
    m = keras.Sequential([keras.Input((5, 2)), layers.Flatten(), layers.Dense(2)])
    m.compile(optimizer="adam", loss="mse")
    m.fit(pairs.shuffle(4).prefetch(2), epochs=1, verbose=0)


def test_text_line_dataset_and_from_generator(tmp_path):
    path = tmp_path / "lines.txt"
    path.write_text("a b\nc d e\n\nlast\n", encoding="utf-8")
    lines = keras.data.TextLineDataset(str(path))
    assert [str(s) for s in lines] == ["a b", "c d e", "", "last"]

    def gen(n):
        for i in range(n):
            yield np.full((2,), i, np.float32), np.float32(i)
    batches = keras.data.Dataset.from_generator(gen, args=(5,), output_signature=None).batch(2)
    got = list(batches.as_numpy_iterator())
    assert [x.shape for x, _ in got] == [(2, 2), (2, 2), (1, 2)]
    np.testing.assert_array_equal(np.concatenate([y for _, y in got]), np.arange(5))
    m = keras.Sequential([keras.Input((2,)), layers.Dense(1)])
    m.compile(optimizer="adam", loss="mse")
    m.fit(batches, epochs=2, verbose=0)                 # read again on the second pass


def _gan_pair():
    keras.utils.set_random_seed(4)
    g = keras.Sequential([keras.Input((4,)), layers.Dense(4, activation="tanh")])
    d = keras.Sequential([keras.Input((4,)), layers.Dense(1)])
    return g, d


def test_two_tapes_in_one_with_statement_both_record_as_tensorflow():
    g, d = _gan_pair()
    x = RNG.random((3, 4)).astype(np.float32)
    with keras.GradientTape() as gen_tape, keras.GradientTape() as disc_tape:      # the GAN tutorials' pattern
        out = d(g(x, training=True), training=True)
        gen_loss, disc_loss = ops.mean(out), ops.mean(out ** 2)
    gen_grads = gen_tape.gradient(gen_loss, g.trainable_weights)
    disc_grads = disc_tape.gradient(disc_loss, d.trainable_weights)
    with keras.GradientTape(persistent=True) as one:
        out = d(g(x, training=True), training=True)
        want_gen, want_disc = one.gradient(ops.mean(out), g.trainable_weights), \
            one.gradient(ops.mean(out ** 2), d.trainable_weights)
    for got, want in zip(list(gen_grads) + list(disc_grads), list(want_gen) + list(want_disc)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


def test_an_outer_tape_that_recorded_before_the_inner_one_differentiates_its_target_too():
    # the inner tape records into the outer one's graph (TensorFlow's: the outer tape sees it all)
    g, d = _gan_pair()
    x = RNG.random((3, 4)).astype(np.float32)
    with keras.GradientTape() as outer:
        g(x)                                       # recorded before the inner tape opens
        with keras.GradientTape() as inner:
            loss = ops.mean(d(g(x)))
    got_g = outer.gradient(loss, g.trainable_weights)
    got_d = inner.gradient(loss, d.trainable_weights)
    with keras.GradientTape(persistent=True) as one:
        loss = ops.mean(d(g(x)))
    for got, want in zip(got_g + got_d, one.gradient(loss, g.trainable_weights) + one.gradient(loss, d.trainable_weights)):
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_an_encoder_that_augments_nests_in_another_model_and_augments_in_training_only():
    keras.utils.set_random_seed(5)
    aug = keras.Sequential([layers.RandomFlip("horizontal")])
    inp = keras.Input((6, 6, 1))
    conv, pool = layers.Conv2D(2, 3), layers.GlobalAveragePooling2D()
    encoder = keras.Model(inp, pool(conv(aug(inp))))
    inp2 = keras.Input((6, 6, 1))
    head = layers.Dense(1)
    outer = keras.Model(inp2, head(encoder(inp2)))            # supervised contrastive learning's pattern
    plain_in = keras.Input((6, 6, 1))
    plain = keras.Model(plain_in, head(pool(conv(plain_in))))  # the same layers without the augmentation
    x = RNG.random((8, 6, 6, 1)).astype(np.float32)
    x[:, :, :3] += 2.0                                       # a flip changes every image
    np.testing.assert_allclose(outer.predict(x, verbose=0), plain.predict(x, verbose=0), rtol=1e-5, atol=1e-6)
    outer.compile(optimizer=keras.optimizers.SGD(0.0), loss="mse")
    y = np.zeros((8, 1), np.float32)
    assert outer.train_on_batch(x, y) != pytest.approx(outer.test_on_batch(x, y), rel=1e-6)


def test_a_constant_attention_mask_on_symbolic_inputs_is_a_constant_of_the_model(tmp_path):
    mask = ops.cast([1 - ops.eye(5)], dtype="int8")          # vit_small_ds's: no token attends to itself
    inp = keras.Input(shape=(5, 8))
    mha = layers.MultiHeadAttention(num_heads=2, key_dim=4)
    m = keras.Model(inp, mha(inp, inp, attention_mask=mask))
    x = RNG.random((3, 5, 8)).astype(np.float32)
    want = mha(x, x, attention_mask=np.repeat(np.asarray(mask), 3, axis=0))      # the eager call, the mask given
    unmasked = mha(x, x)
    np.testing.assert_allclose(m.predict(x, verbose=0), want, rtol=1e-5, atol=1e-6)
    assert not np.allclose(want, unmasked, atol=1e-4)
    path = str(tmp_path / "masked.keras")
    m.save(path)
    np.testing.assert_allclose(keras.saving.load_model(path).predict(x, verbose=0), want, rtol=1e-5, atol=1e-6)


def test_the_global_image_data_format_reaches_layers_given_none():
    x = RNG.random((2, 4, 3)).astype(np.float32)                 # (batch, channels, steps)
    keras.backend.set_image_data_format("channels_first")
    try:
        pool = layers.GlobalAveragePooling1D()
        assert pool.data_format == "channels_first"
        np.testing.assert_allclose(pool(x), x.mean(-1), rtol=1e-6)
        assert layers.Conv1D(4, 3).data_format == "channels_first"     # (test_keras_io_port_gaps_5)
        assert layers.Conv3D(4, 3).data_format == "channels_first"     # volumes too (test_channels_first_3d)
        assert layers.GlobalAveragePooling1D(data_format="channels_last").data_format == "channels_last"
    finally:
        keras.backend.set_image_data_format("channels_last")
    assert layers.GlobalAveragePooling1D().data_format == "channels_last"


def test_a_functional_model_keeps_nested_outputs_as_given(tmp_path):
    inp = keras.Input((3,))
    a, b = layers.Dense(2, name="a")(inp), layers.Dense(1, name="b")(inp)
    m = keras.Model(inp, [[a, b], {"again": b}])
    x = RNG.random((4, 3)).astype(np.float32)
    got = m.predict(x, verbose=0)
    want_a, want_b = _dense_np(m.get_layer("a"), x), _dense_np(m.get_layer("b"), x)
    assert isinstance(got, list) and isinstance(got[0], list) and set(got[1]) == {"again"}
    np.testing.assert_allclose(got[0][0], want_a, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[0][1], want_b, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1]["again"], want_b, rtol=1e-5, atol=1e-6)
    path = str(tmp_path / "nested.keras")
    m.save(path)
    back = keras.saving.load_model(path).predict(x, verbose=0)
    np.testing.assert_allclose(back[1]["again"], want_b, rtol=1e-5, atol=1e-6)


class _TemperedAttention(layers.MultiHeadAttention):
    """keras-io's locality self-attention (vit_small_ds): Keras's _compute_attention hook with a
    learned temperature and its private helpers."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.tau = keras.Variable(float(np.sqrt(self._key_dim)) / 2.0, trainable=True)

    def _compute_attention(self, query, key, value, attention_mask=None, training=None):
        query = ops.multiply(query, 1.0 / self.tau)
        scores = self._masked_softmax(ops.einsum(self._dot_product_equation, key, query), attention_mask)
        return ops.einsum(self._combine_equation, self._dropout_layer(scores, training=training), value), scores


def _attention_np(w, x, heads, key_dim, temperature, allowed):
    def proj(name):
        return x @ w[f"{name}.weight"].T + w[f"{name}.bias"]
    b, t, _ = x.shape
    q, k, v = (proj(n).reshape(b, t, heads, key_dim).transpose(0, 2, 1, 3) for n in ("q_proj", "k_proj", "v_proj"))
    s = q @ k.transpose(0, 1, 3, 2) / temperature + (allowed[:, None] - 1.0) * 1e9
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    att = (p @ v).transpose(0, 2, 1, 3).reshape(b, t, heads * key_dim)
    return att @ w["out_proj.weight"].T + w["out_proj.bias"]


def test_a_subclass_s_compute_attention_is_used_with_keras_s_helpers():
    x = RNG.random((2, 5, 8)).astype(np.float32)
    allowed = np.repeat((1 - np.eye(5))[None], 2, axis=0)
    inp = keras.Input((5, 8))
    lsa = _TemperedAttention(num_heads=2, key_dim=4)
    m = keras.Model(inp, lsa(inp, inp, attention_mask=(1 - np.eye(5)).astype("int8")))
    w = {k: np.asarray(v, np.float64) for k, v in lsa.get_weights().items()}
    want = _attention_np(w, x.astype(np.float64), 2, 4, 1.0, allowed)          # tau = sqrt(4) / 2
    np.testing.assert_allclose(m.predict(x, verbose=0), want, rtol=1e-4, atol=1e-5)
    m.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    m.fit(x, np.zeros((2, 5, 8), np.float32), epochs=1, verbose=0)
    assert float(lsa.tau.numpy()) != 1.0                                       # the temperature trains


# --- keras-io guides ---------------------------------------------------------------------------------

@pytest.mark.parametrize("loss", [keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                                  keras.losses.CategoricalCrossentropy(from_logits=True)])
def test_cross_entropy_from_large_logits_is_exact_and_keeps_its_gradient(loss):
    sparse = isinstance(loss, keras.losses.SparseCategoricalCrossentropy)
    y = np.array([0]) if sparse else np.array([[1.0, 0.0, 0.0]], np.float32)
    logits = np.array([[0.0, 300.0, 0.0]], np.float32)
    assert float(loss(y, logits)) == pytest.approx(300.0, rel=1e-6)         # log-softmax, not a floor
    inp = keras.Input((3,))
    dense = layers.Dense(3, use_bias=False, kernel_initializer="zeros")
    m = keras.Model(inp, dense(inp))
    dense.kernel.assign(np.eye(3, dtype=np.float32) * 300.0)
    x = np.eye(3, dtype=np.float32)[1:2]
    with keras.GradientTape() as tape:
        value = loss(y, m(x))
    g = np.asarray(tape.gradient(value, dense.kernel))                       # Keras's layout (in, out)
    np.testing.assert_allclose(g, [[0, 0, 0], [-1, 1, 0], [0, 0, 0]], atol=1e-6)   # x^T (softmax - y)
    m.compile(optimizer=keras.optimizers.SGD(0.1), loss=loss)
    assert m.evaluate(x, y, verbose=0) == pytest.approx(300.0, rel=1e-6)


class _TruePositives(keras.metrics.Metric):
    """The training guide's CategoricalTruePositives: state in add_variable, result the variable."""

    def __init__(self, name="categorical_true_positives", **kwargs):
        super().__init__(name=name, **kwargs)
        self.true_positives = self.add_variable(shape=(), name="ctp", initializer="zeros")

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_pred = ops.reshape(ops.argmax(y_pred, axis=1), (-1, 1))
        values = ops.cast(ops.cast(y_true, "int32") == ops.cast(y_pred, "int32"), "float32")
        self.true_positives.assign_add(ops.sum(values))

    def result(self):
        return self.true_positives


def test_a_custom_metric_keeps_its_state_in_add_variable_and_gets_the_labels_as_given():
    m = keras.Sequential([keras.Input((4,)), layers.Dense(3)])
    m.compile(optimizer=keras.optimizers.SGD(0.0), loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=[_TruePositives()])
    x, y = RNG.random((32, 4)).astype(np.float32), RNG.integers(0, 3, (32, 1))     # labels (n, 1), as the guide
    hits = float((m.predict(x, verbose=0).argmax(1) == y[:, 0]).sum())
    h = m.fit(x, y, batch_size=8, epochs=2, verbose=0)
    assert h.history["categorical_true_positives"] == [hits, hits]                 # reset each epoch
    assert m.evaluate(x, y, verbose=0)[1] == hits
    metric = _TruePositives()
    metric.update_state(np.array([[0], [1]]), np.array([[0.9, 0.1, 0.0], [0.8, 0.1, 0.1]]))
    assert float(metric.result()) == 1.0 and metric.result().numpy() == 1.0
    metric.reset_state()                                                            # the default: back to zeros
    assert float(metric.result()) == 0.0 and len(metric.variables) == 1


@keras.saving.register_keras_serializable(package="gaps3")
class _Wrap(layers.Layer):
    """The serialization guide's pattern: a layer held in the config, a get_config without the base's."""

    def __init__(self, first_layer, factor=1.0, **kwargs):
        super().__init__(**kwargs)
        self.first_layer, self.factor = first_layer, factor

    def get_config(self):
        return {"first_layer": self.first_layer, "factor": self.factor}       # no name: Keras keeps it beside

    @classmethod
    def from_config(cls, config):
        config["first_layer"] = keras.layers.deserialize(config["first_layer"])
        return cls(**config)

    def call(self, x):
        return self.first_layer(x) * self.factor


def test_layers_held_in_a_config_and_configs_without_a_name_save_and_load(tmp_path):
    inp = keras.Input((4,))
    m = keras.Model(inp, _Wrap(layers.Dense(2), factor=3.0, name="wrap")(inp))
    x = RNG.random((3, 4)).astype(np.float32)
    want = m.predict(x, verbose=0)
    assert keras.layers.deserialize(keras.layers.serialize(layers.Dense(5))).units == 5
    rebuilt = keras.Model.from_config(m.get_config())
    assert rebuilt.get_layer("wrap").factor == 3.0
    path = str(tmp_path / "wrap.keras")
    m.save(path)
    back = keras.saving.load_model(path)
    np.testing.assert_allclose(back.predict(x, verbose=0), want, rtol=1e-6)
    assert '"first_layer"' in m.to_json()


def test_a_layer_s_weights_unpack_as_keras_s_list_and_keep_their_names():
    dense = layers.Dense(3)
    dense(np.ones((1, 4), np.float32))
    kernel, bias = dense.get_weights()                       # Keras's layouts
    np.testing.assert_array_equal(kernel, dense.kernel.numpy())
    assert kernel.shape == (4, 3) and bias.shape == (3,)
    assert list(dense.get_weights().keys()) == ["weight", "bias"]
    dense.set_weights([np.zeros_like(w) for w in dense.get_weights()])
    assert not np.any(dense.kernel.numpy())
    m = keras.Sequential([keras.Input((4,)), dense])
    assert sorted(m.get_weights()) == ["dense.bias", "dense.weight"]    # a model's stays a dict (API.md)


class _Gan(keras.Model):
    """The guides' GAN: a compile of its own signature, called before the model has a graph."""

    def __init__(self):
        super().__init__()
        self.encoder = layers.Dense(4, name="encoder")
        self.decoder = layers.Dense(3, name="decoder")

    def compile(self, optimizer, loss_fn):
        super().compile(optimizer=optimizer, loss=loss_fn)
        self.loss_fn = loss_fn

    def call(self, x):
        return self.decoder(self.encoder(x))


def test_a_subclassed_model_s_own_compile_and_layers_as_keras():
    m = _Gan()
    assert [l.name for l in m.layers] == ["encoder", "decoder"]                  # before it is built too
    m.compile(optimizer="sgd", loss_fn="mse")
    m.fit(RNG.random((4, 3)), RNG.random((4, 3)), verbose=0)
    assert [type(l).__name__ for l in m.layers] == ["Dense", "Dense"]
    for layer in m.layers[:-1]:
        layer.trainable = False                                                  # freezing through layers
    m.compile(optimizer="sgd", loss_fn="mse")
    assert len(m.trainable_weights) == 2


@keras.saving.register_keras_serializable(package="gaps3")
class _Recommender(keras.Model):
    def __init__(self, n_users, n_items, dim=4, **kwargs):
        super().__init__(**kwargs)
        self.users = layers.Embedding(n_users, dim)
        self.items = layers.Embedding(n_items, dim)

    def call(self, inputs):
        return ops.sum(self.users(inputs["user"]) * self.items(inputs["item"]), axis=1, keepdims=True)


def test_a_subclassed_model_saves_loads_and_checkpoints_as_keras_3(tmp_path):
    m = _Recommender(10, 7, dim=3)
    x = {"user": np.arange(8) % 10, "item": np.arange(8) % 7}
    m.compile(optimizer="adam", loss="mse")
    m.fit(x, np.ones((8, 1)), epochs=2, verbose=0,
          callbacks=[keras.callbacks.ModelCheckpoint(str(tmp_path / "best.keras"))])
    want = m.predict(x, verbose=0)
    path = str(tmp_path / "rec.keras")
    m.save(path)
    for p in (path, str(tmp_path / "best.keras")):
        back = keras.saving.load_model(p)
        assert type(back) is _Recommender and back.compiled
        np.testing.assert_allclose(back.predict(x, verbose=0), want, rtol=1e-6)
    back.fit(x, np.ones((8, 1)), epochs=1, verbose=0)


def test_a_subclassed_model_whose_constructor_takes_an_array_says_how_to_save():
    m = _NodeLookup(np.ones((5, 8), np.float32))
    m(np.array([0, 1]))
    with pytest.raises(TypeError, match="give it get_config/from_config .* or save its weights"):
        m.get_config()


def test_eager_outputs_carry_keras_s_mask_and_compute_mask_takes_arrays():
    x = np.array([[1, 2, 0, 0], [3, 0, 0, 0]])
    emb = layers.Embedding(10, 4, mask_zero=True)
    np.testing.assert_array_equal(emb(x)._keras_mask, x != 0)             # the masking guide's print
    np.testing.assert_array_equal(emb.compute_mask(x), x != 0)
    y = np.zeros((2, 3, 2), np.float32)
    y[0, 0] = 1.0
    np.testing.assert_array_equal(layers.Masking()(y)._keras_mask, [[True, False, False], [False, False, False]])
    assert not hasattr(layers.Embedding(10, 4)(x), "_keras_mask")


class _MakesVolume(layers.Layer):
    def __init__(self, then=None, **kwargs):
        super().__init__(**kwargs)
        self.to5d = layers.Reshape((4, 4, 9, 4))
        self.then = then

    def call(self, x):
        v = self.to5d(x)
        return v if self.then is None else self.then(v)


def test_a_volume_made_in_a_call_is_returned_as_one_and_ops_on_it_are_keras():
    x = RNG.random((2, 4, 4, 36)).astype(np.float32)
    inp = keras.Input((4, 4, 36))
    m = keras.Model(inp, layers.Conv3D(2, 3, padding="same")(_MakesVolume()(inp)))
    assert m.output_shape == (None, 4, 4, 9, 2) and m.predict(x, verbose=0).shape == (2, 4, 4, 9, 2)
    # (once (batch * 4) rows, silently; then refused; now the volume reaches the call 5-D)
    doubled = keras.Model(inp, _MakesVolume(then=lambda v: v * 2.0)(inp))
    assert doubled.output_shape == (None, 4, 4, 9, 4)
    np.testing.assert_allclose(doubled.predict(x, verbose=0), 2 * x.reshape(2, 4, 4, 9, 4), rtol=1e-6)
