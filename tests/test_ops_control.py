"""pyggml._ops_control: Keras's control flow, sorting, scatter and linear algebra.

Graph cases go through a model (forward against float64 numpy, gradients against central
differences of the numpy reference); eager calls on arrays against numpy or plain Python
loops; bad arguments raise clear errors."""

import numpy as np
import pytest

import pyggml as pg
from pyggml import _ops_control, ops

from op_checks import check_op_in_model

RNG = np.random.default_rng(11)


def _scan_ref(a, reverse=False):
    xs = a.transpose(1, 0, 2)                      # steps along the 3 rows
    c = np.zeros_like(xs[0])
    ys = [None] * len(xs)
    order = range(len(xs) - 1, -1, -1) if reverse else range(len(xs))
    for i in order:
        ys[i] = c * xs[i] + xs[i]
        c = c + xs[i]
    return np.stack(ys).transpose(1, 0, 2)


def _scan_graph(t, reverse=False):
    xs = ops.transpose(t, (1, 0, 2))
    _, ys = ops.scan(lambda c, x: (c + x, c * x + x), t[:, 0] * 0.0, xs, reverse=reverse)
    return ops.transpose(ys, (1, 0, 2))


def _while_ref(a):
    v = a
    for _ in range(3):
        if v.sum() < 4.0:
            v = v * 1.5 + 0.25
    return v


SCATTER_IDX = [[0, 1], [1, 2], [0, 1]]
UPDATE_IDX = [[1, 2], [0, 0], [1, 2]]


def _scatter_ref(a):
    out = np.zeros((2, 3, 3))
    for (i, j), row in zip(SCATTER_IDX, a[0, :3, :3]):
        out[i, j] += row
    return out


def _update_ref(reduction):
    def ref(a):
        out = a.copy()
        upd = a[0, :3, :] * 5.0 - 1.0
        for (i, j), row in zip(UPDATE_IDX, upd):
            if reduction is None:
                out[i, j] = row
            elif reduction == "add":
                out[i, j] += row
            elif reduction == "mul":
                out[i, j] *= row
            elif reduction == "max":
                out[i, j] = np.maximum(out[i, j], row)
            else:
                out[i, j] = np.minimum(out[i, j], row)
        return out
    return ref


def _slice_update_ref(a):
    out = a.copy()
    out[0:2, 1:3, 1:3] = a[:, :2, :2] * 3.0
    return out


def _switch_ref(a):
    k = int(a.sum() > 0) + int(a.sum() > 1)
    return [a * 2.0, a * a, a - 1.0][k]


