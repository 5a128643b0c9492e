"""Gaps found by this round's ports and the recheck of earlier repros: automatic configs of
custom layers given Keras objects, constructors without **kwargs, a save refused before it
writes an unloadable file, integer Variables as step counters."""

import os

import numpy as np
import pytest

import pyggml as keras
from pyggml import layers, ops

RNG = np.random.default_rng(8)


class _Scaled(layers.Layer):
    """keras-io's attention_mil pattern: no get_config, a regularizer object given."""

    def __init__(self, dim, kernel_regularizer=None, kernel_initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        self.dim = dim
        self.kernel_regularizer = kernel_regularizer
        self.kernel_initializer = kernel_initializer

    def build(self, shape):
        self.w = self.add_weight(shape=(shape[-1], self.dim), regularizer=self.kernel_regularizer,
                                 initializer=self.kernel_initializer)

    def call(self, x):
        return x @ self.w


class _NoKwargs(layers.Layer):
    """keras-io's mlp_image_classification pattern: a constructor without **kwargs."""

    def __init__(self, patch_size, num_patches):
        super().__init__()
        self.patch_size = patch_size
        self.num_patches = num_patches

    def call(self, x):
        return x * float(self.patch_size) + float(self.num_patches)


class _Table(layers.Layer):
    def __init__(self, table, **kwargs):
        super().__init__(**kwargs)
        self.table = np.asarray(table, np.float32)

    def call(self, x):
        return x * self.table


def test_an_automatic_config_keeps_regularizer_and_initializer_objects(tmp_path):
    inp = keras.Input((3,))
    layer = _Scaled(4, kernel_regularizer=keras.regularizers.L2(0.01),
                    kernel_initializer=keras.initializers.RandomNormal(stddev=0.5, seed=1), name="scaled")
    model = keras.Model(inp, layer(inp))
    model.compile("sgd", "mse")
    x = RNG.random((5, 3)).astype(np.float32)
    model.save(tmp_path / "m.keras")
    again = keras.models.load_model(tmp_path / "m.keras", custom_objects={"_Scaled": _Scaled})
    got = again.get_layer("scaled")
    assert got.dim == 4
    assert isinstance(got.kernel_regularizer, keras.regularizers.L2) and got.kernel_regularizer.l2 == pytest.approx(0.01)
    assert isinstance(got.kernel_initializer, keras.initializers.RandomNormal)
    np.testing.assert_array_equal(again.predict(x, verbose=0), model.predict(x, verbose=0))
    w = layer.w.numpy()
    assert float(sum(np.asarray(v) for v in again.losses)) == pytest.approx(0.01 * float((w ** 2).sum()), rel=1e-5)


def test_a_constructor_without_kwargs_loads_with_its_name(tmp_path):
    inp = keras.Input((3,))
    model = keras.Model(inp, _NoKwargs(2, 4)(inp))
    model.save(tmp_path / "m.keras")
    again = keras.models.load_model(tmp_path / "m.keras", custom_objects={"_NoKwargs": _NoKwargs})
    assert again.layers[1].name == model.layers[1].name
    np.testing.assert_array_equal(again.predict(np.ones((1, 3)), verbose=0), [[6.0, 6.0, 6.0]])
    clone = keras.models.clone_model(model)
    assert clone.layers[1].patch_size == 2 and clone.layers[1].num_patches == 4


def test_a_layer_whose_arguments_cannot_be_kept_refuses_the_save_and_leaves_the_old_file(tmp_path):
    inp = keras.Input((3,))
    model = keras.Model(inp, _Table(np.full(3, 2.0))(inp))
    np.testing.assert_array_equal(model.predict(np.ones((1, 3)), verbose=0), [[2.0, 2.0, 2.0]])
    path = tmp_path / "m.keras"
    path.write_bytes(b"an older save")
    with pytest.raises(NotImplementedError, match="get_config"):
        model.save(path)
    assert path.read_bytes() == b"an older save"
    assert sorted(os.listdir(tmp_path)) == ["m.keras"]            # nothing half written beside it
    with pytest.raises(NotImplementedError, match="get_config"):
        model.layers[1].get_config()
    model.save_weights(tmp_path / "w.weights.h5")                 # the weights alone still save


def test_an_integer_variable_is_a_step_counter():
    step = keras.Variable(0, dtype="int64")
    assert not step.trainable
    step.assign_add(1)
    step.assign_add(2)
    assert int(step.numpy()) == 3
    with pytest.raises(ValueError, match="trainable=True"):
        keras.Variable(0, dtype="int32", trainable=True)


def test_a_target_network_snapshot_and_clone_of_a_model_with_an_unregistered_custom_layer():
    inp = keras.Input((3,))
    model = keras.Model(inp, layers.Dense(2)(_Scaled(4, kernel_regularizer=keras.regularizers.L2(0.01))(inp)))
    model.compile("adam", "mse")
    x = RNG.random((8, 3)).astype(np.float32)
    twin = model.clone()
    np.testing.assert_array_equal(twin.predict(x, verbose=0), model.predict(x, verbose=0))
    trainer = keras.Trainer(model, 8)
    target = trainer.snapshot()
    before = target.predict(x)
    trainer.step(x, np.zeros((8, 2), np.float32))
    np.testing.assert_array_equal(target.predict(x), before)            # frozen while the model moves
    assert not np.array_equal(model.predict(x, verbose=0), before)


def test_add_variable_is_add_weight_with_the_shape_and_initializer_first():
    class Bias(layers.Layer):
        def build(self, shape):
            self.b = self.add_variable((shape[-1],), "ones", name="b")
            self.steps = self.add_variable((), "zeros", dtype="int32", trainable=False, name="steps")

        def call(self, x):
            return x + self.b
    layer = Bias()
    np.testing.assert_array_equal(layer(np.zeros((2, 3), np.float32)), np.ones((2, 3)))
    assert [w.name for w in layer.trainable_weights] == ["b"] and not layer.steps.trainable


@pytest.mark.parametrize("make, states", [(lambda: layers.LSTM(4), [4, 4]), (lambda: layers.GRU(4), 4),
                                          (lambda: layers.SimpleRNN(4), 4)])
def test_a_recurrent_layer_s_cell_shows_its_weights_as_keras_s_cell(make, states):
    layer = make()
    keras.Sequential([keras.Input((5, 3)), layer]).predict(np.ones((2, 5, 3), np.float32), verbose=0)
    cell = layer.cell
    assert cell.units == 4 and cell.state_size == states and cell.output_size == 4
    kernel, recurrent, *_ = layer.get_weights()
    np.testing.assert_array_equal(cell.kernel.numpy(), kernel)
    np.testing.assert_array_equal(cell.recurrent_kernel.numpy(), recurrent)
    cell.kernel.assign(np.zeros_like(kernel))
    assert not np.any(layer.get_weights()[0])


def test_a_subclassed_model_drawing_numpy_randomness_draws_anew_on_each_eager_call():
    class Jitter(keras.Model):
        def call(self, x):
            return x + np.random.uniform(-1, 1)

    class Plain(keras.Model):
        def __init__(self):
            super().__init__()
            self.dense = layers.Dense(2)

        def call(self, x):
            return self.dense(x)
    img = np.zeros((4, 4, 3), np.float32)
    jitter = Jitter()
    assert len({np.asarray(jitter(img)).tobytes() for _ in range(10)}) == 10       # as Keras's eager call
    plain = Plain()
    x = np.ones((2, 3), np.float32)
    assert len({np.asarray(plain(x)).tobytes() for _ in range(5)}) == 1


class _Kernel5(layers.Layer):
    """A convolution whose kernel is kept as a 5-D weight (keras-io recipes' pattern)."""

    def build(self, input_shape):
        self.k = self.add_weight(shape=(3, 3, input_shape[-1], 8, 4), initializer="glorot_uniform", name="k")

    def call(self, x):
        return ops.conv(x, ops.reshape(self.k, (3, 3, x.shape[-1], 32)), padding="same")


def test_a_weight_of_five_dimensions_computes_trains_and_saves_as_pytorch_s(tmp_path):
    torch = pytest.importorskip("torch")
    inp = keras.Input((6, 6, 3))
    model = keras.Model(inp, _Kernel5()(inp))
    layer = model.layers[1]
    assert layer.k.shape == (3, 3, 3, 8, 4) and model.count_params() == 864
    k = layer.k.numpy()
    limit = np.sqrt(6 / (3 * 3 * 3 * 8 + 3 * 3 * 3 * 4))       # Keras's fans of the 5-D shape: (*27, in 8, out 4)
    assert 0.95 * limit < np.abs(k).max() <= limit
    x = RNG.random((4, 6, 6, 3)).astype(np.float32)
    xt = torch.tensor(x).permute(0, 3, 1, 2)
    kt = torch.tensor(k.reshape(3, 3, 3, 32)).permute(3, 2, 0, 1).requires_grad_(True)
    want = torch.nn.functional.conv2d(xt, kt, padding=1)
    np.testing.assert_allclose(model.predict(x, verbose=0), want.permute(0, 2, 3, 1).detach().numpy(), atol=1e-5)
    with keras.GradientTape() as tape:
        loss = ops.mean(model(x) ** 2)
    (grad,) = tape.gradient(loss, [layer.k])
    (want ** 2).mean().backward()
    assert np.shape(grad) == (3, 3, 3, 8, 4)
    np.testing.assert_allclose(np.asarray(grad), kt.grad.permute(2, 3, 1, 0).numpy().reshape(3, 3, 3, 8, 4),
                               rtol=1e-4, atol=1e-7)
    model.compile(keras.optimizers.Adam(0.01), "mse")
    loss = model.fit(x, np.zeros((4, 6, 6, 32), np.float32), epochs=5, verbose=0).history["loss"]
    assert loss[-1] < 0.8 * loss[0]
    model.save(tmp_path / "k5.keras")
    again = keras.models.load_model(tmp_path / "k5.keras", custom_objects={"_Kernel5": _Kernel5})
    assert again.layers[1].k.shape == (3, 3, 3, 8, 4)
    np.testing.assert_array_equal(again.predict(x, verbose=0), model.predict(x, verbose=0))
    layer.set_weights([np.zeros((3, 3, 3, 8, 4))])
    assert not np.any(model.predict(x, verbose=0))


def test_a_weight_of_five_dimensions_takes_regularizers_constraints_and_assigns():
    class Rules(layers.Layer):
        def build(self, shape):
            self.k = self.add_weight(shape=(2, 2, 2, shape[-1], 3), initializer="ones", name="k",
                                     regularizer=keras.regularizers.L2(0.5),
                                     constraint=keras.constraints.MaxNorm(1.0, axis=[0, 1, 2, 3]))
            self.calls = self.add_weight(shape=(2, 1, 1, 1, 2), initializer="zeros", trainable=False, name="calls")

        def call(self, x):
            self.calls.assign(self.calls + 1.0)
            return x @ ops.reshape(ops.sum(self.k, axis=(0, 1, 2)), (x.shape[-1], 3))
    model = keras.Sequential([keras.Input((4,)), Rules()])
    model.compile("sgd", "mse")
    assert [float(np.asarray(p)) for p in model.losses] == [pytest.approx(0.5 * 2 * 2 * 2 * 4 * 3)]
    model.fit(np.ones((2, 4), np.float32), np.zeros((2, 3)), batch_size=2, epochs=2, verbose=0)
    k = model.layers[0].k.numpy()
    norms = np.sqrt((k ** 2).sum(axis=(0, 1, 2, 3)))          # sqrt(32) at first: projected to at most 1
    assert np.all(norms <= 1.0 + 1e-5) and np.all(norms > 0.5)
    np.testing.assert_array_equal(model.layers[0].calls.numpy(), np.full((2, 1, 1, 1, 2), 2.0))
    v = keras.Variable(np.ones((2, 2, 2, 2, 2)), dtype="float32")
    assert v.shape == (2, 2, 2, 2, 2) and float(v.numpy().sum()) == 32.0
    with pytest.raises(ValueError, match="at most 8"):
        layers.Layer().add_weight(shape=(1,) * 9)


def test_a_loss_of_nested_feature_maps_of_different_shapes_as_keras_s():
    class FeatureMatching(keras.losses.Loss):               # keras-io gaugan's
        def call(self, y_true, y_pred):
            return sum(ops.mean(ops.abs(a - b)) for a, b in zip(y_true, y_pred))
    real = [np.ones((2, 4, 4, 3), np.float32), np.ones((2, 2, 2, 5), np.float32)]
    fake = [np.zeros((2, 4, 4, 3), np.float32), np.full((2, 2, 2, 5), 3.0, np.float32)]
    assert float(FeatureMatching()(real, fake)) == pytest.approx(3.0)
    fake_v = [keras.Variable(f) for f in fake]
    with keras.GradientTape() as tape:
        loss = FeatureMatching()(real, fake_v)
    grads = tape.gradient(loss, fake_v)
    np.testing.assert_allclose(np.asarray(grads[0]), np.full((2, 4, 4, 3), -1 / 96), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(grads[1]), np.full((2, 2, 2, 5), 1 / 40), rtol=1e-5)
    assert float(keras.losses.MeanSquaredError()([1.0, 2.0], [1.0, 4.0])) == pytest.approx(2.0)


# --- keras-io's recommenders (keras_rs), ported -------------------------------------------------

def test_top_k_retrieval_over_many_candidates_in_a_model_matches_numpy():
    cands = RNG.normal(size=(1683, 16)).astype(np.float32)

    class Retrieve(layers.Layer):                # keras_rs's BruteForceRetrieval
        def call(self, q):
            scores = ops.matmul(q, ops.transpose(ops.convert_to_tensor(cands)))
            values, ids = ops.top_k(scores, k=10)
            return values, ids, ops.take(ops.convert_to_tensor(cands), ids, axis=0)
    inp = keras.Input((16,))
    model = keras.Model(inp, Retrieve()(inp))
    q = RNG.normal(size=(5, 16)).astype(np.float32)
    values, ids, rows = model.predict(q, verbose=0)
    scores = q @ cands.T
    want = np.argsort(-scores, axis=1, kind="stable")[:, :10]
    np.testing.assert_array_equal(ids, want)
    np.testing.assert_allclose(values, np.take_along_axis(scores, want, 1), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(rows, cands[want])


def test_large_sorts_in_a_graph_are_stable_train_through_the_values_and_survive_nan():
    x = RNG.normal(size=(3, 6000)).astype(np.float32)
    x[0, :200] = 0.5                                 # ties keep their order, as numpy's stable sort

    class Sort(layers.Layer):
        def call(self, t):
            return ops.sort(t), ops.argsort(t)
    inp = keras.Input((6000,))
    srt, order = keras.Model(inp, Sort()(inp)).predict(x, verbose=0)
    np.testing.assert_array_equal(srt, np.sort(x, axis=1))
    np.testing.assert_array_equal(order, np.argsort(x, axis=1, kind="stable"))
    v = keras.Variable(RNG.normal(size=(4, 3000)).astype(np.float32))
    with keras.GradientTape() as tape:
        top, _ = ops.top_k(v, k=5)
        loss = ops.sum(top * np.arange(1, 6, dtype=np.float32))
    grad = np.asarray(tape.gradient(loss, v))
    want = np.zeros((4, 3000), np.float32)
    np.put_along_axis(want, np.argsort(-v.numpy(), axis=1, kind="stable")[:, :5],
                      np.tile(np.arange(1, 6, dtype=np.float32), (4, 1)), axis=1)
    np.testing.assert_array_equal(grad, want)
    y = RNG.normal(size=(2, 7000)).astype(np.float32)
    y[0, 5], y[1, :] = np.nan, np.nan

    class Top(layers.Layer):
        def call(self, t):
            return ops.top_k(t, k=3)[1]
    inp = keras.Input((7000,))
    ids = keras.Model(inp, Top()(inp)).predict(y, verbose=0)
    np.testing.assert_array_equal(ids[0], np.argsort(-np.nan_to_num(y[0], nan=-np.inf), kind="stable")[:3])
    assert ids[1].tolist() == [0, 1, 2]


def test_sparse_top_k_accuracy_of_sorted_ids():
    m = keras.metrics.SparseTopKCategoricalAccuracy(k=3, from_sorted_ids=True)
    m.update_state(np.array([5, 2, 9]), np.array([[5, 1, 0, 7], [1, 3, 2, 0], [0, 1, 4, 9]]))
    assert float(m.result()) == pytest.approx(2 / 3)
    assert keras.metrics.SparseTopKCategoricalAccuracy.from_config(m.get_config()).from_sorted_ids


class _Ranker(keras.Model):
    def __init__(self, users, **kwargs):
        super().__init__(**kwargs)
        self.users = users
        self.u = layers.Embedding(users, 4)
        self.m = layers.Embedding(10, 4)
        self.d = layers.Dense(1)

    def build(self, input_shape):                # keras-io multi_task's: a dict of shapes
        self.u.build(input_shape)
        self.m.build(input_shape)
        super().build(input_shape)

    def call(self, x):
        return self.d(ops.concatenate([self.u(x["user_id"]), self.m(x["movie_id"])], axis=1))


def test_a_recommender_built_on_a_dict_with_numpy_ints_trains_saves_and_validates_through_its_evaluate(tmp_path):
    calls = []

    class Counted(_Ranker):
        def evaluate(self, *args, **kwargs):     # keras-io deep_recommender refreshes its candidates here
            calls.append(1)
            return super().evaluate(*args, **kwargs)
    keras.saving.register_keras_serializable()(Counted)
    model = Counted(np.int64(10))                # what tf's .numpy() or pandas gives
    model.compile("adam", "mse")
    x = {"user_id": np.arange(8) % 10, "movie_id": np.arange(8)[::-1] % 10}
    model.fit(x, np.ones(8), validation_data=(x, np.ones(8)), epochs=3, verbose=0)
    assert len(calls) == 3                       # Keras 3's fit validates with self.evaluate
    model.save(tmp_path / "r.keras")
    again = keras.models.load_model(tmp_path / "r.keras")
    assert again.users == 10 and type(again.users) is int
    np.testing.assert_array_equal(again.predict(x, verbose=0), model.predict(x, verbose=0))


def test_a_dict_taking_tower_first_called_inside_another_model_and_called_by_keyword():
    class Tower(keras.Model):
        def __init__(self):
            super().__init__()
            self.ea, self.eb = layers.Embedding(10, 4), layers.Embedding(10, 4)

        def call(self, inputs):
            return ops.concatenate([self.ea(inputs["a"]), self.eb(inputs["b"])], axis=1)

    class Outer(keras.Model):
        def __init__(self):
            super().__init__()
            self.tower, self.out = Tower(), layers.Dense(1)

        def call(self, inputs, training=False):
            return {"score": self.out(self.tower({"a": inputs["a"], "b": inputs["b"]}))}
    model = Outer()
    model.compile(keras.optimizers.Adam(0.05), {"score": "mse"})
    x = {"a": np.arange(8) % 10, "b": np.arange(8)[::-1] % 10}
    loss = model.fit(x, {"score": np.ones(8)}, epochs=30, verbose=0).history["loss"]
    assert loss[-1] < 0.5 * loss[0]
    assert model(inputs=x, training=True)["score"].shape == (8, 1)          # keyword, dict output, training
    assert layers.Dense(3)(inputs=np.ones((2, 4), np.float32)).shape == (2, 3)


def test_tensors_between_options_and_by_keyword_reach_a_custom_call_by_name(tmp_path):
    @keras.saving.register_keras_serializable()
    class Encoder(layers.Layer):                 # keras-io hstu's positional encoder
        def call(self, x, lengths, max_seq_len, extra=None):
            return x * float(max_seq_len) + ops.expand_dims(ops.cast(lengths + extra, "float32"), -1)

        def compute_output_shape(self, input_shape):
            return input_shape                   # Keras gives it the first input's shape
    a, b, d = keras.Input((3,)), keras.Input(()), keras.Input(())
    xs = [np.ones((2, 3), np.float32), np.arange(2.0, dtype=np.float32), np.ones(2, np.float32)]
    for out in (Encoder()(a, b, 3, d), Encoder()(a, b, max_seq_len=3, extra=d)):
        model = keras.Model([a, b, d], layers.Dense(2, kernel_initializer="ones")(out))
        assert model.output_shape == (None, 2)
        np.testing.assert_allclose(model.predict(xs, verbose=0), [[12.0, 12.0], [15.0, 15.0]])
    model.save(tmp_path / "enc.keras")
    np.testing.assert_allclose(keras.models.load_model(tmp_path / "enc.keras").predict(xs, verbose=0),
                               [[12.0, 12.0], [15.0, 15.0]])


def test_datasets_give_numpy_scalars_and_a_cardinality_tensor_as_tf_data():
    ds = keras.data.Dataset.from_tensor_slices({"id": np.array([b"1", b"2"]), "title": np.array([b"Heat", b"Up"])})
    first = next(iter(ds.as_numpy_iterator()))
    assert first["title"] == b"Heat" and {first["title"]: 1}[b"Heat"] == 1        # hashable, as tf.data's
    assert int(ds.cardinality().numpy()) == 2 and ds.cardinality() == 2
    for ctx, _ in keras.data.Dataset.from_tensor_slices((np.array([[5, 7]]), np.array([1]))):
        assert {5: "Heat"}[ctx[0].numpy()] == "Heat"


def test_expand_dims_of_several_axes_in_a_graph_and_a_summary_after_an_own_build():
    class Two(layers.Layer):
        def call(self, t):
            return ops.expand_dims(t, axis=(-2, -1))
    inp = keras.Input((4,))
    assert keras.Model(inp, Two()(inp)).predict(np.ones((2, 4)), verbose=0).shape == (2, 4, 1, 1)

    class Own(keras.Model):
        def __init__(self):
            super().__init__()
            self.e, self.d = layers.Embedding(10, 4), layers.Dense(2)

        def build(self, input_shape):            # keras-io hstu's: layers built by a call on Inputs
            self.call({"ids": keras.Input((5,), dtype="int32", name="ids")})

        def call(self, inputs):
            return self.d(ops.mean(self.e(inputs["ids"]), axis=1))
    model = Own()
    model.build({"ids": (None, 5)})
    assert model.count_params() == 50
    lines = []
    model.summary(print_fn=lines.append)
    assert any("Total params: 50" in line for line in lines)


def test_normalization_adapts_on_single_elements_and_normalizes_one_example_as_keras(tmp_path):
    v = RNG.uniform(15, 70, 1000).astype(np.float32)
    ds = keras.data.Dataset.from_tensor_slices({"age": v}).map(lambda x: ops.expand_dims(x["age"], axis=-1))
    norm = layers.Normalization(axis=-1)
    norm.adapt(ds)                               # keras-io dlrm's: elements of shape (1,), batched by 128
    np.testing.assert_allclose(np.asarray(norm.mean).ravel(), [v.mean()], rtol=1e-5)
    np.testing.assert_allclose(np.asarray(norm.variance).ravel(), [v.var()], rtol=1e-4)
    one = np.asarray(norm(np.array([40.0], np.float32)))                  # one example, no batch axis
    assert one.shape == (1, 1)
    np.testing.assert_allclose(one, [[(40.0 - v.mean()) / v.std()]], rtol=1e-4)


def test_a_subclassed_model_first_called_by_keyword_builds_and_round_trips(tmp_path):
    @keras.saving.register_keras_serializable()
    class Masked(keras.Model):                   # keras-io sas_rec's first call: model(inputs={...})
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.emb = layers.Embedding(10, 4)

        def build(self, input_shape):
            self.emb.build(input_shape)

        def call(self, inputs, training=False):
            return self.emb(inputs["ids"]) * ops.expand_dims(ops.cast(inputs["mask"], "float32"), -1)
    x = {"ids": np.arange(10, dtype=np.int32).reshape(2, 5), "mask": np.ones((2, 5), bool)}
    model = Masked()
    out = np.asarray(model(inputs=x, training=False))
    assert out.shape == (2, 5, 4)
    model.save(tmp_path / "m.keras")
    np.testing.assert_array_equal(keras.models.load_model(tmp_path / "m.keras").predict(x, verbose=0), out)
