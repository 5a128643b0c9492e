"""Gaps found by the tenth round of keras-io ports (handwriting recognition, MelGAN, ...),
each checked against what Keras 3.15 does with the same code."""

import numpy as np
import pytest

import pyggml as keras
from pyggml import layers, ops

RNG = np.random.default_rng(10)


def test_where_with_the_condition_alone_gives_the_indices_of_true_entries():
    # handwriting_recognition: ops.take(label, ops.where(ops.not_equal(label, pad))) strips padding
    label = np.array([3, 4, 99, 99, 7])
    idx = ops.where(ops.not_equal(label, 99))
    assert isinstance(idx, tuple) and len(idx) == 1
    np.testing.assert_array_equal(idx[0], [0, 1, 4])
    np.testing.assert_array_equal(ops.take(label, idx), [[3, 4, 7]])       # Keras's shape (1, 3)
    rows, cols = ops.where(np.array([[0, 2], [1, 0]]))
    np.testing.assert_array_equal(rows, [0, 1])
    np.testing.assert_array_equal(cols, [1, 0])
    assert ops.where(np.zeros(3))[0].shape == (0,)
    # the picking form is unchanged, and one of x1 or x2 alone is refused
    np.testing.assert_array_equal(ops.where(np.array([1, 0, 1]), 5, 6), [5, 6, 5])
    with pytest.raises(ValueError, match="x1 and x2, or neither"):
        ops.where(np.array([1, 0]), 1)


def test_where_alone_inside_a_model_on_computed_values_is_refused_clearly():
    class Strip(layers.Layer):
        def call(self, x):
            return ops.where(x)
    inp = keras.Input((3,))
    with pytest.raises(TypeError, match="nonzero: the number of non-zero entries depends on values"):
        Strip()(inp)


class _OwnStep(keras.Model):
    def __init__(self):
        super().__init__()
        self.d = layers.Dense(1)

    def call(self, x):
        return self.d(x)

    def train_step(self, batch):
        x, y = batch
        with keras.GradientTape() as tape:
            loss = ops.mean(ops.square(self(x) - y))
        grads = tape.gradient(loss, self.trainable_weights)
        self.optimizer.apply_gradients(zip(grads, self.trainable_weights))
        self.seen.append(np.asarray(x)[:, 0].copy())
        return {"loss": loss}


def test_custom_train_step_takes_steps_per_epoch_from_a_repeating_dataset():
    # melgan_spectrogram_inversion: Dataset(...).repeat() with fit(steps_per_epoch=...) and an own
    # train_step; the repeating dataset has no length, which the custom loop asked for
    x = np.arange(10, dtype="f4")[:, None] * np.ones((1, 3), "f4")
    y = x.sum(1, keepdims=True)
    ds = keras.data.Dataset.from_tensor_slices((x, y)).batch(4).repeat()
    m = _OwnStep()
    m.seen = []
    m.compile(optimizer="adam")
    h = m.fit(ds, epochs=3, steps_per_epoch=2, verbose=0)
    assert len(h.history["loss"]) == 3
    # six batches, going on through the repeats: rows 0-3, 4-7, 8-9, 0-3, 4-7, 8-9
    assert [list(b) for b in m.seen] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]] * 2