# id: (op on the (batch=2, 3, 4) tensor, float64 numpy reference)
GRAPH_CASES = {
    "cond_python_true": (lambda t: ops.cond(True, lambda: t * 2.0, lambda: t * t), lambda a: a * 2),
    "cond_numpy_false": (lambda t: ops.cond(np.array(False), lambda: t * 2.0, lambda: t * t), lambda a: a * a),
    "cond_tensor_scalar": (lambda t: ops.cond(ops.sum(t) > 0.0, lambda: t * 2.0, lambda: t * t),
                           lambda a: a * 2 if a.sum() > 0 else a * a),
    "cond_tensor_scalar_other_way": (lambda t: ops.cond(ops.sum(t) < 0.0, lambda: t * 2.0, lambda: t * t),
                                     lambda a: a * 2 if a.sum() < 0 else a * a),
    "cond_tensor_elementwise": (lambda t: ops.cond(t > 0.1, lambda: t * 2.0, lambda: t * t),
                                lambda a: np.where(a > 0.1, 2 * a, a * a)),
    "cond_structures": (lambda t: ops.cond(ops.sum(t) > 0.0, lambda: (t, t * 3.0), lambda: (t * t, t))[1],
                        lambda a: 3 * a if a.sum() > 0 else a),
    "switch_python": (lambda t: ops.switch(5, [lambda v: v * 2.0, lambda v: v * v], t), lambda a: a * a),
    "switch_tensor": (lambda t: ops.switch((ops.sum(t) > 0.0) + (ops.sum(t) > 1.0),
                                           [lambda v: v * 2.0, lambda v: v * v, lambda v: v - 1.0], t), _switch_ref),
    "fori_loop": (lambda t: ops.fori_loop(0, 3, lambda i, v: v * t + float(i), t),
                  lambda a: ((a * a + 0) * a + 1) * a + 2),
    "while_loop_known": (lambda t: ops.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v * t), (0, t))[1],
                         lambda a: a ** 4),
    "while_loop_masked": (lambda t: ops.while_loop(lambda v: ops.sum(v) < 4.0, lambda v: v * 1.5 + 0.25, t,
                                                   maximum_iterations=3), _while_ref),
    "scan": (_scan_graph, _scan_ref),
    "scan_reverse": (lambda t: _scan_graph(t, reverse=True), lambda a: _scan_ref(a, reverse=True)),
    "map": (lambda t: ops.map(lambda r: r * r + r, t), lambda a: a * a + a),
    "map_nested": (lambda t: ops.map(lambda d: d["a"] * d["b"], {"a": t, "b": t + 1.0}), lambda a: a * (a + 1)),
    "vectorized_map_list": (lambda t: ops.vectorized_map(lambda xs: xs[0] - xs[1] * 2.0, [t, t * t]),
                            lambda a: a - 2 * a * a),
    "associative_scan_sum": (lambda t: ops.associative_scan(lambda a, b: a + b, t, axis=2),
                             lambda a: np.cumsum(a, 2)),
    "associative_scan_product_reverse": (lambda t: ops.associative_scan(lambda a, b: a * b, t, reverse=True,
                                                                        axis=1),
                                         lambda a: np.flip(np.cumprod(np.flip(a, 1), 1), 1)),
    "sort_last": (lambda t: ops.sort(t), lambda a: np.sort(a, -1)),
    "sort_middle": (lambda t: ops.sort(t, axis=1) * np.arange(1.0, 5.0), lambda a: np.sort(a, 1) * np.arange(1, 5)),
    "top_k_values": (lambda t: ops.top_k(t, 2)[0], lambda a: -np.sort(-a, -1)[..., :2]),
    "top_k_indices_take": (lambda t: ops.take(t, ops.top_k(t[0, 0], 2)[1], axis=-1),
                           lambda a: a[..., np.argsort(-a[0, 0], kind="stable")[:2]]),
    "argsort_rows_take": (lambda t: ops.take(t, ops.argsort(t[1, :, 2]), axis=1),
                          lambda a: a[:, np.argsort(a[1, :, 2], kind="stable")]),
    "scatter": (lambda t: ops.scatter(SCATTER_IDX, t[0, :3, :3], (2, 3, 3)), _scatter_ref),
    "scatter_update": (lambda t: ops.scatter_update(t, UPDATE_IDX, t[0, :3, :] * 5.0 - 1.0), _update_ref(None)),
    "scatter_update_add": (lambda t: ops.scatter_update(t, UPDATE_IDX, t[0, :3, :] * 5.0 - 1.0, reduction="add"),
                           _update_ref("add")),
    "scatter_update_mul": (lambda t: ops.scatter_update(t, UPDATE_IDX, t[0, :3, :] * 5.0 - 1.0, reduction="mul"),
                           _update_ref("mul")),
    "scatter_update_max": (lambda t: ops.scatter_update(t, UPDATE_IDX, t[0, :3, :] * 5.0 - 1.0, reduction="max"),
                           _update_ref("max")),
    "scatter_update_min": (lambda t: ops.scatter_update(t, UPDATE_IDX, t[0, :3, :] * 5.0 - 1.0, reduction="MIN"),
                           _update_ref("min")),
    "slice_update": (lambda t: ops.slice_update(t, [0, 1, 1], t[:, :2, :2] * 3.0), _slice_update_ref),
}


@pytest.mark.parametrize("name", sorted(GRAPH_CASES))
def test_forward_and_gradient_in_a_model(name):
    fn, ref = GRAPH_CASES[name]
    x = RNG.normal(size=(2, 3, 4))
    w = RNG.uniform(0.6, 1.4, size=(3, 4))
    check_op_in_model(fn, ref, x, w, RNG)


def _predict(fn, x):
    m = pg.Sequential([pg.Input(x.shape[1:]), pg.layers.Lambda(fn)])
    m.compile(loss="mse")
    try:
        return m.predict(x.astype(np.float32), verbose=0)
    finally:
        m.free()


def test_indices_in_a_graph_match_numpy():
    x = RNG.normal(size=(2, 3, 5))
    x[0, 1, 3] = x[0, 1, 1]                           # a tie: the lower index first
    got = _predict(lambda t: ops.cast(ops.argsort(t, axis=-1), "float32"), x)
    np.testing.assert_array_equal(got, np.argsort(x.astype(np.float32), -1, kind="stable"))
    got = _predict(lambda t: ops.cast(ops.argsort(t, axis=1), "float32"), x)
    np.testing.assert_array_equal(got, np.argsort(x.astype(np.float32), 1, kind="stable"))
    got = _predict(lambda t: ops.cast(ops.top_k(-t, 3)[1], "float32"), x)
    np.testing.assert_array_equal(got, np.argsort(x.astype(np.float32), -1, kind="stable")[..., :3])
    part = _predict(lambda t: ops.cast(ops.argpartition(t, 2), "float32"), x).astype(int)
    vals = np.take_along_axis(x.astype(np.float32), part, -1)
    assert (vals[..., :2] <= vals[..., 2:3]).all() and (vals[..., 3:] >= vals[..., 2:3]).all()


def test_argsort_and_top_k_indices_feed_take_in_a_graph():
    x = RNG.normal(size=(3, 5))
    got = _predict(lambda t: ops.take(t[0], ops.argsort(t[0]), axis=-1) + t * 0.0, x)
    np.testing.assert_allclose(got, np.broadcast_to(np.sort(x[0]).astype(np.float32), x.shape), rtol=1e-6)
    got = _predict(lambda t: ops.take(t, ops.top_k(t[0], 2)[1], axis=1), x)
    np.testing.assert_allclose(got, x[:, np.argsort(-x[0])[:2]].astype(np.float32), rtol=1e-6)


