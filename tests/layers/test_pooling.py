"""The 1-D pooling layers, padding="same" for the 2-D ones, and the global 1-D
pools with a padding mask, through the layer harness (float64 numpy references)."""

import numpy as np
import pytest

import pyggml as pg
from harness import LayerCase, harness_tests

L = pg.layers


def _same_pads(size, k, s):
    """Keras's "same": the output has ceil(size / s) cells; the odd padding cell goes after."""
    out = -(-size // s)
    total = max((out - 1) * s + k - size, 0)
    return total // 2, out


def pool2d_ref(op, pool=(2, 2), strides=None, padding="valid"):
    """Windows over (H, W) of (N, H, W, C); padded cells are left out of the max
    and of the average's count (Keras's "same")."""
    strides = strides or pool

    def ref(hs, w, training):
        x = hs[0]
        n, h, wd, c = x.shape
        (kh, kw), (sh, sw) = pool, strides
        if padding == "same":
            (top, oh), (left, ow) = _same_pads(h, kh, sh), _same_pads(wd, kw, sw)
        else:
            top = left = 0
            oh, ow = (h - kh) // sh + 1, (wd - kw) // sw + 1
        out = np.empty((n, oh, ow, c))
        for i in range(oh):
            for j in range(ow):
                r0, c0 = i * sh - top, j * sw - left
                win = x[:, max(r0, 0):min(r0 + kh, h), max(c0, 0):min(c0 + kw, wd), :]
                assert win.size, "a window without a real cell"
                out[:, i, j, :] = win.max(axis=(1, 2)) if op == "max" else win.mean(axis=(1, 2))
        return out
    return ref


def pool1d_ref(op, pool=2, stride=None, padding="valid"):
    inner = pool2d_ref(op, (1, pool), (1, stride or pool), padding)

    def ref(hs, w, training):
        return inner([hs[0][:, None]], w, training)[:, 0]
    return ref


def adaptive_ref(op, size):
    """Adaptive pooling by its definition: window i of an axis of length L covers
    [floor(i L / O), ceil((i + 1) L / O)) (PyTorch's, Keras's); channels-last, 1 to 3 axes."""
    def ref(hs, w, training):
        x = hs[0]
        for axis, o in enumerate(size, start=1):
            n = x.shape[axis]
            parts = []
            for i in range(o):
                lo, hi = (i * n) // o, -((-(i + 1) * n) // o)
                win = np.take(x, np.arange(lo, hi), axis=axis)
                parts.append(win.max(axis=axis, keepdims=True) if op == "max" else win.mean(axis=axis, keepdims=True))
            x = np.concatenate(parts, axis=axis)
        return x
    return ref


# one mask row per position in the batch (the harness's batches hold 3 or 6 rows)
MASK = np.array([[1, 1, 1, 0, 0],
                 [1, 0, 1, 1, 1],
                 [0, 0, 0, 0, 0]], dtype=np.float32)


def _mask_for(n):
    return MASK[np.arange(n) % len(MASK)]


@pg.saving.register_serializable(package="tests")
class MaskedGlobalPool(pg.layers.Layer):
    """Calls a global 1-D pool inside its call with a constant padding mask."""

    def __init__(self, mode="avg", keepdims=False, **kwargs):
        super().__init__(**kwargs)
        self.mode, self.keepdims = mode, keepdims
        cls = L.GlobalAveragePooling1D if mode == "avg" else L.GlobalMaxPooling1D
        self.pool = cls(keepdims=keepdims)

    def call(self, inputs, training=None):
        mask = pg.ops.constant(_mask_for(inputs.shape[0]))
        return self.pool(inputs, mask=mask)

    def get_config(self):
        c = super().get_config()
        c.update(mode=self.mode, keepdims=self.keepdims)
        return c


def masked_global_ref(kind, keepdims=False):
    def ref(hs, w, training):
        x = hs[0]
        m = _mask_for(len(x))[:, :, None].astype(np.float64)
        count = m.sum(axis=1)
        if kind == "avg":
            y = (x * m).sum(axis=1) / np.maximum(count, 1)
        else:
            y = np.where(count > 0, np.where(m > 0, x, -np.inf).max(axis=1), 0.0)
        return y[:, None] if keepdims else y
    return ref


CASES = [
    LayerCase("adaptive_avg1d", lambda: L.AdaptiveAveragePooling1D(3), [(7, 2)], adaptive_ref("avg", (3,))),
    LayerCase("adaptive_max1d_up", lambda: L.AdaptiveMaxPooling1D(6), [(4, 2)], adaptive_ref("max", (6,))),
    LayerCase("adaptive_avg2d", lambda: L.AdaptiveAveragePooling2D((3, 2)), [(7, 5, 2)], adaptive_ref("avg", (3, 2))),
    LayerCase("adaptive_max2d", lambda: L.AdaptiveMaxPooling2D(2), [(5, 4, 3)], adaptive_ref("max", (2, 2))),
    LayerCase("adaptive_avg3d", lambda: L.AdaptiveAveragePooling3D((2, 2, 3)), [(3, 4, 5, 2)],
              adaptive_ref("avg", (2, 2, 3))),
    LayerCase("adaptive_max3d", lambda: L.AdaptiveMaxPooling3D((2, 1, 2)), [(4, 3, 3, 2)],
              adaptive_ref("max", (2, 1, 2))),
    # 1-D pools
    LayerCase("maxpool1d", lambda: L.MaxPooling1D(), [(6, 2)], pool1d_ref("max")),
    LayerCase("maxpool1d_3_stride2_valid", lambda: L.MaxPooling1D(3, strides=2), [(7, 2)],
              pool1d_ref("max", 3, 2)),
    LayerCase("maxpool1d_same_odd_total", lambda: L.MaxPooling1D(3, strides=2, padding="same"), [(6, 2)],
              pool1d_ref("max", 3, 2, "same")),                 # padding (0, 1)
    LayerCase("maxpool1d_same_stride1", lambda: L.MaxPooling1D(3, strides=1, padding="same"), [(5, 1)],
              pool1d_ref("max", 3, 1, "same")),                 # padding (1, 1)
    LayerCase("avgpool1d", lambda: L.AveragePooling1D(3), [(7, 2)], pool1d_ref("avg", 3)),
    LayerCase("avgpool1d_same_sym", lambda: L.AveragePooling1D(3, strides=1, padding="same"), [(5, 2)],
              pool1d_ref("avg", 3, 1, "same")),                 # (1, 1): ggml's own padding
    LayerCase("avgpool1d_same_end", lambda: L.AveragePooling1D(2, strides=1, padding="same"), [(4, 2)],
              pool1d_ref("avg", 2, 1, "same")),                 # (0, 1): the explicit cell only
    LayerCase("avgpool1d_same_both", lambda: L.AveragePooling1D(4, strides=3, padding="same"), [(8, 1)],
              pool1d_ref("avg", 4, 3, "same")),                 # (1, 2)
    # 2-D pools with padding="same"
    LayerCase("maxpool2d_same_resnet", lambda: L.MaxPooling2D(3, strides=2, padding="same"), [(5, 6, 2)],
              pool2d_ref("max", (3, 3), (2, 2), "same")),       # H (1, 1), W (0, 1)
    LayerCase("maxpool2d_same_default", lambda: L.MaxPooling2D(padding="same"), [(5, 3, 1)],
              pool2d_ref("max", (2, 2), None, "same")),         # H (0, 1), W (0, 1)
    LayerCase("avgpool2d_same_resnet", lambda: L.AveragePooling2D(3, strides=2, padding="same"), [(5, 6, 2)],
              pool2d_ref("avg", (3, 3), (2, 2), "same")),
    LayerCase("avgpool2d_same_stride1", lambda: L.AveragePooling2D((3, 2), strides=1, padding="same"),
              [(3, 4, 1)], pool2d_ref("avg", (3, 2), (1, 1), "same")),   # H (1, 1), W (0, 1)
    # global 1-D pools, with and without a mask
    LayerCase("global_avgpool1d", lambda: L.GlobalAveragePooling1D(), [(5, 3)],
              lambda hs, w, t: hs[0].mean(axis=1)),
    LayerCase("global_maxpool1d", lambda: L.GlobalMaxPooling1D(), [(5, 3)],
              lambda hs, w, t: hs[0].max(axis=1)),
    LayerCase("global_avgpool1d_keepdims", lambda: L.GlobalAveragePooling1D(keepdims=True), [(4, 2)],
              lambda hs, w, t: hs[0].mean(axis=1, keepdims=True)),
    LayerCase("global_maxpool1d_keepdims", lambda: L.GlobalMaxPooling1D(keepdims=True), [(4, 2)],
              lambda hs, w, t: hs[0].max(axis=1, keepdims=True)),
    LayerCase("global_avgpool1d_masked", lambda: MaskedGlobalPool("avg"), [(5, 3)], masked_global_ref("avg")),
    LayerCase("global_maxpool1d_masked", lambda: MaskedGlobalPool("max"), [(5, 3)], masked_global_ref("max")),
    LayerCase("global_avgpool1d_masked_keepdims", lambda: MaskedGlobalPool("avg", True), [(5, 2)],
              masked_global_ref("avg", True)),
]

# the harness's four checks over every case (forward, gradient, config, a training step)
test_forward, test_gradient, test_config, test_training_step = harness_tests(CASES)


@pytest.mark.parametrize("layer, shape, expected", [
    (L.MaxPooling2D(3, strides=2, padding="same"), (None, 112, 112, 64), (None, 56, 56, 64)),
    (L.MaxPooling2D(3, strides=2, padding="same"), (None, 7, 9, 1), (None, 4, 5, 1)),
    (L.AveragePooling2D(2, padding="same"), (None, 5, 5, 3), (None, 3, 3, 3)),
    (L.MaxPooling2D(3, strides=2), (None, 7, 9, 1), (None, 3, 4, 1)),
    (L.MaxPooling1D(padding="same"), (None, 7, 4), (None, 4, 4)),
    (L.AveragePooling1D(3, strides=1), (None, 7, 4), (None, 5, 4)),
    (L.MaxPooling1D(2), (None, None, 4), (None, None, 4)),
    (L.GlobalMaxPooling1D(), (None, 7, 4), (None, 4)),
    (L.GlobalAveragePooling1D(keepdims=True), (None, 7, 4), (None, 1, 4)),
    (L.GlobalAveragePooling2D(keepdims=True), (None, 7, 5, 4), (None, 1, 1, 4)),
    (L.GlobalMaxPooling2D(keepdims=True), (None, 7, 5, 4), (None, 1, 1, 4)),
    (L.GlobalMaxPooling2D(), (None, 7, 5, 4), (None, 4)),
])
def test_output_shapes_follow_keras(layer, shape, expected):
    assert layer.compute_output_shape(shape) == expected


def test_same_average_counts_real_cells_only():
    # a constant image: every "same" window averages to the constant, also at the corners
    m = pg.Sequential([L.AveragePooling2D(3, strides=2, padding="same")], input_shape=(5, 6, 1))
    m.compile(loss="mse")
    y = m.predict(np.full((2, 5, 6, 1), 3.0, dtype=np.float32))
    np.testing.assert_allclose(y, 3.0, rtol=1e-6)
    m.free()
    # and max ignores the padding: all-negative inputs never give 0 from a padded cell
    m = pg.Sequential([L.MaxPooling1D(2, strides=2, padding="same")], input_shape=(5, 1))
    m.compile(loss="mse")
    x = -np.arange(1, 11, dtype=np.float32).reshape(2, 5, 1)
    np.testing.assert_array_equal(m.predict(x)[:, :, 0], [[-1, -3, -5], [-6, -8, -10]])
    m.free()


def test_matches_pytorch_where_pytorch_pads_symmetrically():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 7, 7, 3)).astype(np.float32)
    for layer, tmod in ((L.MaxPooling2D(3, strides=2, padding="same"), torch.nn.MaxPool2d(3, 2, padding=1)),
                        (L.AveragePooling2D(3, strides=2, padding="same"),
                         torch.nn.AvgPool2d(3, 2, padding=1, count_include_pad=False))):
        m = pg.Sequential([layer], input_shape=(7, 7, 3)).compile(loss="mse")
        want = tmod(torch.from_numpy(x).permute(0, 3, 1, 2)).permute(0, 2, 3, 1).numpy()
        np.testing.assert_allclose(m.predict(x), want, rtol=1e-5, atol=1e-6)
        m.free()


