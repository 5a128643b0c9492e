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


# --- torch loaders and values: predict, epochs of an IterableDataset, class_weight, seeds ---------

def test_predict_takes_a_torch_loaders_x_y_and_x_only_batches():
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader, TensorDataset
    x, y = torch.randn(20, 4), torch.randn(20, 1)
    m = pg.Sequential([pg.Input((4,)), layers.Dense(1)])
    want = m.predict(x.numpy(), verbose=0)
    for ds in (TensorDataset(x, y), TensorDataset(x)):
        got = m.predict(DataLoader(ds, batch_size=8), verbose=0)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_a_loader_over_an_iterable_dataset_is_read_again_each_epoch():
    """A DataLoader can be iterated again (Keras's adapter does, each epoch); pyggml read it as a
    generator that ran out and stopped after the first epoch."""
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader, IterableDataset
    x, y = torch.randn(20, 4), torch.randn(20, 1)

    class Rows(IterableDataset):
        def __iter__(self):
            for i in range(20):
                yield x[i], y[i]
    m = pg.Sequential([pg.Input((4,)), layers.Dense(1)])
    m.compile(optimizer="sgd", loss="mse")
    h = m.fit(DataLoader(Rows(), batch_size=8), epochs=3, verbose=0)
    assert len(h.history["loss"]) == 3
    assert h.history["loss"][2] < h.history["loss"][0]


def test_class_weight_values_may_be_torch_or_numpy_scalars():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(0).random((12, 3)).astype(np.float32)
    y = np.arange(12) % 3
    results = []
    for cw in ({0: 1.0, 1: 2.0, 2: 0.5}, dict(enumerate(torch.tensor([1.0, 2.0, 0.5]))),
               dict(enumerate(np.array([1.0, 2.0, 0.5])))):
        m = pg.Sequential([pg.Input((3,)), layers.Dense(3)])
        m.set_weights({k: np.full_like(v, 0.1) for k, v in m.get_weights().items()})
        m.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
        results.append(m.fit(x, y, class_weight=cw, epochs=1, batch_size=12, shuffle=False, verbose=0).history["loss"])
    assert results[0] == results[1] == results[2]


def test_set_random_seed_seeds_torch_when_the_script_uses_it():
    torch = pytest.importorskip("torch")
    pg.utils.set_random_seed(7)
    a = torch.rand(3)
    pg.utils.set_random_seed(7)
    np.testing.assert_array_equal(torch.rand(3).numpy(), a.numpy())


def test_watching_a_torch_tensor_says_what_to_watch_instead():
    torch = pytest.importorskip("torch")
    with pg.GradientTape() as tape:
        with pytest.raises(TypeError, match=r"torch\.Tensor.*detach\(\)\.numpy\(\)"):
            tape.watch(torch.ones(3))


# --- Bidirectional and models of recurrent layers take Keras's lists ------------------------------

def _keras_lstm_lists(units, features, rng):
    g = 4 * units
    return [rng.standard_normal((features, g)).astype(np.float32) * 0.3,
            rng.standard_normal((units, g)).astype(np.float32) * 0.3, rng.standard_normal(g).astype(np.float32) * 0.1]


def test_bidirectional_gives_and_takes_keras_six_arrays():
    rng = np.random.default_rng(0)
    b = layers.Bidirectional(layers.LSTM(4))
    b.build((None, 5, 3))
    assert [np.shape(w) for w in b.get_weights()] == [(3, 16), (4, 16), (16,)] * 2
    fw, bw = _keras_lstm_lists(4, 3, rng), _keras_lstm_lists(4, 3, rng)
    b.set_weights(fw + bw)
    for got, want in zip(b.get_weights(), fw + bw):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    for got, want in zip(b.forward_layer.get_weights(), fw):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


