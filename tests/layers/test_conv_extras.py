"""DepthwiseConv1D/2D and SeparableConv1D/2D: the layer harness (float64 numpy
references over strides, "same"/"valid" padding, dilation, depth_multiplier and
both data formats), PyTorch parity of the forward pass and the gradients
(grouped convolutions), Keras's weight layouts, configs and bad arguments, and
a keras-io "image classification from scratch" shaped model that trains."""

import numpy as np
import pytest

import pyggml as pg
from harness import ACTIVATIONS, LayerCase, harness_tests

L = pg.layers


# --- float64 references -------------------------------------------------------------------------

def _same(size, span, s):
    out = -(-size // s)
    total = max((out - 1) * s + span - size, 0)
    return total // 2, total - total // 2          # Keras: the extra cell at the end


def depthwise_np(x, kernel, strides, padding, dilation, channels_first):
    """x (N, *spatial, C) (or channels first), kernel in Keras's layout (*k, C, M) ->
    (N, *out, C * M) (or channels first), float64."""
    rank = kernel.ndim - 2
    if channels_first:
        x = np.moveaxis(x, 1, -1)
    if rank == 1:
        x, kernel = x[:, None], kernel[None]
        strides, dilation = (1,) + tuple(strides), (1,) + tuple(dilation)
    kh, kw, c, m = kernel.shape
    (sh, sw), (dh, dw) = strides, dilation
    if padding == "same":
        x = np.pad(x, ((0, 0), _same(x.shape[1], (kh - 1) * dh + 1, sh), _same(x.shape[2], (kw - 1) * dw + 1, sw),
                       (0, 0)))
    oh = (x.shape[1] - (kh - 1) * dh - 1) // sh + 1
    ow = (x.shape[2] - (kw - 1) * dw - 1) // sw + 1
    out = np.zeros((x.shape[0], oh, ow, c, m))
    for a in range(kh):
        for b in range(kw):
            patch = x[:, a * dh:a * dh + (oh - 1) * sh + 1:sh, b * dw:b * dw + (ow - 1) * sw + 1:sw, :]
            out += patch[..., None] * kernel[a, b]
    out = out.reshape(out.shape[:3] + (c * m,))
    if rank == 1:
        out = out[:, 0]
    return np.moveaxis(out, -1, 1) if channels_first else out


def torch_to_keras_depthwise(w, m):
    """pyggml's (C * M, 1, *k) -> Keras's (*k, C, M)."""
    c = w.shape[0] // m
    k = w.shape[2:]
    return np.moveaxis(w.reshape((c, m) + k), (0, 1), (-2, -1))


def depthwise_ref(strides=1, padding="valid", dilation=1, m=1, channels_first=False, activation=None, rank=2):
    strides = (strides,) * rank if isinstance(strides, int) else strides
    dilation = (dilation,) * rank if isinstance(dilation, int) else dilation

    def ref(hs, w, training):
        y = depthwise_np(hs[0], torch_to_keras_depthwise(w["weight"], m), strides, padding, dilation, channels_first)
        if "bias" in w:
            y = y + (w["bias"].reshape((-1,) + (1,) * rank) if channels_first else w["bias"])
        return ACTIVATIONS[activation](y)
    return ref


def separable_ref(strides=1, padding="valid", dilation=1, channels_first=False, activation=None, rank=2):
    strides = (strides,) * rank if isinstance(strides, int) else strides
    dilation = (dilation,) * rank if isinstance(dilation, int) else dilation

    def ref(hs, w, training):
        x = np.moveaxis(hs[0], 1, -1) if channels_first else hs[0]
        d = depthwise_np(x, w["depthwise_kernel"], strides, padding, dilation, False)
        pw = w["pointwise_kernel"].reshape(w["pointwise_kernel"].shape[-2:])
        y = d @ pw + w.get("bias", 0.0)
        y = ACTIVATIONS[activation](y)
        return np.moveaxis(y, -1, 1) if channels_first else y
    return ref


CF = "channels_first"
CASES = [
    LayerCase("depthwise_conv2d", lambda: L.DepthwiseConv2D(2), [(4, 3, 2)], depthwise_ref()),
    LayerCase("depthwise_conv2d_same_stride2_mult2_relu",
              lambda: L.DepthwiseConv2D(3, strides=2, padding="same", depth_multiplier=2, activation="relu"),
              [(5, 4, 2)], depthwise_ref(2, "same", m=2, activation="relu")),
    LayerCase("depthwise_conv2d_dilated_same_nobias",
              lambda: L.DepthwiseConv2D((2, 3), padding="same", dilation_rate=(2, 1), use_bias=False),
              [(5, 4, 2)], depthwise_ref(padding="same", dilation=(2, 1))),
    LayerCase("depthwise_conv2d_channels_first_mult2",
              lambda: L.DepthwiseConv2D((2, 2), strides=(1, 2), depth_multiplier=2, data_format=CF),
              [(2, 4, 5)], depthwise_ref((1, 2), m=2, channels_first=True)),
    LayerCase("depthwise_conv2d_channels_first_same_tanh",
              lambda: L.DepthwiseConv2D(3, padding="same", data_format=CF, activation="tanh"),
              [(3, 3, 4)], depthwise_ref(padding="same", channels_first=True, activation="tanh")),
    LayerCase("depthwise_conv1d", lambda: L.DepthwiseConv1D(3), [(6, 2)], depthwise_ref(rank=1)),
    LayerCase("depthwise_conv1d_same_stride2_mult3",
              lambda: L.DepthwiseConv1D(2, strides=2, padding="same", depth_multiplier=3), [(7, 2)],
              depthwise_ref(2, "same", m=3, rank=1)),
    LayerCase("depthwise_conv1d_channels_first_dilated",
              lambda: L.DepthwiseConv1D(2, dilation_rate=2, padding="same", data_format=CF, depth_multiplier=2),
              [(2, 6)], depthwise_ref(padding="same", dilation=2, m=2, channels_first=True, rank=1)),
    LayerCase("separable_conv2d", lambda: L.SeparableConv2D(3, 2), [(4, 3, 2)], separable_ref()),
    LayerCase("separable_conv2d_same_stride2_mult2_relu",
              lambda: L.SeparableConv2D(2, 3, strides=2, padding="same", depth_multiplier=2, activation="relu"),
              [(5, 4, 2)], separable_ref(2, "same", activation="relu")),
    LayerCase("separable_conv2d_dilated_nobias",
              lambda: L.SeparableConv2D(2, 2, dilation_rate=2, use_bias=False), [(5, 5, 3)],
              separable_ref(dilation=2)),
    LayerCase("separable_conv2d_channels_first_same",
              lambda: L.SeparableConv2D(3, (3, 2), padding="same", depth_multiplier=2, data_format=CF),
              [(2, 4, 3)], separable_ref(padding="same", channels_first=True)),
    LayerCase("separable_conv1d", lambda: L.SeparableConv1D(3, 2), [(5, 2)], separable_ref(rank=1)),
    LayerCase("separable_conv1d_same_stride2_mult2_tanh",
              lambda: L.SeparableConv1D(2, 3, strides=2, padding="same", depth_multiplier=2, activation="tanh"),
              [(7, 3)], separable_ref(2, "same", activation="tanh", rank=1)),
    LayerCase("separable_conv1d_channels_first",
              lambda: L.SeparableConv1D(2, 2, dilation_rate=2, data_format=CF), [(2, 6)],
              separable_ref(dilation=2, channels_first=True, rank=1)),
]

# the harness's four checks over every case (forward, gradient, config, a training step)
test_forward, test_gradient, test_config, test_training_step = harness_tests(CASES)


# --- PyTorch parity: forward and gradients -----------------------------------------------------

def _torch_same_pad(x_nchw, spatial, kernel, strides, dilation):
    F = pytest.importorskip("torch").nn.functional
    pads = []
    for size, k, s, d in reversed(list(zip(spatial, kernel, strides, dilation))):
        pads.extend(_same(size, (k - 1) * d + 1, s))
    return F.pad(x_nchw, pads)


def _sgd_step(layer, x, y):
    """The layer alone in a Sequential: random weights, one SGD(1) step on mse over the whole
    batch; (weights before, weights after, predictions before)."""
    rng = np.random.default_rng(7)
    m = pg.Sequential([layer], input_shape=x.shape[1:]).compile(optimizer=pg.optimizers.SGD(1.0), loss="mse")
    try:
        w0 = {k.split(".", 1)[1]: rng.normal(scale=0.5, size=v.shape).astype(np.float32)
              for k, v in m.get_weights().items()}
        m.set_weights({f"{layer.name}.{k}": v for k, v in w0.items()})
        pred = m.predict(x)
        m.fit(x, y, batch_size=len(x), epochs=1, shuffle=False, verbose=0)
        w1 = {k.split(".", 1)[1]: v for k, v in m.get_weights().items()}
    finally:
        m.free()
    return w0, w1, pred


def _compare(torch_out, pred, y, params, w0, w1):
    torch = pytest.importorskip("torch")
    loss = ((torch_out - torch.tensor(y, dtype=torch.float64)) ** 2).mean()
    loss.backward()
    ref = torch_out.detach().numpy()
    np.testing.assert_allclose(pred, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())
    for name, t in params.items():
        g = t.grad.numpy()
        got = w0[name].astype(np.float64) - w1[name]
        assert np.abs(g).max() > 1e-3
        np.testing.assert_allclose(got, g, rtol=1e-4, atol=1e-4 * np.abs(g).max(), err_msg=name)


@pytest.mark.parametrize("channels_first", [False, True])
@pytest.mark.parametrize("kernel, strides, padding, dilation, m", [
    ((3, 3), (2, 2), "same", (1, 1), 2),
    ((2, 3), (1, 1), "same", (2, 2), 1),
    ((3, 2), (1, 2), "valid", (1, 1), 3),
])
def test_depthwise_conv2d_matches_torch_grouped_conv(kernel, strides, padding, dilation, m, channels_first):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    rng = np.random.default_rng(0)
    n, h, w, c = 3, 9, 8, 5
    x = rng.normal(size=(n, h, w, c)).astype(np.float32)
    layer = L.DepthwiseConv2D(kernel, strides=strides, padding=padding, dilation_rate=dilation, depth_multiplier=m,
                              data_format=CF if channels_first else None)
    xin = np.ascontiguousarray(x.transpose(0, 3, 1, 2)) if channels_first else x
    y = rng.normal(size=(n,) + layer.compute_output_shape((None,) + xin.shape[1:])[1:])
    w0, w1, pred = _sgd_step(layer, xin, y)
    wt = torch.tensor(w0["weight"], dtype=torch.float64, requires_grad=True)
    bt = torch.tensor(w0["bias"], dtype=torch.float64, requires_grad=True)
    xt = torch.tensor(x.transpose(0, 3, 1, 2), dtype=torch.float64)
    if padding == "same":
        xt = _torch_same_pad(xt, (h, w), kernel, strides, dilation)
    out = F.conv2d(xt, wt, bt, stride=strides, dilation=dilation, groups=c)
    out = out if channels_first else out.permute(0, 2, 3, 1)
    _compare(out, pred, y, {"weight": wt, "bias": bt}, w0, w1)


@pytest.mark.parametrize("channels_first", [False, True])
def test_depthwise_conv1d_matches_torch_grouped_conv(channels_first):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    x = rng.normal(size=(4, 11, 3)).astype(np.float32)
    layer = L.DepthwiseConv1D(3, strides=2, padding="same", depth_multiplier=2,
                              data_format=CF if channels_first else None)
    xin = np.ascontiguousarray(x.transpose(0, 2, 1)) if channels_first else x
    y = rng.normal(size=(4,) + layer.compute_output_shape((None,) + xin.shape[1:])[1:])
    w0, w1, pred = _sgd_step(layer, xin, y)
    wt = torch.tensor(w0["weight"], dtype=torch.float64, requires_grad=True)
    bt = torch.tensor(w0["bias"], dtype=torch.float64, requires_grad=True)
    xt = torch.nn.functional.pad(torch.tensor(x.transpose(0, 2, 1), dtype=torch.float64), _same(11, 3, 2))
    out = torch.nn.functional.conv1d(xt, wt, bt, stride=2, groups=3)
    out = out if channels_first else out.permute(0, 2, 1)
    _compare(out, pred, y, {"weight": wt, "bias": bt}, w0, w1)


@pytest.mark.parametrize("channels_first", [False, True])
@pytest.mark.parametrize("strides, padding, dilation, m", [((1, 1), "same", (1, 1), 1), ((2, 2), "same", (1, 1), 2),
                                                          ((1, 1), "valid", (2, 1), 2)])
def test_separable_conv2d_matches_torch(strides, padding, dilation, m, channels_first):
    """Keras's weight layouts: depthwise (kh, kw, C, M), pointwise (1, 1, C * M, F)."""
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    rng = np.random.default_rng(2)
    n, h, w, c, f = 2, 8, 7, 4, 6
    x = rng.normal(size=(n, h, w, c)).astype(np.float32)
    layer = L.SeparableConv2D(f, 3, strides=strides, padding=padding, dilation_rate=dilation, depth_multiplier=m,
                              data_format=CF if channels_first else None)
    xin = np.ascontiguousarray(x.transpose(0, 3, 1, 2)) if channels_first else x
    y = rng.normal(size=(n,) + layer.compute_output_shape((None,) + xin.shape[1:])[1:])
    w0, w1, pred = _sgd_step(layer, xin, y)
    assert w0["depthwise_kernel"].shape == (3, 3, c, m) and w0["pointwise_kernel"].shape == (1, 1, c * m, f)
    dk = torch.tensor(w0["depthwise_kernel"], dtype=torch.float64, requires_grad=True)
    pk = torch.tensor(w0["pointwise_kernel"], dtype=torch.float64, requires_grad=True)
    bt = torch.tensor(w0["bias"], dtype=torch.float64, requires_grad=True)
    xt = torch.tensor(x.transpose(0, 3, 1, 2), dtype=torch.float64)
    if padding == "same":
        xt = _torch_same_pad(xt, (h, w), (3, 3), strides, dilation)
    depth = F.conv2d(xt, dk.permute(2, 3, 0, 1).reshape(c * m, 1, 3, 3), None, stride=strides, dilation=dilation,
                     groups=c)
    out = F.conv2d(depth, pk.permute(3, 2, 0, 1), bt)
    out = out if channels_first else out.permute(0, 2, 3, 1)
    _compare(out, pred, y, {"depthwise_kernel": dk, "pointwise_kernel": pk, "bias": bt}, w0, w1)


def test_separable_conv1d_matches_torch():
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    rng = np.random.default_rng(3)
    x = rng.normal(size=(3, 10, 4)).astype(np.float32)
    layer = L.SeparableConv1D(5, 3, padding="same", depth_multiplier=2, dilation_rate=2)
    y = rng.normal(size=(3, 10, 5))
    w0, w1, pred = _sgd_step(layer, x, y)
    dk = torch.tensor(w0["depthwise_kernel"], dtype=torch.float64, requires_grad=True)      # (3, 4, 2)
    pk = torch.tensor(w0["pointwise_kernel"], dtype=torch.float64, requires_grad=True)      # (1, 8, 5)
    bt = torch.tensor(w0["bias"], dtype=torch.float64, requires_grad=True)
    xt = F.pad(torch.tensor(x.transpose(0, 2, 1), dtype=torch.float64), _same(10, 5, 1))
    depth = F.conv1d(xt, dk.permute(1, 2, 0).reshape(8, 1, 3), None, dilation=2, groups=4)
    out = F.conv1d(depth, pk.permute(2, 1, 0), bt).permute(0, 2, 1)
    _compare(out, pred, y, {"depthwise_kernel": dk, "pointwise_kernel": pk, "bias": bt}, w0, w1)


# --- weights, options, configs ------------------------------------------------------------------

def test_weight_shapes_names_and_keras_layout():
    m = pg.Sequential([L.DepthwiseConv2D((3, 2), depth_multiplier=2), L.SeparableConv2D(4, 2, depth_multiplier=3),
                       L.Flatten()], input_shape=(6, 5, 3))
    m.compile(loss="mse", seed=0)
    shapes = {k: v.shape for k, v in m.get_weights().items()}
    assert shapes == {"depthwise_conv2d.weight": (6, 1, 3, 2), "depthwise_conv2d.bias": (6,),
                      "separable_conv2d.depthwise_kernel": (2, 2, 6, 3),
                      "separable_conv2d.pointwise_kernel": (1, 1, 18, 4), "separable_conv2d.bias": (4,)}
    assert m.count_params() == 6 * 6 + 6 + 2 * 2 * 6 * 3 + 18 * 4 + 4
    m.free()
    seq = pg.Sequential([L.DepthwiseConv1D(3, depth_multiplier=2), L.SeparableConv1D(2, 2)], input_shape=(7, 3))
    seq.compile(loss="mse", seed=0)
    assert {k: v.shape for k, v in seq.get_weights().items()} == {
        "depthwise_conv1d.weight": (6, 1, 3), "depthwise_conv1d.bias": (6,),
        "separable_conv1d.depthwise_kernel": (2, 6, 1), "separable_conv1d.pointwise_kernel": (1, 6, 2),
        "separable_conv1d.bias": (2,)}
    seq.free()


def test_glorot_fans_are_keras_s():
    """Keras's fans: depthwise (k, k, C, M): C * k * k in, M * k * k out; pointwise: C * M in, filters out."""
    c, m, f = 16, 2, 8
    model = pg.Sequential([L.DepthwiseConv2D(3, depth_multiplier=m), L.SeparableConv2D(f, 3, depth_multiplier=m)],
                          input_shape=(9, 9, c)).compile(loss="mse", seed=0)
    w = model.get_weights()
    model.free()
    for key, fan_in, fan_out in (("depthwise_conv2d.weight", c * 9, m * 9),
                                 ("separable_conv2d.depthwise_kernel", c * m * 9, m * 9),
                                 ("separable_conv2d.pointwise_kernel", c * m * m, f)):
        limit = np.sqrt(6.0 / (fan_in + fan_out))
        a = np.abs(w[key])
        assert a.max() <= limit and a.max() > 0.9 * limit, key
    assert not w["depthwise_conv2d.bias"].any()


def test_keras_config_keys_and_round_trip():
    d = L.DepthwiseConv2D(3, strides=2, padding="same", depth_multiplier=2, data_format=CF, activation="relu")
    assert set(d.get_config()) >= {"name", "trainable", "dtype", "kernel_size", "strides", "padding", "data_format",
                                   "dilation_rate", "depth_multiplier", "activation", "use_bias",
                                   "depthwise_initializer", "bias_initializer", "depthwise_regularizer",
                                   "bias_regularizer", "depthwise_constraint", "bias_constraint"}
    cfg = d.get_config()
    assert (cfg["kernel_size"], cfg["strides"], cfg["padding"], cfg["data_format"], cfg["depth_multiplier"]) == \
        ((3, 3), (2, 2), "same", CF, 2)
    assert L.DepthwiseConv2D(2).get_config()["data_format"] == "channels_last"
    assert L.DepthwiseConv1D(2, data_format="Channels_First").get_config()["data_format"] == CF
    s = L.SeparableConv1D(4, 3, padding="SAME", pointwise_regularizer="l2", pointwise_constraint="non_neg")
    cfg = s.get_config()
    assert cfg["filters"] == 4 and cfg["padding"] == "same" and cfg["pointwise_initializer"] == "glorot_uniform"
    assert cfg["pointwise_regularizer"] is not None and cfg["pointwise_constraint"] is not None
    assert L.SeparableConv1D.from_config(cfg).get_config() == cfg


def test_depthwise_constraint_sees_keras_layout():
    """MaxNorm(axis=[0, 1]) over Keras's (kh, kw, C, M): each (channel, multiplier) kernel."""
    pytest.importorskip("torch")
    from test_weight_options import check_step, np_max_norm, t_l1, t_l2
    F = pytest.importorskip("torch").nn.functional
    layer = L.DepthwiseConv2D(2, depth_multiplier=2, depthwise_regularizer=pg.regularizers.L2(0.05),
                              bias_regularizer=pg.regularizers.L1(0.1),
                              depthwise_constraint=pg.constraints.MaxNorm(0.5, axis=[0, 1]))

    def fwd(w, x):
        return F.conv2d(x.permute(0, 3, 1, 2), w["weight"], w["bias"], groups=3).permute(0, 2, 3, 1)

    def project(w):
        k = torch_to_keras_depthwise(w["weight"], 2)                  # (2, 2, 3, 2)
        k = np_max_norm(k, 0.5, [0, 1])
        w["weight"] = np.moveaxis(k, (-2, -1), (0, 1)).reshape(6, 1, 2, 2)
        return w
    stepped, want = check_step(layer, (4, 4, 3), fwd, lambda w, o: 0.05 * t_l2(w["weight"]) + 0.1 * t_l1(w["bias"]),
                               project)
    assert not np.allclose(stepped["weight"], want["weight"])


def test_separable_regularizers_and_pointwise_constraint():
    pytest.importorskip("torch")
    from test_weight_options import check_step, t_l1, t_l2
    F = pytest.importorskip("torch").nn.functional
    layer = L.SeparableConv2D(3, 2, depthwise_regularizer=pg.regularizers.L2(0.05),
                              pointwise_regularizer=pg.regularizers.L1(0.02), pointwise_constraint="non_neg")

    def fwd(w, x):
        depth = F.conv2d(x.permute(0, 3, 1, 2), w["depthwise_kernel"].permute(2, 3, 0, 1).reshape(2, 1, 2, 2),
                         groups=2)
        return F.conv2d(depth, w["pointwise_kernel"].permute(3, 2, 0, 1), w["bias"]).permute(0, 2, 3, 1)

    def project(w):
        w["pointwise_kernel"] = np.maximum(w["pointwise_kernel"], 0)
        return w
    check_step(layer, (4, 3, 2), fwd,
               lambda w, o: 0.05 * t_l2(w["depthwise_kernel"]) + 0.02 * t_l1(w["pointwise_kernel"]), project)


def test_eager_call_on_arrays():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(2, 6, 5, 3)).astype(np.float32)
    d = L.DepthwiseConv2D(3, padding="same", depth_multiplier=2)
    out = d(x)
    w = d.get_weights()
    ref = depthwise_np(x.astype(np.float64), torch_to_keras_depthwise(w["weight"].astype(np.float64), 2), (1, 1),
                       "same", (1, 1), False) + w["bias"]
    assert out.shape == (2, 6, 5, 6)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    s = L.SeparableConv1D(4, 2, data_format=CF)
    assert s(rng.normal(size=(2, 3, 7))).shape == (2, 4, 6)


