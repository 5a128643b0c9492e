"""More of Keras's ops (pyggml._ops_more): in a model, forward against a float64 numpy
reference and gradients against central differences of it (nan injected where the NaN-aware
ones skip it); in a graph on nan, inf and other edges; on arrays against numpy, edges and
dtypes included; the functions that take arrays only refuse computed graph tensors; bad
arguments; symbolic (functional) use and a GradientTape."""

import math
import warnings
import zlib

import numpy as np
import pytest

import pyggml as pg
from pyggml import ops

from op_checks import check_op_in_model, per_sample, ref_per_sample
from test_ops_math import _inputs, _lambda_model    # test_ops_math's inputs of each kind, its Lambda model

RNG = np.random.default_rng(23)
B = 2                      # the batch of check_op_in_model's inputs

C24 = RNG.normal(size=(2, 4))
NANS = np.zeros((3, 4))
NANS[0, 1] = NANS[1, 3] = NANS[2, 0] = NANS[2, 2] = np.nan      # every row and column keeps a number
NANS2 = np.zeros((3, 4))
NANS2[0, 2] = NANS2[1, 0] = NANS2[2, 1] = np.nan                 # nan where NANS has none
EXPS = np.array([[1, -2, 0, 3], [-1, 2, 5, -3], [0, 1, -4, 2]])
SEQ = np.array([-1.0, -0.25, 0.0, 0.5, 0.5, 1.2])
X4 = np.array([0.0, 0.5, 1.5, 3.0])
erfc_ref = np.vectorize(math.erfc, otypes=[np.float64])


