"""What keras-io scripts needed when ported as a Keras user ports them (generative models,
NLP, structured data, audio, vision; 2026-12-06): each test is one behaviour those scripts
rely on, checked against numpy or against what Keras documents."""

import threading

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
    m(x, training=False)                      # its graph, traced in inference mode
    seen.clear()
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


def test_two_threads_tracing_at_once_each_keep_their_own_stand_in_batch():
    # A's call folds rows by 3, which the first stand-in batch does not allow: its shapes are found
    # again on a second one.  B traces while A's retry runs: it gets its own thread's stand-in,
    # where a module-wide one would have shown it A's batch in the middle of its trace.
    a_retrying, b_done = threading.Event(), threading.Event()

    class FoldsThree(layers.Layer):
        def call(self, x):
            y = ops.reshape(x, (-1, 3, 4))
            if x.shape[0] % 3 == 0 and threading.current_thread().name == "A":
                a_retrying.set()
                assert b_done.wait(30)
            return ops.reshape(y, (-1, 4))

    seen = {}

    class Records(layers.Layer):
        def call(self, x):
            seen.setdefault(threading.current_thread().name, []).append(x.shape[0])
            return ops.transpose(ops.transpose(x * 2.0, [1, 0]), [1, 0])

    def build_b():
        inp = layers.Input((4,))
        return keras.Model(inp, Records()(inp))

    build_b()                                                   # alone: the stand-in it sees
    alone = seen.pop(threading.current_thread().name)
    models, errors = {}, []

    def run(name, build):
        try:
            models[name] = build()
        except BaseException as e:                              # pragma: no cover - reported below
            errors.append(e)
        finally:
            if name == "B":
                b_done.set()

    ta = threading.Thread(target=run, name="A", args=("A", lambda: keras.Model(i := layers.Input((4,)), FoldsThree()(i))))
    tb = threading.Thread(target=run, name="B", args=("B", lambda: a_retrying.wait(30) and build_b()))
    ta.start(), tb.start()
    ta.join(60), tb.join(60)
    assert not errors, errors
    assert seen["B"] == alone
    x = RNG.normal(size=(6, 4)).astype(np.float32)
    np.testing.assert_allclose(models["A"].predict(x, verbose=0), x, rtol=1e-6)
    np.testing.assert_allclose(models["B"].predict(x, verbose=0), 2 * x, rtol=1e-6)
    assert models["B"].output_shape == (None, 4)


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


def test_watching_another_tape_s_tensor_gives_a_gradient_the_outer_tape_differentiates():
    # (tests/test_second_order.py has the rest)
    x = RNG.random((2, 3)).astype(np.float32)
    with keras.GradientTape() as outer:
        outer.watch(x)
        y = ops.multiply(x, 2.0)
        with keras.GradientTape() as inner:
            inner.watch(y)
            z = ops.sum(ops.square(y))
        s = ops.sum(inner.gradient(z, y))                       # sum(2y) = sum(4x)
    np.testing.assert_allclose(np.asarray(outer.gradient(s, x)), np.full((2, 3), 4.0))


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
    # (labels of other lengths make a graph of their own: padded batches); another rank is refused
    with pytest.raises(ValueError, match="first batch had"):
        m.fit(x, y[..., None], verbose=0)


# --- vision ports (grad_cam, simclr, supervised contrastive, barlow twins, super-resolution) ---------

def test_gradient_with_respect_to_a_layer_output_as_grad_cam_takes_it():
    inp = keras.Input((6, 6, 2))
    conv = layers.Conv2D(3, 3, name="last_conv")(inp)
    out = layers.Dense(4)(layers.GlobalAveragePooling2D()(conv))
    grad_model = keras.Model(inp, [conv, out])
    x = RNG.normal(size=(1, 6, 6, 2)).astype(np.float32)
    with keras.GradientTape() as tape:
        conv_out, preds = grad_model(x)
        class_channel = preds[:, 2]
    g = tape.gradient(class_channel, conv_out)
    # d preds[:, 2] / d conv: the Dense row 2 spread evenly over the 4 x 4 positions
    w = grad_model.layers[-1].get_weights()[0]           # Keras's (in, units)
    np.testing.assert_allclose(g, np.broadcast_to(w[:, 2] / 16.0, (1, 4, 4, 3)), rtol=1e-5, atol=1e-7)