def test_a_models_keras_list_counts_a_recurrent_layers_three_arrays():
    """A Keras model's get_weights() (an LSTM's kernel, recurrent kernel and one bias) sets a
    pyggml model of the same layers; the model's weights stay a dict of names (API.md)."""
    rng = np.random.default_rng(1)
    m = pg.Sequential([pg.Input((5, 3)), layers.Bidirectional(layers.LSTM(4)), layers.Dense(2)])
    w = m.get_weights()
    assert len(w) == 10 and all(isinstance(k, str) for k in w)
    assert len(w[:]) == len(w)            # (by index one array per weight: len and indexes agree)
    keras_list = _keras_lstm_lists(4, 3, rng) + _keras_lstm_lists(4, 3, rng) + \
        [rng.standard_normal((8, 2)).astype(np.float32), np.zeros(2, np.float32)]
    m.set_weights(keras_list)
    for got, want in zip(m.layers[0].get_weights() + m.layers[1].get_weights(), keras_list):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    m.set_weights(w)                       # its own list (one array per weight) still goes back
    m.set_weights(keras_list)
    # the forward LSTM computes with its kernel, recurrent kernel and bias (Keras's gate order i, f, c, o)
    x = rng.random((2, 5, 3)).astype(np.float32)
    k, rk, bias = keras_list[:3]
    h = c = np.zeros((2, 4), np.float32)
    sig = lambda v: 1 / (1 + np.exp(-v))                 # noqa: E731
    for t in range(5):
        z = x[:, t] @ k + h @ rk + bias
        i, f, g, o = sig(z[:, :4]), sig(z[:, 4:8]), np.tanh(z[:, 8:12]), sig(z[:, 12:])
        c = f * c + i * g
        h = o * np.tanh(c)
    fwd = pg.Model(m.inputs, m.layers[0].forward_layer(m.inputs[0]))
    np.testing.assert_allclose(fwd.predict(x, verbose=0), h, rtol=1e-5, atol=1e-6)
    import pickle
    assert set(pickle.loads(pickle.dumps(m.get_weights()))) == set(w)


def test_a_sequential_layers_weight_is_there_when_first_asked_for():
    """model.layers[0].bias on a Sequential built on an Input: Keras has it at once (a torch user's
    ``layer.weight.assign(lin.weight)``); pyggml builds the layer when a weight is asked for."""
    d = layers.Dense(2)
    model = pg.Sequential([pg.Input((3,)), d])
    assert d.bias.shape == (2,)
    assert d.weight.shape == (2, 3)
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        d.nothing_here
    lone = layers.Dense(2)
    with pytest.raises(AttributeError):
        lone.bias
    assert model.layers == [d]


# --- API.md: a freed Trainer's every method; ops' axes; free from a predict callback ---------------

def test_a_freed_trainers_step_count_and_optimizer_say_so():
    m = pg.Sequential([layers.Dense(2)], input_shape=3).compile(optimizer="adam", loss="mse")
    tr = pg.Trainer(m, batch_size=4)
    tr.step(np.ones((4, 3), np.float32), np.ones((4, 2), np.float32))
    assert tr.n_steps == 1
    tr.free()
    for what in ("n_steps", "optimizer", "lr"):
        with pytest.raises(pg.FreedError, match="has been freed"):
            getattr(tr, what)


@pytest.mark.parametrize("axes", [(0, 5), (5, 0), (0, -7), (1, 9)])
def test_transpose_refuses_an_axis_out_of_range(axes):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    with pytest.raises(ValueError, match="permutation"):
        ops.transpose(a, axes)
    np.testing.assert_array_equal(np.asarray(ops.transpose(a, (-1, 0))), a.T)


def test_freeing_the_model_from_a_predict_callback_says_it_was_freed():
    class Free(pg.callbacks.Callback):
        def on_predict_batch_end(self, batch, logs=None):
            self.model.free()
    m = pg.Sequential([layers.Dense(2)], input_shape=3).compile(loss="mse")
    with pytest.raises(pg.FreedError, match="has been freed"):
        m.predict(np.ones((20, 3), np.float32), batch_size=4, callbacks=[Free()], verbose=0)


# --- QLoRA's file: Keras's merged weight quantized again, the base and factors beside -------------

def test_a_qlora_file_holds_the_merged_weight_quantized_again(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(16, 4)).astype(np.float32)
    m = pg.Sequential([layers.Dense(6), layers.Dense(2)], input_shape=(4,))
    m.compile(optimizer="adam", loss="mse")
    m.quantize("int8")
    d = m.layers[0]
    d.enable_lora(2)
    a, b = rng.normal(size=(4, 2)).astype(np.float32), rng.normal(size=(2, 6)).astype(np.float32)
    d.lora_kernel_a.assign(a)
    d.lora_kernel_b.assign(b)
    q = np.asarray(d.kernel.numpy(), np.float64)                     # Keras's (in, out) integers
    scale = d.kernel_scale.numpy().astype(np.float64)
    merged = q / scale + (d.lora_alpha / d.lora_rank) * (a.astype(np.float64) @ b)
    np.testing.assert_allclose(d.merged_kernel(), merged, rtol=1e-5, atol=1e-5)
    new_scale = 127.0 / np.abs(merged).max(axis=0)
    want = np.clip(np.round(merged * new_scale), -127, 127)
    p = m.predict(x, verbose=0)
    path = tmp_path / "qlora.gguf"
    m.save(path)
    from pyggml.core import GGUFFile
    f = GGUFFile.read(str(path))
    try:
        names = f.tensor_names()
        stored = f.read_tensor("dense.weight")
        assert stored.dtype == np.int8 and f.read_tensor("dense.weight.lora_base").dtype == np.int8
        np.testing.assert_array_equal(stored.astype(np.float64), want.T)
        np.testing.assert_allclose(f.read_tensor("dense.kernel_scale"), new_scale, rtol=1e-6)
        assert "dense.kernel_scale.lora_base" in names
    finally:
        f.free()
    # the QLoRA model comes back exactly; a plain int8 model takes Keras's merged weight
    back = pg.load_model(path)
    np.testing.assert_array_equal(back.predict(x, verbose=0), p)
    plain = pg.Sequential([layers.Dense(6), layers.Dense(2)], input_shape=(4,))
    plain.compile(optimizer="adam", loss="mse")
    plain.quantize("int8")
    plain.load_weights(path)
    np.testing.assert_array_equal(plain.layers[0].kernel.numpy(), want)
    np.testing.assert_allclose(plain.layers[0].kernel_scale.numpy(), new_scale, rtol=1e-6)


