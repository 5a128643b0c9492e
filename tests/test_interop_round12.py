"""Gaps found by a PyTorch user's habits (torch tensors and loaders everywhere), real GGUF
readers and a read of API.md, each checked against Keras 3 (torch backend), PyTorch or the
readers."""

import numpy as np
import pytest

import pyggml as pg
from pyggml import layers, ops


# --- GGUF names: long names in bytes, and the w.<k> aliases --------------------------------------

def test_a_name_of_few_characters_but_many_bytes_compiles_saves_and_loads(tmp_path):
    """ggml's 63-byte limit counts bytes: 25 CJK characters are 75 of them (the weight store cut
    the name by characters, so compile failed)."""
    name = "名" * 25
    m = pg.Sequential([layers.Dense(3, name=name)], input_shape=(3,))
    m.compile(optimizer="adam", loss="mse")
    x = np.random.default_rng(0).random((4, 3)).astype(np.float32)
    m.fit(x, x, epochs=1, verbose=0)            # the optimizer's slots carry the name too
    p = m.predict(x, verbose=0)
    m.save(tmp_path / "m.gguf")
    back = pg.load_model(tmp_path / "m.gguf")
    np.testing.assert_array_equal(back.predict(x, verbose=0), p)
    assert list(back.get_weights()) == list(m.get_weights())


def test_a_long_names_alias_never_takes_a_real_weights_name(tmp_path):
    """A long name is stored as w.<k>; a layer named "w" with a weight named "0" is w.0 itself."""
    class Shift(layers.Layer):
        def build(self, s):
            self.k = self.add_weight(shape=(3,), initializer="ones", name="0")

        def call(self, x):
            return x + self.k
    m = pg.Sequential([layers.Dense(3, name="L" * 70), Shift(name="w")], input_shape=(3,))
    assert "w.0" in m.get_weights()
    path = tmp_path / "m.gguf"
    m.save_weights(path)
    other = pg.Sequential([layers.Dense(3, name="L" * 70), Shift(name="w")], input_shape=(3,))
    other.set_weights({k: np.zeros_like(v) for k, v in other.get_weights().items()})
    other.load_weights(path)
    for k, v in m.get_weights().items():
        np.testing.assert_array_equal(other.get_weights()[k], v)


# --- torch tensors that require grad, and bfloat16 ones, wherever an array is taken ----------------

