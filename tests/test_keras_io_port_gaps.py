"""What keras-io scripts needed when ported as a Keras user ports them (generative models,
NLP, structured data, audio, vision; 2026-12-06): each test is one behaviour those scripts
rely on, checked against numpy or against what Keras documents."""

import numpy as np
import pytest

import pyggml as keras
from pyggml import layers, ops

RNG = np.random.default_rng(11)


# --- losses on labels computed in the graph ---------------------------------------------------

class _ArgmaxSparseLoss(keras.losses.Loss):
    """keras-io NER's loss: sparse cross-entropy on labels the loss computes itself."""

    def call(self, y_true, y_pred):
        labels = ops.argmax(y_true, axis=-1)
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True)(labels, y_pred)


def test_sparse_cross_entropy_on_labels_computed_in_the_graph_is_the_categorical_one():
    yt = np.eye(4, dtype=np.float32)[[0, 1, 2, 3, 1]]
    yp = RNG.normal(size=(5, 4)).astype(np.float32)
    z = yp.astype(np.float64)
    want = np.mean(-(z - np.log(np.exp(z).sum(-1, keepdims=True)))[np.arange(5), [0, 1, 2, 3, 1]])
    np.testing.assert_allclose(_ArgmaxSparseLoss()(yt, yp), want, rtol=1e-5)
    # and it trains a model to the labels (it read garbage indices before)
    x = RNG.integers(1, 20, (64, 6))
    y = x % 4
    inp = layers.Input(shape=(6,), dtype="int32")
    m = keras.Model(inp, layers.Dense(4)(layers.Embedding(20, 8)(inp)))
    m.compile(optimizer=keras.optimizers.Adam(0.05), loss=_ArgmaxSparseLoss())
    m.fit(x, keras.utils.to_categorical(y, 4), epochs=30, verbose=0)
    assert (m.predict(x, verbose=0).argmax(-1) == y).mean() == 1.0


def test_embedding_mask_of_indices_computed_in_the_graph():
    class Pick(layers.Layer):
        def call(self, x):
            return ops.argmax(x, axis=-1)

    inp = keras.Input((5, 4))
    e = layers.Embedding(4, 3, mask_zero=True)(Pick()(inp))
    m = keras.Model(inp, layers.GlobalAveragePooling1D()(e))
    ids = np.array([[0, 1, 2, 0, 3], [1, 1, 0, 0, 0]])
    x = np.eye(4, dtype=np.float32)[ids]
    w = m.layers[2].get_weights()[0]
    want = np.stack([w[i][i != 0].mean(0) for i in ids])
    np.testing.assert_allclose(m.predict(x, verbose=0), want, rtol=1e-5, atol=1e-7)


def test_a_loss_that_reads_labels_on_the_host_refuses_computed_ones():
    def loss(y_true, y_pred):
        return keras.losses.CTC()(ops.argmax(y_true, axis=-1), y_pred)

    inp = layers.Input((6, 3))
    m = keras.Model(inp, layers.Dense(4, activation="softmax")(inp))
    m.compile(optimizer="adam", loss=loss)
    with pytest.raises(ValueError, match="must be data fed to the graph"):
        m.fit(RNG.random((4, 6, 3)), np.eye(4, dtype=np.float32)[RNG.integers(1, 4, (4, 6))], verbose=0)


# --- sublayers Keras tracks ---------------------------------------------------------------------

class _Before(layers.Layer):
    def __init__(self):
        self.route = layers.Dense(2)          # before super().__init__(), as the Switch Transformer does
        super().__init__()

    def call(self, x):
        return self.route(x)


class _Appended(keras.Model):
    def __init__(self):
        super().__init__()
        self.ensemble = []
        for _ in range(2):
            self.ensemble.append(layers.Dense(2))      # keras-io's NeuralDecisionForest

    def call(self, x):
        return self.ensemble[0](x) + self.ensemble[1](x)


class _InDict(layers.Layer):
    def __init__(self):
        super().__init__()
        self.proj = {"a": layers.Dense(2), "b": layers.Dense(2)}     # keras-io's GRN/VSN

    def call(self, x):
        return self.proj["a"](x) + self.proj["b"](x)


