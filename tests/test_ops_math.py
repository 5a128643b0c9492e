"""Keras's math, array and shape functions (pyggml._ops_math): in a model, forward against a
float64 numpy reference and gradients against central differences of it; on arrays, against
numpy; the functions that take arrays only refuse graph tensors; bad arguments; a functional
model with them, saved and loaded."""

import zlib

import numpy as np
import pytest

import pyggml as pg
from pyggml import ops

from op_checks import check_op_in_model, per_sample, ref_per_sample

RNG = np.random.default_rng(11)
B = 2                      # the batch of check_op_in_model's inputs

C34 = RNG.normal(size=(3, 4))
C4 = RNG.normal(size=(4,))
W4 = np.array([0.5, 1.0, 2.0, 0.25])
INFS = np.zeros((3, 4))
INFS[0, 1], INFS[1, 2], INFS[2, 3] = np.inf, -np.inf, np.nan
IDX = np.array([[[2], [0], [3]]])                       # (1, 3, 1): along the last axis, broadcast over the batch


def _quiet(fn):
    def run(a):
        with np.errstate(all="ignore"):
            return fn(a)
    return run


# id: (op on the (batch, 3, 4) tensor, float64 numpy reference, input kind: n normal, p positive,
#      u inside (-1, 1), g above 1)
CASES = {
    # rounding and predicates: zero gradients (the + t keeps a gradient to compare)
    "floor": (lambda t: ops.floor(t * 3.0) + t, lambda a: np.floor(3 * a) + a, "n"),
    "ceil": (lambda t: ops.ceil(t * 3.0) * t, lambda a: np.ceil(3 * a) * a, "n"),
    "round": (lambda t: ops.round(t * 3.0) + t, lambda a: np.round(3 * a) + a, "n"),
    "round_decimals": (lambda t: ops.round(t, decimals=1) - t, lambda a: np.round(a, 1) - a, "n"),
    "trunc": (lambda t: ops.trunc(t * 3.0) + t, lambda a: np.trunc(3 * a) + a, "n"),
    "floor_divide": (lambda t: ops.floor_divide(t * 5.0, 1.5) + t, lambda a: np.floor_divide(5 * a, 1.5) + a, "n"),
    "mod": (lambda t: ops.mod(t * 5.0, 1.5), lambda a: np.mod(5 * a, 1.5), "n"),
    "mod_tensor_divisor": (lambda t: ops.mod(t * 5.0, t[:, :1] + 2.0), lambda a: np.mod(5 * a, a[:, :1] + 2), "p"),
    "signbit": (lambda t: ops.signbit(t) * t, lambda a: np.signbit(a) * a, "n"),
    "isnan": (lambda t: ops.isnan(ops.log(t)) + t, _quiet(lambda a: np.isnan(np.log(a)) + a), "n"),
    "isinf": (lambda t: ops.isinf(ops.exp(t * 100.0)) + t,
              lambda a: (a * 100 > np.log(np.finfo(np.float32).max)) + a, "n"),
    "isfinite": (lambda t: ops.isfinite(ops.log(t)) * t, _quiet(lambda a: np.isfinite(np.log(a)) * a), "n"),
    "isclose": (lambda t: ops.isclose(t, ops.round(t, 1), atol=0.02) + t,
                lambda a: np.isclose(a, np.round(a, 1), atol=0.02) + a, "n"),
    "nan_to_num": (lambda t: ops.nan_to_num(ops.log(t), nan=-1.0), _quiet(lambda a: np.nan_to_num(np.log(a), nan=-1.0)),
                   "n"),
    "nan_to_num_inf": (lambda t: ops.nan_to_num(t + INFS, nan=1.5, posinf=7.0, neginf=-3.0),
                       lambda a: np.nan_to_num(a + INFS, nan=1.5, posinf=7.0, neginf=-3.0), "n"),
    "logical_xor": (lambda t: ops.logical_xor(t > 0.2, t < 0.5) * t, lambda a: np.logical_xor(a > 0.2, a < 0.5) * a,
                    "n"),
    "any": (lambda t: ops.any(t > 1.0, axis=-1) + ops.sum(t, -1), lambda a: np.any(a > 1, -1) + a.sum(-1), "n"),
    "all": (lambda t: ops.all(t > -0.5, axis=1, keepdims=True) * t, lambda a: np.all(a > -0.5, 1, keepdims=True) * a,
            "n"),
    "count_nonzero": (lambda t: ops.count_nonzero(ops.relu(t), axis=2) + ops.sum(t, 2),
                      lambda a: np.count_nonzero(np.maximum(a, 0), axis=2) + a.sum(2), "n"),
    "digitize": (lambda t: ops.digitize(t, [-1.0, 0.0, 0.5]) + t, lambda a: np.digitize(a, [-1.0, 0.0, 0.5]) + a, "n"),
    "saturate_cast": (lambda t: ops.saturate_cast(t * 200.0, "int8") + t,
                      lambda a: np.clip(np.trunc(200 * a), -128, 127) + a, "n"),
    "saturate_cast_bool_half": (lambda t: ops.saturate_cast(t, "bool") * t + ops.saturate_cast(t * 1e5, "float16"),
                                lambda a: (a > 0) * a + np.clip(1e5 * a, -65504, 65504), "n"),
    # elementwise
    "absolute": (lambda t: ops.absolute(t), np.abs, "n"),
    "tan": (lambda t: ops.tan(t), np.tan, "u"),
    "arctan": (lambda t: ops.arctan(t * 3.0), lambda a: np.arctan(3 * a), "n"),
    "arctan2": (lambda t: ops.arctan2(t, ops.flip(t, 2)), lambda a: np.arctan2(a, a[..., ::-1]), "n"),
    "arcsin": (lambda t: ops.arcsin(t), np.arcsin, "u"),
    "arccos": (lambda t: ops.arccos(t), np.arccos, "u"),
    "arcsinh": (lambda t: ops.arcsinh(t * 3.0), lambda a: np.arcsinh(3 * a), "n"),
    "arccosh": (lambda t: ops.arccosh(t), np.arccosh, "g"),
    "arctanh": (lambda t: ops.arctanh(t), np.arctanh, "u"),
    "cbrt": (lambda t: ops.cbrt(t), np.cbrt, "n"),
    "exp2": (lambda t: ops.exp2(t), np.exp2, "n"),
    "expm1": (lambda t: ops.expm1(t), np.expm1, "n"),
    "log10": (lambda t: ops.log10(t), np.log10, "p"),
    "log2": (lambda t: ops.log2(t), np.log2, "p"),
    "logaddexp": (lambda t: ops.logaddexp(t, ops.flip(t, 1) * 2.0), lambda a: np.logaddexp(a, 2 * a[:, ::-1]), "n"),
    "divide_no_nan": (lambda t: ops.divide_no_nan(t, ops.relu(t - 0.3)), _quiet(
        lambda a: np.where(a > 0.3, a / np.where(a > 0.3, a - 0.3, 1.0), 0.0)), "n"),
    "conj_real_imag_copy": (lambda t: ops.conj(t) + ops.real(t) * 2.0 + ops.imag(t) + ops.copy(t) * 3.0,
                            lambda a: 6 * a, "n"),
    # reductions and statistics
    "amax": (lambda t: ops.amax(t, axis=1), lambda a: a.max(1), "n"),
    "amin": (lambda t: ops.amin(t, axis=(1, 2), keepdims=True), lambda a: a.min((1, 2), keepdims=True), "n"),
    "average": (lambda t: ops.average(t, axis=-1), lambda a: a.mean(-1), "n"),
    "average_weights": (lambda t: ops.average(t, axis=2, weights=W4), lambda a: np.average(a, 2, W4), "n"),
    "average_weight_tensor": (lambda t: ops.average(t, axis=1, weights=t * t + 0.5),
                              lambda a: np.average(a, 1, a * a + 0.5), "n"),
    "prod": (lambda t: ops.prod(t, axis=-1), lambda a: a.prod(-1), "n"),
    "prod_two_axes": (lambda t: ops.prod(t, axis=(1, 2), keepdims=True) * 0.1,
                      lambda a: a.prod((1, 2), keepdims=True) * 0.1, "p"),
    "cumprod": (lambda t: ops.cumprod(t, axis=2), lambda a: np.cumprod(a, 2), "n"),
    "cumprod_middle": (lambda t: ops.cumprod(t, axis=1), lambda a: np.cumprod(a, 1), "n"),
    "median": (lambda t: ops.median(t, axis=-1), lambda a: np.median(a, -1), "n"),
    "median_odd": (lambda t: ops.median(t, axis=1, keepdims=True), lambda a: np.median(a, 1, keepdims=True), "n"),
    "quantile": (lambda t: ops.quantile(t, 0.3, axis=2), lambda a: np.quantile(a, 0.3, axis=2), "n"),
    "quantile_many": (lambda t: ops.moveaxis(ops.quantile(t, [0.2, 0.9], axis=2, method="midpoint"), 0, -1),
                      lambda a: np.moveaxis(np.quantile(a, [0.2, 0.9], axis=2, method="midpoint"), 0, -1), "n"),
    "quantile_lower": (lambda t: ops.quantile(t, 0.4, axis=(1, 2), method="lower", keepdims=True),
                       lambda a: np.quantile(a, 0.4, axis=(1, 2), method="lower", keepdims=True), "n"),
    # matrices
    "tril": (lambda t: ops.tril(t), np.tril, "n"),
    "triu_k": (lambda t: ops.triu(t, k=1), lambda a: np.triu(a, 1), "n"),
    "tri": (lambda t: t * ops.tri(3, 4, k=-1), lambda a: a * np.tri(3, 4, -1), "n"),
    "identity": (lambda t: t @ ops.identity(4) * 2.0, lambda a: 2 * a, "n"),
    "diag_of_matrix": (per_sample(lambda s: ops.diag(s, k=1)), ref_per_sample(lambda s: np.diag(s, 1)), "n"),
    "diag_of_vector": (per_sample(lambda s: ops.diag(s[1], k=-1)), ref_per_sample(lambda s: np.diag(s[1], -1)), "n"),
    "diagflat": (per_sample(lambda s: ops.diagflat(s[:2, :2])), ref_per_sample(lambda s: np.diagflat(s[:2, :2])), "n"),
    "diagonal": (lambda t: ops.diagonal(t, offset=1, axis1=1, axis2=2),
                 lambda a: np.diagonal(a, 1, 1, 2), "n"),
    "trace": (lambda t: ops.expand_dims(ops.trace(t, axis1=1, axis2=2), -1),
              lambda a: np.trace(a, 0, 1, 2)[:, None], "n"),
    "outer": (per_sample(lambda s: ops.outer(s[0], s[1, :2])), ref_per_sample(lambda s: np.outer(s[0], s[1, :2])),
              "n"),
    "inner": (lambda t: ops.inner(t, C34), lambda a: np.inner(a, C34), "n"),
    "vdot": (per_sample(lambda s: ops.vdot(s, C34)), ref_per_sample(lambda s: np.atleast_1d(np.vdot(s, C34))), "n"),
    "kron": (per_sample(lambda s: ops.kron(s[:2, :2], s[1:, 2:])),
             ref_per_sample(lambda s: np.kron(s[:2, :2], s[1:, 2:])), "n"),
    "kron_vectors": (per_sample(lambda s: ops.kron(s[0], C4)), ref_per_sample(lambda s: np.kron(s[0], C4)), "n"),
    "cross": (lambda t: ops.cross(t[..., :3], t[..., 1:]), lambda a: np.cross(a[..., :3], a[..., 1:]), "n"),
    "cross_axis": (lambda t: ops.cross(t[:, :, :3], t[:, :, 1:], axisc=1),
                   lambda a: np.cross(a[:, :, :3], a[:, :, 1:], axisc=1), "n"),
    "corrcoef": (per_sample(lambda s: ops.corrcoef(s)), ref_per_sample(np.corrcoef), "n"),
    "correlate_valid": (per_sample(lambda s: ops.correlate(s[0], s[1, :2])),
                        ref_per_sample(lambda s: np.correlate(s[0], s[1, :2])), "n"),
    "correlate_same": (per_sample(lambda s: ops.correlate(s[0], s[1, :3], mode="same")),
                       ref_per_sample(lambda s: np.correlate(s[0], s[1, :3], "same")), "n"),
    "correlate_full_swapped": (per_sample(lambda s: ops.correlate(s[0, :2], s[1], mode="full")),
                               ref_per_sample(lambda s: np.correlate(s[0, :2], s[1], "full")), "n"),
    # layout
    "flip": (lambda t: ops.flip(t, axis=2), lambda a: a[..., ::-1], "n"),
    "flip_two": (lambda t: ops.flip(t, axis=(1, 2)), lambda a: a[:, ::-1, ::-1], "n"),
    "rot90": (lambda t: ops.rot90(t, axes=(1, 2)), lambda a: np.rot90(a, 1, (1, 2)), "n"),
    "rot90_k3": (lambda t: ops.rot90(t, k=3, axes=(1, 2)), lambda a: np.rot90(a, 3, (1, 2)), "n"),
    "rot90_k2": (lambda t: ops.rot90(t, k=2, axes=(2, 1)), lambda a: np.rot90(a, 2, (2, 1)), "n"),
    "roll": (lambda t: ops.roll(t, 1, axis=2), lambda a: np.roll(a, 1, 2), "n"),
    "roll_two": (lambda t: ops.roll(t, (-1, 2), axis=(1, 2)), lambda a: np.roll(a, (-1, 2), (1, 2)), "n"),
    "roll_flat": (per_sample(lambda s: ops.roll(s, 5)), ref_per_sample(lambda s: np.roll(s, 5)), "n"),
    "hstack": (lambda t: ops.hstack([t, t * 2.0]), lambda a: np.hstack([a, 2 * a]), "n"),
    "vstack": (per_sample(lambda s: ops.vstack([s, s[0] * 2.0])), ref_per_sample(lambda s: np.vstack([s, 2 * s[0]])),
               "n"),
    "moveaxis": (lambda t: ops.moveaxis(t, 1, 2), lambda a: np.moveaxis(a, 1, 2), "n"),
    "moveaxis_many": (lambda t: ops.moveaxis(t, (2, 1), (1, 2)), lambda a: np.moveaxis(a, (2, 1), (1, 2)), "n"),
    "ravel": (per_sample(lambda s: ops.ravel(s)), ref_per_sample(np.ravel), "n"),
    "append": (lambda t: ops.append(t, t[:, :1] * 3.0, axis=1), lambda a: np.append(a, 3 * a[:, :1], 1), "n"),
    "append_flat": (per_sample(lambda s: ops.append(s, C4)), ref_per_sample(lambda s: np.append(s, C4)), "n"),
    "diff": (lambda t: ops.diff(t), lambda a: np.diff(a), "n"),
    "diff_twice": (lambda t: ops.diff(t, n=2, axis=1), lambda a: np.diff(a, 2, 1), "n"),
    "unstack": (lambda t: ops.unstack(t, axis=1)[2] * 2.0 + ops.unstack(t, num=3, axis=1)[0],
                lambda a: 2 * a[:, 2] + a[:, 0], "n"),
    "take_along_axis": (lambda t: ops.take_along_axis(t, IDX, axis=2), lambda a: np.take_along_axis(
        a, np.broadcast_to(IDX, (B, 3, 1)), 2), "n"),
    "take_along_axis_computed": (lambda t: ops.take_along_axis(t, ops.reshape(ops.argmax(ops.convert_to_tensor(C34),
                                                                                         axis=-1), (1, 3, 1)), axis=2),
                                 lambda a: np.take_along_axis(a, np.broadcast_to(C34.argmax(-1)[None, :, None],
                                                                                 (B, 3, 1)), 2), "n"),
    "select": (lambda t: ops.select([t > 0.5, t < -0.5], [t * 2.0, t * t], default=-1.0),
               lambda a: np.select([a > 0.5, a < -0.5], [2 * a, a * a], -1.0), "n"),
    "meshgrid": (lambda t: t * ops.meshgrid(np.arange(4.0), np.arange(3.0))[0] + ops.meshgrid(
        np.arange(3.0), np.arange(4.0), indexing="ij")[1] * 0.5,
                 lambda a: a * np.meshgrid(np.arange(4.0), np.arange(3.0))[0] + 0.5 * np.meshgrid(
                     np.arange(3.0), np.arange(4.0), indexing="ij")[1], "n"),
    "meshgrid_tensors": (per_sample(lambda s: ops.meshgrid(s[0], s[1, :2])[1] * ops.meshgrid(s[0], s[1, :2])[0]),
                         ref_per_sample(lambda s: np.prod(np.meshgrid(s[0], s[1, :2]), 0)), "n"),
    "linspace": (lambda t: t * ops.linspace(0.0, 1.0, 4), lambda a: a * np.linspace(0, 1, 4), "n"),
    "linspace_int": (lambda t: ops.linspace(t[:, 0] * 5.0, 9.0, 4, dtype="int32", axis=1) + t[:, 1:2],
                     lambda a: np.floor(np.linspace(5 * a[:, 0], 9.0, 4, axis=1)) + a[:, 1:2], "n"),
    "linspace_tensors": (lambda t: ops.moveaxis(ops.linspace(t[:, 0], t[:, 2], num=5, endpoint=False), 0, -1),
                         lambda a: np.moveaxis(np.linspace(a[:, 0], a[:, 2], 5, endpoint=False), 0, -1), "n"),
    "logspace": (lambda t: t * ops.logspace(0.0, 1.0, 4, base=2.0), lambda a: a * np.logspace(0, 1, 4, base=2.0), "n"),
    "empty_array": (lambda t: t + ops.empty((3, 4)) + ops.array(C34), lambda a: a + C34, "n"),
    "bincount_minlength": (lambda t: ops.reshape(ops.bincount(ops.reshape(ops.floor(ops.absolute(t) * 2.0), (-1, 4)),
                                                          weights=ops.reshape(t, (-1, 4)), minlength=4), (-1, 3, 4)),
                           lambda a: np.stack([np.bincount(np.floor(np.abs(r) * 2).astype(int), r, 4)[:4]
                                               for r in a.reshape(-1, 4)]).reshape(-1, 3, 4), "u"),
}


