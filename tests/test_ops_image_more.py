"""Keras's ops.image color, crop/pad, blur and sampling functions (rgb_to_grayscale, rgb_to_hsv,
hsv_to_rgb, crop_images, pad_images, gaussian_blur, map_coordinates, affine_transform,
perspective_transform, elastic_transform): on arrays against float64 references written here
(colorsys, loops over kernels, sampling from an image padded by numpy's pad modes) and against
scipy.ndimage / PyTorch where installed; in a model, forward and gradient against central
differences of those references; on symbolic inputs of a functional model; on a GradientTape; and
bad arguments."""

import colorsys
import itertools

import numpy as np
import pytest

import pyggml as keras
from pyggml import ops

from op_checks import OpLayer, check_op_in_model

RNG = np.random.default_rng(23)
IMG = ops.image


# --- independent references ------------------------------------------------------------------------

def ref_gray(a, axis=-1):
    r, g, b = (np.take(a, i, axis=axis) for i in range(3))
    return np.expand_dims(0.2989 * r + 0.5870 * g + 0.1140 * b, axis)


def ref_hsv(a):
    """colorsys per pixel, channels last."""
    return np.array([colorsys.rgb_to_hsv(*p) for p in a.reshape(-1, 3)]).reshape(a.shape)


def ref_rgb(a):
    return np.array([colorsys.hsv_to_rgb(*p) for p in a.reshape(-1, 3)]).reshape(a.shape)


def _gauss(size, sigma):
    x = np.arange(size) - (size - 1) / 2
    k = np.exp(-x * x / (2 * sigma * sigma))
    return k / k.sum()


def ref_blur(a, kernel_size, sigma):
    """(n, h, w, c): the 2-D kernel outer(height's, width's), Keras's reading of kernel_size and
    sigma as (x, y), zeros outside, loops over the kernel's taps."""
    k2 = np.outer(_gauss(kernel_size[1], sigma[1]), _gauss(kernel_size[0], sigma[0]))
    kh, kw = k2.shape
    top, left = (kh - 1) // 2, (kw - 1) // 2
    n, h, w, c = a.shape
    p = np.zeros((n, h + kh - 1, w + kw - 1, c))
    p[:, top:top + h, left:left + w] = a
    out = np.zeros_like(a, dtype=np.float64)
    for i in range(kh):
        for j in range(kw):
            out += k2[i, j] * p[:, i:i + h, j:j + w]
    return out


_PAD_MODES = {"constant": "constant", "nearest": "edge", "wrap": "wrap", "mirror": "reflect", "reflect": "symmetric"}


def ref_sample(a, coords, order, mode, fill=0.0):
    """a (any rank) read at coords (a.ndim, ...): a padded far enough by numpy's pad mode, then the
    nearest value (halves up) or the multilinear interpolation of the 2**rank neighbours."""
    coords = np.asarray(coords, np.float64)
    margin = int(np.ceil(np.abs(coords).max())) + 3
    kw = {"constant_values": fill} if mode == "constant" else {}
    p = np.pad(a.astype(np.float64), margin, mode=_PAD_MODES[mode], **kw)
    c = coords + margin
    if order == 0:
        return p[tuple(np.floor(ci + 0.5).astype(int) for ci in c)]
    low = np.floor(c).astype(int)
    frac = c - low
    out = np.zeros(coords.shape[1:])
    for corner in itertools.product((0, 1), repeat=a.ndim):
        wt = np.ones(coords.shape[1:])
        for d, bit in enumerate(corner):
            wt = wt * (frac[d] if bit else 1 - frac[d])
        out += wt * p[tuple(low[d] + bit for d, bit in enumerate(corner))]
    return out


def ref_projective(a, transforms, order, mode, fill=0.0):
    """(n, h, w, c) images, transforms (n or 1, 8) in TF's convention, loops over output pixels."""
    n, h, w, c = a.shape
    out = np.zeros(a.shape)
    for b in range(n):
        a0, a1, a2, b0, b1, b2, c0, c1 = transforms[b if len(transforms) > 1 else 0]
        ys, xs = np.zeros((h, w)), np.zeros((h, w))
        for y in range(h):
            for x in range(w):
                k = c0 * x + c1 * y + 1
                xs[y, x], ys[y, x] = (a0 * x + a1 * y + a2) / k, (b0 * x + b1 * y + b2) / k
        for ch in range(c):
            out[b, :, :, ch] = ref_sample(a[b, :, :, ch], np.stack([ys, xs]), order, mode, fill)
    return out


def homography_svd(start, end):
    """The transform taking end points to start points: the null space of the DLT system (SVD),
    scaled so its last entry is 1 (a second way to the same 8 numbers)."""
    rows = []
    for (sx, sy), (ex, ey) in zip(start, end):
        rows.append([ex, ey, 1, 0, 0, 0, -sx * ex, -sx * ey, -sx])
        rows.append([0, 0, 0, ex, ey, 1, -sy * ex, -sy * ey, -sy])
    v = np.linalg.svd(np.array(rows, np.float64))[2][-1]
    return v[:8] / v[8]


