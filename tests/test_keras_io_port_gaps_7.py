"""Gaps the eighth round of keras-io ports found (text, vision, tabular, time series and
generative examples, ported as a Keras user would), each against what Keras 3 and numpy do."""

import numpy as np
import pytest

import pyggml as keras
from pyggml import layers, ops

RNG = np.random.default_rng(23)


# --- minimum, maximum and where with an infinite operand ----------------------------------------
def test_minimum_and_maximum_pick_around_infinities_as_numpy():
    a = np.array([np.inf, -np.inf, 3.0, np.inf, -2.0], np.float32)
    b = np.array([0.0, 1.0, np.inf, np.inf, -np.inf], np.float32)
    np.testing.assert_array_equal(np.asarray(ops.minimum(a, b)), np.minimum(a, b))
    np.testing.assert_array_equal(np.asarray(ops.maximum(a, b)), np.maximum(a, b))

    # in a call: rsqrt(0) = inf picked away by minimum, -inf by maximum
    class Sched(layers.Layer):
        def call(self, x):
            return ops.minimum(ops.rsqrt(x), 2.0) + ops.maximum(ops.where(x > 1.0, x, -np.inf), 0.5)
    np.testing.assert_array_equal(np.asarray(Sched()(np.array([[0.0, 4.0]], np.float32))), [[2.5, 4.5]])


def test_the_transformer_learning_rate_schedule_trains_from_step_zero():
    class Schedule(keras.optimizers.schedules.LearningRateSchedule):
        def __call__(self, step):
            step = ops.cast(step, "float32")
            return ops.rsqrt(64.0) * ops.minimum(ops.rsqrt(step), step * (4000 ** -1.5))
    assert float(Schedule()(0)) == 0.0
    model = keras.Sequential([keras.Input((3,)), layers.Dense(1)])
    model.compile(keras.optimizers.Adam(Schedule()), "mse")
    hist = model.fit(RNG.random((8, 3)), RNG.random((8, 1)), epochs=2, verbose=0).history
    assert all(np.isfinite(hist["loss"]))


def test_minimum_keeps_its_gradient_beside_an_infinite_operand():
    v = keras.Variable(np.array([0.25, 4.0], np.float32))
    with keras.GradientTape() as tape:
        loss = ops.sum(ops.minimum(ops.rsqrt(v), v * 0.1))
    got = np.asarray(tape.gradient(loss, v))
    # min(2, 0.025) -> d(0.1 v) = 0.1; min(0.5, 0.4) -> 0.1
    np.testing.assert_allclose(got, [0.1, 0.1], rtol=1e-6)


# --- whole-number arithmetic stays int32 -------------------------------------------------------
def test_integer_arithmetic_in_a_call_stays_int32_and_indexes():
    class RelativeIndex(layers.Layer):
        def build(self, input_shape):
            self.table = self.add_weight(shape=(9, 2), initializer="ones")

        def call(self, x):
            f = ops.reshape(ops.arange(6), [2, 3])
            assert (f - f).dtype == "i32" and (f + 1).dtype == "i32" and (f * 3).dtype == "i32"
            assert ops.add(f, f).dtype == "i32" and ops.multiply(f, 2).dtype == "i32"
            assert (f * 0.5).dtype == "f32" and (f / 2).dtype == "f32"
            idx = f[:, :, None] - f[:, None, :] + 2
            return x + ops.sum(ops.take(self.table, ops.reshape(idx, [-1])))
    inp = keras.Input((3,))
    model = keras.Model(inp, RelativeIndex()(inp))
    np.testing.assert_allclose(model.predict(np.zeros((1, 3), np.float32), verbose=0), np.full((1, 3), 18.0))       # (take flattens: 18 ones)
    assert np.asarray(ops.add(np.arange(3, dtype=np.int32), 1)).dtype == np.int32


def test_where_of_integer_labels_stays_int32_for_sparse_cross_entropy():
    labels = np.array([[1, -100, 2]], np.int32)
    out = ops.where(labels == -100, 0, labels)
    assert np.asarray(out).dtype == np.int32
    np.testing.assert_array_equal(np.asarray(out), [[1, 0, 2]])

    class Masked(layers.Layer):
        def call(self, logits, labels):
            safe = ops.where(labels == -100, 0, labels)
            assert safe.dtype == "i32"
            return logits * 1.0
    logits = RNG.standard_normal((1, 3, 4)).astype(np.float32)
    Masked()(logits, labels)