# --- bad arguments and inputs -------------------------------------------------------------------

@pytest.mark.parametrize("make, exc, words", [
    (lambda: L.DepthwiseConv2D(0), ValueError, "kernel_size"),
    (lambda: L.DepthwiseConv2D((1, 2, 3)), ValueError, "kernel_size"),
    (lambda: L.DepthwiseConv1D("3"), TypeError, "kernel_size"),
    (lambda: L.DepthwiseConv2D(3, strides=0), ValueError, "strides"),
    (lambda: L.DepthwiseConv2D(3, dilation_rate=(1, 0)), ValueError, "dilation_rate"),
    (lambda: L.DepthwiseConv2D(3, depth_multiplier=0), ValueError, "depth_multiplier"),
    (lambda: L.DepthwiseConv2D(3, depth_multiplier=1.5), TypeError, "depth_multiplier"),
    (lambda: L.DepthwiseConv2D(3, padding="causal"), ValueError, "padding"),
    (lambda: L.DepthwiseConv1D(3, padding="causal"), ValueError, "padding"),
    (lambda: L.DepthwiseConv2D(3, data_format="NHWC"), ValueError, "data_format"),
    (lambda: L.DepthwiseConv2D(3, activation="nope"), ValueError, "nope"),
    (lambda: L.DepthwiseConv2D(3, depthwise_initializer="nope"), ValueError, "depthwise_initializer"),
    (lambda: L.DepthwiseConv2D(3, depthwise_regularizer="nope"), ValueError, "depthwise_regularizer"),
    (lambda: L.DepthwiseConv2D(3, bias_constraint="nope"), ValueError, "bias_constraint"),
    (lambda: L.DepthwiseConv2D(3, filters=2), TypeError, "filters"),
    (lambda: L.SeparableConv2D(0, 3), ValueError, "filters"),
    (lambda: L.SeparableConv2D(2, 3, pointwise_initializer="nope"), ValueError, "pointwise_initializer"),
    (lambda: L.SeparableConv2D(2, 3, pointwise_constraint="nope"), ValueError, "pointwise_constraint"),
    (lambda: L.SeparableConv1D(2, (2, 2)), ValueError, "kernel_size"),
    (lambda: L.SeparableConv1D(2, 2, data_format="channels_middle"), ValueError, "data_format"),
])
def test_bad_arguments(make, exc, words):
    with pytest.raises(exc, match=words):
        make()