def ref_elastic(a, alpha, sigma, seed, order, mode, fill=0.0):
    """(n, h, w, c): Keras's recipe with numpy's generator of ``seed`` (dx drawn, then dy)."""
    n, h, w, c = a.shape
    rng = np.random.default_rng(seed)
    size = int(6 * sigma) | 1
    fields = [ref_blur(rng.normal(size=(n, h, w))[..., None] * sigma, (size, size), (sigma, sigma))[..., 0]
              for _ in range(2)]
    dx, dy = fields
    y, x = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
    out = np.zeros(a.shape)
    for b in range(n):
        coords = np.stack([y + alpha * dy[b], x + alpha * dx[b]])
        for ch in range(c):
            out[b, :, :, ch] = ref_sample(a[b, :, :, ch], coords, order, mode, fill)
    return out


# --- in a model: forward and gradient --------------------------------------------------------------

T_ZOOM = np.array([0.8, 0.15, 0.6, -0.1, 1.1, -0.4, 0.0, 0.0])
T_PROJ = np.array([0.9, 0.1, 0.3, 0.05, 1.05, -0.2, 0.03, -0.02])
MAP_COORDS = np.stack([np.array([[0, 0, 0], [1, 1, 1]], float),            # batch index (output batch 2)
                       RNG.uniform(-1.5, 5.5, size=(2, 3)), RNG.uniform(-1.5, 4.5, size=(2, 3))])
PTS_START = np.array([[0, 0], [0, 4], [5, 0], [5, 4]], float)
PTS_END = np.array([[0.4, -0.3], [0.2, 4.5], [4.6, 0.3], [5.3, 3.6]])
H_PERSP = homography_svd(PTS_START, PTS_END)
CONST_IMG = RNG.uniform(size=(4, 5, 3))


def _cf(fn):
    """A channels-last reference applied to channels-first (n, c, h, w) arrays."""
    return lambda a: fn(a.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)