# --- get_config: Keras 3.15's keys (API.md), and each config makes the layer again ------------------

_KERAS_315_KEYS = {
    "Dense": ['activation', 'bias_constraint', 'bias_initializer', 'bias_regularizer', 'dtype', 'kernel_constraint', 'kernel_initializer', 'kernel_regularizer', 'name', 'quantization_config', 'trainable', 'units', 'use_bias'],
    "Conv2D": ['activation', 'activity_regularizer', 'bias_constraint', 'bias_initializer', 'bias_regularizer', 'data_format', 'dilation_rate', 'dtype', 'filters', 'groups', 'kernel_constraint', 'kernel_initializer', 'kernel_regularizer', 'kernel_size', 'name', 'padding', 'strides', 'trainable', 'use_bias'],
    "Dropout": ['dtype', 'name', 'noise_shape', 'rate', 'seed', 'trainable'],
    "LSTM": ['activation', 'activity_regularizer', 'bias_constraint', 'bias_initializer', 'bias_regularizer', 'dropout', 'dtype', 'go_backwards', 'kernel_constraint', 'kernel_initializer', 'kernel_regularizer', 'name', 'recurrent_activation', 'recurrent_constraint', 'recurrent_dropout', 'recurrent_initializer', 'recurrent_regularizer', 'return_sequences', 'return_state', 'seed', 'stateful', 'trainable', 'unit_forget_bias', 'units', 'unroll', 'use_bias', 'zero_output_for_mask'],
    "GRU": ['activation', 'activity_regularizer', 'bias_constraint', 'bias_initializer', 'bias_regularizer', 'dropout', 'dtype', 'go_backwards', 'kernel_constraint', 'kernel_initializer', 'kernel_regularizer', 'name', 'recurrent_activation', 'recurrent_constraint', 'recurrent_dropout', 'recurrent_initializer', 'recurrent_regularizer', 'reset_after', 'return_sequences', 'return_state', 'seed', 'stateful', 'trainable', 'units', 'unroll', 'use_bias', 'zero_output_for_mask'],
    "SimpleRNN": ['activation', 'activity_regularizer', 'bias_constraint', 'bias_initializer', 'bias_regularizer', 'dropout', 'dtype', 'go_backwards', 'kernel_constraint', 'kernel_initializer', 'kernel_regularizer', 'name', 'recurrent_constraint', 'recurrent_dropout', 'recurrent_initializer', 'recurrent_regularizer', 'return_sequences', 'return_state', 'stateful', 'trainable', 'units', 'unroll', 'use_bias', 'zero_output_for_mask'],
    "BatchNormalization": ['axis', 'beta_constraint', 'beta_initializer', 'beta_regularizer', 'center', 'dtype', 'epsilon', 'gamma_constraint', 'gamma_initializer', 'gamma_regularizer', 'momentum', 'moving_mean_initializer', 'moving_variance_initializer', 'name', 'renorm', 'renorm_clipping', 'renorm_momentum', 'scale', 'synchronized', 'trainable'],
    "Embedding": ['activity_regularizer', 'dtype', 'embeddings_constraint', 'embeddings_initializer', 'embeddings_regularizer', 'input_dim', 'mask_zero', 'name', 'output_dim', 'quantization_config', 'trainable'],
    "Bidirectional": ['backward_layer', 'dtype', 'layer', 'merge_mode', 'name', 'trainable'],
    "MultiHeadAttention": ['activity_regularizer', 'attention_axes', 'bias_constraint', 'bias_initializer', 'bias_regularizer', 'dropout', 'dtype', 'kernel_constraint', 'kernel_initializer', 'kernel_regularizer', 'key_dim', 'name', 'num_heads', 'output_shape', 'seed', 'sliding_window', 'trainable', 'use_bias', 'use_gate', 'value_dim'],
    "Attention": ['dropout', 'dtype', 'name', 'score_mode', 'seed', 'trainable', 'use_scale'],
    "EinsumDense": ['activation', 'activity_regularizer', 'bias_axes', 'bias_constraint', 'bias_initializer', 'bias_regularizer', 'dtype', 'equation', 'kernel_constraint', 'kernel_initializer', 'kernel_regularizer', 'name', 'output_shape', 'quantization_config', 'trainable'],
    "SeparableConv2D": ['activation', 'activity_regularizer', 'bias_constraint', 'bias_initializer', 'bias_regularizer', 'data_format', 'depth_multiplier', 'depthwise_constraint', 'depthwise_initializer', 'depthwise_regularizer', 'dilation_rate', 'dtype', 'filters', 'kernel_size', 'name', 'padding', 'pointwise_constraint', 'pointwise_initializer', 'pointwise_regularizer', 'strides', 'trainable', 'use_bias'],
    "Conv2DTranspose": ['activation', 'activity_regularizer', 'bias_constraint', 'bias_initializer', 'bias_regularizer', 'data_format', 'dilation_rate', 'dtype', 'filters', 'kernel_constraint', 'kernel_initializer', 'kernel_regularizer', 'kernel_size', 'name', 'output_padding', 'padding', 'strides', 'trainable', 'use_bias'],
    "SpatialDropout1D": ['dtype', 'name', 'rate', 'seed'],
    "CategoryEncoding": ['dtype', 'name', 'num_tokens', 'output_mode', 'trainable'],
    "Discretization": ['bin_boundaries', 'dtype', 'epsilon', 'name', 'num_bins', 'output_mode', 'sparse'],
}

