"""Keras 3 behaviours of pyggml.ops met porting keras-io examples: in-place arithmetic on op
results, random draws with ``.numpy()``, ``repeat`` with a list, ``one_hot`` of float ids, ops on
plain numbers inside a graph, integer ``minimum``/``maximum``/``clip`` and 0-d ``zeros``."""

import numpy as np
import pytest

import pyggml as pg
from pyggml import layers, ops


def _lambda_model(fn, shape, dtype="float32"):
    inp = pg.Input(shape=shape, dtype=dtype)
    return pg.Model(inp, layers.Lambda(fn)(inp))


# --- 1. in-place arithmetic keeps .numpy(); random draws have it -----------------------------------

def test_in_place_arithmetic_on_a_model_result_keeps_numpy():
    m = pg.Sequential([pg.Input(shape=(4,)), layers.Dense(3)])
    x = np.ones((2, 4), "float32")
    y = m(x)
    want = np.asarray(y).copy()
    y *= 255
    y += 1
    assert hasattr(y, "numpy")
    np.testing.assert_allclose(y.numpy(), want * 255 + 1, rtol=1e-6)
    assert type(y.numpy()) is np.ndarray


def test_in_place_arithmetic_on_an_op_result_keeps_numpy():
    y = ops.ones((2, 3))
    y -= 0.5
    y /= 2
    assert hasattr(y, "numpy")
    np.testing.assert_array_equal(y.numpy(), np.full((2, 3), 0.25, "float32"))
    assert y.dtype == np.float32


@pytest.mark.parametrize("draw", [
    lambda: pg.random.normal((2, 4), seed=pg.random.SeedGenerator(1)),
    lambda: pg.random.uniform((3,), seed=1),
    lambda: pg.random.truncated_normal((2, 2), seed=2),
    lambda: pg.random.randint((5,), 0, 4, seed=3),
    lambda: pg.random.dropout(np.ones((4, 4)), 0.5, seed=4),
    lambda: pg.random.shuffle(np.arange(6), seed=5),
    lambda: pg.random.categorical(np.zeros((2, 3)), 4, seed=6),
])
def test_random_draws_outside_a_graph_have_numpy(draw):
    z = draw()
    assert hasattr(z, "numpy")
    a = z.numpy()
    assert type(a) is np.ndarray and a.shape == z.shape and a.dtype == z.dtype


def test_random_normal_values_and_dtype():
    z = pg.random.normal(shape=(64, 8), seed=pg.random.SeedGenerator(0))
    assert z.shape == (64, 8) and z.dtype == np.float32
    assert abs(float(z.numpy().mean())) < 0.3


# --- 2. repeat with a list -----------------------------------------------------------------------

def test_repeat_with_a_one_element_list_as_numpy():
    x = np.eye(2, 3, dtype="float32")[:, :, None, None]
    got = ops.repeat(x, repeats=[4])
    np.testing.assert_array_equal(got, np.repeat(x, [4]))
    assert got.shape == (24,)
    np.testing.assert_array_equal(ops.repeat(x, np.array([2]), axis=1), np.repeat(x, [2], axis=1))


@pytest.mark.parametrize("repeats,axis", [([1, 0, 2], 1), ([2, 1], 0), ((3, 1, 1, 2, 1, 1), None)])
def test_repeat_with_a_count_per_entry_as_numpy(repeats, axis):
    x = np.arange(6, dtype="float32").reshape(2, 3)
    np.testing.assert_array_equal(ops.repeat(x, repeats, axis=axis), np.repeat(x, repeats, axis=axis))


def test_repeat_with_lists_in_a_graph():
    m = _lambda_model(lambda t: ops.concatenate([ops.repeat(t, [2], axis=1), ops.repeat(t, [1, 0, 3], axis=1)],
                                                axis=1), (3,))
    x = np.arange(6, dtype="float32").reshape(2, 3)
    want = np.concatenate([np.repeat(x, 2, axis=1), np.repeat(x, [1, 0, 3], axis=1)], axis=1)
    np.testing.assert_array_equal(m.predict(x, verbose=0), want)


@pytest.mark.parametrize("repeats,err,match", [
    ([1, 2], ValueError, "2 counts for an axis of length 3"),
    ([-1, 1, 1], ValueError, "not be negative"),
    ([0, 0, 0], ValueError, "empty"),
    ([0], ValueError, "positive"),
    ([1.5], ValueError, "list of ints"),
])
def test_repeat_refuses_bad_lists_clearly(repeats, err, match):
    with pytest.raises(err, match=match):
        ops.repeat(np.ones((2, 3)), repeats, axis=1)