@pytest.mark.parametrize("make, n_weights", [(_Before, 2), (_Appended, 4), (_InDict, 4)])
def test_sublayers_in_lists_dicts_and_set_before_init_are_tracked_and_train(make, n_weights):
    inp = layers.Input(shape=(3,))
    m = keras.Model(inp, make()(inp))
    m.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    assert len(m.trainable_weights) == n_weights
    x = RNG.normal(size=(32, 3)).astype(np.float32)
    y = x[:, :2] * 2.0
    h = m.fit(x, y, epochs=20, verbose=0)
    assert h.history["loss"][-1] < 0.2 * h.history["loss"][0]


def test_a_tracked_list_keeps_the_weights_order_and_forgets_removed_layers():
    layer = layers.Layer()
    layer.blocks = []
    d1, d2 = layers.Dense(2), layers.Dense(3)
    layer.blocks.append(d1)
    layer.head = layers.Dense(1)
    layer.blocks.append(d2)
    assert list(layer.sublayers) == ["blocks.0", "blocks.1", "head"]
    layer.blocks.pop()
    assert list(layer.sublayers) == ["blocks.0", "head"]
    layer.blocks = "not layers"
    assert list(layer.sublayers) == ["head"]


# --- training= as Keras resolves it ---------------------------------------------------------------

def test_training_defaults_to_the_call_signature_and_follows_the_enclosing_call():
    seen = []

    class Inner(layers.Layer):
        def call(self, x, training=None):
            seen.append(("inner", training))
            return x * 2.0

    class M(keras.Model):
        def __init__(self):
            super().__init__()
            self.d = layers.Dense(1)
            self.inner = Inner()

        def call(self, x, training=True):            # RealNVP's default
            seen.append(("model", training))
            return self.d(self.inner(x))

    m = M()
    x = np.ones((3, 2), np.float32)
    with keras.GradientTape():
        m(x)
    assert ("model", True) in seen and ("inner", True) in seen and ("model", False) not in seen
    seen.clear()
    with keras.GradientTape():
        m(x, training=False)
    assert ("model", False) in seen and ("inner", False) in seen and ("inner", True) not in seen


# --- dict outputs ------------------------------------------------------------------------------------

def test_dict_outputs_stay_a_dict_on_a_tape_as_a_nested_model_and_from_a_custom_layer():
    inp = keras.Input(shape=(4,))
    a = layers.Dense(2, name="a")(inp)
    b = layers.Dense(3, name="b")(a)
    extractor = keras.Model(inputs=inp, outputs={"a": a, "b": b})
    x = RNG.normal(size=(2, 4)).astype(np.float32)
    with keras.GradientTape() as tape:
        feats = extractor(x)
        loss = ops.sum(feats["b"] ** 2)
    assert isinstance(feats, dict) and list(feats) == ["a", "b"]
    grads = tape.gradient(loss, extractor.trainable_weights)
    assert all(g is not None for g in grads)
    i2 = keras.Input(shape=(4,))
    nested = extractor(i2)
    assert isinstance(nested, dict) and nested["b"].shape == (None, 3)
    m = keras.Model(i2, layers.Concatenate()([nested["a"], nested["b"]]))
    w = extractor.get_weights()
    ha = x @ w["a.weight"].T + w["a.bias"]
    np.testing.assert_allclose(m.predict(x, verbose=0),
                               np.concatenate([ha, ha @ w["b.weight"].T + w["b.bias"]], 1), rtol=1e-5)

    class Two(layers.Layer):
        def call(self, x):
            return {"twice": x * 2.0, "neg": -x}

    o = Two()(i2)
    assert isinstance(o, dict) and list(o) == ["twice", "neg"]
    np.testing.assert_allclose(keras.Model(i2, o["twice"] + o["neg"]).predict(x, verbose=0), x, rtol=1e-6)


# --- shapes found on a stand-in batch ---------------------------------------------------------------

def test_a_sublayer_called_on_a_moved_batch_axis_takes_any_batch():
    class Inner(layers.Layer):
        def __init__(self, **kw):
            super().__init__(**kw)
            self.w = self.add_weight(shape=(1, 2), initializer="ones")

        def call(self, x):
            return ops.matmul(x, self.w)

    class Outer(layers.Layer):
        def __init__(self):
            super().__init__()
            self.inner = Inner(name="inner")

        def call(self, x):            # traffic forecasting's GraphConv: (nodes, batch, ...)
            return ops.transpose(self.inner(ops.transpose(x, [1, 0, 2])), [1, 0, 2])

    inp = layers.Input((5, 1))
    m = keras.Model(inp, Outer()(inp))
    x = RNG.normal(size=(64, 5, 1)).astype(np.float32)
    np.testing.assert_allclose(m.predict(x, verbose=0), np.concatenate([x, x], -1), rtol=1e-6)