def _inputs(kind, rng):
    x = {"n": lambda: rng.normal(size=(B, 3, 4)),
         "p": lambda: rng.uniform(0.5, 1.5, size=(B, 3, 4)),
         "u": lambda: rng.uniform(-0.6, 0.6, size=(B, 3, 4)),
         "g": lambda: rng.uniform(1.8, 3.0, size=(B, 3, 4))}[kind]()
    w = rng.uniform(0.6, 1.4, size=(3, 4))
    return x, w


@pytest.mark.parametrize("name", sorted(CASES))
def test_forward_and_gradient_in_a_model(name):
    fn, ref, kind = CASES[name]
    rng = np.random.default_rng(zlib.crc32(name.encode()))      # each case its own inputs, in any order
    x, w = _inputs(kind, rng)
    check_op_in_model(fn, ref, x, w, rng, atol=5e-5)


def test_rounding_ties_and_large_values_in_a_graph():
    a = np.array([[-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.49999, -3.7, 1e6 + 0.5, -7e6 - 0.5, 6e6 + 0.5, 2e9, -1e-8,
                   3e38, np.inf, -np.inf, np.nan]], np.float32)
    for op, ref in ((ops.round, np.round), (ops.floor, np.floor), (ops.ceil, np.ceil), (ops.trunc, np.trunc)):
        np.testing.assert_array_equal(_graph(op, a), ref(a))