def test_global_pool_refuses_a_mask_of_the_wrong_shape():
    class Bad(pg.layers.Layer):
        def call(self, inputs, training=None):
            return L.GlobalAveragePooling1D()(inputs, mask=pg.ops.constant(np.ones((inputs.shape[0], 3))))
    with pytest.raises(ValueError, match="mask must have shape"):
        pg.Sequential([Bad()], input_shape=(5, 2)).compile(loss="mse")


@pytest.mark.parametrize("make", [
    lambda: L.MaxPooling1D(padding="full"),
    lambda: L.AveragePooling2D(padding="causal"),
    lambda: L.MaxPooling2D(data_format="channels_middle"),
    lambda: L.GlobalMaxPooling1D(data_format="channels_middle"),
    lambda: L.MaxPooling1D(0),
    lambda: L.AveragePooling1D(2, strides=(1, 1)),
    lambda: L.GlobalAveragePooling1D(keepdims="yes"),
])
def test_bad_arguments_are_refused(make):
    with pytest.raises((TypeError, ValueError)):
        make()


@pytest.mark.parametrize("layer, shape", [
    (lambda: L.MaxPooling1D(), (4, 3, 2)),
    (lambda: L.MaxPooling2D(padding="same"), (4, 3)),
    (lambda: L.GlobalMaxPooling1D(), (4,)),
    (lambda: L.MaxPooling1D(5), (4, 2)),                     # larger than the input with "valid"
])
def test_bad_input_shapes_are_refused(layer, shape):
    with pytest.raises(ValueError):
        pg.Sequential([layer()], input_shape=shape).compile(loss="mse")


def test_the_mask_of_an_embedding_reaches_the_global_pools():
    # Embedding(mask_zero=True) -> GlobalAveragePooling1D / GlobalMaxPooling1D: over the real steps
    x = np.array([[3, 1, 0, 0], [2, 0, 0, 0], [4, 4, 2, 1]], dtype=np.int32)
    real = x != 0
    for pool, reduce in ((L.GlobalAveragePooling1D(), np.mean), (L.GlobalMaxPooling1D(), np.max)):
        m = pg.Sequential([L.Embedding(5, 3, mask_zero=True, name="emb"), pool], input_shape=(4,))
        m.compile(loss="mse")
        e = m.get_weights()["emb.weight"][x]
        want = np.stack([reduce(e[i][real[i]], axis=0) for i in range(len(x))])
        np.testing.assert_allclose(m.predict(x), want, rtol=1e-5, atol=1e-6)
        m.free()