def test_a_call_whose_shapes_need_the_batch_builds_on_a_fixed_batch_and_says_so_otherwise():
    class Flat(layers.Layer):
        def call(self, x):
            y = ops.reshape(x, [50 * 4, 8])          # the Switch Transformer's tokens of a batch of 50
            return ops.reshape(y, [ops.shape(x)[0], 4, 8])

    inp = layers.Input(shape=(4, 8), batch_size=50)
    m = keras.Model(inp, layers.Dense(3)(Flat()(inp)))
    assert m.output_shape == (50, 4, 3)
    m.compile(optimizer="adam", loss="mse")
    m.fit(np.zeros((100, 4, 8)), np.zeros((100, 4, 3)), batch_size=50, verbose=0)
    with pytest.raises(ValueError) as e:
        Flat()(layers.Input(shape=(4, 8)))
    assert "batch_size=N" in "".join(getattr(e.value, "__notes__", []))


def test_layers_take_other_lengths_than_they_were_built_for_as_in_keras():
    d = layers.Dense(4)
    x5, x3 = RNG.normal(size=(2, 5, 8)).astype(np.float32), RNG.normal(size=(2, 3, 8)).astype(np.float32)
    assert d(x5).shape == (2, 5, 4)
    w = d.get_weights()
    np.testing.assert_allclose(d(x3), x3 @ w[0] + w[1], rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="was built for"):
        d(RNG.normal(size=(2, 3, 7)).astype(np.float32))

    class TokenEmbedding(layers.Layer):       # transformer_asr's decoder input grows token by token
        def __init__(self):
            super().__init__()
            self.emb = layers.Embedding(10, 4)
            self.pos_emb = layers.Embedding(20, 4)

        def call(self, x):
            return self.emb(x) + self.pos_emb(ops.arange(0, ops.shape(x)[-1], 1))

    t = TokenEmbedding()
    assert t(np.ones((2, 5), "int32")).shape == (2, 5, 4)
    one = t(np.ones((2, 1), "int32"))
    np.testing.assert_allclose(one, t.emb.get_weights()[0][[1, 1]][:, None] + t.pos_emb.get_weights()[0][0],
                               rtol=1e-6)


def test_a_subclassed_model_takes_padded_batches_of_other_lengths():
    class M(keras.Model):
        def __init__(self):
            super().__init__()
            self.emb = layers.Embedding(50, 8)
            self.out = layers.Dense(3, activation="softmax")

        def call(self, x):
            return self.out(self.emb(x))

    m = M()
    m.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    for t in (6, 5, 7):
        m.fit(RNG.integers(1, 50, (4, t)), RNG.integers(0, 3, (4, t)), verbose=0)
    x = RNG.integers(1, 50, (2, 9))
    w = m.out.get_weights()
    z = m.emb.get_weights()[0][x] @ w[0] + w[1]
    want = np.exp(z - z.max(-1, keepdims=True))
    np.testing.assert_allclose(m.predict(x, verbose=0), want / want.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)


# --- weights as Keras code uses them ------------------------------------------------------------------

def test_model_weights_take_arithmetic_as_variables_for_an_ema_update():
    m = keras.Sequential([keras.Input(shape=(2,)), layers.Dense(3)])
    ema = keras.Sequential([keras.Input(shape=(2,)), layers.Dense(3)])
    before = [w.numpy() for w in ema.weights]
    for we, wm in zip(ema.weights, m.weights):        # ddim's EMA of the network's weights
        we.assign(0.999 * we + (1 - 0.999) * wm)
    for b, we, wm in zip(before, ema.weights, m.weights):
        np.testing.assert_allclose(we.numpy(), 0.999 * b + 0.001 * wm.numpy(), rtol=1e-6)
    w = m.weights[0]
    np.testing.assert_allclose(w + w, 2 * w.numpy())
    assert w + "_ema" == "dense.weight_ema"          # names stay strings


def test_model_loss_is_what_compile_was_given():
    class M(keras.Model):
        def __init__(self):
            super().__init__()
            self.d = layers.Dense(1)

        def call(self, x):
            return self.d(x)

    m = M()
    m.compile(optimizer="adam", loss=keras.losses.mean_absolute_error)
    assert m.loss is keras.losses.mean_absolute_error
    s = keras.Sequential([keras.Input((2,)), layers.Dense(1)]).compile(optimizer="adam", loss="mse")
    assert s.loss == "mse"