def test_setting_an_activation_changes_what_the_model_computes():
    inp = keras.Input((4,))
    model = keras.Model(inp, layers.Dense(3, activation="softmax")(inp))
    x = RNG.random((2, 4)).astype(np.float32)
    np.testing.assert_allclose(model.predict(x, verbose=0).sum(-1), 1.0, rtol=1e-5)
    model.layers[-1].activation = None                  # grad_cam: the logits
    w = model.layers[-1].get_weights()
    # (sums of 4 products of size ~1 in float32: ~1e-7 absolute, whatever the value's size)
    np.testing.assert_allclose(model.predict(x, verbose=0), x @ w[0] + w[1], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(model(x), x @ w[0] + w[1], rtol=1e-5, atol=1e-6)
    assert model.layers[-1].get_config()["activation"] == "linear"


def test_a_sequential_without_an_input_is_built_by_its_first_data():
    model = keras.Sequential([layers.Flatten(), layers.Dense(3)])
    model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x = RNG.random((8, 4, 4, 3)).astype(np.float32)
    model.fit(x, RNG.integers(0, 3, 8), verbose=0)
    assert model.input_shape == (None, 4, 4, 3)
    w = model.layers[-1].get_weights()
    np.testing.assert_allclose(model.predict(x, verbose=0), x.reshape(8, -1) @ w[0] + w[1], rtol=1e-5, atol=1e-6)
    aug = keras.Sequential([layers.Rescaling(1 / 255), layers.Dense(2)])       # simclr's augmenter
    assert aug(np.ones((2, 4, 4, 3), np.float32), training=True).shape == (2, 4, 4, 2)


def test_fit_on_inputs_alone_trains_a_model_on_its_add_loss():
    class Endpoint(layers.Layer):                      # keras-io's endpoint layer pattern
        def call(self, targets, logits):
            self.add_loss(ops.mean(ops.square(targets - logits)))
            return logits

    a, b = keras.Input((4,), name="image"), keras.Input((1,), name="label")
    model = keras.Model([a, b], Endpoint()(b, layers.Dense(1)(a)))
    model.compile(optimizer=keras.optimizers.Adam(0.05))
    x = np.random.default_rng(5).normal(size=(32, 4)).astype(np.float32)
    data = {"image": x, "label": x.sum(1, keepdims=True)}       # a linear target the Dense can fit
    h = model.fit(data, epochs=80, verbose=0)
    assert h.history["loss"][-1] < 0.02 * h.history["loss"][0]
    ds = keras.data.Dataset.from_tensor_slices(data).batch(8)
    model.fit(ds, epochs=1, verbose=0)
    plain = keras.Model(a, layers.Dense(1)(a))
    plain.compile(optimizer="adam", loss=None)
    with pytest.raises(ValueError, match="nothing to train on"):
        plain.fit(x, epochs=1, verbose=0)


def test_shapes_that_grow_with_a_variable_length_stay_variable():
    class Upscale(layers.Layer):                       # sub-pixel super-resolution: 3x its input
        def call(self, x):
            return ops.depth_to_space(ops.concatenate([x] * 9, axis=-1), 3)

    inp = keras.Input((None, None, 1))
    m = keras.Model(inp, Upscale()(inp))
    assert m.output_shape == (None, None, None, 1)
    x = RNG.random((1, 5, 4, 1)).astype(np.float32)
    assert m.predict(x, verbose=0).shape == (1, 15, 12, 1)


def test_a_loss_that_overrides_dunder_call_trains():
    class MyLoss(keras.losses.Loss):
        def __call__(self, y_true, y_pred, sample_weight=None):
            return ops.mean(ops.square(y_true - y_pred))

    keras.utils.set_random_seed(5)               # (its own draws: the suite's order left the test's data to chance)
    inp = keras.Input((4,))
    model = keras.Model(inp, layers.Dense(1)(inp))
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss=MyLoss())
    x = np.random.default_rng(5).normal(size=(32, 4)).astype(np.float32)
    h = model.fit(x, x.sum(1, keepdims=True), epochs=40, verbose=0)
    assert h.history["loss"][-1] < 0.05 * h.history["loss"][0]           # (0.017 here)


def test_a_metric_reading_a_tape_tensor_first_leaves_the_labels_usable():
    inp = keras.Input((4,))
    model = keras.Model(inp, layers.Dense(6)(inp))
    acc = keras.metrics.SparseCategoricalAccuracy()
    x = RNG.random((6, 4)).astype(np.float32)
    with keras.GradientTape() as tape:
        sims = model(x)
        labels = ops.arange(ops.shape(sims)[0])
        acc.update_state(labels, sims)                   # simclr: the metric computes sims first
        loss = keras.losses.sparse_categorical_crossentropy(labels, sims, from_logits=True)
    grads = tape.gradient(loss, model.trainable_weights)
    w = model.layers[-1].get_weights()
    z = (x @ w[0] + w[1]).astype(np.float64)
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    np.testing.assert_allclose(grads[1], (p - np.eye(6)).sum(0), rtol=1e-4, atol=1e-6)   # the bias's gradient


def test_batch_normalization_takes_the_last_axis_by_its_index():
    x = keras.Input((8, 8, 4))
    assert keras.Model(x, layers.BatchNormalization(axis=3)(x)).output_shape == (None, 8, 8, 4)
    assert keras.Model(x, layers.BatchNormalization(axis=1)(x)).layers[-1].gamma.shape == (8,)
    for bad in (0, 4, -4):
        with pytest.raises(ValueError, match="axis"):
            keras.Model(x, layers.BatchNormalization(axis=bad)(x))


