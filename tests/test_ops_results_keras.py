"""What Keras's eager results are, on pyggml.ops's arrays: scalars with .numpy(), Keras's dtypes,
initializers and activations giving tensors (arrays with .numpy())."""

import numpy as np
import pytest

import pyggml as keras
from pyggml import ops


# --- indexing down to one value ------------------------------------------------------------------

def test_index_to_a_scalar_gives_a_0d_array_with_numpy():
    a = ops.squeeze(keras.random.categorical(np.zeros((1, 2), "float32"), 1), axis=1)
    v = a[0]
    assert v.shape == () and v.numpy() in (0, 1)
    assert isinstance(v.numpy(), np.ndarray) and v.numpy().shape == ()
    first = ops.convert_to_tensor([1, 2])[0]
    assert first.numpy() == 1 and int(first) == 1 and float(first) == 1.0
    assert ["a", "b", "c"][ops.convert_to_tensor([1, 2])[1]] == "c"       # __index__
    assert ops.ones((2, 2))[0, 0].numpy() == np.float32(1.0)
    assert ops.ones((2, 2))[0, 0] == 1 and ops.ones((2, 2))[0, 0] < 2


def test_iteration_tolist_and_item_stay_numpys():
    a = ops.convert_to_tensor([1, 2, 3])
    values = list(a)
    assert [type(v) for v in values] == [np.int32] * 3 and values == [1, 2, 3]
    rows = list(ops.ones((2, 3)))
    assert len(rows) == 2 and rows[0].shape == (3,) and rows[0].numpy().tolist() == [1.0] * 3
    assert a.tolist() == [1, 2, 3] and type(a.tolist()[0]) is int
    assert a.item(1) == 2 and type(a.item(1)) is int
    assert a[1:].numpy().tolist() == [2, 3]


def test_float_and_int_take_any_array_of_one_value():
    w = keras.initializers.GlorotNormal(seed=42)(shape=(1, 1))
    assert isinstance(float(w), float) and float(w) == pytest.approx(float(np.asarray(w).reshape(())))
    assert int(ops.ones((1, 1, 1)) * 3) == 3
    with pytest.raises(TypeError):
        float(ops.ones((2,)))


# --- initializers -----------------------------------------------------------------------------------

def test_initializer_called_on_a_shape_gives_an_array_with_numpy():
    w = keras.initializers.HeNormal(seed=1)(shape=(3, 4))
    assert w.numpy().shape == (3, 4) and w.numpy().dtype == np.float32
    np.testing.assert_array_equal(keras.initializers.Ones()((2,)).numpy(), np.ones(2, np.float32))


def test_initializers_get_gives_instances():
    init = keras.initializers.get("he_normal")
    assert isinstance(init, keras.initializers.HeNormal)
    values = init((50, 40), dtype="float32").numpy()
    assert values.shape == (50, 40) and abs(values.std() - np.sqrt(2.0 / 50)) < 0.03
    assert isinstance(keras.initializers.get("GlorotUniform"), keras.initializers.GlorotUniform)
    assert isinstance(keras.initializers.get("zeros"), keras.initializers.Zeros)
    config = {"class_name": "RandomNormal", "config": {"stddev": 0.1}}
    assert keras.initializers.get(config).stddev == 0.1
    fn = lambda shape, dtype=None: np.zeros(shape)          # noqa: E731
    assert keras.initializers.get(fn) is fn
    with pytest.raises(ValueError):
        keras.initializers.get("no_such_initializer")


def test_dense_with_a_named_initializer_still_builds():
    layer = keras.layers.Dense(3, kernel_initializer="he_normal")
    y = layer(np.ones((2, 4), "float32"))
    assert np.asarray(y).shape == (2, 3) and layer.get_config()["kernel_initializer"] in ("he_normal",
                                                                                         {"module": "keras.initializers",
                                                                                          "class_name": "HeNormal",
                                                                                          "config": {"seed": None},
                                                                                          "registered_name": None})


# --- activations ------------------------------------------------------------------------------------

def test_activation_on_an_array_gives_an_array_with_numpy():
    logits = np.array([[1.0, 2.0, 3.0]], "float32")
    p = keras.activations.softmax(ops.convert_to_tensor(logits)).numpy()
    e = np.exp(logits - logits.max())
    np.testing.assert_allclose(p, e / e.sum(), rtol=1e-6)
    np.testing.assert_allclose(keras.activations.relu(np.array([-1.0, 2.0])).numpy(), [0.0, 2.0])