@pytest.mark.parametrize("layer, shape, words", [
    (lambda: L.DepthwiseConv2D(3), (5, 2), "height, width, channels"),
    (lambda: L.DepthwiseConv2D(3, data_format=CF), (5, 2), "channels, height, width"),
    (lambda: L.DepthwiseConv1D(3), (5, 5, 2), "steps, channels"),
    (lambda: L.SeparableConv2D(2, 3), (2, 2, 1), "larger than the input"),
    (lambda: L.SeparableConv1D(2, 3, dilation_rate=3), (6, 1), "larger than the input"),
    (lambda: L.DepthwiseConv2D(3, data_format=CF), (2, 2, 8), "larger than the input"),
])
def test_bad_input_shapes(layer, shape, words):
    with pytest.raises(ValueError, match=words):
        pg.Sequential([layer()], input_shape=shape).compile(loss="mse")
    with pytest.raises(ValueError, match=words):
        inp = pg.Input(shape)
        pg.Model(inp, layer()(inp))


def test_bad_eager_inputs():
    d = L.DepthwiseConv2D(2)
    with pytest.raises(ValueError, match="height, width, channels"):
        d(np.ones((2, 4, 4)))
    d(np.ones((1, 4, 4, 2)))
    with pytest.raises(ValueError):
        d(np.ones((1, 4, 4, 3)))                     # built for 2 channels
    with pytest.raises(ValueError, match="larger than the input"):
        L.SeparableConv2D(2, 5)(np.ones((1, 4, 4, 2)))


