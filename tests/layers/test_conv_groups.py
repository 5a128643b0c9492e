"""Conv1D and Conv2D with Keras's ``groups``: the harness over grouped cases (numpy
reference, finite-difference gradients, config and save/load, a training step), the
forward pass and one SGD step against PyTorch's grouped convolutions, the depthwise
route (groups == channels), and the checks of ``groups`` before anything is built.
Weights are PyTorch's grouped layout (filters, channels / groups, *kernel)."""

import numpy as np
import pytest

import pyggml as pg
from harness import ACTIVATIONS, LayerCase, harness_tests

L = pg.layers


def _same(size, k, s):
    out = -(-size // s)
    total = max((out - 1) * s + k - size, 0)
    return total // 2, total - total // 2          # Keras: the extra row/column at the end


def grouped_conv2d(x, weight, bias, groups, strides=(1, 1), padding="valid", dilation=(1, 1)):
    """float64 reference: x (N, H, W, C), weight (F, C / groups, kh, kw) -> (N, OH, OW, F)."""
    f, cg, kh, kw = weight.shape
    (sh, sw), (dh, dw) = strides, dilation
    spans = ((kh - 1) * dh + 1, (kw - 1) * dw + 1)
    if padding == "same":
        x = np.pad(x, ((0, 0), _same(x.shape[1], spans[0], sh), _same(x.shape[2], spans[1], sw), (0, 0)))
    elif padding == "causal":
        x = np.pad(x, ((0, 0), (0, 0), (spans[1] - 1, 0), (0, 0)))
    oh, ow = (x.shape[1] - spans[0]) // sh + 1, (x.shape[2] - spans[1]) // sw + 1
    fg = f // groups
    out = np.empty((x.shape[0], oh, ow, f))
    for g in range(groups):
        xg, wg = x[..., g * cg:(g + 1) * cg], weight[g * fg:(g + 1) * fg]
        for i in range(oh):
            for j in range(ow):
                patch = xg[:, i * sh:i * sh + spans[0]:dh, j * sw:j * sw + spans[1]:dw, :]
                out[:, i, j, g * fg:(g + 1) * fg] = np.einsum("nhwc,fchw->nf", patch, wg)
    return out + (0.0 if bias is None else bias)


def conv2d_ref(groups, strides=(1, 1), padding="valid", dilation=(1, 1), activation=None):
    def ref(hs, w, training):
        y = grouped_conv2d(hs[0], w["weight"], w.get("bias"), groups, strides, padding, dilation)
        return ACTIVATIONS[activation](y)
    return ref


def conv1d_ref(groups, stride=1, padding="valid", dilation=1, activation=None):
    def ref(hs, w, training):
        y = grouped_conv2d(hs[0][:, None], w["weight"][:, :, None, :], w.get("bias"), groups, (1, stride),
                           padding, (1, dilation))
        return ACTIVATIONS[activation](y[:, 0])
    return ref


CASES = [
    LayerCase("conv2d_g2", lambda: L.Conv2D(4, 2, groups=2), [(4, 3, 4)], conv2d_ref(2)),
    LayerCase("conv2d_g2_same_stride2_relu", lambda: L.Conv2D(6, 3, strides=2, padding="same", groups=2,
                                                              activation="relu"),
              [(5, 4, 4)], conv2d_ref(2, (2, 2), "same", activation="relu")),
    LayerCase("conv2d_g3_nobias_gelu", lambda: L.Conv2D(3, (2, 3), strides=(1, 2), groups=3, use_bias=False,
                                                        activation="gelu"),
              [(3, 5, 6)], conv2d_ref(3, (1, 2), activation="gelu")),
    LayerCase("conv2d_depthwise", lambda: L.Conv2D(3, 3, padding="same", groups=3), [(4, 4, 3)],
              conv2d_ref(3, padding="same")),
    LayerCase("conv2d_depthwise_multiplier2_dilated", lambda: L.Conv2D(4, 2, groups=2, dilation_rate=2,
                                                                        activation="tanh"),
              [(5, 4, 2)], conv2d_ref(2, dilation=(2, 2), activation="tanh")),
    LayerCase("conv1d_g2", lambda: L.Conv1D(4, 3, groups=2), [(6, 4)], conv1d_ref(2)),
    LayerCase("conv1d_g2_same_stride2", lambda: L.Conv1D(2, 3, strides=2, padding="same", groups=2),
              [(7, 4)], conv1d_ref(2, 2, "same")),
    LayerCase("conv1d_g2_causal_dilated_relu", lambda: L.Conv1D(4, 2, padding="causal", dilation_rate=2, groups=2,
                                                                activation="relu"),
              [(5, 2)], conv1d_ref(2, padding="causal", dilation=2, activation="relu")),
    LayerCase("conv1d_depthwise_same", lambda: L.Conv1D(4, 3, padding="same", groups=4), [(5, 4)],
              conv1d_ref(4, padding="same")),
    LayerCase("conv1d_depthwise_causal", lambda: L.Conv1D(3, 2, padding="causal", groups=3), [(4, 3)],
              conv1d_ref(3, padding="causal")),
]


# the harness's four checks over every case (forward, gradient, config and save/load, a training step)
test_forward, test_gradient, test_config, test_training_step = harness_tests(CASES)


# --- against PyTorch ----------------------------------------------------------------------

def _torch_input(torch, x, rank, kernel, strides, padding, dilation):
    """x channels-last -> channels-first, padded as Keras pads it."""
    xt = torch.tensor(x, dtype=torch.float64).movedim(-1, 1)
    pads = []
    for i in reversed(range(rank)):                      # F.pad: the last axis first
        span = (kernel[i] - 1) * dilation[i] + 1
        if padding == "same":
            pads += list(_same(x.shape[1 + i], span, strides[i]))
        elif padding == "causal":
            pads += [span - 1, 0]
        else:
            pads += [0, 0]
    return torch.nn.functional.pad(xt, pads)


def _torch_conv(torch, rank, xt, weight, bias, strides, dilation, groups):
    conv = torch.nn.functional.conv2d if rank == 2 else torch.nn.functional.conv1d
    y = conv(xt, weight, bias, stride=strides, dilation=dilation, groups=groups)
    return y.movedim(1, -1)


def _layer(rank, filters, kernel, **kwargs):
    return (L.Conv2D if rank == 2 else L.Conv1D)(filters, kernel, **kwargs)


TORCH_CASES = [
    # rank, channels, filters, groups, kernel, strides, padding, dilation, spatial
    (2, 4, 6, 1, (3, 3), (1, 1), "valid", (1, 1), (6, 5)),
    (2, 4, 6, 2, (3, 3), (1, 1), "same", (1, 1), (6, 5)),
    (2, 4, 8, 2, (3, 2), (2, 1), "valid", (1, 1), (7, 5)),
    (2, 6, 6, 3, (2, 2), (2, 2), "same", (1, 1), (5, 6)),
    (2, 4, 4, 4, (3, 3), (1, 1), "same", (1, 1), (5, 5)),            # depthwise (ConvMixer's)
    (2, 4, 8, 4, (3, 3), (2, 2), "valid", (1, 1), (7, 6)),           # depthwise, 2 kernels a channel
    (2, 4, 4, 2, (2, 2), (1, 1), "same", (2, 2), (6, 6)),
    (1, 4, 6, 1, (3,), (1,), "valid", (1,), (8,)),
    (1, 4, 6, 2, (3,), (2,), "same", (1,), (9,)),
    (1, 6, 3, 3, (2,), (1,), "causal", (2,), (7,)),
    (1, 4, 4, 4, (3,), (2,), "same", (1,), (8,)),
    (1, 4, 4, 4, (2,), (1,), "causal", (1,), (6,)),
]
TORCH_IDS = [f"conv{r}d-c{c}-f{f}-g{g}-s{s[0]}-{p}-d{d[0]}" for r, c, f, g, _, s, p, d, _ in TORCH_CASES]


def _model(rank, channels, filters, groups, kernel, strides, padding, dilation, spatial, activation=None):
    layer = _layer(rank, filters, kernel, strides=strides, padding=padding, dilation_rate=dilation, groups=groups,
                   activation=activation)
    inp = pg.Input(spatial + (channels,))
    return pg.Model(inp, layer(inp)), layer


def _random_weights(model, rng):
    w = {k: rng.normal(scale=0.5, size=v.shape).astype(np.float32) for k, v in model.get_weights().items()}
    model.set_weights(w)
    return w


@pytest.mark.parametrize("case", TORCH_CASES, ids=TORCH_IDS)
def test_forward_matches_torch(case):
    torch = pytest.importorskip("torch")
    rank, channels, filters, groups, kernel, strides, padding, dilation, spatial = case
    rng = np.random.default_rng(0)
    m, layer = _model(*case)
    try:
        w = _random_weights(m, rng)
        assert layer.weight.shape == (filters, channels // groups) + kernel
        assert layer.kernel.shape == kernel + (channels // groups, filters)
        x = rng.normal(size=(3,) + spatial + (channels,)).astype(np.float32)
        got = m.predict(x, verbose=0)
        xt = _torch_input(torch, x, rank, kernel, strides, padding, dilation)
        want = _torch_conv(torch, rank, xt, torch.tensor(w[f"{layer.name}.weight"], dtype=torch.float64),
                           torch.tensor(w[f"{layer.name}.bias"], dtype=torch.float64), strides, dilation,
                           groups).numpy()
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        ref = grouped_conv2d(x[:, None] if rank == 1 else x,
                             w[f"{layer.name}.weight"][:, :, None] if rank == 1 else w[f"{layer.name}.weight"],
                             w[f"{layer.name}.bias"], groups, (1,) + strides if rank == 1 else strides, padding,
                             (1,) + dilation if rank == 1 else dilation)
        np.testing.assert_allclose(got, ref[:, 0] if rank == 1 else ref, rtol=1e-5, atol=1e-5)
    finally:
        m.free()


@pytest.mark.parametrize("case", TORCH_CASES, ids=TORCH_IDS)
def test_one_sgd_step_matches_torch(case):
    """The weights after one SGD step of the mse loss are PyTorch's."""
    torch = pytest.importorskip("torch")
    rank, channels, filters, groups, kernel, strides, padding, dilation, spatial = case
    rng = np.random.default_rng(1)
    lr = 0.5
    m, layer = _model(*case, activation="tanh")
    try:
        m.compile(optimizer=pg.optimizers.SGD(learning_rate=lr), loss="mse", seed=0)
        w0 = _random_weights(m, rng)
        x = rng.normal(size=(2,) + spatial + (channels,)).astype(np.float32)
        y = rng.normal(size=(2,) + tuple(layer.output_shape[1:])).astype(np.float32)
        m.fit(x, y, epochs=1, batch_size=2, shuffle=False, verbose=0)
        w1 = m.get_weights()
        wt = torch.tensor(w0[f"{layer.name}.weight"], dtype=torch.float64, requires_grad=True)
        bt = torch.tensor(w0[f"{layer.name}.bias"], dtype=torch.float64, requires_grad=True)
        xt = _torch_input(torch, x, rank, kernel, strides, padding, dilation)
        out = torch.tanh(_torch_conv(torch, rank, xt, wt, bt, strides, dilation, groups))
        torch.mean((out - torch.tensor(y, dtype=torch.float64)) ** 2).backward()
        for name, t in (("weight", wt), ("bias", bt)):
            want = (t - lr * t.grad).detach().numpy()
            np.testing.assert_allclose(w1[f"{layer.name}.{name}"], want, rtol=1e-4, atol=1e-5, err_msg=name)
        assert not np.allclose(w1[f"{layer.name}.weight"], w0[f"{layer.name}.weight"])
    finally:
        m.free()


# --- the depthwise route, groups=1, the Keras view -----------------------------------------

@pytest.mark.parametrize("rank", [1, 2])
def test_groups_equal_to_channels_is_the_depthwise_convolution(rank):
    """Conv(C * M, k, groups=C) is DepthwiseConv(k, depth_multiplier=M): the same weight
    layout and the same output."""
    rng = np.random.default_rng(2)
    spatial = (6, 5) if rank == 2 else (7,)
    conv = _layer(rank, 6, 3, padding="same", groups=3)
    depthwise = (L.DepthwiseConv2D if rank == 2 else L.DepthwiseConv1D)(3, padding="same", depth_multiplier=2)
    inp = pg.Input(spatial + (3,))
    m1, m2 = pg.Model(inp, conv(inp)), pg.Model(inp, depthwise(inp))
    try:
        assert conv.weight.shape == depthwise.weight.shape
        assert conv.kernel.shape == (3,) * rank + (1, 6)
        w = {"weight": rng.normal(size=conv.weight.shape).astype(np.float32),
             "bias": rng.normal(size=(6,)).astype(np.float32)}
        conv.set_weights(w)
        depthwise.set_weights(w)
        x = rng.normal(size=(2,) + spatial + (3,)).astype(np.float32)
        np.testing.assert_allclose(m1.predict(x, verbose=0), m2.predict(x, verbose=0), rtol=1e-6, atol=1e-6)
    finally:
        m1.free()
        m2.free()


def test_groups_one_is_the_plain_convolution():
    rng = np.random.default_rng(3)
    a, b = L.Conv2D(4, 3, padding="same"), L.Conv2D(4, 3, padding="same", groups=1)
    assert a.groups == b.groups == 1
    assert a.get_config()["groups"] == 1
    inp = pg.Input((5, 5, 2))
    m1, m2 = pg.Model(inp, a(inp)), pg.Model(inp, b(inp))
    try:
        w = {k.split(".", 1)[1]: v for k, v in _random_weights(m1, rng).items()}
        b.set_weights(w)
        x = rng.normal(size=(2, 5, 5, 2)).astype(np.float32)
        np.testing.assert_array_equal(m1.predict(x, verbose=0), m2.predict(x, verbose=0))
    finally:
        m1.free()
        m2.free()


def test_keras_kernel_view_sets_the_grouped_weight():
    layer = L.Conv2D(6, (3, 2), groups=2)
    inp = pg.Input((5, 5, 4))
    m = pg.Model(inp, layer(inp))
    try:
        kernel = np.arange(3 * 2 * 2 * 6, dtype=np.float32).reshape(3, 2, 2, 6)
        layer.set_weights([kernel, np.zeros(6, np.float32)])
        np.testing.assert_array_equal(layer.weight.numpy(), kernel.transpose(3, 2, 0, 1))
        np.testing.assert_array_equal(layer.get_weights()[0], kernel)
    finally:
        m.free()


# --- config --------------------------------------------------------------------------------

@pytest.mark.parametrize("cls", [L.Conv1D, L.Conv2D])
def test_config_keeps_groups_and_an_old_config_loads_as_groups_one(cls):
    cfg = cls(4, 3, groups=2).get_config()
    assert cfg["groups"] == 2
    assert cls.from_config(cfg).groups == 2
    old = dict(cfg)
    del old["groups"]
    assert cls.from_config(old).groups == 1


def test_a_saved_grouped_model_loads_and_predicts_alike(tmp_path):
    rng = np.random.default_rng(4)
    inp = pg.Input((6, 6, 4))
    h = L.Conv2D(4, 3, padding="same", groups=4, activation="relu")(inp)
    h = L.Conv2D(6, 2, groups=2)(h)
    out = L.Conv1D(4, 2, groups=2)(pg.layers.Reshape((25, 6))(h))
    m = pg.Model(inp, out)
    try:
        _random_weights(m, rng)
        x = rng.normal(size=(2, 6, 6, 4)).astype(np.float32)
        p = m.predict(x, verbose=0)
        path = str(tmp_path / "grouped.gguf")
        m.save(path)
        m2 = pg.load_model(path)
        try:
            assert [getattr(layer, "groups", None) for layer in m2.layers[1:]] == [4, 2, None, 2]
            np.testing.assert_array_equal(m2.predict(x, verbose=0), p)
        finally:
            m2.free()
    finally:
        m.free()


# --- validation ------------------------------------------------------------------------------

@pytest.mark.parametrize("cls", [L.Conv1D, L.Conv2D])
@pytest.mark.parametrize("groups", [0, -2, 1.5, 2.0, "2", True, None])
def test_groups_must_be_a_positive_int(cls, groups):
    with pytest.raises(ValueError, match="groups must be a positive int"):
        cls(4, 3, groups=groups)


@pytest.mark.parametrize("cls", [L.Conv1D, L.Conv2D])
def test_groups_must_divide_filters(cls):
    with pytest.raises(ValueError, match=r"groups \(3\) must divide filters \(4\)"):
        cls(4, 3, groups=3)


@pytest.mark.parametrize("cls, shape", [(L.Conv1D, (8, 6)), (L.Conv2D, (5, 5, 6))])
def test_groups_must_divide_the_input_channels(cls, shape):
    layer = cls(4, 3, groups=4)
    with pytest.raises(ValueError, match=r"groups \(4\) must divide the input channels, got 6"):
        layer(pg.Input(shape))
    assert not layer.built


def test_the_transposed_convolutions_take_no_groups():
    with pytest.raises(TypeError, match="groups"):
        L.Conv2DTranspose(4, 3, groups=2)