# id: (input shape without the batch, op on the tensor, float64 reference, input sampler)
CASES = {
    "grayscale": ((4, 5, 3), lambda t: IMG.rgb_to_grayscale(t), ref_gray, None),
    "grayscale_channels_first": ((3, 4, 5), lambda t: IMG.rgb_to_grayscale(t, data_format="channels_first"),
                                 lambda a: ref_gray(a, axis=1), None),
    "grayscale_of_a_constant": ((4, 5, 3), lambda t: t * IMG.rgb_to_grayscale(CONST_IMG),
                                lambda a: a * ref_gray(CONST_IMG), None),
    "rgb_to_hsv": ((3, 4, 3), lambda t: IMG.rgb_to_hsv(t), ref_hsv, "unit"),
    "rgb_to_hsv_channels_first": ((3, 2, 4), lambda t: IMG.rgb_to_hsv(t, data_format="channels_first"),
                                  _cf(ref_hsv), "unit"),
    "hsv_to_rgb": ((3, 4, 3), lambda t: IMG.hsv_to_rgb(t), ref_rgb, "unit"),
    "crop": ((6, 5, 2), lambda t: IMG.crop_images(t, 1, 2, target_height=3, right_cropping=1),
             lambda a: a[:, 1:4, 2:4], None),
    "crop_channels_first": ((2, 6, 5), lambda t: IMG.crop_images(t, top_cropping=2, bottom_cropping=1,
                                                                  left_cropping=0, target_width=3,
                                                                  data_format="channels_first"),
                            lambda a: a[:, :, 2:5, 0:3], None),
    "pad": ((3, 4, 2), lambda t: IMG.pad_images(t, 1, 2, bottom_padding=2, target_width=7),
            lambda a: np.pad(a, [(0, 0), (1, 2), (2, 1), (0, 0)]), None),
    "pad_channels_first": ((2, 3, 4), lambda t: IMG.pad_images(t, target_height=5, bottom_padding=0, left_padding=1,
                                                               right_padding=0, data_format="channels_first"),
                           lambda a: np.pad(a, [(0, 0), (0, 0), (2, 0), (1, 0)]), None),
    "gaussian_blur": ((5, 6, 2), lambda t: IMG.gaussian_blur(t), lambda a: ref_blur(a, (3, 3), (1.0, 1.0)), None),
    "gaussian_blur_uneven": ((6, 5, 1), lambda t: IMG.gaussian_blur(t, kernel_size=(4, 3), sigma=(1.5, 0.7)),
                             lambda a: ref_blur(a, (4, 3), (1.5, 0.7)), None),
    "gaussian_blur_channels_first": ((2, 5, 4), lambda t: IMG.gaussian_blur(t, (5, 5), (2.0, 2.0),
                                                                            data_format="channels_first"),
                                     _cf(lambda a: ref_blur(a, (5, 5), (2.0, 2.0))), None),
    "map_coordinates_linear": ((6, 5), lambda t: IMG.map_coordinates(t, MAP_COORDS, 1, fill_value=0.5),
                               lambda a: ref_sample(a, MAP_COORDS, 1, "constant", 0.5), None),
    "map_coordinates_nearest_wrap": ((6, 5), lambda t: IMG.map_coordinates(t, MAP_COORDS, 0, fill_mode="wrap"),
                                     lambda a: ref_sample(a, MAP_COORDS, 0, "wrap"), None),
    "affine_bilinear_constant": ((5, 6, 2), lambda t: IMG.affine_transform(t, T_ZOOM, fill_value=0.25),
                                 lambda a: ref_projective(a, T_ZOOM[None], 1, "constant", 0.25), None),
    "affine_nearest_reflect": ((5, 6, 2), lambda t: IMG.affine_transform(t, T_ZOOM, "nearest", "reflect"),
                               lambda a: ref_projective(a, T_ZOOM[None], 0, "reflect"), None),
    "affine_mirror_projective_cf": ((2, 5, 6), lambda t: IMG.affine_transform(t, T_PROJ[None], fill_mode="mirror",
                                                                              data_format="channels_first"),
                                    _cf(lambda a: ref_projective(a, T_PROJ[None], 1, "mirror")), None),
    "perspective": ((5, 6, 2), lambda t: IMG.perspective_transform(t, PTS_START, PTS_END, fill_value=0.5),
                    lambda a: ref_projective(a, H_PERSP[None], 1, "constant", 0.5), None),
    "elastic_seeded": ((5, 6, 2), lambda t: IMG.elastic_transform(t, alpha=3.0, sigma=1.0, seed=7),
                       lambda a: ref_elastic(a, 3.0, 1.0, 7, 1, "reflect"), None),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_forward_and_gradient_in_a_model(name):
    shape, fn, ref, sampler = CASES[name]
    x = RNG.uniform(0.05, 0.7, size=(2,) + shape) if sampler == "unit" else RNG.normal(size=(2,) + shape)
    w = RNG.uniform(0.6, 1.4, size=shape)
    check_op_in_model(fn, ref, x, w, RNG, atol=3e-5)


# --- on arrays -------------------------------------------------------------------------------------

def test_color_conversions_on_arrays():
    a = RNG.uniform(size=(2, 5, 6, 3))
    a[0, 0, 0] = (0.3, 0.3, 0.3)                     # gray: hue and saturation 0
    a[0, 0, 1] = (0.0, 0.0, 0.0)
    a[0, 0, 2] = (0.9, 0.1, 0.5)                     # red largest, blue above green: hue wraps below 1
    gray = IMG.rgb_to_grayscale(a)
    assert gray.shape == (2, 5, 6, 1) and gray.dtype == np.float32
    np.testing.assert_allclose(gray, ref_gray(a), rtol=1e-6)
    np.testing.assert_allclose(IMG.rgb_to_grayscale(a[1]), ref_gray(a[1]), rtol=1e-6)
    np.testing.assert_array_equal(IMG.rgb_to_grayscale(gray), gray)          # one channel: unchanged
    cf = IMG.rgb_to_grayscale(a.transpose(0, 3, 1, 2), data_format="channels_first")
    np.testing.assert_allclose(cf, gray.transpose(0, 3, 1, 2), rtol=1e-6)
    np.testing.assert_allclose(IMG.rgb_to_grayscale((a * 255).astype(np.uint8)),
                               ref_gray((a * 255).astype(np.uint8).astype(float)), rtol=1e-6)
    hsv = IMG.rgb_to_hsv(a)
    assert hsv.dtype == np.float32
    np.testing.assert_allclose(hsv, ref_hsv(a), atol=1e-6)
    assert hsv[0, 0, 0, 0] == 0 and hsv[0, 0, 0, 1] == 0 and 0.9 < hsv[0, 0, 2, 0] < 1
    np.testing.assert_allclose(IMG.hsv_to_rgb(hsv), a, atol=1e-6)
    h = RNG.uniform(size=(4, 3, 3))
    h[0, 0, 0] = 1.0                                 # hue 1 is red again
    np.testing.assert_allclose(IMG.hsv_to_rgb(h), ref_rgb(h), atol=1e-6)
    np.testing.assert_allclose(IMG.rgb_to_hsv(h.transpose(2, 0, 1), data_format="channels_first"),
                               ref_hsv(h).transpose(2, 0, 1), atol=1e-6)


def test_crop_and_pad_on_arrays():
    a = np.arange(2 * 6 * 5 * 3).reshape(2, 6, 5, 3)
    c = IMG.crop_images(a, 1, 2, 1, 1)                       # Keras's positional order: top, left, bottom, right
    np.testing.assert_array_equal(c, a[:, 1:5, 2:4])
    assert c.dtype == a.dtype                                # integers stay integers
    np.testing.assert_array_equal(IMG.crop_images(a[0], target_height=2, bottom_cropping=1, left_cropping=4,
                                                  right_cropping=0), a[0, 3:5, 4:5])
    f = a.astype(np.float64)
    got = IMG.crop_images(f.transpose(0, 3, 1, 2), 0, 0, target_height=3, target_width=2,
                          data_format="channels_first")
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, f[:, :3, :2].transpose(0, 3, 1, 2))
    assert IMG.crop_images(a, 6, 0, target_height=0, target_width=5).shape == (2, 0, 5, 3)
    p = IMG.pad_images(a, 2, 3, target_height=10, target_width=9)
    np.testing.assert_array_equal(p, np.pad(a, [(0, 0), (2, 2), (3, 1), (0, 0)]))
    p = IMG.pad_images(f[0].transpose(2, 0, 1), bottom_padding=1, target_height=8, left_padding=0,
                       right_padding=2, data_format="channels_first")
    np.testing.assert_array_equal(p, np.pad(f[0].transpose(2, 0, 1), [(0, 0), (1, 1), (0, 2)]))