_MAKE = {
    "Dense": lambda: layers.Dense(3), "Conv2D": lambda: layers.Conv2D(2, 3), "Dropout": lambda: layers.Dropout(0.1),
    "LSTM": lambda: layers.LSTM(3), "GRU": lambda: layers.GRU(3), "SimpleRNN": lambda: layers.SimpleRNN(3),
    "BatchNormalization": lambda: layers.BatchNormalization(), "Embedding": lambda: layers.Embedding(5, 2),
    "Bidirectional": lambda: layers.Bidirectional(layers.LSTM(3)), "MultiHeadAttention": lambda: layers.MultiHeadAttention(2, 4),
    "Attention": lambda: layers.Attention(), "EinsumDense": lambda: layers.EinsumDense("ab,bc->ac", 3),
    "SeparableConv2D": lambda: layers.SeparableConv2D(2, 3), "Conv2DTranspose": lambda: layers.Conv2DTranspose(2, 3),
    "SpatialDropout1D": lambda: layers.SpatialDropout1D(0.1), "CategoryEncoding": lambda: layers.CategoryEncoding(3),
    "Discretization": lambda: layers.Discretization([0.5]),
}


@pytest.mark.parametrize("name", sorted(_MAKE))
def test_get_config_has_keras_keys_and_makes_the_layer_again(name):
    layer = _MAKE[name]()
    cfg = layer.get_config()
    assert sorted(cfg) == _KERAS_315_KEYS[name]
    again = type(layer).from_config(cfg)
    assert again.get_config() == cfg


def test_a_quantization_config_is_kept_in_the_config():
    d = layers.Dense(3, quantization_config=pg.quantizers.Int8QuantizationConfig())
    cfg = d.get_config()
    assert cfg["quantization_config"]["class_name"] == "Int8QuantizationConfig"
    assert isinstance(layers.Dense.from_config(cfg).quantization_config, pg.quantizers.Int8QuantizationConfig)
    with pytest.raises(TypeError, match="QuantizationConfig"):
        layers.Dense(3, quantization_config="int8")
    with pytest.raises(ValueError, match="renorm"):
        layers.BatchNormalization(renorm=True)


