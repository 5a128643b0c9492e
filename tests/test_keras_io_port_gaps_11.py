"""Gaps found by porting more keras-io scripts and guides (summarization, rlhf_dummy_demo,
feature_space_advanced, intro_to_keras_for_researchers, migration_guide_tf_keras_3_0,
int8_quantization_in_keras), each checked against Keras 3's behaviour."""

import os

import numpy as np
import pytest

import pyggml as pg
from pyggml import layers, ops
from pyggml.utils import FeatureSpace


# --- a key a callback adds to the logs reaches the History (HF's KerasMetricCallback) ----------

class _AddScore(pg.callbacks.Callback):
    def on_epoch_end(self, epoch, logs=None):
        logs["RougeL"] = 0.5 + epoch


def test_a_key_a_callback_adds_to_the_epoch_logs_reaches_history_and_later_callbacks():
    seen = []
    later = pg.callbacks.LambdaCallback(on_epoch_end=lambda epoch, logs: seen.append(logs.get("RougeL")))
    m = pg.Sequential([pg.Input((3,)), layers.Dense(1)])
    m.compile(optimizer="adam", loss="mse")
    h = m.fit(np.ones((8, 3)), np.ones((8, 1)), epochs=2, verbose=0, callbacks=[_AddScore(), later])
    assert h.history["RougeL"] == [0.5, 1.5]
    assert seen == [0.5, 1.5]


