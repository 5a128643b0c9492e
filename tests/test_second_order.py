"""Second-order gradients: a tape opened inside another's block records its gradient as ops,
which the outer tape differentiates again (WGAN-GP's gradient penalty, Hessian-vector
products).  Checked against PyTorch's double backward (float64, same weights and inputs);
what pyggml has no double backward for is refused with the op's name, never a crash."""

import numpy as np
import pytest

import pyggml as pg
from pyggml import layers, ops
from pyggml.errors import ContextFullError, GGMLError

try:
    import torch
    import torch.nn.functional as F
except ImportError:          # the parity tests skip; the rest run
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")
RNG = np.random.default_rng(7)


def _penalised(model, real, interp, gp_weight=10.0):
    """WGAN-GP's critic loss, written as keras-io writes it: mean(D(real)) plus the penalty on the
    norm of D's gradient at ``interp``; returns (loss, penalty, gradients of the loss)."""
    with pg.GradientTape() as tape:
        x = ops.multiply(interp, 1.0)                     # a tensor the outer tape computed
        with pg.GradientTape() as gp_tape:
            gp_tape.watch(x)
            pred = model(x, training=True)
        grads = gp_tape.gradient(pred, [x])[0]
        axes = list(range(1, len(interp.shape)))
        norm = ops.sqrt(ops.sum(ops.square(grads), axis=axes))
        gp = ops.mean((norm - 1.0) ** 2)
        loss = ops.mean(model(real, training=True)) + gp * gp_weight
    return float(loss), float(gp), tape.gradient(loss, model.trainable_variables)


def _torch_penalised(fn, weights, real, interp, gp_weight=10.0):
    w = [torch.tensor(np.asarray(v.numpy()), dtype=torch.float64, requires_grad=True) for v in weights]
    x = torch.tensor(interp, dtype=torch.float64, requires_grad=True)
    gx, = torch.autograd.grad(fn(w, x).sum(), x, create_graph=True)
    gp = ((gx.pow(2).sum(tuple(range(1, gx.ndim))).sqrt() - 1.0) ** 2).mean()
    loss = fn(w, torch.tensor(real, dtype=torch.float64)).mean() + gp_weight * gp
    grads = torch.autograd.grad(loss, w, allow_unused=True, materialize_grads=True)
    return loss.item(), gp.item(), [g.numpy() for g in grads]


def _check(ours, ref, no_penalty=None):
    loss, gp, grads = ours
    tloss, tgp, tgrads = ref
    # float32 sums of terms of order one (the loss is a difference of two of them)
    assert loss == pytest.approx(tloss, rel=1e-5, abs=1e-5)
    assert gp == pytest.approx(tgp, rel=1e-5, abs=1e-6)
    for g, t in zip(grads, tgrads):
        g = np.zeros_like(t) if g is None else np.asarray(g)
        scale = max(float(np.abs(t).max()), 1e-3)
        np.testing.assert_allclose(g, t, rtol=1e-4, atol=1e-5 * scale)
    if no_penalty is not None:
        # the penalty's own gradient (second order) moves the weights' gradients: not a test of zeros
        moved = max(float(np.abs(np.asarray(a) - b).max()) for a, b in zip(grads, no_penalty) if a is not None)
        assert moved > 1e-2


