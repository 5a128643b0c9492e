"""Tensors of five or more dimensions inside a call (pyggml._wide): Keras code reshapes to 5-D
or 6-D for a moment (Swin's windows, CaiT's qkv, a pixel shuffle, a mask over windows and
heads).  Each op is checked against numpy and its gradient against PyTorch's."""

import itertools

import numpy as np
import pytest

import pyggml as keras
from pyggml import layers, ops

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(7)
X = RNG.standard_normal((2, 4, 6, 10)).astype(np.float32)


def _same(pg_fn, torch_fn, x=X):
    """pg_fn on a Variable (on a GradientTape) and torch_fn on a tensor give the same values and
    the same gradient of a random weighting of the result."""
    v = keras.Variable(x)
    with keras.GradientTape() as tape:
        out = pg_fn(v)
        w = RNG.standard_normal(tuple(np.shape(out))).astype(np.float32)
        loss = ops.sum(out * w)
    grad = np.asarray(tape.gradient(loss, v))
    xt = torch.tensor(x, requires_grad=True)
    ref = torch_fn(xt)
    (ref * torch.tensor(w).reshape(ref.shape)).sum().backward()
    got = np.asarray(out)
    assert got.shape == tuple(ref.shape)
    np.testing.assert_allclose(got, ref.detach().numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(grad, xt.grad.numpy(), rtol=1e-5, atol=1e-5)


SIX = (2, 2, 2, 6, 5, 2)
FIVE = (2, 4, 3, 2, 10)


@pytest.mark.parametrize("perm", [(0, 1, 3, 2, 4, 5), (5, 4, 3, 2, 1, 0), (2, 0, 4, 1, 5, 3), (1, 3, 5, 0, 2, 4)])
def test_six_dim_transpose_and_its_gradient(perm):
    _same(lambda v: ops.reshape(ops.transpose(ops.reshape(v, SIX), perm), (-1, 10)),
          lambda t: t.reshape(SIX).permute(*perm).reshape(-1, 10))


@pytest.mark.parametrize("perm", list(itertools.permutations(range(5)))[1::9])
def test_five_dim_transposes(perm):
    _same(lambda v: ops.reshape(ops.transpose(ops.reshape(v, FIVE), perm), (-1,)),
          lambda t: t.reshape(FIVE).permute(*perm).reshape(-1))


def test_axes_of_length_one_and_swapaxes_moveaxis():
    _same(lambda v: ops.reshape(ops.transpose(ops.reshape(v, (2, 1, 4, 1, 6, 10)), (3, 4, 0, 5, 1, 2)), (-1,)),
          lambda t: t.reshape(2, 1, 4, 1, 6, 10).permute(3, 4, 0, 5, 1, 2).reshape(-1))
    _same(lambda v: ops.reshape(ops.swapaxes(ops.reshape(v, FIVE), 0, 3), (-1,)),
          lambda t: t.reshape(FIVE).transpose(0, 3).reshape(-1))
    _same(lambda v: ops.reshape(ops.moveaxis(ops.reshape(v, FIVE), 4, 1), (-1,)),
          lambda t: torch.movedim(t.reshape(FIVE), 4, 1).reshape(-1))


def test_indexing():
    _same(lambda v: ops.reshape(ops.transpose(ops.reshape(v, FIVE), (2, 0, 3, 1, 4))[1], (-1,)),
          lambda t: t.reshape(FIVE).permute(2, 0, 3, 1, 4)[1].reshape(-1))
    _same(lambda v: ops.reshape(ops.reshape(v, FIVE)[:, 1:3, ..., ::-2][..., None, :], (-1,)),
          lambda t: t.reshape(FIVE)[:, 1:3, ..., torch.arange(9, -1, -2)].unsqueeze(-2).reshape(-1))
    _same(lambda v: ops.reshape(v, FIVE)[-1, :, 2, :, 3:7],
          lambda t: t.reshape(FIVE)[-1, :, 2, :, 3:7])


def test_negative_steps_and_new_axes_on_graph_tensors():
    _same(lambda v: v[:, ::-1, :, ::-2] * 1.0, lambda t: torch.flip(t, (1, 3))[:, :, :, ::2])
    _same(lambda v: v[::-1][:, 1:3][..., 7:1:-3] * 1.0, lambda t: torch.flip(t, (0, 3))[:, 1:3][..., 2:8:3])
    _same(lambda v: ops.reshape(v[:, None, ::-1], (-1,)), lambda t: torch.flip(t, (1,))[:, None].reshape(-1))


@pytest.mark.parametrize("axis", [0, 2, -1, (1, 3), (0, 4), (0, 2, 4), None])
@pytest.mark.parametrize("name", ["sum", "mean", "max"])
def test_reductions(name, axis):
    ref = {"sum": torch.sum, "mean": torch.mean, "max": torch.amax}[name]
    _same(lambda v: getattr(ops, name)(ops.reshape(v, FIVE), axis=axis),
          lambda t: ref(t.reshape(FIVE)) if axis is None else ref(t.reshape(FIVE), dim=axis))   # (0-d: Keras's, torch's)


def test_var_keepdims_argmax_softmax():
    _same(lambda v: ops.var(ops.reshape(v, FIVE), axis=(1, 3), keepdims=True),
          lambda t: torch.var(t.reshape(FIVE), dim=(1, 3), keepdim=True, unbiased=False))
    _same(lambda v: ops.reshape(ops.softmax(ops.reshape(v, FIVE), axis=2), (-1,)),
          lambda t: torch.softmax(t.reshape(FIVE), 2).reshape(-1))
    _same(lambda v: ops.reshape(keras.activations.softmax(ops.reshape(v, FIVE), axis=1), (-1,)),
          lambda t: torch.softmax(t.reshape(FIVE), 1).reshape(-1))
    _same(lambda v: ops.reshape(ops.log_softmax(ops.reshape(v, FIVE), axis=-1), (-1,)),
          lambda t: torch.log_softmax(t.reshape(FIVE), -1).reshape(-1))

    class Arg(layers.Layer):
        def call(self, v):
            return ops.cast(ops.argmax(ops.reshape(v, FIVE), axis=1), "float32")
    np.testing.assert_array_equal(np.asarray(Arg()(X)), np.argmax(X.reshape(FIVE), axis=1))


def test_elementwise_broadcasting_as_swin_masks_its_windows():
    mask = RNG.standard_normal((1, 4, 1, 3, 10)).astype(np.float32)       # (1, windows, 1, n, n)
    _same(lambda v: ops.reshape(ops.reshape(v, (2, 4, 2, 3, 10)) + mask, (-1,)),
          lambda t: (t.reshape(2, 4, 2, 3, 10) + torch.tensor(mask)).reshape(-1))
    windows = RNG.standard_normal((4, 3, 10)).astype(np.float32)
    _same(lambda v: ops.reshape(ops.reshape(v, (2, 4, 2, 3, 10)) +
                                ops.expand_dims(ops.expand_dims(keras.Variable(windows), 1), 0), (2, -1)),
          lambda t: (t.reshape(2, 4, 2, 3, 10) + torch.tensor(windows)[None, :, None]).reshape(2, -1))
    _same(lambda v: ops.reshape(ops.where(ops.reshape(v, FIVE) > 0, ops.relu(ops.reshape(v, FIVE)) * 2.0, -1.0),
                                (-1,)),
          lambda t: torch.where(t.reshape(FIVE) > 0, torch.relu(t.reshape(FIVE)) * 2, -1.0).reshape(-1))
    _same(lambda v: ops.reshape(2.0 - ops.exp(-ops.reshape(v, FIVE) ** 2) / 3.0, (-1,)),
          lambda t: (2.0 - torch.exp(-t.reshape(FIVE) ** 2) / 3.0).reshape(-1))


def test_matmul_of_stacks_of_five_dims():
    _same(lambda v: ops.reshape(ops.reshape(v, (2, 2, 2, 6, 10)) @ ops.swapaxes(ops.reshape(v, (2, 2, 2, 6, 10)), -1, -2),
                                (-1,)),
          lambda t: (t.reshape(2, 2, 2, 6, 10) @ t.reshape(2, 2, 2, 6, 10).transpose(-1, -2)).reshape(-1))
    b = RNG.standard_normal((1, 2, 1, 10, 3)).astype(np.float32)           # broadcast stacks
    _same(lambda v: ops.reshape(ops.matmul(ops.reshape(v, (2, 2, 2, 6, 10)), b), (-1,)),
          lambda t: (t.reshape(2, 2, 2, 6, 10) @ torch.tensor(b)).reshape(-1))


def test_einsum_of_and_into_five_dims():
    _same(lambda v: ops.reshape(ops.einsum("abhnd,abhmd->abhnm", ops.reshape(v, (2, 2, 2, 6, 10)),
                                           ops.reshape(v, (2, 2, 2, 6, 10)) * 0.5), (-1,)),
          lambda t: torch.einsum("abhnd,abhmd->abhnm", t.reshape(2, 2, 2, 6, 10),
                                 t.reshape(2, 2, 2, 6, 10) * 0.5).reshape(-1))
    _same(lambda v: ops.reshape(ops.einsum("abcd,abce->abced", v, v[..., :3]), (-1,)),
          lambda t: torch.einsum("abcd,abce->abced", t, t[..., :3]).reshape(-1))
    _same(lambda v: ops.einsum("abcde->abed", ops.reshape(v, (2, 2, 2, 6, 10))),
          lambda t: torch.einsum("abcde->abed", t.reshape(2, 2, 2, 6, 10)))
    _same(lambda v: ops.reshape(ops.einsum("ab,cd,ef->abcdef", v[0, 0, :2, :3], v[0, 1, :2, :2], v[1, 0, :3, :2]),
                                (-1,)),
          lambda t: torch.einsum("ab,cd,ef->abcdef", t[0, 0, :2, :3], t[0, 1, :2, :2], t[1, 0, :3, :2]).reshape(-1))


def test_stack_concatenate_split_unstack():
    _same(lambda v: ops.reshape(ops.stack([v, v * 2.0], axis=2), (-1, 6)),
          lambda t: torch.stack([t, t * 2], 2).reshape(-1, 6))
    _same(lambda v: ops.reshape(ops.concatenate(ops.split(ops.reshape(v, FIVE), 2, axis=1)[::-1], axis=3), (-1,)),
          lambda t: torch.cat(torch.split(t.reshape(FIVE), 2, dim=1)[::-1], 3).reshape(-1))
    _same(lambda v: ops.unstack(ops.reshape(v, FIVE), axis=3)[1] * 1.0,
          lambda t: t.reshape(FIVE)[:, :, :, 1])


def _partition(x, w):
    """keras-io's Swin window_partition, written with keras.ops."""
    _, h, wd, c = x.shape
    x = ops.reshape(x, (-1, h // w, w, wd // w, w, c))
    x = ops.transpose(x, (0, 1, 3, 2, 4, 5))
    return ops.reshape(x, (-1, w, w, c))


def _reverse(windows, w, h, wd, c):
    x = ops.reshape(windows, (-1, h // w, wd // w, w, w, c))
    x = ops.transpose(x, (0, 1, 3, 2, 4, 5))
    return ops.reshape(x, (-1, h, wd, c))


class _WindowAttention(layers.Layer):
    """Swin's windows and CaiT's qkv in one layer: 6-D and 5-D tensors in a call."""

    def __init__(self, window=2, heads=2, **kwargs):
        super().__init__(**kwargs)
        self.window, self.heads = window, heads

    def build(self, input_shape):
        c = input_shape[-1]
        self.qkv = layers.Dense(3 * c)
        self.norm = layers.LayerNormalization()

    def call(self, x):
        _, h, wd, c = x.shape
        w, n = self.window, self.window * self.window
        win = ops.reshape(_partition(x, w), (-1, n, c))
        qkv = ops.reshape(self.qkv(win), (-1, n, 3, self.heads, c // self.heads))
        qkv = ops.transpose(qkv, (2, 0, 3, 1, 4))
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = ops.softmax(q @ ops.transpose(k, (0, 1, 3, 2)) / np.sqrt(c // self.heads), axis=-1)
        out = ops.reshape(ops.transpose(attn @ v, (0, 2, 1, 3)), (-1, w, w, c))
        return self.norm(_reverse(out, w, h, wd, c) + x)


def _window_attention_numpy(layer, x):
    kernel, bias = (np.asarray(a) for a in layer.qkv.get_weights())
    _, h, wd, c = x.shape
    w, n, hd = layer.window, layer.window ** 2, c // layer.heads
    win = x.reshape(-1, h // w, w, wd // w, w, c).transpose(0, 1, 3, 2, 4, 5).reshape(-1, n, c)
    qkv = (win @ kernel + bias).reshape(-1, n, 3, layer.heads, hd).transpose(2, 0, 3, 1, 4)
    s = qkv[0] @ qkv[1].transpose(0, 1, 3, 2) / np.sqrt(hd)
    s = np.exp(s - s.max(-1, keepdims=True))
    s /= s.sum(-1, keepdims=True)
    out = (s @ qkv[2]).transpose(0, 2, 1, 3).reshape(-1, h // w, wd // w, w, w, c)
    y = out.transpose(0, 1, 3, 2, 4, 5).reshape(x.shape) + x
    mu, var = y.mean(-1, keepdims=True), y.var(-1, keepdims=True)
    gamma, beta = (np.asarray(a) for a in layer.norm.get_weights())
    return (y - mu) / np.sqrt(var + 1e-3) * gamma + beta


def test_swin_window_attention_in_a_functional_model_predicts_and_trains():
    inp = keras.Input((4, 4, 8))
    block = _WindowAttention()
    model = keras.Model(inp, layers.Dense(1)(layers.GlobalAveragePooling2D()(block(inp))))
    x = RNG.standard_normal((6, 4, 4, 8)).astype(np.float32)
    inner = keras.Model(inp, block(inp))
    np.testing.assert_allclose(inner.predict(x, verbose=0), _window_attention_numpy(block, x), rtol=1e-4, atol=1e-4)
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
    y = x.mean(axis=(1, 2, 3))[:, None]
    before = model.evaluate(x, y, verbose=0)
    model.fit(x, y, epochs=30, verbose=0)
    assert model.evaluate(x, y, verbose=0) < 0.5 * before
    np.testing.assert_allclose(inner.predict(x, verbose=0), _window_attention_numpy(block, x), rtol=1e-4, atol=1e-4)


def test_last_axis_layers_take_a_wide_tensor_in_a_call():
    class Heads(layers.Layer):
        def build(self, input_shape):
            self.dense = layers.Dense(3)

        def call(self, v):
            return ops.reshape(self.dense(ops.reshape(v, (2, 2, 2, 6, 10))), (2, -1))
    layer = Heads()
    out = np.asarray(layer(X))
    kernel, bias = (np.asarray(a) for a in layer.dense.get_weights())
    np.testing.assert_allclose(out, (X.reshape(2, 2, 2, 6, 10) @ kernel + bias).reshape(2, -1), rtol=1e-5, atol=1e-5)


def test_a_call_returning_a_volume_makes_a_five_dim_node():
    class ToVolume(layers.Layer):
        def call(self, v):
            return ops.reshape(v, (-1, 2, 2, 6, 10))
    inp = keras.Input((4, 6, 10))
    vol = ToVolume()(inp)
    assert vol.shape == (None, 2, 2, 6, 10)
    np.testing.assert_array_equal(keras.Model(inp, vol).predict(X, verbose=0), X.reshape(2, 2, 2, 6, 10))
    np.testing.assert_array_equal(np.asarray(ToVolume()(X)), X.reshape(2, 2, 2, 6, 10))
    conv = layers.Conv3D(3, 1)
    model = keras.Model(inp, conv(vol))
    kernel, bias = (np.asarray(a) for a in conv.get_weights())
    np.testing.assert_allclose(model.predict(X, verbose=0), X.reshape(2, 2, 2, 6, 10) @ kernel[0, 0, 0] + bias,
                               rtol=1e-5, atol=1e-5)


def test_ops_on_arrays_of_more_than_four_dims():
    a = RNG.standard_normal((2, 3, 4, 5, 6)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(ops.softmax(a, axis=1)), torch.softmax(torch.tensor(a), 1).numpy(),
                               rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(np.asarray(ops.transpose(a, (4, 0, 2, 1, 3))), a.transpose(4, 0, 2, 1, 3))
    # (a sum of 8 values of size ~2 in float32: its rounding is ~1e-6 of them, whatever the order)
    np.testing.assert_allclose(np.asarray(ops.sum(a * 2, axis=(0, 2))), (a * 2).sum((0, 2)), rtol=1e-5, atol=1e-5)
    assert np.asarray(ops.expand_dims(a, 0)).shape == (1, 2, 3, 4, 5, 6)
    assert np.asarray(ops.expand_dims(a[0], 0)).shape == (1, 3, 4, 5, 6)            # 4-D in, 5-D out
    np.testing.assert_allclose(np.asarray(ops.sigmoid(a)), 1 / (1 + np.exp(-a)), rtol=1e-5, atol=1e-6)
    # Swin's mask, made in build on numpy: a window partition of an integer image
    img = np.arange(16).reshape(1, 4, 4, 1)
    win = ops.reshape(ops.transpose(ops.reshape(img, (-1, 2, 2, 2, 2, 1)), (0, 1, 3, 2, 4, 5)), (-1, 2, 2, 1))
    np.testing.assert_array_equal(np.asarray(win),
                                  img.reshape(1, 2, 2, 2, 2, 1).transpose(0, 1, 3, 2, 4, 5).reshape(-1, 2, 2, 1))


def _call(fn):
    class L(layers.Layer):
        def call(self, v):
            return fn(v)
    return L()(X)


@pytest.mark.parametrize("fn, words", [
    (lambda v: ops.einsum("abcce->abce", ops.reshape(v, (2, 2, 2, 2, 30))), "diagonal"),
    (lambda v: layers.Conv2D(2, 3)(ops.reshape(v, (2, 2, 2, 6, 10))), "Conv2D"),
    # (a call's result may have up to 8 dimensions, the batch included: tests/test_wide_nodes.py)
    (lambda v: ops.reshape(v, (2, 1, 1, 1, 1, 2, 2, 6, 10)), "at most 8 dimensions"),
    (lambda v: ops.reshape(v, (2, 1, 2, 1, 2, 6, 10)) + ops.reshape(v, (1, 2, 1, 2, 2, 6, 10)), "four groups"),
])
def test_what_a_wide_tensor_cannot_do_is_refused_clearly(fn, words):
    with pytest.raises(ValueError, match="at most 4 dimensions|four groups|at most 8") as e:
        _call(fn)
    assert words in str(e.value)


@pytest.mark.parametrize("fn, ref", [
    (lambda t: ops.reshape(t, (-1, 4, 4, 3)), lambda a: a.reshape(-1, 4, 4, 3)),        # items into the batch
    (lambda t: t[:, 0], lambda a: a[:, 0]),
    (lambda t: ops.mean(t, axis=-1), lambda a: a.mean(-1)),
    (lambda t: ops.transpose(t, (0, 2, 1, 3, 4)), lambda a: a.transpose(0, 2, 1, 3, 4)),
    (lambda t: ops.reshape(t, (-1, 5, 48)), lambda a: a.reshape(-1, 5, 48)),
    (lambda t, conv: conv(t) * 1.0, lambda a: np.repeat(a.sum(-1, keepdims=True), 2, -1)),
])
def test_a_volume_given_to_a_custom_call_is_five_dimensional_there(fn, ref):
    class Call(layers.Layer):
        def __init__(self):
            super().__init__()
            self.conv = layers.Conv3D(2, 1, kernel_initializer="ones", use_bias=False)

        def call(self, t):
            return fn(t, self.conv) if fn.__code__.co_argcount == 2 else fn(t)
    x = RNG.standard_normal((2, 5, 4, 4, 3)).astype(np.float32)
    want = ref(x)
    np.testing.assert_allclose(np.asarray(Call()(x)), want, rtol=1e-5, atol=1e-5)
    inp = keras.Input((5, 4, 4, 3))
    out = Call()(inp)
    assert out.shape == (None,) + want.shape[1:]
    np.testing.assert_allclose(keras.Model(inp, out).predict(x, verbose=0), want, rtol=1e-5, atol=1e-5)


def test_five_dim_constants_in_a_call_and_ops_on_five_dim_nodes():
    mask = np.ones((6, 4, 4), np.float32)

    class Masked(layers.Layer):
        def call(self, a):
            m = ops.expand_dims(ops.expand_dims(ops.convert_to_tensor(mask), axis=1), axis=0)
            return ops.reshape(a, (-1, 6, 2, 4, 4)) + m + ops.exp(np.zeros((1, 6, 1, 4, 4), np.float32))
    x = RNG.standard_normal((3, 6, 2, 4, 4)).astype(np.float32)
    inp = keras.Input((6, 2, 4, 4))
    np.testing.assert_allclose(keras.Model(inp, Masked()(inp)).predict(x, verbose=0), x + 2.0, rtol=1e-6)
    folded = ops.reshape(inp, (-1, 2, 4, 4))                      # an op on a 5-D node: items into the batch
    np.testing.assert_array_equal(keras.Model(inp, folded).predict(x, verbose=0), x.reshape(-1, 2, 4, 4))
    lam = layers.Lambda(lambda z: ops.reshape(z, (-1, 2, 4, 4)))(inp)
    np.testing.assert_array_equal(keras.Model(inp, lam).predict(x, verbose=0), x.reshape(-1, 2, 4, 4))


def test_a_gradient_tape_over_a_batch_of_volumes():
    inp = keras.Input((4, 8, 8, 1))
    dense = layers.Dense(3)
    model = keras.Model(inp, dense(layers.Flatten()(layers.Conv3D(2, 3)(inp))))
    x = RNG.standard_normal((2, 4, 8, 8, 1)).astype(np.float32)
    with keras.GradientTape() as tape:
        loss = ops.mean(model(x) ** 2)
    grads = tape.gradient(loss, dense.trainable_weights)
    y = model.predict(x, verbose=0)
    np.testing.assert_allclose(float(loss), np.mean(y ** 2), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(grads[1]), 2 * y.sum(0) / y.size, rtol=1e-4, atol=1e-7)   # the bias's


def test_an_eager_call_returning_python_numbers_beside_a_tensor():
    class PatchEmbed(layers.Layer):
        def __init__(self):
            super().__init__()
            self.proj = layers.Conv2D(8, 2, strides=2)

        def call(self, x):
            x = self.proj(x)
            height, width, channels = ops.shape(x)[1], ops.shape(x)[2], ops.shape(x)[3]
            return ops.reshape(x, (-1, height * width, channels)), height, width, channels
    out, h, w, c = PatchEmbed()(np.ones((2, 4, 4, 3), np.float32))
    assert out.shape == (2, 4, 8) and (h, w, c) == (2, 2, 8)