def test_early_stopping_watches_a_key_an_earlier_callback_adds():
    class Falling(pg.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            logs["score"] = [1.0, 0.5, 0.6, 0.7, 0.8, 0.9][epoch]
    m = pg.Sequential([pg.Input((3,)), layers.Dense(1)])
    m.compile(optimizer="adam", loss="mse")
    h = m.fit(np.ones((8, 3)), np.ones((8, 1)), epochs=6, verbose=0,
              callbacks=[Falling(), pg.callbacks.EarlyStopping(monitor="score", mode="max", patience=1)])
    assert len(h.history["loss"]) == 2          # no improvement on 1.0 after epoch 0, patience 1


def test_a_key_a_callback_removes_is_gone_for_the_callbacks_after_it_as_in_keras():
    class Drop(pg.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            logs.pop("loss")
    m = pg.Sequential([pg.Input((3,)), layers.Dense(1)])
    m.compile(optimizer="adam", loss="mse")
    h = m.fit(np.ones((8, 3)), np.ones((8, 1)), epochs=2, verbose=0, callbacks=[Drop()])
    assert "loss" not in h.history                           # as Keras (its history is {}): History is last
    assert "learning_rate" in h.history


# --- stateless_call (the JAX-style forward of rlhf_dummy_demo) ----------------------------------

def _bn_model():
    inp = pg.Input((3,))
    h = layers.BatchNormalization(momentum=0.5)(layers.Dense(4)(inp))
    return pg.Model(inp, layers.Dense(2)(h))


def test_stateless_call_computes_with_the_given_values_and_leaves_the_model_as_it_was():
    m = _bn_model()
    x = np.arange(15, dtype=np.float32).reshape(5, 3) / 10
    before = [v.numpy().copy() for v in m.variables]
    tv = [v.numpy() * 2 for v in m.trainable_variables]
    ntv = [v.numpy() for v in m.non_trainable_variables]
    y, new_state = m.stateless_call(tv, ntv, x)
    for v, a in zip(m.variables, before):
        np.testing.assert_array_equal(v.numpy(), a)
    twin = _bn_model()
    for v, a in zip(twin.trainable_variables, tv):
        v.assign(a)
    np.testing.assert_allclose(np.asarray(y), twin.predict(x, verbose=0), rtol=1e-5, atol=1e-6)
    assert len(new_state) == len(ntv)


def test_stateless_call_in_training_returns_the_moving_statistics_it_wrote():
    m = _bn_model()
    x = np.random.default_rng(0).normal(size=(6, 3)).astype(np.float32)
    tv = [v.numpy() for v in m.trainable_variables]
    ntv = [v.numpy() for v in m.non_trainable_variables]
    names = [v.name for v in m.non_trainable_variables]
    _, new_state = m.stateless_call(tv, ntv, x, training=True)
    dense = m.layers[1]
    h = x @ dense.kernel.numpy() + dense.bias.numpy()
    mean = dict(zip(names, new_state))
    key = next(n for n in names if "mean" in n)
    np.testing.assert_allclose(mean[key], 0.5 * 0.0 + 0.5 * h.mean(axis=0), rtol=1e-4, atol=1e-5)
    assert np.all(m.non_trainable_variables[names.index(key)].numpy() == 0)      # the model's own: unchanged


def test_stateless_call_refuses_wrong_lists_and_an_unbuilt_layer():
    m = _bn_model()
    tv = [v.numpy() for v in m.trainable_variables]
    ntv = [v.numpy() for v in m.non_trainable_variables]
    x = np.ones((2, 3), np.float32)
    with pytest.raises(ValueError, match="1:1"):
        m.stateless_call(tv[:-1], ntv, x)
    with pytest.raises(ValueError, match="1:1"):
        m.stateless_call(tv, ntv + ntv, x)
    with pytest.raises(ValueError, match="shape"):
        m.stateless_call([a.T for a in tv], ntv, x)
    with pytest.raises(TypeError, match="list of arrays"):
        m.stateless_call(None, ntv, x)
    with pytest.raises(ValueError, match="built"):
        layers.Dense(2).stateless_call([], [], x)
    before = [v.numpy().copy() for v in m.variables]
    with pytest.raises(Exception):
        m.stateless_call([a * 3 for a in tv], ntv, np.ones((2, 7), np.float32))       # a failing call
    for v, a in zip(m.variables, before):                # the values are put back all the same
        np.testing.assert_array_equal(v.numpy(), a)


def test_stateless_call_with_return_losses_gives_the_call_s_losses():
    class Penalized(layers.Layer):
        def build(self, shape):
            self.w = self.add_weight(shape=(shape[-1], 1), initializer="ones")

        def call(self, x):
            self.add_loss(ops.sum(self.w) * 1.0)
            return ops.matmul(x, self.w)
    lay = Penalized()
    lay(np.ones((1, 2), np.float32))
    out, state, losses = lay.stateless_call([np.full((2, 1), 3.0, np.float32)], [], np.ones((1, 2), np.float32),
                                            return_losses=True)
    np.testing.assert_allclose(np.asarray(out), [[6.0]])
    assert state == [] and len(losses) == 1
    np.testing.assert_allclose(float(np.asarray(losses[0]).reshape(-1)[0]), 6.0)


# --- FeatureSpace.from_config -------------------------------------------------------------

def _fs_data(n=40):
    rng = np.random.default_rng(0)
    return {"a": rng.normal(size=n).astype("float32"), "b": rng.integers(0, 5, n).astype("int32"),
            "s": rng.choice(["x", "y", "z"], n), "d": rng.uniform(0, 10, n).astype("float32"),
            "h": rng.choice(["p", "q", "r", "t"], n), "t": np.array(["a b c", "b c d", "c d e", "a a b"] * (n // 4))}


def test_feature_space_from_config_makes_it_again_and_it_encodes_alike_once_adapted():
    fs = FeatureSpace(features={
        "a": FeatureSpace.float_normalized(), "b": FeatureSpace.integer_categorical(num_oov_indices=1),
        "s": FeatureSpace.string_categorical(output_mode="int"), "d": FeatureSpace.float_discretized(num_bins=3),
        "h": FeatureSpace.string_hashed(num_bins=4),
        "t": FeatureSpace.feature(preprocessor=layers.TextVectorization(output_mode="tf_idf", max_tokens=6),
                                  dtype="string", output_mode="float")},
        crosses=[FeatureSpace.cross(("b", "s"), crossing_dim=8)], output_mode="concat")
    data = _fs_data()
    ds = pg.data.Dataset.from_tensor_slices(data)
    fs.adapt(ds)
    again = FeatureSpace.from_config(fs.get_config())
    assert type(again) is FeatureSpace and again.get_config() == fs.get_config()
    again.adapt(ds)
    np.testing.assert_array_equal(np.asarray(again(data)), np.asarray(fs(data)))


def test_feature_space_from_config_of_a_loaded_one_and_bad_configs(tmp_path):
    fs = FeatureSpace(features={"f": FeatureSpace.float_rescaled(scale=2.0, offset=1.0)}, output_mode="dict")
    fs.adapt(pg.data.Dataset.from_tensor_slices({"f": np.arange(8, dtype="float32")}))
    fs.save(str(tmp_path / "fs.keras"))
    loaded = pg.saving.load_model(str(tmp_path / "fs.keras"))
    assert type(type(loaded).from_config(loaded.get_config())) is FeatureSpace
    for bad in (None, {"features": 3}, {"features": {"a": {"kind": "nope"}}}):
        with pytest.raises(ValueError, match="from_config"):
            FeatureSpace.from_config(bad)


# --- tf.keras's metric.reset_states() -------------------------------------------------------

@pytest.mark.parametrize("make", [pg.metrics.SparseCategoricalAccuracy, pg.metrics.Mean, pg.metrics.AUC])
def test_reset_states_resets_a_built_in_metric(make):
    m = make()
    if make is pg.metrics.Mean:
        m.update_state([1.0, 3.0])
    elif make is pg.metrics.AUC:
        m.update_state([0, 1, 1], [0.2, 0.8, 0.4])
    else:
        m.update_state([1, 0], [[0.1, 0.9], [0.8, 0.2]])
    assert float(m.result()) != 0.0
    m.reset_states()
    assert float(m.result()) == 0.0


# --- Dense.kernel has no setter (the researchers guide's hypernetwork) ----------------------

def test_a_kernel_set_from_outside_is_refused_as_keras_refuses_it():
    net = pg.Sequential([layers.Dense(3)])
    net(np.ones((1, 4), "float32"))
    with pytest.raises(AttributeError, match="has no setter"):
        net.layers[0].kernel = ops.ones((4, 3))
    c = layers.Conv2D(2, 3)
    c.build((None, 5, 5, 1))
    with pytest.raises(AttributeError, match="has no setter"):
        c.kernel = np.ones((3, 3, 1, 2), "float32")
    net.layers[0].kernel.assign(np.ones((4, 3), "float32"))       # its values: still set this way
    np.testing.assert_allclose(net.predict(np.ones((1, 4), "float32"), verbose=0), [[4.0, 4.0, 4.0]])


# --- a layer of the user's called on a nested dict of inputs (the migration guide) --------

@pg.saving.register_keras_serializable("gaps11")
class _Pick(layers.Layer):
    def call(self, inputs):
        return inputs["foo"] * 2.0 + inputs["bar"]["baz"] - inputs["bar"]["q"]


def test_a_layer_takes_a_nested_dict_of_inputs_symbolic_and_eager(tmp_path):
    a, b, c = pg.Input((2,), name="a"), pg.Input((2,), name="b"), pg.Input((2,), name="c")
    out = layers.Dense(1, kernel_initializer="ones")(_Pick()({"foo": a, "bar": {"baz": b, "q": c}}))
    m = pg.Model([a, b, c], out)
    x = [np.ones((3, 2), "float32"), np.full((3, 2), 2.0, "float32"), np.full((3, 2), 0.5, "float32")]
    np.testing.assert_allclose(m.predict(x, verbose=0).ravel(), [7.0, 7.0, 7.0])
    np.testing.assert_allclose(np.asarray(_Pick()({"foo": x[0], "bar": {"baz": x[1], "q": x[2]}}))[0], [3.5, 3.5])
    m.save(str(tmp_path / "m.keras"))
    back = pg.saving.load_model(str(tmp_path / "m.keras"))
    np.testing.assert_allclose(back.predict(x, verbose=0).ravel(), [7.0, 7.0, 7.0])


# --- model.quantize takes MultiHeadAttention's projections (int8_quantization_in_keras) ----

def _attention_model(kind):
    inp = pg.Input(shape=(6, 16))
    if kind == "gqa":
        att = layers.GroupedQueryAttention(head_dim=4, num_query_heads=4, num_key_value_heads=2)
    else:
        att = layers.MultiHeadAttention(num_heads=2, key_dim=8, use_gate=(kind == "gate"))
    return pg.Model(inp, layers.Dense(3)(att(inp, inp))), att


@pytest.mark.parametrize("kind", ["mha", "gate", "gqa"])
@pytest.mark.parametrize("mode", ["int8", "int4"])
def test_quantize_takes_the_attention_projections_and_computes_with_q_over_scale(kind, mode, tmp_path):
    x = np.random.default_rng(1).normal(size=(4, 6, 16)).astype(np.float32)
    m, att = _attention_model(kind)
    twin, twin_att = _attention_model(kind)
    twin.set_weights(m.get_weights())
    qmax = 127 if mode == "int8" else 7
    projections = [(n, v) for n, v in att.named_variables() if n.endswith(".weight")]
    assert len(projections) == (5 if kind == "gate" else 4)
    # the reference: each projection's (and the Dense's) rows rounded to qmax / max|row| steps, in numpy
    twins = dict(twin.named_variables())
    for n, v in m.named_variables():
        if n.endswith(".weight"):
            w = v.numpy().astype(np.float64)
            s = qmax / np.abs(w).max(axis=1, keepdims=True)
            twins[n].assign((np.round(w * s) / s).astype(np.float32))
    m.quantize(mode)
    assert att.quantization_mode == mode and att.dtype_policy.name == f"{mode}_from_float32"
    for n, v in projections:
        q = v.numpy()
        assert not v.trainable and np.array_equal(q, np.round(q)) and np.abs(q).max() == qmax
    scales = [n for n, _ in att.named_variables() if n.endswith("kernel_scale")]
    assert len(scales) == len(projections)
    np.testing.assert_allclose(m.predict(x, verbose=0), twin.predict(x, verbose=0), rtol=1e-4, atol=1e-5)
    m.save(str(tmp_path / "q.keras"))
    back = pg.saving.load_model(str(tmp_path / "q.keras"))
    np.testing.assert_array_equal(back.predict(x, verbose=0), m.predict(x, verbose=0))
    with pytest.raises(ValueError, match="quantized already"):
        att.quantize(mode)


def test_a_model_of_attention_alone_quantizes_and_still_trains_its_biases():
    m, att = _attention_model("mha")
    m.quantize("int8")
    m.compile(optimizer="adam", loss="mse")
    x = np.random.default_rng(2).normal(size=(8, 6, 16)).astype(np.float32)
    q_before = att.q_w.numpy().copy()
    b_before = att.q_b.numpy().copy()
    m.fit(x, np.zeros((8, 6, 3), np.float32), epochs=2, verbose=0)
    np.testing.assert_array_equal(att.q_w.numpy(), q_before)       # the integers are frozen
    assert not np.array_equal(att.q_b.numpy(), b_before)


# --- saving a Sequential still waiting for its data; loading a folder -----------------------

def test_an_unbuilt_sequential_saves_its_config_and_compile_and_loads_unbuilt(tmp_path):
    m = pg.Sequential([layers.Dense(4, activation="relu"), layers.Dense(1)])
    m.compile(optimizer=pg.optimizers.Adam(0.01), loss="mse", metrics=["mae"])
    path = str(tmp_path / "unbuilt.keras")
    m.save(path)
    back = pg.saving.load_model(path)
    assert type(back) is pg.Sequential and not back.built and len(back.layers) == 2
    h = back.fit(np.ones((8, 3), "float32"), np.ones((8, 1), "float32"), epochs=2, verbose=0)
    assert "mae" in h.history and back.built
    assert back.optimizer.learning_rate == pytest.approx(0.01)
    plain = pg.Sequential([layers.Dense(2)])
    plain.save(str(tmp_path / "plain.keras"))
    again = pg.saving.load_model(str(tmp_path / "plain.keras"))
    assert not again.built and again(np.ones((2, 5), "float32")).shape == (2, 2)


def test_load_model_of_a_folder_is_a_value_error(tmp_path):
    os.makedirs(tmp_path / "saved_model")
    with pytest.raises(ValueError, match="is a directory"):
        pg.saving.load_model(str(tmp_path / "saved_model"))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_load_model_of_a_fifo_is_refused_without_waiting_on_it(tmp_path):
    fifo = str(tmp_path / "pipe.keras")
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="not a regular file"):      # it waited for a writer for ever
        pg.saving.load_model(fifo)


# --- from a review of the above ---------------------------------------------------------------

def test_a_layer_on_a_nested_dict_gets_its_masks_in_the_same_nested_dict():
    seen = {}

    class Masked(layers.Layer):
        supports_masking = True

        def call(self, inputs, mask=None):
            seen["mask"] = mask
            return inputs["foo"] + inputs["bar"]["baz"] * ops.expand_dims(ops.cast(mask["bar"]["baz"], "float32"), -1)
    ia, ib = pg.Input((3,), dtype="int32"), pg.Input((3,), dtype="int32")
    ea = layers.Embedding(5, 2, mask_zero=True, embeddings_initializer="ones")(ia)
    eb = layers.Embedding(5, 2, mask_zero=True, embeddings_initializer="ones")(ib)
    m = pg.Model([ia, ib], Masked()({"foo": ea, "bar": {"baz": eb}}))
    assert isinstance(seen["mask"], dict) and isinstance(seen["mask"]["bar"], dict)
    out = m.predict([np.array([[1, 2, 0]]), np.array([[3, 0, 4]])], verbose=0)
    np.testing.assert_array_equal(out[0, :, 0], [2.0, 1.0, 2.0])          # b's padded step adds nothing


@pg.saving.register_keras_serializable("gaps11")
class _NestedModel(pg.Model):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.d1 = layers.Dense(2, kernel_initializer="ones")
        self.d2 = layers.Dense(2, kernel_initializer="ones")

    def call(self, inputs):
        return self.d1(inputs["foo"]) + self.d2(inputs["bar"]["baz"])


def test_a_subclassed_model_is_called_fit_and_predicted_on_a_nested_dict(tmp_path):
    rng = np.random.default_rng(0)
    x = {"foo": rng.normal(size=(8, 3)).astype("float32"), "bar": {"baz": rng.normal(size=(8, 4)).astype("float32")}}
    want = np.repeat((x["foo"].sum(1) + x["bar"]["baz"].sum(1))[:, None], 2, axis=1)
    m = _NestedModel()
    np.testing.assert_allclose(np.asarray(m(x)), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(m.predict(x, verbose=0), want, rtol=1e-5, atol=1e-5)
    m.compile(optimizer="sgd", loss="mse")
    m.fit(x, np.zeros((8, 2)), epochs=2, verbose=0)
    m.save(str(tmp_path / "nested.keras"))
    back = pg.saving.load_model(str(tmp_path / "nested.keras"))
    np.testing.assert_array_equal(back.predict(x, verbose=0), m.predict(x, verbose=0))


def test_stateless_call_holds_the_model_s_lock_so_another_thread_never_sees_its_values():
    import threading
    x = np.random.default_rng(0).normal(size=(4, 3)).astype(np.float32)
    m = pg.Sequential([pg.Input((3,)), layers.Dense(2)])
    want = m.predict(x, verbose=0)
    zeros = [np.zeros(tuple(v.shape), np.float32) for v in m.trainable_variables]
    stop = threading.Event()

    def other():
        while not stop.is_set():
            m.stateless_call(zeros, [], x)
    t = threading.Thread(target=other, daemon=True)
    t.start()
    try:
        bad = sum(not np.allclose(m.predict(x, verbose=0), want) for _ in range(300))
    finally:
        stop.set()
        t.join(30)
    assert bad == 0


def test_stateless_call_leaves_the_layer_s_losses_as_they_were():
    x = np.linspace(-1, 1, 12).reshape(4, 3).astype("float32")
    d = layers.Dense(2, kernel_initializer="zeros", activity_regularizer=pg.regularizers.L1(1.0))
    d(x)
    assert [float(np.asarray(v)) for v in d.losses] == [0.0]
    ones = [np.ones(tuple(v.shape), "float32") for v in d.trainable_variables]
    _, _, losses = d.stateless_call(ones, [], x, return_losses=True)
    assert float(np.asarray(losses[0])) > 0                        # the call's own, at the values given
    assert [float(np.asarray(v)) for v in d.losses] == [0.0]       # the layer's: still its last call's


def test_a_kernel_keras_would_use_is_refused_with_pyggml_s_reason():
    t = layers.Conv2DTranspose(2, 3)
    t.build((None, 5, 5, 1))
    with pytest.raises(AttributeError, match="would not be used"):
        t.kernel = np.ones(tuple(t.kernel.shape), "float32")
    with pytest.raises(AttributeError, match="has no setter"):
        c = layers.Conv1D(2, 3)
        c.build((None, 5, 1))
        c.kernel = np.ones((3, 1, 2), "float32")


def test_an_unbuilt_sequential_s_saved_compile_keeps_its_seed(tmp_path):
    x = np.linspace(-1, 1, 12).reshape(4, 3).astype("float32")

    def seq():
        return pg.Sequential([layers.Dense(4), layers.Dense(1)])
    m = seq()
    m.compile(optimizer="adam", loss="mse", seed=3)
    m.save(str(tmp_path / "s.keras"))
    loaded = pg.saving.load_model(str(tmp_path / "s.keras"))
    np.testing.assert_array_equal(loaded.predict(x, verbose=0), m.predict(x, verbose=0))


# --- from a hostile probe of the above ----------------------------------------------------------

def test_a_quantized_weight_refuses_float_values_from_before_quantizing():
    m, att = _attention_model("mha")
    before = m.get_weights()
    m.quantize("int8")
    x = np.random.default_rng(3).normal(size=(2, 6, 16)).astype(np.float32)
    want = m.predict(x, verbose=0)
    with pytest.raises(ValueError, match="is quantized"):
        m.set_weights(before)                 # floats in the integer weight: silently wrong before
    np.testing.assert_array_equal(m.predict(x, verbose=0), want)
    m.set_weights(m.get_weights())            # its own integers: taken


def test_load_weights_refuses_quantized_weights_into_a_float_model_and_back(tmp_path):
    q, _ = _attention_model("mha")
    q.quantize("int8")
    q.save_weights(str(tmp_path / "q.weights.h5"))
    f, _ = _attention_model("mha")
    f.save_weights(str(tmp_path / "f.weights.h5"))
    with pytest.raises(ValueError, match="quantized in the file"):
        f.load_weights(str(tmp_path / "q.weights.h5"))
    with pytest.raises(ValueError, match="quantized in the model"):
        q.load_weights(str(tmp_path / "f.weights.h5"))
    q2, _ = _attention_model("mha")
    q2.quantize("int8")
    q2.load_weights(str(tmp_path / "q.weights.h5"))
    x = np.ones((2, 6, 16), np.float32)
    np.testing.assert_array_equal(q2.predict(x, verbose=0), q.predict(x, verbose=0))


def test_threshold_counts_are_bounded():
    with pytest.raises(ValueError, match="num_thresholds"):
        pg.metrics.AUC(num_thresholds=2_000_000_000)        # it laid out the list for minutes
    with pytest.raises(ValueError, match="num_thresholds"):
        pg.metrics.PrecisionAtRecall(0.5, num_thresholds=2_000_000_000)
    assert pg.metrics.AUC(num_thresholds=1000).num_thresholds == 1000


def test_stateless_call_refuses_symbolic_inputs():
    m = _bn_model()
    tv = [v.numpy() for v in m.trainable_variables]
    ntv = [v.numpy() for v in m.non_trainable_variables]
    with pytest.raises(TypeError, match="symbolic"):
        m.stateless_call(tv, ntv, pg.Input((3,)))


def test_a_subclassed_model_s_summary_is_keras_s_table():
    class Holder(pg.Model):
        def __init__(self):
            super().__init__()
            self.d = layers.Dense(1000)

        def call(self, x):
            return self.d(x)
    m = Holder()
    m(np.ones((2, 4), "float32"))
    lines = []
    m.summary(print_fn=lines.append)
    text = "\n".join(lines)
    assert "Output Shape" in text and "Total params: 5,000 (19.53 KB)" in text
    assert "Non-trainable params: 0 (0.00 B)" in text


# --- keras.quantizers (the customizing_quantization and int4 guides) -------------------------

def test_quantizers_abs_max_and_int4_packing_as_keras_gives_them():
    q, s = pg.quantizers.abs_max_quantize(np.array([[1.0, -2.0], [4.0, 0.5]]), axis=0)
    assert q.dtype == np.int8 and q.tolist() == [[32, -127], [127, 32]]         # Keras 3.15's numbers
    np.testing.assert_allclose(s, [[31.75, 63.5]], rtol=1e-5)
    packed, shape, n = pg.quantizers.pack_int4(np.array([[-3, 7], [2, -8], [1, 0]], dtype=np.int8))
    assert packed.tolist() == [[45, -121], [1, 0]] and shape == (2, 2) and n == 3
    assert pg.quantizers.unpack_int4(packed, n).tolist() == [[-3, 7], [2, -8], [1, 0]]
    packed, _, n = pg.quantizers.pack_int4(np.array([[-3, 7, 2], [-8, 1, 0]], dtype=np.int8), axis=1)
    assert packed.tolist() == [[125, 2], [24, 0]]
    assert pg.quantizers.unpack_int4(packed, n, axis=1).tolist() == [[-3, 7, 2], [-8, 1, 0]]


def _dense_stack(with_rows=False):
    """10-32-1 with weights drawn after 5 rows of x from default_rng(0) (as the Keras run drew them)."""
    m = pg.Sequential([pg.Input(shape=(10,)), layers.Dense(32, activation="relu"), layers.Dense(1)])
    r = np.random.default_rng(0)
    x = r.normal(size=(5, 10)).astype("float32")
    m.set_weights([r.normal(size=np.shape(a)).astype("float32") for a in m.get_weights()[:]])
    return (m, x) if with_rows else m


def test_quantize_with_a_config_s_weight_quantizer(tmp_path):
    m, x = _dense_stack(with_rows=True)
    cfg = pg.quantizers.Int8QuantizationConfig(
        weight_quantizer=pg.quantizers.AbsMaxQuantizer(axis=0, value_range=(-100, 100)), activation_quantizer=None)
    m.quantize(config=cfg)
    k = np.asarray(m.layers[0].kernel)
    assert k.min() == -100 and k.max() == 100 and np.array_equal(k, np.round(k))
    # Keras 3.15.1 (torch) on the same weights and rows gives these outputs (weight-only int8, range 100)
    np.testing.assert_allclose(m.predict(x, verbose=0).ravel(), [17.9695, -17.2631, 6.7379, 8.4639, 30.5621],
                               rtol=1e-4, atol=1e-3)
    m.save(str(tmp_path / "q.keras"))
    back = pg.saving.load_model(str(tmp_path / "q.keras"))
    np.testing.assert_array_equal(back.predict(x, verbose=0), m.predict(x, verbose=0))
    m4 = _dense_stack()
    m4.quantize(config=pg.quantizers.Int4QuantizationConfig(block_size=None))
    np.testing.assert_allclose(m4.predict(x, verbose=0).ravel(), [20.292, -18.670, 6.380, 8.125, 32.053],
                               rtol=1e-4, atol=1e-3)


def test_a_quantizer_of_your_own_and_the_configs_checks():
    class Halves(pg.quantizers.Quantizer):          # a scale of 2 per output, whatever the weight
        def __call__(self, x):
            x = np.asarray(x)
            return np.clip(np.round(x * 2), -127, 127).astype("int8"), np.full((1, x.shape[1]), 2.0)
    m = _dense_stack()
    w = m.layers[0].kernel.numpy().copy()
    m.quantize(config=pg.quantizers.Int8QuantizationConfig(weight_quantizer=Halves(), activation_quantizer=None),
               filters=lambda l: l.name == m.layers[0].name)
    np.testing.assert_array_equal(np.asarray(m.layers[0].kernel), np.clip(np.round(w * 2), -127, 127))
    assert m.layers[1].quantization_mode is None

    class PerInput(pg.quantizers.Quantizer):        # one scale per input: not what a layer computes with
        def __call__(self, x):
            return np.zeros(np.shape(x), "int8"), np.ones((np.shape(x)[0], 1))
    with pytest.raises(ValueError, match="one positive value per output"):
        _dense_stack().quantize(config=pg.quantizers.Int8QuantizationConfig(weight_quantizer=PerInput()))
    with pytest.raises(ValueError, match="contradicts"):
        _dense_stack().quantize("int4", config=pg.quantizers.Int8QuantizationConfig())
    with pytest.raises(ValueError, match="value_range"):
        pg.quantizers.Int4QuantizationConfig(weight_quantizer=pg.quantizers.AbsMaxQuantizer(axis=0), block_size=None)
    with pytest.raises(ValueError, match="block_size"):
        pg.quantizers.Int4QuantizationConfig(weight_quantizer=pg.quantizers.AbsMaxQuantizer(axis=0,
                                                                                             value_range=(-8, 7)))
    with pytest.raises(ValueError, match="give a mode"):
        _dense_stack().quantize()
    again = pg.quantizers.deserialize(pg.quantizers.serialize(pg.quantizers.AbsMaxQuantizer(axis=0,
                                                                                            value_range=(-9, 9))))
    assert isinstance(again, pg.quantizers.AbsMaxQuantizer) and again.value_range == (-9, 9)


# --- model.trainable_weights (weight names standing for Variables) in ops --------------------

def test_an_l2_penalty_over_model_trainable_weights_reaches_the_gradients():
    m = pg.Sequential([pg.Input((3,)), layers.Dense(2)])
    x, y = np.ones((4, 3), np.float32), np.zeros((4, 2), np.float32)
    with pg.GradientTape() as tape:
        loss = ops.mean(ops.square(m(x) - y)) + 0.1 * sum(ops.sum(ops.square(w)) for w in m.trainable_weights)
    g = tape.gradient(loss, m.trainable_weights)
    w, b = (v.numpy() for v in m.trainable_variables)
    out = x @ w.T + b
    np.testing.assert_allclose(np.asarray(g[0]), (2 * (out - y) / out.size).T @ x + 0.2 * w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(g[1]), 2 * (out - y).sum(0) / out.size + 0.2 * b, rtol=1e-5, atol=1e-6)


def test_ops_take_a_model_s_weights_and_variables_outside_a_graph():
    m = pg.Sequential([pg.Input((3,)), layers.Dense(2)])
    name, var = m.trainable_weights[0], m.trainable_variables[0]
    w = var.numpy()
    np.testing.assert_array_equal(ops.convert_to_numpy(name), w)
    for op, ref in ((ops.square, np.square), (ops.abs, np.abs), (ops.exp, np.exp), (ops.tanh, np.tanh)):
        np.testing.assert_allclose(np.asarray(op(name)), ref(w), rtol=1e-6)
        np.testing.assert_allclose(np.asarray(op(var)), ref(w), rtol=1e-6)     # (a Variable raised)
    assert float(ops.sum(name)) == pytest.approx(float(w.sum()), rel=1e-5)
    assert np.asarray(ops.stack([m.trainable_weights[1], m.trainable_weights[1]])).shape == (2, 2)