# --- 3. one_hot of float indices -------------------------------------------------------------------

def test_one_hot_of_whole_floats_on_arrays():
    got = ops.one_hot(np.array([1.0, 2.0, 0.0, 5.0]), 3)
    np.testing.assert_array_equal(got, np.eye(3, dtype="float32")[[1, 2, 0]].tolist() + [[0, 0, 0]])
    assert got.shape == (4, 3)


def test_one_hot_of_a_float_input_in_a_graph():
    m = _lambda_model(lambda t: ops.one_hot(t, 4), (3,))
    got = m.predict(np.array([[0.0, 3.0, 2.0], [1.0, 7.0, -1.0]]), verbose=0)
    want = np.zeros((2, 3, 4), "float32")
    for (i, j), k in np.ndenumerate(np.array([[0, 3, 2], [1, 7, -1]])):
        if 0 <= k < 4:
            want[i, j, k] = 1
    np.testing.assert_array_equal(got, want)


def test_one_hot_of_a_model_with_an_int_input_called_on_a_float_input():
    """keras-io vq_vae's sampler: a float32 Input feeding a model whose first op is one_hot."""
    inp = pg.Input(shape=(3,), dtype="int32")
    inner = pg.Model(inp, ops.one_hot(inp, 4))
    outer_in = layers.Input(shape=(3,))
    sampler = pg.Model(outer_in, inner(outer_in, training=False))
    got = sampler.predict(np.array([[0.0, 2.0, 3.0]]), verbose=0)
    np.testing.assert_array_equal(got, np.eye(4, dtype="float32")[[[0, 2, 3]]])


def test_one_hot_refuses_fractional_floats_on_arrays():
    with pytest.raises(TypeError, match="integers"):
        ops.one_hot(np.array([1.5]), 3)


# --- 4. ops on plain numbers inside a graph give values ---------------------------------------------

def test_ops_on_numbers_in_a_layer_call_are_0d():
    seen = {}

    def embed(x):
        seen["log"] = ops.log(1.0)
        seen["exp"] = ops.exp(2.0)
        f = ops.exp(ops.linspace(ops.log(1.0), ops.log(1000.0), 16))
        seen["f"] = f
        s = 2.0 * np.pi * f
        return ops.concatenate([ops.sin(s * x), ops.cos(s * x)], axis=3)

    inp = pg.Input(shape=(1, 1, 1))
    out = layers.Lambda(embed)(inp)
    assert out.shape == (None, 1, 1, 32)
    assert np.shape(seen["log"]) == () and np.shape(seen["exp"]) == ()
    np.testing.assert_allclose(seen["exp"], np.exp(2.0), rtol=1e-6)
    assert np.shape(seen["f"]) == (16,)
    m = pg.Model(inp, out)
    x = np.full((2, 1, 1, 1), 0.25, "float32")
    freqs = np.exp(np.linspace(np.log(1.0), np.log(1000.0), 16))
    s = 2.0 * np.pi * freqs
    want = np.concatenate([np.sin(s * x), np.cos(s * x)], axis=3)
    np.testing.assert_allclose(m.predict(x, verbose=0), want, atol=2e-3)   # sin of ~1500 rad in float32


def test_graph_constants_still_work_next_to_host_values():
    seen = {}

    def fn(t):
        c = ops.convert_to_tensor(np.array([1.0, 2.0, 3.0], "float32"))
        seen["c"] = type(c).__name__
        z = ops.zeros(())
        seen["z"] = np.shape(z)
        k = ops.ones((3,))
        return t * ops.exp(1.0) + c + z + k + ops.cast(ops.shape(t)[1], "float32") + ops.eye(3) @ ops.ones((3,))

    m = _lambda_model(fn, (3,))
    x = np.arange(6, dtype="float32").reshape(2, 3)
    want = x * np.e + np.array([1.0, 2.0, 3.0]) + 1 + 3 + 1
    np.testing.assert_allclose(m.predict(x, verbose=0), want, rtol=1e-5)
    assert seen["c"] == "Tensor" and seen["z"] == ()


def test_expand_dims_of_a_number_as_numpy():
    assert ops.expand_dims(5, -1).shape == (1,) and ops.expand_dims(5, -1).dtype == np.int32
    assert ops.reshape(2.5, (1, 1)).shape == (1, 1)
    assert ops.transpose(np.float32(2)).shape == ()


# --- 5. minimum / maximum of ints ------------------------------------------------------------------------

