"""Gaps found by this round's ports and the list left open by the last one: targets broadcast
to the output by Keras's regression losses, LoRA on Dense, Embedding and EinsumDense."""

import numpy as np
import pytest

import pyggml as keras
from pyggml import layers

RNG = np.random.default_rng(9)


@pytest.mark.parametrize("loss", ["mse", "mae", "huber", "msle", "log_cosh", "poisson"])
def test_regression_loss_broadcasts_one_target_per_row(loss):
    # Keras: y (n,) against an output (n, k) is each row's value against all k (rank first
    # brought to the output's, then broadcast); the same as the target repeated k times
    x = RNG.random((16, 4)).astype("f4")
    y = RNG.random(16).astype("f4")
    m = keras.Sequential([keras.Input((4,)), layers.Dense(3, kernel_initializer="ones")])
    m.compile("sgd", loss)
    got = m.evaluate(x, y, verbose=0)
    want = m.evaluate(x, np.repeat(y[:, None], 3, axis=1), verbose=0)
    assert got == pytest.approx(want, rel=1e-6)
    assert m.evaluate(x, y[:, None], verbose=0) == pytest.approx(want, rel=1e-6)
    before = m.get_weights()
    m.fit(x, y, epochs=2, verbose=0)
    assert not np.allclose(before[0], m.get_weights()[0])


def test_targets_that_do_not_broadcast_and_cross_entropy_are_refused():
    x = np.ones((8, 4), "f4")
    m = keras.Sequential([keras.Input((4,)), layers.Dense(3)])
    m.compile("sgd", "mse")
    with pytest.raises(ValueError, match="does not broadcast"):
        m.evaluate(x, np.ones((8, 2)), verbose=0)
    c = keras.Sequential([keras.Input((4,)), layers.Dense(3, activation="softmax")])
    c.compile("sgd", "categorical_crossentropy")
    with pytest.raises(ValueError, match=r"must have shape \(n, 3\)"):
        c.evaluate(x, np.ones(8), verbose=0)


def _fit_some(model, x, y, epochs=3):
    model.compile("adam", "mse")
    model.fit(x, y, epochs=epochs, batch_size=16, verbose=0)


def test_dense_enable_lora_freezes_the_kernel_and_trains_the_factors(tmp_path):
    x = RNG.random((64, 6)).astype("f4")
    y = RNG.random((64, 3)).astype("f4")
    d = layers.Dense(8, activation="relu")
    m = keras.Sequential([keras.Input((6,)), d, layers.Dense(3)])
    _fit_some(m, x, y, epochs=2)
    before = m.predict(x, verbose=0)
    d.enable_lora(2)
    # Keras's names and shapes: A (in, rank), B (rank, units); B starts at zeros
    assert [w.name for w in d.trainable_weights] == ["bias", "lora_kernel_a", "lora_kernel_b"]
    assert d.lora_kernel_a.shape == (6, 2) and d.lora_kernel_b.shape == (2, 8)
    np.testing.assert_array_equal(m.predict(x, verbose=0), before)
    kernel = np.asarray(d.get_weights()["weight"]).copy()
    _fit_some(m, x, y)
    w = d.get_weights()
    np.testing.assert_array_equal(w["weight"], kernel)
    assert np.abs(w["lora_kernel_b"]).max() > 0
    # the model computes W + (alpha / rank) A B: numpy from the merged kernel
    merged = kernel.T + (w["lora_kernel_a"] @ w["lora_kernel_b"])
    np.testing.assert_allclose(d.merged_kernel(), merged, rtol=1e-6, atol=1e-6)
    out = m.layers[1].get_weights()
    want = np.maximum(x @ merged + w["bias"], 0) @ out[0] + out[1]
    np.testing.assert_allclose(m.predict(x, verbose=0), want, rtol=1e-5, atol=1e-5)
    assert d.get_config()["lora_rank"] == 2
    for name in ("m.keras", "m.gguf"):
        m.save(str(tmp_path / name))
        back = keras.models.load_model(str(tmp_path / name))
        assert back.layers[0].lora_enabled and not back.layers[0].weight.trainable
        np.testing.assert_array_equal(back.predict(x, verbose=0), m.predict(x, verbose=0))


def test_enable_lora_without_compiling_again_trains_the_new_weights():
    x = RNG.random((32, 4)).astype("f4")
    y = RNG.random((32, 2)).astype("f4")
    d = layers.Dense(2)
    m = keras.Sequential([keras.Input((4,)), d])
    _fit_some(m, x, y, epochs=1)
    d.enable_lora(1, lora_alpha=3)
    m.fit(x, y, epochs=2, verbose=0)           # no compile between: the model takes the new weights
    assert np.abs(d.get_weights()["lora_kernel_b"]).max() > 0
    assert d.lora_alpha == 3


def test_embedding_and_einsum_dense_lora_match_numpy():
    ids = RNG.integers(0, 10, (32, 5))
    e = layers.Embedding(10, 4)
    me = keras.Sequential([keras.Input((5,), dtype="int32"), e, layers.Flatten(), layers.Dense(1)])
    _fit_some(me, ids, RNG.random((32, 1)), epochs=1)
    e.enable_lora(3, lora_alpha=6)
    assert [w.name for w in e.weights] == ["weight", "lora_embeddings_a", "lora_embeddings_b"]
    _fit_some(me, ids, RNG.random((32, 1)))
    head = me.layers[-1].get_weights()
    want = e.merged_kernel()[ids].reshape(32, -1) @ head[0] + head[1]
    np.testing.assert_allclose(me.predict(ids, verbose=0), want, rtol=1e-5, atol=1e-6)

    xe = RNG.random((16, 3, 5)).astype("f4")
    ed = layers.EinsumDense("abc,cde->abde", output_shape=(3, 2, 4), bias_axes="de")
    mm = keras.Sequential([keras.Input((3, 5)), ed, layers.Flatten(), layers.Dense(1)])
    _fit_some(mm, xe, RNG.random((16, 1)), epochs=1)
    ed.enable_lora(2)
    assert ed.lora_kernel_a.shape == (5, 2, 2) and ed.lora_kernel_b.shape == (2, 4)
    _fit_some(mm, xe, RNG.random((16, 1)))
    assert np.abs(ed.get_weights()["lora_kernel_b"]).max() > 0
    head = mm.layers[-1].get_weights()
    h = np.einsum("abc,cde->abde", xe, ed.merged_kernel()) + ed.get_weights()["bias"]
    np.testing.assert_allclose(mm.predict(xe, verbose=0), h.reshape(16, -1) @ head[0] + head[1],
                               rtol=1e-5, atol=1e-5)


