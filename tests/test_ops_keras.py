"""pyggml.ops's Keras functions (numpy's axes, Keras's names and defaults):
forward against numpy in float64, gradients through a model against central
differences of the numpy reference, eager calls on arrays, the low-level ggml
forms kept for graph code outside a model, and bad arguments."""

import numpy as np
import pytest

import pyggml as pg
from pyggml import core, ops

from op_checks import check_op_in_model

RNG = np.random.default_rng(7)


def _softmax(z, axis=-1):
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _lse(z, axis):
    m = z.max(axis=axis, keepdims=True)
    return (m + np.log(np.exp(z - m).sum(axis=axis, keepdims=True))).squeeze(axis)


def _softplus(z):
    return np.log1p(np.exp(z))


CONST = RNG.normal(size=(4, 3))
IDX = np.array([2, 0, 0])

# id: (keras op on the (batch, 3, 4) tensor, float64 numpy reference, positive inputs only)
CASES = {
    "mean_axis": (lambda t: ops.mean(t, axis=1), lambda a: a.mean(axis=1), False),
    "mean_keepdims": (lambda t: ops.mean(t, axis=-1, keepdims=True), lambda a: a.mean(-1, keepdims=True), False),
    "sum_two_axes": (lambda t: ops.sum(t, axis=(1, 2), keepdims=True), lambda a: a.sum(axis=(1, 2), keepdims=True),
                     False),
    "mean_all_broadcast": (lambda t: ops.expand_dims(ops.sum(t, axis=(1, 2)), 1) + ops.mean(t),
                           lambda a: a.sum(axis=(1, 2))[:, None] + a.mean(), False),
    "max_last": (lambda t: ops.max(t, axis=-1), lambda a: a.max(-1), False),
    "min_middle": (lambda t: ops.min(t, axis=1), lambda a: a.min(1), False),
    "var": (lambda t: ops.var(t, axis=2), lambda a: a.var(2), False),
    "std": (lambda t: ops.std(t, axis=1, keepdims=True), lambda a: a.std(1, keepdims=True), False),
    "logsumexp": (lambda t: ops.logsumexp(t, axis=-1), lambda a: _lse(a, -1), False),
    "softmax_last": (lambda t: ops.softmax(t), lambda a: _softmax(a, -1), False),
    "transpose_softmax": (lambda t: ops.transpose(ops.softmax(ops.transpose(t, (0, 2, 1))), (0, 2, 1)), lambda a: _softmax(a, 1), False),
    "softmax_middle": (lambda t: ops.softmax(t, axis=1), lambda a: _softmax(a, 1), False),
    "log_softmax": (lambda t: ops.log_softmax(t), lambda a: np.log(_softmax(a, -1)), False),
    "transpose": (lambda t: ops.transpose(t, (0, 2, 1)), lambda a: a.transpose(0, 2, 1), False),
    "reshape": (lambda t: ops.reshape(t, (-1, 6, 2)), lambda a: a.reshape(-1, 6, 2), False),
    "expand_squeeze": (lambda t: ops.squeeze(ops.expand_dims(t, 2), 2) * 2.0, lambda a: a * 2, False),
    "stack": (lambda t: ops.stack([t, t * 3.0], axis=2), lambda a: np.stack([a, 3 * a], 2), False),
    "split_sections": (lambda t: ops.split(t, 3, axis=1)[2] * 2.0, lambda a: a[:, 2:3, :] * 2, False),
    "split_indices": (lambda t: ops.split(t, [1, 3], axis=2)[1], lambda a: a[:, :, 1:3], False),
    "tile": (lambda t: ops.tile(t, (1, 2, 1)), lambda a: np.tile(a, (1, 2, 1)), False),
    "repeat": (lambda t: ops.repeat(t, 2, axis=2), lambda a: np.repeat(a, 2, axis=2), False),
    "broadcast_to": (lambda t: ops.broadcast_to(ops.sum(t, axis=2, keepdims=True), (ops.shape(t)[0], 3, 5)),
                     lambda a: np.broadcast_to(a.sum(2, keepdims=True), (2, 3, 5)), False),
    "take": (lambda t: ops.take(t, IDX, axis=2), lambda a: np.take(a, IDX, axis=2), False),
    "take_negative": (lambda t: ops.take(t, np.array([-1, 1]), axis=1), lambda a: a[:, [-1, 1]], False),
    "maximum": (lambda t: ops.maximum(t, 0.2), lambda a: np.maximum(a, 0.2), False),
    "minimum_tensors": (lambda t: ops.minimum(t, t * t), lambda a: np.minimum(a, a * a), False),
    "clip": (lambda t: ops.clip(t, -0.5, 0.4), lambda a: np.clip(a, -0.5, 0.4), False),
    "where": (lambda t: ops.where(ops.greater(t, 0.1), t, t * t), lambda a: np.where(a > 0.1, a, a * a), False),
    "power_int": (lambda t: ops.power(t, 3), lambda a: a ** 3, False),
    "power_float": (lambda t: ops.power(t, 2.5), lambda a: a ** 2.5, True),
    "cumsum": (lambda t: ops.cumsum(t, axis=1), lambda a: np.cumsum(a, 1), False),
    "norm": (lambda t: ops.norm(t, axis=-1), lambda a: np.linalg.norm(a, axis=-1), False),
    "norm_l1": (lambda t: ops.norm(t, ord=1, axis=1), lambda a: np.abs(a).sum(1), False),
    "dot": (lambda t: ops.dot(t, CONST), lambda a: a @ CONST, False),
    "leaky_relu": (lambda t: ops.leaky_relu(t), lambda a: np.where(a > 0, a, 0.2 * a), False),
    "relu6": (lambda t: ops.relu6(t * 8.0), lambda a: np.clip(8 * a, 0, 6), False),
    "hard_sigmoid": (lambda t: ops.hard_sigmoid(t * 4.0), lambda a: np.clip(4 * a + 3, 0, 6) / 6, False),
    "softsign": (lambda t: ops.softsign(t), lambda a: a / (1 + np.abs(a)), False),
    "selu": (lambda t: ops.selu(t), lambda a: 1.0507009873554805 * np.where(a > 0, a, 1.6732632423543772 *
                                                                             np.expm1(np.minimum(a, 0))), False),
    "mish": (lambda t: ops.mish(t), lambda a: a * np.tanh(_softplus(a)), False),
    "log_sigmoid": (lambda t: ops.log_sigmoid(t), lambda a: -_softplus(-a), False),
    "log1p": (lambda t: ops.log1p(t), np.log1p, True),
    "sinh_cosh": (lambda t: ops.sinh(t) + ops.cosh(t), lambda a: np.sinh(a) + np.cosh(a), False),
    "reciprocal_rsqrt": (lambda t: ops.reciprocal(t) + ops.rsqrt(t), lambda a: 1 / a + a ** -0.5, True),
    "getitem_last_step": (lambda t: t[:, -1], lambda a: a[:, -1], False),
    "getitem_strided": (lambda t: t[:, ::2, 1:3] * 2.0, lambda a: a[:, ::2, 1:3] * 2, False),
    "getitem_newaxis": (lambda t: t[:, None, 1], lambda a: a[:, None, 1], False),
    "getitem_last_axis_step": (lambda t: t[..., ::3], lambda a: a[..., ::3], False),
    "getitem_overlapping": (lambda t: t[:, 1:] * t[:, :-1], lambda a: a[:, 1:] * a[:, :-1], False),
    "pow_abs": (lambda t: abs(t) ** 3, lambda a: np.abs(a) ** 3, False),
    "operators_with_arrays": (lambda t: (t - np.full((4,), 0.5, np.float32)) * np.arange(4.0) + 2.0 / (t * t + 1.0),
                              lambda a: (a - 0.5) * np.arange(4.0) + 2.0 / (a * a + 1.0), False),
    "broadcast_divisor": (lambda t: t / (ops.sum(t * t, axis=-1, keepdims=True) + 1.0),
                          lambda a: a / ((a * a).sum(-1, keepdims=True) + 1.0), False),
    "comparison_operators": (lambda t: t * (t >= 0.1) + t * t * (t < 0.1), lambda a: np.where(a >= 0.1, a, a * a),
                             False),
    "getitem_op": (lambda t: ops.getitem(t, (slice(None), 1)), lambda a: a[:, 1], False),
    "get_item_op": (lambda t: ops.get_item(t, (slice(None), slice(0, 2))), lambda a: a[:, 0:2], False),
    "arith": (lambda t: ops.divide(ops.subtract(ops.multiply(t, 3.0), 1.0), ops.add(t, 2.0)),
              lambda a: (3 * a - 1) / (a + 2), True),
}


