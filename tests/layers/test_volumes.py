"""Volumes and videos, (batch, D, H, W, C): the 3-D layers (Conv3D, the 3-D poolings,
ZeroPadding3D, Cropping3D, UpSampling3D) and the layers that take 5-D inputs as they are
(Dense, activations, merging, Flatten, Reshape, TimeDistributed over frames), through the
layer harness against float64 numpy references (pyggml._fold folds the batch with the
first axis in the graph: these check that nothing mixes samples or planes)."""

import numpy as np
import pytest

import pyggml as pg
from pyggml import ops
from harness import LayerCase, harness_tests
from test_normalization import _bn_weights, batchnorm_ref, layernorm_ref

L = pg.layers


def _pads(size, k, s, padding):
    """Keras's (before, out) along one axis: "same" puts the odd padding cell after."""
    if padding == "same":
        out = -(-size // s)
        return max((out - 1) * s + k - size, 0) // 2, out
    return 0, (size - k) // s + 1


def conv3d_np(x, wt, b, strides=(1, 1, 1), padding="valid", dilation=(1, 1, 1)):
    """Keras's Conv3D of x (N, D, H, W, C) with PyTorch's kernel wt (F, C, kd, kh, kw)."""
    f, c, *k = wt.shape
    eff = [(k[i] - 1) * dilation[i] + 1 for i in range(3)]
    geo = [_pads(x.shape[1 + i], eff[i], strides[i], padding) for i in range(3)]
    full = [max((geo[i][1] - 1) * strides[i] + eff[i], x.shape[1 + i] + geo[i][0]) for i in range(3)]
    xp = np.zeros((x.shape[0],) + tuple(full) + (c,))
    (d0, _), (h0, _), (w0, _) = geo
    xp[:, d0:d0 + x.shape[1], h0:h0 + x.shape[2], w0:w0 + x.shape[3]] = x
    (od, oh, ow) = (g[1] for g in geo)
    out = np.zeros((x.shape[0], od, oh, ow, f))
    for a in range(k[0]):
        for bb in range(k[1]):
            for cc in range(k[2]):
                sd, sh, sw = a * dilation[0], bb * dilation[1], cc * dilation[2]
                win = xp[:, sd:sd + (od - 1) * strides[0] + 1:strides[0], sh:sh + (oh - 1) * strides[1] + 1:strides[1],
                         sw:sw + (ow - 1) * strides[2] + 1:strides[2]]
                out += np.einsum("ndhwc,fc->ndhwf", win, wt[:, :, a, bb, cc])
    return out + (0.0 if b is None else b)


def conv3d_ref(filters, kernel, strides=(1, 1, 1), padding="valid", dilation=(1, 1, 1), act=None):
    def ref(hs, w, training):
        c = hs[0].shape[-1]
        wt = w["weight"].reshape((filters, c) + kernel)
        y = conv3d_np(hs[0], wt, w.get("bias"), strides, padding, dilation)
        return np.maximum(y, 0.0) if act == "relu" else y
    return ref


def conv3d_transpose_ref(filters, kernel, strides=(1, 1, 1), padding="valid", output_padding=None,
                         dilation=(1, 1, 1)):
    """Keras's Conv3DTranspose: each input voxel's x @ W[:, :, a, b, c] added at stride s,
    offset (a, b, c) times the dilation, into the whole result, then Keras's window (the
    padding rule of pyggml._conv_arith, which the 2-D layers check against PyTorch)."""
    from pyggml._conv_arith import transpose_out_size, transpose_pads

    def ref(hs, w, training):
        x = hs[0]
        c = x.shape[-1]
        wt = w["weight"].reshape((c, filters) + kernel)
        eff = [(kernel[i] - 1) * dilation[i] + 1 for i in range(3)]
        op = (None,) * 3 if output_padding is None else output_padding
        outs = [transpose_out_size(x.shape[1 + i], eff[i], strides[i], padding, op[i]) for i in range(3)]
        tops = [eff[i] - 1 - transpose_pads(eff[i], strides[i], padding, op[i])[0] for i in range(3)]
        full = [max((x.shape[1 + i] - 1) * strides[i] + eff[i], tops[i] + outs[i]) for i in range(3)]
        res = np.zeros((x.shape[0],) + tuple(full) + (filters,))
        (d, h, wd) = x.shape[1:4]
        for a, b, cc in np.ndindex(*kernel):
            at = [a * dilation[0], b * dilation[1], cc * dilation[2]]
            win = tuple(slice(at[i], at[i] + (size - 1) * strides[i] + 1, strides[i])
                        for i, size in enumerate((d, h, wd)))
            res[(slice(None),) + win] += np.einsum("ndhwc,cf->ndhwf", x, wt[:, :, a, b, cc])
        y = res[:, tops[0]:tops[0] + outs[0], tops[1]:tops[1] + outs[1], tops[2]:tops[2] + outs[2]]
        return y + w.get("bias", 0.0)
    return ref


def pool3d_ref(op, pool, strides=None, padding="valid"):
    """Box windows over (D, H, W); padded cells are left out of the max and the average."""
    strides = strides or pool

    def ref(hs, w, training):
        x = hs[0]
        geo = [_pads(x.shape[1 + i], pool[i], strides[i], padding) for i in range(3)]
        out = np.empty((x.shape[0],) + tuple(g[1] for g in geo) + (x.shape[-1],))
        for idx in np.ndindex(*(g[1] for g in geo)):
            sl = []
            for i, j in enumerate(idx):
                lo = j * strides[i] - geo[i][0]
                sl.append(slice(max(lo, 0), min(lo + pool[i], x.shape[1 + i])))
            win = x[:, sl[0], sl[1], sl[2], :]
            out[(slice(None),) + idx] = win.max(axis=(1, 2, 3)) if op == "max" else win.mean(axis=(1, 2, 3))
        return out
    return ref


def dense_ref(hs, w, training):
    return hs[0] @ w["weight"].T + w["bias"]


def _frames_conv2d_ref(hs, w, training):
    """TimeDistributed(Conv2D(2, 3, padding="same")) on (N, T, H, W, C): each frame alone."""
    x = hs[0]
    wt = w["layer.weight"][:, :, None]                 # (F, C, 1, kh, kw): a 3-D kernel of depth 1
    return conv3d_np(x, wt, w["layer.bias"], padding="same")


CASES = [
    LayerCase("conv3d_valid_relu", lambda: L.Conv3D(3, 3, activation="relu"), [(4, 4, 5, 2)],
              conv3d_ref(3, (3, 3, 3), act="relu")),
    LayerCase("conv3d_same_strided", lambda: L.Conv3D(2, (3, 2, 3), strides=(2, 1, 2), padding="same"),
              [(5, 3, 4, 2)], conv3d_ref(2, (3, 2, 3), (2, 1, 2), "same")),
    LayerCase("conv3d_dilated_no_bias", lambda: L.Conv3D(2, (2, 2, 1), dilation_rate=(2, 1, 1), use_bias=False),
              [(5, 3, 2, 3)], conv3d_ref(2, (2, 2, 1), dilation=(2, 1, 1))),
    LayerCase("conv3d_transpose_valid_strided", lambda: L.Conv3DTranspose(2, 3, strides=2), [(2, 3, 2, 2)],
              conv3d_transpose_ref(2, (3, 3, 3), (2, 2, 2))),
    LayerCase("conv3d_transpose_same", lambda: L.Conv3DTranspose(3, (3, 2, 3), strides=(2, 1, 2), padding="same"),
              [(2, 3, 2, 1)], conv3d_transpose_ref(3, (3, 2, 3), (2, 1, 2), "same")),
    LayerCase("conv3d_transpose_output_padding",
              lambda: L.Conv3DTranspose(2, 2, strides=(2, 3, 2), output_padding=(1, 2, 0), use_bias=False),
              [(2, 2, 3, 2)], conv3d_transpose_ref(2, (2, 2, 2), (2, 3, 2), output_padding=(1, 2, 0))),
    LayerCase("conv3d_transpose_dilated_same", lambda: L.Conv3DTranspose(2, 2, dilation_rate=(2, 1, 1),
                                                                          padding="same"),
              [(3, 2, 2, 2)], conv3d_transpose_ref(2, (2, 2, 2), padding="same", dilation=(2, 1, 1))),
    LayerCase("max_pooling3d", lambda: L.MaxPooling3D(2), [(4, 4, 5, 2)], pool3d_ref("max", (2, 2, 2))),
    LayerCase("max_pooling3d_same", lambda: L.MaxPooling3D((3, 2, 2), strides=(2, 2, 1), padding="same"),
              [(5, 3, 3, 2)], pool3d_ref("max", (3, 2, 2), (2, 2, 1), "same")),
    LayerCase("average_pooling3d_same", lambda: L.AveragePooling3D(2, padding="same"), [(5, 3, 4, 2)],
              pool3d_ref("avg", (2, 2, 2), padding="same")),
    LayerCase("average_pooling3d_depth", lambda: L.AveragePooling3D((2, 1, 1)), [(4, 2, 3, 2)],
              pool3d_ref("avg", (2, 1, 1))),
    LayerCase("global_average_pooling3d", lambda: L.GlobalAveragePooling3D(), [(3, 2, 4, 3)],
              lambda hs, w, t: hs[0].mean(axis=(1, 2, 3))),
    LayerCase("global_max_pooling3d_keepdims", lambda: L.GlobalMaxPooling3D(keepdims=True), [(3, 2, 4, 3)],
              lambda hs, w, t: hs[0].max(axis=(1, 2, 3), keepdims=True)),
    LayerCase("up_sampling3d", lambda: L.UpSampling3D((2, 1, 2)), [(2, 3, 2, 2)],
              lambda hs, w, t: hs[0].repeat(2, axis=1).repeat(2, axis=3)),
    LayerCase("zero_padding3d", lambda: L.ZeroPadding3D(((1, 0), (0, 2), 1)), [(2, 3, 2, 2)],
              lambda hs, w, t: np.pad(hs[0], ((0, 0), (1, 0), (0, 2), (1, 1), (0, 0)))),
    LayerCase("cropping3d", lambda: L.Cropping3D(((1, 0), (1, 1), (0, 1))), [(3, 4, 3, 2)],
              lambda hs, w, t: hs[0][:, 1:, 1:-1, :-1]),
    LayerCase("spatial_dropout3d_zero", lambda: L.SpatialDropout3D(0.0), [(2, 3, 2, 2)], lambda hs, w, t: hs[0]),
    LayerCase("dense_on_volumes", lambda: L.Dense(3), [(3, 2, 2, 2)], dense_ref),
    LayerCase("batchnorm_volumes", lambda: L.BatchNormalization(momentum=0.9), [(2, 2, 3, 3)], batchnorm_ref(),
              batch=4, weight_init=_bn_weights),
    LayerCase("layernorm_volumes", lambda: L.LayerNormalization(), [(2, 2, 1, 4)], layernorm_ref(),
              weight_init=_bn_weights),
    LayerCase("softmax_on_volumes", lambda: L.Softmax(), [(2, 3, 2, 3)],
              lambda hs, w, t: np.exp(hs[0]) / np.exp(hs[0]).sum(axis=-1, keepdims=True)),
    LayerCase("flatten_volumes", lambda: L.Flatten(), [(3, 2, 2, 2)], lambda hs, w, t: hs[0].reshape(len(hs[0]), -1)),
    LayerCase("reshape_volumes_to_steps", lambda: L.Reshape((6, -1)), [(3, 2, 2, 2)],
              lambda hs, w, t: hs[0].reshape(len(hs[0]), 6, 4)),
    LayerCase("reshape_to_volumes", lambda: L.Reshape((2, 3, 2, 2)), [(6, 4)],
              lambda hs, w, t: hs[0].reshape(len(hs[0]), 2, 3, 2, 2)),
    LayerCase("add_volumes", lambda: L.Add(), [(2, 3, 2, 2), (2, 3, 2, 2)], lambda hs, w, t: hs[0] + hs[1],
              sequential=False),
    LayerCase("concatenate_volumes_width", lambda: L.Concatenate(axis=3), [(2, 2, 3, 2), (2, 2, 1, 2)],
              lambda hs, w, t: np.concatenate(hs, axis=3), sequential=False),
    LayerCase("time_distributed_conv2d_frames", lambda: L.TimeDistributed(L.Conv2D(2, 3, padding="same")),
              [(3, 4, 4, 2)], _frames_conv2d_ref),
    LayerCase("time_distributed_flatten_frames", lambda: L.TimeDistributed(L.Flatten()), [(3, 2, 2, 2)],
              lambda hs, w, t: hs[0].reshape(hs[0].shape[0], 3, -1)),
]

test_forward, test_gradient, test_config, test_training_step = harness_tests(CASES)


# --- what the harness does not cover -------------------------------------------------------

def test_spatial_dropout3d_drops_whole_channels_of_each_sample():
    inp = pg.Input((4, 3, 3, 5))
    m = pg.Model(inp, L.SpatialDropout3D(0.5, seed=3)(inp))
    x = np.ones((6, 4, 3, 3, 5), np.float32)
    y = np.asarray(m(x, training=True))
    per = y.reshape(6, -1, 5)
    # each (sample, channel) is all kept (scaled by 2) or all dropped, over every plane and pixel
    assert np.all((per == per[:, :1]).all(axis=1))
    assert set(np.unique(per)) <= {0.0, 2.0} and 0 < (per[:, 0] == 0).sum() < 30
    assert np.array_equal(m.predict(x), x)


@pytest.mark.parametrize("layer, why", [
    (lambda: L.LSTM(3), "at most 4 dimensions"),
    (lambda: L.Conv2D(2, 3), "Conv3D"),
    (lambda: L.Softmax(axis=2), "axis=-1"),
    (lambda: L.Dropout(0.5, noise_shape=(None, 1, 1, 1)), "noise_shape"),
])
def test_layers_that_cannot_take_volumes_say_so(layer, why):
    with pytest.raises(ValueError, match=why):
        layer()(pg.Input((4, 6, 6, 3)))


def test_a_lambda_sees_a_volume_five_dimensional():
    inp = pg.Input((4, 6, 6, 3))
    out = L.Lambda(lambda t: ops.sum(t, axis=1) * 2)(inp)              # along the depth: Keras's
    x = np.random.default_rng(1).normal(size=(2, 4, 6, 6, 3)).astype(np.float32)
    np.testing.assert_allclose(pg.Model(inp, out).predict(x, verbose=0), x.sum(1) * 2, rtol=1e-5, atol=1e-5)


def test_concatenating_along_the_depth_is_refused_and_a_variable_depth_taken():
    a = pg.Input((4, 6, 6, 3))
    with pytest.raises(ValueError, match="depth"):
        L.Concatenate(axis=1)([a, a])
    # (a graph is built for the data's depth: tests/test_keras_io_port_gaps_5.py)
    assert L.Conv3D(2, 3)(pg.Input((None, 6, 6, 3))).shape == (None, None, 4, 4, 2)


def test_eager_calls_on_volumes_equal_the_model_s():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 4, 5, 6, 3)).astype(np.float32)
    conv = L.Conv3D(2, 3, padding="same")
    y = np.asarray(conv(x))
    assert y.shape == (2, 4, 5, 6, 2)
    wt = conv.get_weights()["weight"].reshape(2, 3, 3, 3, 3)
    assert np.allclose(y, conv3d_np(x.astype(np.float64), wt, conv.get_weights()["bias"], padding="same"),
                       atol=1e-4)
    assert np.asarray(L.MaxPooling3D()(x)).shape == (2, 2, 2, 3, 3)