@pytest.mark.parametrize("axis", [1, -3, 2])
def test_batch_normalization_on_another_axis_matches_numpy_and_its_running_statistics(axis):
    x = RNG.normal(2, 3, (8, 4, 5, 6)).astype(np.float32)
    bn = layers.BatchNormalization(axis=axis, momentum=0.9, gamma_initializer="ones")
    model = keras.Sequential([keras.Input(x.shape[1:]), bn])
    a = axis % 4
    others = tuple(i for i in range(4) if i != a)
    mean, var = x.mean(others, keepdims=True), x.var(others, keepdims=True)
    np.testing.assert_allclose(model(x, training=True), (x - mean) / np.sqrt(var + 1e-3), atol=2e-5)
    model.compile("sgd", "mse")
    model.fit(x, np.zeros_like(x), batch_size=8, epochs=1, verbose=0)
    # two moves of the running statistics (the eager call in training mode, as Keras's, and the step)
    np.testing.assert_allclose(bn.moving_mean.numpy(), 0.19 * mean.ravel(), rtol=1e-5)
    np.testing.assert_allclose(bn.moving_variance.numpy(), 0.81 + 0.19 * var.ravel(), rtol=1e-5)
    infer = (x - bn.moving_mean.numpy().reshape(mean.shape)) / np.sqrt(bn.moving_variance.numpy().reshape(
        var.shape) + 1e-3) * bn.gamma.numpy().reshape(mean.shape) + bn.beta.numpy().reshape(mean.shape)
    np.testing.assert_allclose(model.predict(x, verbose=0), infer, atol=2e-5)


@pytest.mark.parametrize("axis", [[1, 2, 3], 3, [-1], 1, [1, 3], -2])
def test_layer_normalization_over_any_axes_matches_numpy(axis, tmp_path):
    x = RNG.normal(1, 2, (3, 4, 5, 6)).astype(np.float32)
    ln = layers.LayerNormalization(axis=axis, gamma_initializer="random_normal", beta_initializer="random_normal")
    model = keras.Sequential([keras.Input(x.shape[1:]), ln])
    out = model.predict(x, verbose=0)
    axes = tuple(sorted(a % 4 for a in (axis if isinstance(axis, list) else [axis])))
    assert ln.gamma.shape == tuple(x.shape[a] for a in axes)          # Keras's: the normalized axes' shape
    shape = [x.shape[a] if a in axes else 1 for a in range(4)]
    want = (x - x.mean(axes, keepdims=True)) / np.sqrt(x.var(axes, keepdims=True) + 1e-3) * \
        ln.gamma.numpy().reshape(shape) + ln.beta.numpy().reshape(shape)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
    model.save(tmp_path / "ln.keras")
    np.testing.assert_array_equal(keras.models.load_model(tmp_path / "ln.keras").predict(x, verbose=0), out)


def test_layer_normalization_over_all_features_has_pytorch_s_gradients():
    torch = pytest.importorskip("torch")
    x = RNG.normal(1, 2, (3, 4, 5, 6)).astype(np.float32)
    ln = layers.LayerNormalization(axis=[1, 2, 3], gamma_initializer="random_normal")
    xt = ops.convert_to_tensor(x)
    with keras.GradientTape() as tape:
        tape.watch(xt)
        loss = ops.sum(ln(xt) ** 3)
    gx, gg = tape.gradient(loss, [xt, ln.gamma])
    ref = torch.nn.LayerNorm((4, 5, 6), eps=1e-3)
    with torch.no_grad():
        ref.weight.copy_(torch.tensor(ln.gamma.numpy()))
    tx = torch.tensor(x, requires_grad=True)
    (ref(tx) ** 3).sum().backward()
    np.testing.assert_allclose(np.asarray(gx), tx.grad.numpy(), rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(np.asarray(gg), ref.weight.grad.numpy(), rtol=1e-4, atol=1e-3)


def test_normalizations_of_volumes_take_the_channels_axis_by_any_name_and_refuse_others():
    x = RNG.normal(1, 2, (2, 3, 4, 4, 5)).astype(np.float32)
    want = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-3)
    for layer in (layers.LayerNormalization(axis=4), layers.LayerNormalization(axis=[-1]),
                  layers.BatchNormalization(axis=4)):
        model = keras.Sequential([keras.Input(x.shape[1:]), layer])
        got = model(x, training=True) if isinstance(layer, layers.BatchNormalization) else model.predict(x, verbose=0)
        bn_ref = (x - x.mean((0, 1, 2, 3), keepdims=True)) / np.sqrt(x.var((0, 1, 2, 3), keepdims=True) + 1e-3)
        np.testing.assert_allclose(got, bn_ref if isinstance(layer, layers.BatchNormalization) else want, atol=2e-5)
    for layer in (layers.LayerNormalization(axis=1), layers.BatchNormalization(axis=2)):
        with pytest.raises(ValueError, match="channels"):
            keras.Sequential([keras.Input(x.shape[1:]), layer]).predict(x, verbose=0)