def _inputs(positive):
    x = RNG.uniform(0.5, 1.5, size=(2, 3, 4)) if positive else RNG.normal(size=(2, 3, 4))
    w = RNG.uniform(0.6, 1.4, size=(3, 4))
    return x, w


@pytest.mark.parametrize("name", sorted(CASES))
def test_forward_and_gradient_in_a_model(name):
    fn, ref, positive = CASES[name]
    x, w = _inputs(positive)
    check_op_in_model(fn, ref, x, w, RNG)


def test_eager_calls_on_arrays_match_numpy():
    a = RNG.normal(size=(3, 4))
    np.testing.assert_allclose(ops.mean(a), a.mean(), rtol=1e-6)
    np.testing.assert_allclose(ops.max(a, axis=0), a.max(0), rtol=1e-6)
    np.testing.assert_array_equal(ops.argmax(a, axis=1), a.argmax(1))
    np.testing.assert_array_equal(ops.argmin(a), np.atleast_1d(a.argmin()))
    np.testing.assert_array_equal(ops.argmax(a, axis=0, keepdims=True), a.argmax(0)[None])
    np.testing.assert_array_equal(ops.transpose(a), a.T.astype(np.float32))
    np.testing.assert_array_equal(ops.one_hot(np.array([0, 2, 5, -1]), 3),
                                  [[1, 0, 0], [0, 0, 1], [0, 0, 0], [0, 0, 0]])
    np.testing.assert_array_equal(ops.equal(np.array([1.0, 2.0, 3.0]), 2.0), [0, 1, 0])
    np.testing.assert_array_equal(ops.greater_equal(np.array([1.0, 2.0, 3.0]), 2.0), [0, 1, 1])
    np.testing.assert_array_equal(ops.logical_and(np.array([1.0, 0.0, 1.0]), np.array([1.0, 1.0, 0.0])), [1, 0, 0])
    np.testing.assert_array_equal(ops.power(a, 2), (a.astype(np.float32) ** 2))      # exact: products
    np.testing.assert_array_equal(ops.zeros((2, 3)), np.zeros((2, 3)))
    np.testing.assert_array_equal(ops.ones_like(a), np.ones((3, 4)))
    assert [p.shape for p in ops.split(a, [1, 3], axis=1)] == [(3, 1), (3, 2), (3, 1)]
    np.testing.assert_allclose(ops.take(a, np.array([[0, 1], [2, 2]])), np.take(a, [[0, 1], [2, 2]]), rtol=1e-6)
    np.testing.assert_allclose(ops.convert_to_tensor([1, 2]), [1, 2])
    v = pg.Variable("v", (2, 2), "ones")
    np.testing.assert_allclose(ops.sum(v, axis=0), [2.0, 2.0])


