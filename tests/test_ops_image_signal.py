"""Keras's ops.image.resize / extract_patches, ops.slice, ops.fft / fft2 / ifft2, tensordot,
ops.divide by a broadcast divisor (which trains), the
Keras-named unary ops on arrays and numbers, ops.convert_to_numpy and pg.backend:
forward against float64 numpy references written here (and PyTorch where it has
the op), gradients through a model against central differences of the reference,
eager calls on arrays, and bad arguments."""

import numpy as np
import pytest

import pyggml as pg
from pyggml import ops

from op_checks import OpLayer, check_op_in_model

RNG = np.random.default_rng(11)


# --- independent references ------------------------------------------------------------------------

def _bilinear_axis(n_in, n_out):
    """(n_out, n_in): half-pixel centres, the source clamped at the edges (TF's and PyTorch's
    align_corners=False bilinear, no antialias)."""
    m = np.zeros((n_out, n_in))
    for j in range(n_out):
        src = min(max((j + 0.5) * n_in / n_out - 0.5, 0.0), n_in - 1)
        lo = int(np.floor(src))
        hi = min(lo + 1, n_in - 1)
        f = src - lo
        m[j, lo] += 1 - f
        m[j, hi] += f
    return m


def ref_resize_bilinear(a, h, w):
    mh, mw = _bilinear_axis(a.shape[1], h), _bilinear_axis(a.shape[2], w)
    return np.einsum("ih,nhwc,jw->nijc", mh, a, mw)


def ref_resize_nearest(a, h, w):
    rows = np.minimum(np.floor((np.arange(h) + 0.5) * a.shape[1] / h).astype(int), a.shape[1] - 1)
    cols = np.minimum(np.floor((np.arange(w) + 0.5) * a.shape[2] / w).astype(int), a.shape[2] - 1)
    return a[:, rows][:, :, cols]