# --- Python operators and lists of tensors ------------------------------------------------------
def test_a_number_divided_by_a_tapes_tensor_after_its_block():
    x = np.full((2, 3), 4.0, np.float32)
    dense = layers.Dense(3, kernel_initializer="ones")
    dense(x)
    with keras.GradientTape():
        y = ops.mean(ops.square(dense(x)))           # 144
    np.testing.assert_allclose(float(1.0 / y), 1 / 144, rtol=1e-6)
    np.testing.assert_allclose(float(10.0 * ops.log(1.0 / y) / ops.log(10.0)), 10 * np.log10(1 / 144), rtol=1e-5)


@pytest.mark.parametrize("reduce", ["mean", "sum", "max", "convert"])
def test_ops_on_a_list_of_tensors_stack_it_and_keep_the_gradient(reduce):
    dense = layers.Dense(1, kernel_initializer="ones")
    x = np.ones((4, 3), np.float32)
    dense(x)
    fn = {"mean": ops.mean, "sum": ops.sum, "max": ops.max,
          "convert": lambda parts: ops.sum(ops.convert_to_tensor(parts))}[reduce]
    with keras.GradientTape() as tape:
        y = dense(x)
        loss = fn([ops.mean(y), ops.mean(2.0 * y)])
    grads = tape.gradient(loss, dense.trainable_weights)
    assert all(g is not None for g in grads)
    # d/dw of mean(y) and mean(2y), y = x @ w + b with x of ones: 1 and 2 per kernel entry
    want = {"mean": 1.5, "sum": 3.0, "max": 2.0, "convert": 3.0}[reduce]
    np.testing.assert_allclose(np.asarray(grads[0]).reshape(-1), np.full(3, want), rtol=1e-6)


def test_a_list_of_weights_is_stacked_inside_a_call():
    class Mean(layers.Layer):
        def build(self, s):
            self.w = self.add_weight(shape=(1,), initializer="ones")

        def call(self, x):
            return x * ops.mean([self.w * 2.0, self.w * 4.0])
    inp = keras.Input((2,))
    np.testing.assert_allclose(keras.Model(inp, Mean()(inp)).predict(np.ones((1, 2)), verbose=0), [[3.0, 3.0]])


# --- layers' and models' Keras 3 forms ----------------------------------------------------------
def test_add_weight_takes_keras_3s_positional_shape_first():
    class L(layers.Layer):
        def build(self, s):
            self.a = self.add_weight((s[-1], 16), name="relative_embedding")
            self.b = self.add_weight((s[-1], 2), "zeros")
            self.c = self.add_weight("named", (3,), "ones")          # pyggml's own order still works
            self.d = self.add_weight(shape=(2,), initializer=None, aggregation="sum", autocast=False)

        def call(self, x):
            return ops.matmul(x, self.a)
    layer = L()
    assert layer(np.ones((2, 4), np.float32)).shape == (2, 16)
    assert [w.name.split(".")[-1] for w in layer.weights] == ["relative_embedding", "variable_1", "named",
                                                              "variable_3"]
    np.testing.assert_array_equal(layer.b.numpy(), np.zeros((4, 2)))
    np.testing.assert_array_equal(layer.c.numpy(), np.ones(3))
    with pytest.raises(TypeError, match="multiple values"):
        layers.Dense(2).add_weight((2,), shape=(3,))


def test_utils_config_reads_and_freezes():
    cfg = keras.utils.Config(max_sequence_len=2048, seed=42)
    assert cfg.seed == 42 and cfg["max_sequence_len"] == 2048 and "seed" in cfg and len(cfg) == 2
    cfg.lr = 1e-3
    assert cfg.as_dict() == {"max_sequence_len": 2048, "seed": 42, "lr": 1e-3}
    cfg.freeze()
    with pytest.raises(ValueError, match="frozen"):
        cfg.seed = 1
    cfg.unfreeze()
    cfg["seed"] = 1
    assert cfg.get("seed") == 1 and cfg.get("missing", 5) == 5
    with pytest.raises(AttributeError):
        cfg.missing


def test_labels_of_object_dtype_holding_numbers_train():
    model = keras.Sequential([keras.Input((3,)), layers.Dense(1, activation="sigmoid")])
    model.compile("adam", "binary_crossentropy")
    y = np.array([1, 0, 1, 0], dtype=object)
    x = RNG.random((4, 3)).astype(np.float32)
    got = model.evaluate(x, y, verbose=0)
    assert got == pytest.approx(model.evaluate(x, y.astype(np.float32), verbose=0), rel=1e-6)
    model.fit(x, y, verbose=0)
    with pytest.raises(TypeError, match="real numbers"):
        model.fit(x, np.array(["a", "b", "a", "b"], dtype=object), verbose=0)