def test_a_tensors_dtype_in_a_call_is_kerass_name_and_is_taken_back():
    # swin_transformers's DropPath: keras.random.uniform(shape, dtype=x.dtype) in a layer's call
    seen = {}

    class DropPathLike(layers.Layer):
        def call(self, x):
            seen["dtype"] = x.dtype
            seen["std"] = keras.backend.standardize_dtype(x.dtype)
            seen["np"] = np.dtype(x.dtype)
            seen["int"] = ops.cast(x, "int32").dtype
            r = keras.random.uniform((ops.shape(x)[0], 1, 1), dtype=x.dtype)
            return x + ops.zeros_like(r) + ops.cast(ops.arange(4, dtype=x.dtype), x.dtype)

    inp = keras.Input((3, 4))
    m = keras.Model(inp, DropPathLike()(inp))
    out = m.predict(np.ones((2, 3, 4), "f4"), verbose=0)
    np.testing.assert_allclose(out, 1 + np.arange(4, dtype="f4") + np.zeros((2, 3, 4)))
    assert seen["dtype"] == "float32" and str(seen["dtype"]) == "float32" and repr(seen["dtype"]) == "'float32'"
    assert seen["std"] == "float32" and seen["np"] == np.float32 and seen["int"] == "int32"
    # ggml's short names still compare equal (pyggml.core's name before), both ways
    assert seen["dtype"] == "f32" and "f32" == seen["dtype"] and seen["dtype"] != "i32"
    assert seen["int"] == "i32" and seen["int"] != "float32"
    assert keras.backend.standardize_dtype("f32") == "float32" and keras.backend.standardize_dtype("i32") == "int32"
    import pickle
    back = pickle.loads(pickle.dumps(seen["dtype"]))
    assert type(back) is str and back == "float32"


class _CellWithDense(layers.Layer):
    # a cell whose Dense is made in __init__ and built on its first call (no build), as keras-io's
    # temporal latent bottleneck cell
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.state_size = 4
        self.output_size = 4
        self.dense = layers.Dense(4)

    def call(self, x, states):
        h = ops.tanh(self.dense(x) + states[0])
        return h, [h]


def test_an_rnn_cell_builds_its_layers_on_their_first_call():
    x = RNG.random((6, 3, 5)).astype("f4")
    inp = keras.Input((3, 5))
    cell = _CellWithDense()
    m = keras.Model(inp, layers.RNN(cell)(inp))
    assert cell.dense.built and len(m.trainable_weights) == 2
    assert m(x).shape == (6, 4)
    # the same as the loop written out with the Dense's weights
    k, b = cell.dense.get_weights()
    h = np.zeros((6, 4), "f4")
    for t in range(3):
        h = np.tanh(x[:, t] @ k + b + h)
    np.testing.assert_allclose(m.predict(x, verbose=0), h, rtol=1e-5, atol=1e-6)
    m.compile("adam", "mse")
    before = k.copy()
    m.fit(x, np.ones((6, 4), "f4"), epochs=2, verbose=0)
    assert not np.allclose(cell.dense.get_weights()[0], before)       # the cell's Dense trains
    seq = keras.Sequential([keras.Input((3, 5)), layers.RNN(_CellWithDense(), return_sequences=True)])
    assert seq.predict(x, verbose=0).shape == (6, 3, 4)


def test_losses_of_several_tapes_add_up_as_values():
    # image_captioning's train_step: batch_loss += loss, a new GradientTape per caption
    dense = layers.Dense(1, kernel_initializer="ones")
    x = np.ones((4, 3), "f4")
    total, losses = 0, []
    for _ in range(3):
        with keras.GradientTape() as tape:
            loss = ops.mean(dense(x) ** 2)
            total += loss                          # inside this tape: the others' losses are values
            losses.append(loss)
        grads = tape.gradient(loss, dense.trainable_variables)
        assert grads[0] is not None
    assert float(total) == pytest.approx(27.0)     # (3 * 1) ** 2 each
    # after their blocks: sums, differences, products and ops across tapes
    assert float(losses[0] + losses[1]) == pytest.approx(18.0)
    assert float(losses[2] - losses[0]) == pytest.approx(0.0)
    assert float(losses[0] * losses[1]) == pytest.approx(81.0)
    assert float(losses[0] / losses[1]) == pytest.approx(1.0)
    assert float(ops.add(losses[0], losses[2])) == pytest.approx(18.0)
    # the tape still differentiates its own loss, with another tape's value as a constant
    with keras.GradientTape() as tape:
        loss = ops.mean(dense(x) ** 2) * losses[0]
    g = tape.gradient(loss, dense.trainable_variables)
    np.testing.assert_allclose(np.asarray(g[0]).reshape(-1), 9.0 * 2 * 3 * np.ones(3), rtol=1e-6)