# --- keras-io's "image classification from scratch", scaled down --------------------------------

def xception_like(input_shape, sizes=(8, 16)):
    """keras-io's make_model: an entry Conv2D, then blocks of two SeparableConv2D (padding
    "same") with BatchNormalization, a strided MaxPooling2D and a 1x1 Conv2D residual
    joined with layers.add, then SeparableConv2D, GlobalAveragePooling2D, Dropout, Dense."""
    inputs = pg.Input(input_shape)
    x = L.Conv2D(sizes[0], 3, strides=2, padding="same")(inputs)
    x = L.BatchNormalization()(x)
    x = L.Activation("relu")(x)
    previous = x
    for size in sizes:
        x = L.Activation("relu")(x)
        x = L.SeparableConv2D(size, 3, padding="same")(x)
        x = L.BatchNormalization()(x)
        x = L.Activation("relu")(x)
        x = L.SeparableConv2D(size, 3, padding="same")(x)
        x = L.BatchNormalization()(x)
        x = L.MaxPooling2D(3, strides=2, padding="same")(x)
        residual = L.Conv2D(size, 1, strides=2, padding="same")(previous)
        x = L.add([x, residual])
        previous = x
    x = L.SeparableConv2D(sizes[-1] * 2, 3, padding="same")(x)
    x = L.BatchNormalization()(x)
    x = L.Activation("relu")(x)
    x = L.GlobalAveragePooling2D()(x)
    x = L.Dropout(0.25)(x)
    return pg.Model(inputs, L.Dense(1, activation="sigmoid")(x))


def test_image_classification_from_scratch_shape_trains(tmp_path):
    rng = np.random.default_rng(5)
    x = rng.normal(size=(128, 16, 16, 3)).astype(np.float32)
    y = (x[..., 0].mean(axis=(1, 2)) > x[..., 1].mean(axis=(1, 2))).astype(np.float32)[:, None]
    model = xception_like((16, 16, 3))
    model.compile(optimizer=pg.optimizers.Adam(3e-3), loss="binary_crossentropy", metrics=["accuracy"], seed=0)
    try:
        assert model.layers[-1].output_shape == (None, 1)
        h = model.fit(x, y, epochs=15, batch_size=32, verbose=0)
        loss, acc = h.history["loss"], h.history["accuracy"]
        assert loss[-1] < 0.5 * loss[0], loss
        assert acc[-1] > 0.9, acc
        path = str(tmp_path / "xception_like.gguf")
        model.save(path)
        again = pg.load_model(path)
        try:
            np.testing.assert_array_equal(again.predict(x[:8]), model.predict(x[:8]))
        finally:
            again.free()
    finally:
        model.free()