def test_lora_rank_in_the_constructor_and_refusals():
    d = layers.Dense(4, lora_rank=2)
    m = keras.Sequential([keras.Input((6,)), d])
    assert [w.name for w in m.trainable_weights] == ["bias", "lora_kernel_a", "lora_kernel_b"]
    with pytest.raises(ValueError, match="not built"):
        layers.Dense(3).enable_lora(2)
    with pytest.raises(ValueError, match="already enabled"):
        d.enable_lora(2)
    with pytest.raises(ValueError, match="lora_rank"):
        layers.Dense(3, lora_rank=0)
    with pytest.raises(TypeError, match="lora_alpha"):
        layers.Dense(3, lora_rank=2, lora_alpha="big")


class _MatrixStepCell(layers.Layer):
    """A cell of the user's that takes each step's features as a matrix (Keras's RNN gives its
    call (batch, h, w) of an input (batch, steps, h, w))."""

    def __init__(self, units, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.state_size = units

    def build(self, shape):
        self.k = self.add_weight(shape=(shape[-2] * shape[-1], self.units), initializer="glorot_uniform")
        self.r = self.add_weight(shape=(self.units, self.units), initializer="orthogonal")

    def call(self, x, states):
        assert len(x.shape) == 3
        x = keras.ops.reshape(x, (-1, x.shape[-2] * x.shape[-1]))
        h = keras.ops.tanh(keras.ops.matmul(x, self.k) + keras.ops.matmul(states[0], self.r))
        return h, [h]


def test_rnn_of_a_cell_taking_matrix_steps_matches_numpy():
    x = RNG.random((4, 5, 3, 2)).astype("f4")
    inp = keras.Input((5, 3, 2))
    rnn = layers.RNN(_MatrixStepCell(6), return_sequences=True)
    m = keras.Model(inp, rnn(inp))
    k, r = (np.asarray(v.numpy()) for v in (rnn.cell.k, rnn.cell.r))
    h, want = np.zeros((4, 6), "f4"), []
    for t in range(5):
        h = np.tanh(x[:, t].reshape(4, 6) @ k + h @ r)
        want.append(h)
    np.testing.assert_allclose(m.predict(x, verbose=0), np.stack(want, 1), rtol=1e-5, atol=1e-6)
    head = keras.Model(inp, layers.Dense(1)(layers.RNN(_MatrixStepCell(6))(inp)))
    head.compile("adam", "mse")
    y = RNG.random((4, 1)).astype("f4")
    first = head.evaluate(x, y, verbose=0)
    head.fit(x, y, epochs=20, verbose=0)
    assert head.evaluate(x, y, verbose=0) < first
    with pytest.raises(ValueError, match=r"\(steps, features\)"):
        layers.LSTM(3)(keras.Input((5, 3, 2)))


def test_text_from_a_dataset_is_bytes_as_tensorflow_gives_it():
    # keras-io's text scripts: ``text.numpy().decode("utf-8")`` and ``as_numpy_iterator()``
    ds = keras.data.Dataset.from_tensor_slices(np.array(["a b", "c"]))
    first = next(iter(ds))
    assert first.numpy() == b"a b" and first.numpy().decode("utf-8") == "a b"
    assert list(ds.as_numpy_iterator()) == [b"a b", b"c"]
    batch = next(iter(ds.batch(2))).numpy()
    assert batch.dtype == object and list(batch) == [b"a b", b"c"]
    # the bytes go back into the text layers as they are
    tv = layers.TextVectorization(max_tokens=10, output_sequence_length=3)
    tv.adapt(batch)
    np.testing.assert_array_equal(tv(batch), tv(np.array(["a b", "c"])))
    # numbers are unchanged
    assert next(keras.data.Dataset.from_tensor_slices(np.arange(3)).as_numpy_iterator()) == 0


def test_metric_functions_match_numpy():
    M = keras.metrics
    yt = np.array([0, 2, 1, 1])
    yp = np.array([[.7, .2, .1], [.1, .2, .7], [.3, .4, .3], [.5, .1, .4]], "f4")
    hit = (yp.argmax(-1) == yt).astype("f4")
    np.testing.assert_array_equal(M.sparse_categorical_accuracy(yt, yp), hit)
    np.testing.assert_array_equal(M.sparse_categorical_accuracy(yt[:, None], yp), hit)
    np.testing.assert_array_equal(M.categorical_accuracy(np.eye(3)[yt], yp), hit)
    top2 = np.array([yt[i] in np.argsort(-yp[i])[:2] for i in range(4)], "f4")
    np.testing.assert_array_equal(M.sparse_top_k_categorical_accuracy(yt, yp, k=2), top2)
    np.testing.assert_array_equal(M.top_k_categorical_accuracy(np.eye(3)[yt], yp, k=2), top2)
    ids = np.argsort(-yp, axis=-1)
    np.testing.assert_array_equal(M.sparse_top_k_categorical_accuracy(yt, ids, k=2, from_sorted_ids=True), top2)
    bt, bp = np.array([[1, 0], [0, 1]]), np.array([[.6, .4], [.7, .8]])
    np.testing.assert_array_equal(M.binary_accuracy(bt, bp), ((bp > .5) == bt).mean(-1))
    np.testing.assert_array_equal(M.binary_accuracy(bt, bp, threshold=0.75), ((bp > .75) == bt).mean(-1))
    np.testing.assert_allclose(M.mean_squared_error(np.ones((2, 3)), np.zeros((2, 3))), [1.0, 1.0])
    assert M.binary_crossentropy is keras.losses.binary_crossentropy


def test_metric_functions_in_compile_train_save_and_a_custom_step(tmp_path):
    M = keras.metrics
    x = RNG.random((16, 4)).astype("f4")
    y = RNG.integers(0, 3, 16)
    m = keras.Sequential([keras.Input((4,)), layers.Dense(3, activation="softmax")])
    m.compile("adam", "sparse_categorical_crossentropy",
              metrics=[M.sparse_categorical_accuracy, M.sparse_top_k_categorical_accuracy, M.huber])
    h = m.fit(x, y, verbose=0)
    assert {"sparse_categorical_accuracy", "sparse_top_k_categorical_accuracy", "huber"} <= set(h.history)
    got = m.evaluate(x, y, verbose=0, return_dict=True)
    p = m.predict(x, verbose=0)
    assert got["sparse_categorical_accuracy"] == pytest.approx(float((p.argmax(-1) == y).mean()))
    # huber of labels (n,) against (n, 3): the labels broadcast over the classes (Keras's)
    err = np.abs(p - y[:, None])
    want = np.where(err <= 1, 0.5 * err ** 2, err - 0.5).mean()
    assert got["huber"] == pytest.approx(float(want), rel=1e-5)
    m.save(str(tmp_path / "m.keras"))
    back = keras.models.load_model(str(tmp_path / "m.keras")).evaluate(x, y, verbose=0, return_dict=True)
    assert back == pytest.approx(got, rel=1e-5)

    class Custom(keras.Model):
        def train_step(self, data):
            xb, yb = data
            with keras.GradientTape() as tape:
                pb = self(xb, training=True)
                loss = keras.ops.mean(keras.losses.sparse_categorical_crossentropy(yb, pb))
            grads = tape.gradient(loss, self.trainable_weights)
            self.optimizer.apply_gradients(zip(grads, self.trainable_weights))
            return {"loss": loss, "acc": keras.ops.mean(M.sparse_categorical_accuracy(yb, pb))}

    inp = keras.Input((4,))
    c = Custom(inp, layers.Dense(3, activation="softmax")(inp))
    c.compile("adam")
    acc = c.fit(x, y, batch_size=16, verbose=0).history["acc"][0]
    assert 0.0 <= acc <= 1.0 and acc * 16 == pytest.approx(round(acc * 16))


def _adafactor_reference(w, g, st, t, lr, decay=-0.8, eps1=1e-30, eps2=1e-3, clip=1.0):
    """Keras's Adafactor step in float64, the weight in Keras's layout."""
    def rms(a):
        return np.sqrt(np.mean(a * a))
    rho = min(lr, 1 / np.sqrt(t))
    alpha = max(eps2, rms(w)) * rho
    b = 1 - t ** decay
    sq = g * g + eps1
    if w.ndim >= 2:
        st["r"] = b * st["r"] + (1 - b) * sq.mean(-1)
        st["c"] = b * st["c"] + (1 - b) * sq.mean(-2)
        v = (st["r"] / st["r"].mean(-1, keepdims=True))[..., None] * st["c"][..., None, :]
    else:
        st["v"] = b * st["v"] + (1 - b) * sq
        v = st["v"]
    u = g / np.sqrt(v)
    return w - alpha * u / max(1.0, rms(u) / clip)


def test_adafactor_matches_keras_update_on_dense_conv_and_a_tape():
    from pyggml.layers._keras_weights import keras_value
    x = RNG.random((8, 6, 6, 2)).astype("f4")
    y = RNG.random((8, 4, 4, 3)).astype("f4")
    m = keras.Sequential([keras.Input((6, 6, 2)), layers.Conv2D(3, 3)])
    m.compile(keras.optimizers.Adafactor(learning_rate=0.05), "mse")
    conv = m.layers[0]
    k, b = (np.asarray(a, "f8") for a in conv.get_weights())           # Keras's (3, 3, 2, 3) kernel
    sk, sb = {"r": np.zeros(k.shape[:-1]), "c": np.zeros(k.shape[:-2] + k.shape[-1:])}, {"v": np.zeros(3)}
    for t in range(1, 4):
        g = m.gradients(x, y)
        gk = keras_value(conv.weight, np.asarray(g[f"{conv.name}.weight"]))
        k = _adafactor_reference(k, gk.astype("f8"), sk, t, 0.05)
        b = _adafactor_reference(b, np.asarray(g[f"{conv.name}.bias"], "f8"), sb, t, 0.05)
        m.train_on_batch(x, y)
    got = conv.get_weights()
    np.testing.assert_allclose(got[0], k, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1], b, rtol=1e-5, atol=1e-6)

    v = keras.Variable(RNG.random((4, 3)).astype("f4"))
    opt = keras.optimizers.Adafactor(learning_rate=0.1)
    w, st = np.asarray(v.numpy(), "f8"), {"r": np.zeros(4), "c": np.zeros(3)}
    for t in range(1, 3):
        g = RNG.random((4, 3)).astype("f4")
        opt.apply_gradients([(g, v)])
        w = _adafactor_reference(w, g.astype("f8"), st, t, 0.1)
    np.testing.assert_allclose(v.numpy(), w, rtol=1e-5, atol=1e-6)
    cfg = opt.get_config()
    assert cfg["beta_2_decay"] == -0.8 and keras.optimizers.get("adafactor").name == "adafactor"
    assert type(keras.optimizers.Adafactor.from_config(cfg)) is keras.optimizers.Adafactor