def test_channels_first_convolutions_with_batch_normalization_on_axis_1_train_and_load(tmp_path):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3, 12, 12)), layers.Conv2D(8, 3, data_format="channels_first"),
                              layers.BatchNormalization(axis=1), layers.ReLU(),
                              layers.GlobalAveragePooling2D(data_format="channels_first"), layers.Dense(2)])
    model.compile(keras.optimizers.Adam(0.02), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x = RNG.random((64, 3, 12, 12)).astype(np.float32)
    x[:32, 0] += 1.0
    y = (np.arange(64) < 32).astype(np.int32)
    loss = model.fit(x, y, epochs=20, verbose=0).history["loss"]
    assert loss[-1] < 0.5 * loss[0]
    assert model.layers[1].moving_mean.shape == (8,)
    model.save(tmp_path / "cf.keras")
    again = keras.models.load_model(tmp_path / "cf.keras")
    np.testing.assert_array_equal(again.predict(x, verbose=0), model.predict(x, verbose=0))


def test_an_optimizer_with_long_updates_steps_many_weights():
    x = inp = keras.Input((4,))
    for _ in range(120):
        x = layers.Dense(4)(x)
    model = keras.Model(inp, x)
    opt = keras.optimizers.Lamb()
    with keras.GradientTape() as tape:
        loss = ops.mean(model(np.ones((2, 4), "float32")))
    before = [v.numpy() for v in model.trainable_variables]
    opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
    assert sum(not np.array_equal(b, v.numpy()) for b, v in zip(before, model.trainable_variables)) > 200


def test_activations_on_a_functional_model_s_tensors_are_layers_that_save():
    inp = keras.Input((5,))
    h = keras.activations.swish(layers.Dense(3)(inp))           # MobileViT writes its blocks so
    out = keras.activations.relu(h, max_value=0.5)
    m = keras.Model(inp, out)
    x = RNG.normal(size=(4, 5)).astype(np.float32)
    w = m.layers[1].get_weights()
    z = (x @ w[0] + w[1]).astype(np.float64)
    np.testing.assert_allclose(m.predict(x, verbose=0), np.clip(z / (1 + np.exp(-z)), 0, 0.5), rtol=1e-5,
                               atol=1e-6)


def test_a_weight_made_again_under_its_name_is_kept_beside_it():
    class L(layers.Layer):
        def build(self, shape):
            self.pos = self.add_weight(shape=(3,), initializer="zeros", name="pos")
            self.pos = self.add_weight(shape=(4,), initializer="ones", name="pos")   # DeiT over ViT

        def call(self, x):
            return x + self.pos

    inp = keras.Input((4,))
    m = keras.Model(inp, L(name="l")(inp))
    assert list(m.get_weights()) == ["l.pos", "l.pos_1"]
    np.testing.assert_allclose(m.predict(np.zeros((1, 4), np.float32), verbose=0), [[1, 1, 1, 1]])
    with keras.GradientTape() as tape:
        loss = ops.sum(m(np.ones((2, 4), np.float32)))
    g = tape.gradient(loss, m.trainable_variables)
    assert g[0] is None and g[1].tolist() == [2, 2, 2, 2]


def test_a_zero_d_integer_array_indexes_a_recorded_tensor():
    inp = keras.Input((4,))
    model = keras.Model(inp, layers.Dense(3)(inp))
    x = np.ones((1, 4), "float32")
    idx = ops.argmax(model.predict(x, verbose=0)[0])            # integrated gradients' target class
    with keras.GradientTape() as tape:
        tape.watch(x)
        top = model(x)[:, idx]
    np.testing.assert_allclose(tape.gradient(top, x)[0], model.layers[1].get_weights()[0][:, int(idx)], rtol=1e-6)


def test_scalar_inputs_one_number_per_row():
    age = layers.Input(name="age", shape=(), dtype="float32")   # keras-io's structured data inputs
    job = layers.Input(name="job", shape=(), dtype="int32")
    x = layers.Concatenate()([ops.expand_dims(age, -1), layers.Embedding(5, 3)(job)])
    m = keras.Model({"age": age, "job": job}, layers.Dense(1)(x))
    assert m.input_shape == [(None,), (None,)]
    a, j = RNG.random(6).astype(np.float32), RNG.integers(0, 5, 6)
    emb = [l for l in m.layers if isinstance(l, layers.Embedding)][0].get_weights()[0]
    dense = m.layers[-1].get_weights()
    want = np.concatenate([a[:, None], emb[j]], 1) @ dense[0] + dense[1]
    np.testing.assert_allclose(m.predict({"age": a, "job": j}, verbose=0), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("axes, fold", [(None, lambda x: x.reshape(2, 15, 8)), ((2,), lambda x: x.reshape(6, 5, 8))])
def test_attention_over_4d_inputs_is_attention_over_the_folded_steps(axes, fold):
    # MobileViT's attention on (batch, patches, positions, features): Keras's default attends over
    # both middle axes together; attention_axes=(2,) over the positions of each patch
    x = RNG.normal(size=(2, 3, 5, 8)).astype(np.float32)
    a = layers.MultiHeadAttention(num_heads=2, key_dim=4, attention_axes=axes)
    inp = keras.Input((3, 5, 8))
    m = keras.Model(inp, a(inp, inp))
    assert m.output_shape == (None, 3, 5, 8)
    b = layers.MultiHeadAttention(num_heads=2, key_dim=4)
    flat = fold(x)
    i3 = keras.Input(flat.shape[1:])
    m3 = keras.Model(i3, b(i3, i3))
    b.set_weights(a.get_weights())
    np.testing.assert_allclose(m.predict(x, verbose=0), m3.predict(flat, verbose=0).reshape(x.shape), rtol=1e-5,
                               atol=1e-6)
    assert layers.MultiHeadAttention.from_config(a.get_config()).attention_axes == axes


def test_an_axis_op_on_a_volume_in_a_custom_call_is_keras_s():
    class SumAxis3(layers.Layer):
        def call(self, x):                       # x: (batch, 4, 5, 6, 7)
            return ops.sum(x, axis=3)

    class Channels(layers.Layer):
        def call(self, x):
            return ops.softmax(x, axis=-1) * ops.sum(x, axis=-1, keepdims=True)

    x = keras.Input((4, 5, 6, 7))
    # a custom call sees its volume 5-D (pyggml._wide): any axis is Keras's
    summed = keras.Model(x, SumAxis3()(x))
    v5 = RNG.normal(size=(2, 4, 5, 6, 7)).astype(np.float32)
    np.testing.assert_allclose(summed.predict(v5, verbose=0), v5.sum(axis=3), rtol=1e-5, atol=1e-5)
    m = keras.Model(x, Channels()(x))
    v = RNG.normal(size=(2, 4, 5, 6, 7)).astype(np.float32)
    e = np.exp(v - v.max(-1, keepdims=True))
    np.testing.assert_allclose(m.predict(v, verbose=0), e / e.sum(-1, keepdims=True) * v.sum(-1, keepdims=True),
                               rtol=1e-4, atol=1e-5)


def test_ops_on_shapes_in_a_call_tile_and_broadcast_matmul_as_numpy():
    class ColorAffine(layers.Layer):          # simclr's RandomColorAffine, as Keras 3 writes it
        def call(self, x):
            n = ops.cast(ops.shape(x)[0], dtype="int64")
            t = ops.tile(ops.expand_dims(ops.eye(3) * 2.0, axis=0), (n, 1, 1, 1))        # (B, 1, 3, 3)
            return ops.matmul(x, t) + ops.ones(shape=(n, 1, 1, 1), dtype="int64")

    inp = keras.Input((4, 4, 3))
    m = keras.Model(inp, ColorAffine()(inp))
    x = RNG.random((2, 4, 4, 3)).astype(np.float32)
    np.testing.assert_allclose(m.predict(x, verbose=0), 2 * x + 1, rtol=1e-6)
    for shp, reps in [((2, 3), (2, 2)), ((2, 1, 3), (1, 2, 1)), ((2, 2, 2, 2), (2, 1, 1, 3)), ((3,), (2, 2))]:
        a = RNG.normal(size=shp).astype(np.float32)

        class Tile(layers.Layer):
            def call(self, t):
                return ops.tile(t, reps)

        np.testing.assert_array_equal(np.asarray(Tile()(a)), np.tile(a, reps))
    b = RNG.normal(size=(1, 4, 3, 5)).astype(np.float32)

    class Mm(layers.Layer):
        def call(self, t):
            return ops.matmul(t, ops.convert_to_tensor(b))

    np.testing.assert_allclose(np.asarray(Mm()(x)), x @ b, rtol=1e-5, atol=1e-6)


def test_area_resize_is_the_mean_of_the_covered_input():
    x = RNG.random((2, 10, 12, 1)).astype(np.float32)
    y = ops.image.resize(x, [4, 4], interpolation="area")            # super-resolution's downscale
    wh = np.array([1, 1, 0.5, 0, 0, 0, 0, 0, 0, 0]) / 2.5            # row 0 covers [0, 2.5)
    ww = np.array([1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0]) / 3.0        # column 0 covers [0, 3)
    np.testing.assert_allclose(y[:, 0, 0, 0], np.einsum("h,nhw,w->n", wh, x[..., 0], ww), rtol=1e-5)
    inp = keras.Input((10, 12, 1))
    m = keras.Model(inp, layers.Resizing(4, 4, interpolation="area")(inp))
    np.testing.assert_allclose(m.predict(x, verbose=0), y, rtol=1e-5, atol=1e-7)


def test_utils_normalize_in_a_layer_call():
    class L2(layers.Layer):                   # supervised contrastive learning's projection
        def call(self, x):
            return keras.utils.normalize(x, axis=1, order=2)

    inp = keras.Input((4,))
    model = keras.Model(inp, L2()(layers.Dense(3)(inp)))
    out = model.predict(RNG.normal(size=(5, 4)).astype(np.float32), verbose=0)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, rtol=1e-5)


# --- keras_recipes and structured-data ports ----------------------------------------------------------

def test_a_frozen_batch_normalization_runs_in_inference_mode():
    inp = layers.Input((4,))
    bn = layers.BatchNormalization()
    m = keras.Model(inp, layers.Dense(1)(bn(inp)))
    bn.trainable = False                                      # a frozen base model's layers
    z = (RNG.random((64, 4)) * 5 + 3).astype("float32")
    np.testing.assert_allclose(bn(z, training=True), z / np.sqrt(1 + 1e-3), rtol=1e-5)   # moving stats 0, 1
    m.compile(optimizer="sgd", loss="mse")
    m.fit(z, np.zeros((64, 1)), epochs=1, verbose=0)
    np.testing.assert_array_equal(bn.moving_mean.numpy(), 0.0)


def test_equality_with_a_number_in_a_call_is_element_wise():
    class Mask(layers.Layer):
        def call(self, x):
            return ops.cast(x == 1.0, "float32") + ops.cast(x != 2.0, "float32")

    inp = keras.Input((3,))
    m = keras.Model(inp, Mask()(inp))
    np.testing.assert_array_equal(m.predict(np.array([[1.0, 2.0, 3.0]], np.float32), verbose=0), [[2, 0, 1]])
    t = {inp: 1}                                              # nodes stay dict keys
    assert t[inp] == 1


def test_a_custom_layer_takes_tensors_positionally_and_by_keyword():
    class Endpoint(layers.Layer):
        def call(self, logits, targets=None):
            return logits * 2.0 + targets

    a, t = keras.Input((4,)), keras.Input((1,))
    dense = layers.Dense(1)
    logits = dense(a)
    for out in (Endpoint()(logits, t), Endpoint()(logits, targets=t), Endpoint()(logits=logits, targets=t)):
        m = keras.Model([a, t], out)
        x, y = RNG.random((3, 4)).astype(np.float32), RNG.random((3, 1)).astype(np.float32)
        w = dense.get_weights()
        np.testing.assert_allclose(m.predict([x, y], verbose=0), 2 * (x @ w[0] + w[1]) + y, rtol=1e-5, atol=1e-6)


def test_a_subclassed_model_trains_on_add_loss_from_inputs_alone():
    class M(keras.Model):
        def __init__(self):
            super().__init__()
            self.d = layers.Dense(1)

        def call(self, x):
            out = self.d(x)
            self.add_loss(ops.mean(ops.square(out - ops.sum(x, axis=1, keepdims=True))))
            return out

    m = M()
    m.compile(optimizer=keras.optimizers.Adam(0.05))
    x = np.random.default_rng(2).normal(size=(32, 4)).astype(np.float32)
    h = m.fit(x, epochs=60, verbose=0)
    assert h.history["loss"][-1] < 0.02 * h.history["loss"][0]


def test_variables_with_numpy_and_python_operands():
    b = keras.Variable(np.array([0.0, 1.0, 2.0], np.float32))
    np.testing.assert_allclose([2.0, 2.0, 2.0] ** b, [1, 2, 4])
    np.testing.assert_allclose((2.0 ** b).numpy(), [1, 2, 4])
    x = np.full(3, 3.0, np.float32)
    v = keras.Variable(np.array([1.0, 2.0, 0.5], np.float32))
    with keras.GradientTape() as tape:
        loss = ops.sum(x ** v)                                # numpy gives way: recorded
    (g,) = tape.gradient(loss, [v])
    np.testing.assert_allclose(g, np.log(3.0) * 3.0 ** np.array([1.0, 2.0, 0.5]), rtol=1e-5)


def test_values_from_numbers_meet_tensors_in_place():
    class Acc(layers.Layer):
        def call(self, x):
            acc = ops.zeros((ops.shape(x)[0], 3))
            acc += x                                          # memory-efficient embeddings' sum
            acc *= 2.0
            return acc

    inp = keras.Input((3,))
    x = RNG.random((2, 3)).astype(np.float32)
    np.testing.assert_allclose(keras.Model(inp, Acc()(inp)).predict(x, verbose=0), 2 * x, rtol=1e-6)
    s = keras.random.uniform([], 0, 1)
    assert np.shape(s) == () and 0 <= float(s) < 1


def test_eager_results_answer_numpy_and_initializer_names_serialize():
    aug = keras.Sequential([layers.RandomFlip(mode="horizontal"), layers.Rescaling(2.0)])
    assert aug(np.ones((2, 4, 4, 3), np.float32)).numpy().shape == (2, 4, 4, 3)
    assert float(keras.losses.MeanAbsoluteError()(np.ones(3), np.zeros(3)).numpy()) == 1.0
    assert (keras.Variable(2.0) * 3.0).numpy() == 6.0
    init = keras.initializers.get("he_normal")
    assert keras.initializers.serialize(init) == "he_normal"

    class Anti(layers.Layer):                                 # keras-io's antirectifier
        def __init__(self, initializer="he_normal", **kwargs):
            super().__init__(**kwargs)
            self.initializer = keras.initializers.get(initializer)

        def build(self, shape):
            self.kernel = self.add_weight(shape=(shape[-1] * 2, 2), initializer=self.initializer, name="kernel")

        def call(self, x):
            return ops.matmul(ops.concatenate([ops.relu(x), ops.relu(-x)], axis=-1), self.kernel)

        def get_config(self):
            return {**super().get_config(), "initializer": keras.initializers.serialize(self.initializer)}

    inp = keras.Input((3,))
    m = keras.Model(inp, Anti()(inp))
    m.compile(optimizer="adam", loss="mse")
    assert Anti.from_config(m.layers[1].get_config()).initializer is init


def test_a_user_loss_on_padded_batches_of_other_lengths():
    class M(keras.Model):                     # keras-io NER: a subclassed model, padded batches
        def __init__(self):
            super().__init__()
            self.emb = layers.Embedding(50, 8)
            self.out = layers.Dense(3)

        def call(self, x):
            return self.out(self.emb(x))

    class Sparse(keras.losses.Loss):
        def call(self, y_true, y_pred):
            return keras.losses.SparseCategoricalCrossentropy(from_logits=True)(y_true, y_pred)

    rng = np.random.default_rng(4)
    rows = [(rng.integers(1, 50, t), rng.integers(0, 3, t)) for t in (6, 6, 5, 5, 7, 7)]
    ds = keras.data.Dataset.from_tensor_slices(list(range(6))).map(lambda i: rows[int(i)]).padded_batch(2)
    m = M()
    m.compile(optimizer="adam", loss=Sparse())
    m.fit(ds, epochs=1, verbose=0)
    x, y = rows[4][0][None], rows[4][1][None]
    z = m.predict(x, verbose=0).astype(np.float64)
    lp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    np.testing.assert_allclose(m.evaluate(x, y, verbose=0), -np.take_along_axis(lp, y[..., None], -1).mean(),
                               rtol=1e-4)


def test_labels_sliced_inside_a_user_loss_reach_the_graph():
    def first_step(y_true, y_pred):           # derived from derived labels: a slice, then the pick
        return keras.losses.sparse_categorical_crossentropy(y_true[:, :1], y_pred[:, :1])

    x = RNG.random((32, 5, 3)).astype("float32")
    y = (x.sum(-1) > 1.5).astype("int64")
    inp = layers.Input((5, 3))
    m = keras.Model(inp, layers.Dense(2, activation="softmax")(inp))
    m.compile(optimizer="adam", loss=first_step)
    m.fit(x, y, batch_size=16, epochs=2, verbose=0)
    p = m.predict(x, verbose=0).astype(np.float64)
    np.testing.assert_allclose(m.evaluate(x, y, verbose=0), -np.log(p[np.arange(32), 0, y[:, 0]]).mean(), rtol=1e-4)


def test_a_variable_kept_as_an_attribute_is_a_weight_and_trains():
    class VQ(layers.Layer):                   # vq_vae's codebook
        def __init__(self):
            super().__init__()
            self.embeddings = keras.Variable(initializer=np.ones((4, 3), "float32"), trainable=True, name="emb")

        def call(self, x):
            return ops.matmul(x, self.embeddings)

    inp = keras.Input((4,))
    vq = VQ()
    m = keras.Model(inp, vq(inp))
    assert len(vq.trainable_weights) == 1
    m.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    m.fit(np.ones((8, 4), "float32"), np.zeros((8, 3), "float32"), verbose=0)
    assert float(vq.embeddings.numpy().max()) < 1.0


def test_a_call_with_other_outputs_in_training_predicts_its_inference_structure():
    class M(keras.Model):                     # DeiT's two heads in training, their mean otherwise
        def __init__(self):
            super().__init__()
            self.a, self.b = layers.Dense(2), layers.Dense(2)

        def call(self, x, training=True):
            if not training:
                return (self.a(x) + self.b(x)) / 2
            return self.a(x), self.b(x)

    m = M()
    x = np.ones((2, 3), "float32")
    out = m(x, training=False)
    wa, wb = m.a.get_weights(), m.b.get_weights()
    np.testing.assert_allclose(out, ((x @ wa[0] + wa[1]) + (x @ wb[0] + wb[1])) / 2, rtol=1e-5)
    with keras.GradientTape():
        a, b = m(x)
    np.testing.assert_allclose(np.asarray(a), x @ wa[0] + wa[1], rtol=1e-5)


def test_nested_sequentials_without_inputs_build_on_the_first_data():
    inner = keras.Sequential([layers.Flatten(), layers.Dense(4)])
    model = keras.Sequential([inner, layers.Dense(3)])
    model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(np.ones((8, 4, 4, 3), "float32"), np.zeros(8, "int64"), verbose=0)
    assert model.predict(np.ones((2, 4, 4, 3), "float32"), verbose=0).shape == (2, 3)


def test_ctc_on_an_output_of_variable_steps_matches_fixed_steps():
    rng = np.random.default_rng(8)
    x = rng.random((6, 12, 10)).astype("float32")
    y = rng.integers(1, 6, (6, 5))
    models = []
    for steps in (None, 12):                              # ctc_asr's Input((None, features))
        inp = layers.Input((steps, 10))
        m = keras.Model(inp, layers.Dense(6, activation="softmax")(inp))
        m.compile(optimizer="adam", loss=keras.losses.CTC())
        models.append(m)
    models[0].set_weights(models[1].get_weights())
    losses = [m.evaluate(x, y, verbose=0) for m in models]
    np.testing.assert_allclose(losses[0], losses[1], rtol=1e-5)
    h = models[0].fit(x, y, epochs=3, verbose=0)
    assert h.history["loss"][-1] < h.history["loss"][0]


def test_attention_with_a_mask_takes_other_lengths_after_its_first_call():
    att = layers.MultiHeadAttention(num_heads=2, key_dim=4)    # transformer_asr's decoder, token by token
    x5 = RNG.normal(size=(2, 5, 8)).astype(np.float32)
    full = np.asarray(att(x5, x5, attention_mask=np.tril(np.ones((2, 5, 5), bool))))
    one = att(x5[:, :1], x5[:, :1], attention_mask=np.ones((2, 1, 1), bool))
    np.testing.assert_allclose(one, full[:, :1], rtol=1e-5, atol=1e-6)     # causal: step 0 sees itself only


def test_a_computed_index_picks_a_column_as_grad_cam_writes_it():
    inp = keras.Input((4,))
    model = keras.Model(inp, layers.Dense(3)(inp))
    x = RNG.random((2, 4)).astype(np.float32)
    with keras.GradientTape() as tape:
        preds = model(x)
        class_channel = preds[:, ops.argmax(preds[0])]
    (gw, gb) = tape.gradient(class_channel, model.trainable_weights)
    p = model.predict(x, verbose=0)
    k = int(p[0].argmax())
    np.testing.assert_allclose(np.asarray(class_channel).ravel(), p[:, k], rtol=1e-6)
    want = np.zeros((3, 4), np.float32)
    want[k] = x.sum(0)                                   # the weight (units, in): row k gets the inputs
    np.testing.assert_allclose(gw, want, rtol=1e-5)
    np.testing.assert_allclose(gb, np.eye(3)[k] * 2, rtol=1e-6)


def test_a_sequential_of_scalar_string_inputs_keeps_its_shape_nested():
    mk = lambda: [layers.StringLookup(vocabulary=["a", "b"], mask_token=None, num_oov_indices=0),
                  layers.Embedding(2, 4)]                   # memory-efficient embeddings' lookup model
    inp = layers.Input(shape=(), dtype="string")
    seq = keras.Sequential([layers.Input(shape=(), dtype="string")] + mk())
    assert seq(inp).shape == (None, 4) and seq.output_shape == (None, 4)
    assert keras.Sequential(mk())(inp).shape == (None, 4)   # built by the node: its shape and dtype


def test_a_conv_subclass_overriding_convolution_op_uses_it():
    class StandardizedConv2D(layers.Conv2D):            # keras_recipes' subclassing_conv_layers
        def convolution_op(self, inputs, kernel):
            mean, var = ops.moments(kernel, axes=[0, 1, 2], keepdims=True)
            return ops.conv(inputs, (kernel - mean) / ops.sqrt(var + 1e-10), padding="valid",
                            strides=list(self.strides), dilation_rate=list(self.dilation_rate))

    x = RNG.random((2, 6, 6, 3)).astype(np.float32)
    inp = keras.Input((6, 6, 3))
    conv = StandardizedConv2D(4, 3, activation="relu")
    m = keras.Model(inp, conv(inp))
    k = conv.kernel.numpy().astype(np.float64)
    ks = (k - k.mean((0, 1, 2), keepdims=True)) / np.sqrt(k.var((0, 1, 2), keepdims=True) + 1e-10)
    want = np.zeros((2, 4, 4, 4))
    for i in range(4):
        for j in range(4):
            want[:, i, j] = np.einsum("nhwc,hwcf->nf", x[:, i:i + 3, j:j + 3], ks)
    np.testing.assert_allclose(m.predict(x, verbose=0), np.maximum(want + conv.bias.numpy(), 0), rtol=1e-4,
                               atol=1e-5)
    assert conv.data_format == "channels_last"