def test_python_operators_mix_results_with_torch_tensors():
    """``pred - y`` with a torch y, in a tape and on eager results, as Keras-on-torch's tensors mix."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    x, y = torch.randn(8, 4), torch.randn(8, 1)
    m = pg.Sequential([pg.Input((4,)), layers.Dense(1)])
    p = m.predict(x.numpy(), verbose=0)
    yn = y.numpy()
    with pg.GradientTape() as tape:
        pred = m(x)
        loss = ops.mean((pred - y) ** 2)
        other = ops.mean((y - pred) * torch.tensor(2.0)) + ops.sum(pred @ torch.ones(1, 2))
    np.testing.assert_allclose(float(loss), np.mean((p - yn) ** 2), rtol=1e-5)
    np.testing.assert_allclose(float(other), np.mean((yn - p) * 2) + 2 * p.sum(), rtol=1e-4, atol=1e-5)
    g = tape.gradient(loss, m.trainable_weights)
    assert all(v is not None for v in g)
    out = m(x)
    np.testing.assert_allclose(np.asarray(out - y), p - yn, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.asarray(y - out), yn - p, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.asarray(out * torch.tensor(2.0)), 2 * p, rtol=1e-6)


# --- a batch of no rows, and a batch_size beyond the data ------------------------------------------

def test_calling_on_a_batch_of_no_rows_gives_outputs_of_no_rows():
    """``model(x[mask])`` with no hits: Keras (and PyTorch) give a (0, units) result."""
    x = np.zeros((0, 4), np.float32)
    m = pg.Sequential([pg.Input((4,)), layers.Dense(2)])
    out = m(x)
    assert out.shape == (0, 2) and out.dtype == np.float32
    assert layers.Dense(3)(x).shape == (0, 3)
    assert layers.LSTM(3)(np.zeros((0, 5, 2), np.float32)).shape == (0, 3)
    inp = pg.Input((4,))
    two = pg.Model(inp, [layers.Dense(2)(inp), layers.Dense(1)(inp)])
    assert [o.shape for o in two(x)] == [(0, 2), (0, 1)]
    np.testing.assert_array_equal(m(np.ones((3, 4), np.float32)), m.predict(np.ones((3, 4), np.float32), verbose=0))


def test_a_batch_size_beyond_the_data_is_one_batch():
    x = np.random.default_rng(0).random((4, 3)).astype(np.float32)
    m = pg.Sequential([pg.Input((3,)), layers.Dense(1)])
    m.compile(optimizer="sgd", loss="mse")
    h = m.fit(x, np.ones((4, 1), np.float32), batch_size=10 ** 7, epochs=1, verbose=0)
    assert np.isfinite(h.history["loss"][0])
    np.testing.assert_allclose(m.predict(x, batch_size=10 ** 7, verbose=0), m.predict(x, verbose=0), rtol=1e-6)


def test_integers_beyond_int32_go_in_as_floats_not_wrapped():
    """An int64 2**40 went through ggml's int32 as 0 (ops.add gave [1]): such arrays go in as
    float32 now (int64 timestamps into a Dense, a mean, a division), as Keras converts them."""
    np.testing.assert_array_equal(np.asarray(ops.add(np.array([5, -7], np.int64), 1)), [6, -6])
    np.testing.assert_allclose(np.asarray(ops.add(np.array([2 ** 40], np.int64), 1)), [2.0 ** 40], rtol=1e-7)
    ts = np.array([1_700_000_000_000, 1_700_000_500_000], np.int64)
    np.testing.assert_allclose(np.asarray(ops.divide(ts, 1000)), ts / 1000, rtol=1e-6)
    np.testing.assert_allclose(float(ops.mean(ts)), ts.mean(), rtol=1e-6)
    d = layers.Dense(1, kernel_initializer="ones")
    np.testing.assert_allclose(np.asarray(d(ts[:, None])), ts[:, None].astype(np.float64), rtol=1e-6)


def test_ops_on_torch_tensors_keep_the_dtypes_of_the_same_numpy_arrays():
    torch = pytest.importorskip("torch")
    tb, nb = torch.tensor([True, False, True]), np.array([True, False, True])
    for name in ("sum", "max", "cumsum", "logical_not"):
        got, want = getattr(ops, name)(tb), getattr(ops, name)(nb)
        assert np.asarray(got).dtype == np.asarray(want).dtype, name
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    ti = torch.tensor([1, 2, 3])
    assert ops.convert_to_tensor(ti).dtype == ops.convert_to_tensor(ti.numpy()).dtype


def test_initializers_take_keras_315_axes_and_configs():
    """Keras 3.15's GlorotUniform config holds input_axes and output_axes (None or the axes whose
    sizes make the fans); such configs load, and the axes set the fans."""
    g = pg.initializers.GlorotUniform(seed=1, input_axes=[0], output_axes=[1, 2])
    assert g.get_config() == {"seed": 1, "input_axes": [0], "output_axes": [1, 2]}
    w = np.asarray(g((400, 10, 20)))
    limit = np.sqrt(6.0 / (400 + 200))
    assert np.abs(w).max() <= limit and np.abs(w).max() > 0.9 * limit
    cfg = {"class_name": "GlorotUniform", "config": {"seed": None, "input_axes": None, "output_axes": None},
           "module": "keras.initializers", "registered_name": None}
    assert isinstance(pg.initializers.deserialize(cfg), pg.initializers.GlorotUniform)
    lstm = layers.LSTM.from_config({"units": 3, "kernel_initializer": cfg, "name": "l"})
    assert lstm(np.ones((1, 2, 4), np.float32)).shape == (1, 3)


def test_top_k_accuracy_ranks_nan_above_every_number():
    """Keras-on-torch's topk puts a NaN prediction first: its row is a miss (pyggml counted it in)."""
    y = np.eye(3, dtype=np.float32)
    p = np.array([[0.1, 0.8, 0.1], [np.nan, 0.2, 0.1], [0.1, 0.2, 0.7]], np.float32)
    for m in (pg.metrics.TopKCategoricalAccuracy(k=1), pg.metrics.SparseTopKCategoricalAccuracy(k=1)):
        m.update_state(y if "Sparse" not in type(m).__name__ else np.arange(3), p)
        assert float(m.result()) == pytest.approx(1 / 3)
    np.testing.assert_array_equal(np.asarray(ops.in_top_k(np.arange(3), p, 1)), [False, False, True])
    pi, yi = pg.Input((3,)), pg.Input((3,))
    hit = layers.Lambda(lambda ts: ops.in_top_k(ops.argmax(ts[1], axis=-1), ts[0], 1))([pi, yi])
    g = pg.Model([pi, yi], hit)
    np.testing.assert_array_equal(np.asarray(g.predict([p, y], verbose=0), np.float32).reshape(-1), [0, 0, 1])