def test_minimum_and_maximum_of_ints_are_ints():
    c = ops.minimum(20, 24)
    assert int(c) == 20 and np.asarray(c).dtype == np.int32 and np.shape(c) == ()
    d = ops.maximum(np.int64(3), 7)
    assert int(d) == 7 and np.asarray(d).dtype == np.int32
    e = ops.maximum(3, 7.5)
    assert float(e) == 7.5 and np.asarray(e).dtype == np.float32
    a = np.array([1, 5, 9], "int32")
    got = ops.minimum(a, 4)
    np.testing.assert_array_equal(got, np.minimum(a, 4))
    assert got.dtype == np.int32


def test_crop_images_takes_a_minimum_of_shapes():
    img = np.arange(20 * 24 * 3, dtype="uint8").reshape(20, 24, 3)
    h, w = ops.shape(img)[0], ops.shape(img)[1]
    c = ops.minimum(h, w)
    out = ops.image.crop_images(img, top_cropping=(h - c) // 2, left_cropping=(w - c) // 2,
                                target_height=c, target_width=c)
    assert out.shape == (20, 20, 3)
    np.testing.assert_array_equal(np.asarray(out), img[:, 2:22])


# --- 6. zeros / ones / full of shape () -------------------------------------------------------------------

@pytest.mark.parametrize("make,want", [
    (lambda: ops.zeros(()), np.zeros((), "float32")),
    (lambda: ops.zeros(shape=()), np.zeros((), "float32")),
    (lambda: ops.ones(shape=()), np.ones((), "float32")),
    (lambda: ops.full((), 3.5), np.full((), 3.5, "float32")),
    (lambda: ops.full((), 3, dtype="int32"), np.full((), 3, "int32")),
    (lambda: ops.zeros_like(2.0), np.zeros((), "float32")),
])
def test_zero_d_fills_outside_a_graph(make, want):
    got = make()
    assert got.shape == () and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_zero_d_loss_accumulator_in_a_graph():
    def fn(t):
        loss = ops.zeros(shape=())
        assert np.shape(loss) == ()
        for k in range(3):
            loss = loss + ops.sum(t, axis=-1, keepdims=True) * float(k)
        return loss

    m = _lambda_model(fn, (2,))
    x = np.array([[1.0, 2.0], [3.0, 4.0]], "float32")
    np.testing.assert_allclose(m.predict(x, verbose=0), x.sum(-1, keepdims=True) * 3.0)


# --- 7. clip / minimum / maximum keep int32 in a graph --------------------------------------------------------

def test_clip_of_int_ids_feeds_an_embedding():
    class L(layers.Layer):
        def __init__(self):
            super().__init__()
            self.emb = layers.Embedding(5, 3)

        def call(self, x):
            return self.emb(ops.clip(x, 0, 4))

    inp = layers.Input(shape=(2,), dtype="int32")
    lay = L()
    m = pg.Model(inp, lay(inp))
    got = m.predict(np.array([[1, 7], [-3, 4]]), verbose=0)
    table = lay.emb.embeddings.numpy()
    np.testing.assert_allclose(got, table[np.clip([[1, 7], [-3, 4]], 0, 4)])


@pytest.mark.parametrize("fn,ref", [
    (lambda t: ops.clip(t, 1, 3), lambda a: np.clip(a, 1, 3)),
    (lambda t: ops.clip(t, -2, 3), lambda a: np.clip(a, -2, 3)),
    (lambda t: ops.minimum(t, 2), lambda a: np.minimum(a, 2)),
    (lambda t: ops.maximum(t, 2), lambda a: np.maximum(a, 2)),
    (lambda t: ops.maximum(3, t), lambda a: np.maximum(3, a)),
])
def test_int_tensor_ops_with_python_ints_stay_int32_in_a_graph(fn, ref):
    m = _lambda_model(fn, (4,), dtype="int32")
    x = np.array([[0, 2, 9, -4]], "int32")
    got = m.predict(x, verbose=0)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, ref(x))


def test_clip_of_int_arrays_and_floats():
    got = ops.clip(np.array([0, 5, 9], "int32"), 1, 4)
    np.testing.assert_array_equal(got, [1, 4, 4])
    assert got.dtype == np.int32
    got = ops.clip(np.array([0.0, 5.0, 9.0]), 1, 4)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, [1, 4, 4])


def test_float_tensor_minimum_stays_float_in_a_graph():
    m = _lambda_model(lambda t: ops.minimum(t, 2), (3,))
    got = m.predict(np.array([[0.5, 2.5, 9.0]], "float32"), verbose=0)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, [[0.5, 2.0, 2.0]])