# --- dtypes -------------------------------------------------------------------------------------------

def test_convert_to_tensor_takes_kerass_default_dtypes():
    assert ops.convert_to_tensor([1, 2]).dtype == np.int32
    assert ops.convert_to_tensor([1.5, 2.0]).dtype == np.float32
    assert ops.convert_to_tensor(3).dtype == np.int32
    assert ops.convert_to_tensor(np.array([1, 2], np.int64)).dtype == np.int64       # arrays keep theirs
    assert ops.convert_to_tensor([True, False]).dtype == np.bool_


@pytest.mark.parametrize("dtype", ["int32", "bool"])
def test_moving_ops_keep_integer_and_bool_dtypes(dtype):
    t = np.array([[1, 0, 1], [0, 1, 1]]).astype(dtype)
    cases = {
        "pad": (ops.pad(t, [[0, 1], [1, 0]]), np.pad(t, [[0, 1], [1, 0]])),
        "tile": (ops.tile(t, [2, 1]), np.tile(t, [2, 1])),
        "repeat": (ops.repeat(t, 2), np.repeat(t, 2)),
        "repeat_axis": (ops.repeat(t, 2, axis=1), np.repeat(t, 2, axis=1)),
        "reshape": (ops.reshape(t, (3, 2)), t.reshape(3, 2)),
        "transpose": (ops.transpose(t), t.T),
        "concatenate": (ops.concatenate([t, t], axis=0), np.concatenate([t, t])),
        "stack": (ops.stack([t, t]), np.stack([t, t])),
        "expand_dims": (ops.expand_dims(t, 0), t[None]),
        "squeeze": (ops.squeeze(t[None]), t),
        "flip": (ops.flip(t, 1), t[:, ::-1]),
        "roll": (ops.roll(t, 1, 1), np.roll(t, 1, 1)),
        "take": (ops.take(t, [1, 0], axis=1), np.take(t, [1, 0], axis=1)),
        "where": (ops.where(t.astype(bool), t, t), t),
        "broadcast_to": (ops.broadcast_to(t[:1], (2, 3)), np.broadcast_to(t[:1], (2, 3))),
        "zeros_like": (ops.zeros_like(t), np.zeros_like(t)),
        "ones_like": (ops.ones_like(t), np.ones_like(t)),
        "slice": (ops.slice(t, [0, 1], [2, 2]), t[:, 1:3]),
    }
    for name, (got, want) in cases.items():
        assert got.dtype == np.dtype(dtype), name
        np.testing.assert_array_equal(got.numpy(), want, err_msg=name)
    parts = ops.split(t, 3, axis=1)
    assert [p.dtype for p in parts] == [np.dtype(dtype)] * 3


def test_large_integers_move_exactly():
    t = np.array([2 ** 24 + 1, 7], np.int32)
    np.testing.assert_array_equal(ops.tile(t, [2]).numpy(), np.tile(t, 2))
    np.testing.assert_array_equal(ops.pad(t, [[1, 0]]).numpy(), [0, 2 ** 24 + 1, 7])


def test_floats_still_move_as_float32():
    t = np.array([1.5, 2.5])
    assert ops.pad(t, [[0, 1]]).dtype == np.float32 and ops.tile(t, [2]).dtype == np.float32


def test_comparisons_on_arrays_give_bool_as_the_operators():
    a = ops.convert_to_tensor([1, 2, 3])
    for got, want in [(ops.not_equal(a, 2), a != 2), (ops.greater_equal(a, 2), a >= 2),
                      (ops.equal(a, 2), a == 2), (ops.less(a, 2), a < 2),
                      (ops.logical_and(a > 1, a < 3), (a > 1) & (a < 3)), (ops.logical_not(a > 1), ~(a > 1))]:
        assert got.dtype == np.bool_
        np.testing.assert_array_equal(got.numpy(), np.asarray(want))
    assert ops.cast(ops.equal(a, 2), "float32").numpy().tolist() == [0.0, 1.0, 0.0]
    assert float(ops.mean(ops.cast(ops.equal(a, 2), "float32"))) == pytest.approx(1 / 3)


def test_comparisons_in_a_graph_stay_float():
    seen = {}

    class Compare(keras.layers.Layer):
        def call(self, x):
            m = ops.greater(x, 0.0)
            seen["dtype"] = m.dtype
            return m

    out = Compare()(np.array([[-1.0, 2.0]], "float32"))
    assert seen["dtype"] == "f32"
    np.testing.assert_array_equal(np.asarray(out), [[0.0, 1.0]])