def _graph(fn, *arrays):
    """fn computed in a graph (not by numpy at once)."""
    from pyggml import _eager
    return _eager.evaluate(fn, [np.asarray(a, np.float32) for a in arrays])


def test_predicates_and_nan_to_num_in_a_graph():
    a = np.array([[np.nan, np.inf, -np.inf, 0.0, -2.0, 3.5, 1e30]], np.float32)
    np.testing.assert_array_equal(_graph(ops.isnan, a), np.isnan(a))
    np.testing.assert_array_equal(_graph(ops.isinf, a), np.isinf(a))
    np.testing.assert_array_equal(_graph(ops.isfinite, a), np.isfinite(a))
    np.testing.assert_array_equal(_graph(lambda t: ops.nan_to_num(t, nan=5.0, posinf=9.0, neginf=-9.0), a),
                                  np.nan_to_num(a, nan=5.0, posinf=9.0, neginf=-9.0))
    np.testing.assert_array_equal(_graph(ops.nan_to_num, a), np.nan_to_num(a))
    # the gradient at finite values is 1, at exactly 0 too
    m = pg.Sequential([pg.Input((7,)), pg.layers.Dense(7, use_bias=False, kernel_initializer="identity")])
    m.add(pg.layers.Lambda(lambda t: ops.nan_to_num(t * 1.0)))
    m.compile(loss="mse", optimizer="sgd")
    x = np.array([[0.0, 1.0, -2.0, 0.0, 3.0, -1.0, 0.5]], np.float32)
    g = next(iter(m.gradients(x, np.zeros_like(x)).values()))
    np.testing.assert_allclose(np.diag(g), 2 * x[0] * x[0] / 7, rtol=1e-6)
    b = np.array([[np.nan, np.inf, 1.0, 1.0, 0.0]], np.float32)
    c = np.array([[np.nan, np.inf, 1.0 + 1e-6, 1.1, 0.0]], np.float32)
    np.testing.assert_array_equal(_graph(ops.isclose, b, c), np.isclose(b, c))
    np.testing.assert_array_equal(_graph(lambda x, y: ops.isclose(x, y, equal_nan=True), b, c),
                                  np.isclose(b, c, equal_nan=True))
    with np.errstate(invalid="ignore"):
        want = np.where(b == 0, 0, c / np.where(b == 0, 1, b))
    np.testing.assert_array_equal(_graph(lambda x, y: ops.divide_no_nan(x, y), c, b), want)
    np.testing.assert_array_equal(_graph(lambda t: ops.any(t, axis=1), np.array([[0.0, 0.0], [0.0, -1.0]])),
                                  [0, 1])
    np.testing.assert_array_equal(_graph(lambda t: ops.all(t, axis=1), np.array([[2.0, 0.0], [1.0, -1.0]])),
                                  [0, 1])