class _OneWeight(layers.Layer):
    def __init__(self, shape, init, **kwargs):
        super().__init__(**kwargs)
        self.shape_, self.init = shape, init

    def build(self, input_shape):
        self.w = self.add_weight(name="w", shape=self.shape_, initializer=self.init)

    def call(self, x):
        return x


@pytest.mark.parametrize("shape", [(64, 512), (512, 32, 8), (3, 3, 3, 64)])
@pytest.mark.parametrize("init", ["glorot_uniform", "he_uniform", "lecun_uniform"])
def test_a_user_weight_counts_keras_fans(shape, init):
    # Keras: fan_in = shape[-2] * prod(shape[:-2]), fan_out = shape[-1] * prod(shape[:-2]); the
    # uniform draws reach the limit sqrt(6 / (fan_in + fan_out)), sqrt(6 / fan_in), sqrt(3 / fan_in)
    rf = int(np.prod(shape[:-2])) if len(shape) > 2 else 1
    fan_in, fan_out = shape[-2] * rf, shape[-1] * rf
    limit = {"glorot_uniform": np.sqrt(6 / (fan_in + fan_out)), "he_uniform": np.sqrt(6 / fan_in),
             "lecun_uniform": np.sqrt(3 / fan_in)}[init]
    layer = _OneWeight(shape, init)
    layer.build((None, 4))
    w = np.abs(layer.w.numpy())
    assert 0.98 * limit < w.max() <= limit
    # the same as the initializer called on the shape directly
    direct = np.abs(np.asarray(keras.initializers.get(init)(shape)))
    assert 0.98 * limit < direct.max() <= limit


def test_a_user_orthogonal_weight_of_more_dims_flattens_as_keras():
    layer = _OneWeight((3, 4, 6), "orthogonal")
    layer.build((None, 4))
    q = layer.w.numpy().reshape(12, 6)              # Keras's (prod(shape[:-1]), shape[-1])
    np.testing.assert_allclose(q.T @ q, np.eye(6), atol=1e-5)


class FF(layers.Layer):
    def call(self, x):
        return x


def test_a_subclassed_model_names_its_layers_by_kind_and_finds_them_by_attribute_too():
    class M(keras.Model):
        def __init__(self):
            super().__init__()
            self.layer_list = [FF(), FF()]
            self.b = FF()
            self.head = layers.Dense(2, name="out")

        def call(self, x):
            return self.head(self.b(x))

    m = M()
    assert [l.name for l in m.layers] == ["ff", "ff_1", "ff_2", "out"]
    assert m.get_layer("ff_1") is m.layer_list[1]
    assert m.get_layer("b") is m.b and m.get_layer("layer_list_0") is m.layer_list[0]
    m(np.ones((2, 3), "f4"))
    # the weights keep the attribute's name
    assert list(m.get_weights()) == ["m.head.weight", "m.head.bias"]