def test_a_seeded_dropout_draws_its_own_masks():
    """Keras's Dropout(seed=s): two layers of one seed drop the same values, each call draws anew,
    and a fresh process draws what the last did (pyggml drew from its global generator)."""
    x = np.ones((4, 8), np.float32)
    a, b = layers.Dropout(0.5, seed=3), layers.Dropout(0.5, seed=3)
    ma, mb = np.asarray(a(x, training=True)), np.asarray(b(x, training=True))
    np.testing.assert_array_equal(ma, mb)
    assert not np.array_equal(np.asarray(a(x, training=True)), ma)
    assert set(np.unique(ma)) <= {0.0, 2.0}
    c = layers.Dropout(0.5, seed=4)
    assert not np.array_equal(np.asarray(c(x, training=True)), ma)
    import subprocess
    import sys
    code = ("import numpy as np, pyggml as pg; d = pg.layers.Dropout(0.5, seed=3); "
            "print(np.asarray(d(np.ones((4, 8), np.float32), training=True)).astype(int).tolist())")
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
            for _ in range(2)]
    assert runs[0] == runs[1] == str((ma.astype(int)).tolist()) + "\n"


def test_a_weight_is_an_attribute_by_its_name_and_takes_torch_parameters():
    """An LSTM's weights are named as PyTorch's (``weight_ih``); they are attributes by that name,
    and assign takes an nn.Parameter: a torch LSTM's weights give torch's outputs."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    lstm = layers.LSTM(4)
    m = pg.Sequential([pg.Input((5, 3)), lstm])
    t = torch.nn.LSTM(3, 4, batch_first=True)
    for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
        getattr(lstm, name).assign(getattr(t, name + "_l0"))
    x = np.random.default_rng(0).random((2, 5, 3)).astype(np.float32)
    want = t(torch.tensor(x))[0][:, -1].detach().numpy()
    np.testing.assert_allclose(m.predict(x, verbose=0), want, rtol=1e-5, atol=1e-6)
    v = pg.Variable(np.zeros(3, np.float32))
    v.assign_add(torch.ones(3, requires_grad=True))
    np.testing.assert_array_equal(v.numpy(), [1.0, 1.0, 1.0])
    with pytest.raises(AttributeError):
        lstm.weight_xx


# --- a NaN-parity probe and a second review: reductions, norms, powers, where, AUC, ints ------------

def test_max_min_reductions_and_pooling_keep_nan():
    x = np.array([[np.nan, 1.0, 2.0], [3.0, np.nan, 0.0]], np.float32)
    np.testing.assert_array_equal(np.asarray(ops.max(x, axis=1)), [np.nan, np.nan])
    np.testing.assert_array_equal(np.asarray(ops.max(x, axis=0)), [np.nan, np.nan, 2.0])
    assert np.isnan(float(ops.max(x))) and np.isnan(float(ops.min(x)))
    np.testing.assert_array_equal(np.asarray(ops.min(np.array([[5.0, 1.0, 2.0]], np.float32), axis=1)), [1.0])
    p = np.array([np.nan, 1.0, 2.0, 0.0], np.float32).reshape(1, 2, 2, 1)
    assert np.isnan(np.asarray(ops.max_pool(p, 2)).ravel()[0])
    for act in (pg.activations.leaky_relu, layers.LeakyReLU(0.2), layers.ReLU(negative_slope=0.1)):
        out = np.asarray(act(np.array([np.nan, -2.0, 3.0], np.float32)))
        assert np.isnan(out[0]) and out[2] == 3.0 and out[1] < 0


def test_norm_follows_torch_linalg_norm():
    a = np.array([[0.1, -3.0, 2.0, 4.0, -1.5], [1.0, 2.0, -2.0, 0.0, 5.0]], np.float32)
    cases = [(np.inf, 1), (np.inf, None), (-np.inf, 1), (1, None), (1, 1), (None, None), ("fro", None),
             (2, None), ("nuc", None), (0, 1), (-1, None), (3, 1), (np.inf, (0, 1))]
    for o, ax in cases:
        np.testing.assert_allclose(np.asarray(ops.norm(a, ord=o, axis=ax)), np.linalg.norm(a, ord=o, axis=ax),
                                   rtol=1e-5, err_msg=f"ord={o} axis={ax}")
    inp = pg.Input((5,))
    for o in (np.inf, -np.inf, 1, 0, 3, 2):
        m = pg.Model(inp, layers.Lambda(lambda t, o=o: ops.norm(t, ord=o, axis=-1))(inp))
        np.testing.assert_allclose(m.predict(a, verbose=0), np.linalg.norm(a, ord=o, axis=-1), rtol=1e-5)


def test_power_of_negative_bases_by_tensor_exponents():
    a = np.array([-2.0, -2.0, 3.0, 0.5, -0.5, 0.0, -np.inf], np.float32)
    b = np.array([2.0, 3.0, 2.5, 2.0, 0.5, 2.0, 1.0], np.float32)
    with np.errstate(invalid="ignore"):
        want = np.power(a, b)
    np.testing.assert_allclose(np.asarray(ops.power(a, b)), want, rtol=1e-5)
    v = pg.Variable(a[:4])
    with pg.GradientTape() as t:
        loss = ops.sum(ops.power(v, b[:4]))
    np.testing.assert_allclose(np.asarray(t.gradient(loss, [v])[0]), b[:4] * np.power(a[:4], b[:4] - 1), rtol=1e-5)


def test_where_keeps_finite_extremes_and_reads_nan_as_true():
    big = np.finfo(np.float32).max
    x = np.array([[1.0, 2.0, 3.0]], np.float32)
    masked = np.asarray(ops.where(np.zeros((1, 3)), x, -big))
    np.testing.assert_array_equal(masked, [[-big] * 3])
    np.testing.assert_allclose(np.asarray(ops.softmax(masked)), [[1 / 3] * 3], rtol=1e-6)
    assert float(ops.maximum(np.float32(big), 0.0)) == big
    assert float(ops.where(np.float32(np.nan), 1.0, 2.0)) == 1.0
    inf = np.array([np.inf, -np.inf, 1.0, np.nan], np.float32)
    np.testing.assert_array_equal(np.asarray(ops.where(np.array([1, 1, 0, 0]), inf, 0.0)), [np.inf, -np.inf, 0, 0])
    np.testing.assert_array_equal(np.asarray(ops.minimum(inf, 0.0)), [0, -np.inf, 0, np.nan])


def test_auc_counts_predictions_below_zero_as_zero():
    """Keras's AUC over its evenly spread thresholds clips predictions to [0, 1]."""
    yt = np.array([[0, 1, 0], [1, 0, 0], [0, 0, 1], [0, 1, 0]], np.float32)
    got = []
    for v in (0.0, -1.0, -np.inf):
        p = np.array([[0.2, 0.7, 0.1], [0.5, 0.3, 0.2], [v, 0.1, 0.8], [0.3, 0.3, 0.4]], np.float32)
        m = pg.metrics.AUC()
        m.update_state(yt, p)
        got.append(float(m.result()))
    assert got == pytest.approx([0.9375] * 3)