def test_argsort_indices_feed_take_in_a_training_graph():
    def gather_sorted(t):
        return ops.take(t, ops.argsort(t[0]), axis=-1)
    x = RNG.normal(size=(2, 4))
    check_op_in_model(gather_sorted, lambda a: a[:, np.argsort(a[0])], x, RNG.uniform(0.6, 1.4, size=(4,)), RNG)


def test_ops_on_variables_use_their_values():
    v = pg.Variable("v", (2, 3), "ones")
    np.testing.assert_array_equal(ops.sort(v), np.ones((2, 3)))
    np.testing.assert_array_equal(ops.scatter_update(v, [[0, 1]], np.array([5.0])), [[1, 5, 1], [1, 1, 1]])
    assert ops.det(pg.Variable("m", (2, 2), "ones")) == 0.0
    np.testing.assert_array_equal(ops.map(lambda r: r * 2, v), np.full((2, 3), 2.0))


def test_eager_control_flow_matches_python():
    assert ops.cond(np.array(1.0), lambda: "yes", lambda: "no") == "yes"
    assert ops.cond(0, lambda: "yes", lambda: "no") == "no"
    assert ops.switch(-3, [lambda a: a + 1, lambda a: a * 10], 4) == 5          # clamped to 0
    assert ops.switch(np.int32(7), [lambda a: a + 1, lambda a: a * 10], 4) == 40
    assert ops.while_loop(lambda i: i < 10, lambda i: i + 3, 0) == 12
    assert ops.while_loop(lambda i: i < 10, lambda i: i + 3, 0, maximum_iterations=2) == 6
    assert ops.while_loop(lambda i, s: i < 4, lambda i, s: (i + 1, s + i), [0, 0]) == (4, 6)
    assert ops.fori_loop(2, 6, lambda i, v: v * i, 1) == 2 * 3 * 4 * 5
    carry, ys = ops.scan(lambda c, x: (c + x, c * x), 1.0, np.array([1.0, 2.0, 3.0]))
    assert carry == 7.0
    np.testing.assert_array_equal(ys, [1.0, 4.0, 12.0])
    carry, ys = ops.scan(lambda c, x: (c * 2, None), 1, length=5)
    assert carry == 32 and ys is None
    carry, ys = ops.scan(lambda c, x: (c + x["a"], (c, x["b"])), 0.0, {"a": np.arange(3.0), "b": np.ones((3, 2))},
                         reverse=True)
    assert carry == 3.0
    np.testing.assert_array_equal(ys[0], [3.0, 2.0, 0.0])
    np.testing.assert_array_equal(ys[1], np.ones((3, 2)))
    np.testing.assert_array_equal(ops.map(lambda r: r.sum(), np.arange(6.0).reshape(3, 2)), [1.0, 5.0, 9.0])
    np.testing.assert_array_equal(ops.vectorized_map(lambda r: r * 2, np.arange(4.0)), np.arange(4.0) * 2)
    np.testing.assert_array_equal(ops.vectorized_map(lambda xs: xs[0] + xs[1], (np.ones(3), np.arange(3.0))),
                                  [1.0, 2.0, 3.0])
    a = RNG.normal(size=(7, 3))
    np.testing.assert_allclose(ops.associative_scan(lambda p, q: p + q, a), np.cumsum(a, 0), rtol=1e-12)
    np.testing.assert_allclose(ops.associative_scan(np.maximum, a, axis=1), np.maximum.accumulate(a, 1))
    np.testing.assert_allclose(ops.associative_scan(lambda p, q: p + q, a, reverse=True),
                               np.flip(np.cumsum(np.flip(a, 0), 0), 0), rtol=1e-12)
    pair = ops.associative_scan(lambda p, q: (p[0] + q[0], p[1] * q[1]), (a[:, 0], a[:, 1]))
    np.testing.assert_allclose(pair[1], np.cumprod(a[:, 1]), rtol=1e-12)


@ops.custom_gradient
def log1pexp(x):
    """keras.ops.custom_gradient's own example: a stable gradient for log(1 + e^x)."""
    e = ops.exp(x)

    def grad(*args, upstream=None):
        if upstream is None:
            (upstream,) = args
        return ops.multiply(upstream, 1.0 - 1.0 / ops.add(1.0, e))
    return ops.log(1.0 + e), grad


@ops.custom_gradient
def half_square_norm(x):
    """0.5 * |row|^2 repeated over the row: its gradient mixes a row's entries."""
    def grad(upstream):
        return ops.sum(upstream, axis=-1, keepdims=True) * x
    return 0.5 * ops.sum(x * x, axis=-1, keepdims=True) * ops.ones((4,)), grad


@ops.custom_gradient
def scaled_identity(x, scale):
    """The identity whose gradient is declared to be 3x the upstream one (not the true one)."""
    def grad(upstream):
        return upstream * 3.0, None
    return x * 1.0, grad


