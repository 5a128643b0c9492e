"""Conv1DTranspose and Conv2DTranspose: the layer harness (float64 numpy
reference), PyTorch's conv_transpose (forward and gradients), Keras's output
lengths, PyTorch's weight layout."""

import numpy as np
import pytest

import pyggml as pg
from harness import ACTIVATIONS, LayerCase, harness_tests

L = pg.layers


def keras_pads(k, s, padding, output_padding):
    """Keras 3's padding of the zero-inserted input (before, after) and the output length rule."""
    if padding == "valid":
        op = max(k, s) - k if output_padding is None else output_padding
        return k - 1, k - 1 + op
    pad_len = s + k - 2 if output_padding is None else k + k % 2 - 2 + output_padding
    before = min(pad_len // 2 + pad_len % 2, k - 1)
    return before, pad_len - before


def keras_length(size, k, s, padding, output_padding):
    """Keras's compute_conv_transpose_output_length (dilation 1), written its own way."""
    if output_padding is None:
        return size * s + max(k - s, 0) if padding == "valid" else size * s
    pad = k // 2 if padding == "same" else 0
    return (size - 1) * s + k - 2 * pad + output_padding


def full_transpose(x, w, strides):
    """The whole transposed convolution (no cropping): x (N, H, W, Cin),
    w (Cin, Cout, kh, kw) -> (N, (H-1)sh + kh, (W-1)sw + kw, Cout), by scattering."""
    n, h, wd, _ = x.shape
    _, cout, kh, kw = w.shape
    sh, sw = strides
    out = np.zeros((n, (h - 1) * sh + kh, (wd - 1) * sw + kw, cout))
    for i in range(h):
        for j in range(wd):
            out[:, i * sh:i * sh + kh, j * sw:j * sw + kw, :] += np.einsum("nc,coab->nabo", x[:, i, j], w)
    return out


def crop(full, axis, start, length):
    """full[start:start + length] along axis, zeros past its end."""
    sl = np.take(full, np.arange(start, min(start + length, full.shape[axis])), axis=axis)
    missing = start + length - full.shape[axis]
    if missing > 0:
        pad = [(0, 0)] * full.ndim
        pad[axis] = (0, missing)
        sl = np.pad(sl, pad)
    return sl


def conv2d_transpose_np(x, w, b, strides, padding, output_padding=None):
    kh, kw = w.shape[2:]
    ops_ = output_padding or (None, None)
    full = full_transpose(x, w, strides)
    for axis, k, s, op, size in ((1, kh, strides[0], ops_[0], x.shape[1]), (2, kw, strides[1], ops_[1], x.shape[2])):
        before, _ = keras_pads(k, s, padding, op)
        full = crop(full, axis, k - 1 - before, keras_length(size, k, s, padding, op))
    return full + (0.0 if b is None else b)


def dilate(w, d):
    """A (Cin, Cout, kh, kw) kernel with d - 1 zeros between its taps: (d0 (kh-1) + 1, ...)."""
    d0, d1 = d
    cin, cout, kh, kw = w.shape
    out = np.zeros((cin, cout, (kh - 1) * d0 + 1, (kw - 1) * d1 + 1))
    out[:, :, ::d0, ::d1] = w
    return out


def ct2d_ref(strides=(1, 1), padding="valid", output_padding=None, activation=None, dilation=(1, 1)):
    def ref(hs, w, training):
        y = conv2d_transpose_np(hs[0], dilate(w["weight"], dilation), w.get("bias"), strides, padding,
                                output_padding)
        return ACTIVATIONS[activation](y)
    return ref


def ct1d_ref(stride=1, padding="valid", output_padding=None, activation=None, dilation=1):
    def ref(hs, w, training):
        op = None if output_padding is None else (0, output_padding)
        y = conv2d_transpose_np(hs[0][:, None], dilate(w["weight"][:, :, None, :], (1, dilation)), w.get("bias"),
                                (1, stride), padding, op)[:, 0]
        return ACTIVATIONS[activation](y)
    return ref


CASES = [
    LayerCase("conv2d_transpose", lambda: L.Conv2DTranspose(3, 2), [(3, 2, 2)], ct2d_ref()),
    LayerCase("conv2d_transpose_s2_same", lambda: L.Conv2DTranspose(2, 3, strides=2, padding="same"),
              [(3, 2, 2)], ct2d_ref((2, 2), "same")),
    LayerCase("conv2d_transpose_s2_valid", lambda: L.Conv2DTranspose(2, 3, strides=2), [(2, 3, 1)],
              ct2d_ref((2, 2), "valid")),
    LayerCase("conv2d_transpose_k4_s2_same_relu",
              lambda: L.Conv2DTranspose(2, 4, strides=2, padding="same", activation="relu"), [(2, 2, 2)],
              ct2d_ref((2, 2), "same", activation="relu")),
    LayerCase("conv2d_transpose_k2_s3_valid", lambda: L.Conv2DTranspose(2, 2, strides=3), [(2, 2, 1)],
              ct2d_ref((3, 3), "valid")),                                  # k < s: a zero gap after
    LayerCase("conv2d_transpose_same_s1_odd", lambda: L.Conv2DTranspose(2, 3, padding="same"), [(3, 3, 2)],
              ct2d_ref((1, 1), "same")),                                   # im2col pads by itself
    LayerCase("conv2d_transpose_same_s1_even", lambda: L.Conv2DTranspose(2, (2, 3), padding="same"),
              [(3, 2, 1)], ct2d_ref((1, 1), "same")),                      # uneven padding
    LayerCase("conv2d_transpose_output_padding",
              lambda: L.Conv2DTranspose(2, 3, strides=(2, 3), padding="same", output_padding=(1, 2)),
              [(2, 2, 1)], ct2d_ref((2, 3), "same", (1, 2))),
    LayerCase("conv2d_transpose_valid_output_padding_nobias",
              lambda: L.Conv2DTranspose(2, 2, strides=2, output_padding=1, use_bias=False), [(2, 3, 2)],
              ct2d_ref((2, 2), "valid", (1, 1))),
    LayerCase("conv1d_transpose", lambda: L.Conv1DTranspose(3, 3), [(4, 2)], ct1d_ref()),
    LayerCase("conv1d_transpose_s2_same_tanh",
              lambda: L.Conv1DTranspose(2, 3, strides=2, padding="same", activation="tanh"), [(4, 2)],
              ct1d_ref(2, "same", activation="tanh")),
    LayerCase("conv1d_transpose_k4_s2_valid", lambda: L.Conv1DTranspose(2, 4, strides=2), [(3, 1)],
              ct1d_ref(2, "valid")),
    LayerCase("conv1d_transpose_k1_s3_same", lambda: L.Conv1DTranspose(2, 1, strides=3, padding="same"),
              [(3, 2)], ct1d_ref(3, "same")),
    LayerCase("conv1d_transpose_output_padding",
              lambda: L.Conv1DTranspose(2, 3, strides=3, output_padding=2), [(3, 2)], ct1d_ref(3, "valid", 2)),
    # dilation (strides 1, as Keras): the kernel's taps d apart
    LayerCase("conv2d_transpose_dilated_valid", lambda: L.Conv2DTranspose(2, 3, dilation_rate=2), [(3, 2, 2)],
              ct2d_ref(dilation=(2, 2))),
    LayerCase("conv2d_transpose_dilated_same", lambda: L.Conv2DTranspose(2, (2, 3), padding="same",
                                                                         dilation_rate=(3, 2)),
              [(4, 3, 1)], ct2d_ref(padding="same", dilation=(3, 2))),
    LayerCase("conv1d_transpose_dilated_same_relu",
              lambda: L.Conv1DTranspose(2, 2, padding="same", dilation_rate=3, activation="relu"), [(5, 2)],
              ct1d_ref(1, "same", activation="relu", dilation=3)),
    LayerCase("conv1d_transpose_dilated_output_padding",
              lambda: L.Conv1DTranspose(2, 3, dilation_rate=2, output_padding=0, padding="same"), [(4, 1)],
              ct1d_ref(1, "same", 0, dilation=2)),
]

# the harness's four checks over every case (forward, gradient, config, a training step)
test_forward, test_gradient, test_config, test_training_step = harness_tests(CASES)


# --- PyTorch ---------------------------------------------------------------------------------

def _torch_keras(torch, x, w, b, strides, padding, output_padding, rank):
    """Keras's transposed convolution from torch's conv_transpose (padding 0), cropped
    and zero-extended by Keras's padding rule, in torch so that autograd follows it."""
    f = torch.nn.functional.conv_transpose2d if rank == 2 else torch.nn.functional.conv_transpose1d
    xt = x.permute(0, 3, 1, 2) if rank == 2 else x.permute(0, 2, 1)
    full = f(xt, w, None, stride=strides)
    ks = w.shape[2:]
    for i in range(rank):
        axis = 2 + i
        op = None if output_padding is None else output_padding[i]
        before, _ = keras_pads(ks[i], strides[i], padding, op)
        start, length = ks[i] - 1 - before, keras_length(x.shape[1 + i], ks[i], strides[i], padding, op)
        full = full.narrow(axis, start, min(length, full.shape[axis] - start))
        if full.shape[axis] < length:
            shape = list(full.shape)
            shape[axis] = length - full.shape[axis]
            full = torch.cat([full, torch.zeros(shape, dtype=full.dtype)], dim=axis)
    y = full.permute(0, 2, 3, 1) if rank == 2 else full.permute(0, 2, 1)
    return y + b


TORCH_CONFIGS = [
    # rank, input shape, filters, kernel, strides, padding, output_padding
    (2, (5, 4, 3), 4, (3, 3), (2, 2), "same", None),
    (2, (5, 4, 3), 4, (3, 3), (2, 2), "valid", None),
    (2, (4, 6, 2), 3, (4, 4), (2, 2), "same", None),
    (2, (4, 4, 2), 3, (5, 3), (1, 1), "same", None),
    (2, (3, 5, 2), 2, (2, 2), (2, 2), "valid", None),
    (2, (3, 3, 2), 2, (2, 3), (3, 2), "valid", None),
    (2, (3, 4, 2), 2, (3, 3), (2, 2), "same", (1, 0)),
    (2, (3, 4, 2), 2, (3, 2), (3, 2), "valid", (2, 1)),
    (1, (7, 3), 4, (3,), (2,), "same", None),
    (1, (7, 3), 4, (5,), (3,), "valid", None),
    (1, (6, 2), 3, (2,), (1,), "same", None),
    (1, (5, 2), 3, (4,), (2,), "same", (1,)),
]


@pytest.mark.parametrize("rank, shape, filters, kernel, strides, padding, output_padding", TORCH_CONFIGS)
def test_forward_and_gradients_match_pytorch(rank, shape, filters, kernel, strides, padding, output_padding):
    torch = pytest.importorskip("torch")
    cls = L.Conv2DTranspose if rank == 2 else L.Conv1DTranspose
    layer = cls(filters, kernel, strides=strides, padding=padding, output_padding=output_padding)
    m = pg.Sequential([layer], input_shape=shape)
    m.compile(optimizer=pg.optimizers.SGD(learning_rate=1.0), loss="mse", seed=0)
    rng = np.random.default_rng(0)
    w = {k: rng.normal(scale=0.5, size=v.shape).astype(np.float32) for k, v in m.get_weights().items()}
    m.set_weights(w)
    x = rng.normal(size=(3,) + shape).astype(np.float32)
    name = layer.name
    assert w[f"{name}.weight"].shape == (shape[-1], filters) + tuple(kernel)     # PyTorch's layout

    wt = torch.tensor(w[f"{name}.weight"], dtype=torch.float64, requires_grad=True)
    bt = torch.tensor(w[f"{name}.bias"], dtype=torch.float64, requires_grad=True)
    yt = _torch_keras(torch, torch.tensor(x, dtype=torch.float64), wt, bt, strides, padding, output_padding, rank)
    got = m.predict(x)
    assert got.shape == tuple(yt.shape)
    np.testing.assert_allclose(got, yt.detach().numpy(), rtol=1e-4, atol=1e-4)

    target = rng.normal(size=got.shape)
    loss = ((yt - torch.tensor(target)) ** 2).mean()
    loss.backward()
    m.fit(x, target.astype(np.float32), epochs=1, batch_size=3, shuffle=False, verbose=0)
    w1 = m.get_weights()
    for key, tg in ((f"{name}.weight", wt.grad), (f"{name}.bias", bt.grad)):
        np.testing.assert_allclose(w[key] - w1[key], tg.numpy(), rtol=1e-3, atol=1e-5, err_msg=key)
    m.free()


def test_pytorch_padding_arguments_where_they_apply():
    # "valid" without output padding is PyTorch's padding=0; odd kernels at stride 1 with
    # "same" are padding=(k-1)/2; k=4, s=2 "same" is padding=1 (PyTorch's usual upsampler)
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 5, 6, 3)).astype(np.float32)
    for kernel, strides, padding, tpad in ((3, 2, "valid", 0), (3, 1, "same", 1), (4, 2, "same", 1)):
        layer = L.Conv2DTranspose(2, kernel, strides=strides, padding=padding)
        m = pg.Sequential([layer], input_shape=(5, 6, 3)).compile(loss="mse", seed=1)
        w = m.get_weights()
        want = torch.nn.functional.conv_transpose2d(
            torch.from_numpy(x).permute(0, 3, 1, 2), torch.from_numpy(w[f"{layer.name}.weight"]),
            torch.from_numpy(w[f"{layer.name}.bias"]), stride=strides, padding=tpad).permute(0, 2, 3, 1)
        np.testing.assert_allclose(m.predict(x), want.numpy(), rtol=1e-4, atol=1e-5)
        m.free()