def test_concatenate_of_one_input_gives_it_back():
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    np.testing.assert_array_equal(np.asarray(layers.concatenate([x])), x)
    np.testing.assert_array_equal(np.asarray(layers.Concatenate()([x])), x)
    inp = keras.Input((2,))
    np.testing.assert_array_equal(keras.Model(inp, layers.concatenate([inp])).predict(x, verbose=0), x)


def _double(t):
    return t * 2.0


def test_load_model_takes_safe_mode(tmp_path):
    double = _double
    inp = keras.Input((3,))
    model = keras.Model(inp, layers.Lambda(double)(inp))
    model.save(tmp_path / "lam.keras")
    back = keras.models.load_model(tmp_path / "lam.keras", safe_mode=False, custom_objects={"_double": double})
    np.testing.assert_array_equal(back.predict(np.ones((1, 3)), verbose=0), [[2.0, 2.0, 2.0]])
    with pytest.raises(TypeError, match="safe_mode"):
        keras.models.load_model(tmp_path / "lam.keras", safe_mode="no")


def test_compute_loss_is_called_positionally():
    class M(keras.Model):
        def compute_loss(self, x, y_true, y_pred, sample_weight=None, training=False):
            return ops.mean(ops.square(y_true - y_pred))
    inp = layers.Input((4,))
    model = M(inp, layers.Dense(1)(inp))
    model.compile(optimizer="adam")
    x, y = RNG.random((8, 4)).astype(np.float32), np.ones((8, 1), np.float32)
    before = float(np.mean((model.predict(x, verbose=0) - y) ** 2))
    hist = model.fit(x, y, epochs=1, batch_size=8, verbose=0).history        # (one step: the loss before it)
    assert hist["loss"][0] == pytest.approx(before, rel=1e-5)


class _LM(keras.Model):
    """A nanoGPT-style model: its call takes the targets and returns (logits, loss or None)."""

    def __init__(self):
        super().__init__()
        self.emb = layers.Embedding(10, 8)
        self.head = layers.Dense(10)

    def call(self, idx, targets=None):
        logits = self.head(self.emb(idx))
        if targets is None:
            return logits, None
        return logits, ops.mean(keras.losses.sparse_categorical_crossentropy(targets, logits, from_logits=True))