def test_conv3d_kernel_in_keras_s_layout():
    conv = L.Conv3D(4, (3, 2, 1))
    conv(pg.Input((5, 4, 3, 2)))
    assert conv.kernel.shape == (3, 2, 1, 2, 4)
    w = conv.weight.numpy().reshape(4, 2, 3, 2, 1)             # PyTorch's Conv3d layout
    assert np.array_equal(conv.kernel.numpy(), w.transpose(2, 3, 4, 1, 0))
    k = np.arange(48, dtype=np.float32).reshape(3, 2, 1, 2, 4)
    conv.set_weights([k, np.zeros(4, np.float32)])
    assert np.array_equal(conv.kernel.numpy(), k)
    # Keras's glorot counts both fans over the whole kernel: limit sqrt(6 / ((2 + 4) * 6))
    fresh = L.Conv3D(4, (3, 2, 1))
    fresh(pg.Input((5, 4, 3, 2)))
    assert np.abs(fresh.weight.numpy()).max() <= np.sqrt(6.0 / 36) + 1e-6


def test_a_ct_scan_classifier_matches_torch_and_trains():
    """keras-io's 3D image classification from CT scans, shrunk: Conv3D, MaxPool3D,
    BatchNormalization, GlobalAveragePooling3D, Dense, Dropout; predictions against PyTorch
    with the same weights, then fit lowers the loss."""
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    inp = pg.Input((8, 12, 12, 1))
    x = L.Conv3D(4, 3, activation="relu")(inp)
    x = L.MaxPool3D(2)(x)
    x = L.BatchNormalization()(x)
    x = L.Conv3D(6, 3, activation="relu", padding="same")(x)
    x = L.GlobalAveragePooling3D()(x)
    x = L.Dense(8, activation="relu")(x)
    x = L.Dropout(0.3)(x)
    out = L.Dense(1, activation="sigmoid")(x)
    model = pg.Model(inp, out)
    rng = np.random.default_rng(4)
    xs = rng.normal(size=(10, 8, 12, 12, 1)).astype(np.float32)
    w = {k: np.asarray(v) for k, v in model.get_weights().items()}
    bn = [k.split(".")[0] for k in w if k.endswith("running_var")][0]
    w[f"{bn}.running_mean"] = rng.normal(size=4).astype(np.float32) * 0.1
    w[f"{bn}.running_var"] = rng.uniform(0.5, 1.5, size=4).astype(np.float32)
    model.set_weights(w)
    convs = [k.split(".")[0] for k in w if k.endswith(".weight") and w[k].ndim == 4]
    denses = [k.split(".")[0] for k in w if k.endswith(".weight") and w[k].ndim == 2]

    def t(a):
        return torch.tensor(np.asarray(a, dtype=np.float64))
    h = t(xs).permute(0, 4, 1, 2, 3)
    c0 = t(w[f"{convs[0]}.weight"]).reshape(4, 1, 3, 3, 3)
    h = F.max_pool3d(F.relu(F.conv3d(h, c0, t(w[f"{convs[0]}.bias"]))), 2)
    h = F.batch_norm(h, t(w[f"{bn}.running_mean"]), t(w[f"{bn}.running_var"]), t(w[f"{bn}.weight"]),
                     t(w[f"{bn}.bias"]), training=False, eps=1e-3)
    c1 = t(w[f"{convs[1]}.weight"]).reshape(6, 4, 3, 3, 3)
    h = F.relu(F.conv3d(h, c1, t(w[f"{convs[1]}.bias"]), padding=1)).mean(dim=(2, 3, 4))
    h = F.relu(h @ t(w[f"{denses[0]}.weight"]).T + t(w[f"{denses[0]}.bias"]))
    want = torch.sigmoid(h @ t(w[f"{denses[1]}.weight"]).T + t(w[f"{denses[1]}.bias"])).numpy()
    got = model.predict(xs)
    assert got.shape == (10, 1)
    assert np.allclose(got, want, atol=1e-5), np.abs(got - want).max()
    ys = (xs.mean(axis=(1, 2, 3, 4)) > 0).astype(np.float32)
    model.compile(optimizer=pg.optimizers.Adam(0.01), loss="binary_crossentropy", metrics=["accuracy"])
    loss = model.fit(xs, ys, epochs=40, batch_size=5, verbose=0).history["loss"]
    assert np.mean(loss[-5:]) < 0.7 * np.mean(loss[:5]), loss