def test_compiled_metrics_of_a_model_compiled_without_metrics_takes_updates():
    # keras-io's metric_learning: self.compiled_metrics.update_state(...) in a train_step of a
    # model compiled with a loss only
    class M(keras.Model):
        def train_step(self, data):
            x, y = data
            with keras.GradientTape() as tape:
                p = self(x, training=True)
                loss = self.compute_loss(y=y, y_pred=p)
            grads = tape.gradient(loss, self.trainable_weights)
            self.optimizer.apply_gradients(zip(grads, self.trainable_weights))
            self.compiled_metrics.update_state(y, p)
            return {m.name: m.result() for m in self.metrics}

    inp = keras.Input((3,))
    m = M(inp, layers.Dense(1)(inp))
    m.compile("sgd", "mse")
    h = m.fit(RNG.random((8, 3)), RNG.random((8, 1)), verbose=0)
    assert np.isfinite(h.history["loss"][0])
    assert m.compiled_metrics.result() == {}


@pytest.mark.parametrize("method", ["apply_gradients", "apply"])
def test_fit_calls_an_optimizer_subclass_override_each_step(method):
    # keras-io's gradient centralization, as a Keras 3 user writes it: the optimizer's
    # apply_gradients (or apply) changes the gradients before the step
    calls = []

    class Centralized(keras.optimizers.SGD):
        if method == "apply_gradients":
            def apply_gradients(self, grads_and_vars):
                calls.append(1)
                return super().apply_gradients([(g - np.mean(np.asarray(g), axis=0, keepdims=True)
                                                 if np.ndim(g) > 1 else g, v) for g, v in grads_and_vars])
        else:
            def apply(self, grads, trainable_variables=None):
                calls.append(1)
                return super().apply([g - np.mean(np.asarray(g), axis=0, keepdims=True) if np.ndim(g) > 1 else g
                                      for g in grads], trainable_variables)

    x, y = RNG.random((64, 4)).astype("f4"), RNG.random((64, 1)).astype("f4")
    m = keras.Sequential([keras.Input((4,)), layers.Dense(3), layers.Dense(1)])
    m.compile(optimizer=Centralized(learning_rate=0.1), loss="mse")
    k0 = np.asarray(m.layers[0].kernel.numpy()).copy()
    m.fit(x, y, epochs=1, batch_size=16, shuffle=False, verbose=0)
    assert len(calls) == 4
    # the gradients come in pyggml's layout (units, in) (API.md), centralised over axis 0 there:
    # each row of the Keras-layout kernel's step sums to zero
    step = np.asarray(m.layers[0].kernel.numpy()) - k0
    np.testing.assert_allclose(step.sum(axis=1), 0, atol=1e-6)
    assert np.abs(step).max() > 1e-4