def test_custom_gradient_in_a_model_gives_grad_fn_s_gradient():
    x = RNG.normal(size=(2, 3, 4))
    w = RNG.uniform(0.6, 1.4, size=(3, 4))
    check_op_in_model(lambda t: log1pexp(t), lambda a: np.log1p(np.exp(a)), x, w, RNG)
    check_op_in_model(lambda t: half_square_norm(t), lambda a: 0.5 * (a * a).sum(-1, keepdims=True) * np.ones(4),
                      x, w, RNG)
    # a declared gradient that is not the true one is the one training uses
    from op_checks import OpLayer
    m = pg.Sequential([pg.Input((3, 4)), OpLayer(lambda t: scaled_identity(t, 2.0))])
    m.compile(loss="mse", optimizer="sgd")
    m.set_weights({k: w.astype(np.float32) for k in m.get_weights()})
    y = RNG.normal(size=x.shape)
    np.testing.assert_allclose(m.predict(x.astype(np.float32), verbose=0), x * w, rtol=1e-5, atol=1e-6)
    (g,) = m.gradients(x.astype(np.float32), y.astype(np.float32)).values()
    np.testing.assert_allclose(g, (3.0 * 2 * (x * w - y) / y.size * x).sum(0), rtol=1e-4, atol=1e-6)


def test_custom_gradient_on_arrays_and_bad_uses():
    x = np.array([0.0, 1.0, 10.0])
    np.testing.assert_allclose(log1pexp(x), np.log1p(np.exp(x)), rtol=1e-6)
    with pytest.raises(ValueError, match="return \\(output, grad_fn\\)"):
        ops.custom_gradient(lambda v: v)(np.ones(2))

    @ops.custom_gradient
    def pair(v):
        return (v, v), lambda u: u
    with pytest.raises(TypeError, match="must be one tensor"):
        _predict(lambda t: pair(t)[0], np.ones((2, 3)))

    @ops.custom_gradient
    def two_grads(v):
        return v * 2.0, lambda u: (u, u)
    with pytest.raises(ValueError, match="2 gradients for 1 arguments"):
        _predict(lambda t: two_grads(t), np.ones((2, 3)))
    with pytest.raises(TypeError, match="at most 4096"):
        _predict(lambda t: log1pexp(t), np.ones((2, 2100)))


def test_sorting_on_arrays():
    a = np.array([[3.0, 1.0, 2.0, 1.0], [0.0, -5.0, 9.0, 4.0]])
    np.testing.assert_array_equal(ops.sort(a), np.sort(a, -1))
    np.testing.assert_array_equal(ops.sort(a, axis=0), np.sort(a, 0))
    np.testing.assert_array_equal(ops.argsort(a), [[1, 3, 2, 0], [1, 0, 3, 2]])
    assert ops.argsort(a).dtype == np.int32
    part = ops.argpartition(a, 1)
    assert part.dtype == np.int32
    np.testing.assert_array_equal(np.take_along_axis(a, part, -1)[:, 1], np.sort(a, -1)[:, 1])
    values, idx = ops.top_k(a, 2)
    np.testing.assert_array_equal(values, [[3.0, 2.0], [9.0, 4.0]])
    np.testing.assert_array_equal(idx, [[0, 2], [2, 3]])
    np.testing.assert_array_equal(ops.sort(np.array([3, 1, 2])), [1, 2, 3])          # ints stay ints


def test_sort_and_top_k_agree_with_torch():
    torch = pytest.importorskip("torch")
    a = RNG.normal(size=(4, 6)).astype(np.float32)
    np.testing.assert_array_equal(_predict(lambda t: ops.sort(t, axis=-1), a), torch.sort(torch.tensor(a))[0].numpy())
    got = _predict(lambda t: ops.top_k(t, 3)[0], a)
    np.testing.assert_array_equal(got, torch.topk(torch.tensor(a), 3).values.numpy())