def test_weighted_and_sparse_losses_on_volume_outputs_match_numpy():
    """A 5-D output comes back folded from the graph: per-sample weights still weigh whole
    samples, and sparse labels (n, D, H, W) of a 3-D segmentation reach their voxels."""
    rng = np.random.default_rng(5)
    inp = pg.Input((3, 4, 4, 2))
    model = pg.Model(inp, L.Conv3D(3, 3, padding="same")(inp))
    model.compile(optimizer="sgd", loss="mse")
    x = rng.normal(size=(4, 3, 4, 4, 2)).astype(np.float32)
    y = rng.normal(size=(4, 3, 4, 4, 3)).astype(np.float32)
    sw = np.array([1.0, 0.0, 2.0, 0.5], np.float32)
    per = ((model.predict(x).astype(np.float64) - y) ** 2).mean(axis=-1)        # (n, D, H, W)
    want = (per * sw[:, None, None, None]).sum() / per.size
    assert np.isclose(model.evaluate(x, y, sample_weight=sw, verbose=0), want, rtol=1e-5)
    model.compile(optimizer="sgd", loss=pg.losses.SparseCategoricalCrossentropy(from_logits=True))
    labels = rng.integers(0, 3, size=(4, 3, 4, 4)).astype(np.int32)
    z = model.predict(x).astype(np.float64)
    logp = z - z.max(axis=-1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(axis=-1, keepdims=True))
    want = -np.take_along_axis(logp, labels[..., None], axis=-1).mean()
    assert np.isclose(model.evaluate(x, labels, verbose=0), want, rtol=1e-5)