class _OwnGraphModel(keras.Model):
    # packaging_keras_models_for_wide_distribution: a Model subclass that makes its own graph
    def __init__(self, **kwargs):
        inputs = keras.Input((8,))
        outputs = layers.Dense(3, name="classification_head")(inputs)
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)


class _OwnGraphWithUnits(keras.Model):
    def __init__(self, units=3, **kwargs):
        inputs = keras.Input((4,))
        super().__init__(inputs, layers.Dense(units)(inputs), **kwargs)
        self.units = units

    def get_config(self):
        return {**super().get_config(), "units": self.units}


def test_a_model_subclass_that_makes_its_own_graph_loads_by_its_constructor(tmp_path):
    m = _OwnGraphModel(name="mnist")
    m.compile("adam", "mse")
    m.fit(np.ones((4, 8), "f4"), np.ones((4, 3), "f4"), epochs=1, verbose=0)
    m.save(tmp_path / "m.keras")
    back = keras.models.load_model(tmp_path / "m.keras", custom_objects={"_OwnGraphModel": _OwnGraphModel})
    assert type(back) is _OwnGraphModel and back.name == "mnist"
    x = RNG.random((2, 8)).astype("f4")
    np.testing.assert_array_equal(back.predict(x, verbose=0), m.predict(x, verbose=0))
    u = _OwnGraphWithUnits(units=5)
    u.save(tmp_path / "u.keras")
    back = keras.models.load_model(tmp_path / "u.keras", custom_objects={"_OwnGraphWithUnits": _OwnGraphWithUnits})
    assert back.units == 5 and back.output_shape == (None, 5)
    np.testing.assert_array_equal(back.get_weights()[0], u.get_weights()[0])


def _every_third_call_dropped():
    calls = iter(range(10 ** 6))
    return lambda a: next(calls) % 3 != 0            # 10 elements: 6 kept, then 7, 7, 6, ...


def test_repeat_of_a_filter_reads_a_new_pass_each_time():
    # rejection_resample and random filters keep another count each pass: tf.data's repeat reads
    # its input again each time (it was a fixed length: take(500) of repeat() could stop at 77)
    ds = keras.data.Dataset.from_tensor_slices(np.arange(10)).filter(_every_third_call_dropped())
    got = [int(v) for v in ds.repeat().take(27)]
    want = [1, 2, 4, 5, 7, 8] + [0, 1, 3, 4, 6, 7, 9] + [0, 2, 3, 5, 6, 8, 9] + [1, 2, 4, 5, 7, 8, 0][:7]
    assert got == want[:27]
    # repeat(count) keeps its first pass's length, so that zip and concatenate place it
    three = keras.data.Dataset.from_tensor_slices(np.arange(10)).filter(_every_third_call_dropped()).repeat(3)
    assert len(list(three)) == 3 * 6
    z = keras.data.Dataset.zip(ds.repeat(), keras.data.Dataset.range(7))
    assert len(list(z)) == 7
    # rejection_resample's endless stream never runs dry
    rng = np.random.default_rng(1)
    x = np.arange(160, dtype="f4")
    rr = keras.data.Dataset.from_tensor_slices(x).filter(lambda a: rng.random() < 0.5).repeat().take(500)
    assert len(list(rr)) == 500


