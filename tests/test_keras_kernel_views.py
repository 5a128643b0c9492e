"""Keras's ``kernel`` names over weights pyggml keeps in PyTorch's layout (``Dense.kernel``
(in, units) over ``Dense.weight`` (units, in)): the values, ``assign``, a layer's call in a
model (a tied-weights autoencoder trains through the transposed kernel), a GradientTape's
gradient and ``apply_gradients``, all in Keras's layout, checked against numpy; a Sequential's
weights before compile; ``model.input_shape``; a model's ``get_weights()`` indexed and set as
Keras's list (a target network's update)."""

import copy
import pickle

import numpy as np
import pytest

import pyggml as pg
from pyggml import layers, ops

from test_keras_io_rl import update_target       # keras-io's ddpg_pendulum, as written there


def _built(layer, shape):
    layer.build(shape)
    return layer


@pytest.mark.parametrize("make, shape, names", [
    (lambda: layers.Dense(3), (None, 4), ("kernel",)),
    (lambda: layers.Conv1D(5, 3), (None, 9, 2), ("kernel",)),
    (lambda: layers.Conv2D(5, (3, 2)), (None, 8, 7, 2), ("kernel",)),
    (lambda: layers.Conv2DTranspose(4, 3), (None, 5, 5, 3), ("kernel",)),
    (lambda: layers.DepthwiseConv2D(3, depth_multiplier=2), (None, 6, 6, 3), ("depthwise_kernel",)),
    (lambda: layers.LSTM(4), (None, 5, 3), ("kernel", "recurrent_kernel")),
    (lambda: layers.GRU(4), (None, 5, 3), ("kernel", "recurrent_kernel")),
    (lambda: layers.SimpleRNN(4), (None, 5, 3), ("kernel", "recurrent_kernel")),
])
def test_kernels_are_keras_s_weights_in_keras_s_layout(make, shape, names):
    layer = _built(make(), shape)
    keras_list = layer.get_weights()
    for i, name in enumerate(names):
        view = getattr(layer, name)
        assert view is getattr(layer, name)
        want = keras_list[i]                    # (a GRU's in Keras's gate order z, r, h, as the view's)
        assert view.shape == want.shape and np.array_equal(view.numpy(), want)
        assert np.array_equal(np.asarray(view), want)
        new = np.random.default_rng(i).standard_normal(want.shape).astype(np.float32)
        view.assign(new)
        assert np.array_equal(layer.get_weights()[i], new)
        with pytest.raises(ValueError, match=r"takes an array of shape"):
            view.assign(np.zeros(want.shape[::-1] + (2,), np.float32))
        with pytest.raises(TypeError, match="real numbers"):
            view.assign(np.full(want.shape, "x"))


def test_a_kernel_before_build_is_an_attribute_error_and_a_subclass_s_own_kernel_wins():
    with pytest.raises(AttributeError, match="until it is built"):
        layers.Dense(3).kernel
    assert not hasattr(layers.Conv2D(2, 3), "kernel")

    class Own(layers.Dense):
        def build(self, input_shape):
            super().build(input_shape)
            self.kernel = self.add_weight(shape=(input_shape[-1], self.units), name="own_kernel")

    own = _built(Own(2), (None, 3))
    assert own.kernel.name == "own_kernel"

    class Zeroed(layers.Dense):                 # a tensor set in its own call would not be used: refused
        def call(self, x):
            self.kernel = ops.zeros((3, 2))
            return super().call(x)
    with pytest.raises(AttributeError, match="no setter"):
        Zeroed(2)(np.ones((1, 3), np.float32))


def test_the_kernel_s_values_and_assign_are_what_predict_uses():
    d = layers.Dense(3)
    m = pg.Sequential([pg.Input((4,)), d])
    m.compile(optimizer="sgd", loss="mse")
    x = np.random.default_rng(0).random((5, 4)).astype(np.float32)
    np.testing.assert_allclose(m.predict(x, verbose=0), x @ d.kernel.numpy() + d.bias.numpy(), rtol=1e-5, atol=1e-6)
    new = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
    d.kernel.assign(new)                            # Keras's weight transfer: kernel.assign(torch_w.T)
    np.testing.assert_array_equal(d.weight.numpy(), new.T)
    np.testing.assert_allclose(m.predict(x, verbose=0), x @ new + d.bias.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ops.matmul(x, d.kernel), x @ new, rtol=1e-6)


class DenseTranspose(pg.Layer):
    """The decoder of a tied autoencoder: the encoder's kernel, transposed."""

    def __init__(self, dense, **kwargs):
        super().__init__(**kwargs)
        self.dense = dense

    def build(self, input_shape):
        self.b = self.add_weight(name="b", shape=(self.dense.kernel.shape[0],), initializer="zeros")

    def call(self, inputs):
        return ops.matmul(inputs, ops.transpose(self.dense.kernel)) + self.b