class _Pair(keras.Model):
    """keras-io's Keras 3 CycleGAN pattern: a call() never used by fit, built sub-models, an
    own train_step and compile."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.g = keras.Sequential([keras.Input((4,)), layers.Dense(4)])
        self.d = keras.Sequential([keras.Input((4,)), layers.Dense(1)])

    def call(self, x):
        return self.d(x), self.g(x)

    def compile(self, opt):
        super().compile()
        self.opt = opt

    def train_step(self, data):
        with keras.GradientTape() as tape:
            loss = keras.ops.mean(keras.ops.square(self.d(self.g(data))))
        v = self.g.trainable_variables + self.d.trainable_variables
        self.opt.apply_gradients(zip(tape.gradient(loss, v), v))
        return {"loss": loss}


def test_weights_of_a_subclassed_model_fit_by_its_own_step_without_a_call_save_and_load(tmp_path):
    m = _Pair()
    m.compile(keras.optimizers.Adam(0.1))
    before = m.get_weights()
    m.fit(np.ones((8, 4), "f4"), epochs=2, verbose=0,
          callbacks=[keras.callbacks.ModelCheckpoint(str(tmp_path / "ck.weights.h5"), save_weights_only=True)])
    after = m.get_weights()
    assert set(before) == set(after) and len(after) == 4
    assert any(not np.array_equal(before[k], after[k]) for k in after)
    fresh = _Pair()
    fresh.load_weights(str(tmp_path / "ck.weights.h5"))
    for k, a in fresh.get_weights().items():
        np.testing.assert_array_equal(a, after[k])
    # once called, the model names its weights the same
    x = np.ones((2, 4), "f4")
    fresh(x)
    assert set(fresh.get_weights()) == set(after)
    np.testing.assert_array_equal(fresh(x)[0], m.d(x))


def test_summary_counts_as_keras_prints_them():
    m = keras.Sequential([keras.Input((784,)), layers.Dense(512), layers.BatchNormalization(), layers.Dense(10)])
    lines = []
    m.summary(print_fn=lines.append)
    text = "\n".join(lines)
    assert "401,920" in text and "5,130" in text
    # 409,098 float32 values: 1,636,392 bytes = 1.56 MB; the moving statistics do not train
    assert "Total params: 409,098 (1.56 MB)" in text
    assert "Non-trainable params: 1,024 (4.00 KB)" in text


def _net_calling(aug):
    class Net(keras.Model):
        def __init__(self):
            super().__init__()
            self.flat = layers.Flatten()
            self.out = layers.Dense(3)

        def call(self, inputs):
            return self.out(self.flat(aug(inputs)))
    return Net()


@pytest.mark.parametrize("dtype", ["uint8", "float32"])
def test_a_layer_at_module_level_used_in_call_works_as_in_keras(dtype):
    # keras-io's perceiver: the call starts with a module-level data_augmentation whose adapted
    # Normalization the model does not hold (so does not train, as in Keras)
    x = RNG.uniform(0, 255, (32, 8, 8, 3)).astype(dtype)
    y = RNG.integers(0, 3, (32, 1))
    norm = layers.Normalization()
    norm.adapt(x)
    m = _net_calling(norm)
    m.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    m.fit(x, y, epochs=1, verbose=0)
    mean, var = (np.asarray(v) for v in (norm.mean, norm.variance))
    k, b = m.out.get_weights()
    want = ((x.astype("f8") - mean) / np.sqrt(np.maximum(var, 1e-7))).reshape(32, -1) @ k + b
    np.testing.assert_allclose(m.predict(x, verbose=0), want, rtol=1e-4, atol=1e-4)
    assert len(m.trainable_weights) == 2               # the Normalization is not the model's

    aug = keras.Sequential([layers.Normalization(), layers.Resizing(4, 4)])
    aug.layers[0].adapt(x)
    m2 = _net_calling(aug)
    m2.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    m2.fit(x, y, epochs=1, verbose=0)
    assert m2.predict(x, verbose=0).shape == (32, 3)


def test_a_model_starting_with_preprocessing_nests_on_computed_tensors():
    # keras-io's semantic_image_clustering: the clustering model (Resizing, an adapted
    # Normalization, RandomFlip, then dense layers) called on an Input and on a reshape of another
    x = RNG.uniform(0, 255, (16, 8, 8, 3)).astype("f4")
    pre = keras.Sequential([layers.Resizing(8, 8), layers.Normalization()])
    pre.layers[-1].adapt(x)
    inp = keras.Input((8, 8, 3))
    h = layers.RandomFlip("horizontal")(pre(inp))
    inner = keras.Model(inp, layers.Dense(4, activation="softmax")(layers.Flatten()(h)), name="clustering")
    a = keras.Input((8, 8, 3), name="anchors")
    n = keras.Input((2, 8, 8, 3), name="neighbours")
    out_n = keras.ops.reshape(inner(keras.ops.reshape(n, (-1, 8, 8, 3))), (-1, 2, 4))
    outer = keras.Model([a, n], [inner(a), out_n])
    pairs = np.stack([x[::-1], x], 1)
    got_a, got_n = outer.predict([x, pairs], verbose=0)
    want = inner.predict(x, verbose=0)
    np.testing.assert_allclose(got_a, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_n[:, 1], want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_n[:, 0], want[::-1], rtol=1e-5, atol=1e-6)
    outer.compile("adam", ["mse", "mse"])
    hist = outer.fit([x, pairs], [want, np.stack([want[::-1], want], 1)], epochs=2, verbose=0)
    assert np.isfinite(hist.history["loss"]).all()


def test_more_of_keras_names_activations_dtypes_policies_and_scopes():
    x = np.array([-1.0, 0.2, 0.7, -0.3], "f4")
    np.testing.assert_allclose(keras.activations.hard_shrink(x), np.where(np.abs(x) > 0.5, x, 0))
    np.testing.assert_allclose(keras.activations.threshold(x, 0.5, -2.0), np.where(x > 0.5, x, -2.0))
    np.testing.assert_allclose(keras.activations.sparse_sigmoid(np.array([-2.0, 0.0, 0.5, 3.0])),
                               [0.0, 0.5, 0.75, 1.0])
    d = layers.Dense(2, activation="hard_shrink")
    assert keras.layers.Dense.from_config(d.get_config()).activation_name == "hard_shrink"
    B = keras.backend
    assert B.standardize_dtype(int) == "int64" and B.standardize_dtype(np.float64) == "float64"
    assert B.standardize_dtype(None) == "float32" and B.standardize_dtype(str) == "string"
    assert B.result_type("int64", "float32") == "float32" and B.result_type("int8", "int16") == "int16"
    assert B.result_type("float16", "bfloat16") == "float32" and B.result_type("bool", "int32") == "int32"
    assert B.is_float_dtype("bfloat16") and B.is_int_dtype("uint8") and not B.is_int_dtype("float32")
    B.clear_session()
    assert [B.get_uid("x"), B.get_uid("x"), B.get_uid("y")] == [1, 2, 1]
    assert keras.utils.standardize_dtype("float32") == "float32"
    i, j = keras.Input((3,)), keras.Input((2,))
    out = layers.Concatenate()([layers.Dense(2)(i), j])
    src = keras.utils.get_source_inputs(out)
    assert len(src) == 2 and src[0] is i and src[1] is j and keras.utils.is_keras_tensor(out)
    p = keras.dtype_policies.get("float32")
    assert isinstance(p, keras.DTypePolicy) and keras.dtype_policies.deserialize(
        keras.dtype_policies.serialize(p)) == p
    assert keras.mixed_precision.dtype_policy() == "float32"
    with keras.name_scope("block") as scope:
        assert scope.name == "block"
    with keras.device("cpu:0"):
        pass
    with pytest.raises(ValueError, match="device"):
        keras.device("abacus")
    opt = keras.optimizers.Adam()
    assert keras.optimizers.LossScaleOptimizer(opt) is opt
    assert keras.initializers.OrthogonalInitializer is keras.initializers.Orthogonal


def test_saving_load_weights_function(tmp_path):
    m = keras.Sequential([keras.Input((3,)), layers.Dense(2)])
    keras.saving.save_weights(m, str(tmp_path / "w.weights.h5"))
    m2 = keras.Sequential([keras.Input((3,)), layers.Dense(2)])
    keras.saving.load_weights(m2, str(tmp_path / "w.weights.h5"))
    for k, a in m.get_weights().items():
        np.testing.assert_array_equal(m2.get_weights()[k], a)


@pytest.mark.parametrize("kind", ["Average", "Max"])
def test_adaptive_pooling_layers_match_pytorch(kind):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    fn = {"Average": (F.adaptive_avg_pool1d, F.adaptive_avg_pool2d, F.adaptive_avg_pool3d),
          "Max": (F.adaptive_max_pool1d, F.adaptive_max_pool2d, F.adaptive_max_pool3d)}[kind]
    cls = [getattr(layers, f"Adaptive{kind}Pooling{d}D") for d in (1, 2, 3)]
    x1 = RNG.random((3, 10, 4)).astype("f4")
    x2 = RNG.random((4, 9, 7, 3)).astype("f4")
    x3 = RNG.random((2, 5, 6, 7, 2)).astype("f4")

    def ref(f, x, size):               # channels-last in, channels-last out
        t = torch.tensor(x).movedim(-1, 1)
        return f(t, size).movedim(1, -1).numpy()

    np.testing.assert_allclose(cls[0](4)(x1), ref(fn[0], x1, 4), rtol=1e-5, atol=1e-6)
    for size in [(4, 3), (9, 7), (12, 10)]:            # smaller, the same, larger than the input
        m = keras.Sequential([keras.Input((9, 7, 3)), cls[1](size)])
        np.testing.assert_allclose(m.predict(x2, verbose=0), ref(fn[1], x2, size), rtol=1e-5, atol=1e-6)
    m3 = keras.Sequential([keras.Input((5, 6, 7, 2)), cls[2]((2, 3, 4))])
    np.testing.assert_allclose(m3.predict(x3, verbose=0), ref(fn[2], x3, (2, 3, 4)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(cls[2]((2, 3, 4))(x3), ref(fn[2], x3, (2, 3, 4)), rtol=1e-5, atol=1e-6)
    first = cls[1](2, data_format="channels_first")
    np.testing.assert_allclose(first(x2.transpose(0, 3, 1, 2)), fn[1](torch.tensor(x2).movedim(-1, 1), 2).numpy(),
                               rtol=1e-5, atol=1e-6)
    assert type(first).from_config(first.get_config()).output_size == (2, 2)
    # the gradient reaches the layers before it: a head on the pooled features trains
    net = keras.Sequential([keras.Input((9, 7, 3)), layers.Conv2D(4, 3), cls[1]((2, 2)), layers.Flatten(),
                            layers.Dense(1)])
    net.compile("adam", "mse")
    y = RNG.random((4, 1)).astype("f4")
    k0 = np.asarray(net.layers[0].kernel.numpy()).copy()
    net.fit(x2, y, epochs=3, verbose=0)
    assert not np.allclose(k0, net.layers[0].kernel.numpy())
    with pytest.raises(TypeError, match="output_size"):
        cls[1]((2, 2, 2))
    assert cls[2](2, data_format="channels_first").data_format == "channels_first"   # (test_channels_first_3d)


@pytest.mark.parametrize("tie", [True, False])
def test_reversible_embedding_as_a_language_model_head(tie, tmp_path):
    ids = RNG.integers(0, 12, (16, 5))
    y = RNG.integers(0, 12, (16, 5))
    emb = layers.ReversibleEmbedding(12, 6, tie_weights=tie, logit_soft_cap=5.0)
    inp = keras.Input((5,), dtype="int32")
    dense = layers.Dense(6, activation="tanh")
    m = keras.Model(inp, emb(dense(emb(inp)), reverse=True))
    m.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    table = np.asarray(emb.embeddings.numpy()).copy()
    w, b = dense.get_weights()
    head = table.T if tie else np.asarray(emb.reverse_embeddings.numpy())
    want = 5.0 * np.tanh((np.tanh(table[ids] @ w + b) @ head) / 5.0)
    np.testing.assert_allclose(m.predict(ids, verbose=0), want, rtol=1e-5, atol=1e-6)
    assert m.output_shape == (None, 5, 12)
    m.fit(ids, y, epochs=2, verbose=0)
    assert not np.allclose(table, emb.embeddings.numpy())
    m.save(str(tmp_path / "lm.keras"))
    back = keras.models.load_model(str(tmp_path / "lm.keras"))
    np.testing.assert_array_equal(back.predict(ids, verbose=0), m.predict(ids, verbose=0))
    assert emb.get_config()["tie_weights"] is tie
    assert layers.ReversibleEmbedding(5, 3)(np.ones((2, 3)), reverse=True).shape == (2, 5)


class _RandomCrop(layers.Layer):
    """keras-io's barlow twins augmentation: a size drawn in Python, then a crop and a resize."""

    def call(self, x):
        size = int(keras.random.randint(shape=[], minval=4, maxval=8, dtype="int32"))
        return keras.ops.image.resize(x[:size, :size, :], (8, 8))