def test_fit_on_a_filter_whose_passes_differ_in_length():
    # the payment-card fraud example: rejection_resample keeps another count of rows each pass
    rng = np.random.default_rng(3)
    x = rng.random((200, 4)).astype("f4")
    y = (rng.random(200) < 0.3).astype("f4")
    ds = keras.data.Dataset.from_tensor_slices((x, y)).filter(lambda a, b: rng.random() < 0.5).batch(8)
    m = keras.Sequential([keras.Input((4,)), layers.Dense(1, activation="sigmoid")])
    m.compile("adam", "binary_crossentropy")
    seen = []
    cb = keras.callbacks.LambdaCallback(on_train_batch_end=lambda b, logs: seen.append(b))
    # each epoch reads its own pass to its end (a length taken from another pass read past a
    # shorter one's end: IndexError)
    h = m.fit(ds, epochs=8, verbose=0, callbacks=[cb])
    assert len(h.history["loss"]) == 8
    per_epoch = [len(e) for e in np.split(seen, np.flatnonzero(np.diff(seen) <= 0) + 1)]
    assert len(per_epoch) == 8 and len(set(per_epoch)) > 1 and all(8 <= n <= 18 for n in per_epoch)
    ep = m.fit(ds.repeat(), epochs=3, steps_per_epoch=3, verbose=0)
    assert len(ep.history["loss"]) == 3


def test_a_custom_train_step_sees_each_epoch_as_a_new_pass():
    # a shuffled Dataset is shuffled anew each epoch and a PyDataset's on_epoch_end runs each
    # epoch, as Keras's epoch iterator does whatever the train_step (each epoch saw the first
    # epoch's order, and on_epoch_end never ran)
    x = np.arange(12, dtype="f4")[:, None]
    firsts = []

    class Seen(_OwnStep):
        def train_step(self, batch):
            firsts.append(tuple(np.asarray(batch[0])[:, 0]))
            return {"loss": 0.0}

    m = Seen()
    m.compile("adam")
    ds = keras.data.Dataset.from_tensor_slices((x, x[:, 0])).shuffle(12).batch(4)
    m.fit(ds, epochs=4, verbose=0)
    epochs = [firsts[k:k + 3] for k in range(0, 12, 3)]
    assert all(sorted(v for b in e for v in b) == list(range(12)) for e in epochs)
    assert len({tuple(e) for e in epochs}) > 1

    class Rows(keras.utils.PyDataset):
        def __init__(self):
            super().__init__()
            self.ends = 0

        def __len__(self):
            return 3

        def __getitem__(self, i):
            return x[4 * i:4 * i + 4], x[4 * i:4 * i + 4, 0]

        def on_epoch_end(self):
            self.ends += 1

    rows = Rows()
    m.fit(rows, epochs=3, verbose=0)
    assert rows.ends == 3


def test_a_model_waiting_for_its_shape_builds_from_a_torch_dataloader():
    # intro_to_keras_for_engineers: fit on a torch DataLoader, whose batches are lists [x, y]
    torch = pytest.importorskip("torch")
    x = RNG.random((64, 5)).astype("f4")
    y = RNG.integers(0, 3, 64).astype("uint8")
    dl = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.from_numpy(x), torch.from_numpy(y)),
                                     batch_size=16)

    class Holder(keras.Model):
        def __init__(self):
            super().__init__()
            self.base = keras.Sequential([layers.Dense(8, activation="relu")])
            self.head = layers.Dense(3, activation="softmax")

        def call(self, x):
            return self.head(self.base(x))

    for model in (Holder(), keras.Sequential([layers.Dense(3, activation="softmax")])):
        model.compile(loss="sparse_categorical_crossentropy", optimizer="adam")
        h = model.fit(dl, epochs=2, verbose=0)
        assert len(h.history["loss"]) == 2 and model.predict(x[:4], verbose=0).shape == (4, 3)