@pytest.mark.parametrize("size", [1, 4, 7])
@pytest.mark.parametrize("k", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("s", [1, 2, 3])
@pytest.mark.parametrize("padding", ["valid", "same"])
def test_output_lengths_follow_keras(size, k, s, padding):
    for op in [None] + list(range(s)):
        layer = L.Conv1DTranspose(2, k, strides=s, padding=padding, output_padding=op)
        assert layer.compute_output_shape((None, size, 3)) == (None, keras_length(size, k, s, padding, op), 2)
    layer = L.Conv2DTranspose(2, (k, 2), strides=(s, 1), padding=padding)
    assert layer.compute_output_shape((None, size, 3, 1))[1] == keras_length(size, k, s, padding, None)


def test_keras_examples_shapes():
    # the keras-io autoencoder's decoder: 7x7 -> 14x14 -> 28x28
    m = pg.Sequential([L.Conv2DTranspose(32, 3, strides=2, activation="relu", padding="same"),
                       L.Conv2DTranspose(32, 3, strides=2, activation="relu", padding="same"),
                       L.Conv2D(1, 3, activation="sigmoid", padding="same")], input_shape=(7, 7, 8))
    m.compile(loss="mse")
    assert m.predict(np.zeros((1, 7, 7, 8), dtype=np.float32)).shape == (1, 28, 28, 1)
    m.free()


@pytest.mark.parametrize("make", [
    lambda: L.Conv2DTranspose(2, 3, strides=2, output_padding=2),
    lambda: L.Conv2DTranspose(2, 3, output_padding=1),
    lambda: L.Conv2DTranspose(2, 3, strides=2, dilation_rate=2),
    lambda: L.Conv1DTranspose(2, 3, padding="causal"),
    lambda: L.Conv2DTranspose(2, 3, padding="full"),
    lambda: L.Conv2DTranspose(2, 3, output_padding=(1, 1, 1)),
    lambda: L.Conv2DTranspose(0, 3),
    lambda: L.Conv1DTranspose(2, 3, data_format="channels_middle"),
])
def test_bad_arguments_are_refused(make):
    with pytest.raises((TypeError, ValueError)):
        make()


def test_bad_input_shapes_are_refused():
    with pytest.raises(ValueError, match=r"\(H, W, C\)"):
        pg.Sequential([L.Conv2DTranspose(2, 3)], input_shape=(4, 3)).compile(loss="mse")
    with pytest.raises(ValueError, match=r"\(steps, channels\)"):
        pg.Sequential([L.Conv1DTranspose(2, 3)], input_shape=(4, 3, 2)).compile(loss="mse")