def test_gaussian_blur_on_arrays_and_torch():
    a = RNG.normal(size=(2, 9, 8, 3))
    np.testing.assert_allclose(IMG.gaussian_blur(a), ref_blur(a, (3, 3), (1.0, 1.0)), rtol=1e-5, atol=1e-6)
    got = IMG.gaussian_blur(a[0], kernel_size=(5, 2), sigma=(0.8, 2.5))
    np.testing.assert_allclose(got, ref_blur(a[:1], (5, 2), (0.8, 2.5))[0], rtol=1e-5, atol=1e-6)
    # a kernel far larger than the image: zeros around it, the weights still those of the whole kernel
    np.testing.assert_allclose(IMG.gaussian_blur(a[:, :3, :2], 31, 4.0), ref_blur(a[:, :3, :2], (31, 31), (4, 4)),
                               rtol=1e-5, atol=1e-6)
    ones = IMG.gaussian_blur(np.ones((1, 7, 7, 1)), (3, 3), (1.0, 1.0))
    assert abs(ones[0, 3, 3, 0] - 1.0) < 1e-6 and ones[0, 0, 0, 0] < 0.8           # sums to 1; zeros outside
    torch = pytest.importorskip("torch")
    k = np.outer(_gauss(5, 2.0), _gauss(3, 0.5))                                      # kernel_size (3, 5)
    t = torch.tensor(a.transpose(0, 3, 1, 2))
    want = torch.nn.functional.conv2d(t, torch.tensor(k)[None, None].repeat(3, 1, 1, 1), padding=(2, 1), groups=3)
    np.testing.assert_allclose(IMG.gaussian_blur(a, (3, 5), (0.5, 2.0)), want.numpy().transpose(0, 2, 3, 1),
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", ["constant", "nearest", "wrap", "mirror", "reflect"])
def test_map_coordinates_on_arrays_against_the_reference_and_scipy(mode):
    a = RNG.normal(size=(6, 7))
    coords = RNG.uniform(-8, 14, size=(2, 5, 9))
    coords[:, 0, :4] = [[-0.5, 2.0, 5.5, 6.0], [0.5, -1.0, 6.5, 3.0]]   # halves round up; whole points
    for order in (0, 1):
        got = IMG.map_coordinates(a, coords, order, fill_mode=mode, fill_value=-2.0)
        assert got.shape == (5, 9) and got.dtype == np.float32
        np.testing.assert_allclose(got, ref_sample(a, coords, order, mode, -2.0), rtol=1e-5, atol=1e-6)
    # 1-D and 3-D inputs
    v = RNG.normal(size=(5,))
    c1 = RNG.uniform(-3, 8, size=(1, 11))
    np.testing.assert_allclose(IMG.map_coordinates(v, c1, 1, fill_mode=mode), ref_sample(v, c1, 1, mode),
                               rtol=1e-5, atol=1e-6)
    b = RNG.normal(size=(3, 4, 5))
    c3 = RNG.uniform(-2, 6, size=(3, 4, 2))
    np.testing.assert_allclose(IMG.map_coordinates(b, c3, 1, fill_mode=mode), ref_sample(b, c3, 1, mode),
                               rtol=1e-5, atol=1e-6)
    # scipy's grid modes (without the hand-set row: scipy rounds -0.5 away from zero, Keras's numpy
    # backend, which shifts the points to positive ones first, and this op round halves up)
    nd = pytest.importorskip("scipy.ndimage")
    scipy_mode = {"constant": "grid-constant", "wrap": "grid-wrap"}.get(mode, mode)
    for order in (0, 1):
        want = nd.map_coordinates(a, coords[:, 1:], order=order, mode=scipy_mode, cval=-2.0)
        np.testing.assert_allclose(IMG.map_coordinates(a, coords[:, 1:], order, fill_mode=mode, fill_value=-2.0),
                                   want, rtol=1e-5, atol=1e-6)


def test_affine_transform_on_arrays():
    a = RNG.normal(size=(2, 7, 8, 3))
    t = np.array([[1.1, 0.2, -1.0, -0.15, 0.9, 1.5, 0.0, 0.0], [0.7, 0.0, 2.0, 0.0, 1.3, -2.0, 0.0, 0.0]])
    for interpolation, order in (("bilinear", 1), ("nearest", 0)):
        for mode in ("constant", "nearest", "wrap", "mirror", "reflect"):
            got = IMG.affine_transform(a, t, interpolation, mode, fill_value=0.5)
            np.testing.assert_allclose(got, ref_projective(a, t, order, mode, 0.5), rtol=1e-5, atol=1e-6,
                                       err_msg=f"{interpolation} {mode}")
    # one transform for a batch, one image, channels first, a projective row (c0, c1)
    np.testing.assert_allclose(IMG.affine_transform(a, t[0]), ref_projective(a, t[:1], 1, "constant"), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(IMG.affine_transform(a[1], t[1:]), ref_projective(a[1:], t[1:], 1, "constant")[0],
                               rtol=1e-5, atol=1e-6)
    got = IMG.affine_transform(a.transpose(0, 3, 1, 2), T_PROJ, data_format="channels_first")
    np.testing.assert_allclose(got, ref_projective(a, T_PROJ[None], 1, "constant").transpose(0, 3, 1, 2),
                               rtol=1e-5, atol=1e-6)
    # the identity and a whole-pixel shift move values exactly
    ident = np.array([1.0, 0, 0, 0, 1, 0, 0, 0])
    np.testing.assert_array_equal(IMG.affine_transform(a, ident), a.astype(np.float32))
    shifted = IMG.affine_transform(a, [1.0, 0, 2, 0, 1, -1, 0, 0], fill_mode="wrap")
    np.testing.assert_array_equal(shifted, np.roll(a, (1, -2), axis=(1, 2)).astype(np.float32))
    # where k = c0 x + c1 y + 1 is 0 (column x = 2 here), fill_value, as TF
    got = IMG.affine_transform(a[0], [1.0, 0, 0, 0, 1, 0, -0.5, 0], fill_mode="nearest", fill_value=9.0)
    assert np.all(got[:, 2] == 9.0) and np.all(got[:, 1] != 9.0)


def test_affine_transform_against_torch_grid_sample():
    torch = pytest.importorskip("torch")
    a = RNG.normal(size=(2, 6, 7, 2))
    t = np.array([[0.9, 0.3, -0.5, -0.2, 1.2, 0.4, 0, 0], [1.3, -0.1, 0.2, 0.1, 0.8, -0.6, 0, 0]])
    n, h, w, _ = a.shape
    y, x = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
    grid = np.stack([np.stack([(r[0] * x + r[1] * y + r[2]) * 2 / (w - 1) - 1,
                               (r[3] * x + r[4] * y + r[5]) * 2 / (h - 1) - 1], axis=-1) for r in t])
    ti, tg = torch.tensor(a.transpose(0, 3, 1, 2)), torch.tensor(grid)
    for mode, padding in (("constant", "zeros"), ("nearest", "border"), ("mirror", "reflection")):
        want = torch.nn.functional.grid_sample(ti, tg, mode="bilinear", padding_mode=padding, align_corners=True)
        np.testing.assert_allclose(IMG.affine_transform(a, t, fill_mode=mode), want.numpy().transpose(0, 2, 3, 1),
                                   rtol=1e-5, atol=1e-5, err_msg=mode)


def test_perspective_transform_on_arrays():
    a = RNG.normal(size=(2, 6, 8, 3))
    start = np.array([[[0, 0], [0, 6], [8, 0], [8, 6]], [[1, 1], [0, 5], [7, 0], [8, 6]]], float)
    end = start + RNG.uniform(-1.5, 1.5, size=start.shape)
    hs = np.stack([homography_svd(s, e) for s, e in zip(start, end)])
    # the homography takes each end point to its start point
    for (s, e), hm in zip(zip(start, end), hs):
        k = hm[6] * e[:, 0] + hm[7] * e[:, 1] + 1
        np.testing.assert_allclose(np.stack([(hm[0] * e[:, 0] + hm[1] * e[:, 1] + hm[2]) / k,
                                             (hm[3] * e[:, 0] + hm[4] * e[:, 1] + hm[5]) / k], axis=1), s, atol=1e-9)
    for interpolation, order in (("bilinear", 1), ("nearest", 0)):
        got = IMG.perspective_transform(a, start, end, interpolation, fill_value=0.5)
        np.testing.assert_allclose(got, ref_projective(a, hs, order, "constant", 0.5), rtol=1e-5, atol=1e-5)
    one = IMG.perspective_transform(a[0].transpose(2, 0, 1), start[0], end[0], data_format="channels_first")
    np.testing.assert_allclose(one, ref_projective(a[:1], hs[:1], 1, "constant")[0].transpose(2, 0, 1), rtol=1e-5,
                               atol=1e-5)
    same = IMG.perspective_transform(a, start[0], start[0])          # the same points: the image itself
    np.testing.assert_allclose(same, a, atol=1e-6)


def test_elastic_transform_on_arrays():
    a = RNG.normal(size=(2, 7, 6, 2))
    for mode in ("reflect", "constant", "wrap"):
        got = IMG.elastic_transform(a, alpha=4.0, sigma=1.2, fill_mode=mode, fill_value=0.5, seed=3)
        np.testing.assert_allclose(got, ref_elastic(a, 4.0, 1.2, 3, 1, mode, 0.5), rtol=1e-5, atol=1e-5)
    got = IMG.elastic_transform(a.transpose(0, 3, 1, 2), 4.0, 1.2, "nearest", seed=3, data_format="channels_first")
    np.testing.assert_allclose(got, ref_elastic(a, 4.0, 1.2, 3, 0, "reflect").transpose(0, 3, 1, 2), rtol=1e-5,
                               atol=1e-5)
    assert not np.allclose(got, a.transpose(0, 3, 1, 2))
    # an int seed repeats; no seed draws anew; alpha 0 leaves the image
    np.testing.assert_array_equal(IMG.elastic_transform(a[0], seed=5), IMG.elastic_transform(a[0], seed=5))
    assert not np.array_equal(IMG.elastic_transform(a[0]), IMG.elastic_transform(a[0]))
    gen = keras.random.SeedGenerator(1)
    assert not np.array_equal(IMG.elastic_transform(a[0], seed=gen), IMG.elastic_transform(a[0], seed=gen))
    np.testing.assert_allclose(IMG.elastic_transform(a, alpha=0.0, seed=1), a, atol=1e-6)


# --- symbolic inputs, a GradientTape ----------------------------------------------------------------

def test_symbolic_inputs_of_a_functional_model():
    x = RNG.uniform(size=(3, 6, 7, 3)).astype(np.float32)
    inp = keras.Input((6, 7, 3))
    outs = [IMG.rgb_to_grayscale(inp), IMG.rgb_to_hsv(inp), IMG.hsv_to_rgb(inp),
            IMG.crop_images(inp, 1, 1, 2, 3), IMG.pad_images(inp, 1, 0, 2, 1),
            IMG.gaussian_blur(inp, (3, 3), (0.8, 0.8)), IMG.affine_transform(inp, T_ZOOM, fill_mode="reflect"),
            IMG.perspective_transform(inp, PTS_START, PTS_END), IMG.elastic_transform(inp, 2.0, 1.0, seed=4)]
    model = keras.Model(inp, outs)
    got = model.predict(x, verbose=0)
    want = [IMG.rgb_to_grayscale(x), IMG.rgb_to_hsv(x), IMG.hsv_to_rgb(x), IMG.crop_images(x, 1, 1, 2, 3),
            IMG.pad_images(x, 1, 0, 2, 1), IMG.gaussian_blur(x, (3, 3), (0.8, 0.8)),
            IMG.affine_transform(x, T_ZOOM, fill_mode="reflect"), IMG.perspective_transform(x, PTS_START, PTS_END),
            IMG.elastic_transform(x, 2.0, 1.0, seed=4)]
    assert [g.shape for g in got] == [w.shape for w in want]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=2e-5)
    inp = keras.Input((5, 4))
    y = IMG.map_coordinates(inp, MAP_COORDS[:, :, :2] * [[[1]], [[0.8]], [[0.7]]], 1)
    x2 = RNG.normal(size=(2, 5, 4)).astype(np.float32)
    np.testing.assert_allclose(keras.Model(inp, y).predict(x2, verbose=0),
                               ref_sample(x2, MAP_COORDS[:, :, :2] * [[[1]], [[0.8]], [[0.7]]], 1, "constant"),
                               rtol=1e-5, atol=1e-5)


def test_a_transform_per_image_on_a_gradient_tape():
    """On a tape the batch is fixed, so each image may have its own transform; the op is linear
    in the images, so its gradient g of sum(r * y) satisfies <g, v> = <r, op(v)> for any v."""
    x = RNG.normal(size=(2, 5, 6, 2)).astype(np.float32)
    t = np.array([[1.1, 0.2, -1.0, -0.15, 0.9, 1.5, 0, 0], [0.7, 0.0, 2.0, 0.0, 1.3, -2.0, 0.01, 0]])
    r = RNG.normal(size=x.shape).astype(np.float32)
    with keras.GradientTape() as tape:
        tape.watch(x)
        y = IMG.affine_transform(x, t, fill_mode="mirror")
        loss = ops.sum(y * r)
    g = tape.gradient(loss, x)
    np.testing.assert_allclose(np.asarray(y), ref_projective(x, t, 1, "mirror"), rtol=1e-5, atol=1e-5)
    v = RNG.normal(size=x.shape)
    assert np.sum(g * v) == pytest.approx(np.sum(r * ref_projective(v, t, 1, "mirror")), rel=1e-4)


# --- refusals in a graph -----------------------------------------------------------------------------

def _model_with(fn, shape=(4, 5, 3)):
    m = keras.Sequential([keras.Input(shape), OpLayer(fn)])
    m.compile(loss="mse", optimizer="sgd")
    return m


def test_what_a_graph_cannot_build_is_refused_clearly():
    with pytest.raises(TypeError, match="transform must be an array known when the graph is built"):
        _model_with(lambda t: IMG.affine_transform(t, ops.reshape(t, (-1,))[:8]))
    with pytest.raises(TypeError, match="coordinates must be an array known"):
        _model_with(lambda t: IMG.map_coordinates(t, ops.reshape(t, (4, -1)), 1))
    with pytest.raises(ValueError, match="int seed"):
        _model_with(lambda t: IMG.elastic_transform(t))
    # a batch of transforms needs that batch size (a model's varies)
    with pytest.raises(ValueError, match="5 transforms for a batch of"):
        _model_with(lambda t: IMG.affine_transform(t, np.tile(T_ZOOM, (5, 1)) + np.arange(5)[:, None] * 0.01))
    with pytest.raises(ValueError, match="a graph tensor needs a positive size"):
        _model_with(lambda t: IMG.crop_images(t, 0, 0, target_height=0, target_width=2))


# --- bad arguments -----------------------------------------------------------------------------------

Z = np.zeros((1, 4, 5, 3))


@pytest.mark.parametrize("call, err, match", [
    (lambda: IMG.rgb_to_grayscale(np.zeros((4, 5))), ValueError, "height, width, channels"),
    (lambda: IMG.rgb_to_grayscale(np.zeros((1, 1, 4, 5, 3))), ValueError, "height, width, channels"),
    (lambda: IMG.rgb_to_grayscale(np.zeros((1, 4, 5, 2))), ValueError, "3 channels"),
    (lambda: IMG.rgb_to_grayscale(np.array([[["a"]]])), TypeError, "real numbers"),
    (lambda: IMG.rgb_to_grayscale(Z, data_format="nhwc"), ValueError, "data_format"),
    (lambda: IMG.rgb_to_hsv(np.zeros((1, 4, 5, 3), np.int32)), ValueError, "float dtype"),
    (lambda: IMG.rgb_to_hsv(np.zeros((1, 4, 5, 4))), ValueError, "3 channels"),
    (lambda: IMG.hsv_to_rgb(np.zeros((4, 5, 3), object)), TypeError, "real numbers"),
    (lambda: IMG.hsv_to_rgb(np.zeros((1, 4, 5, 3)), data_format="channels_first"), ValueError, "3 channels"),
    (lambda: IMG.crop_images(Z, 1, 1), ValueError, "exactly two of top_cropping, bottom_cropping, target_height"),
    (lambda: IMG.crop_images(Z, 1, 1, 1, 1, target_height=2), ValueError, "exactly two"),
    (lambda: IMG.crop_images(Z, -1, 0, 1, 1), ValueError, "top_cropping must be >= 0"),
    (lambda: IMG.crop_images(Z, 3, 0, 2, 1), ValueError, "target_height must be >= 0.*does not fit"),
    (lambda: IMG.crop_images(Z, 1, 0, target_height=4, right_cropping=0), ValueError, "bottom_cropping must be >= 0"),
    (lambda: IMG.crop_images(Z, 1.5, 0, 1, 1), TypeError, "top_cropping must be an int"),
    (lambda: IMG.pad_images(Z, 1, 1, 1), ValueError, "exactly two of left_padding, right_padding, target_width"),
    (lambda: IMG.pad_images(Z, 1, 1, target_height=3, target_width=9), ValueError, "bottom_padding must be >= 0"),
    (lambda: IMG.pad_images(Z, 1, 1, 1, -1), ValueError, "right_padding must be >= 0"),
    (lambda: IMG.pad_images(np.zeros((4, 5)), 1, 1, 1, 1), ValueError, "height, width, channels"),
    (lambda: IMG.gaussian_blur(Z, kernel_size=(0, 3)), ValueError, "kernel_size must be at least 1"),
    (lambda: IMG.gaussian_blur(Z, kernel_size=(3, 3, 3)), TypeError, "kernel_size"),
    (lambda: IMG.gaussian_blur(Z, kernel_size=10 ** 9), ValueError, "at most"),
    (lambda: IMG.gaussian_blur(Z, sigma=(1.0, 0.0)), ValueError, "sigma must be > 0"),
    (lambda: IMG.gaussian_blur(Z, sigma="wide"), TypeError, "sigma"),
    (lambda: IMG.gaussian_blur(Z, sigma=float("nan")), ValueError, "finite"),
    (lambda: IMG.map_coordinates(np.zeros((4, 5)), np.zeros((2, 3)), 2), ValueError, "order must be 0"),
    (lambda: IMG.map_coordinates(np.zeros((4, 5)), np.zeros((3, 3)), 1), ValueError, r"shape \(2, \.\.\.\)"),
    (lambda: IMG.map_coordinates(np.zeros((4, 5)), np.zeros((2,)), 1), ValueError, "at least 2 dimensions"),
    (lambda: IMG.map_coordinates(np.zeros((4, 5)), np.zeros((2, 3)), 1, fill_mode="edge"), ValueError, "fill_mode"),
    (lambda: IMG.map_coordinates(np.zeros((4, 5)), np.full((2, 3), np.nan), 1), ValueError, "finite"),
    (lambda: IMG.map_coordinates(np.zeros((4, 5)), [["a"], ["b"]], 1), TypeError, "real numbers"),
    (lambda: IMG.map_coordinates(np.zeros((1, 2, 2, 2, 2)), np.zeros((5, 2)), 1), ValueError, "dimensions"),
    (lambda: IMG.map_coordinates(np.zeros((4, 0)), np.zeros((2, 3)), 1), ValueError, "positive size"),
    (lambda: IMG.map_coordinates(np.zeros((4, 5)), np.zeros((2, 3)), 1, fill_value="x"), TypeError, "fill_value"),
    (lambda: IMG.affine_transform(Z, np.zeros(6)), ValueError, r"shape \(8,\) or \(batch, 8\)"),
    (lambda: IMG.affine_transform(Z, np.zeros((1, 1, 8))), ValueError, r"shape \(8,\) or \(batch, 8\)"),
    (lambda: IMG.affine_transform(Z, np.zeros((3, 8))), ValueError, "3 transforms for a batch of 1"),
    (lambda: IMG.affine_transform(Z[0], np.zeros((2, 8))), ValueError, "2 transforms for one image"),
    (lambda: IMG.affine_transform(Z, T_ZOOM, interpolation="bicubic"), ValueError, "interpolation"),
    (lambda: IMG.affine_transform(Z, T_ZOOM, fill_mode="symmetric"), ValueError, "fill_mode"),
    (lambda: IMG.affine_transform(Z, [np.inf] * 8), ValueError, "finite"),
    (lambda: IMG.affine_transform(Z, "rotate"), TypeError, "transform must be real numbers"),
    (lambda: IMG.affine_transform(np.zeros((4, 5)), T_ZOOM), ValueError, "height, width, channels"),
    (lambda: IMG.perspective_transform(Z, np.zeros((4, 3)), np.zeros((4, 3))), ValueError, r"\(4, 2\)"),
    (lambda: IMG.perspective_transform(Z, PTS_START, PTS_END[None].repeat(2, 0)), ValueError, "same shape"),
    (lambda: IMG.perspective_transform(Z, PTS_START, np.zeros((4, 2))), ValueError, "do not define"),
    (lambda: IMG.perspective_transform(Z, PTS_START, [[0, 0], [1, 1], [2, 2], [3, 3]]), ValueError, "on a line"),
    (lambda: IMG.perspective_transform(Z, PTS_START, PTS_END, interpolation="area"), ValueError, "interpolation"),
    (lambda: IMG.elastic_transform(Z, sigma=0.0), ValueError, "sigma must be > 0"),
    (lambda: IMG.elastic_transform(Z, sigma=1e9), ValueError, "taps"),
    (lambda: IMG.elastic_transform(Z, alpha="big"), TypeError, "alpha"),
    (lambda: IMG.elastic_transform(Z, seed=-1), ValueError, "seed"),
    (lambda: IMG.elastic_transform(Z, seed="abc"), ValueError, "seed"),
    (lambda: IMG.elastic_transform(Z, fill_mode="zeros"), ValueError, "fill_mode"),
    (lambda: IMG.elastic_transform(Z, interpolation=1), ValueError, "interpolation"),
])
def test_bad_arguments_raise_clear_errors(call, err, match):
    with pytest.raises(err, match=match):
        call()