def test_graph_linear_algebra_agrees_with_torch():
    torch = pytest.importorskip("torch")
    a = (RNG.normal(size=(3, 4, 4)) + 3.0 * np.eye(4)).astype(np.float32)
    ta = torch.tensor(a, dtype=torch.float64)
    flat = a.reshape(3, 16)

    def run(fn):
        return _predict(lambda t: fn(ops.reshape(t, (-1, 4, 4))), flat)
    np.testing.assert_allclose(run(ops.inv), torch.linalg.inv(ta).numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(run(lambda m: ops.expand_dims(ops.det(m), -1))[:, 0], torch.linalg.det(ta).numpy(),
                               rtol=1e-4)
    spd = ta @ ta.transpose(-1, -2)
    np.testing.assert_allclose(run(lambda m: ops.cholesky(m @ ops.transpose(m, (0, 2, 1)))),
                               torch.linalg.cholesky(spd).numpy(), rtol=1e-4, atol=1e-4)
    want = torch.linalg.solve_triangular(ta, ta[..., :2], upper=False).numpy()
    np.testing.assert_allclose(run(lambda m: ops.solve_triangular(m, m[..., :2], lower=True)), want, rtol=1e-4,
                               atol=1e-5)


def test_scatter_on_arrays():
    np.testing.assert_array_equal(ops.scatter([[0, 1], [1, 1]], np.array([1.0, 1.0]), (2, 2)), [[0, 1], [0, 1]])
    np.testing.assert_array_equal(ops.scatter([[1], [1], [-1]], np.ones((3, 2)), (4, 2)),
                                  [[0, 0], [2, 2], [0, 0], [1, 1]])          # duplicates add; -1 is the last
    x = np.zeros((4, 4, 4))
    out = ops.scatter_update(x, [[1, 2, 3], [0, 1, 3]], np.array([1.0, 1.0]))
    assert out[1, 2, 3] == 1 and out[0, 1, 3] == 1 and out.sum() == 2 and x.sum() == 0      # x unchanged
    out = ops.scatter_update(x, [[1, 2], [2, 3]], np.ones((2, 4)))
    np.testing.assert_array_equal(out[1, 2], 1.0)
    assert out.sum() == 8
    np.testing.assert_array_equal(ops.scatter_update(np.zeros(4), [[0], [0], [1]], np.ones(3), reduction="add"),
                                  [2, 1, 0, 0])
    np.testing.assert_array_equal(ops.scatter_update(np.full(3, 2.0), [[0], [2]], np.array([5.0, -1.0]),
                                                     reduction="max"), [5, 2, 2])
    np.testing.assert_array_equal(ops.scatter_update(np.full(3, 2.0), [[0], [0]], np.array([5.0, 3.0])),
                                  [3, 2, 2])                                   # the last update wins
    np.testing.assert_array_equal(ops.slice_update(np.zeros((5, 5)), [3, 3], np.ones((2, 2)))[3:, 3:], 1.0)
    assert ops.slice_update(np.zeros((5, 5)), [3, 3], np.ones((2, 2))).sum() == 4
    found = ops.nonzero(np.array([[0, 3], [4, 0]]))
    assert len(found) == 2 and found[0].dtype == np.int32
    np.testing.assert_array_equal(found[0], [0, 1])
    np.testing.assert_array_equal(found[1], [1, 0])


def test_linear_algebra_on_arrays_matches_numpy():
    a = RNG.normal(size=(2, 4, 4))
    spd = a @ np.swapaxes(a, -1, -2) + 4 * np.eye(4)
    b = RNG.normal(size=(2, 4, 3))
    low = ops.cholesky(spd)
    np.testing.assert_allclose(low @ np.swapaxes(low, -1, -2), spd, rtol=1e-10)
    np.testing.assert_allclose(ops.cholesky(spd, upper=True), np.swapaxes(low, -1, -2))
    np.testing.assert_allclose(ops.det(a), np.linalg.det(a))
    sign, logdet = ops.slogdet(a)
    np.testing.assert_allclose(sign * np.exp(logdet), np.linalg.det(a))
    np.testing.assert_allclose(ops.inv(a) @ a, np.broadcast_to(np.eye(4), a.shape), atol=1e-9)
    np.testing.assert_allclose(a @ ops.solve(a, b), b, atol=1e-9)
    np.testing.assert_allclose(np.einsum("bij,bj->bi", a, ops.solve(a, b[..., 0])), b[..., 0], atol=1e-9)
    w, v = ops.eigh(spd)
    np.testing.assert_allclose(spd @ v, v * w[:, None, :], atol=1e-9)
    w, v = ops.eig(a[0])
    np.testing.assert_allclose(a[0] @ v, v * w, atol=1e-9)
    q, r = ops.qr(a[0, :, :3])
    assert q.shape == (4, 3) and r.shape == (3, 3)
    np.testing.assert_allclose(q @ r, a[0, :, :3], atol=1e-12)
    q, r = ops.qr(a[0, :, :3], mode="complete")
    assert q.shape == (4, 4)
    u, s, vh = ops.svd(a[0, :3])
    np.testing.assert_allclose((u * s) @ vh[:3], a[0, :3], atol=1e-12)
    np.testing.assert_allclose(ops.svd(a, compute_uv=False), np.linalg.svd(a, compute_uv=False))
    np.testing.assert_allclose(ops.lstsq(a[0, :, :2], b[0, :, 0]), np.linalg.lstsq(a[0, :, :2], b[0, :, 0])[0])
    tri = np.triu(a[0]) + 4 * np.eye(4)
    np.testing.assert_allclose(tri @ ops.solve_triangular(tri + np.tril(a[0], -1), b[0]), b[0], atol=1e-9)
    np.testing.assert_allclose(tri.T @ ops.solve_triangular(tri.T, b[0, :, 0], lower=True), b[0, :, 0], atol=1e-9)
    lu, piv = ops.lu_factor(a)
    for k in range(2):                           # P @ L @ U rebuilt from LAPACK's row swaps
        m = np.tril(lu[k], -1) + np.eye(4)
        rows = np.arange(4)
        for i, p in enumerate(piv[k]):
            rows[[i, p]] = rows[[p, i]]
        np.testing.assert_allclose((m @ np.triu(lu[k]))[np.argsort(rows)], a[k], atol=1e-12)
    sl = pytest.importorskip("scipy.linalg")
    want_lu, want_piv = sl.lu_factor(a[0])
    np.testing.assert_allclose(lu[0], want_lu, atol=1e-12)
    np.testing.assert_array_equal(piv[0], want_piv)


RHS = RNG.normal(size=(3, 2))


def _spd(a):
    return a @ np.swapaxes(a, -1, -2) + np.eye(3)


def _spd_graph(t):
    return t @ ops.transpose(t, (0, 2, 1)) + np.eye(3, dtype=np.float32)


# id: (op on a (batch=2, 3, 3) tensor of matrices, float64 numpy reference)
LINALG_GRAPH_CASES = {
    "det": (lambda t: ops.expand_dims(ops.det(t), -1), lambda a: np.linalg.det(a)[:, None]),
    "slogdet": (lambda t: ops.stack(ops.slogdet(t), axis=-1), lambda a: np.stack(np.linalg.slogdet(a), -1)),
    "inv": (lambda t: ops.inv(t), np.linalg.inv),
    "solve_matrix": (lambda t: ops.solve(t, RHS), lambda a: np.linalg.solve(a, np.broadcast_to(RHS, (2, 3, 2)))),
    "solve_vector": (lambda t: ops.solve(t, t[:, 0]), lambda a: np.linalg.solve(a, a[:, 0][..., None])[..., 0]),
    "cholesky": (lambda t: ops.cholesky(_spd_graph(t)), lambda a: np.linalg.cholesky(_spd(a))),
    "cholesky_upper": (lambda t: ops.cholesky(_spd_graph(t), upper=True),
                       lambda a: np.swapaxes(np.linalg.cholesky(_spd(a)), -1, -2)),
    "solve_triangular_lower": (lambda t: ops.solve_triangular(t, t[:, :, :2], lower=True),
                               lambda a: np.linalg.solve(np.tril(a), a[:, :, :2])),
    "solve_triangular_upper_vector": (lambda t: ops.solve_triangular(t, t[:, 1]),
                                      lambda a: np.linalg.solve(np.triu(a), a[:, 1][..., None])[..., 0]),
}


@pytest.mark.parametrize("name", sorted(LINALG_GRAPH_CASES))
def test_small_linear_algebra_in_a_model(name):
    fn, ref = LINALG_GRAPH_CASES[name]
    x = RNG.normal(size=(2, 3, 3)) + 2.0 * np.eye(3)
    w = RNG.uniform(0.6, 1.4, size=(3, 3))
    check_op_in_model(fn, ref, x, w, RNG, atol=1e-4)


def test_graph_linear_algebra_pivots_and_singular_matrices():
    """Row swaps (a zero in the corner), a singular matrix (det 0, not nan) and 8 x 8."""
    mats = np.array([[[0.0, 1, 0], [1, 0, 0], [0, 0, 2]], [[1.0, 2, 3], [2, 4, 6], [1, 0, 1]],
                     [[0.0, 0, 1], [0, 2, 0], [3, 0, 0]]])
    np.testing.assert_allclose(_predict(lambda t: ops.expand_dims(ops.det(t), -1), mats)[:, 0],
                               np.linalg.det(mats), atol=1e-6)
    sign, logdet = np.moveaxis(_predict(lambda t: ops.stack(ops.slogdet(t), -1), mats), -1, 0)
    want_sign, want_log = np.linalg.slogdet(mats)
    np.testing.assert_array_equal(sign, want_sign)
    np.testing.assert_allclose(logdet[[0, 2]], want_log[[0, 2]], rtol=1e-6)
    assert logdet[1] == -np.inf
    np.testing.assert_allclose(_predict(lambda t: ops.inv(t), mats[[0, 2]]), np.linalg.inv(mats[[0, 2]]), atol=1e-6)
    big = RNG.normal(size=(2, 8, 8))
    np.testing.assert_allclose(_predict(lambda t: ops.inv(t), big), np.linalg.inv(big), atol=1e-4)


def test_linear_algebra_in_a_graph_on_known_values_and_refused_on_computed_ones():
    m = np.array([[2.0, 1.0], [1.0, 3.0]])
    got = _predict(lambda t: t * ops.det(m) + ops.inv(m)[0] + ops.svd(m, compute_uv=False), np.ones((2, 2)))
    np.testing.assert_allclose(got, np.ones((2, 2)) * 5.0 + np.linalg.inv(m)[0] + np.linalg.svd(m, compute_uv=False),
                               rtol=1e-6)
    with pytest.raises(TypeError, match="qr: linear algebra is computed on arrays"):
        _predict(lambda t: ops.qr(ops.reshape(t, (-1, 2, 2)))[0], np.ones((2, 4)))
    with pytest.raises(TypeError, match="up to 8 x 8"):
        _predict(lambda t: ops.inv(ops.reshape(t, (-1, 9, 9))), np.ones((2, 81)))
    with pytest.raises(TypeError, match="eig: the result is complex"):
        _predict(lambda t: t * ops.eig(np.array([[0.0, -1.0], [1.0, 0.0]]))[0], np.ones((2, 2)))
    with pytest.raises(TypeError, match="nonzero"):
        _predict(lambda t: ops.nonzero(t)[0], np.ones((2, 2)))


def test_functional_model_with_sort_and_scatter_saves(tmp_path):
    inp = pg.Input((5,))
    h = pg.layers.Dense(5)(inp)
    s = ops.sort(h, axis=-1)
    out = ops.slice_update(s, [0, 0], s[:, 4:5] * 2.0)
    model = pg.Model(inp, out)
    model.compile(loss="mse")
    x = RNG.normal(size=(4, 5)).astype(np.float32)
    got = model.predict(x, batch_size=4, verbose=0)
    wt, b = (np.asarray(v) for v in model.layers[1].get_weights().values())
    want = np.sort(x @ wt.T + b, -1)
    want[:, 0] = 2.0 * want[:, 4]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    model.save(tmp_path / "m.keras")
    again = pg.load_model(tmp_path / "m.keras")
    np.testing.assert_allclose(again.predict(x, batch_size=4, verbose=0), got, rtol=1e-6)


def test_a_sort_trains_in_fit():
    """Per-feature scales (starting at 1) learn sort(x * scales) = sort(2 x): only through the sort."""
    from op_checks import OpLayer
    rng = np.random.default_rng(3)
    x = rng.normal(size=(64, 4)).astype(np.float32)
    y = np.sort(x * 2.0, -1)
    model = pg.Sequential([pg.Input((4,)), OpLayer(lambda t: ops.sort(t))])
    model.compile(loss="mse", optimizer=pg.optimizers.Adam(0.05), seed=1)
    hist = model.fit(x, y, epochs=60, batch_size=64, verbose=0)
    assert hist.history["loss"][-1] < 0.01 * hist.history["loss"][0]
    np.testing.assert_allclose(next(iter(model.get_weights().values())), 2.0, atol=0.05)


def _in_graph(fn):
    return lambda: _predict(fn, np.ones((2, 3)))


@pytest.mark.parametrize("call, error, match", [
    (lambda: ops.cond(True, 1, lambda: 0), TypeError, "true_fn must be callable"),
    (lambda: ops.cond(np.ones(2), lambda: 1, lambda: 0), ValueError, "single value"),
    (_in_graph(lambda t: ops.cond(ops.sum(t) > 0, lambda: t, lambda: (t, t))), ValueError, "same structure"),
    (lambda: ops.switch(0, [], 1), TypeError, "non-empty list"),
    (_in_graph(lambda t: ops.switch(t, [lambda: t, lambda: t])), ValueError, "one value"),
    (lambda: ops.while_loop(lambda i: i < 3, lambda i: i + 1, 0, maximum_iterations=-1), ValueError,
     "maximum_iterations"),
    (lambda: ops.while_loop(lambda i, j: i < 3, lambda i, j: i + 1, (0, 0)), ValueError, "returned 1 values"),
    (_in_graph(lambda t: ops.while_loop(lambda v: ops.sum(v) < 3.0, lambda v: v * 2.0, t)), TypeError,
     "maximum_iterations"),
    (_in_graph(lambda t: ops.fori_loop(0, ops.sum(t), lambda i, v: v, t)), TypeError, "upper is a graph tensor"),
    (lambda: ops.fori_loop(0, 2.5, lambda i, v: v, 0), TypeError, "upper must be an int"),
    (lambda: ops.scan(lambda c, x: (c, x), 0.0), ValueError, "pass xs"),
    (lambda: ops.scan(lambda c, x: (c, x), 0.0, np.ones(3), unroll=0), ValueError, "unroll"),
    (lambda: ops.scan(lambda c, x: (c, x), 0.0, [np.ones(3), np.ones(2)]), ValueError, "leading axis"),
    (lambda: ops.scan(lambda c, x: c, 0.0, np.ones(3)), ValueError, "pair"),
    (lambda: ops.scan(lambda c, x: ((c, c), x), 0.0, np.ones(3)), ValueError, "structure of init"),
    (lambda: ops.scan(lambda c, x: (c, x), 0.0, np.ones(3), length=2), ValueError, "length=2"),
    (lambda: ops.map(3, np.ones(3)), TypeError, "callable"),
    (lambda: ops.map(lambda r: r, np.float32(1.0)), ValueError, "leading axis"),
    (_in_graph(lambda t: ops.map(lambda r: ops.reshape(r, (1, 1, 1, 3)), t)), ValueError, "at most 4"),
    (lambda: ops.vectorized_map(lambda xs: xs, [np.ones(2), np.ones(3)]), ValueError, "leading axis"),
    (lambda: ops.associative_scan(lambda a, b: a + b, np.ones((2, 3)), axis=2), ValueError, "out of range"),
    (lambda: ops.associative_scan(lambda a, b: a + b, [np.ones(2), np.ones(3)]), ValueError, "differ"),
    (lambda: ops.sort(np.ones(3), axis=1), ValueError, "out of range"),
    (lambda: ops.sort(np.float32(1.0)), ValueError, "at least one axis"),
    (lambda: ops.argsort(np.array(["b", "a"])), TypeError, "real numbers"),
    (lambda: ops.argpartition(np.ones(3), 3), ValueError, "kth"),
    (lambda: ops.argpartition(np.ones(3), 1.5), TypeError, "kth"),
    (lambda: ops.top_k(np.ones((2, 3)), 4), ValueError, r"k must be an int in \[1, 3\]"),
    (lambda: ops.scatter([[0, 5]], np.ones(1), (2, 2)), IndexError, "out of bounds"),
    (lambda: ops.scatter([[0, 0, 0]], np.ones(1), (2, 2)), ValueError, "3 entries"),
    (lambda: ops.scatter([[0]], np.ones(3), (2, 2)), ValueError, "one entry of shape"),
    (lambda: ops.scatter([[0.5]], np.ones(2), (2, 2)), TypeError, "integers"),
    (lambda: ops.scatter([[0]], np.ones(2), (2, -1)), ValueError, "positive ints"),
    (_in_graph(lambda t: ops.scatter_update(t, ops.cast(t, "int32"), t)), TypeError, "known when the graph"),
    (lambda: ops.scatter_update(np.zeros(3), [[0]], np.ones(1), reduction="sum"), ValueError, "reduction"),
    (lambda: ops.scatter_update(np.zeros((2, 2)), [[0, 0]], np.ones(2)), ValueError, "one entry of shape"),
    (lambda: ops.slice_update(np.zeros((3, 3)), [2, 2], np.ones((2, 2))), ValueError, "do not fit"),
    (lambda: ops.slice_update(np.zeros((3, 3)), [0], np.ones((2, 2))), ValueError, "one int per axis"),
    (lambda: ops.slice_update(np.zeros((3, 3)), [0, 0], np.ones(2)), ValueError, "rank"),
    (lambda: ops.cholesky(-np.eye(2)), ValueError, "cholesky"),
    (lambda: ops.cholesky(np.eye(2), upper="no"), TypeError, "upper"),
    (lambda: ops.inv(np.zeros((2, 2))), ValueError, "inv"),
    (lambda: ops.det(np.ones((2, 3))), ValueError, "square"),
    (lambda: ops.eig(np.ones(3)), ValueError, "matrix"),
    (lambda: ops.eigh(np.ones((2, 3))), ValueError, "square"),
    (lambda: ops.qr(np.ones((2, 2)), mode="r"), ValueError, "mode"),
    (lambda: ops.svd(np.ones((2, 2)), compute_uv=None), TypeError, "compute_uv"),
    (lambda: ops.svd(np.ones((1, 20000))), ValueError, "full_matrices=False"),
    (lambda: ops.scatter_update(np.zeros(3), [[0]], np.ones(1), reduction=np.array(["add"])), ValueError,
     "reduction"),
    (lambda: ops.qr(np.ones((2, 2)), mode=np.array(["reduced"])), ValueError, "mode"),
    (lambda: ops.associative_scan(lambda a, b: a + b, np.ones(3), reverse="yes"), TypeError, "reverse"),
    (lambda: ops.switch(None, [lambda: 1]), TypeError, "switch: index"),
    (lambda: ops.cond(None, lambda: 1, lambda: 0), TypeError, "cond: pred"),
    (lambda: ops.solve(np.eye(2), np.ones(3)), ValueError, "needs 2 rows"),
    (lambda: ops.lstsq(np.ones((3, 2)), np.ones(2)), ValueError, "lstsq"),
    (lambda: ops.lu_factor(np.ones(3)), ValueError, "matrix"),
    (lambda: ops.solve_triangular(np.zeros((2, 2)), np.ones(2)), ValueError, "singular"),
    (lambda: ops.slogdet(np.array([["a"]])), TypeError, "real numbers"),
])
def test_bad_arguments_are_clear_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_every_op_here_is_tested():
    # (ops.where( is here: ops.where(np.array([1, 0, 2])) below)
    import pathlib
    text = pathlib.Path(__file__).read_text()
    missing = [n for n in _ops_control.__all__ if f"ops.{n}(" not in text]
    assert missing == []
    assert set(_ops_control.__all__) <= set(ops.__all__)


def test_vectorize_on_arrays_and_graph_tensors():
    """numpy's vectorize on arrays (a Python branch per entry); on a graph tensor an
    entry-by-entry function is applied whole, and with a signature row by row."""
    f = ops.vectorize(lambda a, b: a - b if a > b else a + b)
    np.testing.assert_array_equal(f(np.array([1.0, 4.0]), 2.0), [3.0, 2.0])
    g = ops.vectorize(lambda a: a * 2.0 + 1.0)
    x = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(_predict(lambda t: g(t), x), x * 2 + 1)
    rows = ops.vectorize(lambda r: ops.sum(r * r), signature="(n)->()")
    np.testing.assert_allclose(rows(x), (x * x).sum(1))
    with pytest.raises(TypeError, match="pyfunc must be callable"):
        ops.vectorize(3)