def test_expm1_keeps_its_precision_near_zero_in_a_graph():
    x = np.array([-3.0, -0.5, -1e-3, -3e-7, 0.0, 1e-9, 2e-6, 0.1, 0.49, 0.51, 20.0, 100.0], np.float32)
    got = _graph(ops.expm1, x)
    want = np.expm1(x.astype(np.float64))
    np.testing.assert_allclose(got[:-1], want[:-1], rtol=3e-7)
    assert got[-1] == np.inf


def test_arctan_family_over_their_whole_domains_in_a_graph():
    x = np.linspace(-50, 50, 1001, dtype=np.float32)
    np.testing.assert_allclose(_graph(ops.arctan, x), np.arctan(x.astype(np.float64)), atol=3e-7)
    u = np.linspace(-1, 1, 401, dtype=np.float32)
    np.testing.assert_allclose(_graph(ops.arcsin, u), np.arcsin(u.astype(np.float64)), atol=5e-7)
    np.testing.assert_allclose(_graph(ops.arccos, u), np.arccos(u.astype(np.float64)), atol=5e-7)
    yy, xx = np.meshgrid(np.array([-2.0, -1e-3, 0.0, 0.7, 3.0], np.float32),
                         np.array([-5.0, -0.5, 0.0, 1e-3, 2.0], np.float32))
    np.testing.assert_allclose(_graph(ops.arctan2, yy, xx), np.arctan2(yy, xx), atol=5e-7)
    tiny = np.array([1e-9, -3e-8, 2.5e-6], np.float32)
    np.testing.assert_allclose(_graph(ops.arctan2, tiny, np.ones(3)), tiny, rtol=3e-7)
    np.testing.assert_allclose(_graph(ops.arctan, tiny), tiny, rtol=3e-7)
    np.testing.assert_allclose(_graph(ops.arcsin, tiny), tiny, rtol=3e-7)