class _MaybeInvert(layers.Layer):
    def call(self, x):
        if keras.random.uniform([], 0, 1) < 0.5:
            x = 1.0 - x
        return x


def test_a_layer_reading_random_values_in_python_runs_eagerly_on_arrays():
    img = RNG.random((8, 8, 3)).astype("f4")
    crops = {np.asarray(_RandomCrop()(img)).tobytes() for _ in range(12)}
    assert len(crops) > 1 and np.shape(_RandomCrop()(img)) == (8, 8, 3)
    seen = set()
    for _ in range(20):
        out = np.asarray(_MaybeInvert()(img))
        assert np.allclose(out, img) or np.allclose(out, 1 - img)
        seen.add(bool(np.allclose(out, img)))
    assert seen == {True, False}
    ds = keras.data.Dataset.from_tensor_slices(np.stack([img] * 4)).map(lambda x: _MaybeInvert()(x)).batch(4)
    assert next(iter(ds)).shape == (4, 8, 8, 3)
    # in a model's graph it is still refused with the graph's message (values are not known there)
    with pytest.raises(TypeError, match="truth value"):
        keras.Sequential([keras.Input((8, 8, 3)), _MaybeInvert()]).predict(img[None], verbose=0)


def test_sequential_whose_first_layer_is_a_model_saves(tmp_path):
    inp = keras.Input((8,))
    enc = keras.Model(inp, layers.Dense(4)(inp))
    model = keras.Sequential([enc, layers.Dense(2, activation="softmax")])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    x = RNG.random((16, 8)).astype("f4")
    model.fit(x, RNG.integers(0, 2, 16), epochs=1, verbose=0)
    for name in ("m.keras", "m.gguf"):
        model.save(str(tmp_path / name))
        back = keras.models.load_model(str(tmp_path / name))
        np.testing.assert_array_equal(back.predict(x, verbose=0), model.predict(x, verbose=0))


class _Combine(layers.Layer):
    """keras-io's NMT TransformerDecoder pattern: call(x, other, mask=None), masking supported."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def call(self, x, other, mask=None):
        return x + other


def test_a_layer_called_on_two_tensors_passes_the_first_ones_mask_on():
    ids_a, ids_b = keras.Input(shape=(None,), dtype="int32"), keras.Input(shape=(None,), dtype="int32")
    a = layers.Embedding(10, 4, mask_zero=True)(ids_a)
    h = layers.Embedding(10, 4, mask_zero=True)(ids_b)
    model = keras.Model([ids_a, ids_b], layers.Dense(1)(_Combine()(h, a)))
    model.compile(loss="mse")
    xa, xb = np.array([[1, 0, 0, 0]] * 4), np.array([[1, 2, 3, 0]] * 4)
    p = model.predict([xa, xb], verbose=0)[..., 0]
    # the loss is averaged over the steps ids_b marks real (the first argument's), as Keras's
    got = model.evaluate([xa, xb], np.zeros((4, 4, 1), "f4"), verbose=0)
    assert got == pytest.approx(float((p ** 2)[xb != 0].mean()), rel=1e-5)
    assert got != pytest.approx(float((p ** 2)[xa != 0].mean()), rel=1e-3)


def test_an_ops_function_as_activation_saves_as_itself(tmp_path):
    # keras-io's token learner: Dense(activation=ops.gelu), the tanh form by default (the
    # activation "gelu" is the exact one): reloaded as ops.gelu
    x = np.linspace(-3, 3, 16, dtype="float32").reshape(2, 8)
    assert np.abs(np.asarray(keras.ops.gelu(x)) - np.asarray(keras.activations.gelu(x))).max() > 1e-4
    inp = keras.Input((8,))
    m = keras.Model(inp, layers.Dense(8, activation=keras.ops.gelu)(inp))
    m.save(str(tmp_path / "g.keras"))
    back = keras.models.load_model(str(tmp_path / "g.keras"))
    np.testing.assert_array_equal(back.predict(x, verbose=0), m.predict(x, verbose=0))
    assert keras.activations.get("ops.gelu") is keras.ops.gelu
    assert keras.activations.serialize(keras.activations.gelu) == "gelu"


def _int8_of(k, axis):
    """Keras's abs-max int8 of k over ``axis``, dequantized."""
    s = 127 / np.abs(k).max(axis, keepdims=True)
    return np.clip(np.round(k * s), -127, 127) / s