def test_the_rest_eagerly():
    a = np.array([[-1.5, 0.0, 2.0], [3.0, -0.25, 1.0]])
    np.testing.assert_array_equal(ops.eye(3, 4, k=1), np.eye(3, 4, k=1))
    np.testing.assert_array_equal(ops.full((2, 2), 7.0), np.full((2, 2), 7.0))
    np.testing.assert_array_equal(ops.full_like(a, 2.0), np.full(a.shape, 2.0))
    np.testing.assert_array_equal(ops.zeros_like(a), np.zeros(a.shape))
    np.testing.assert_array_equal(ops.ones((3,)), np.ones(3))
    np.testing.assert_allclose(ops.hard_swish(a), a * np.clip(a + 3, 0, 6) / 6, rtol=1e-6)
    np.testing.assert_allclose(ops.swish(a), a / (1 + np.exp(-a)), rtol=1e-6)
    np.testing.assert_array_equal(ops.less(a, 1.0), a < 1.0)
    np.testing.assert_array_equal(ops.less_equal(a, 1.0), a <= 1.0)
    np.testing.assert_array_equal(ops.not_equal(a, 1.0), a != 1.0)
    np.testing.assert_array_equal(ops.logical_or(a > 0, a < -1), (a > 0) | (a < -1))
    np.testing.assert_array_equal(ops.logical_not(a > 0), a <= 0)
    np.testing.assert_array_equal(ops.negative(a), -a.astype(np.float32))
    np.testing.assert_array_equal(ops.sign(a), np.sign(a))
    np.testing.assert_array_equal(ops.true_divide(a, 2.0), a.astype(np.float32) / 2)
    m, v = ops.moments(a, axes=[1])
    np.testing.assert_allclose(m, a.mean(1), rtol=1e-6)
    np.testing.assert_allclose(v, a.var(1), rtol=1e-5)
    np.testing.assert_allclose(ops.concatenate([a, a], axis=0), np.concatenate([a, a]), rtol=0)
    np.testing.assert_array_equal(ops.concatenate([np.arange(3), np.ones(2)]), [0, 1, 2, 1, 1])   # promoted
    np.testing.assert_array_equal(ops.stack([np.arange(2), np.ones(2)]), [[0, 1], [1, 1]])