class TubeletEmbedding(L.Layer):
    """keras-io's video vision transformer: a custom layer of a Conv3D and a Reshape."""

    def __init__(self, embed_dim, patch_size, **kwargs):
        super().__init__(**kwargs)
        self.projection = L.Conv3D(filters=embed_dim, kernel_size=patch_size, strides=patch_size, padding="VALID")
        self.flatten = L.Reshape(target_shape=(-1, embed_dim))

    def call(self, videos):
        return self.flatten(self.projection(videos))


class TokensByHand(L.Layer):
    """The same tokens with Keras's ops in the custom call: ops.shape gives the volume's shape."""

    def __init__(self, embed_dim, patch_size, **kwargs):
        super().__init__(**kwargs)
        self.embed_dim = embed_dim
        self.projection = L.Conv3D(filters=embed_dim, kernel_size=patch_size, strides=patch_size)

    def call(self, videos):
        p = self.projection(videos)
        return pg.ops.reshape(p, (pg.ops.shape(p)[0], -1, self.embed_dim))


class PositionalEncoder(L.Layer):
    """keras-io's: the positions made with ops.arange in build, embedded in call."""

    def __init__(self, embed_dim, **kwargs):
        super().__init__(**kwargs)
        self.embed_dim = embed_dim

    def build(self, input_shape):
        _, num_tokens, _ = input_shape
        self.position_embedding = L.Embedding(input_dim=num_tokens, output_dim=self.embed_dim)
        self.positions = pg.ops.arange(start=0, stop=num_tokens, step=1)

    def call(self, encoded_tokens):
        return encoded_tokens + self.position_embedding(self.positions)