def _same_pad(x, k, s):
    n = x.shape[-1]
    out = -(-n // s)
    pad = max((out - 1) * s + k - n, 0)
    return F.pad(x, (pad // 2, pad - pad // 2, pad // 2, pad - pad // 2))


@needs_torch
def test_gradient_penalty_of_a_dense_critic_matches_pytorch():
    pg.set_seed(1)
    d = pg.Sequential([pg.Input((5,)), layers.Dense(8), layers.LeakyReLU(0.2),
                       layers.Dense(6, activation="tanh"), layers.Dense(4, activation="sigmoid"),
                       layers.Dense(3, activation="elu"), layers.Dense(1)])
    real = RNG.normal(size=(6, 5)).astype(np.float32)
    interp = RNG.normal(size=(6, 5)).astype(np.float32)

    def fn(w, x):
        h = F.leaky_relu(x @ w[0].T + w[1], 0.2)
        h = torch.tanh(h @ w[2].T + w[3])
        h = torch.sigmoid(h @ w[4].T + w[5])
        h = F.elu(h @ w[6].T + w[7])
        return h @ w[8].T + w[9]

    ours = _penalised(d, real, interp)
    _check(ours, _torch_penalised(fn, d.trainable_variables, real, interp),
           no_penalty=_torch_penalised(fn, d.trainable_variables, real, interp, gp_weight=0.0)[2])


@needs_torch
def test_gradient_penalty_of_keras_io_s_convolutional_critic_matches_pytorch():
    # wgan_gp's critic, smaller: zero padding, strided "same" convolutions, LeakyReLU, a dense head;
    # and convolutions with a fused tanh and sigmoid
    pg.set_seed(2)
    inp = pg.Input((10, 10, 2))
    x = layers.ZeroPadding2D((1, 1))(inp)
    x = layers.Conv2D(4, 5, strides=2, padding="same")(x)
    x = layers.LeakyReLU(0.2)(x)
    x = layers.Conv2D(6, 3, strides=2, padding="same", activation="tanh")(x)
    x = layers.Conv2D(5, 2, activation="sigmoid")(x)
    x = layers.Flatten()(x)
    d = pg.Model(inp, layers.Dense(1)(x))
    real = RNG.normal(size=(3, 10, 10, 2)).astype(np.float32)
    interp = RNG.normal(size=(3, 10, 10, 2)).astype(np.float32)

    def fn(w, x):
        x = F.pad(x.permute(0, 3, 1, 2), (1, 1, 1, 1))
        x = F.leaky_relu(F.conv2d(_same_pad(x, 5, 2), w[0], w[1], stride=2), 0.2)
        x = torch.tanh(F.conv2d(_same_pad(x, 3, 2), w[2], w[3], stride=2))
        x = torch.sigmoid(F.conv2d(x, w[4], w[5]))
        return x.permute(0, 2, 3, 1).reshape(x.shape[0], -1) @ w[6].T + w[7]

    _check(_penalised(d, real, interp), _torch_penalised(fn, d.trainable_variables, real, interp),
           no_penalty=_torch_penalised(fn, d.trainable_variables, real, interp, gp_weight=0.0)[2])


@needs_torch
def test_gradient_penalty_through_convolutions_with_many_channels_matches_pytorch():
    # a critic with the channels of keras-io's (32 and 64 here): its second layer takes the
    # blocked products (patch 0041) forward, for the kernel gradient, and for the input
    # gradient one phase of the stride at a time; the penalty differentiates all three again
    pg.set_seed(4)
    inp = pg.Input((16, 16, 8))
    x = layers.LeakyReLU(0.2)(layers.Conv2D(32, 5, strides=2, padding="same")(inp))
    x = layers.LeakyReLU(0.2)(layers.Conv2D(64, 5, strides=2, padding="same")(x))
    d = pg.Model(inp, layers.Dense(1)(layers.Flatten()(x)))
    real = RNG.normal(size=(8, 16, 16, 8)).astype(np.float32)
    interp = RNG.normal(size=(8, 16, 16, 8)).astype(np.float32)

    def fn(w, x):
        x = x.permute(0, 3, 1, 2)
        x = F.leaky_relu(F.conv2d(_same_pad(x, 5, 2), w[0], w[1], stride=2), 0.2)
        x = F.leaky_relu(F.conv2d(_same_pad(x, 5, 2), w[2], w[3], stride=2), 0.2)
        return x.permute(0, 2, 3, 1).reshape(x.shape[0], -1) @ w[4].T + w[5]

    _check(_penalised(d, real, interp), _torch_penalised(fn, d.trainable_variables, real, interp),
           no_penalty=_torch_penalised(fn, d.trainable_variables, real, interp, gp_weight=0.0)[2])


@needs_torch
def test_gradient_penalty_through_depthwise_convolutions_matches_pytorch():
    # ConvMixer's block (a depthwise 5x5 "same" with gelu, then a pointwise one) and a strided
    # depthwise layer: pyggml's depthwise op (patch 0043), its input gradient differentiated again
    pg.set_seed(5)
    inp = pg.Input((9, 9, 16))
    x = layers.DepthwiseConv2D(5, padding="same", activation="gelu")(inp)
    x = layers.Conv2D(16, 1, activation="tanh")(x)
    x = layers.DepthwiseConv2D(3, strides=2, padding="same")(x)
    d = pg.Model(inp, layers.Dense(1)(layers.Flatten()(x)))
    real = RNG.normal(size=(4, 9, 9, 16)).astype(np.float32)
    interp = RNG.normal(size=(4, 9, 9, 16)).astype(np.float32)

    def fn(w, x):
        x = x.permute(0, 3, 1, 2)
        x = F.gelu(F.conv2d(F.pad(x, (2, 2, 2, 2)), w[0], w[1], groups=16))
        x = torch.tanh(F.conv2d(x, w[2], w[3]))
        x = F.conv2d(_same_pad(x, 3, 2), w[4], w[5], stride=2, groups=16)
        return x.permute(0, 2, 3, 1).reshape(x.shape[0], -1) @ w[6].T + w[7]

    _check(_penalised(d, real, interp), _torch_penalised(fn, d.trainable_variables, real, interp),
           no_penalty=_torch_penalised(fn, d.trainable_variables, real, interp, gp_weight=0.0)[2])


@needs_torch
def test_gradient_penalty_through_conv1d_transposed_conv_and_upsampling_matches_pytorch():
    pg.set_seed(3)
    inp = pg.Input((6, 6, 2))
    x = layers.Conv2DTranspose(3, 3, strides=2, padding="same", activation="relu")(inp)
    x = layers.UpSampling2D()(x)
    x = layers.Reshape((576, 3))(x)
    x = layers.Conv1D(4, 5, strides=3, activation="tanh")(x)
    x = layers.Flatten()(x)
    d = pg.Model(inp, layers.Dense(1)(x))
    real = RNG.normal(size=(2, 6, 6, 2)).astype(np.float32)
    interp = RNG.normal(size=(2, 6, 6, 2)).astype(np.float32)

    def fn(w, x):
        x = x.permute(0, 3, 1, 2)
        # Keras's "same" transposed convolution, stride 2, kernel 3: the full 13 cut to 12 at the end
        x = F.relu(F.conv_transpose2d(x, w[0], w[1], stride=2)[:, :, :12, :12])
        x = F.interpolate(x, scale_factor=2, mode="nearest")
        x = x.permute(0, 2, 3, 1).reshape(x.shape[0], 576, 3).permute(0, 2, 1)
        x = torch.tanh(F.conv1d(x, w[2], w[3], stride=3))
        return x.permute(0, 2, 1).reshape(x.shape[0], -1) @ w[4].T + w[5]

    _check(_penalised(d, real, interp), _torch_penalised(fn, d.trainable_variables, real, interp))


@needs_torch
def test_hessian_vector_product_of_nested_tapes_matches_pytorch():
    pg.set_seed(4)
    w = RNG.normal(size=(4, 3)).astype(np.float32)
    v = RNG.normal(size=(2, 4)).astype(np.float32)
    x = pg.Variable(RNG.normal(size=(2, 4)).astype(np.float32))
    with pg.GradientTape() as outer:
        with pg.GradientTape() as inner:
            y = ops.sum(ops.tanh(ops.matmul(x, w)) * ops.sigmoid(ops.matmul(x, w)))
        g = inner.gradient(y, x)
        assert isinstance(g, pg.core.Tensor)                  # recorded by the outer tape
        hv = ops.sum(g * v)
    got = outer.gradient(hv, x)
    tx = torch.tensor(x.numpy(), dtype=torch.float64, requires_grad=True)
    tw = torch.tensor(w, dtype=torch.float64)
    ty = (torch.tanh(tx @ tw) * torch.sigmoid(tx @ tw)).sum()
    tg, = torch.autograd.grad(ty, tx, create_graph=True)
    th, = torch.autograd.grad((tg * torch.tensor(v, dtype=torch.float64)).sum(), tx)
    np.testing.assert_allclose(np.asarray(g), tg.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(got), th.numpy(), rtol=1e-4, atol=1e-5)


def test_second_derivative_of_a_cube_by_hand():
    # y = 2x, z = sum(y^3): dz/dy = 3 y^2 = 12 x^2, and d/dx sum(dz/dy) = 24 x
    x = RNG.random((2, 3)).astype(np.float32) + 0.5
    with pg.GradientTape() as outer:
        outer.watch(x)
        y = ops.multiply(x, 2.0)
        with pg.GradientTape() as inner:
            inner.watch(y)
            z = ops.sum(y * y * y)
        dz = inner.gradient(z, y)                                  # 3 y^2 = 12 x^2
        s = ops.sum(dz)
    np.testing.assert_allclose(np.asarray(dz), 12 * x ** 2, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(outer.gradient(s, x)), 24 * x, rtol=1e-5)


def test_an_inner_gradient_is_recorded_with_its_value_and_the_outer_tape_trains_through_it():
    pg.set_seed(5)
    m = pg.Sequential([pg.Input((4,)), layers.Dense(6, activation="tanh"), layers.Dense(1)])
    x = RNG.normal(size=(5, 4)).astype(np.float32)
    with pg.GradientTape(persistent=True) as plain:
        plain.watch(x)
        out = ops.sum(m(x))
    expected = np.asarray(plain.gradient(out, x))
    with pg.GradientTape() as outer:
        with pg.GradientTape() as inner:
            inner.watch(x)
            out = ops.sum(m(x))
        g = inner.gradient(out, x)
        penalty = ops.sum(ops.square(g))
    np.testing.assert_allclose(np.asarray(g), expected, rtol=1e-6)
    grads = outer.gradient(penalty, m.trainable_variables)
    # the gradient with respect to x does not depend on the last bias: None there, as TensorFlow's
    assert grads[-1] is None and all(np.all(np.isfinite(gr)) for gr in grads[:-1])
    grads = grads[:-1]
    # one small step against the penalty lowers it: the gradient points the right way
    before = float(np.sum(expected ** 2))
    for v, gr in zip(m.trainable_variables[:-1], grads):
        v.assign(v.numpy() - 1e-3 * np.asarray(gr))
    with pg.GradientTape() as again:
        again.watch(x)
        out = ops.sum(m(x))
    assert float(np.sum(np.asarray(again.gradient(out, x)) ** 2)) < before


def test_unconnected_inner_gradient_is_none_or_recorded_zeros():
    x = RNG.random((2, 3)).astype(np.float32)
    other = RNG.random((2, 3)).astype(np.float32)
    with pg.GradientTape() as outer:
        outer.watch(x)
        with pg.GradientTape(persistent=True) as inner:
            inner.watch(x)
            inner.watch(other)
            z = ops.sum(ops.square(x))
        assert inner.gradient(z, other) is None
        zero = inner.gradient(z, other, unconnected_gradients="zero")
        total = ops.sum(inner.gradient(z, x)) + ops.sum(zero)
    np.testing.assert_array_equal(np.asarray(zero), np.zeros((2, 3), np.float32))
    np.testing.assert_allclose(np.asarray(outer.gradient(total, x)), np.full((2, 3), 2.0), rtol=1e-6)


_POOLED = {
    "max": ([layers.MaxPooling2D], lambda h: F.max_pool2d(h, 2)),
    "average": ([layers.AveragePooling2D], lambda h: F.avg_pool2d(h, 2)),
    "global_average": ([layers.GlobalAveragePooling2D], lambda h: h.mean((2, 3))),
    "global_max": ([layers.GlobalMaxPooling2D], lambda h: h.amax((2, 3))),
    "layer_norm": ([layers.LayerNormalization, lambda: layers.LeakyReLU(0.2)], None),
}


@needs_torch
@pytest.mark.parametrize("kind", sorted(_POOLED))
def test_gradient_penalty_through_pooling_and_layer_normalization_matches_pytorch(kind):
    # the WGAN-GP paper's critic takes layer normalization where a GAN's would take batch normalization
    pg.set_seed(9)
    inp = pg.Input((6, 6, 2))
    x = layers.Conv2D(3, 3, padding="same", activation=None if kind == "layer_norm" else "tanh")(inp)
    for make in _POOLED[kind][0]:
        x = make()(x)
    if len(x.shape) > 2:
        x = layers.Flatten()(x)
    d = pg.Model(inp, layers.Dense(1)(x))
    real = RNG.normal(size=(3, 6, 6, 2)).astype(np.float32)
    interp = RNG.normal(size=(3, 6, 6, 2)).astype(np.float32)

    def fn(w, x):
        h = F.conv2d(x.permute(0, 3, 1, 2), w[0], w[1], padding=1)
        if kind == "layer_norm":       # over the channels (Keras's last axis), epsilon 1e-3
            h = F.leaky_relu(F.layer_norm(h.permute(0, 2, 3, 1), (3,), w[2], w[3], 1e-3), 0.2).permute(0, 3, 1, 2)
        else:
            h = _POOLED[kind][1](torch.tanh(h))
        if h.ndim == 4:
            h = h.permute(0, 2, 3, 1)
        return h.reshape(h.shape[0], -1) @ w[-2].T + w[-1]

    _check(_penalised(d, real, interp), _torch_penalised(fn, d.trainable_variables, real, interp),
           no_penalty=_torch_penalised(fn, d.trainable_variables, real, interp, gp_weight=0.0)[2])


@pytest.mark.parametrize("body, op", [
    (lambda: [layers.Conv2D(4, 3, padding="same"), layers.BatchNormalization()], "BATCH_NORM_BACK"),
    (lambda: [layers.Conv2D(4, 3, padding="same"), layers.MaxPooling2D(3, strides=2)], "overlap"),
    (lambda: [layers.Reshape((64, 2)), layers.LSTM(3)], "LSTM_CELL_BACK"),
])
def test_what_has_no_double_backward_is_refused_by_name(body, op):
    inp = pg.Input((8, 8, 2))
    x = inp
    for layer in body():
        x = layer(x)
    if len(x.shape) > 2:
        x = layers.Flatten()(x)
    d = pg.Model(inp, layers.Dense(1)(x))
    real = RNG.random((2, 8, 8, 2)).astype(np.float32)
    with pytest.raises(GGMLError, match=op):
        _penalised(d, real, real * 0.5)


_SMOOTH = {
    # Keras's gelu (exact, erf) and its tanh approximation, silu (ggml's SILU_BACK), softmax over
    # the units (SOFT_MAX_BACK), and softplus fused into a convolution (its derivative written
    # from the output): patch 0042
    "gelu": (lambda: layers.Activation("gelu"), lambda h: F.gelu(h)),
    "gelu_tanh": (lambda: layers.Activation(lambda t: pg.activations.gelu(t, approximate=True)),
                  lambda h: F.gelu(h, approximate="tanh")),
    "silu": (lambda: layers.Activation("silu"), F.silu),
    "softmax": (lambda: layers.Activation("softmax"), lambda h: torch.softmax(h, -1)),
}


@needs_torch
@pytest.mark.parametrize("kind", sorted(_SMOOTH) + ["softplus_conv"])
def test_gradient_penalty_through_gelu_silu_softmax_and_a_fused_softplus_matches_pytorch(kind):
    pg.set_seed(11)
    inp = pg.Input((5, 5, 2))
    if kind == "softplus_conv":
        x = layers.Flatten()(layers.Conv2D(3, 3, padding="same", activation="softplus")(inp))
    else:
        x = _SMOOTH[kind][0]()(layers.Dense(7)(layers.Flatten()(inp)))
    d = pg.Model(inp, layers.Dense(1)(x))
    real = RNG.normal(size=(3, 5, 5, 2)).astype(np.float32)
    interp = RNG.normal(size=(3, 5, 5, 2)).astype(np.float32)

    def fn(w, x):
        if kind == "softplus_conv":
            h = F.softplus(F.conv2d(x.permute(0, 3, 1, 2), w[0], w[1], padding=1)).permute(0, 2, 3, 1)
            h = h.reshape(h.shape[0], -1)
        else:
            h = _SMOOTH[kind][1](x.reshape(x.shape[0], -1) @ w[0].T + w[1])
        return h @ w[2].T + w[3]

    _check(_penalised(d, real, interp), _torch_penalised(fn, d.trainable_variables, real, interp),
           no_penalty=_torch_penalised(fn, d.trainable_variables, real, interp, gp_weight=0.0)[2])


@needs_torch
def test_gradient_penalty_through_self_attention_matches_pytorch():
    # softmax over the keys of a scaled dot-product attention (a transformer critic's), then a
    # residual, gelu and a mean over the positions
    pg.set_seed(12)
    inp = pg.Input((4, 6))
    # (no bias for the keys: softmax over the keys ignores it, its gradient is zero up to rounding)
    q, k, v = layers.Dense(5)(inp), layers.Dense(5, use_bias=False)(inp), layers.Dense(6)(inp)
    att = layers.Activation("softmax")(ops.matmul(q, ops.transpose(k, (0, 2, 1))) * (1.0 / np.sqrt(5.0)))
    h = layers.Activation("gelu")(ops.matmul(att, v) + inp)
    d = pg.Model(inp, layers.Dense(1)(layers.GlobalAveragePooling1D()(h)))
    real = RNG.normal(size=(3, 4, 6)).astype(np.float32)
    interp = RNG.normal(size=(3, 4, 6)).astype(np.float32)

    def fn(w, x):
        q, k, v = x @ w[0].T + w[1], x @ w[2].T, x @ w[3].T + w[4]
        att = torch.softmax(q @ k.transpose(1, 2) / np.sqrt(5.0), -1)
        h = F.gelu(att @ v + x).mean(1)
        return h @ w[5].T + w[6]

    _check(_penalised(d, real, interp), _torch_penalised(fn, d.trainable_variables, real, interp),
           no_penalty=_torch_penalised(fn, d.trainable_variables, real, interp, gp_weight=0.0)[2])


@needs_torch
@pytest.mark.parametrize("act", ["softplus", "selu", "relu"])
def test_activations_whose_double_backward_meets_a_transposed_gradient_match_pytorch(act):
    # their double backward reaches a transposed gradient, which ggml's formulas took as it was (an
    # abort in a binary op) until patch 0040 made it contiguous
    pg.set_seed(6)
    d = pg.Sequential([pg.Input((4,)), layers.Dense(5, activation=act), layers.Dense(1)])
    x = RNG.normal(size=(3, 4)).astype(np.float32)
    f = {"softplus": F.softplus, "selu": F.selu, "relu": F.relu}[act]
    _check(_penalised(d, x, x * 0.5),
           _torch_penalised(lambda w, x: f(x @ w[0].T + w[1]) @ w[2].T + w[3], d.trainable_variables, x, x * 0.5))


@needs_torch
def test_keras_io_s_wgan_gp_train_step_matches_pytorch():
    # the structure of keras-io's wgan_gp: a Model subclass whose train_step opens the critic's tape,
    # calls a gradient_penalty method that opens its own tape inside it, and steps two optimizers;
    # run by fit; one step of plain SGD compared with PyTorch's (latents and alpha fixed here)
    pg.set_seed(8)
    critic = pg.Sequential([pg.Input((6, 6, 1)), layers.Conv2D(3, 3, strides=2, padding="same"),
                            layers.LeakyReLU(0.2), layers.Flatten(), layers.Dense(1)])
    gen = pg.Sequential([pg.Input((4,)), layers.Dense(36, activation="tanh"), layers.Reshape((6, 6, 1))])
    real = RNG.normal(size=(4, 6, 6, 1)).astype(np.float32)
    z_d, z_g = RNG.normal(size=(4, 4)).astype(np.float32), RNG.normal(size=(4, 4)).astype(np.float32)
    alpha = RNG.random((4, 1, 1, 1)).astype(np.float32)

    class WGAN(pg.Model):
        def __init__(self):
            super().__init__()
            self.discriminator, self.generator = critic, gen

        def compile(self, d_optimizer, g_optimizer):
            super().compile()
            self.d_optimizer, self.g_optimizer = d_optimizer, g_optimizer

        def gradient_penalty(self, real_images, fake_images):
            interpolated = real_images + alpha * (fake_images - real_images)
            with pg.GradientTape() as gp_tape:
                gp_tape.watch(interpolated)
                pred = self.discriminator(interpolated, training=True)
            grads = gp_tape.gradient(pred, [interpolated])[0]
            norm = ops.sqrt(ops.sum(ops.square(grads), axis=[1, 2, 3]))
            return ops.mean((norm - 1.0) ** 2)

        def train_step(self, real_images):
            with pg.GradientTape() as tape:
                fake_images = self.generator(z_d, training=True)
                d_cost = ops.mean(self.discriminator(fake_images, training=True)) - \
                    ops.mean(self.discriminator(real_images, training=True))
                d_loss = d_cost + self.gradient_penalty(real_images, fake_images) * 10.0
            d_gradient = tape.gradient(d_loss, self.discriminator.trainable_variables)
            self.d_optimizer.apply_gradients(zip(d_gradient, self.discriminator.trainable_variables))
            with pg.GradientTape() as tape:
                g_loss = -ops.mean(self.discriminator(self.generator(z_g, training=True), training=True))
            gen_gradient = tape.gradient(g_loss, self.generator.trainable_variables)
            self.g_optimizer.apply_gradients(zip(gen_gradient, self.generator.trainable_variables))
            return {"d_loss": d_loss, "g_loss": g_loss}

    T = lambda a: torch.tensor(np.asarray(a), dtype=torch.float64, requires_grad=True)
    cw = [T(v.numpy()) for v in critic.trainable_variables]
    gw = [T(v.numpy()) for v in gen.trainable_variables]
    wgan = WGAN()
    wgan.compile(pg.optimizers.SGD(0.05), pg.optimizers.SGD(0.05))
    hist = wgan.fit(real, batch_size=4, epochs=1, shuffle=False, verbose=0)

    def c(w, x):
        h = F.leaky_relu(F.conv2d(_same_pad(x.permute(0, 3, 1, 2), 3, 2), w[0], w[1], stride=2), 0.2)
        return h.permute(0, 2, 3, 1).reshape(x.shape[0], -1) @ w[2].T + w[3]

    def g(w, z):
        return torch.tanh(torch.tensor(z, dtype=torch.float64) @ w[0].T + w[1]).reshape(-1, 6, 6, 1)

    fake = g(gw, z_d).detach()
    x = torch.tensor(real, dtype=torch.float64)
    interp = (x + torch.tensor(alpha, dtype=torch.float64) * (fake - x)).requires_grad_(True)
    gx, = torch.autograd.grad(c(cw, interp).sum(), interp, create_graph=True)
    gp = ((gx.pow(2).sum((1, 2, 3)).sqrt() - 1) ** 2).mean()
    d_loss = c(cw, fake).mean() - c(cw, x).mean() + 10 * gp
    new_cw = [(w - 0.05 * gr).detach() for w, gr in zip(cw, torch.autograd.grad(d_loss, cw))]
    g_loss = -c(new_cw, g(gw, z_g)).mean()
    new_gw = [(w - 0.05 * gr).detach() for w, gr in zip(gw, torch.autograd.grad(g_loss, gw))]
    assert hist.history["d_loss"][0] == pytest.approx(d_loss.item(), rel=1e-4)
    assert hist.history["g_loss"][0] == pytest.approx(g_loss.item(), rel=1e-4, abs=1e-6)
    for v, t in zip(critic.trainable_variables + gen.trainable_variables, new_cw + new_gw):
        np.testing.assert_allclose(v.numpy(), t.numpy(), rtol=1e-4, atol=1e-6)


def test_a_tape_that_recorded_before_the_outer_block_cannot_give_it_a_gradient():
    x = RNG.random((2, 3)).astype(np.float32)
    inner = pg.GradientTape()
    inner.watch(x)                       # made its own graph before the outer tape's block
    with pg.GradientTape():
        with inner:
            z = ops.sum(ops.square(x))
        with pytest.raises(ValueError, match="does not share"):
            inner.gradient(z, x)


def test_a_tape_too_small_for_the_second_order_pass_says_so():
    pg.set_seed(10)
    inp = pg.Input((6, 6, 2))
    x = inp
    for _ in range(3):
        x = layers.LeakyReLU(0.2)(layers.LayerNormalization()(layers.Conv2D(3, 3, padding="same")(x)))
    d = pg.Model(inp, layers.Dense(1)(layers.Flatten()(x)))
    real = RNG.normal(size=(2, 6, 6, 2)).astype(np.float32)
    with pg.GradientTape(max_tensors=120):         # the critic takes 42; its backward pass up to 3 a node
        with pg.GradientTape() as gp_tape:
            gp_tape.watch(real)
            pred = d(real, training=True)
        with pytest.raises(ContextFullError, match="max_tensors"):
            gp_tape.gradient(pred, real)


@needs_torch
def test_gradient_penalty_through_split_views_matches_pytorch():
    # split's parts are views: their inner gradient gathers into one tensor in place (ggml's
    # acc), which the outer pass differentiates again (ggml asserted on the in-place node)
    pg.set_seed(11)
    inp = pg.Input((4, 6))
    h = layers.Dense(6, activation="tanh")(inp)
    h = layers.Lambda(lambda t: ops.split(t, 2, axis=-1)[0] * ops.split(t, 2, axis=-1)[1] +
                      ops.split(t, [1, 3], axis=1)[1][:, :1, :3])(h)
    d = pg.Model(inp, layers.Dense(1)(layers.Flatten()(h)))
    real = RNG.normal(size=(3, 4, 6)).astype(np.float32)
    interp = RNG.normal(size=(3, 4, 6)).astype(np.float32)

    def fn(w, x):
        t = torch.tanh(x @ w[0].T + w[1])
        t = t[..., :3] * t[..., 3:] + t[:, 1:2, :3]
        return t.reshape(t.shape[0], -1) @ w[2].T + w[3]

    _check(_penalised(d, real, interp), _torch_penalised(fn, d.trainable_variables, real, interp),
           no_penalty=_torch_penalised(fn, d.trainable_variables, real, interp, gp_weight=0.0)[2])


@needs_torch
@pytest.mark.parametrize("reduce", ["max", "min", "logsumexp", "log_softmax", "global_max_1d", "max_pool_1d",
                                    "avg_pool_1d", "avg_pool_2d_channels_first"])
def test_gradient_penalty_through_reductions_that_take_a_maximum_matches_pytorch(reduce):
    # ops.max and its kin pool with ggml's pool_2d: its backward pass is differentiated again
    pg.set_seed(12)
    inp = pg.Input((6, 4))
    h = layers.Dense(4, activation="tanh")(inp)
    if reduce == "global_max_1d":
        h = layers.GlobalMaxPooling1D()(h)
    elif reduce == "max_pool_1d":
        h = layers.Flatten()(layers.MaxPooling1D(2)(h))
    elif reduce == "avg_pool_1d":
        h = layers.Flatten()(layers.AveragePooling1D(3, strides=2)(h))
    elif reduce == "avg_pool_2d_channels_first":
        h = layers.Reshape((1, 6, 4))(h)
        h = layers.Flatten()(layers.AveragePooling2D(2, data_format="channels_first")(h))
    else:
        f = {"max": lambda t: ops.max(t, axis=1), "min": lambda t: ops.min(t, axis=-1),
             "logsumexp": lambda t: ops.logsumexp(t, axis=-1), "log_softmax": lambda t: ops.log_softmax(t, axis=1)}
        h = layers.Flatten()(layers.Lambda(f[reduce])(h))
    d = pg.Model(inp, layers.Dense(1)(h))
    real = RNG.normal(size=(3, 6, 4)).astype(np.float32)
    interp = RNG.normal(size=(3, 6, 4)).astype(np.float32)

    def fn(w, x):
        t = torch.tanh(x @ w[0].T + w[1])
        t = {"max": lambda: t.amax(1), "min": lambda: t.amin(-1), "logsumexp": lambda: torch.logsumexp(t, -1),
             "log_softmax": lambda: torch.log_softmax(t, 1), "global_max_1d": lambda: t.amax(1),
             "max_pool_1d": lambda: torch.nn.functional.max_pool1d(t.transpose(1, 2), 2).transpose(1, 2),
             "avg_pool_1d": lambda: torch.nn.functional.avg_pool1d(t.transpose(1, 2), 3, 2).transpose(1, 2),
             "avg_pool_2d_channels_first": lambda: torch.nn.functional.avg_pool2d(t[:, None], 2)}[reduce]()
        return t.reshape(t.shape[0], -1) @ w[2].T + w[3]

    _check(_penalised(d, real, interp), _torch_penalised(fn, d.trainable_variables, real, interp),
           no_penalty=_torch_penalised(fn, d.trainable_variables, real, interp, gp_weight=0.0)[2])


@needs_torch
@pytest.mark.parametrize("op", ["avg", "max"])
def test_gradient_penalty_through_ggml_s_pool_2d_matches_pytorch(op):
    # pool_2d directly (ggml's layout is PyTorch's NCHW): its mean over windows that overlap, with
    # padding, and its maximum over windows that do not
    from pyggml.core import ops as core_ops
    w = pg.Variable(RNG.normal(size=(2, 3, 6, 5)).astype(np.float32))
    v = RNG.normal(size=(2, 3, 3, 3) if op == "avg" else (2, 3, 3, 2)).astype(np.float32)
    x = RNG.normal(size=(2, 3, 6, 5)).astype(np.float32)
    k, s, p = ((3, 2, 1) if op == "avg" else (2, 2, 0))
    with pg.GradientTape() as outer:
        with pg.GradientTape() as inner:
            inner.watch(x)
            h = ops.tanh(ops.multiply(x, w))
            y = ops.sum(ops.multiply(core_ops.pool_2d(h, op, k, k, s, s, p, p), v))
        g = inner.gradient(y, x)
        pen = ops.sum(ops.square(g))
    got = outer.gradient(pen, w)
    tw = torch.tensor(w.numpy(), dtype=torch.float64, requires_grad=True)
    tx = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    th = torch.tanh(tx * tw)
    pooled = torch.nn.functional.avg_pool2d(th, k, s, p, count_include_pad=True) if op == "avg" else \
        torch.nn.functional.max_pool2d(th, k, s, p)
    tg, = torch.autograd.grad((pooled * torch.tensor(v, dtype=torch.float64)).sum(), tx, create_graph=True)
    want, = torch.autograd.grad((tg ** 2).sum(), tw)
    np.testing.assert_allclose(np.asarray(g), tg.detach().numpy(), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(np.asarray(got), want.numpy(), rtol=1e-4, atol=1e-5 * float(np.abs(want.numpy()).max()))


def test_an_array_only_the_inner_tape_watches_has_no_gradient_on_the_outer_one():
    # TensorFlow's: watching is per tape, also when the two record one graph
    x = RNG.random((2, 3)).astype(np.float32)
    w = pg.Variable(RNG.random((2, 3)).astype(np.float32))
    with pg.GradientTape() as outer:
        with pg.GradientTape() as inner:
            inner.watch(x)
            y = ops.sum(ops.multiply(x, w))
        g = inner.gradient(y, x)                     # w, as a recorded tensor
        z = ops.sum(ops.square(g)) + ops.sum(x)
    gx, gw = outer.gradient(z, [x, w])
    assert gx is None
    np.testing.assert_allclose(np.asarray(gw), 2 * w.numpy(), rtol=1e-6)