def test_in_top_k_with_infinite_scores():
    p = np.array([[0.2, -np.inf, 0.1], [np.inf, 0.5, 0.1], [np.inf, 0.2, 0.1], [-np.inf, 0.1, 0.2]], np.float32)
    t = np.array([0, 1, 0, 0])
    want = [True, False, True, False]
    np.testing.assert_array_equal(np.asarray(ops.in_top_k(t, p, 1)), want)
    pi, yi = pg.Input((3,)), pg.Input((3,))
    g = pg.Model([pi, yi], layers.Lambda(lambda ts: ops.in_top_k(ops.argmax(ts[1], axis=-1), ts[0], 1))([pi, yi]))
    np.testing.assert_array_equal(np.asarray(g.predict([p, np.eye(3, dtype=np.float32)[t]], verbose=0)).reshape(-1),
                                  np.array(want, np.float32))


def test_integer_results_beyond_int32_are_numpy_exact():
    big = np.array([2 ** 40, 2 ** 40 + 1, 5], np.int64)
    assert int(ops.sum(big)) == int(big.sum()) and ops.sum(big).dtype == np.int64
    assert int(ops.max(big)) == 2 ** 40 + 1 and int(ops.argmax(big)) == 1
    np.testing.assert_array_equal(np.asarray(ops.add(np.array([1], np.int64), 2 ** 40 + 1)), [2 ** 40 + 2])
    np.testing.assert_array_equal(np.asarray(ops.add(np.array([3_000_000_000], np.uint32), 0)), [3_000_000_000])