def test_torch_parameters_and_bfloat16_tensors_are_taken_as_arrays():
    """An nn.Parameter (requires grad) is what a state_dict transfer hands over; numpy refuses to
    read one without detach(), and has no bfloat16: both are taken as Keras-on-torch takes them."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    lin = torch.nn.Linear(4, 3)
    x = torch.randn(5, 4)
    want = lin(x).detach().numpy()
    d = layers.Dense(3)
    d.build((None, 4))
    d.set_weights([lin.weight.T, lin.bias])
    np.testing.assert_allclose(np.asarray(d(x.numpy())), want, rtol=1e-6, atol=1e-6)
    d.kernel.assign(lin.weight.T * 2)
    np.testing.assert_allclose(d.kernel.numpy(), 2 * lin.weight.detach().numpy().T, rtol=1e-6)
    m = pg.Sequential([pg.Input((4,)), layers.Dense(3)])
    m.set_weights([lin.weight.T, lin.bias])
    np.testing.assert_allclose(m.predict(x.requires_grad_(True), verbose=0), want, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(pg.Variable(lin.weight).numpy(), lin.weight.detach().numpy())
    np.testing.assert_array_equal(ops.convert_to_numpy(lin.weight), lin.weight.detach().numpy())
    np.testing.assert_allclose(np.asarray(ops.add(lin.weight, 1)), lin.weight.detach().numpy() + 1)
    with pg.GradientTape() as tape:
        out = m(x)                              # x requires grad: detached as it enters the tape
        loss = ops.mean(out)
    g = tape.gradient(loss, m.trainable_weights)
    assert all(v is not None and np.all(np.isfinite(np.asarray(v))) for v in g)
    xb = x.detach().to(torch.bfloat16)
    xf = xb.float().numpy()
    np.testing.assert_allclose(m.predict(xb, verbose=0), m.predict(xf, verbose=0), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(m(xb)), m.predict(xf, verbose=0), rtol=1e-6, atol=1e-6)
    assert ops.convert_to_tensor(xb).dtype == np.float32
    m.compile(optimizer="sgd", loss="mse")
    h = m.fit(xb, torch.zeros(5, 3, dtype=torch.bfloat16), epochs=1, verbose=0)
    assert np.isfinite(h.history["loss"][0])


# --- NaN stays NaN (ReLU, clamp, max pooling, the clipped cross-entropies), as in PyTorch -----------

@pytest.mark.parametrize("act", ["relu", "relu6", "hard_sigmoid", "hard_swish", "sigmoid", "gelu"])
def test_a_nan_input_row_gives_a_nan_output_row(act):
    """ReLU and clamp swallowed NaN (relu(NaN) was 0, relu6(NaN) 6): a diverged model looked fine.
    The other rows are untouched."""
    x = np.ones((3, 3), np.float32)
    x[1, 0] = np.nan
    m = pg.Sequential([pg.Input((3,)), layers.Dense(4, activation=act), layers.Dense(2)])
    p = m.predict(x, verbose=0)
    assert np.all(np.isnan(p[1]))
    assert np.all(np.isfinite(p[[0, 2]]))


def test_nan_passes_convolutions_pooling_and_batch_norm_with_relu():
    rng = np.random.default_rng(0)
    x = rng.random((3, 6, 6, 2)).astype(np.float32)
    x[1, 2, 3, 0] = np.nan
    inp = pg.Input((6, 6, 2))
    h = layers.Conv2D(3, 3, padding="same", activation="relu")(inp)
    h = layers.BatchNormalization()(h)
    h = layers.ReLU()(h)
    h = layers.MaxPooling2D()(h)
    out = layers.Dense(2)(layers.Flatten()(h))
    m = pg.Model(inp, out)
    p = m.predict(x, verbose=0)
    assert np.all(np.isnan(p[1])) and np.all(np.isfinite(p[[0, 2]]))
    m.compile(optimizer="sgd", loss="mse")
    h = m.fit(x, np.zeros((3, 2), np.float32), batch_size=3, epochs=3, verbose=0,
              callbacks=[pg.callbacks.TerminateOnNaN()])
    assert np.isnan(h.history["loss"][0]) and len(h.history["loss"]) == 1


@pytest.mark.parametrize("loss, y", [
    ("sparse_categorical_crossentropy", np.array([0, 1, 2])),
    ("categorical_crossentropy", np.eye(3, dtype=np.float32)),
    ("binary_crossentropy", np.ones((3, 3), np.float32)),
])
def test_a_probability_loss_of_nan_outputs_is_nan(loss, y):
    """The clip of probabilities turned NaN into 1 - 1e-7 (a loss of 1.2e-07: a perfect model);
    Keras's (torch's clamp) keeps NaN."""
    x = np.ones((3, 3), np.float32)
    x[0, 0] = np.nan
    m = pg.Sequential([pg.Input((3,)), layers.Dense(3)])
    m.compile(optimizer="sgd", loss=loss)
    assert np.isnan(m.evaluate(x, y, verbose=0))


def test_ops_on_nan_follow_numpy():
    a = np.array([np.nan, -1.0, 2.0, 7.0], np.float32)
    for got, want in [(ops.relu(a), np.where(np.isnan(a), np.nan, np.maximum(a, 0))),
                      (ops.clip(a, 0.0, 1.0), np.clip(a, 0.0, 1.0)),
                      (ops.relu6(a), np.clip(a, 0.0, 6.0))]:
        np.testing.assert_array_equal(np.asarray(got), want.astype(np.float32))
    inp = pg.Input((4,))
    m = pg.Model(inp, [layers.ReLU()(inp), layers.Lambda(lambda t: ops.clip(t, 0.0, 1.0))(inp)])
    r, c = m.predict(a[None], verbose=0)
    assert np.isnan(r[0, 0]) and np.isnan(c[0, 0])
    np.testing.assert_array_equal(r[0, 1:], [0.0, 2.0, 7.0])
    np.testing.assert_array_equal(c[0, 1:], [0.0, 1.0, 1.0])