def test_sorting_statistics_on_ties_in_a_graph():
    a = np.array([[3.0, 1.0, 3.0, 2.0, 1.0], [5.0, 5.0, 5.0, 5.0, 0.0]], np.float32)
    np.testing.assert_array_equal(_graph(lambda t: ops.median(t, axis=1), a), np.median(a, 1))
    for method in ("linear", "lower", "higher", "midpoint", "nearest"):
        np.testing.assert_allclose(_graph(lambda t, m=method: ops.quantile(t, [0.0, 0.25, 0.5, 0.625, 1.0], axis=1,
                                                                          method=m), a),
                                   np.quantile(a, [0.0, 0.25, 0.5, 0.625, 1.0], axis=1, method=method), rtol=1e-6)
    np.testing.assert_allclose(_graph(lambda t: ops.quantile(t, [0.5, 0.9]), a),
                               np.quantile(a, [0.5, 0.9]), rtol=1e-6)


def test_prod_and_cumprod_keep_signs_and_zeros_in_a_graph():
    a = np.array([[-2.0, 0.0, 3.0, -1.0, 0.5], [-1.0, -2.0, -3.0, 2.0, 1.5]], np.float32)
    np.testing.assert_array_equal(_graph(lambda t: ops.prod(t, axis=1), a), a.prod(1))
    np.testing.assert_array_equal(_graph(lambda t: ops.cumprod(t, axis=1), a), np.cumprod(a, 1))
    np.testing.assert_array_equal(_graph(lambda t: ops.cumprod(t), a), np.cumprod(a))
    np.testing.assert_array_equal(_graph(lambda t: ops.prod(t), a), [a.prod()])


E = np.array([[1.5, -2.25, 0.0, 4.0], [-0.5, 2.5, 3.0, -7.5], [0.25, 1.0, -1.0, 9.0]])
EV = np.array([1.0, 2.0, 4.0])
EI = np.array([[1, 2, 0], [3, 3, 1]])