def test_glu_called_directly_halves_its_axis():
    out = pg.activations.glu(np.ones((2, 4), np.float32))
    assert out.shape == (2, 2)
    np.testing.assert_allclose(np.asarray(out), np.full((2, 2), 1 / (1 + np.exp(-1.0))), rtol=1e-6)


def test_a_copy_of_a_built_layer_holds_its_weights():
    """A layer built but never read draws its weights lazily: a copy (deepcopy, pickle) drew its
    own, so the copy computed otherwise."""
    import copy
    import pickle
    x = np.ones((2, 3), np.float32)
    for make in (lambda: layers.Dense(4), lambda: layers.LSTM(2)):
        layer = make()
        layer.build((None, 3) if isinstance(layer, layers.Dense) else (None, 4, 3))
        xin = x if isinstance(layer, layers.Dense) else np.ones((2, 4, 3), np.float32)
        for twin in (copy.deepcopy(layer), pickle.loads(pickle.dumps(layer))):
            np.testing.assert_array_equal(np.asarray(twin(xin)), np.asarray(layer(xin)))


def test_a_pickled_recurrent_weight_list_set_by_name_reads_the_new_values():
    import pickle
    lstm = layers.LSTM(2)
    lstm.build((None, 4, 3))
    w = pickle.loads(pickle.dumps(lstm.get_weights()))
    assert len(w) == 3
    w["weight_ih"] = np.ones_like(w["weight_ih"])
    lstm.set_weights(list(w) if len(w) == 3 else w)
    np.testing.assert_array_equal(lstm.weight_ih.numpy(), np.ones_like(w["weight_ih"]))


def test_gru_without_reset_after_or_bias_takes_keras_gate_order():
    """A GRU whose Keras list has one array per weight (reset_after=False, use_bias=False) read
    Keras's gate blocks (z, r, h) as pyggml's (r, z, n): silently wrong outputs."""
    rng = np.random.default_rng(0)
    u = 4
    sig = lambda v: 1 / (1 + np.exp(-v))          # noqa: E731
    x = rng.normal(size=(2, 5, 3)).astype(np.float32)
    W, U = rng.normal(size=(3, 12)).astype(np.float32), rng.normal(size=(4, 12)).astype(np.float32)
    for kw, b in ((dict(reset_after=False), rng.normal(size=(12,)).astype(np.float32)), (dict(use_bias=False), None)):
        h = np.zeros((2, u), np.float32)
        for t in range(5):
            xp = x[:, t] @ W + (0 if b is None else b)
            hp = h @ U
            z, r = sig(xp[:, :u] + hp[:, :u]), sig(xp[:, u:2 * u] + hp[:, u:2 * u])
            # (reset_after=False: the reset gate before the product; use_bias=False keeps Keras's
            # default reset_after=True: after it)
            n = np.tanh(xp[:, 2 * u:] + ((r * h) @ U[:, 2 * u:] if b is not None else r * hp[:, 2 * u:]))
            h = z * h + (1 - z) * n
        ws = [W, U] + ([] if b is None else [b])
        g = layers.GRU(u, **kw)
        g.build((None, 5, 3))
        g.set_weights(ws)
        np.testing.assert_allclose(np.asarray(g(x)), h, rtol=1e-5, atol=1e-6)
        for got, want in zip(g.get_weights(), ws):
            np.testing.assert_allclose(got, want, rtol=1e-6)
        m = pg.Sequential([pg.Input((5, 3)), layers.GRU(u, **kw)])
        m.set_weights(ws)
        np.testing.assert_allclose(m.predict(x, verbose=0), h, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(m.get_weights()[0], W, rtol=1e-6)