def test_get_build_config_after_a_build_by_hand():
    # customizing_saving_and_serialization: super().get_build_config() after layer.build(...)
    class WithInit(layers.Layer):
        def __init__(self, units=4, **kwargs):
            super().__init__(**kwargs)
            self.units = units

        def build(self, input_shape, layer_init):
            super().build(input_shape)
            self.w = self.add_weight(shape=(input_shape[-1], self.units), initializer=layer_init)

        def call(self, x):
            return ops.matmul(x, self.w)

    layer = WithInit(units=3)
    layer.build(input_shape=(8,), layer_init="ones")
    cfg = layer.get_build_config()
    assert cfg == {"shapes_dict": {"input_shape": [8], "layer_init": "ones"}}     # Keras's keys
    again = WithInit(units=3)
    again.build_from_config(cfg)
    assert again.built and again.w.shape == (8, 3)
    np.testing.assert_array_equal(again.w.numpy(), np.ones((8, 3)))
    d = layers.Dense(4)
    d.build((None, 8))
    assert d.get_build_config() == {"input_shape": [None, 8]}
    assert layers.Dense(4).get_build_config() is None
    called = layers.Dense(4)
    called(np.ones((2, 8), "f4"))
    assert called.get_build_config()["input_shape"][-1] == 8


def test_deserialize_keras_object_leaves_plain_names_as_keras_does():
    # customizing_saving_and_serialization: a compile config's "SGD" stays "SGD"
    from pyggml.utils import deserialize_keras_object
    for name in ("SGD", "accuracy", "mse"):
        assert deserialize_keras_object(name) == name
    assert deserialize_keras_object(["accuracy"]) == ["accuracy"]

    def my_fn(x):
        return x
    assert deserialize_keras_object("my_fn", custom_objects={"my_fn": my_fn}) is my_fn
    with keras.saving.custom_object_scope({"my_fn": my_fn}):
        assert deserialize_keras_object("my_fn") is my_fn
    assert deserialize_keras_object("relu", module_objects={"relu": my_fn}) is my_fn


def test_a_scalar_computed_in_a_tape_converts_to_a_0d_array():
    # writing_a_custom_training_loop: f"{ops.convert_to_numpy(loss):.4f}" inside the loop
    m = keras.Sequential([keras.Input((3,)), layers.Dense(2)])
    x, y = RNG.random((4, 3)).astype("f4"), np.zeros((4, 2), "f4")
    with keras.GradientTape() as tape:
        pred = m(x)
        loss = keras.losses.MeanSquaredError()(y, pred)
        l2 = ops.mean(ops.square(pred))
        total = loss + 0.5 * l2 - 1.0
        rows = ops.mean(pred, axis=-1)
        kept = ops.sum(pred, keepdims=True)
        one = ops.reshape(l2, (1,))
    grads = tape.gradient(total, m.trainable_weights)
    p = m.predict(x, verbose=0)
    for t, want in ((loss, (p ** 2).mean()), (l2, (p ** 2).mean()), (total, 1.5 * (p ** 2).mean() - 1.0)):
        v = ops.convert_to_numpy(t)
        assert v.shape == () and np.asarray(t).shape == () and t.numpy().shape == ()
        assert float(v) == pytest.approx(want, rel=1e-5)
        assert f"{v:.4f}" == f"{want:.4f}"
    # what is not a 0-d value keeps its shape
    assert ops.convert_to_numpy(rows).shape == (4,)
    assert ops.convert_to_numpy(kept).shape == (1, 1)
    assert ops.convert_to_numpy(one).shape == (1,)
    assert grads[0].shape == (2, 3)


def test_a_loss_whose_call_branches_on_a_flag_given_as_y_pred():
    # gaugan's DiscriminatorLoss: loss(pred, False) with ``1.0 if is_real else -1.0`` in call
    class FlagLoss(keras.losses.Loss):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.hinge = keras.losses.Hinge()

        def call(self, y, is_real):
            label = 1.0 if is_real else -1.0
            return self.hinge(label, y)

    loss = FlagLoss()
    pred = np.array([[0.5], [-0.3]], "f4")
    assert float(loss(pred, False)) == pytest.approx(1.1, rel=1e-6)       # Keras's values
    assert float(loss(pred, True)) == pytest.approx(0.9, rel=1e-6)
    w = keras.Variable(pred)
    with keras.GradientTape() as tape:
        lv = loss(w * 1.0, False)
    assert float(lv) == pytest.approx(1.1, rel=1e-6)
    g = tape.gradient(lv, [w])[0]
    np.testing.assert_allclose(np.asarray(g).reshape(-1), [0.5, 0.5], rtol=1e-6)
    # a flag computed in the graph still cannot be branched on in Python
    inp = keras.Input((1,))

    class Branch(layers.Layer):
        def call(self, x):
            return x if ops.mean(x) else -x
    with pytest.raises(TypeError, match="truth value of a graph tensor"):
        Branch()(inp)


