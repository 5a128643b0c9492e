"""UpSampling1D and UpSampling2D (nearest and bilinear) through the layer
harness, and bilinear against PyTorch's interpolate (Keras's half-pixel rule)."""

import numpy as np
import pytest

import pyggml as pg
from harness import LayerCase, harness_tests

L = pg.layers


def bilinear_matrix(size, scale):
    """(size * scale, size): half-pixel centres, clamped at the edges (Keras's resize,
    PyTorch's align_corners=False)."""
    m = np.zeros((size * scale, size))
    for o in range(size * scale):
        src = max((o + 0.5) / scale - 0.5, 0.0)
        lo = int(np.floor(src))
        hi = min(lo + 1, size - 1)
        m[o, lo] += 1.0 - (src - lo)
        m[o, hi] += src - lo
    return m


def bilinear_ref(size):
    def ref(hs, w, training):
        x = hs[0]
        ah, aw = bilinear_matrix(x.shape[1], size[0]), bilinear_matrix(x.shape[2], size[1])
        return np.einsum("ih,nhwc,jw->nijc", ah, x, aw)
    return ref


CASES = [
    LayerCase("up_sampling1d", lambda: L.UpSampling1D(), [(3, 2)], lambda hs, w, t: np.repeat(hs[0], 2, axis=1)),
    LayerCase("up_sampling1d_3", lambda: L.UpSampling1D(3), [(4, 1)], lambda hs, w, t: np.repeat(hs[0], 3, axis=1)),
    LayerCase("up_sampling2d", lambda: L.UpSampling2D(), [(2, 3, 2)],
              lambda hs, w, t: np.repeat(np.repeat(hs[0], 2, axis=1), 2, axis=2)),
    LayerCase("up_sampling2d_2x3", lambda: L.UpSampling2D((2, 3)), [(3, 2, 1)],
              lambda hs, w, t: np.repeat(np.repeat(hs[0], 2, axis=1), 3, axis=2)),
    LayerCase("up_sampling2d_bilinear", lambda: L.UpSampling2D(interpolation="bilinear"), [(3, 3, 2)],
              bilinear_ref((2, 2))),
    LayerCase("up_sampling2d_bilinear_3x2", lambda: L.UpSampling2D((3, 2), interpolation="bilinear"), [(2, 4, 1)],
              bilinear_ref((3, 2))),
    LayerCase("up_sampling2d_bilinear_rows_only", lambda: L.UpSampling2D((2, 1), interpolation="bilinear"),
              [(3, 2, 2)], bilinear_ref((2, 1))),
]

# the harness's four checks over every case (forward, gradient, config, a training step)
test_forward, test_gradient, test_config, test_training_step = harness_tests(CASES)


@pytest.mark.parametrize("size", [(2, 2), (3, 2), (1, 4)])
def test_bilinear_matches_pytorch(size):
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(0).normal(size=(2, 5, 4, 3)).astype(np.float32)
    m = pg.Sequential([L.UpSampling2D(size, interpolation="bilinear")], input_shape=(5, 4, 3))
    m.compile(loss="mse")
    want = torch.nn.functional.interpolate(torch.from_numpy(x).permute(0, 3, 1, 2), scale_factor=size,
                                           mode="bilinear", align_corners=False).permute(0, 2, 3, 1)
    np.testing.assert_allclose(m.predict(x), want.numpy(), rtol=1e-5, atol=1e-6)
    m.free()


def test_nearest_matches_pytorch():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(1).normal(size=(2, 3, 4, 2)).astype(np.float32)
    m = pg.Sequential([L.UpSampling2D((2, 3))], input_shape=(3, 4, 2)).compile(loss="mse")
    want = torch.nn.functional.interpolate(torch.from_numpy(x).permute(0, 3, 1, 2), scale_factor=(2, 3),
                                           mode="nearest").permute(0, 2, 3, 1)
    np.testing.assert_array_equal(m.predict(x), want.numpy())
    m.free()


def test_output_shapes():
    assert L.UpSampling2D((2, 3)).compute_output_shape((None, 4, 5, 6)) == (None, 8, 15, 6)
    assert L.UpSampling1D(4).compute_output_shape((None, 3, 2)) == (None, 12, 2)
    assert L.UpSampling1D(4).compute_output_shape((None, None, 2)) == (None, None, 2)


@pytest.mark.parametrize("make, match", [
    (lambda: L.UpSampling2D(interpolation="area"), "interpolation"),
    (lambda: L.UpSampling2D(interpolation="cubic"), "interpolation"),
    (lambda: L.UpSampling2D(data_format="channels_middle"), "channels_last"),
    (lambda: L.UpSampling2D((2, 2, 2)), "size"),
    (lambda: L.UpSampling1D(0), "size"),
])
def test_bad_arguments_are_refused(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_bad_input_shapes_are_refused():
    with pytest.raises(ValueError, match=r"\(H, W, C\)"):
        pg.Sequential([L.UpSampling2D()], input_shape=(4, 3)).compile(loss="mse")
    with pytest.raises(ValueError, match=r"\(steps, channels\)"):
        pg.Sequential([L.UpSampling1D()], input_shape=(4, 3, 2)).compile(loss="mse")