# ops on arrays: computed at once, numpy's results (dtypes included)
EAGER = [
    (lambda: ops.absolute(E), np.abs(E)), (lambda: ops.all(E, axis=0), np.all(E, 0)),
    (lambda: ops.any(E, axis=1), np.any(E, 1)), (lambda: ops.amax(E, 1), E.max(1)), (lambda: ops.amin(E), E.min()),
    (lambda: ops.append(E, E[:1], axis=0), np.append(E, E[:1], 0)), (lambda: ops.append(EV, 7), np.append(EV, 7)),
    (lambda: ops.arccos(EV / 5), np.arccos(EV / 5)), (lambda: ops.arccosh(EV + 1), np.arccosh(EV + 1)),
    (lambda: ops.arcsin(EV / 5), np.arcsin(EV / 5)), (lambda: ops.arcsinh(E), np.arcsinh(E)),
    (lambda: ops.arctan(E), np.arctan(E)), (lambda: ops.arctan2(E, -E), np.arctan2(E, -E)),
    (lambda: ops.arctanh(EV / 5), np.arctanh(EV / 5)), (lambda: ops.average(E, 1, [1, 2, 3, 4]),
                                                         np.average(E, 1, [1, 2, 3, 4])),
    (lambda: ops.cbrt(E), np.cbrt(E)), (lambda: ops.ceil(E), np.ceil(E)), (lambda: ops.floor(E), np.floor(E)),
    (lambda: ops.round(E), np.round(E)), (lambda: ops.round(E, 1), np.round(E, 1)),
    (lambda: ops.trunc(E), np.trunc(E)), (lambda: ops.conj(E), E), (lambda: ops.real(E), E),
    (lambda: ops.imag(E), np.zeros_like(E)), (lambda: ops.copy(E), E), (lambda: ops.identity(3), np.eye(3)),
    (lambda: ops.cumprod(E, axis=1), np.cumprod(E, 1)), (lambda: ops.diag(EV, 1), np.diag(EV, 1)),
    (lambda: ops.diag(E), np.diag(E)), (lambda: ops.diagflat(E[:2, :2]), np.diagflat(E[:2, :2])),
    (lambda: ops.diagonal(E, 1), np.diagonal(E, 1)), (lambda: ops.trace(E), np.trace(E)),
    (lambda: ops.tri(3, 2, 1), np.tri(3, 2, 1)), (lambda: ops.tril(E, -1), np.tril(E, -1)),
    (lambda: ops.triu(E), np.triu(E)), (lambda: ops.diff(E, 2), np.diff(E, 2)),
    (lambda: ops.exp2(E), np.exp2(E)), (lambda: ops.expm1(E), np.expm1(E)), (lambda: ops.log10(EV), np.log10(EV)),
    (lambda: ops.log2(EV), np.log2(EV)), (lambda: ops.logaddexp(E, 1.0), np.logaddexp(E, 1.0)),
    (lambda: ops.logical_xor(E, E > 1), np.logical_xor(E, E > 1)), (lambda: ops.flip(E), np.flip(E)),
    (lambda: ops.rot90(E), np.rot90(E)), (lambda: ops.roll(E, 2), np.roll(E, 2)),
    (lambda: ops.hstack([E, E]), np.hstack([E, E])), (lambda: ops.vstack([EV, EV]), np.vstack([EV, EV])),
    (lambda: ops.moveaxis(E, 0, -1), E.T), (lambda: ops.ravel(E), E.ravel()), (lambda: ops.prod(E, 0), E.prod(0)),
    (lambda: ops.isfinite(np.array([np.inf, 1.0])), [False, True]),
    (lambda: ops.isinf(np.array([np.inf, 1.0])), [True, False]), (lambda: ops.isnan(np.array([np.nan, 1.0])),
                                                                  [True, False]),
    (lambda: ops.isclose(E, E + 1e-9), np.ones(E.shape, bool)),
    (lambda: ops.nan_to_num(np.array([np.nan, -np.inf]), nan=2.0), np.array([2.0, -np.finfo(np.float64).max])),
    (lambda: ops.divide_no_nan(EV, np.array([0.0, 2.0, 0.0])), [0.0, 1.0, 0.0]),
    (lambda: ops.floor_divide(E, 2.0), np.floor_divide(E, 2.0)), (lambda: ops.mod(EI, 2), np.mod(EI, 2)),
    (lambda: ops.signbit(E), np.signbit(E)), (lambda: ops.outer(EV, EV), np.outer(EV, EV)),
    (lambda: ops.inner(E, E), np.inner(E, E)), (lambda: ops.vdot(E, E), np.vdot(E, E)),
    (lambda: ops.kron(E, EV), np.kron(E, EV)), (lambda: ops.meshgrid(EV, EV[:2])[0], np.meshgrid(EV, EV[:2])[0]),
    (lambda: ops.linspace(0, 1, 5), np.linspace(0, 1, 5)),
    (lambda: ops.linspace(-3, 4, 5, dtype="int32"), np.linspace(-3, 4, 5, dtype="int32")),
    (lambda: ops.logspace(0, 2, 3), np.logspace(0, 2, 3)),
    (lambda: ops.median(E, axis=0), np.median(E, 0)), (lambda: ops.quantile(E, 0.25), np.quantile(E, 0.25)),
    (lambda: ops.tan(E), np.tan(E)), (lambda: ops.take_along_axis(E, EI.T, 1), np.take_along_axis(E, EI.T, 1)),
    (lambda: ops.unstack(E)[1], E[1]), (lambda: ops.select([E > 1], [E], 9.0), np.where(E > 1, E, 9.0)),
    (lambda: ops.empty((2, 3)), np.zeros((2, 3))), (lambda: ops.array([1, 2]), np.array([1, 2])),
    (lambda: ops.ndim(E), 2), (lambda: ops.size(E), 12), (lambda: ops.dtype(EI), "int64"),
    (lambda: ops.is_tensor(E), True), (lambda: ops.is_tensor(3.0), False),
    (lambda: ops.count_nonzero(E, axis=0), np.count_nonzero(E, 0)),
    (lambda: ops.saturate_cast(E * 100, "uint8"), np.clip(E * 100, 0, 255).astype(np.uint8)),
    (lambda: ops.saturate_cast(E, "bool"), E > 0),
    (lambda: ops.digitize(E, [0.0, 1.0, 2.0]), np.digitize(E, [0.0, 1.0, 2.0])),
    (lambda: ops.bincount(np.array([1, 1, 3])), [0, 2, 0, 1]),
    (lambda: ops.bincount(EI, weights=np.ones(EI.shape) * 0.5, minlength=5),
     [[0.5, 0.5, 0.5, 0, 0], [0, 0.5, 0, 1.0, 0]]),
    (lambda: ops.correlate(EV, EV[:2], mode="full"), np.correlate(EV, EV[:2], "full")),
    (lambda: ops.corrcoef(E), np.corrcoef(E)), (lambda: ops.cross(E[:, :3], E[:, 1:]), np.cross(E[:, :3], E[:, 1:])),
    (lambda: ops.bitwise_and(EI, 2), EI & 2), (lambda: ops.bitwise_or(EI, 4), EI | 4),
    (lambda: ops.bitwise_xor(EI, 1), EI ^ 1), (lambda: ops.bitwise_not(EI), ~EI),
    (lambda: ops.bitwise_invert(np.array([True, False])), [False, True]), (lambda: ops.left_shift(EI, 2), EI << 2),
    (lambda: ops.right_shift(EI, 1), EI >> 1), (lambda: ops.bitwise_and(x=EI, y=EI[::-1]), EI & EI[::-1]),
]


@pytest.mark.parametrize("k", range(len(EAGER)))
def test_on_arrays_matches_numpy(k):
    call, want = EAGER[k]
    got = call()
    if isinstance(want, (str, bool, int)) and not isinstance(want, np.ndarray):
        assert got == want and type(got) is type(want)
        return
    want = np.asarray(want)
    assert isinstance(got, np.ndarray) or np.isscalar(got)
    np.testing.assert_allclose(np.asarray(got, np.float64), want.astype(np.float64), rtol=1e-12)
    kind = np.asarray(got).dtype.kind
    assert kind == want.dtype.kind or (want.dtype.kind == "i" and kind in "iu")