def _quiet(fn):
    def run(a):
        with np.errstate(all="ignore"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                return fn(a)
    return run


def d2s_ref(x, b):
    """depth_to_space by its definition (TensorFlow's DCR order), entry by entry."""
    n, h, w, c = x.shape
    cc = c // (b * b)
    out = np.zeros((n, h * b, w * b, cc))
    for i in range(h * b):
        for j in range(w * b):
            k = (i % b) * b + j % b
            out[:, i, j, :] = x[:, i // b, j // b, k * cc:(k + 1) * cc]
    return out


def s2d_ref(x, b):
    n, hb, wb, c = x.shape
    out = np.zeros((n, hb // b, wb // b, c * b * b))
    for i in range(hb):
        for j in range(wb):
            k = (i % b) * b + j % b
            out[:, i // b, j // b, k * c:(k + 1) * c] = x[:, i, j, :]
    return out


def unravel_ref(a):
    r, c = np.unravel_index(np.floor(np.abs(a) * 13).astype(int), (3, 4))
    return r * 10 + c + a


def nanarg_ref(a, fn):
    filled = np.where(np.isnan(a), -np.inf if fn is np.argmax else np.inf, a)
    return fn(filled, axis=-1)


# id: (op on the (batch, 3, 4) tensor, float64 numpy reference, input kind: n normal, p positive,
#      u inside (-0.6, 0.6))
CASES = {
    # element-wise
    "erfc": (lambda t: ops.erfc(t * 2.0), lambda a: erfc_ref(2 * a), "n"),
    "fabs": (lambda t: ops.fabs(t), np.fabs, "n"),
    "fmax_nan": (lambda t: ops.fmax(t + NANS, ops.flip(t, 2) + NANS2),
                 lambda a: np.fmax(a + NANS, a[..., ::-1] + NANS2), "n"),
    "fmin_nan": (lambda t: ops.fmin(t + NANS, ops.flip(t, 1) * 2.0 + NANS2),
                 lambda a: np.fmin(a + NANS, 2 * a[:, ::-1] + NANS2), "n"),
    "fmod": (lambda t: ops.fmod(t * 5.0, 1.5), lambda a: np.fmod(5 * a, 1.5), "n"),
    "fmod_negative_divisor": (lambda t: ops.fmod(t * 5.0, -t[:, :1] - 1.0), lambda a: np.fmod(5 * a, -a[:, :1] - 1),
                              "p"),
    "heaviside": (lambda t: ops.heaviside(t, 0.5) * t + ops.heaviside(t * 0.0, t),
                  lambda a: np.heaviside(a, 0.5) * a + a, "n"),
    "hypot": (lambda t: ops.hypot(t, ops.flip(t, 1) * 2.0), lambda a: np.hypot(a, 2 * a[:, ::-1]), "n"),
    "sinc": (lambda t: ops.sinc(t * 2.0), lambda a: np.sinc(2 * a), "n"),
    "logaddexp2": (lambda t: ops.logaddexp2(t, ops.flip(t, 2) * 3.0), lambda a: np.logaddexp2(a, 3 * a[..., ::-1]),
                   "n"),
    "isposinf_isneginf": (lambda t: ops.isposinf(ops.exp(t * 100.0)) + ops.isneginf(-ops.exp(t * 100.0)) * 2.0 + t,
                          lambda a: 3 * (100 * a > np.log(np.finfo(np.float32).max)) + a, "n"),
    "isreal_conjugate": (lambda t: ops.isreal(t) * t + ops.conjugate(t) * 2.0, lambda a: 3 * a, "n"),
    "ldexp": (lambda t: ops.ldexp(t, EXPS), lambda a: a * 2.0 ** EXPS, "n"),
    "angle": (lambda t: ops.angle(t) + t, lambda a: np.where(a < 0, np.pi, 0.0) + a, "n"),
    # layout
    "column_stack": (per_sample(lambda s: ops.column_stack([s[0], s[1] * 2.0, s[2]])),
                     ref_per_sample(lambda s: np.column_stack([s[0], 2 * s[1], s[2]])), "n"),
    "column_stack_2d": (per_sample(lambda s: ops.column_stack([s, s[:, 1]])),
                        ref_per_sample(lambda s: np.column_stack([s, s[:, 1]])), "n"),
    "dstack": (per_sample(lambda s: ops.dstack([s, s * 3.0])), ref_per_sample(lambda s: np.dstack([s, 3 * s])), "n"),
    "dstack_1d": (per_sample(lambda s: ops.dstack([s[0], s[2]])), ref_per_sample(lambda s: np.dstack([s[0], s[2]])),
                  "n"),
    "fliplr": (lambda t: ops.fliplr(t) * t, lambda a: np.fliplr(a) * a, "n"),
    "flipud": (per_sample(lambda s: ops.flipud(s) * s), ref_per_sample(lambda s: np.flipud(s) * s), "n"),
    "array_split": (lambda t: ops.concatenate([p * (i + 1.0) for i, p in enumerate(ops.array_split(t, 3, axis=2))],
                                              axis=2),
                    lambda a: np.concatenate([p * (i + 1) for i, p in enumerate(np.array_split(a, 3, axis=2))], 2),
                    "n"),
    "hsplit": (lambda t: ops.hsplit(t, [1])[1] * 2.0, lambda a: 2 * np.hsplit(a, [1])[1], "n"),
    "vsplit": (per_sample(lambda s: ops.vsplit(s, 3)[2] - ops.vsplit(s, 3)[0]),
               ref_per_sample(lambda s: np.vsplit(s, 3)[2] - np.vsplit(s, 3)[0]), "n"),
    "dsplit": (lambda t: ops.dsplit(t, 2)[0] * ops.dsplit(t, 2)[1], lambda a: np.dsplit(a, 2)[0] * np.dsplit(a, 2)[1],
               "n"),
    "empty_like": (lambda t: t + ops.empty_like(t), lambda a: a, "n"),
    "geomspace": (lambda t: t * ops.geomspace(1.0, 8.0, 4), lambda a: a * np.geomspace(1, 8, 4), "n"),
    "geomspace_tensors": (lambda t: ops.geomspace(t[:, :, 0] + 2.0, t[:, :, 1] + 3.0, 4, axis=-1),
                          lambda a: np.geomspace(a[:, :, 0] + 2, a[:, :, 1] + 3, 4, axis=-1), "p"),
    "geomspace_negative_open": (lambda t: ops.geomspace(-t[:, :, 0], -t[:, :, 1] * 4.0, 4, endpoint=False, axis=2),
                                lambda a: np.geomspace(-a[:, :, 0], -4 * a[:, :, 1], 4, endpoint=False, axis=2), "p"),
    "vander": (per_sample(lambda s: ops.vander(s[0], 3)), ref_per_sample(lambda s: np.vander(s[0], 3)), "n"),
    "vander_increasing": (per_sample(lambda s: ops.vander(s[1], increasing=True)),
                          ref_per_sample(lambda s: np.vander(s[1], increasing=True)), "n"),
    "trapezoid": (lambda t: ops.trapezoid(t), lambda a: np.trapezoid(a), "n"),
    "trapezoid_x": (lambda t: ops.trapezoid(t, X4, axis=2), lambda a: np.trapezoid(a, X4, axis=2), "n"),
    "trapezoid_x_tensor": (lambda t: ops.trapezoid(t, ops.cumsum(t * t, axis=1), axis=1),
                           lambda a: np.trapezoid(a, np.cumsum(a * a, 1), axis=1), "n"),
    "trapezoid_dx": (lambda t: ops.trapezoid(t, dx=0.25, axis=1), lambda a: np.trapezoid(a, dx=0.25, axis=1), "n"),
    "ptp": (lambda t: ops.ptp(t, axis=2), lambda a: np.ptp(a, 2), "n"),
    "ptp_keepdims": (lambda t: ops.ptp(t, axis=(1, 2), keepdims=True), lambda a: np.ptp(a, (1, 2), keepdims=True), "n"),
    "allclose": (per_sample(lambda s: ops.allclose(s, ops.round(s, 1), atol=0.051) * ops.sum(s)),
                 ref_per_sample(lambda s: np.atleast_1d(np.allclose(s, np.round(s, 1), atol=0.051) * s.sum())), "u"),
    # indices and counting (no gradient: + t keeps one to compare)
    "unravel_index": (lambda t: (lambda rc: rc[0] * 10.0 + rc[1])(ops.unravel_index(
        ops.floor(ops.absolute(t) * 13.0), (3, 4))) + t, unravel_ref, "u"),
    "searchsorted": (lambda t: ops.searchsorted(SEQ, t) + t, lambda a: np.searchsorted(SEQ, a) + a, "n"),
    "searchsorted_right": (lambda t: ops.searchsorted(SEQ, ops.round(t * 4.0) / 4.0, side="right") + t,
                           lambda a: np.searchsorted(SEQ, np.round(4 * a) / 4, side="right") + a, "n"),
    "isin": (lambda t: ops.isin(ops.round(t * 2.0), [0.0, 1.0]) + t, lambda a: np.isin(np.round(2 * a), [0, 1]) + a,
             "n"),
    "isin_invert": (lambda t: ops.isin(ops.round(t * 2.0), np.array([[-1.0], [2.0]]), invert=True) * t,
                    lambda a: np.isin(np.round(2 * a), [-1, 2], invert=True) * a, "n"),
    "histogram_range": (per_sample(lambda s: ops.histogram(ops.ravel(s), 4, (-1.0, 1.0))[0] + ops.sum(s)),
                        ref_per_sample(lambda s: np.histogram(s.ravel(), 4, (-1, 1))[0] + s.sum()), "n"),
    "histogram_edges": (per_sample(lambda s: ops.histogram(ops.ravel(s), 3)[0] * 10.0 + ops.histogram(ops.ravel(s),
                                                                                                       3)[1][1:]),
                        ref_per_sample(lambda s: 10 * np.histogram(s.ravel(), 3)[0] +
                                       np.histogram(s.ravel(), 3)[1][1:]),
                        "n"),
    "cdist": (lambda t: ops.cdist(t, C24), lambda a: np.sqrt(((a[..., :, None, :] - C24) ** 2).sum(-1)), "n"),
    "cdist_tensors": (per_sample(lambda s: ops.cdist(s[:2], s[1:])),
                      ref_per_sample(lambda s: np.sqrt(((s[:2, None] - s[None, 1:]) ** 2).sum(-1))), "n"),
    # NaN-aware reductions (nan injected after the weights: the gradient there must be 0)
    "nansum": (lambda t: ops.nansum(t + NANS, axis=-1), lambda a: np.nansum(a + NANS, -1), "n"),
    "nansum_all": (per_sample(lambda s: ops.nansum(s + NANS)), ref_per_sample(lambda s: np.atleast_1d(
        np.nansum(s + NANS))), "n"),
    "nanmean": (lambda t: ops.nanmean(t + NANS, axis=1, keepdims=True),
                lambda a: np.nanmean(a + NANS, 1, keepdims=True), "n"),
    "nanmax": (lambda t: ops.nanmax(t + NANS, axis=2), lambda a: np.nanmax(a + NANS, 2), "n"),
    "nanmin": (lambda t: ops.nanmin(t + NANS, axis=1), lambda a: np.nanmin(a + NANS, 1), "n"),
    "nanprod": (lambda t: ops.nanprod(t + NANS, axis=-1), lambda a: np.nanprod(a + NANS, -1), "n"),
    "nanvar": (lambda t: ops.nanvar(t + NANS, axis=2), lambda a: np.nanvar(a + NANS, 2), "n"),
    "nanstd": (lambda t: ops.nanstd(t + NANS, axis=(1, 2), keepdims=True),
               lambda a: np.nanstd(a + NANS, (1, 2), keepdims=True), "n"),
    "nanargmax": (lambda t: ops.cast(ops.nanargmax(t + NANS, axis=-1), "float32") + ops.sum(t, axis=-1),
                  lambda a: nanarg_ref(a + NANS, np.argmax) + a.sum(-1), "n"),
    "nanargmin": (lambda t: ops.cast(ops.nanargmin(t + NANS, axis=1, keepdims=True), "float32") * t,
                  lambda a: np.argmin(np.where(np.isnan(a + NANS), np.inf, a), 1)[:, None] * a, "n"),
    "nancumsum": (lambda t: ops.nancumsum(t + NANS, axis=2), lambda a: np.nancumsum(a + NANS, 2), "n"),
    "nancumprod": (lambda t: ops.nancumprod(t + NANS, axis=1), lambda a: np.nancumprod(a + NANS, 1), "n"),
    "nanmedian": (lambda t: ops.nanmedian(t + NANS, axis=-1), _quiet(lambda a: np.nanmedian(a + NANS, -1)), "n"),
    "nanquantile": (lambda t: ops.nanquantile(t + NANS, 0.3, axis=2), lambda a: np.nanquantile(a + NANS, 0.3, 2), "n"),
    "nanquantile_many": (lambda t: ops.moveaxis(ops.nanquantile(t + NANS, [0.2, 0.9], axis=1, method="midpoint"), 0,
                                                -1),
                         lambda a: np.moveaxis(np.nanquantile(a + NANS, [0.2, 0.9], 1, method="midpoint"), 0, -1), "n"),
    "nanpercentile": (lambda t: ops.nanpercentile(t + NANS2, 75.0, axis=-1, method="nearest", keepdims=True),
                      lambda a: np.nanpercentile(a + NANS2, 75, -1, method="nearest", keepdims=True), "n"),
    "percentile": (lambda t: ops.percentile(t, 30, axis=2), lambda a: np.percentile(a, 30, 2), "n"),
    "percentile_many": (lambda t: ops.moveaxis(ops.percentile(t, [10.0, 50.0], axis=1, method="higher"), 0, -1),
                        lambda a: np.moveaxis(np.percentile(a, [10, 50], 1, method="higher"), 0, -1), "n"),
    # windows: constants
    "windows": (lambda t: t * ops.hanning(4) + t * ops.hamming(4) * 2.0 + ops.bartlett(4) * ops.blackman(4) * t +
                ops.kaiser(4, 3.0), lambda a: a * np.hanning(4) + 2 * a * np.hamming(4) +
                np.bartlett(4) * np.blackman(4) * a + np.kaiser(4, 3.0), "n"),
    # linear algebra
    "matrix_power": (per_sample(lambda s: ops.matrix_power(s[:, :3], 3)),
                     ref_per_sample(lambda s: np.linalg.matrix_power(s[:, :3], 3)), "n"),
    "matrix_power_inverse": (per_sample(lambda s: ops.matrix_power(s[:, 1:] + np.eye(3) * 3.0, -2)),
                             ref_per_sample(lambda s: np.linalg.matrix_power(s[:, 1:] + 3 * np.eye(3), -2)), "n"),
    "logdet": (per_sample(lambda s: ops.logdet(ops.matmul(s, ops.transpose(s)) + np.eye(3))),
               ref_per_sample(lambda s: np.atleast_1d(np.linalg.slogdet(s @ s.T + np.eye(3))[1])), "n"),
    # pixel shuffles and segments
    "depth_to_space": (lambda t: ops.reshape(ops.depth_to_space(ops.reshape(t, (-1, 1, 3, 4)), 2), (-1, 3, 4)),
                       lambda a: d2s_ref(a.reshape(-1, 1, 3, 4), 2).reshape(-1, 3, 4), "n"),
    "depth_to_space_first": (lambda t: ops.reshape(ops.depth_to_space(ops.reshape(t, (-1, 4, 1, 3)), 2,
                                                                      data_format="channels_first"), (-1, 3, 4)),
                             lambda a: d2s_ref(a.reshape(-1, 4, 1, 3).transpose(0, 2, 3, 1), 2).transpose(
                                 0, 3, 1, 2).reshape(-1, 3, 4), "n"),
    "space_to_depth": (lambda t: ops.reshape(ops.space_to_depth(ops.reshape(t, (-1, 2, 6, 1)), 2), (-1, 3, 4)),
                       lambda a: s2d_ref(a.reshape(-1, 2, 6, 1), 2).reshape(-1, 3, 4), "n"),
    "space_to_depth_first": (lambda t: ops.reshape(ops.space_to_depth(ops.reshape(t, (-1, 3, 2, 2)), 2,
                                                                      data_format="channels_first"), (-1, 3, 4)),
                             lambda a: s2d_ref(a.reshape(-1, 3, 2, 2).transpose(0, 2, 3, 1), 2).transpose(
                                 0, 3, 1, 2).reshape(-1, 3, 4), "n"),
    "segment_min": (per_sample(lambda s: ops.segment_min(s, np.array([1, 0, 1]), num_segments=2)),
                    ref_per_sample(lambda s: np.stack([s[1], np.minimum(s[0], s[2])])), "n"),
    "segment_prod": (per_sample(lambda s: ops.segment_prod(s, np.array([0, 2, 0]))),
                     ref_per_sample(lambda s: np.stack([s[0] * s[2], np.ones(4), s[1]])), "n"),
    # angles and a factorisation's inverse
    "deg2rad": (lambda t: ops.deg2rad(t * 90.0), lambda a: np.deg2rad(a * 90), "n"),
    "rad2deg": (lambda t: ops.rad2deg(t), lambda a: np.rad2deg(a), "n"),
    "cholesky_inverse": (per_sample(lambda s: ops.cholesky_inverse(ops.tril(s[:, :3]) + np.eye(3) * 3.0)),
                         ref_per_sample(lambda s: np.linalg.inv((np.tril(s[:, :3]) + 3 * np.eye(3)) @
                                                                (np.tril(s[:, :3]) + 3 * np.eye(3)).T)), "n"),
    "cholesky_inverse_upper": (per_sample(lambda s: ops.cholesky_inverse(ops.triu(s[:, 1:]) + np.eye(3) * 3.0,
                                                                         upper=True)),
                               ref_per_sample(lambda s: np.linalg.inv((np.triu(s[:, 1:]) + 3 * np.eye(3)).T @
                                                                      (np.triu(s[:, 1:]) + 3 * np.eye(3)))), "n"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_forward_and_gradient_in_a_model(name):
    fn, ref, kind = CASES[name]
    rng = np.random.default_rng(zlib.crc32(name.encode()))      # each case its own inputs, in any order
    x, w = _inputs(kind, rng)
    check_op_in_model(fn, ref, x, w, rng, atol=5e-5)


def _graph(fn, *arrays):
    """fn computed in a graph (not by numpy at once)."""
    from pyggml import _eager
    return _eager.evaluate(fn, [np.asarray(a, np.float32) for a in arrays])


def _np_quiet(fn, *args, **kwargs):
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return fn(*args, **kwargs)


NAN_ROWS = np.array([[np.nan, np.nan, np.nan, np.nan], [1.0, np.nan, -2.0, np.inf], [3.0, -1.0, np.nan, 0.5],
                     [-np.inf, 2.0, np.inf, np.nan]], np.float32)


@pytest.mark.parametrize("op, ref", [
    (ops.nansum, np.nansum), (ops.nanmean, np.nanmean), (ops.nanmax, np.nanmax), (ops.nanmin, np.nanmin),
    (ops.nanprod, np.nanprod), (ops.nanvar, np.nanvar), (ops.nanstd, np.nanstd), (ops.nanmedian, np.nanmedian),
])
def test_nan_reductions_on_nan_and_inf_in_a_graph(op, ref):
    """A row of nan alone gives nan (0 for nansum, 1 for nanprod); infinities stay."""
    got = _graph(lambda t: op(t, axis=1), NAN_ROWS)
    np.testing.assert_allclose(got, _np_quiet(ref, NAN_ROWS, axis=1), rtol=1e-6)
    assert np.isnan(got[0]) == np.isnan(_np_quiet(ref, NAN_ROWS[0]))


def test_nan_arg_and_running_functions_on_nan_and_inf_in_a_graph():
    got = _graph(lambda t: ops.nanargmax(t, axis=1), NAN_ROWS)
    np.testing.assert_array_equal(got, [-1, 3, 0, 2])
    np.testing.assert_array_equal(_graph(lambda t: ops.nanargmin(t, axis=1), NAN_ROWS), [-1, 2, 1, 0])
    np.testing.assert_array_equal(_graph(lambda t: ops.nanargmax(t), NAN_ROWS), [7])
    ties = np.array([[1.0, 3.0, np.nan, 3.0], [0.5, -2.0, -2.0, 0.5]], np.float32)      # numpy: the first of ties
    np.testing.assert_array_equal(_graph(lambda t: ops.nanargmax(t, axis=1, keepdims=True), ties), [[1], [0]])
    np.testing.assert_array_equal(_graph(lambda t: ops.nanargmin(t, axis=0), ties), [1, 1, 1, 1])
    np.testing.assert_array_equal(ops.nanargmax(NAN_ROWS, axis=1), [-1, 3, 0, 2])
    assert ops.nanargmin(NAN_ROWS, axis=1).dtype == np.int32
    np.testing.assert_array_equal(_graph(lambda t: ops.nancumsum(t, axis=1), NAN_ROWS),
                                  _np_quiet(np.nancumsum, NAN_ROWS, 1))
    np.testing.assert_array_equal(_graph(lambda t: ops.nancumprod(t, axis=1), NAN_ROWS[1:3]),
                                  np.nancumprod(NAN_ROWS[1:3], 1))
    finite = np.where(np.isinf(NAN_ROWS), 7.0, NAN_ROWS)           # numpy interpolates inf to nan (inf * 0)
    for method in ("linear", "lower", "higher", "midpoint", "nearest"):
        np.testing.assert_allclose(
            _graph(lambda t, m=method: ops.nanquantile(t, [0.0, 0.4, 0.5, 1.0], axis=1, method=m), finite),
            _np_quiet(np.nanquantile, finite, [0.0, 0.4, 0.5, 1.0], axis=1, method=method), rtol=1e-6)
    ends = _graph(lambda t: ops.nanquantile(t, [0.0, 1.0], axis=1), NAN_ROWS)
    np.testing.assert_array_equal(ends[:, 1:], [[-2.0, -1.0, -np.inf], [np.inf, 3.0, np.inf]])
    np.testing.assert_allclose(_graph(lambda t: ops.nanpercentile(t, 50.0), NAN_ROWS), [np.nanmedian(NAN_ROWS)])


def test_element_wise_edges_in_a_graph():
    x = np.array([-np.inf, -30.0, -3.0, -1e-3, 0.0, 1e-6, 0.7, 3.0, 9.0, 12.0, np.inf, np.nan], np.float32)
    np.testing.assert_allclose(_graph(ops.erfc, x), erfc_ref(x.astype(np.float64)), rtol=6e-7, atol=1e-45)
    assert _graph(ops.erfc, np.float32([9.0]))[0] > 1e-37                  # the tail keeps its value
    a = np.array([np.nan, np.nan, 1.0, -np.inf, 2.0, np.inf, -0.0], np.float32)
    b = np.array([np.nan, 3.0, np.nan, 5.0, -np.inf, 1.0, 0.0], np.float32)
    np.testing.assert_array_equal(_graph(ops.fmax, a, b), np.fmax(a, b))
    np.testing.assert_array_equal(_graph(ops.fmin, a, b), np.fmin(a, b))
    np.testing.assert_array_equal(_graph(ops.hypot, a, b), np.hypot(a, b))
    np.testing.assert_array_equal(_graph(ops.isposinf, a), np.isposinf(a))
    np.testing.assert_array_equal(_graph(ops.isneginf, a), np.isneginf(a))
    np.testing.assert_array_equal(_graph(ops.angle, a[:6]), np.angle(a[:6]))
    h = np.array([-2.0, 0.0, 3.0, np.nan, 0.0], np.float32)
    np.testing.assert_array_equal(_graph(lambda t: ops.heaviside(t, np.float32([0.5, 0.5, 0.5, 0.5, np.nan])), h),
                                  np.heaviside(h, [0.5, 0.5, 0.5, 0.5, np.nan]))
    big = np.array([3e38, 1e-30, 3.0, 0.0], np.float32)
    np.testing.assert_allclose(_graph(ops.hypot, big, big[::-1].copy()), np.hypot(big, big[::-1]), rtol=1e-6)
    s = np.array([0.0, 1e-8, 0.5, -2.5, 1000.25, 4097.5, 3.3], np.float32)
    np.testing.assert_allclose(_graph(ops.sinc, s), np.sinc(s.astype(np.float64)), rtol=2e-6, atol=1e-9)
    np.testing.assert_array_equal(_graph(ops.sinc, np.float32([0.0, np.inf, np.nan])), [1.0, np.nan, np.nan])
    # fmod whose rounded quotient is one off, and the sign of the dividend
    n = np.array([1.0, -1.0, 0.3, 7.5, -7.5, 5.0, -5.0, 0.0, 2.0], np.float32)
    d = np.array([0.1, 0.1, 0.1, -2.0, 2.0, 3.0, -3.0, 3.0, 0.0], np.float32)
    np.testing.assert_allclose(_graph(ops.fmod, n, d), _np_quiet(np.fmod, n, d), rtol=1e-6, atol=0)
    np.testing.assert_array_equal(_graph(lambda t: ops.ldexp(t, np.array([1, -126, 300, -300, 127])),
                                         np.float32([3.0, 1.0, 1e-30, 1e30, 1.5])),
                                  [6.0, 2.0 ** -126, np.inf, 0.0, 1.5 * 2.0 ** 127])
    v = np.float32([1.5, -2.0, 0.5])
    np.testing.assert_allclose(_graph(lambda t: ops.vander(t, 7), v), np.vander(v.astype(np.float64), 7), rtol=1e-6)
    np.testing.assert_array_equal(_graph(lambda t: ops.logaddexp2(t, 1.0), np.float32([1.0, 3.0, -200.0])),
                                  np.logaddexp2(np.float32([1.0, 3.0, -200.0]), np.float32(1.0)))


def test_counting_and_indices_in_a_graph():
    seq = np.array([1.0, 2.0, 2.0, 3.0, np.nan], np.float32)
    v = np.array([[0.5, 2.0, 2.5], [3.0, 4.0, np.nan]], np.float32)
    for side in ("left", "right"):
        np.testing.assert_array_equal(_graph(lambda s, t, sd=side: ops.searchsorted(s, t, side=sd), seq, v),
                                      np.searchsorted(seq, v, side=side))
    x1 = np.array([[1.0, 2.0, np.nan], [4.0, 5.0, 1.0]], np.float32)
    np.testing.assert_array_equal(_graph(lambda t: ops.isin(t, np.array([1.0, 5.0, np.nan])), x1),
                                  np.isin(x1, [1.0, 5.0, np.nan]))
    data = np.array([0.0, 1.0, 1.0, 2.5, 4.0, -3.0, np.nan, 4.0], np.float32)
    counts, edges = _graph(lambda t: ops.histogram(t, 4, (0.0, 4.0)), data)
    want = np.histogram(data[~np.isnan(data)], 4, (0.0, 4.0))
    np.testing.assert_array_equal(counts, want[0])
    np.testing.assert_allclose(edges, want[1])
    counts, edges = _graph(lambda t: ops.histogram(t, 5), data[:6])
    want = np.histogram(data[:6], 5)
    np.testing.assert_array_equal(counts, want[0])
    np.testing.assert_allclose(edges, want[1], rtol=1e-6)
    counts, edges = _graph(lambda t: ops.histogram(t, 2), np.ones(3))          # one value: (v - 0.5, v + 0.5)
    np.testing.assert_array_equal(counts, [0, 3])
    np.testing.assert_array_equal(edges, [0.5, 1.0, 1.5])
    got = _graph(lambda t: ops.stack(ops.unravel_index(t, (2, 3, 4))), np.array([0, 5, 23, 17, 12]))
    np.testing.assert_array_equal(got, np.unravel_index([0, 5, 23, 17, 12], (2, 3, 4)))
    np.testing.assert_allclose(_graph(lambda t: ops.cdist(t, t), np.eye(3)), np.sqrt(2) * (1 - np.eye(3)), rtol=1e-7)


def test_gradients_where_the_plain_formulas_give_nan():
    """hypot at (0, 0), cdist of a point to itself, nanstd of equal values: 0, not nan."""
    inp = pg.Input((3,))
    h = pg.layers.Dense(3, use_bias=False, kernel_initializer="identity")(inp)
    out = ops.concatenate([ops.hypot(h, h * 2.0), ops.cdist(ops.reshape(h, (-1, 3, 1)), ops.reshape(h, (-1, 3, 1)))
                           [:, :, 0], ops.nanstd(h * 0.0 + 1.0, axis=1, keepdims=True)], axis=1)
    m = pg.Model(inp, out)
    m.compile(loss="mse", optimizer="sgd")
    x = np.array([[0.0, 0.0, 1.0]], np.float32)
    g = next(iter(m.gradients(x, np.zeros((1, 7), np.float32)).values()))
    assert np.all(np.isfinite(g))
    np.testing.assert_allclose(m.predict(x, verbose=0)[0, :3], np.hypot(x, 2 * x)[0], rtol=1e-6)


E = np.array([[1.5, -2.25, 0.0, 4.0], [-0.5, 2.5, 3.0, -7.5], [0.25, 1.0, -1.0, 9.0]])
EN = np.array([[1.5, np.nan, 0.0, np.inf], [np.nan, np.nan, np.nan, np.nan], [0.25, 1.0, -np.inf, np.nan]])
EV = np.array([1.0, 2.0, 4.0])
EI = np.array([[12, -18, 7], [0, 5, 21]])
EMPTY = np.zeros((0,))
M3 = np.array([[2.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 4.0]])
F64 = np.float64


# ops on arrays: computed at once, numpy's values (the dtypes are checked below)
EAGER = [
    (lambda: ops.erfc(E), erfc_ref(E)), (lambda: ops.erfc(np.array([np.inf, -np.inf, np.nan])), [0.0, 2.0, np.nan]),
    (lambda: ops.fabs(EI), np.fabs(EI)), (lambda: ops.fmax(EN, E), np.fmax(EN, E)),
    (lambda: ops.fmin(EN, EN[::-1]), np.fmin(EN, EN[::-1])), (lambda: ops.fmax(EMPTY, EMPTY), EMPTY),
    (lambda: ops.fmod(E, -1.5), np.fmod(E, -1.5)), (lambda: ops.fmod(-E, 1.5), np.fmod(-E, 1.5)),
    (lambda: ops.fmod(EI, 5), np.fmod(EI, 5)), (lambda: ops.fmod(EI, -5), np.fmod(EI, -5)),
    (lambda: ops.fmod(np.array([1.0, np.inf]), np.array([0.0, 2.0])), [np.nan, np.nan]),
    (lambda: ops.heaviside(E, 0.5), np.heaviside(E, 0.5)), (lambda: ops.hypot(E, E[::-1]), np.hypot(E, E[::-1])),
    (lambda: ops.hypot(np.array([np.inf]), np.array([np.nan])), [np.inf]), (lambda: ops.sinc(E), np.sinc(E)),
    (lambda: ops.logaddexp2(E, -E), np.logaddexp2(E, -E)), (lambda: ops.isneginf(EN), np.isneginf(EN)),
    (lambda: ops.isposinf(EN), np.isposinf(EN)), (lambda: ops.isreal(E), np.ones(E.shape, bool)),
    (lambda: ops.isreal(np.array([1 + 1j, 2 + 0j])), [False, True]), (lambda: ops.conjugate(E), E),
    (lambda: ops.ldexp(E, EXPS), np.ldexp(E, EXPS)),
    (lambda: ops.ldexp(np.array([1.0, 0.0, 3.0]), np.array([2000, 2000, -2000])), [np.inf, 0.0, 0.0]),
    (lambda: ops.angle(E), np.angle(E)), (lambda: ops.angle(np.array([1j, -1 - 1j])), np.angle([1j, -1 - 1j])),
    (lambda: ops.nextafter(np.float32([1.0, 1.0, 0.0]), np.float32([2.0, 0.0, -1.0])),
     np.nextafter(np.float32([1.0, 1.0, 0.0]), np.float32([2.0, 0.0, -1.0]))),
    (lambda: ops.gcd(EI, 6), np.gcd(EI, 6)), (lambda: ops.lcm(EI, np.array([4, 6, 10])), np.lcm(EI, [4, 6, 10])),
    (lambda: ops.column_stack([EV, EV * 2]), np.column_stack([EV, 2 * EV])),
    (lambda: ops.column_stack([E, E]), np.column_stack([E, E])), (lambda: ops.dstack([EV, EV]), np.dstack([EV, EV])),
    (lambda: ops.dstack([E, E * 2]), np.dstack([E, E * 2])), (lambda: ops.fliplr(E), np.fliplr(E)),
    (lambda: ops.flipud(EV), np.flipud(EV)), (lambda: ops.array_split(EV, 2)[0], [1.0, 2.0]),
    (lambda: ops.array_split(E, 4, axis=1)[3], E[:, 3:]), (lambda: ops.array_split(EV, 5)[4], EMPTY),
    (lambda: ops.hsplit(E, 2)[1], np.hsplit(E, 2)[1]), (lambda: ops.hsplit(EV, [1])[1], [2.0, 4.0]),
    (lambda: ops.vsplit(E, [1, 2])[2], E[2:]),
    (lambda: ops.dsplit(E.reshape(3, 2, 2), 2)[1], E.reshape(3, 2, 2)[..., 1:]),
    (lambda: ops.empty_like(EI), np.zeros_like(EI)), (lambda: ops.empty_like(E, dtype="int32").shape, (3, 4)),
    (lambda: ops.geomspace(1, 1000, 4), [1.0, 10.0, 100.0, 1000.0]),
    (lambda: ops.geomspace(-2.0, -32.0, 3, endpoint=False), np.geomspace(-2, -32, 3, endpoint=False)),
    (lambda: ops.geomspace(EV, EV * 4, 3, axis=1), np.geomspace(EV, 4 * EV, 3, axis=1)),
    (lambda: ops.geomspace(1, 100, 3, dtype="int32"), [1, 10, 100]),
    (lambda: ops.vander(EV), np.vander(EV)), (lambda: ops.vander(np.array([2, 3]), 3, True), [[1, 2, 4], [1, 3, 9]]),
    (lambda: ops.vander(EV, 0).shape, (3, 0)), (lambda: ops.trapezoid(E), np.trapezoid(E)),
    (lambda: ops.trapezoid(E, EV, axis=0), np.trapezoid(E, EV, axis=0)),
    (lambda: ops.trapezoid(EV[:1]), 0.0), (lambda: ops.ptp(E, axis=0), np.ptp(E, 0)), (lambda: ops.ptp(EI), 39),
    (lambda: ops.allclose(E, E + 1e-9), True), (lambda: ops.allclose(EN, EN), False),
    (lambda: ops.allclose(EN, EN, equal_nan=True), True),
    (lambda: ops.unravel_index(np.array([5, 7, 0]), (3, 3))[1], [2, 1, 0]),
    (lambda: ops.unravel_index(5, (3, 3)), (1, 2)),
    (lambda: ops.searchsorted(EV, np.array([0.5, 2.0, 9.0])), [0, 1, 3]),
    (lambda: ops.searchsorted(EV, 2.0, side="right"), 2), (lambda: ops.searchsorted(EV, EMPTY), EMPTY),
    (lambda: ops.isin(E, [0.0, 9.0]), np.isin(E, [0.0, 9.0])),
    (lambda: ops.isin(EN, EN, invert=True), np.isin(EN, EN, invert=True)),
    (lambda: ops.histogram(E.ravel(), 3)[0], np.histogram(E.ravel(), 3)[0]),
    (lambda: ops.histogram(E.ravel(), 3)[1], np.histogram(E.ravel(), 3)[1]),
    (lambda: ops.histogram(EMPTY, 2, (0, 1))[0], [0, 0]),
    (lambda: ops.unique(np.array([3, 1, 3, 2])), [1, 2, 3]),
    (lambda: ops.unique(np.array([3.0, np.nan, 1.0, np.nan]), return_counts=True)[1], [1, 1, 1, 1]),
    (lambda: ops.unique(np.array([[1, 2], [1, 2], [0, 1]]), axis=0, return_inverse=True)[1], [1, 1, 0]),
    (lambda: ops.unique(np.array([4, 2, 4]), return_index=True, return_counts=True, size=4),
     ([2, 4, 0, 0], [1, 0, 0, 0], [1, 2, 0, 0])),
    (lambda: ops.unique(np.array([4, 2, 4, 7]), size=2, fill_value=-1), [2, 4]),
    (lambda: ops.unique(np.array([4, 4]), size=3, fill_value=-1), [4, -1, -1]), (lambda: ops.unique(EMPTY), EMPTY),
    (lambda: ops.cdist(E, E[:2]), np.sqrt(((E[:, None] - E[None, :2]) ** 2).sum(-1))),
    (lambda: ops.cdist(np.stack([E, E]), E[:1]), np.sqrt(((E[:, None] - E[None, :1]) ** 2).sum(-1))[None].repeat(2, 0)),
    (lambda: ops.nansum(EN, axis=1), np.nansum(EN, 1)), (lambda: ops.nansum(EI), np.sum(EI)),
    (lambda: ops.nanmean(EN, axis=1), _np_quiet(np.nanmean, EN, 1)),
    (lambda: ops.nanmax(EN, axis=1), _np_quiet(np.nanmax, EN, 1)),
    (lambda: ops.nanmin(EN, axis=0, keepdims=True), _np_quiet(np.nanmin, EN, 0, keepdims=True)),
    (lambda: ops.nanprod(EN, axis=1), _np_quiet(np.nanprod, EN, 1)), (lambda: ops.nanvar(EN[:, :3], axis=1),
                                                           _np_quiet(np.nanvar, EN[:, :3], 1)),
    (lambda: ops.nanstd(EN[:, :3]), _np_quiet(np.nanstd, EN[:, :3])), (lambda: ops.nanargmax(EN, axis=1), [3, -1, 1]),
    (lambda: ops.nanargmin(EN, axis=1), [2, -1, 2]), (lambda: ops.nanargmax(EI), 5), (lambda: ops.nanargmax(EN), 3),
    (lambda: ops.nancumsum(EN, axis=1), _np_quiet(np.nancumsum, EN, 1)),
    (lambda: ops.nancumprod(EN), _np_quiet(np.nancumprod, EN)),
    (lambda: ops.nanmedian(EN, axis=1), _np_quiet(np.nanmedian, EN, 1)),
    (lambda: ops.nanquantile(EN, [0.25, 0.5], axis=0, method="nearest"),
     _np_quiet(np.nanquantile, EN, [0.25, 0.5], axis=0, method="nearest")),
    (lambda: ops.nanpercentile(EN, 40), np.nanpercentile(EN, 40)),
    (lambda: ops.percentile(E, [25, 75], axis=1), np.percentile(E, [25, 75], axis=1)),
    (lambda: ops.percentile(E, 90, method="inverted_cdf"), np.percentile(E, 90, method="inverted_cdf")),
    (lambda: ops.hanning(5), np.hanning(5)), (lambda: ops.hamming(6), np.hamming(6)),
    (lambda: ops.bartlett(1), [1.0]), (lambda: ops.blackman(0), EMPTY), (lambda: ops.kaiser(7, 4.5), np.kaiser(7, 4.5)),
    (lambda: ops.matrix_power(M3, 5), np.linalg.matrix_power(M3, 5)),
    (lambda: ops.matrix_power(M3, -3), np.linalg.matrix_power(M3, -3)),
    (lambda: ops.matrix_power(np.stack([M3, M3.T * 2]), 0), np.stack([np.eye(3)] * 2)),
    (lambda: ops.matrix_power(np.array([[1, 1], [1, 0]]), 10), [[89, 55], [55, 34]]),
    (lambda: ops.pinv(E), np.linalg.pinv(E)), (lambda: ops.pinv(E, rcond=0.5), np.linalg.pinv(E, rcond=0.5)),
    (lambda: ops.logdet(M3), np.linalg.slogdet(M3)[1]), (lambda: ops.logdet(np.stack([M3, 2 * M3])),
                                                         np.linalg.slogdet(np.stack([M3, 2 * M3]))[1]),
    (lambda: ops.matrix_rank(np.array([[1.0, 2.0], [2.0, 4.0]])), 1), (lambda: ops.matrix_rank(np.stack([M3, 0 * M3])),
                                                                     [3, 0]),
    (lambda: ops.matrix_rank(M3, tol=2.5), np.linalg.matrix_rank(M3, tol=2.5)),
    (lambda: ops.depth_to_space(np.arange(48.0).reshape(1, 2, 2, 12), 2), d2s_ref(np.arange(48.0).reshape(1, 2, 2, 12),
                                                                                  2)),
    (lambda: ops.space_to_depth(np.arange(96.0).reshape(2, 4, 4, 3), 2), s2d_ref(np.arange(96.0).reshape(2, 4, 4, 3),
                                                                                  2)),
    (lambda: ops.depth_to_space(np.arange(72.0).reshape(2, 9, 2, 2), 3, "channels_first"),
     d2s_ref(np.arange(72.0).reshape(2, 9, 2, 2).transpose(0, 2, 3, 1), 3).transpose(0, 3, 1, 2)),
    (lambda: ops.space_to_depth(ops.depth_to_space(np.arange(96.0).reshape(2, 8, 2, 3), 2, "channels_first"), 2,
                                "channels_first"), np.arange(96.0).reshape(2, 8, 2, 3)),
    (lambda: ops.segment_min(E, np.array([1, 1, 3]), 4),
     [[np.finfo(np.float32).max] * 4, E[:2].min(0), [np.finfo(np.float32).max] * 4, E[2]]),
    (lambda: ops.segment_prod(E, np.array([0, -1, 0])), [E[0] * E[2]]),
]


@pytest.mark.parametrize("k", range(len(EAGER)))
def test_on_arrays_matches_numpy(k):
    call, want = EAGER[k]
    with warnings.catch_warnings():
        warnings.simplefilter("error")                      # nan results come quietly, as documented
        got = call()
    if isinstance(want, (bool, int, tuple)) and not (isinstance(want, tuple) and isinstance(want[0], list)):
        if isinstance(want, bool):
            assert got is want
        else:
            np.testing.assert_array_equal(got, want)
        return
    wants = want if isinstance(want, tuple) else (want,)
    gots = got if isinstance(want, tuple) else (got,)
    for g, w in zip(gots, wants):
        w = np.asarray(w, np.float64)
        assert isinstance(g, np.ndarray)
        assert g.shape == w.shape
        # float results are float32, so the comparison is to float32's precision
        np.testing.assert_allclose(np.asarray(g, np.float64), w, rtol=3e-7 if g.dtype == np.float32 else 0,
                                   atol=0)


def test_result_dtypes_on_arrays():
    assert ops.erfc(E).dtype == np.float32 and ops.hypot(EI, EI).dtype == np.float32
    assert ops.fabs(EI).dtype == np.float32 and ops.fmod(EI, 5).dtype == EI.dtype
    assert ops.fmax(EI, 3).dtype == EI.dtype and ops.fmax(E, 3).dtype == np.float32
    assert ops.isneginf(E).dtype == np.bool_ and ops.isin(E, [1.0]).dtype == np.bool_
    assert ops.isreal(E).dtype == np.bool_ and ops.allclose(E, E) is True
    assert ops.ldexp(EV, 2).dtype == np.float32 and ops.nextafter(EV, 0.0).dtype == np.float32
    assert ops.gcd(EI.astype(np.int32), 4).dtype == np.int32
    assert ops.fliplr(EI).dtype == EI.dtype and ops.column_stack([EI, EI]).dtype == EI.dtype
    assert ops.hsplit(EI, 3)[0].dtype == EI.dtype and ops.empty_like(EI).dtype == EI.dtype
    assert ops.geomspace(1.0, 2.0, 3).dtype == np.float32 and ops.geomspace(1, 9, 2, dtype="int32").dtype == np.int32
    assert ops.vander(np.array([2, 3])).dtype.kind == "i" and ops.ptp(EI).dtype.kind == "i"
    assert ops.searchsorted(EV, EV).dtype == np.int32
    assert all(i.dtype == np.int32 for i in ops.unravel_index(np.array([3]), (2, 2)))
    counts, edges = ops.histogram(E.ravel())
    assert counts.dtype == np.int32 and edges.dtype == np.float32 and counts.sum() == 12
    vals, idx, inv, cnt = ops.unique(EI, return_index=True, return_inverse=True, return_counts=True)
    assert vals.dtype == EI.dtype and idx.dtype == inv.dtype == cnt.dtype == np.int32
    assert ops.nansum(EN).dtype == np.float32 and ops.nanargmax(EN).dtype == np.int32
    assert ops.nanmean(EI).dtype == np.float32 and ops.nanmax(EI).dtype == EI.dtype
    assert ops.nancumsum(EI).dtype.kind == "i" and ops.nancumsum(E, dtype="float64").dtype == np.float64
    assert ops.hanning(4).dtype == np.float32 and ops.matrix_rank(M3).dtype == np.int32
    assert ops.matrix_power(M3, 2).dtype == np.float32 and ops.pinv(M3).dtype == np.float32
    assert ops.segment_min(EI, np.array([0, 0])).dtype.kind == "i"       # Keras keeps integers
    assert ops.depth_to_space(np.zeros((1, 1, 1, 4), np.int32), 2).dtype == np.int32
    v = pg.Variable("v", (2, 2), "ones")
    np.testing.assert_array_equal(ops.nansum(v), 4.0)
    np.testing.assert_array_equal(ops.fliplr(v), np.ones((2, 2)))


@pytest.mark.parametrize("fn, match", [
    (lambda t: ops.nextafter(t, 2.0), "bits of float32"),
    (lambda t: ops.gcd(t, 2), "integer tensors compute as float"),
    (lambda t: ops.lcm(3, t), "integer tensors compute as float"),
    (lambda t: ops.unique(t), "number of distinct values depends on the values"),
    (lambda t: ops.pinv(t), "singular value decomposition"),
    (lambda t: ops.matrix_rank(t), "singular value decomposition"),
    (lambda t: ops.hanning(ops.sum(t)), "window's length"),
    (lambda t: ops.ldexp(t, ops.round(t)), "exponent x2 must be known"),
    (lambda t: ops.percentile(t, ops.sum(t)), "q must be known"),
    (lambda t: ops.nanquantile(t, ops.sum(t)), "q must be known"),
    (lambda t: ops.hsplit(t, ops.round(t)), "must be known"),
])
def test_array_only_functions_refuse_graph_tensors(fn, match):
    with pytest.raises(TypeError, match=match):
        _lambda_model(fn).predict(np.ones((2, 3), np.float32), verbose=0)


def test_array_only_functions_compute_known_values_in_a_graph():
    """Inside a graph, values known when it is built give constants."""
    def fn(t):
        return t * ops.unique(np.array([2.0, 1.0, 2.0, 3.0])) + ops.pinv(np.eye(3) * 2.0)[0] + \
            ops.cast(ops.matrix_rank(np.eye(3)), "float32")
    m = _lambda_model(fn)
    x = RNG.normal(size=(2, 3)).astype(np.float32)
    np.testing.assert_allclose(m.predict(x, verbose=0), x * [1.0, 2.0, 3.0] + [0.5, 0.0, 0.0] + 3.0, rtol=1e-6)


@pytest.mark.parametrize("call, error, match", [
    (lambda: ops.ldexp(E, 1.5), TypeError, "exponent x2 must be integers"),
    (lambda: _graph(lambda t: ops.ldexp(t, np.array([0.5])), np.ones(2)), TypeError, "must be integers"),
    (lambda: ops.gcd(E, 2), TypeError, "integers"),
    (lambda: ops.lcm(np.array([True]), 2), TypeError, "booleans"),
    (lambda: ops.nextafter(np.array(["a"]), 1.0), TypeError, "real numbers"),
    (lambda: ops.angle(np.array(["a"])), TypeError, "expected numbers"),
    (lambda: _graph(lambda t: ops.hypot(t, np.ones(3)), np.ones(2)), ValueError, "do not broadcast"),
    (lambda: _graph(lambda t: ops.column_stack([t, np.ones((3, 2))]), np.ones((2, 2))), ValueError, "do not join"),
    (lambda: _graph(lambda t: ops.column_stack(t), np.ones(2)), TypeError, "list or tuple"),
    (lambda: _graph(lambda t: ops.dstack([]), np.ones(2)), ValueError, "at least one"),
    (lambda: ops.fliplr(EV), ValueError, "at least 2 dims"),
    (lambda: _graph(lambda t: ops.fliplr(t), np.ones(2)), ValueError, "at least 2 dims"),
    (lambda: ops.vsplit(EV, 1), ValueError, "at least 2 dims"),
    (lambda: ops.dsplit(E, 1), ValueError, "at least 3 dims"),
    (lambda: ops.hsplit(E, 3), ValueError, "4 entries do not split into 3 equal"),
    (lambda: ops.hsplit(E, [1.5]), TypeError, "1-D list of ints"),
    (lambda: _graph(lambda t: ops.hsplit(t, [2, 1]), np.ones((2, 4))), ValueError, "increasing"),
    (lambda: _graph(lambda t: ops.hsplit(t, [0, 2]), np.ones((2, 4))), ValueError, "empty piece"),
    (lambda: ops.array_split(E, [1, 2]), TypeError, "must be an int"),
    (lambda: ops.array_split(E, 0), ValueError, "positive int"),
    (lambda: ops.array_split(E, 2, axis=0.5), TypeError, "axis must be an int"),
    (lambda: _graph(lambda t: ops.array_split(t, 3), np.ones(2)), ValueError, "empty piece"),
    (lambda: _graph(lambda t: ops.array_split(t, 2, axis=2), np.ones((2, 2))), ValueError, "out of range"),
    (lambda: ops.empty_like(E, dtype="text"), TypeError, "dtype"),
    (lambda: ops.geomspace(0.0, 1.0, 3), ValueError, "must not be 0"),
    (lambda: ops.geomspace(1.0, 2.0, 0), ValueError, "num must be a positive int"),
    (lambda: _graph(lambda t: ops.geomspace(t, t, num=2.5), np.ones(2)), ValueError, "num"),
    (lambda: ops.vander(E), ValueError, "1-D"),
    (lambda: ops.vander(EV, N=2.0), TypeError, "N must be an int"),
    (lambda: ops.vander(EV, N=-1), ValueError, ">= 0"),
    (lambda: ops.vander(EV, increasing=1), TypeError, "True or False"),
    (lambda: _graph(lambda t: ops.vander(t, 0), np.ones(2)), ValueError, "empty"),
    (lambda: _graph(lambda t: ops.trapezoid(t, np.ones(3)), np.ones((2, 2))), ValueError, "3 points"),
    (lambda: _graph(lambda t: ops.trapezoid(t, dx="a"), np.ones((2, 2))), TypeError, "dx must be a number"),
    (lambda: ops.allclose(E, E, rtol=-1.0), ValueError, "rtol"),
    (lambda: ops.allclose(E, E, equal_nan=None), TypeError, "equal_nan"),
    (lambda: ops.unravel_index(np.array([9]), (3, 3)), ValueError, "outside"),
    (lambda: ops.unravel_index(np.array([0.5]), (3, 3)), TypeError, "integers"),
    (lambda: ops.unravel_index(0, (3, 0)), ValueError, "positive ints"),
    (lambda: _graph(lambda t: ops.unravel_index(t, (5000, 5000)), np.ones(2)), ValueError, "2\\*\\*24"),
    (lambda: ops.searchsorted(E, 1.0), ValueError, "1-D"),
    (lambda: ops.searchsorted(EV, 1.0, side="middle"), ValueError, "side"),
    (lambda: _graph(lambda t: ops.searchsorted(t, np.ones((2, 2, 2, 2))), np.ones(2)), ValueError, "at most 4"),
    (lambda: ops.isin(E, E, invert="yes"), TypeError, "invert"),
    (lambda: ops.histogram(E), ValueError, "1-D"),
    (lambda: ops.histogram(EV, bins=2.5), TypeError, "bins must be an int"),
    (lambda: ops.histogram(EV, bins=0), ValueError, "positive int"),
    (lambda: ops.histogram(EV, range=(2.0, 1.0)), ValueError, "high end"),
    (lambda: ops.histogram(EV, range=(0.0, np.inf)), ValueError, "two finite numbers"),
    (lambda: ops.histogram(EN[0]), ValueError, "pass range"),
    (lambda: ops.unique(E, size=0), ValueError, "size"),
    (lambda: ops.unique(E, return_counts=1), TypeError, "True or False"),
    (lambda: ops.unique(E, axis=3), ValueError, "out of range"),
    (lambda: ops.cdist(EV, E), ValueError, r"\(\.\.\., m, d\)"),
    (lambda: ops.cdist(E, E[:, :2]), ValueError, "must match"),
    (lambda: _graph(lambda t: ops.cdist(t, t), np.ones((2, 2, 2, 2))), ValueError, "one batch axis"),
    (lambda: _graph(lambda t: ops.nansum(t, axis=2), np.ones((2, 2))), ValueError, "out of range"),
    (lambda: _graph(lambda t: ops.nanargmax(t, axis=1.5), np.ones((2, 2))), TypeError, "axis must be an int"),
    (lambda: _graph(lambda t: ops.nanquantile(t, 1.5), np.ones((2, 2))), ValueError, r"in \[0, 1\]"),
    (lambda: _graph(lambda t: ops.nanpercentile(t, 150.0), np.ones((2, 2))), ValueError, r"in \[0, 100\]"),
    (lambda: _graph(lambda t: ops.percentile(t, -1.0), np.ones((2, 2))), ValueError, r"in \[0, 100\]"),
    (lambda: _graph(lambda t: ops.nanquantile(t, 0.5, method="weibull"), np.ones((2, 2))), ValueError, "method"),
    (lambda: ops.percentile(E, 101), ValueError, "0, 100"),
    (lambda: _graph(lambda t: ops.nanmedian(ops.reshape(t, (1, 4096))), np.ones(4096)), ValueError,
     "compares every pair"),
    (lambda: ops.hanning(4.0), TypeError, "window's length, an int"),
    (lambda: ops.kaiser(4, "x"), TypeError, "beta must be a number"),
    (lambda: _graph(lambda t: t + ops.bartlett(0), np.ones(2)), ValueError, "empty"),
    (lambda: ops.hamming(2 ** 40), ValueError, "too large"),
    (lambda: ops.matrix_power(E, 2), ValueError, "square"),
    (lambda: ops.matrix_power(M3, 1.0), TypeError, "n must be an int"),
    (lambda: ops.matrix_power(np.zeros((2, 2)), -1), ValueError, "Singular"),
    (lambda: _graph(lambda t: ops.matrix_power(ops.reshape(t, (9, 9)), -1), np.ones(81)), TypeError, "8 x 8"),
    (lambda: ops.pinv(EV), ValueError, "matrix"),
    (lambda: ops.pinv(E, rcond=-1.0), ValueError, "rcond"),
    (lambda: ops.logdet(E), ValueError, "square"),
    (lambda: _graph(lambda t: ops.logdet(t), np.ones((2, 3))), ValueError, "square"),
    (lambda: ops.matrix_rank(EV), ValueError, "matrix"),
    (lambda: ops.depth_to_space(np.zeros((1, 2, 2, 6)), 2), ValueError, "blocks of 2 x 2"),
    (lambda: ops.depth_to_space(np.zeros((1, 2, 2, 4)), 1), ValueError, "at least 2"),
    (lambda: ops.depth_to_space(np.zeros((1, 2, 2, 4)), 2.0), TypeError, "block_size must be an int"),
    (lambda: ops.space_to_depth(np.zeros((1, 3, 2, 4)), 2), ValueError, "multiples of block_size"),
    (lambda: ops.space_to_depth(np.zeros((2, 2, 4)), 2), ValueError, "4-D"),
    (lambda: ops.space_to_depth(np.zeros((1, 2, 2, 4)), 2, data_format="NHWC"), ValueError, "data_format"),
    (lambda: _graph(lambda t: ops.depth_to_space(ops.reshape(t, (1, 1, 1, 6)), 2), np.ones(6)), ValueError,
     "blocks of 2 x 2"),
    (lambda: ops.segment_min(E, np.array([0, 1])), ValueError, "one id per row"),
    (lambda: ops.segment_prod(E, np.array([0.0, 1.0, 1.0])), TypeError, "integers"),
    (lambda: _graph(lambda t: ops.segment_min(t, ops.cast(t[:, 0], "int32")), np.ones((2, 2))), ValueError,
     "num_segments must be given"),
    (lambda: ops.erfc(np.array(["a"])), TypeError, "real numbers"),
])
def test_bad_arguments_are_clear_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_symbolic_use_in_a_functional_model(tmp_path):
    x = pg.Input((4,))
    m = pg.Model(x, ops.hypot(x, x))
    a = RNG.normal(size=(3, 4)).astype(np.float32)
    np.testing.assert_allclose(m.predict(a, verbose=0), np.hypot(a, a), rtol=1e-6)
    inp = pg.Input((2, 2, 4))
    h = ops.depth_to_space(inp, 2)                              # (4, 4, 1)
    h = ops.nanmean(ops.fmax(h, ops.fliplr(h)), axis=-1)
    parts = ops.array_split(h, 2, axis=1)
    out = pg.layers.Dense(3)(ops.concatenate([ops.reshape(p, (-1, 8)) for p in parts], axis=1))
    model = pg.Model(inp, out)
    model.compile(loss="mse", optimizer="adam")
    xs = RNG.normal(size=(5, 2, 2, 4)).astype(np.float32)
    model.fit(xs, RNG.normal(size=(5, 3)).astype(np.float32), epochs=1, verbose=0)
    want = model.predict(xs, verbose=0)
    hh = d2s_ref(xs, 2)[..., 0]
    hh = np.fmax(hh, hh[:, ::-1])                                 # fliplr: axis 1
    w = model.layers[-1].get_weights()
    feats = np.concatenate([p.reshape(5, 8) for p in np.array_split(hh, 2, axis=1)], axis=1)
    np.testing.assert_allclose(want, feats @ w[0] + w[1], rtol=1e-4, atol=1e-5)
    model.save(tmp_path / "m.keras")
    np.testing.assert_array_equal(pg.load_model(tmp_path / "m.keras").predict(xs, verbose=0), want)


def test_gradient_tape_through_the_ops():
    x = np.array([[3.0, 1.0, -4.0], [0.5, 2.0, -1.5]], np.float32)
    skip = np.array([[0.0, np.nan, 0.0], [0.0, 0.0, np.nan]], np.float32)
    with pg.GradientTape() as tape:
        tape.watch(x)
        y = ops.nansum(ops.hypot(x, 4.0) * ops.erfc(x * 0.0) + skip)         # erfc(0) = 1
    (g,) = tape.gradient(y, [x])
    np.testing.assert_allclose(g, np.where(np.isnan(skip), 0.0, x / np.hypot(x, 4.0)), rtol=1e-5)
    assert float(np.asarray(y).ravel()[0]) == pytest.approx(np.nansum(np.hypot(x, 4.0) + skip), rel=1e-6)


def test_training_through_a_nan_aware_reduction_moves_the_loss():
    """nan in the inputs is skipped by nanmean: its gradient stays finite and the model trains."""
    inp = pg.Input((6,))
    h = pg.layers.Dense(6)(inp)
    out = ops.nanmean(h + np.where(np.arange(6) % 3 == 0, np.nan, 0.0), axis=-1, keepdims=True)
    m = pg.Model(inp, out)
    m.compile(loss="mse", optimizer=pg.optimizers.SGD(0.1))
    x = RNG.normal(size=(32, 6)).astype(np.float32)
    y = x[:, 1:3].sum(1, keepdims=True) + 1.0
    first = m.evaluate(x, y, verbose=0)
    m.fit(x, y, epochs=30, verbose=0)
    last = m.evaluate(x, y, verbose=0)
    assert np.isfinite(last) and last < 0.5 * first


def test_angles_and_shifts_on_arrays():
    np.testing.assert_allclose(ops.deg2rad(np.array([180, 90])), [np.pi, np.pi / 2], rtol=1e-6)
    assert np.asarray(ops.deg2rad(np.array([180, 90]))).dtype == np.float32       # integers give floats
    np.testing.assert_allclose(ops.rad2deg(np.float32(np.pi)), 180.0, rtol=1e-6)
    np.testing.assert_array_equal(ops.bitwise_left_shift(np.array([1, 3]), 2), [4, 12])
    np.testing.assert_array_equal(ops.bitwise_right_shift(np.array([16, 7]), np.array([2, 1])), [4, 3])
    a = np.array([[4.0, 2.0], [2.0, 3.0]])
    np.testing.assert_allclose(ops.cholesky_inverse(np.linalg.cholesky(a)), np.linalg.inv(a), rtol=1e-5)
    with pytest.raises(TypeError, match="upper"):
        ops.cholesky_inverse(np.eye(2), upper="yes")


def test_every_op_here_is_tested():
    import pathlib
    import pyggml._ops_more as more_ops
    text = pathlib.Path(__file__).read_text()
    missing = [n for n in more_ops.__all__ if f"ops.{n}(" not in text]
    assert missing == []
    assert not set(more_ops.__all__) & set(dir(pg.core.ops))


def test_i0_is_numpys_on_arrays_and_in_a_graph():
    x = np.array([-5.0, -1.0, 0.0, 0.3, 3.75, 9.0], np.float32)
    np.testing.assert_allclose(np.asarray(ops.i0(x)), np.i0(x.astype(np.float64)), rtol=2e-7)
    inp = pg.Input((6,))
    m = pg.Model(inp, pg.layers.Lambda(ops.i0)(inp))
    np.testing.assert_allclose(m.predict(x[None], verbose=0)[0], np.i0(x.astype(np.float64)), rtol=1e-6)


def test_view_as_complex_and_view_as_real_on_arrays():
    pairs = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    c = ops.view_as_complex(pairs)
    assert c.dtype == np.complex64
    np.testing.assert_array_equal(c, [1 + 2j, 3 + 4j])
    np.testing.assert_array_equal(ops.view_as_real(c), pairs)
    with pytest.raises(ValueError, match=r"\(\.\.\., 2\)"):
        ops.view_as_complex(np.ones((2, 3), np.float32))
    inp = pg.Input((2,))
    with pytest.raises(TypeError, match="no complex tensors"):
        pg.Model(inp, pg.layers.Lambda(ops.view_as_complex)(inp))
