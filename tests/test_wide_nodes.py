"""Tensors of six dimensions and more between layers (pyggml._fold): keras-io's involution
reshapes its generated kernel to (batch, h, w, k*k, 1, groups) with a Reshape layer and
returns it beside its output, and its visualisation model predicts it.  Such a node is held
with its batch and the axes before the last three folded into ggml's first dimension; the
layers that work along the last axis or value by value, Reshape, Flatten, the symbolic ops
and custom calls take it.  Values are checked against numpy, gradients against PyTorch."""

import numpy as np
import pytest

import pyggml as keras
from pyggml import layers, ops

RNG = np.random.default_rng(11)


class Involution(keras.layers.Layer):
    """keras-io's vision/involution.py layer, as a Keras 3 user has it (stride 1)."""

    def __init__(self, channel, group_number, kernel_size, reduction_ratio, **kwargs):
        super().__init__(**kwargs)
        self.channel, self.group_number = channel, group_number
        self.kernel_size, self.reduction_ratio = kernel_size, reduction_ratio

    def build(self, input_shape):
        (_, height, width, num_channels) = input_shape
        k2 = self.kernel_size * self.kernel_size
        self.kernel_gen = keras.Sequential([
            layers.Conv2D(filters=self.channel // self.reduction_ratio, kernel_size=1),
            layers.ReLU(),
            layers.Conv2D(filters=k2 * self.group_number, kernel_size=1)])
        self.kernel_reshape = layers.Reshape(target_shape=(height, width, k2, 1, self.group_number))
        self.input_patches_reshape = layers.Reshape(
            target_shape=(height, width, k2, num_channels // self.group_number, self.group_number))
        self.output_reshape = layers.Reshape(target_shape=(height, width, num_channels))

    def call(self, x):
        kernel = self.kernel_reshape(self.kernel_gen(x))
        patches = ops.image.extract_patches(x, size=self.kernel_size, strides=1, dilation_rate=1,
                                            padding="same")
        patches = self.input_patches_reshape(patches)
        output = ops.sum(ops.multiply(kernel, patches), axis=3)
        return self.output_reshape(output), kernel


def _involution_ref(x, layer, k=3, groups=1):
    """numpy: the kernel the two 1x1 convolutions generate, and each pixel's k x k patch
    weighted by it, per group of channels."""
    (w1, b1), (w2, b2) = [c.get_weights() for c in layer.kernel_gen.layers if c.get_weights()]
    n, h, w, c = x.shape
    hid = np.maximum(x @ w1[0, 0] + b1, 0)
    kern = (hid @ w2[0, 0] + b2).reshape(n, h, w, k * k, 1, groups)
    xp = np.pad(x, ((0, 0), (k // 2, k // 2), (k // 2, k // 2), (0, 0)))
    patches = np.stack([xp[:, i:i + h, j:j + w, :] for i in range(k) for j in range(k)], axis=3)
    patches = patches.reshape(n, h, w, k * k, c // groups, groups)
    return (kern * patches).sum(3).reshape(n, h, w, c), kern


@pytest.mark.parametrize("groups", [1, 2])
def test_involution_as_keras_io_writes_it_computes_numpys_values(groups):
    x = RNG.standard_normal((2, 6, 5, 4)).astype(np.float32)
    inv = Involution(channel=4, group_number=groups, kernel_size=3, reduction_ratio=2, name="inv")
    out, kern = inv(x)                                    # eager, as the example's first cells
    want_out, want_kern = _involution_ref(x, inv, groups=groups)
    assert np.shape(kern) == (2, 6, 5, 9, 1, groups)
    np.testing.assert_allclose(np.asarray(out), want_out, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(kern), want_kern, rtol=1e-5, atol=1e-5)

    # in a functional model; the example's visualisation model predicts the 6-D kernel
    inp = keras.Input((6, 5, 4))
    y, k = inv(inp)
    assert tuple(y.shape) == (None, 6, 5, 4) and tuple(k.shape) == (None, 6, 5, 9, 1, groups)
    vis = keras.Model(inp, [y, k])
    got_out, got_kern = vis.predict(x, verbose=0)
    assert got_kern.shape == (2, 6, 5, 9, 1, groups)
    np.testing.assert_allclose(got_out, want_out, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got_kern, want_kern, rtol=1e-5, atol=1e-5)
    # (the example's sum over the kernel's last three axes, on what predict gives)
    assert np.asarray(ops.sum(got_kern, axis=[-1, -2, -3])).shape == (2, 6, 5)


def test_involution_gradients_match_pytorch():
    torch = pytest.importorskip("torch")
    x = RNG.standard_normal((2, 5, 4, 2)).astype(np.float32)
    inv = Involution(channel=2, group_number=1, kernel_size=3, reduction_ratio=1)
    inv(x)
    (w1, b1), (w2, b2) = [c.get_weights() for c in inv.kernel_gen.layers if c.get_weights()]
    wt = RNG.standard_normal((2, 5, 4, 2)).astype(np.float32)
    wk = RNG.standard_normal((2, 5, 4, 9, 1, 1)).astype(np.float32)
    v = keras.Variable(x)
    with keras.GradientTape() as tape:
        out, kern = inv(v)
        loss = ops.sum(out * wt) + ops.sum(kern * wk)
    weights = [inv.kernel_gen.layers[0].kernel, inv.kernel_gen.layers[2].kernel]
    grads = tape.gradient(loss, [v] + weights)

    xt = torch.tensor(x, requires_grad=True)
    t1 = torch.tensor(w1[0, 0], requires_grad=True)
    t2 = torch.tensor(w2[0, 0], requires_grad=True)
    hid = torch.relu(xt @ t1 + torch.tensor(b1))
    kt = (hid @ t2 + torch.tensor(b2)).reshape(2, 5, 4, 9, 1, 1)
    xp = torch.nn.functional.pad(xt, (0, 0, 1, 1, 1, 1))
    pt = torch.stack([xp[:, i:i + 5, j:j + 4, :] for i in range(3) for j in range(3)], dim=3)[..., None]
    ot = (kt * pt).sum(3).reshape(2, 5, 4, 2)
    ((ot * torch.tensor(wt)).sum() + (kt * torch.tensor(wk)).sum()).backward()
    np.testing.assert_allclose(np.asarray(grads[0]), xt.grad.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.asarray(grads[1])[0, 0], t1.grad.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.asarray(grads[2])[0, 0], t2.grad.numpy(), rtol=1e-4, atol=1e-4)


def test_an_involution_model_trains_and_its_kernel_output_is_left_out():
    keras.utils.set_random_seed(3)
    x = RNG.standard_normal((64, 8, 8, 3)).astype(np.float32)
    y = (x[:, :4].mean(axis=(1, 2, 3)) > x[:, 4:].mean(axis=(1, 2, 3))).astype(np.int64)
    inp = keras.Input((8, 8, 3))
    h, _ = Involution(channel=3, group_number=1, kernel_size=3, reduction_ratio=1)(inp)
    h = layers.ReLU()(h)
    h = layers.Flatten()(h)
    out = layers.Dense(2)(h)
    model = keras.Model(inp, out)
    model.compile(optimizer=keras.optimizers.Adam(1e-2),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    hist = model.fit(x, y, epochs=8, batch_size=16, verbose=0).history
    assert hist["loss"][-1] < 0.5 * hist["loss"][0], hist["loss"]
    assert hist["accuracy"][-1] > 0.8


def test_six_d_nodes_through_dense_layer_norm_reshape_flatten_fit_and_save(tmp_path):
    x = RNG.standard_normal((8, 2, 3, 4, 5, 6)).astype(np.float32)
    inp = keras.Input((2, 3, 4, 5, 6))
    h = layers.Dense(7)(inp)
    assert tuple(h.shape) == (None, 2, 3, 4, 5, 7)
    h = layers.LayerNormalization()(h)
    out = layers.Dense(1)(layers.Flatten()(layers.Reshape((24, 5, 7))(h)))
    model = keras.Model(inp, [out, h])
    got_out, got_h = model.predict(x, verbose=0)
    w, b = model.layers[1].get_weights()
    z = x @ w + b
    want_h = (z - z.mean(-1, keepdims=True)) / np.sqrt(z.var(-1, keepdims=True) + 1e-3)
    assert got_h.shape == (8, 2, 3, 4, 5, 7)
    np.testing.assert_allclose(got_h, want_h, rtol=1e-4, atol=1e-4)
    w2, b2 = model.layers[-1].get_weights()
    np.testing.assert_allclose(got_out, want_h.reshape(8, -1) @ w2 + b2, rtol=1e-4, atol=1e-4)

    # a 6-D output trains against 6-D targets, and the model saves and loads
    m = keras.Model(inp, layers.Dense(6)(inp))
    m.compile(optimizer=keras.optimizers.Adam(0.05), loss="mse")
    hist = m.fit(x, x, epochs=40, batch_size=8, verbose=0).history
    assert hist["loss"][-1] < 0.1 * hist["loss"][0], hist["loss"]         # (the identity, to learn)
    path = tmp_path / "six.gguf"
    m.save(path)
    back = keras.models.load_model(path)
    np.testing.assert_array_equal(back.predict(x, verbose=0), m.predict(x, verbose=0))
    assert back.predict(x, verbose=0).shape == x.shape


def test_the_symbolic_ops_carry_six_d_nodes():
    inp = keras.Input((6, 6, 2))
    k6 = ops.reshape(layers.Conv2D(9, 1)(inp), (-1, 6, 6, 9, 1, 1))
    p6 = ops.reshape(ops.image.extract_patches(inp, size=3, strides=1, dilation_rate=1, padding="same"),
                     (-1, 6, 6, 9, 2, 1))
    o = ops.reshape(ops.sum(ops.multiply(k6, p6), axis=3), (-1, 6, 6, 2))
    model = keras.Model(inp, o)
    x = RNG.standard_normal((3, 6, 6, 2)).astype(np.float32)
    w, b = model.layers[1].get_weights()
    kern = (x @ w[0, 0] + b).reshape(3, 6, 6, 9, 1, 1)
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    patches = np.stack([xp[:, i:i + 6, j:j + 6, :] for i in range(3) for j in range(3)], axis=3)[..., None]
    np.testing.assert_allclose(model.predict(x, verbose=0), (kern * patches).sum(3).reshape(3, 6, 6, 2),
                               rtol=1e-5, atol=1e-5)


def test_six_d_nodes_are_refused_where_a_layer_needs_five_or_fewer():
    inp = keras.Input((2, 3, 4, 5, 6))
    with pytest.raises(ValueError, match="Conv3D"):
        layers.Conv3D(2, 2)(inp)
    with pytest.raises(ValueError, match="1 to 7 dimensions"):
        layers.Reshape((1,) * 8)

    class Nine(keras.layers.Layer):
        def call(self, x):
            return ops.reshape(x, (-1, 1, 1, 1, 1, 1, 1, 1, 6))

    with pytest.raises(ValueError, match="at most 8 dimensions"):
        Nine()(RNG.standard_normal((2, 6)).astype(np.float32))


@pytest.mark.parametrize("make", [lambda: layers.Dense(3, use_bias=False), lambda: layers.Activation("tanh"),
                                  lambda: layers.Reshape((5, 8))])
def test_a_layer_on_a_five_d_tensor_in_a_tape_passes_the_gradient_on(make):
    # (a layer given a tensor of more than four dimensions in a GradientTape's block took its
    # values as a constant: the gradient to what made it was None)
    torch = pytest.importorskip("torch")
    x = RNG.standard_normal((2, 5, 4, 2)).astype(np.float32)
    layer = make()
    layer(x.reshape(2, 5, 4, 2, 1))
    v = keras.Variable(x)
    with keras.GradientTape() as tape:
        y = layer(ops.reshape(v * 2.0, (-1, 5, 4, 2, 1)))
        loss = ops.sum(ops.square(y))
    got = tape.gradient(loss, v)
    assert got is not None
    xt = torch.tensor(x, requires_grad=True)
    h = (xt * 2.0).reshape(2, 5, 4, 2, 1)
    if isinstance(layer, layers.Dense):
        h = h @ torch.tensor(layer.get_weights()[0])
    elif isinstance(layer, layers.Activation):
        h = torch.tanh(h)
    (h ** 2).sum().backward()
    np.testing.assert_allclose(np.asarray(got), xt.grad.numpy(), rtol=1e-5, atol=1e-5)