def ref_patches(a, size, strides, dilation=(1, 1), padding="valid"):
    """Loops: patch (i, j) holds rows i*sh + di*dh, columns j*sw + dj*dw, (row, col, channel) order."""
    n, h, w, c = a.shape
    (kh, kw), (sh, sw), (dh, dw) = size, strides, dilation
    eh, ew = (kh - 1) * dh + 1, (kw - 1) * dw + 1
    if padding == "valid":
        oh, ow, top, left = (h - eh) // sh + 1, (w - ew) // sw + 1, 0, 0
    else:
        oh, ow = -(-h // sh), -(-w // sw)
        top, left = max((oh - 1) * sh + eh - h, 0) // 2, max((ow - 1) * sw + ew - w, 0) // 2
    out = np.zeros((n, oh, ow, kh * kw * c))
    for i in range(oh):
        for j in range(ow):
            vals = []
            for di in range(kh):
                for dj in range(kw):
                    r, q = i * sh + di * dh - top, j * sw + dj * dw - left
                    vals.append(a[:, r, q, :] if 0 <= r < h and 0 <= q < w else np.zeros((n, c)))
            out[:, i, j, :] = np.concatenate(vals, axis=1)
    return out


def _fft2(a):
    y = np.fft.fft2(a)
    return y.real + 2.0 * y.imag


# --- in a model: forward and gradient ----------------------------------------------------------------

TD_B = RNG.normal(size=(4, 5))
OPS_EYE = ops.eye(3, 4)              # computed at once: arrays that become constants where a tensor meets them
OPS_ONES = ops.ones((3, 4))
TD_C = RNG.normal(size=(4, 3, 2))
TD_D = RNG.normal(size=(2,))


def _pair(t):
    r, i = t
    return r + i * 2.0


# id: (input shape without the batch, op on the tensor, float64 reference)
CASES = {
    "resize_bilinear_up": ((5, 6, 2), lambda t: ops.image.resize(t, (7, 4)), lambda a: ref_resize_bilinear(a, 7, 4)),
    "resize_bilinear_down": ((6, 5, 1), lambda t: ops.image.resize(t, (3, 2)), lambda a: ref_resize_bilinear(a, 3, 2)),
    "resize_nearest": ((5, 4, 2), lambda t: ops.image.resize(t, (3, 6), interpolation="nearest"),
                       lambda a: ref_resize_nearest(a, 3, 6)),
    "resize_crop": ((4, 6, 1), lambda t: ops.image.resize(t, (3, 3), crop_to_aspect_ratio=True),
                    lambda a: ref_resize_bilinear(a[:, :, 1:5], 3, 3)),
    "resize_pad": ((4, 2, 1), lambda t: ops.image.resize(t, (4, 4), pad_to_aspect_ratio=True, fill_value=0.5),
                   lambda a: ref_resize_bilinear(np.pad(a, ((0, 0), (0, 0), (1, 1), (0, 0)), constant_values=0.5),
                                                 4, 4)),
    "resize_channels_first": ((2, 5, 3), lambda t: ops.image.resize(t, (2, 6), data_format="channels_first"),
                              lambda a: ref_resize_bilinear(a.transpose(0, 2, 3, 1), 2, 6).transpose(0, 3, 1, 2)),
    "patches_valid": ((6, 5, 2), lambda t: ops.image.extract_patches(t, 2),
                      lambda a: ref_patches(a, (2, 2), (2, 2))),
    "patches_same_strided": ((5, 6, 2), lambda t: ops.image.extract_patches(t, (2, 3), strides=(2, 1),
                                                                             padding="same"),
                             lambda a: ref_patches(a, (2, 3), (2, 1), padding="same")),
    "patches_dilated": ((6, 6, 1), lambda t: ops.image.extract_patches(t, 2, strides=1, dilation_rate=2),
                        lambda a: ref_patches(a, (2, 2), (1, 1), (2, 2))),
    "slice": ((4, 5), lambda t: ops.slice(t, (0, 1, 2), (2, 2, 3)), lambda a: a[:2, 1:3, 2:5]),
    "slice_rest": ((4, 5), lambda t: ops.slice(t, (0, 2, 0), (2, -1, None)), lambda a: a[:, 2:, :]),
    "fft2": ((3, 4), lambda t: _pair(ops.fft2((t, ops.zeros_like(t)))), _fft2),
    "fft2_complex": ((4, 3), lambda t: _pair(ops.fft2((t, t * t))), lambda a: _pair(
        (np.fft.fft2(a + 1j * a * a).real, np.fft.fft2(a + 1j * a * a).imag))),
    "fft": ((2, 5), lambda t: _pair(ops.fft((t, t * 0.5))), lambda a: _pair(
        (np.fft.fft(a + 0.5j * a).real, np.fft.fft(a + 0.5j * a).imag))),
    "ifft2": ((3, 3), lambda t: _pair(ops.ifft2((t, t * -1.0))), lambda a: _pair(
        (np.fft.ifft2(a - 1j * a).real, np.fft.ifft2(a - 1j * a).imag))),
    "tensordot_1": ((3, 4), lambda t: ops.tensordot(t, TD_B, axes=1), lambda a: np.tensordot(a, TD_B, axes=1)),
    "tensordot_pairs": ((3, 4), lambda t: ops.tensordot(t, TD_C, axes=([2, 1], [0, 1])),
                        lambda a: np.tensordot(a, TD_C, axes=([2, 1], [0, 1]))),
    "tensordot_0": ((3,), lambda t: ops.tensordot(t, TD_D, axes=0), lambda a: np.tensordot(a, TD_D, axes=0)),
    "eager_arrays_meet_tensors": ((3, 4), lambda t: (t - OPS_EYE) * OPS_EYE + (OPS_EYE - t) / (OPS_ONES * 2.0) +
                                  np.maximum(t, OPS_EYE) + OPS_EYE ** 2 * t,
                                  lambda a: (a - np.eye(3, 4)) * np.eye(3, 4) + (np.eye(3, 4) - a) / 2 +
                                  np.maximum(a, np.eye(3, 4)) + np.eye(3, 4) * a),
    "divide_by_a_broadcast_sum": ((3, 4), lambda t: ops.divide(t, ops.sum(t * t, axis=-1, keepdims=True) + 1.0),
                                  lambda a: a / ((a * a).sum(-1, keepdims=True) + 1.0)),
    "unary_keras_args": ((3, 4), lambda t: ops.elu(t, alpha=0.5) + ops.gelu(t, approximate=False) + ops.sigmoid(t),
                         lambda a: np.where(a > 0, a, 0.5 * np.expm1(np.minimum(a, 0))) +
                         a * 0.5 * (1 + np.vectorize(__import__("math").erf)(a / np.sqrt(2))) + 1 / (1 + np.exp(-a))),
    "unary_on_constants": ((3, 4), lambda t: t * ops.sqrt(np.float32(4.0)) + ops.exp(np.zeros((3, 4))),
                           lambda a: 2.0 * a + 1.0),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_forward_and_gradient_in_a_model(name):
    shape, fn, ref = CASES[name]
    x = RNG.normal(size=(2,) + shape)
    w = RNG.uniform(0.6, 1.4, size=shape)
    check_op_in_model(fn, ref, x, w, RNG, atol=3e-5)


# --- on arrays -----------------------------------------------------------------------------------

def test_resize_on_arrays_matches_the_references_and_torch():
    a = RNG.uniform(0, 255, size=(2, 9, 7, 3))
    np.testing.assert_allclose(ops.image.resize(a, (5, 11)), ref_resize_bilinear(a, 5, 11), rtol=1e-5, atol=1e-3)
    one = ops.image.resize(a[0], (4, 4), interpolation="nearest")
    assert one.shape == (4, 4, 3) and one.dtype == np.float32
    np.testing.assert_allclose(one, ref_resize_nearest(a[:1], 4, 4)[0], rtol=1e-6)
    # the same values as the Resizing layer, the host's implementation (bicubic, antialias)
    for kw in ({"interpolation": "bicubic"}, {"antialias": True}, {"interpolation": "lanczos3"}):
        layer = pg.layers.Resizing(4, 5, **kw)
        np.testing.assert_allclose(ops.image.resize(a, (4, 5), **kw), layer(a), rtol=1e-5, atol=1e-3)
    torch = pytest.importorskip("torch")
    t = torch.tensor(a.transpose(0, 3, 1, 2))
    want = torch.nn.functional.interpolate(t, size=(5, 11), mode="bilinear", align_corners=False)
    np.testing.assert_allclose(ops.image.resize(a, (5, 11)), want.numpy().transpose(0, 2, 3, 1), rtol=1e-5,
                               atol=1e-3)
    want = torch.nn.functional.interpolate(t, size=(4, 3), mode="nearest-exact")
    np.testing.assert_allclose(ops.image.resize(a, (4, 3), interpolation="nearest"),
                               want.numpy().transpose(0, 2, 3, 1), rtol=1e-6)


def test_extract_patches_on_arrays_and_torch_unfold():
    a = RNG.normal(size=(2, 8, 6, 3))
    got = ops.image.extract_patches(a, 2)
    assert got.shape == (2, 4, 3, 12)
    np.testing.assert_allclose(got, ref_patches(a, (2, 2), (2, 2)), rtol=1e-6)
    # one image, and a patch: its (row, col, channel) values are the image's block
    p = ops.image.extract_patches(a[0], (3, 2), strides=(2, 2), padding="same")
    assert p.shape == (4, 3, 18)
    np.testing.assert_allclose(p, ref_patches(a[:1], (3, 2), (2, 2), padding="same")[0], rtol=1e-6)
    np.testing.assert_allclose(got[1, 2, 1].reshape(2, 2, 3), a[1, 4:6, 2:4], rtol=1e-6)
    cf = ops.image.extract_patches(a.transpose(0, 3, 1, 2), 2, data_format="channels_first")
    np.testing.assert_allclose(cf, got.transpose(0, 3, 1, 2), rtol=1e-6)
    torch = pytest.importorskip("torch")
    u = torch.nn.functional.unfold(torch.tensor(a.transpose(0, 3, 1, 2)), kernel_size=2, stride=2)
    # unfold: (n, c*kh*kw, L), channel-major; ours: (row, col, channel)
    u = u.numpy().reshape(2, 3, 2, 2, 4, 3).transpose(0, 4, 5, 2, 3, 1).reshape(2, 4, 3, 12)
    np.testing.assert_allclose(got, u, rtol=1e-6)


def test_slice_fft_and_unary_ops_on_arrays():
    a = RNG.normal(size=(3, 4, 5))
    np.testing.assert_array_equal(ops.slice(a, (1, 0, 2), (2, 4, 2)), a[1:3, :, 2:4])
    r, i = ops.fft2((a, np.zeros_like(a)))
    np.testing.assert_allclose(r + 1j * i, np.fft.fft2(a), rtol=1e-5, atol=1e-5)
    r, i = ops.fft((a, a))
    np.testing.assert_allclose(r + 1j * i, np.fft.fft(a + 1j * a), rtol=1e-5, atol=1e-5)
    r, i = ops.ifft2(ops.fft2((a, a)))
    np.testing.assert_allclose(r, a, atol=1e-5)
    np.testing.assert_allclose(i, a, atol=1e-5)
    # keras-io's float(keras.ops.sigmoid(predictions[0][0])) on a numpy scalar
    s = ops.sigmoid(np.float32(0.5))
    assert np.ndim(s) == 0 and abs(float(s) - 1 / (1 + np.exp(-0.5))) < 1e-6
    for name, ref in (("exp", np.exp), ("tanh", np.tanh), ("abs", np.abs), ("relu", lambda v: np.maximum(v, 0)),
                      ("sin", np.sin), ("cos", np.cos), ("softplus", lambda v: np.log1p(np.exp(v))),
                      ("silu", lambda v: v / (1 + np.exp(-v)))):
        np.testing.assert_allclose(getattr(ops, name)(a), ref(a), rtol=2e-5, atol=1e-6, err_msg=name)
    np.testing.assert_allclose(ops.sqrt(np.abs(a)), np.sqrt(np.abs(a)), rtol=1e-6)
    np.testing.assert_allclose(ops.log(2.0), np.log(2.0), rtol=1e-6)
    np.testing.assert_allclose(ops.elu(a, alpha=2.0), np.where(a > 0, a, 2 * np.expm1(np.minimum(a, 0))),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ops.square([1, 2, 3]), [1, 4, 9])
    np.testing.assert_array_equal(ops.convert_to_numpy([[1, 2]]), np.array([[1, 2]]))
    v = pg.Variable("v", (2,), "ones")
    np.testing.assert_array_equal(ops.convert_to_numpy(v), [1.0, 1.0])


def test_eager_results_stay_numpy_arrays():
    e = ops.eye(3)
    assert isinstance(e, np.ndarray)
    s = e + np.ones(3)                    # numpy with numpy: numbers as numpy's
    assert isinstance(s, np.ndarray) and np.array_equal(s, np.eye(3) + 1)
    assert np.array_equal(np.sqrt(e * 4), 2 * np.eye(3)) and (e.sum(), e.max()) == (3.0, 1.0)
    assert np.array_equal(np.asarray(e), np.eye(3))


def test_tensordot_on_arrays():
    a, b = RNG.normal(size=(2, 3, 4)), RNG.normal(size=(4, 3, 5))
    np.testing.assert_allclose(ops.tensordot(a, b, axes=([1, 2], [1, 0])), np.tensordot(a, b, ([1, 2], [1, 0])),
                               rtol=1e-5)
    np.testing.assert_allclose(ops.tensordot(a[0], b[:, 0], axes=1), a[0] @ b[:, 0], rtol=1e-5)
    with pytest.raises(ValueError, match="differ"):
        ops.tensordot(a, b, axes=2)
    with pytest.raises(ValueError, match="between 0 and"):
        ops.tensordot(a, b, axes=4)
    with pytest.raises(TypeError, match="pair"):
        ops.tensordot(a, b, axes="all")
    with pytest.raises(ValueError, match="out of range"):
        ops.tensordot(a, b, axes=([5], [0]))


def test_backend_module():
    assert pg.backend.epsilon() == 1e-7
    assert pg.backend.floatx() == "float32"
    assert pg.backend.image_data_format() == "channels_last"
    assert pg.backend.backend() == "ggml"
    pg.backend.set_epsilon(1e-5)
    try:
        assert pg.backend.epsilon() == 1e-5
    finally:
        pg.backend.set_epsilon(1e-7)
    with pytest.raises(ValueError, match="float32"):
        pg.backend.set_floatx("float64")
    with pytest.raises(ValueError, match="number"):
        pg.backend.set_epsilon(-1)
    with pytest.raises(ValueError, match="channels_last"):
        pg.backend.set_image_data_format("nhwc")
    pg.backend.clear_session()


@pytest.mark.parametrize("call, err, match", [
    (lambda: ops.image.resize(np.zeros((4, 4)), (2, 2)), ValueError, "height, width, channels"),
    (lambda: ops.image.resize(np.zeros((1, 4, 4, 1)), (0, 2)), ValueError, "at least 1"),
    (lambda: ops.image.resize(np.zeros((1, 4, 4, 1)), (2, 2), interpolation="cubic"), ValueError, "interpolation"),
    (lambda: ops.image.resize(np.zeros((1, 4, 4, 1)), (2, 2), crop_to_aspect_ratio=True, pad_to_aspect_ratio=True),
     ValueError, "only one"),
    (lambda: ops.image.resize(np.zeros((1, 4, 4, 1)), (2, 2), fill_mode="reflect"), ValueError, "fill_mode"),
    (lambda: ops.image.resize(np.zeros((1, 4, 4, 1)), "big"), TypeError, "size"),
    (lambda: ops.image.resize(np.array([["a"]]), (2, 2)), TypeError, "real numbers"),
    (lambda: ops.image.resize(np.zeros((1, 4, 4, 1)), (2, 2), data_format="nhwc"), ValueError, "data_format"),
    (lambda: ops.image.extract_patches(np.zeros((1, 4, 4, 1)), 5), ValueError, "do not fit"),
    (lambda: ops.image.extract_patches(np.zeros((1, 4, 4, 1)), 2, padding="full"), ValueError, "padding"),
    (lambda: ops.image.extract_patches(np.zeros((1, 4, 4, 1)), 2, strides=2, dilation_rate=2), ValueError,
     "dilation_rate"),
    (lambda: ops.image.extract_patches(np.zeros((1, 4, 4, 1)), (2, 2, 2)), ValueError, "volumes"),   # a 3-D size: 3-D patches
    (lambda: ops.image.extract_patches(np.zeros((4, 4)), 2), ValueError, "height, width, channels"),
    (lambda: ops.slice(np.zeros((3, 4)), (0, 2), (2, 3)), ValueError, "no block"),
    (lambda: ops.slice(np.zeros((3, 4)), (0,), (2,)), TypeError, "2 ints"),
    (lambda: ops.slice(np.zeros((3, 4)), (0, 0), (0, 2)), ValueError, "empty"),
    (lambda: ops.fft2(np.zeros((3, 4))), TypeError, "pair"),
    (lambda: ops.fft2((np.zeros((3, 4)), np.zeros((4, 3)))), ValueError, "one shape"),
    (lambda: ops.fft2((np.zeros(3), np.zeros(3))), ValueError, "at least 2"),
    (lambda: ops.sigmoid(np.array(["x"])), TypeError, "real numbers"),
    (lambda: ops.gelu(np.zeros(2), approximate="yes"), TypeError, "approximate"),
    (lambda: ops.relu(np.zeros(2), alpha=1.0), TypeError, "unexpected"),
])
def test_bad_arguments(call, err, match):
    with pytest.raises(err, match=match):
        call()


def test_bad_arguments_inside_a_graph_are_python_errors():
    def build(fn):
        m = pg.Sequential([pg.Input((4, 4, 1)), OpLayer(fn)])
        m.compile(loss="mse", optimizer="sgd")
    with pytest.raises(ValueError, match="do not fit"):
        build(lambda t: ops.image.extract_patches(t, 6))
    with pytest.raises(ValueError, match="no block"):
        build(lambda t: ops.slice(t, (0, 3, 0, 0), (1, 2, 4, 1)))
    with pytest.raises(TypeError, match="graph tensor"):
        build(lambda t: ops.convert_to_numpy(t))