def test_variable_takes_keras_s_arguments_and_pyggml_s():
    v = keras.Variable(initializer=np.arange(6, dtype=np.float32).reshape(2, 3), trainable=True, name="emb")
    assert v.shape == (2, 3) and v.name == "emb" and v.numpy()[1, 2] == 5
    assert keras.Variable(np.zeros((2, 3), "float32")).shape == (2, 3)
    assert keras.Variable(3.0).shape == ()
    v = keras.Variable(initializer="ones", shape=(2,), name="w", trainable=False)
    assert not v.trainable and v.numpy().tolist() == [1.0, 1.0]
    assert keras.Variable("zeros", (3,)).numpy().tolist() == [0.0, 0.0, 0.0]
    v = keras.Variable("v", (2, 2), "ones")                   # pyggml's order: name first
    assert v.name == "v" and v.numpy().sum() == 4
    with pytest.raises(ValueError, match="needs shape"):
        keras.Variable(initializer="ones")
    with pytest.raises(ValueError, match="does not fit"):
        keras.Variable(np.zeros(3), shape=(2,))


# --- gradients on a tape --------------------------------------------------------------------------

def test_an_integer_result_passes_no_gradient_as_in_tensorflow():
    # vq_vae's quantizer: argmin -> one_hot -> matmul; the codebook's gradient comes through the
    # product, none through the argmin
    emb = layers.Dense(4, use_bias=False)
    x = RNG.random((6, 3)).astype(np.float32)
    with keras.GradientTape() as tape:
        h = emb(x)
        idx = ops.argmin(h, axis=1)
        q = ops.matmul(ops.one_hot(idx, 4), ops.transpose(emb.kernel))
        loss = ops.mean((q - x) ** 2) + ops.mean(h ** 2)
    (g,) = tape.gradient(loss, [emb.kernel])
    k = emb.kernel.numpy().astype(np.float64)            # (3, 4)
    hh = x @ k
    oh = np.eye(4)[hh.argmin(1)]
    qq = oh @ k.T
    want = (oh.T @ (2 * (qq - x) / qq.size)).T + x.T @ (2 * hh / hh.size)
    np.testing.assert_allclose(g, want, rtol=1e-4, atol=1e-6)


def test_a_recorded_tensor_compares_with_numbers_after_the_tape():
    x = RNG.random((2, 3)).astype(np.float32)
    with keras.GradientTape() as tape:
        tape.watch(x)
        loss = ops.sum(ops.square(x))
    tape.gradient(loss, x)
    total = float(np.sum(x.astype(np.float64) ** 2))
    assert bool(loss > total - 0.01) and not bool(loss > total + 0.01)       # deep_dream's max_loss check
    assert bool(loss <= total + 0.01) and bool(loss >= 0)


def test_watching_another_tape_s_tensor_says_second_order_gradients_are_missing():
    x = RNG.random((2, 3)).astype(np.float32)
    with keras.GradientTape() as outer:
        outer.watch(x)
        y = ops.multiply(x, 2.0)
        with keras.GradientTape() as inner:
            with pytest.raises(ValueError, match="second-order gradient"):
                inner.watch(y)


# --- targets a user's loss takes as they are ---------------------------------------------------------

def test_a_user_loss_gets_labels_of_another_shape_as_keras_gives_them():
    def my_loss(y_true, y_pred):
        return keras.losses.sparse_categorical_crossentropy(y_true, y_pred)

    x = RNG.random((64, 5, 3)).astype("float32")
    y = (x.sum(-1) > 1.5).astype("int64")               # (n, steps) labels, (n, steps, 2) output
    inp = layers.Input(shape=(5, 3))
    m = keras.Model(inp, layers.Dense(2, activation="softmax")(layers.Dense(16, activation="relu")(inp)))
    m.compile(optimizer=keras.optimizers.Adam(0.05), loss=my_loss, metrics=["accuracy"])
    m.fit(x, y, epochs=20, batch_size=16, verbose=0)
    p = m.predict(x, verbose=0).astype(np.float64)
    loss, acc = m.evaluate(x, y, verbose=0)
    np.testing.assert_allclose(loss, np.mean(-np.log(np.take_along_axis(p, y[..., None], -1))), rtol=1e-4)
    np.testing.assert_allclose(acc, np.mean(p.argmax(-1) == y), atol=1e-6)
    assert acc > 0.9
    with pytest.raises(ValueError, match="first batch had"):
        m.fit(x, np.zeros((64, 4), np.int64), verbose=0)