def test_custom_layers_on_volumes_the_video_vision_transformer_s_embedding():
    """A custom layer gets the folded volume; the Conv3D it calls still knows the volume,
    and its tokens equal numpy's patches times the kernel.  The positional encoder's
    Embedding, called on build's arange, trains in the graph."""
    rng = np.random.default_rng(6)
    inp = pg.Input((8, 8, 4, 1))
    tub = TubeletEmbedding(5, (4, 4, 2))
    tokens = tub(inp)
    assert tuple(tokens.shape) == (None, 8, 5)
    enc = PositionalEncoder(5)
    x = enc(tokens)
    out = L.Dense(2, activation="softmax")(L.GlobalAvgPool1D()(L.LayerNormalization()(x)))
    model = pg.Model(inp, out)
    xs = rng.normal(size=(3, 8, 8, 4, 1)).astype(np.float32)
    tok_model = pg.Model(inp, tokens)
    w = tub.projection.get_weights()
    want = conv3d_np(xs.astype(np.float64), w["weight"].reshape(5, 1, 4, 4, 2), w["bias"], (4, 4, 2))
    assert np.allclose(tok_model.predict(xs), want.reshape(3, 8, 5), atol=1e-5)
    by_hand = TokensByHand(5, (4, 4, 2))
    hand_model = pg.Model(inp, by_hand(inp))
    by_hand.projection.set_weights({"weight": w["weight"], "bias": w["bias"]})
    assert np.allclose(hand_model.predict(xs), want.reshape(3, 8, 5), atol=1e-5)
    model.compile(optimizer=pg.optimizers.Adam(0.05), loss="sparse_categorical_crossentropy")
    before = enc.position_embedding.get_weights()[0].copy()
    model.fit(xs, np.array([0, 1, 0]), epochs=2, verbose=0)
    assert not np.allclose(before, enc.position_embedding.get_weights()[0])
    assert isinstance(enc.positions, np.ndarray) and enc.positions.tolist() == list(range(8))


class _VolumeNet(pg.Model):
    def __init__(self):
        super().__init__()
        self.conv = L.Conv3D(2, 3, strides=2)
        self.pool = L.MaxPooling3D((1, 2, 2))
        self.gap = L.GlobalAveragePooling3D()
        self.out = L.Dense(1)

    def call(self, x):
        return self.out(self.gap(self.pool(self.conv(x))))


def test_a_subclassed_model_on_volumes_matches_its_functional_twin():
    rng = np.random.default_rng(7)
    xs = rng.normal(size=(3, 5, 9, 9, 1)).astype(np.float32)
    sub = _VolumeNet()
    got = np.asarray(sub(xs))
    inp = pg.Input((5, 9, 9, 1))
    twin = pg.Model(inp, sub.out(sub.gap(sub.pool(sub.conv(inp)))))
    assert got.shape == (3, 1) and np.allclose(got, twin.predict(xs), atol=1e-6)
    sub.compile(optimizer="sgd", loss="mse")
    loss = sub.fit(xs, np.ones((3, 1), np.float32), epochs=3, verbose=0).history["loss"]
    assert loss[-1] < loss[0]