def test_model_quantize_int8_matches_numpy_saves_small_and_loads(tmp_path):
    x = RNG.random((64, 20)).astype("f4")
    y = RNG.integers(0, 5, 64)
    m = keras.Sequential([keras.Input((20,)), layers.Dense(64, activation="relu"), layers.Dense(5)])
    m.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    m.fit(x, y, epochs=2, verbose=0)
    float_out = m.predict(x, verbose=0)
    k1, k2 = (np.asarray(l.kernel.numpy(), np.float64) for l in m.layers)
    m.save_weights(str(tmp_path / "f.weights.h5"))
    m.quantize("int8")
    d1, d2 = m.layers
    assert d1.quantization_mode == "int8" and d1.kernel_scale.shape == (64,)
    assert d1.dtype_policy.name == "int8_from_float32"
    assert [w.name for w in m.trainable_weights] == ["bias", "bias"]
    want = np.maximum(x @ _int8_of(k1, 0) + d1.get_weights()["bias"], 0) @ _int8_of(k2, 0) + d2.get_weights()["bias"]
    got = m.predict(x, verbose=0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert 1e-5 < np.abs(got - float_out).max() < 0.05 * np.abs(float_out).max()
    m.save(str(tmp_path / "q.gguf"))
    m.save_weights(str(tmp_path / "q.weights.h5"))
    # the integers are stored as int8: 3 bytes less per kernel value (1,600 of them), less the
    # scales' 4 bytes per unit (69) and some alignment
    saved = (tmp_path / "f.weights.h5").stat().st_size - (tmp_path / "q.weights.h5").stat().st_size
    assert saved >= 3 * 1600 - 4 * 69 - 256
    gguf = pytest.importorskip("gguf")
    types = {t.name: t.tensor_type.name for t in gguf.GGUFReader(str(tmp_path / "q.gguf")).tensors}
    assert types["dense.weight"] == "I8" and types["dense.kernel_scale"] == "F32"
    for name in ("q.gguf", "q.keras"):
        if name == "q.keras":
            m.save(str(tmp_path / name))
        back = keras.models.load_model(str(tmp_path / name))
        assert back.layers[0].quantization_mode == "int8"
        np.testing.assert_array_equal(back.predict(x, verbose=0), got)
    k_int = np.asarray(d1.weight.numpy()).copy()
    m.fit(x, y, epochs=1, verbose=0)                       # the integers stay; the biases train
    np.testing.assert_array_equal(d1.weight.numpy(), k_int)
    with pytest.raises(ValueError, match="quantized already"):
        d1.quantize("int8")
    with pytest.raises(ValueError, match="mode"):
        m.quantize("float8")


def test_quantize_embedding_einsum_dense_filters_and_qlora(tmp_path):
    ids = RNG.integers(0, 30, (16, 6))
    inp = keras.Input((6,), dtype="int32")
    e, ed, d = layers.Embedding(30, 8), layers.EinsumDense("abc,cd->abd", (6, 4), bias_axes="d"), layers.Dense(3)
    m = keras.Model(inp, d(layers.Flatten()(ed(e(inp)))))
    table, kernel = np.asarray(e.embeddings.numpy(), np.float64), np.asarray(ed.kernel.numpy(), np.float64)
    m.quantize("int8", filters=["embedding", "einsum"])
    assert (e.quantization_mode, ed.quantization_mode, d.quantization_mode) == ("int8", "int8", None)
    assert e.embeddings_scale.shape == (30,) and ed.kernel_scale.shape == (4,)
    want = (np.einsum("abc,cd->abd", _int8_of(table, 1)[ids], _int8_of(kernel, 0)) + ed.get_weights()["bias"])
    want = want.reshape(16, -1) @ d.get_weights()[0] + d.get_weights()[1]
    np.testing.assert_allclose(m.predict(ids, verbose=0), want, rtol=1e-5, atol=1e-5)
    # QLoRA: int4 weights, LoRA factors trained on top
    dense = layers.Dense(4)
    q = keras.Sequential([keras.Input((5,)), dense])
    q.quantize("int4")
    assert np.abs(dense.weight.numpy()).max() == 7
    dense.enable_lora(2)
    q.compile("adam", "mse")
    before = np.asarray(dense.weight.numpy()).copy()
    x = RNG.random((32, 5)).astype("f4")
    q.fit(x, RNG.random((32, 4)), epochs=3, verbose=0)
    np.testing.assert_array_equal(dense.weight.numpy(), before)
    assert np.abs(dense.get_weights()["lora_kernel_b"]).max() > 0
    q.save(str(tmp_path / "ql.keras"))
    np.testing.assert_array_equal(keras.models.load_model(str(tmp_path / "ql.keras")).predict(x, verbose=0),
                                  q.predict(x, verbose=0))
    with pytest.raises(ValueError, match="no layer to quantize"):
        keras.Sequential([keras.Input((3,)), layers.Flatten()]).quantize("int8")


def test_a_closure_loss_loads_back_by_its_name(tmp_path):
    # keras-io's siamese contrastive: loss(margin) returns its inner contrastive_loss
    def loss(margin=1.0):
        def contrastive_loss(y_true, y_pred):
            return keras.ops.mean((1 - y_true) * keras.ops.square(y_pred) +
                                  y_true * keras.ops.square(keras.ops.maximum(margin - y_pred, 0)))
        return contrastive_loss
    m = keras.Sequential([keras.Input((3,)), layers.Dense(1, activation="sigmoid")])
    m.compile("rmsprop", loss=loss(1.0))
    x, y = RNG.random((8, 3)).astype("f4"), RNG.integers(0, 2, (8, 1)).astype("f4")
    m.fit(x, y, verbose=0)
    m.save(str(tmp_path / "c.keras"))
    back = keras.models.load_model(str(tmp_path / "c.keras"), custom_objects={"contrastive_loss": loss(1.0)})
    assert back.evaluate(x, y, verbose=0) == pytest.approx(m.evaluate(x, y, verbose=0), rel=1e-6)


def test_correct_pad_takes_the_images_and_a_quantized_kernel_says_int8():
    from pyggml.applications import imagenet_utils
    x = keras.Input((32, 32, 3))
    assert imagenet_utils.correct_pad(x, 3) == imagenet_utils.correct_pad(x.shape, 3) == ((0, 1), (0, 1))
    d = layers.Dense(4)
    m = keras.Sequential([keras.Input((3,)), d])
    m.quantize("int8")
    assert d.kernel.dtype == "int8" and d.kernel.numpy().dtype == np.int8
    assert np.abs(d.kernel.numpy()).max() == 127


def test_optimizer_iterations_answers_keras_variable_calls(tmp_path):
    m = keras.Sequential([keras.Input((3,)), layers.Dense(1)])
    m.compile("adam", "mse")
    m.fit(np.ones((8, 3)), np.ones((8, 1)), batch_size=4, verbose=0)
    it = m.optimizer.iterations
    assert it == 2 and it.numpy() == np.int64(2) and it + 1 == 3 and it.value == 2
    m.optimizer.iterations.assign(10)
    assert m.optimizer.iterations == 10
    m.optimizer.iterations.assign_add(1)
    assert int(m.optimizer.iterations) == 11
    m.save(str(tmp_path / "it.keras"))
    assert keras.models.load_model(str(tmp_path / "it.keras")).optimizer.iterations == 11
    with pytest.raises(ValueError, match="whole number"):
        m.optimizer.iterations = -1


def test_a_wider_target_takes_the_output_broadcast_to_it():
    # keras-io's customizing-fit guide: an (n, 1) output fit on (n, 10) targets with mse
    x, y = RNG.random((8, 4)).astype("f4"), RNG.random((8, 10)).astype("f4")
    m = keras.Sequential([keras.Input((4,)), layers.Dense(1)])
    m.compile("sgd", "mse", metrics=["mae"])
    p = m.predict(x, verbose=0)
    loss, mae = m.evaluate(x, y, verbose=0)
    assert loss == pytest.approx(float(((p - y) ** 2).mean()), rel=1e-5)
    assert mae == pytest.approx(float(np.abs(p - y).mean()), rel=1e-5)
    h = m.fit(x, y, epochs=3, verbose=0)
    assert h.history["loss"][-1] < h.history["loss"][0]


@keras.saving.register_keras_serializable(package="gaps9")
def _square_sum_loss(y_true, y_pred):
    return keras.ops.sum(keras.ops.square(y_pred - y_true) / 10.0, axis=1)


@keras.saving.register_keras_serializable(package="gaps9")
class _OwnCompile(keras.Model):
    """keras-io's customizing-saving guide: get_compile_config returns the objects themselves."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.dense = layers.Dense(4, activation="softmax")

    def call(self, inputs):
        return self.dense(inputs)

    def compile(self, optimizer, loss_fn, metrics):
        super().compile(optimizer=optimizer, loss=loss_fn, metrics=metrics)
        self.model_optimizer, self.loss_fn, self.loss_metrics = optimizer, loss_fn, metrics

    def get_compile_config(self):
        return {"model_optimizer": self.model_optimizer, "loss_fn": self.loss_fn, "metric": self.loss_metrics}

    def compile_from_config(self, config):
        self.compile(optimizer=keras.utils.deserialize_keras_object(config["model_optimizer"]),
                     loss_fn=keras.utils.deserialize_keras_object(config["loss_fn"]),
                     metrics=keras.utils.deserialize_keras_object(config["metric"]))


def test_own_compile_config_with_objects_saves_and_its_compile_from_config_loads(tmp_path):
    m = _OwnCompile()
    m.compile(optimizer="SGD", loss_fn=_square_sum_loss, metrics=["accuracy"])
    x, y = RNG.random((4, 8)).astype("f4"), RNG.random((4, 4)).astype("f4")
    m.fit(x, y, verbose=0)
    m.save(str(tmp_path / "own.keras"))
    back = keras.models.load_model(str(tmp_path / "own.keras"))
    assert back.loss_fn is _square_sum_loss
    assert back.evaluate(x, y, verbose=0) == pytest.approx(m.evaluate(x, y, verbose=0), rel=1e-6)


def test_a_nested_models_dict_output_picked_by_key_saves_and_loads(tmp_path):
    # keras-io's multimodal entailment: bert(inputs)["pooled_output"]
    i = keras.Input((4,))
    bert = keras.Model(i, {"pooled_output": layers.Dense(2)(i), "sequence_output": layers.Dense(3)(i)})
    a = keras.Input((4,))
    x = RNG.random((2, 4)).astype("f4")
    for out in (layers.Dense(1)(bert(a)["pooled_output"]), bert(a)["sequence_output"]):
        m = keras.Model(a, out)
        m.save(str(tmp_path / "m.keras"))
        back = keras.models.load_model(str(tmp_path / "m.keras")).predict(x, verbose=0)
        assert isinstance(back, np.ndarray)
        np.testing.assert_array_equal(back, m.predict(x, verbose=0))


@keras.saving.register_keras_serializable(package="gaps9")
class _DenseWithOwnVariable(layers.Dense):
    """Keras's serialization guide: a Dense subclass storing one more variable in its hooks."""

    def __init__(self, units, **kwargs):
        super().__init__(units, **kwargs)
        self.my_variable = keras.Variable(np.arange(units, dtype="f4"), name="my_variable", dtype="float32")

    def save_own_variables(self, store):
        super().save_own_variables(store)
        store["variables"] = self.my_variable.numpy()

    def load_own_variables(self, store):
        self.my_variable.assign(store["variables"])
        super().load_own_variables(store)


def test_a_dense_subclass_hooks_calling_super_save_and_load(tmp_path):
    m = keras.Sequential([_DenseWithOwnVariable(2)])
    m.build((None, 3))
    m.layers[0].my_variable.assign(np.array([5.0, 7.0], "f4"))
    m.save(str(tmp_path / "own.keras"))
    back = keras.models.load_model(str(tmp_path / "own.keras"))
    np.testing.assert_array_equal(back.layers[0].my_variable.numpy(), [5.0, 7.0])
    x = RNG.random((2, 3)).astype("f4")
    np.testing.assert_array_equal(back.predict(x, verbose=0), m.predict(x, verbose=0))


def test_model_inputs_as_a_list_holding_a_dict(tmp_path):
    # keras-io's multimodal entailment: keras.Model([image_1, image_2, text_inputs], ...)
    a = keras.Input(shape=(4,), name="a")
    t = {"t1": keras.Input(shape=(3,)), "t2": keras.Input(shape=(3,))}
    dense = layers.Dense(1)
    m = keras.Model([a, t], dense(layers.Concatenate()([a, t["t1"], t["t2"]])))
    xa, x1, x2 = (RNG.random((5, n)).astype("f4") for n in (4, 3, 3))
    k, b = dense.get_weights()
    want = np.concatenate([xa, x1, x2], 1) @ k + b
    got = m.predict([xa, {"t1": x1, "t2": x2}], verbose=0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    m.compile("sgd", "mse")
    m.fit([xa, {"t2": x2, "t1": x1}], np.ones((5, 1)), verbose=0)
    m.save(str(tmp_path / "nest.keras"))
    back = keras.models.load_model(str(tmp_path / "nest.keras"))
    np.testing.assert_array_equal(back.predict([xa, {"t1": x1, "t2": x2}], verbose=0),
                                  m.predict([xa, {"t1": x1, "t2": x2}], verbose=0))


def test_a_list_holding_a_dict_of_one_input_and_iterations_refuse_inf():
    a, t = keras.Input((2,), name="a"), keras.Input((3,))
    m = keras.Model([a, {"t": t}], layers.Concatenate()([a, t]))
    xa, xt = RNG.random((4, 2)).astype("f4"), RNG.random((4, 3)).astype("f4")
    np.testing.assert_array_equal(m.predict([xa, {"t": xt}], verbose=0), np.concatenate([xa, xt], 1))
    opt = keras.optimizers.SGD()
    for bad in (float("inf"), float("nan"), 2.5, True, "3"):
        with pytest.raises(ValueError, match="whole number"):
            opt.iterations = bad
    opt.iterations = 4.0
    assert opt.iterations == 4