def test_every_keras_op_is_tested_here():
    import pathlib
    import pyggml._ops_numpy as keras_ops
    text = pathlib.Path(__file__).read_text()
    missing = [n for n in keras_ops.__all__ if f"ops.{n}(" not in text]
    assert missing == []


def test_low_level_graph_code_keeps_ggml_s_forms():
    """Outside a model's graph, on Tensors (or with ctx=), the shared names are ggml's ops."""
    backend = core.Backend("cpu")
    a = RNG.normal(size=(3, 4)).astype(np.float32)
    lctx = core.Context(n_tensors=4)
    t = lctx.new_tensor(a.shape)
    buf = core.BackendBuffer(lctx, backend)
    t.set(a)
    cctx = core.Context(n_tensors=32, graph_size=64)
    outs = [ops.mean(t, ctx=cctx), ops.cont(ops.transpose(t, ctx=cctx), ctx=cctx), ops.norm(t, 1e-5, ctx=cctx)]
    with cctx.as_default():
        outs.append(ops.argmax(t))
    g = core.Graph(cctx, 64)
    for o in outs:
        g.build_forward(o)
    sched = core.Scheduler([backend], graph_size=128)
    sched.compute(g)
    np.testing.assert_allclose(outs[0].numpy(), a.mean(-1, keepdims=True), rtol=1e-5)     # a row mean
    np.testing.assert_allclose(outs[1].numpy(), a.T)
    z = (a - a.mean(-1, keepdims=True)) / np.sqrt(a.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(outs[2].numpy(), z, rtol=1e-4, atol=1e-5)                 # ggml's LayerNorm
    np.testing.assert_array_equal(outs[3].numpy(), a.argmax(-1))
    for o in (sched, g, cctx, buf, lctx, backend):
        o.free()


def _index(fn):
    from pyggml import _eager
    return _eager.evaluate(fn, [np.zeros((2, 3), np.float32)])


@pytest.mark.parametrize("call, error, match", [
    (lambda: ops.mean(np.zeros((2, 3)), axis=2), ValueError, "out of range"),
    (lambda: ops.sum(np.zeros((2, 3)), axis=(0, 0)), ValueError, "repeated"),
    (lambda: ops.reshape(np.zeros((2, 3)), (4, -1)), ValueError, "cannot reshape"),
    (lambda: ops.reshape(np.zeros((2, 3)), (-1, -1)), ValueError, "at most one -1"),
    (lambda: ops.transpose(np.zeros((2, 3)), (0, 0)), ValueError, "permutation"),
    (lambda: ops.squeeze(np.zeros((2, 3)), 0), ValueError, "not of length 1"),
    (lambda: ops.split(np.zeros((2, 3)), 2, axis=1), ValueError, "equal sections"),
    (lambda: ops.stack([np.zeros(2), np.zeros(3)]), ValueError, "different shapes"),
    (lambda: ops.broadcast_to(np.zeros((2, 3)), (3, 3)), ValueError, "cannot broadcast"),
    (lambda: ops.take(np.zeros((2, 3)), np.array([3]), axis=1), IndexError, "outside"),
    (lambda: ops.take(np.zeros((2, 3)), np.array([0.5])), TypeError, "integers"),
    (lambda: ops.one_hot(np.array([1.5]), 3), TypeError, "integers"),
    (lambda: ops.clip(np.zeros(3), 1.0, 0.0), ValueError, "above"),
    (lambda: ops.norm(np.zeros(3), ord="nuc"), ValueError, "ord"),
    (lambda: ops.where(np.zeros(3), 1.0), ValueError, "both"),
    (lambda: ops.tile(np.zeros(3), 0), ValueError, "positive"),
    (lambda: ops.mean(np.array(["a", "b"])), TypeError, "real numbers"),
    (lambda: _index(lambda t: t[np.array([0, 1])]), TypeError, "ops.take"),
    (lambda: _index(lambda t: t[:, 5]), IndexError, "out of bounds"),
    (lambda: _index(lambda t: t[0, 0, 0]), IndexError, "too many indices"),
    (lambda: _index(lambda t: t[..., ...]), IndexError, "single ellipsis"),
    (lambda: _index(lambda t: t[:, 2:2]), IndexError, "empty"),
    (lambda: _index(lambda t: t["a"]), TypeError, "ints, slices"),
])
def test_bad_arguments_are_clear_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_cast_to_keras_dtypes_on_arrays_and_in_a_graph():
    a = np.array([[1.7, 0.0, -2.5], [0.25, -0.0, 3.0]])
    np.testing.assert_array_equal(ops.cast(a, "bool"), a != 0)
    assert ops.cast(a, "bool").dtype == np.bool_
    np.testing.assert_array_equal(ops.cast(a, "int32"), np.trunc(a).astype(np.int32))
    assert ops.cast(a, "float16").dtype == np.float16
    # in a graph: a bool is a float 0/1 tensor, an int truncates toward zero
    for dtype, want in (("bool", (a != 0).astype(np.float32)), ("int32", np.trunc(a)), ("float32", a)):
        m = pg.Sequential([pg.Input((3,)), pg.layers.Lambda(lambda x, d=dtype: ops.cast(ops.cast(x, d), "float32"))])
        m.compile(loss="mse")
        np.testing.assert_allclose(m.predict(a, verbose=0), want, rtol=1e-6)
        m.free()
    with pytest.raises(TypeError, match="dtype"):
        ops.cast(a, "string")
    with pytest.raises(TypeError, match="unknown dtype"):
        ops.cast(a, "no such type")


def test_top_k_on_arrays_largest_first_and_in_a_graph():
    a = np.array([[0.1, 3.0, -1.0, 3.0, 2.0], [5.0, 4.0, 3.0, 2.0, 1.0]])
    values, indices = ops.top_k(a, k=3, sorted=True)
    np.testing.assert_array_equal(values, [[3.0, 3.0, 2.0], [5.0, 4.0, 3.0]])
    np.testing.assert_array_equal(indices, [[1, 3, 4], [0, 1, 2]])     # ties: the lower index first
    assert indices.dtype == np.int32
    with pytest.raises(ValueError, match=r"k must be an int in \[1, 5\]"):
        ops.top_k(a, k=6)
    m = pg.Sequential([pg.Input((5,)), pg.layers.Lambda(lambda x: ops.top_k(x, 2)[0])])
    m.compile(loss="mse")
    np.testing.assert_array_equal(m.predict(a, verbose=0), [[3.0, 3.0], [5.0, 4.0]])


def test_layout_ops_move_strings_as_numpy_does():
    """A text pipeline's map function calls them on a batch of strings (Keras's TensorFlow backend)."""
    t = np.array(["a b", "c", "d e f"])
    np.testing.assert_array_equal(ops.expand_dims(t, -1), t[:, None])
    np.testing.assert_array_equal(ops.squeeze(t[:, None], axis=-1), t)
    np.testing.assert_array_equal(ops.reshape(t, (3, 1)), t.reshape(3, 1))
    np.testing.assert_array_equal(ops.concatenate([t, t], axis=0), np.concatenate([t, t]))
    np.testing.assert_array_equal(ops.stack([t, t], axis=1), np.stack([t, t], 1))
    np.testing.assert_array_equal(ops.tile(t, 2), np.tile(t, 2))
    np.testing.assert_array_equal(ops.take(t, [2, 0]), t[[2, 0]])
    with pytest.raises(TypeError, match="real numbers"):
        ops.sum(t)                                    # arithmetic on strings stays refused


def test_shape_arithmetic_on_constants_computes_on_the_host_in_a_graph():
    """keras-io's causal masks: aranges compared, cast, reshaped, and tiled to the batch by a
    repeats tensor built from ops.shape; all known when the graph is built."""
    def causal(x):
        b, t = ops.shape(x)[0], ops.shape(x)[1]
        i = ops.expand_dims(ops.arange(t), -1)
        m = ops.cast(ops.greater_equal(i, ops.add(ops.subtract(ops.arange(t), t), t)), "int32")
        m = ops.reshape(m, [1, t, t])
        mult = ops.concatenate([ops.expand_dims(b, -1), ops.convert_to_tensor([1, 1])], 0)
        tiled = ops.tile(m, mult)                   # refused unless mult is known on the host
        return ops.multiply(tiled, ops.sum(x, axis=-1, keepdims=True))

    m = pg.Sequential([pg.Input((3, 2)), pg.layers.Lambda(causal)]).compile(loss="mse")
    x = RNG.normal(size=(4, 3, 2))
    want = np.tril(np.ones((3, 3)))[None] * x.sum(-1, keepdims=True)
    np.testing.assert_allclose(m.predict(x, batch_size=4, verbose=0), want, rtol=1e-5)
    np.testing.assert_allclose(m.predict(x, batch_size=3, verbose=0), want, rtol=1e-5)   # batches of 3 and 1
    m.free()


def test_tile_refuses_repeats_computed_in_the_graph():
    def bad(x):
        return ops.tile(x, ops.cast(ops.sum(x), "int32"))
    m = pg.Sequential([pg.Input((2,)), pg.layers.Lambda(bad)])
    with pytest.raises(ValueError, match="repeats must be known"):
        m.compile(loss="mse")
        m.predict(np.ones((1, 2)), verbose=0)


def test_integer_tensors_compute_as_float_and_masks_build_from_aranges():
    """keras-io's miniature GPT builds its causal mask from integer aranges with - + >=."""
    from pyggml import _eager

    def causal(t):
        i = ops.arange(4)[:, None]
        j = ops.arange(4)
        m = i >= j - 4 + 4
        return t * ops.cast(m, "float32")
    got = _eager.evaluate(causal, [np.ones((4, 4), np.float32)])
    np.testing.assert_array_equal(got, np.tril(np.ones((4, 4))))


def test_indexed_integer_inputs_feed_embeddings():
    """keras-io's collaborative filtering: ``self.user_embedding(inputs[:, 0])`` in a model's call."""
    class Net(pg.Model):
        def __init__(self):
            super().__init__()
            self.users = pg.layers.Embedding(5, 2)
            self.items = pg.layers.Embedding(7, 2)

        def call(self, inputs):
            return ops.sum(self.users(inputs[:, 0]) * self.items(inputs[:, 1]), axis=-1, keepdims=True)
    net = Net()
    x = np.array([[4, 6], [0, 1], [2, 0]])
    got = net.predict(x, verbose=0)
    w_users = next(iter(net.users.get_weights().values()))
    w_items = next(iter(net.items.get_weights().values()))
    np.testing.assert_allclose(got[:, 0], (w_users[x[:, 0]] * w_items[x[:, 1]]).sum(-1), rtol=1e-5)


def test_functional_nodes_take_indexing(tmp_path):
    inp = pg.Input((3, 4))
    out = pg.layers.Dense(2)(inp[:, -1, 1:])
    m = pg.Model(inp, out)
    x = RNG.normal(size=(2, 3, 4)).astype(np.float32)
    w = m.layers[-1].get_weights()
    np.testing.assert_allclose(m.predict(x, verbose=0), x[:, -1, 1:] @ w[0] + w[1], rtol=1e-5, atol=1e-6)
    m.compile(loss="mse")
    m.save(tmp_path / "m.keras")
    np.testing.assert_array_equal(pg.load_model(tmp_path / "m.keras").predict(x, verbose=0), m.predict(x, verbose=0))


def test_stop_gradient_passes_the_value_and_no_gradient():
    """o = z + stop_gradient(z) * z with z = x * w: the value is z + z^2, the gradient
    through o is (1 + z) dz (not 1 + 2z); ggml/patches/0037's flag."""
    from op_checks import OpLayer
    x = RNG.normal(size=(5, 4))
    y = RNG.normal(size=(5, 4))
    w = RNG.uniform(0.5, 1.5, size=(4,))
    m = pg.Sequential([pg.Input((4,)), OpLayer(lambda z: z + ops.stop_gradient(z) * z)])
    m.compile(loss="mse", optimizer="sgd")
    m.set_weights({k: w.astype(np.float32) for k in m.get_weights()})
    z = x * w
    np.testing.assert_allclose(m.predict(x.astype(np.float32), verbose=0), z + z * z, rtol=1e-5, atol=1e-6)
    (g,) = m.gradients(x.astype(np.float32), y.astype(np.float32)).values()
    d_o = 2 * (z + z * z - y) / y.size
    np.testing.assert_allclose(g, (d_o * (1 + z) * x).sum(0), rtol=1e-4, atol=1e-6)
    assert not np.allclose(g, (d_o * (1 + 2 * z) * x).sum(0), rtol=1e-2)
    # a model whose only path to the weight is stopped gets a zero gradient
    m2 = pg.Sequential([pg.Input((4,)), OpLayer(lambda z: ops.stop_gradient(z) * 2.0)])
    m2.compile(loss="mse", optimizer="sgd")
    (g2,) = m2.gradients(x.astype(np.float32), y.astype(np.float32)).values()
    np.testing.assert_array_equal(g2, 0.0)
    np.testing.assert_array_equal(ops.stop_gradient(np.arange(3.0)), [0.0, 1.0, 2.0])
    with pytest.raises(TypeError, match="stop_gradient"):
        ops.stop_gradient(np.array(["a"]))


def test_functional_nodes_of_one_number_per_sample(tmp_path):
    """inp[:, 0] and ops.sum over the features are (batch,) nodes, as in Keras: they combine,
    train, save and load; a Dense on one is refused with the reason."""
    inp = pg.Input((2,))
    first = inp[:, 0]
    assert first.shape == (None,)
    out = ops.expand_dims(first, -1) * pg.layers.Dense(1, kernel_initializer="ones", name="d")(inp)
    m = pg.Model(inp, [out, ops.sum(inp, axis=-1)])
    x = RNG.normal(size=(3, 2)).astype(np.float32)
    got, total = m.predict(x, verbose=0)
    np.testing.assert_allclose(got[:, 0], x[:, 0] * x.sum(1), rtol=1e-5)
    np.testing.assert_allclose(total, x.sum(1), rtol=1e-6)
    assert total.shape == (3,)
    lines = []
    m.summary(print_fn=lines.append)
    assert any("(None,)" in ln for ln in lines)
    m.compile(loss="mse", optimizer="adam")
    m.fit(x, [np.ones((3, 1), np.float32), np.ones(3, np.float32)], epochs=2, verbose=0)
    m.save(str(tmp_path / "m.gguf"))
    np.testing.assert_allclose(pg.models.load_model(str(tmp_path / "m.gguf")).predict(x, verbose=0)[0],
                               m.predict(x, verbose=0)[0], rtol=1e-6)
    with pytest.raises(ValueError, match="last dimension"):
        pg.layers.Dense(3)(first)


@pytest.mark.parametrize("fn, ref", [
    (lambda t: ops.norm(t, axis=-1), lambda a: np.linalg.norm(a, axis=-1)),
    (lambda t: ops.std(t, axis=-1), lambda a: a.std(-1)),
    (lambda t: ops.power(abs(t), 2.5), lambda a: np.abs(a) ** 2.5),
], ids=["norm", "std", "power"])
def test_gradients_at_zero_are_finite(fn, ref):
    """A norm, std or power of zeros (a padded row) has value 0 and gradient 0, not NaN,
    and the other rows keep theirs."""
    from op_checks import OpLayer
    x = RNG.normal(size=(3, 4)).astype(np.float32)
    x[0] = 0.0
    m = pg.Sequential([pg.Input((4,)), OpLayer(fn)])
    m.compile(loss="mse", optimizer="sgd")
    got = m.predict(x, verbose=0)
    np.testing.assert_allclose(got, ref(x.astype(np.float64)), rtol=1e-5, atol=1e-6)
    assert np.all(got[0] == 0)
    g_all = next(iter(m.gradients(x, np.ones_like(got)).values()))
    g_rest = next(iter(m.gradients(x[1:], np.ones_like(got[1:])).values()))
    assert np.isfinite(g_all).all()
    # the zero row adds nothing: the mean over 3 rows is 2/3 of the mean over the other 2
    np.testing.assert_allclose(g_all, g_rest * 2 / 3, rtol=1e-4, atol=1e-6)


def test_a_loss_that_reaches_no_weight_is_a_clear_error():
    """A model whose output is a constant (ops.zeros_like of its input), or reaches its
    weight only through stop_gradient: fit and gradients raise, where ggml's backward pass
    would have aborted the process (found by tools/probe_new_surface.py's auto_ops set)."""
    from op_checks import OpLayer
    x = np.ones((4, 3), np.float32)
    for fn in (lambda z: ops.zeros_like(z), lambda z: ops.ones_like(z) * 2.0, lambda z: ops.stop_gradient(z)):
        m = pg.Sequential([pg.Input((3,)), OpLayer(fn)])
        m.compile(loss="mse", optimizer="adam")
        with pytest.raises(ValueError, match="does not depend on any trainable weight"):
            m.fit(x, x, verbose=0)


def test_results_on_arrays_have_numpy_s_shapes():
    """A reduction over every axis, or an op on numbers, gives a 0-d array as numpy (and
    Keras) does, though ggml computes it as one entry."""
    x = RNG.normal(size=(2, 3))
    assert ops.sum(x).shape == () and ops.mean(x, axis=(0, -1)).shape == ()
    assert ops.max(x, keepdims=True).shape == (1, 1) and ops.mean(x, axis=1).shape == (2,)
    assert ops.argmax(np.arange(4)).shape == () and ops.norm(x).shape == ()
    assert ops.clip(np.float32(2.0), 0, 1).shape == () and ops.maximum(2.0, 3.0).shape == ()
    mean, var = ops.moments(np.ones(3), axes=[0])
    assert mean.shape == var.shape == ()
    assert float(ops.sum(x)) == pytest.approx(x.sum(), rel=1e-5)


@pytest.mark.parametrize("sa, sb", [((2, 3), (3, 4)), ((3,), (3, 4)), ((2, 3), (3,)), ((3,), (3,)),
                                    ((2, 2, 3), (3, 4)), ((2, 2, 3), (2, 3, 4)), ((3,), (2, 3, 4)),
                                    ((2, 2, 2, 3), (2, 2, 3, 5))])
def test_matmul_is_numpy_s_on_arrays_and_in_a_graph(sa, sb):
    """Keras's ops.matmul: numpy's ``@`` on arrays (computed at once) and inside a graph
    (a GradientTape here, with the gradient of x1 against numpy's), vectors included."""
    rng = np.random.default_rng(0)
    a = rng.normal(size=sa).astype(np.float32)
    b = rng.normal(size=sb).astype(np.float32)
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    np.testing.assert_allclose(pg.ops.matmul(a, b), want, rtol=1e-5, atol=1e-5)
    with pg.GradientTape() as tape:
        tape.watch(a)
        out = pg.ops.matmul(a, b)
        loss = pg.ops.sum(out)
    assert tuple(out.shape) == want.shape or (want.ndim == 0 and tuple(out.shape) in ((), (1,)))
    np.testing.assert_allclose(np.asarray(out).reshape(want.shape), want, rtol=1e-5, atol=1e-5)
    # d sum(a @ b) / da = ones(out) @ b^T, numpy's broadcasting rules
    ones = np.ones(want.shape)
    if len(sb) == 1:
        grad = np.multiply.outer(ones, b) if want.ndim else b.astype(np.float64)
    elif len(sa) == 1:
        grad = (np.ones(sb[:-2] + (1, sb[-1])) @ np.swapaxes(b, -1, -2)).reshape(-1, sa[0]).sum(0)
    else:
        grad = ones @ np.swapaxes(b.astype(np.float64), -1, -2)
    np.testing.assert_allclose(tape.gradient(loss, a), grad, rtol=1e-5, atol=1e-5)


def test_matmul_refuses_shapes_that_do_not_meet():
    with pytest.raises(ValueError, match="last axis of x1"):
        pg.ops.matmul(np.ones((2, 3)), np.ones((4, 2)))
    with pytest.raises(ValueError, match="scalars"):
        pg.ops.matmul(np.float32(2.0), np.ones((2, 2)))


def test_argmax_and_argmin_in_a_graph_take_numpy_s_first_of_ties_and_first_nan():
    # ggml/patches/0039: the CPU kernel kept the last of equal values
    inp = pg.Input((4,))
    model = pg.Model(inp, [ops.argmax(inp, axis=-1), ops.argmin(inp, axis=-1)])
    x = np.array([[1, 3, 3, 0], [0, 0, 0, 0], [2, 1, 2, 2], [np.nan, 1, np.nan, 5], [1, np.nan, 3, 3],
                  [-np.inf] * 4, [np.inf, 2, np.inf, -np.inf]], np.float32)
    big, small = model.predict(x, verbose=0)
    np.testing.assert_array_equal(big, np.argmax(x, axis=-1))
    np.testing.assert_array_equal(small, np.argmin(x, axis=-1))
    flat = pg.Model(inp, ops.argmax(inp))                  # over the whole tensor, as numpy's axis=None
    assert flat.predict(x[1:2], verbose=0).ravel()[0] == 0