def test_integer_results_on_arrays_have_numpy_s_dtypes():
    assert ops.floor_divide(EI, 2).dtype.kind == "i"
    assert ops.isnan(E).dtype == np.bool_
    assert ops.digitize(E, [0.0]).dtype == np.int32
    assert ops.count_nonzero(E).dtype == np.int32
    assert ops.saturate_cast(E, "int8").dtype == np.int8
    assert ops.bitwise_and(EI.astype(np.int32), 3).dtype == np.int32
    assert ops.bincount(np.array([0, 3])).dtype == np.int32
    assert ops.bincount(np.array([0, 3]), weights=np.ones(2, np.float32)).dtype == np.float32
    v = pg.Variable("v", (2, 2), "ones")
    np.testing.assert_array_equal(ops.prod(v), 1.0)
    np.testing.assert_array_equal(ops.tril(v), np.tril(np.ones((2, 2))))


def test_shape_questions_on_graph_tensors_and_functional_nodes():
    from pyggml import _ops_math
    inp = pg.Input((3, 4))
    # (pyggml.ops wraps every op for nodes; these four answer for a node at once)
    assert (_ops_math.ndim(inp), _ops_math.size(inp), _ops_math.dtype(inp)) == (3, None, "float32")
    seen = []

    def probe(t):
        seen.append((ops.ndim(t), ops.size(t), ops.dtype(t), ops.is_tensor(t)))
        return t
    m = _lambda_model(probe, (3, 4))
    m.predict(np.ones((2, 3, 4), np.float32), verbose=0)
    assert seen[-1][0] == 3 and seen[-1][2:] == ("float32", True)
    assert seen[-1][1] % 12 == 0                     # batch x 12 values


def _lambda_model(fn, shape=(3,)):
    m = pg.Sequential([pg.Input(shape), pg.layers.Lambda(fn)])
    m.compile(loss="mse")
    return m


@pytest.mark.parametrize("fn, match", [
    (lambda t: ops.bitwise_and(t, 1), "integer tensors compute as float"),
    (lambda t: ops.left_shift(t, 1), "integer tensors compute as float"),
    (lambda t: ops.bitwise_not(t), "integer tensors compute as float"),
    (lambda t: ops.bincount(t), "pass minlength"),
    (lambda t: ops.quantile(t, ops.sum(t)), "q must be known"),
])
def test_array_only_functions_refuse_graph_tensors(fn, match):
    with pytest.raises(TypeError, match=match):
        _lambda_model(fn).predict(np.ones((2, 3), np.float32), verbose=0)


@pytest.mark.parametrize("call, error, match", [
    (lambda: ops.round(E, 1.5), TypeError, "decimals"),
    (lambda: ops.tri(0), ValueError, "positive"),
    (lambda: ops.tri(3, k=0.5), TypeError, "k must be an int"),
    (lambda: _graph(lambda t: ops.tril(t), np.ones(3)), ValueError, "at least 2 dims"),
    (lambda: _graph(lambda t: ops.tril(t, 1.5), np.ones((2, 2))), TypeError, "k must be an int"),
    (lambda: _graph(lambda t: ops.diag(t), np.ones((2, 2, 2))), ValueError, "1-D or 2-D"),
    (lambda: _graph(lambda t: ops.diagonal(t, 0, 1, 1), np.ones((2, 2))), ValueError, "same axis"),
    (lambda: _graph(lambda t: ops.diagonal(t, 5), np.ones((2, 2))), ValueError, "no diagonal"),
    (lambda: _graph(lambda t: ops.flip(t, 3), np.ones((2, 2))), ValueError, "out of range"),
    (lambda: _graph(lambda t: ops.rot90(t, axes=(0, 0)), np.ones((2, 2))), ValueError, "differ"),
    (lambda: _graph(lambda t: ops.roll(t, 1.5, 0), np.ones((2, 2))), TypeError, "shift"),
    (lambda: _graph(lambda t: ops.roll(t, (1, 2), 0), np.ones((2, 2))), ValueError, "2 shifts for 1 axes"),
    (lambda: _graph(lambda t: ops.moveaxis(t, (0, 1), 0), np.ones((2, 2))), ValueError, "destinations"),
    (lambda: _graph(lambda t: ops.diff(t, 3), np.ones((2, 3))), ValueError, "leave none"),
    (lambda: _graph(lambda t: ops.unstack(t, num=3), np.ones((2, 3))), ValueError, "num=3"),
    (lambda: _graph(lambda t: ops.take_along_axis(t, np.array([[3]]), 1), np.ones((2, 3))), IndexError, "outside"),
    (lambda: _graph(lambda t: ops.take_along_axis(t, np.array([0]), 1), np.ones((2, 3))), ValueError, "2 dims"),
    (lambda: _graph(lambda t: ops.take_along_axis(t, np.array([[0.5]]), 1), np.ones((2, 3))), TypeError, "integers"),
    (lambda: ops.take_along_axis(E, np.array([[0.5]]), 1), TypeError, "integers"),
    (lambda: _graph(lambda t: ops.quantile(t, 1.5), np.ones((2, 3))), ValueError, r"in \[0, 1\]"),
    (lambda: _graph(lambda t: ops.quantile(t, 0.5, method="cubic"), np.ones((2, 3))), ValueError, "method"),
    (lambda: _graph(lambda t: ops.kron(ops.reshape(t, (1, 2, 3)), t), np.ones((2, 3))), ValueError, "1-D or 2-D"),
    (lambda: _graph(lambda t: ops.inner(t, np.ones((2, 2))), np.ones((2, 3))), ValueError, "last axes differ"),
    (lambda: _graph(lambda t: ops.vdot(t, np.ones(2)), np.ones((2, 3))), ValueError, "6 values"),
    (lambda: _graph(lambda t: ops.cross(t, t), np.ones((2, 4))), ValueError, "2 or 3"),
    (lambda: _graph(lambda t: ops.correlate(t, t), np.ones((2, 3))), ValueError, "1-D"),
    (lambda: _graph(lambda t: ops.correlate(t, t, mode="wide"), np.ones(3)), ValueError, "mode"),
    (lambda: _graph(lambda t: ops.corrcoef(ops.reshape(t, (1, 2, 3))), np.ones((2, 3))), ValueError, "1-D or 2-D"),
    (lambda: _graph(lambda t: ops.average(t, axis=1, weights=np.ones(2)), np.ones((2, 3))), ValueError, "2 weights"),
    (lambda: _graph(lambda t: ops.average(t, weights=np.ones(3)), np.ones((2, 3))), ValueError, "1-D along"),
    (lambda: _graph(lambda t: ops.select([t > 0], [t, t]), np.ones(3)), ValueError, "1 conditions for 2"),
    (lambda: _graph(lambda t: ops.digitize(t, [2.0, 1.0]), np.ones(3)), ValueError, "increasing"),
    (lambda: _graph(lambda t: ops.isclose(t, t, rtol=-1.0), np.ones(3)), ValueError, "rtol"),
    (lambda: _graph(lambda t: ops.nan_to_num(t, nan="zero"), np.ones(3)), TypeError, "nan must be a number"),
    (lambda: _graph(lambda t: ops.linspace(t, t, num=0), np.ones(3)), ValueError, "num"),
    (lambda: _graph(lambda t: ops.logspace(t, t, base=-2.0), np.ones(3)), ValueError, "base"),
    (lambda: _graph(lambda t: ops.meshgrid(t, t, indexing="yx"), np.ones(3)), ValueError, "indexing"),
    (lambda: _graph(lambda t: ops.linspace(ops.reshape(t, (1, 1, 2, 2)), 1.0, 3), np.ones(4)), ValueError,
     "at most 4"),
    (lambda: _graph(lambda t: ops.median(ops.reshape(t, (1, 4096)), axis=1), np.ones(4096)), ValueError,
     "compares every pair"),
    (lambda: ops.saturate_cast(E, "string"), TypeError, "dtype"),
    (lambda: ops.bincount(E), TypeError, "integers"),
    (lambda: ops.bincount(np.array([-1, 2])), ValueError, "negative"),
    (lambda: ops.bincount(EI, sparse=True), ValueError, "sparse"),
    (lambda: ops.bincount(EI, weights=np.ones(3)), ValueError, "weights of shape"),
    (lambda: ops.bincount(np.zeros((2, 2, 2), int)), ValueError, "1-D or 2-D"),
    (lambda: ops.bitwise_and(E, 1), TypeError, "integers or booleans"),
    (lambda: ops.left_shift(EI, 1.5), TypeError, "integers or booleans"),
    (lambda: ops.right_shift(EI, -1), ValueError, ">= 0"),
    (lambda: ops.identity(0), ValueError, "positive"),
    (lambda: ops.floor(np.array(["a"])), TypeError, "real numbers"),
])
def test_bad_arguments_are_clear_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_graph_functions_on_constants_compute_on_the_host():
    """A causal mask from constants (keras-io's GPT): computed when the graph is built."""
    def causal(x):
        return x * ops.flip(ops.triu(np.ones((3, 3)), k=0), axis=0)[None]
    m = _lambda_model(causal, (3, 3))
    x = RNG.normal(size=(2, 3, 3)).astype(np.float32)
    np.testing.assert_allclose(m.predict(x, verbose=0), x * np.flip(np.triu(np.ones((3, 3))), 0)[None], rtol=1e-6)
    m.free()