def test_summary_line_length_sets_the_table_width():
    # 3d_multimodal_brain_tumor_segmentation: model.summary(line_length=100)
    m = keras.Sequential([keras.Input((4,)), layers.Dense(3)])
    for width in (60, 100):
        lines = []
        m.summary(line_length=width, print_fn=lines.append)
        table = "\n".join(lines).splitlines()
        assert len(table[1]) == width and table[1] == "-" * width
        assert table[4].startswith("dense (Dense)") and table[4].index("(None, 3)") == int(0.45 * width)
    narrow = []
    m.summary(line_length=10, print_fn=narrow.append)          # never narrower than what it holds
    assert "dense (Dense)  (None, 3)" in narrow[0]
    with pytest.raises(ValueError, match="line_length"):
        m.summary(line_length=0)
    with pytest.raises(ValueError, match="positions"):
        m.summary(line_length=80, positions=[0.5, 0.4, 1.0])


def test_values_of_other_tapes_keep_their_shapes_and_an_open_outer_tape_is_not_cut():
    # a review's cases: ops.stack of two tapes' losses, and a tape with its own graph opened inside
    # another's block, whose ops the outer one must record (a value there would cut the gradient)
    w = keras.Variable(np.array([2.0], "f4"))
    with keras.GradientTape() as t1:
        a = ops.mean(w * w)
    with keras.GradientTape() as t2:
        b = ops.mean(w * w)
        both = ops.stack([a, b])
    assert ops.convert_to_numpy(both).shape == (2,) and float(ops.sum(both)) == pytest.approx(8.0)
    with keras.GradientTape():
        c = ops.mean(w * w)
        assert ops.convert_to_numpy(ops.stack([c])).shape == (1,)    # Keras's stack of one 0-d value
    assert float(ops.add(a, b)) == pytest.approx(8.0)
    x = np.array([3.0], "f4")
    with keras.GradientTape() as outer:
        y = w * w
        inner = keras.GradientTape()
        inner.watch(x)
        with inner:
            z = y * x
        with pytest.raises(ValueError, match="another GradientTape"):
            outer.gradient(ops.sum(z + y), w)


def test_a_flag_of_one_element_array_is_not_folded_into_other_dtypes():
    one = layers.Reshape((1,))(np.array([[True]]))
    many = layers.Reshape((1,))(np.array([[True], [False]]))
    assert np.asarray(one).dtype == np.asarray(many).dtype


def test_a_custom_train_step_streams_an_endless_from_generator_dataset():
    # the GPT example: fit(Dataset.from_generator(endless), steps_per_epoch=...) on a model with its
    # own train_step read the generator for ever to count it (here it would raise after 500)
    made = [0]

    def endless():
        while True:
            made[0] += 1
            if made[0] > 500:
                raise RuntimeError("the endless generator was read to count it")
            yield RNG.random((4, 3)).astype("f4"), RNG.random((4, 1)).astype("f4")

    m = _OwnStep()
    m.seen = []
    m.compile(optimizer="adam", loss="mse")           # (the validation's test_step is Keras's)
    ds = keras.data.Dataset.from_generator(endless)
    h = m.fit(ds, epochs=2, steps_per_epoch=3, validation_data=keras.data.Dataset.from_generator(endless),
              validation_steps=2, verbose=0)
    assert len(h.history["loss"]) == 2 and len(m.seen) == 6 and made[0] < 100