def test_an_eager_call_of_a_subclassed_model_takes_every_argument():
    model = _LM()
    x = RNG.integers(0, 10, (4, 6))
    y = RNG.integers(0, 10, (4, 6))
    logits, none = model(x)
    assert none is None and np.shape(logits) == (4, 6, 10)
    _, loss = model(x, y)
    with keras.GradientTape():
        _, loss_tape = model(x, y)
    _, loss_kw = model(x, targets=y)
    z = np.asarray(logits, np.float64)
    z = z - z.max(-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    want = -np.take_along_axis(logp, y[..., None], -1).mean()
    for got in (loss, loss_tape, loss_kw):
        assert float(got) == pytest.approx(want, rel=1e-5)


def test_a_model_built_on_one_length_is_called_on_others():
    model = _LM()
    model.build((16, 32))
    for n in (1, 7, 32):
        logits, none = model(np.zeros((1, n), np.int64))
        assert np.shape(logits) == (1, n, 10) and none is None


def test_sublayers_in_private_attributes_are_tracked():
    class Block(layers.Layer):
        def __init__(self, **kw):
            super().__init__(**kw)
            self._dense = layers.Dense(8)
            self._parts = [layers.Dense(8), layers.Dense(8)]

        def call(self, x):
            return self._parts[1](self._parts[0](self._dense(x))) + x
    block = Block()
    inp = keras.Input((8,))
    model = keras.Model(inp, layers.Dense(1)(block(inp)))
    model.compile("adam", "mse")
    assert len(block.weights) == 6
    before = block._dense.get_weights()[0].copy()
    model.fit(RNG.random((16, 8)), RNG.random((16, 1)), verbose=0)
    assert not np.array_equal(block._dense.get_weights()[0], before)
    assert "_" not in block._dense.name[:1]


def test_tensors_a_call_keeps_as_attributes_hold_the_eager_calls_values():
    class Gate(layers.Layer):
        def __init__(self, **kw):
            super().__init__(**kw)
            self.d = layers.Dense(3)

        def call(self, x):
            self.gates = ops.sigmoid(self.d(x))
            return x * ops.sum(self.gates, axis=-1, keepdims=True)

    class Net(keras.Model):
        def __init__(self):
            super().__init__()
            self.g = Gate()
            self.head = layers.Dense(2)

        def call(self, x):
            return self.head(self.g(x))
    model = Net()
    for rows in (4, 2):                                  # (each call's own values)
        x = RNG.standard_normal((rows, 5, 5, 8)).astype(np.float32)
        model(x)
        k, b = model.g.d.get_weights()
        np.testing.assert_allclose(np.asarray(model.g.gates), 1 / (1 + np.exp(-(x @ k + b))), rtol=1e-5, atol=1e-6)
        assert layers.UpSampling2D(2)(model.g.gates).shape == (rows, 10, 10, 3)
    gate = Gate()
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    gate(x)
    k, b = gate.d.get_weights()
    np.testing.assert_allclose(np.asarray(gate.gates), 1 / (1 + np.exp(-(x @ k + b))), rtol=1e-5, atol=1e-6)


# --- dict inputs, strings, saving subclassed models --------------------------------------------
def test_a_subclassed_model_called_on_a_dict_of_inputs_gets_the_dict(tmp_path):
    @keras.saving.register_keras_serializable(package="gaps7")
    class Pre(keras.Model):
        def call(self, inputs={}):
            return layers.concatenate([inputs["a"], inputs["b"] * 2.0])
    d = {"a": keras.Input((1,), name="a"), "b": keras.Input((2,), name="b")}
    model = keras.Model(d, Pre()(d))
    x = {"a": np.ones((2, 1), np.float32), "b": np.ones((2, 2), np.float32)}
    np.testing.assert_array_equal(model.predict(x, verbose=0), [[1, 2, 2], [1, 2, 2]])
    model.save(tmp_path / "pre.keras")
    np.testing.assert_array_equal(keras.models.load_model(tmp_path / "pre.keras").predict(x, verbose=0),
                                  [[1, 2, 2], [1, 2, 2]])


def test_data_is_matched_to_a_dict_of_unnamed_inputs_by_its_keys():
    inputs = {"a": layers.Input((3,)), "b": layers.Input((2,))}
    out = layers.Dense(1, kernel_initializer="ones")(layers.Concatenate()([inputs["a"], inputs["b"] * 10.0]))
    model = keras.Model(inputs, out)
    x = {"b": np.ones((4, 2), np.float32), "a": np.zeros((4, 3), np.float32)}
    np.testing.assert_allclose(model.predict(x, verbose=0), np.full((4, 1), 20.0))
    model.compile("adam", "mse")
    model.fit(x, np.zeros((4, 1)), verbose=0)


def test_a_string_input_compared_with_a_string_in_a_call():
    class Fixed(layers.Layer):
        def call(self, s):
            return ops.cast(s == "fixed", "float32") + 2.0 * ops.cast(s != "normal", "float32")
    inp = keras.Input(shape=(1,), dtype="string", name="thal")
    model = keras.Model(inp, Fixed()(inp))
    x = np.array([["fixed"], ["normal"], ["reversible"]])
    np.testing.assert_array_equal(model.predict(x, verbose=0).ravel(), [3.0, 0.0, 2.0])
    np.testing.assert_array_equal(np.asarray(Fixed()(x)).ravel(), [3.0, 0.0, 2.0])       # eager
    np.testing.assert_array_equal(np.asarray(ops.equal(np.array(["a", "b"]), "a")), [True, False])


def test_subclassed_models_with_and_without_their_own_get_config_load_back(tmp_path):
    @keras.saving.register_keras_serializable(package="gaps7")
    class Own(keras.Model):
        def __init__(self, units=4):
            super().__init__()
            self.units = units
            self.d = layers.Dense(units)

        def call(self, x):
            return self.d(x)

        def get_config(self):
            return {"units": self.units}

        @classmethod
        def from_config(cls, config):
            return cls(**config)

    @keras.saving.register_keras_serializable(package="gaps7")
    class Auto(keras.Model):
        def __init__(self, units=4):            # (no **kwargs: the saved name is not passed)
            super().__init__()
            self.d = layers.Dense(units)

        def call(self, x):
            return self.d(x)

    @keras.saving.register_keras_serializable(package="gaps7")
    class Star(keras.Model):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.d = layers.Dense(2)

        def call(self, x):
            return self.d(x)
    x = RNG.random((3, 3)).astype(np.float32)
    for cls in (Own, Auto):
        model = cls(units=5)
        model.compile(optimizer="adam", loss="mse")
        model.fit(x, RNG.random((3, 5)), verbose=0)
        model.save(tmp_path / f"{cls.__name__}.keras")
        back = keras.models.load_model(tmp_path / f"{cls.__name__}.keras")
        np.testing.assert_array_equal(back.predict(x, verbose=0), model.predict(x, verbose=0))
    inp = keras.Input((3,))
    outer = keras.Model(inp, layers.Dense(1)(Star()(inp)))
    outer.save(tmp_path / "outer.keras")
    np.testing.assert_array_equal(keras.models.load_model(tmp_path / "outer.keras").predict(x, verbose=0),
                                  outer.predict(x, verbose=0))


# --- gradients ----------------------------------------------------------------------------------
@pytest.mark.parametrize("nested", [False, True])
def test_a_watched_constant_keeps_its_gradient_through_concatenation(nested):
    v = np.arange(4, dtype=np.float32).reshape(4, 1)
    outer = keras.GradientTape() if nested else None
    if nested:
        outer.__enter__()
    try:
        rx = ops.convert_to_tensor(v)
        with keras.GradientTape() as tape:
            tape.watch(rx)
            y = ops.sum(ops.concatenate([rx, ops.ones((4, 1))], axis=1) * 3.0) + \
                ops.sum(layers.Concatenate()([rx, rx]))
        g = tape.gradient(y, rx)
    finally:
        if nested:
            outer.__exit__(None, None, None)
    np.testing.assert_array_equal(np.asarray(g).ravel(), [5.0] * 4)


@pytest.mark.parametrize("rank, strides, padding, dilation", [(2, 1, "same", 1), (2, 2, "same", 1),
                                                               (2, 1, "valid", 2), (1, 2, "same", 1)])
def test_a_gradient_penalty_through_ops_conv_matches_pytorch(rank, strides, padding, dilation):
    torch = pytest.importorskip("torch")
    shape = (2, 7, 6, 3) if rank == 2 else (2, 9, 3)
    x = RNG.standard_normal(shape).astype(np.float32)
    w0 = (RNG.standard_normal((3,) * rank + (3, 4)) * 0.3).astype(np.float32)
    w = keras.Variable(w0)
    with keras.GradientTape() as outer:
        xv = ops.convert_to_tensor(x)
        with keras.GradientTape() as inner:
            inner.watch(xv)
            y = ops.conv(xv, w, strides=strides, padding=padding, dilation_rate=dilation)
            score = ops.sum(ops.tanh(y))
        gx = inner.gradient(score, xv)
        penalty = ops.sum(ops.square(gx))
    got = np.asarray(outer.gradient(penalty, w))

    xt = torch.tensor(x, requires_grad=True)
    wt = torch.tensor(w0, requires_grad=True)
    conv = torch.nn.functional.conv2d if rank == 2 else torch.nn.functional.conv1d
    xc = xt.permute(0, 3, 1, 2) if rank == 2 else xt.permute(0, 2, 1)
    kc = wt.permute(3, 2, 0, 1) if rank == 2 else wt.permute(2, 1, 0)
    if padding == "same":
        k = 3
        pads = []
        for n in xc.shape[2:][::-1]:
            out = -(-n // strides)
            total = max((out - 1) * strides + (k - 1) * dilation + 1 - n, 0)
            pads += [total // 2, total - total // 2]
        xc = torch.nn.functional.pad(xc, pads)
    yt = conv(xc, kc, stride=strides, dilation=dilation)
    gxt, = torch.autograd.grad(torch.tanh(yt).sum(), xt, create_graph=True)
    (gxt ** 2).sum().backward()
    np.testing.assert_allclose(np.asarray(y), (yt.permute(0, 2, 3, 1) if rank == 2 else yt.permute(0, 2, 1))
                               .detach().numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got, wt.grad.numpy(), rtol=1e-3, atol=1e-3)


# --- nested models on variable sizes, defaulted losses on datasets ----------------------------------
def test_a_model_built_on_variable_sizes_gives_known_sizes_when_called_on_them():
    inner_in = layers.Input((None, None, 3))
    inner = keras.Model(inner_in, layers.Conv2D(8, 3, strides=2, padding="same")(inner_in))
    x_in = layers.Input((32, 30, 3))
    y = inner(x_in)
    assert tuple(y.shape) == (None, 16, 15, 8)
    out = layers.Dense(2)(layers.Flatten()(y))             # (a backbone, then Flatten: transfer learning)
    model = keras.Model(x_in, out)
    x = RNG.standard_normal((2, 32, 30, 3)).astype(np.float32)
    k, b = inner.layers[1].get_weights()
    assert model.predict(x, verbose=0).shape == (2, 2)
    # ("same" with stride 2 pads after only here: the first pixel reads the first 3 x 3 window)
    np.testing.assert_allclose(inner.predict(x, verbose=0)[0, 0, 0], np.einsum("ijc,ijco->o", x[0, :3, :3], k) + b,
                               rtol=1e-5, atol=1e-5)
    # a variable axis stays variable
    assert tuple(inner(layers.Input((None, 30, 3))).shape) == (None, None, 15, 8)


def test_compile_with_metrics_only_reads_class_ids_from_a_dataset_first():
    x = RNG.normal(size=(32, 4)).astype(np.float32)
    y = RNG.integers(0, 3, 32)
    ds = keras.data.Dataset.from_tensor_slices((x, y)).batch(16)
    inp = keras.Input((4,))
    model = keras.Model(inp, layers.Dense(3)(inp))
    model.compile(metrics=["accuracy"])
    on_ds = model.evaluate(ds, verbose=0)
    on_arrays = model.evaluate(x, y, verbose=0)
    np.testing.assert_allclose(on_ds, on_arrays, rtol=1e-6)
    p = model.predict(x, verbose=0)
    assert on_ds[1] == pytest.approx(np.mean(p.argmax(1) == y))


def test_a_reduction_takes_its_axes_as_a_constant_tensor():
    x = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
    axes = ops.arange(1, ops.size(ops.shape(x)))
    np.testing.assert_allclose(np.asarray(ops.sum(x, axis=axes)), x.sum((1, 2, 3)), rtol=1e-5)
    v = keras.Variable(x)
    with keras.GradientTape() as tape:
        s = ops.sum(ops.square(v), axis=ops.arange(1, ops.size(ops.shape(v))))
        loss = ops.sum(s)
    np.testing.assert_allclose(np.asarray(s), (x ** 2).sum((1, 2, 3)), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(tape.gradient(loss, v)), 2 * x, rtol=1e-5)


def test_a_dataset_that_repeats_forever_shuffles_through_a_buffer():
    D = keras.data.Dataset
    ds = D.from_tensor_slices(np.arange(10)).repeat().shuffle(4, seed=1)
    it = iter(ds)
    got = np.array([int(next(it)) for _ in range(200)])
    # each output is drawn from a buffer of 4 read ahead: the first 200 are 200 of the first 204 read
    counts = np.bincount(got, minlength=10)
    assert counts.min() >= 16 and counts.max() <= 21, counts
    # (and the first output is one of the first 4 read)
    assert got[0] in (0, 1, 2, 3)
    assert not np.array_equal(got, np.arange(200) % 10)
    it2 = iter(D.from_tensor_slices(np.arange(10)).repeat().shuffle(4, seed=1))
    assert [int(next(it2)) for _ in range(200)] == got.tolist()
    pairs = D.zip((D.from_tensor_slices(np.arange(10)).repeat(), D.from_tensor_slices(np.arange(10) * 10).repeat()))
    x, y = next(iter(pairs.shuffle(4).batch(3)))
    np.testing.assert_array_equal(np.asarray(y), np.asarray(x) * 10)
    model = keras.Sequential([keras.Input((1,)), layers.Dense(1)])
    model.compile("sgd", "mse")
    stream = D.from_tensor_slices((RNG.random((10, 1)), RNG.random((10, 1)))).repeat().shuffle(8).batch(4)
    assert len(model.fit(stream, epochs=2, steps_per_epoch=3, verbose=0).history["loss"]) == 2


@pytest.mark.parametrize("rank", [1, 2])
def test_ops_conv_is_the_same_in_its_fused_and_composed_forms(rank, monkeypatch):
    from pyggml import _scope
    x = RNG.standard_normal((2, 9, 8, 3) if rank == 2 else (2, 9, 3)).astype(np.float32)
    w = RNG.standard_normal((3,) * rank + (3, 5)).astype(np.float32)

    class Conv(layers.Layer):
        def call(self, t):
            return ops.conv(t, ops.convert_to_tensor(w), strides=2, padding="same")
    fused = np.asarray(Conv()(x))
    monkeypatch.setattr(_scope, "FORCE_COMPOSED", True)
    composed = np.asarray(Conv()(x))
    np.testing.assert_allclose(fused, composed, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", ["lstm", "gru", "simple_rnn"])
def test_a_recurrent_layers_weights_come_as_keras_s_three_arrays(kind):
    from test_keras_io_port_gaps_6 import keras_rnn
    units, feats = 4, 3
    x = RNG.normal(size=(2, 5, feats)).astype(np.float32)
    layer = {"lstm": layers.LSTM, "gru": layers.GRU, "simple_rnn": layers.SimpleRNN}[kind](units)
    # PyTorch's two biases (pyggml's) made different, so that their sum is tested
    layer(x)
    g = {"lstm": 4, "gru": 3, "simple_rnn": 1}[kind]
    layer.set_weights({"bias_ih": RNG.normal(size=g * units), "bias_hh": RNG.normal(size=g * units)})
    want = np.asarray(layer(x))
    kernel, recurrent_kernel, bias = layer.get_weights()          # Keras's idiom
    assert len(layer.get_weights()) == 3
    assert kernel.shape == (feats, g * units) and recurrent_kernel.shape == (units, g * units)
    assert bias.shape == ((2, g * units) if kind == "gru" else (g * units,))
    np.testing.assert_allclose(keras_rnn(kind, x, kernel, recurrent_kernel, bias), want, rtol=1e-5, atol=1e-5)
    # set_weights(get_weights()) and Keras's w[i] = ...; set_weights(w) round-trip
    w = layer.get_weights()
    layer.set_weights(w)
    np.testing.assert_allclose(np.asarray(layer(x)), want, rtol=1e-6, atol=1e-6)
    w[2] = np.zeros_like(w[2])
    layer.set_weights(w)
    np.testing.assert_array_equal(layer.get_weights()[2], np.zeros_like(bias))
    layer.set_weights(list(layer.get_weights()))
    assert sorted(layer.get_weights().keys()) == ["bias_hh", "bias_ih", "weight_hh", "weight_ih"]


def test_class_weight_weighs_the_training_rows_only_with_validation_split():
    x = RNG.normal(size=(100, 5)).astype(np.float32)
    y = (RNG.random(100) < 0.3).astype(np.float32)
    model = keras.Sequential([keras.Input((5,)), layers.Dense(1, activation="sigmoid")])
    model.compile(keras.optimizers.SGD(0.0), "binary_crossentropy")
    p = np.clip(model.predict(x, verbose=0)[:, 0].astype(np.float64), 1e-7, 1 - 1e-7)
    bce = -(y * np.log(p) + (1 - y) * np.log(1 - p))
    cw = np.where(y == 1, 2.0, 0.5)
    hist = model.fit(x, y, batch_size=100, validation_split=0.2, shuffle=False, verbose=0,
                     class_weight={0: 0.5, 1: 2.0}).history
    assert hist["val_loss"][0] == pytest.approx(bce[80:].mean(), rel=1e-5)
    assert hist["loss"][0] == pytest.approx((cw[:80] * bce[:80]).sum() / 80, rel=1e-5)


def test_checkpoint_and_plateau_say_what_keras_says(tmp_path, capsys):
    model = keras.Sequential([keras.Input((2,)), layers.Dense(1)])
    model.compile(keras.optimizers.SGD(1e-3), "mse")
    x, y = RNG.random((16, 2)).astype(np.float32), RNG.random((16, 1)).astype(np.float32)
    cbs = [keras.callbacks.ModelCheckpoint(str(tmp_path / "ck.keras"), save_best_only=True, verbose=1),
           keras.callbacks.ReduceLROnPlateau(monitor="loss", patience=0, min_delta=10.0, factor=0.5, verbose=1)]
    model.fit(x, y, validation_data=(x, y), epochs=2, verbose=0, callbacks=cbs)
    out = capsys.readouterr().out
    assert "Epoch 1: val_loss improved from inf to " in out and "saving model to " in out
    assert "Epoch 2: ReduceLROnPlateau reducing learning rate to 0.0005." in out      # (epoch 1 beat inf)


# --- cross-entropy from the logits behind a sigmoid or softmax inside custom code ------------------
def test_cross_entropy_of_a_sigmoid_inside_custom_code_uses_its_logits():
    # Keras's TensorFlow backend keeps a sigmoid's or softmax's logits on its output: the loss of a
    # saturated output is exact and has a gradient (the clipped probability gives 16.118 and none)
    class Head(layers.Layer):
        def __init__(self, **kw):
            super().__init__(**kw)
            self.d = layers.Dense(1, activation="sigmoid", kernel_initializer="ones", bias_initializer="zeros")

        def call(self, x):
            return self.d(x)

    class Soft(keras.Model):
        def __init__(self):
            super().__init__()
            self.d = layers.Dense(3, kernel_initializer="ones", bias_initializer="zeros")

        def call(self, x):
            return ops.softmax(self.d(x) * ops.convert_to_tensor(np.array([[1.0, 0.0, -1.0]], np.float32)))
    x = np.full((4, 1), -30.0, np.float32)
    y = np.ones((4, 1), np.float32)
    inp = keras.Input((1,))
    model = keras.Model(inp, Head()(inp))
    model.compile(keras.optimizers.SGD(0.01), "binary_crossentropy")
    assert model.evaluate(x, y, verbose=0) == pytest.approx(30.0, rel=1e-5)
    w0 = model.get_weights()["head.d.weight"].copy()
    model.fit(x, y, epochs=1, batch_size=4, verbose=0)
    # d/dw of softplus(-w x) at w x = -30: -x * sigmoid(-w x) = 30, so w moves by -0.01 * 30
    np.testing.assert_allclose(model.get_weights()["head.d.weight"], w0 - 0.01 * 30.0, rtol=1e-5)

    soft = Soft()
    soft.compile(keras.optimizers.SGD(0.0), "sparse_categorical_crossentropy")
    xs = np.full((2, 1), 30.0, np.float32)
    assert soft.evaluate(xs, np.array([2, 2]), verbose=0) == pytest.approx(60.0, rel=1e-5)

    v = keras.Variable(np.array([[-30.0]], np.float32))
    with keras.GradientTape() as tape:
        loss = keras.losses.binary_crossentropy(np.ones((1, 1), np.float32), ops.sigmoid(v))
    assert float(ops.sum(loss)) == pytest.approx(30.0, rel=1e-5)
    assert float(np.asarray(tape.gradient(loss, v)).ravel()[0]) == pytest.approx(-1.0, rel=1e-5)


def test_sparse_cross_entropy_takes_labels_computed_in_the_call():
    class Masked(layers.Layer):
        def call(self, labels, logits):
            safe = ops.cast(ops.where(labels == -100, 0, labels), "int32")
            return keras.losses.sparse_categorical_crossentropy(safe, logits, from_logits=True)
    lab = keras.Input((5,), dtype="int32")
    lg = keras.Input((5, 7))
    model = keras.Model([lab, lg], Masked()(lab, lg))
    labels = np.array([[1, 2, -100, -100, 3]])
    logits = RNG.standard_normal((1, 5, 7)).astype(np.float32)
    z = logits - logits.max(-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    want = -np.take_along_axis(logp, np.where(labels == -100, 0, labels)[..., None], -1)[..., 0]
    np.testing.assert_allclose(model.predict([labels, logits], verbose=0), want, rtol=1e-5, atol=1e-6)


def test_a_lambda_compares_a_string_input_with_a_string():
    inp = keras.Input((1,), dtype="string", name="thal")

    def is_fixed(x):
        return ops.cast(x == "fixed", "float32")
    model = keras.Model(inp, layers.concatenate([layers.Lambda(is_fixed)(inp), layers.Lambda(is_fixed)(inp) * 2.0]))
    np.testing.assert_array_equal(model.predict(np.array([["fixed"], ["normal"]]), verbose=0), [[1, 2], [0, 0]])


def test_an_eager_call_keeping_tensors_runs_its_side_effects_once():
    class Count(layers.Layer):
        def build(self, s):
            self.n = self.add_weight(shape=(), initializer="zeros", trainable=False, name="n")

        def call(self, x):
            self.n.assign_add(ops.cast(ops.shape(x)[0], "float32"))
            self.seen = x * 1.0                          # (kept: the model's calls then run eagerly)
            return x

    class Net(keras.Model):
        def __init__(self):
            super().__init__()
            self.c = Count()
            self.d = layers.Dense(1)

        def call(self, x):
            return self.d(self.c(x))
    model = Net()
    counts = []
    for _ in range(3):
        model(np.ones((8, 2), np.float32))
        counts.append(float(model.c.n.numpy()))
    assert counts == [8.0, 16.0, 24.0]
    np.testing.assert_array_equal(np.asarray(model.c.seen), np.ones((8, 2)))