def test_a_tied_autoencoder_trains_through_the_transposed_kernel():
    rng = np.random.default_rng(1)
    x = rng.random((8, 5)).astype(np.float32)
    enc = layers.Dense(3, use_bias=False)
    inp = pg.Input((5,))
    model = pg.Model(inp, DenseTranspose(enc)(enc(inp)))
    model.compile(optimizer=pg.optimizers.SGD(0.5), loss="mse")
    assert len(model.trainable_variables) == 2          # the kernel once, and the decoder's bias
    k0, b0 = enc.kernel.numpy(), np.zeros(5, np.float32)
    model.fit(x, x, batch_size=8, epochs=1, shuffle=False, verbose=0)
    # numpy: y = x K K^T + b, loss = mean((y - x)^2)
    h = x @ k0
    y = h @ k0.T + b0
    dy = 2 * (y - x) / y.size
    dk = dy.T @ h + x.T @ (dy @ k0)
    np.testing.assert_allclose(enc.kernel.numpy(), k0 - 0.5 * dk, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(model.predict(x, verbose=0), x @ enc.kernel.numpy() @ enc.kernel.numpy().T
                               + model.layers[-1].b.numpy(), rtol=1e-4, atol=1e-5)


def test_a_tape_s_gradient_and_apply_gradients_take_the_kernel_in_keras_s_layout():
    rng = np.random.default_rng(2)
    d = layers.Dense(3)
    model = pg.Sequential([pg.Input((4,)), d])
    model.compile(optimizer="sgd", loss="mse")
    feats = rng.random((6, 4)).astype(np.float32)
    k, b = d.kernel.numpy(), d.bias.numpy()
    with pg.GradientTape() as tape:
        tape.watch(feats)
        logits = ops.matmul(feats, d.kernel) + d.bias       # grad-CAM's class score by hand
        score = ops.sum(logits[:, 1])
    g_feats, g_kernel, g_weight = tape.gradient(score, [feats, d.kernel, d.weight])
    onehot = np.zeros((6, 3), np.float32)
    onehot[:, 1] = 1
    np.testing.assert_allclose(g_feats, onehot @ k.T, rtol=1e-5)
    np.testing.assert_allclose(g_kernel, feats.T @ onehot, rtol=1e-5)
    assert g_kernel.shape == (4, 3) and g_weight.shape == (3, 4)
    np.testing.assert_allclose(g_weight, g_kernel.T, rtol=1e-6)
    opt = pg.optimizers.SGD(0.1)
    opt.apply_gradients([(g_kernel, d.kernel)])
    np.testing.assert_allclose(d.kernel.numpy(), k - 0.1 * g_kernel, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(d.bias.numpy(), b)
    with pytest.raises(ValueError, match=r"the gradient of 'kernel' has shape \(3, 4\)"):
        opt.apply_gradients([(g_weight, d.kernel)])


def test_a_conv_kernel_in_keras_ops_conv_matches_the_layer():
    c = layers.Conv2D(4, 3, use_bias=False)
    x = np.random.default_rng(3).random((2, 6, 6, 2)).astype(np.float32)
    y = c(x)
    np.testing.assert_allclose(ops.conv(x, c.kernel), y, rtol=1e-5, atol=1e-6)
    model = pg.Sequential([pg.Input((6, 6, 2)), c])
    with pg.GradientTape() as tape:
        out = ops.sum(ops.conv(x, c.kernel))
    g = tape.gradient(out, c.kernel)
    # d sum(conv(x, K)) / dK[i, j, ci, co] = sum of x over the window's positions for tap (i, j)
    want = np.stack([np.stack([x[:, i:i + 4, j:j + 4, :].sum(axis=(0, 1, 2)) for j in range(3)]) for i in range(3)])
    np.testing.assert_allclose(g, np.repeat(want[..., None], 4, axis=-1), rtol=1e-4)
    assert model.count_params() == 3 * 3 * 2 * 4


def test_a_sequential_s_layers_have_their_kernels_before_compile_as_in_keras():
    model = pg.Sequential([pg.Input((4,)), layers.Dense(3), layers.Dense(2)])
    assert model.layers[0].kernel.shape == (4, 3) and model.layers[1].kernel.shape == (3, 2)
    np.testing.assert_array_equal(model.layers[1].kernel.numpy(), model.layers[1].weight.numpy().T)
    assert [w.shape for w in model.layers[0].weights] == [(3, 4), (3,)]
    assert model.layers[1].get_weights()[0].shape == (3, 2)
    with pytest.raises(AttributeError, match="until it is built"):
        pg.Sequential([layers.Dense(3)]).layers[0].kernel        # no input shape yet
    assert pg.Sequential([layers.Dense(3)]).layers[0].weights == []
    unfit = pg.Sequential([pg.Input((4, 4)), layers.Conv2D(2, 3)])
    assert unfit.layers[0].weights == []                         # the model's build says why
    with pytest.raises(ValueError, match=r"Conv2D expects inputs of shape \(H, W, C\)"):
        unfit.compile(loss="mse")
    saved = pg.Sequential([pg.Input((4,)), layers.Dense(3)])
    saved.layers[0].kernel.assign(np.ones((4, 3), np.float32))
    saved.compile(optimizer="sgd", loss="mse")
    np.testing.assert_allclose(saved.predict(np.ones((1, 4), np.float32), verbose=0), [[4.0, 4.0, 4.0]])


def test_input_shape_and_output_shape_are_keras_s_batch_shapes():
    seq = pg.Sequential([pg.Input((4,)), layers.Dense(3)])
    assert seq.input_shape == (None, 4) and seq.output_shape == (None, 3)
    lazy = pg.Sequential([layers.Dense(2)])
    assert lazy.input_shape is None and lazy.output_shape is None
    lazy.input_shape = 5                                 # API.md: settable as the features
    assert lazy.input_shape == (None, 5) and lazy.output_shape == (None, 2)
    lazy.input_shape = lazy.input_shape
    assert lazy.input_shape == (None, 5)
    a, b = pg.Input((8, 8, 1), batch_size=16), pg.Input((3,))
    conv = layers.Conv2D(2, 3)(a)
    two_out = pg.Model(a, [conv, layers.Flatten()(conv)])
    assert two_out.input_shape == (16, 8, 8, 1) and two_out.output_shape == [(16, 6, 6, 2), (16, 72)]
    assert pg.Model([a, b], conv).input_shape == [(16, 8, 8, 1), (None, 3)]
    assert pg.ops.shape(seq.layers[0].weight) == (3, 4)      # a Variable's shape outside a graph


def _actor():
    inp = pg.Input((3,))
    return pg.Model(inp, layers.Dense(2, activation="tanh")(layers.Dense(4, activation="relu")(inp)))


def test_a_model_s_get_weights_is_also_keras_s_list_for_a_target_network_update():
    actor, target = _actor(), _actor()
    a0, t0 = actor.get_weights(), target.get_weights()
    assert isinstance(a0, dict) and list(a0) == ["dense.weight", "dense.bias", "dense_1.weight", "dense_1.bias"]
    assert a0[0].shape == (3, 4) and a0["dense.weight"].shape == (4, 3)          # Keras's layout by index
    update_target(target, actor, 0.25)
    got = target.get_weights()
    for name in a0:
        np.testing.assert_allclose(got[name], 0.25 * a0[name] + 0.75 * t0[name], rtol=1e-6)
    target.set_weights([np.zeros_like(a0[i]) for i in range(len(a0))])       # Keras's list form
    assert all(not np.any(v) for v in target.get_weights().values())
    target.set_weights(actor.get_weights())
    x = np.random.default_rng(4).random((5, 3)).astype(np.float32)
    np.testing.assert_array_equal(target.predict(x, verbose=0), actor.predict(x, verbose=0))
    kept = copy.deepcopy(actor.get_weights())            # RL's "best weights so far"
    assert kept[2].shape == (4, 2) and np.array_equal(pickle.loads(pickle.dumps(kept))[3], a0[3])
    assert [w.shape for w in a0[1:3]] == [(4,), (4, 2)] and a0[-1].shape == (2,)
    with pytest.raises(IndexError, match="the model has 4 weights, no index 4"):
        a0[4]
    with pytest.raises(ValueError, match="takes an array of shape \\(3, 4\\)"):
        a0[0] = np.zeros((4, 3))
    with pytest.raises(ValueError, match="set_weights got a list of 2 arrays; the model has 4 weights"):
        target.set_weights([a0[0], a0[1]])
    with pytest.raises(TypeError, match="must be an array of numbers"):
        target.set_weights(["a", "b", "c", "d"])


def test_a_gru_kernel_view_is_in_keras_s_gate_order_in_a_tape_and_a_call():
    gru = _built(layers.GRU(3), (None, 4, 2))
    u = gru.units
    w_ih = gru.weight_ih.numpy()                 # pyggml's (PyTorch's) rows r, z, n
    z, r, n = w_ih[u:2 * u], w_ih[:u], w_ih[2 * u:]
    np.testing.assert_array_equal(gru.kernel.numpy(), np.concatenate([z, r, n]).T)
    x = np.random.default_rng(0).standard_normal((2, 4, 2)).astype(np.float32)
    with pg.GradientTape() as tape:
        loss = ops.sum(gru(x) ** 2)
    g_view, g_base = tape.gradient(loss, [gru.kernel, gru.weight_ih])
    g_base = np.asarray(g_base)
    np.testing.assert_allclose(np.asarray(g_view), np.concatenate([g_base[u:2 * u], g_base[:u], g_base[2 * u:]]).T,
                               rtol=1e-6)

    class UsesKernel(layers.Layer):              # the view's tensor in a call
        def __init__(self):
            super().__init__()
            self.gru = layers.GRU(3)

        def call(self, t):
            h = self.gru(t)                     # built first, as in Keras
            return ops.matmul(t[:, 0], self.gru.kernel) + 0 * ops.sum(h)
    m = pg.Sequential([pg.Input((4, 2)), UsesKernel()])
    out = m.predict(x, verbose=0)
    np.testing.assert_allclose(out, x[:, 0] @ m.layers[0].gru.kernel.numpy(), rtol=1e-5, atol=1e-6)