def test_functional_model_with_the_ops_saves_and_loads(tmp_path):
    inp = pg.Input((3, 4))
    h = ops.tril(ops.flip(inp, axis=2))
    h = ops.moveaxis(ops.roll(h, 1, axis=1), 1, 2)
    out = pg.layers.Dense(2)(ops.hstack([ops.cumprod(h, axis=-1), ops.arctan(h)]))
    m = pg.Model(inp, out)
    m.compile(loss="mse", optimizer="adam")
    x = RNG.normal(size=(5, 3, 4)).astype(np.float32)
    y = RNG.normal(size=(5, 8, 2)).astype(np.float32)
    m.fit(x, y, epochs=2, verbose=0)
    want = m.predict(x, verbose=0)
    hh = np.moveaxis(np.roll(np.tril(x[..., ::-1]), 1, 1), 1, 2)
    w = m.layers[-1].get_weights()
    np.testing.assert_allclose(want, np.concatenate([np.cumprod(hh, -1), np.arctan(hh)], 1) @ w[0] + w[1],
                               rtol=1e-4, atol=1e-5)
    for name in ("m.keras", "m.gguf"):
        m.save(tmp_path / name)
        np.testing.assert_array_equal(pg.load_model(tmp_path / name).predict(x, verbose=0), want)


def test_training_through_rounding_and_sorting_ops_moves_the_loss():
    """floor has no gradient, but a model around it trains; median's gradient reaches its input."""
    inp = pg.Input((6,))
    h = pg.layers.Dense(6)(inp)
    out = ops.median(h, axis=-1, keepdims=True) + ops.floor(h[:, :1]) * 0.0
    m = pg.Model(inp, out)
    m.compile(loss="mse", optimizer=pg.optimizers.SGD(0.1) if hasattr(pg, "optimizers") else "sgd")
    x = RNG.normal(size=(32, 6)).astype(np.float32)
    y = np.median(x, axis=1, keepdims=True) * 2.0 + 1.0
    first = m.evaluate(x, y, verbose=0)
    m.fit(x, y, epochs=30, verbose=0)
    assert m.evaluate(x, y, verbose=0) < 0.5 * first


def test_every_op_here_is_tested():
    import pathlib
    import pyggml._ops_math as math_ops
    text = pathlib.Path(__file__).read_text()
    missing = [n for n in math_ops.__all__ if f"ops.{n}(" not in text]
    assert missing == []


def test_diff_of_more_differences_than_entries_is_empty_at_once():
    """numpy loops n times even once nothing is left: n=10**9 hung (the hostile probe's case)."""
    assert ops.diff(np.arange(5.0), n=10**9).shape == (0,)
    assert ops.diff(np.ones((2, 3)), n=2**40, axis=0).shape == (0, 3)
