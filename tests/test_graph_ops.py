"""pyggml.ops' graph helpers (numpy axes; constants and masks of the graph being
built) and Tensor arithmetic, against numpy; they run here through a layer
called on arrays (Keras's eager call), and train inside a model."""

import numpy as np
import pytest

import pyggml as pg
from pyggml import ops


class Fn(pg.layers.Layer):
    """A layer whose call is fn(*inputs)."""

    def __init__(self, fn, **kwargs):
        super().__init__(**kwargs)
        self.fn = fn

    def call(self, inputs, training=None):
        return self.fn(*inputs) if isinstance(inputs, list) else self.fn(inputs)


def run(fn, *arrays, training=False):
    return Fn(fn)(list(arrays) if len(arrays) > 1 else arrays[0], training=training)


R = np.random.default_rng(7)
A = R.normal(size=(2, 3, 4)).astype(np.float32)
B = R.normal(size=(2, 3, 4)).astype(np.float32)
ROW = R.normal(size=(4,)).astype(np.float32)


@pytest.mark.parametrize("axis", [None, 0, 1, 2, -1, -2])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions(axis, keepdims):
    got_s = run(lambda x: ops.reduce_sum(x, axis, keepdims), A)
    got_m = run(lambda x: ops.reduce_mean(x, axis, keepdims), A)
    want_s = A.sum(axis=axis, keepdims=keepdims)
    want_m = A.mean(axis=axis, keepdims=keepdims)
    np.testing.assert_allclose(got_s.reshape(np.shape(want_s)), want_s, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_m.reshape(np.shape(want_m)), want_m, rtol=1e-5, atol=1e-6)
    if axis is not None:
        assert got_s.shape == want_s.shape


@pytest.mark.parametrize("axis", [-1, 1, 0])
def test_concatenate(axis):
    got = run(lambda a, b: ops.concatenate([a, b], axis), A, B)
    np.testing.assert_allclose(got, np.concatenate([A, B], axis=axis), rtol=1e-6)


def test_axes_helpers():
    np.testing.assert_allclose(run(lambda x: ops.permute_axes(x, (2, 0, 1)), A), A.transpose(2, 0, 1))
    np.testing.assert_allclose(run(lambda x: ops.swapaxes(x, 0, 2), A), np.swapaxes(A, 0, 2))
    np.testing.assert_allclose(run(ops.flatten_rows, A), A.reshape(6, 4))
    np.testing.assert_allclose(run(ops.square, A), A * A, rtol=1e-6)


def test_constants_and_arange():
    c = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_allclose(run(lambda x: x + ops.constant(c), A), A + c, rtol=1e-6)
    got = run(lambda x: ops.arange(2, 9, 3), A)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, np.arange(2, 9, 3))
    with pytest.raises(RuntimeError, match="while a model builds"):
        ops.constant(c)


def test_tensor_arithmetic_broadcasts_like_numpy():
    cases = [
        (lambda a, b: a + b, lambda a, b: a + b, (A, B)),
        (lambda a, r: a + r, lambda a, r: a + r, (A, ROW)),
        (lambda a, r: r + a, lambda a, r: r + a, (A, ROW)),
        (lambda a, r: a - r, lambda a, r: a - r, (A, ROW)),
        (lambda a, r: r - a, lambda a, r: r - a, (A, ROW)),
        (lambda a, r: a * r, lambda a, r: a * r, (A, ROW)),
        (lambda a, b: a / (b * b + 1.0), lambda a, b: a / (b * b + 1.0), (A, B)),
        (lambda a: 2.0 - a * 3.0 + 1.5, lambda a: 2.0 - a * 3.0 + 1.5, (A,)),
        (lambda a: -a / 4.0, lambda a: -a / 4.0, (A,)),
    ]
    for fn, ref, arrays in cases:
        np.testing.assert_allclose(run(fn, *arrays), ref(*arrays), rtol=1e-5, atol=1e-6)
    w = R.normal(size=(4, 5)).astype(np.float32)
    np.testing.assert_allclose(run(lambda a, b: a @ b, A, np.broadcast_to(w, (2, 4, 5)).copy()), A @ w,
                               rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="broadcast"):
        run(lambda a, b: a + b, A, R.normal(size=(5,)).astype(np.float32))
    np.testing.assert_allclose(run(lambda a: 1.0 / (a * a + 1.0), A), 1.0 / (A * A + 1.0), rtol=1e-5)
    np.testing.assert_allclose(run(lambda a: np.ones(A.shape[-1], np.float32) - a, A), 1.0 - A, rtol=1e-6)


def test_dropout():
    x = np.ones((200, 50), dtype=np.float32)
    np.testing.assert_array_equal(run(lambda t: ops.dropout(t, 0.3), x), x)          # inference: as is
    y = run(lambda t: ops.dropout(t, 0.3), x, training=True)
    kept = y != 0
    assert 0.65 < kept.mean() < 0.75
    np.testing.assert_allclose(y[kept], 1.0 / 0.7, rtol=1e-6)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        run(lambda t: ops.dropout(t, 1.5), x, training=True)


@pytest.mark.parametrize("kind", ["matmul", "operators", "reduce", "concatenate"])
def test_a_layer_written_with_the_helpers_trains(kind):
    """A user layer whose weights meet the inputs through the helpers learns y = x W."""

    class Linear(pg.layers.Layer):
        def build(self, input_shape):
            self.w = self.add_weight("w", (input_shape[-1], 3))
            self.b = self.add_weight("b", (3,), "zeros")

        def call(self, x):
            if kind == "matmul":
                return ops.matmul(x, self.w) + self.b
            if kind == "operators":
                return x @ self.w + self.b
            if kind == "reduce":
                # sum over the inputs of x_i w_ij, through an explicit broadcast product
                prod = ops.reshape(x, (x.shape[0], x.shape[1], 1)) * ops.reshape(ops.as_tensor(self.w),
                                                                                (1,) + self.w.shape)
                return ops.reduce_sum(prod, axis=1) + self.b
            halves = ops.concatenate([x @ self.w, ops.reshape(ops.as_tensor(self.b), (1, 3)) * 0.0 + 0.0], axis=0)
            return ops.reshape(ops.view(halves, (x.shape[0], 3)), (x.shape[0], 3)) + self.b

    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 4)).astype(np.float32)
    y = x @ rng.normal(size=(4, 3)).astype(np.float32)
    m = pg.Sequential([Linear()], input_shape=4).compile(optimizer=pg.optimizers.Adam(0.05), loss="mse")
    h = m.fit(x, y, epochs=40, batch_size=16, verbose=0)
    assert h.history["loss"][-1] < 0.05 * h.history["loss"][0]
    m.free()


def test_shape_is_keras_s_ops_shape():
    assert ops.shape(A) == (2, 3, 4)
    assert ops.shape([[1, 2, 3]]) == (1, 3)
    got = run(lambda x: ops.arange(0, ops.shape(x)[-1]), A)          # keras-io's positions idiom
    np.testing.assert_array_equal(got, np.arange(4))
    seen = []
    run(lambda x: seen.append(ops.shape(x)) or x, A)
    assert seen == [(2, 3, 4)] and all(type(d) is int for d in seen[0])
