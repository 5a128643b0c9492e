"""Keras names that keras-io scripts use and pyggml lacked: the activations by name
(checked against PyTorch, value and gradient), RMSNormalization, the fit caps of
keras.config, steps_per_epoch on arrays, to_json / model_from_json / save_model,
backend.is_keras_tensor and the top-level base classes."""

import numpy as np
import pytest

import pyggml as pg
from pyggml import layers, ops

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")

_TORCH = {
    "selu": lambda t: F.selu(t), "softplus": lambda t: F.softplus(t), "softsign": lambda t: F.softsign(t),
    "exponential": lambda t: torch.exp(t), "relu6": lambda t: F.relu6(t),
    "hard_sigmoid": lambda t: torch.clamp(t / 6 + 0.5, 0, 1), "hard_swish": lambda t: t * torch.clamp(t / 6 + 0.5, 0, 1),
    "mish": lambda t: F.mish(t), "celu": lambda t: F.celu(t), "log_sigmoid": lambda t: F.logsigmoid(t),
    "hard_tanh": lambda t: F.hardtanh(t), "tanh_shrink": lambda t: F.tanhshrink(t),
}


@needs_torch
@pytest.mark.parametrize("name", sorted(_TORCH))
def test_activation_by_name_trains_as_pytorch_computes_it(name):
    pg.set_seed(0)
    d = layers.Dense(3, activation=name)
    m = pg.Sequential([pg.Input(shape=(4,)), d])
    x = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32) * 2
    with pg.GradientTape() as tape:
        out = m(x)
        loss = ops.sum(ops.square(out))
    gw = tape.gradient(loss, d.trainable_variables[0])
    w = torch.tensor(d.trainable_variables[0].numpy(), requires_grad=True)
    b = torch.tensor(d.trainable_variables[1].numpy())
    ref = _TORCH[name](torch.tensor(x) @ w.T + b)
    (ref ** 2).sum().backward()
    np.testing.assert_allclose(np.asarray(out), ref.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gw, w.grad.numpy(), rtol=1e-4, atol=1e-5)
    assert pg.activations.get(name) is getattr(pg.activations, name)
    assert pg.activations.serialize(getattr(pg.activations, name)) in (name, "hard_silu")


def test_activation_names_save_and_load(tmp_path):
    m = pg.Sequential([pg.Input(shape=(3,)), layers.Dense(4, activation="selu"), layers.Dense(2, activation="softplus")])
    x = np.random.default_rng(1).normal(size=(4, 3)).astype(np.float32)
    m.save(str(tmp_path / "m.gguf"))
    np.testing.assert_array_equal(pg.load_model(str(tmp_path / "m.gguf")).predict(x, verbose=0), m.predict(x, verbose=0))
    with pytest.raises(ValueError, match="unknown activation"):
        layers.Dense(2, activation="no_such")


@needs_torch
def test_rms_normalization_matches_pytorch_value_and_gradient():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4, 5, 6)).astype(np.float32)
    ln = layers.RMSNormalization(axis=[-2, -1], epsilon=1e-5)
    m = pg.Sequential([pg.Input(shape=(5, 6)), ln])
    with pg.GradientTape() as tape:
        out = m(x)
        loss = ops.sum(ops.square(out) * np.arange(30, dtype=np.float32).reshape(1, 5, 6))
    scale = ln.scale
    gs = tape.gradient(loss, scale)
    xt = torch.tensor(x, requires_grad=True)
    st = torch.tensor(scale.numpy(), requires_grad=True)
    ref = F.rms_norm(xt, (5, 6), st, 1e-5)
    (ref ** 2 * torch.arange(30, dtype=torch.float32).reshape(1, 5, 6)).sum().backward()
    np.testing.assert_allclose(np.asarray(out), ref.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gs, st.grad.numpy(), rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="batch axis"):
        layers.RMSNormalization(axis=0)(x)


def test_fit_caps_of_keras_config_and_steps_per_epoch_on_arrays():
    inp = pg.Input(shape=(3,))
    m = pg.Model(inp, layers.Dense(2)(inp))
    m.compile(optimizer="sgd", loss="mse")
    x, y = np.ones((64, 3), np.float32), np.ones((64, 2), np.float32)
    seen = []

    class Count(pg.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            seen.append(batch)
    m.fit(x, y, batch_size=8, epochs=2, steps_per_epoch=3, verbose=0, callbacks=[Count()])
    assert seen == [0, 1, 2, 0, 1, 2]
    try:
        pg.config.set_max_epochs(2)
        pg.config.set_max_steps_per_epoch(1)
        assert pg.config.max_epochs() == 2
        seen.clear()
        h = m.fit(x, y, batch_size=8, epochs=10, verbose=0, callbacks=[Count()])
        assert len(h.history["loss"]) == 2 and seen == [0, 0]
    finally:
        pg.config.set_max_epochs(None)
        pg.config.set_max_steps_per_epoch(None)
    with pytest.raises(ValueError, match="positive int"):
        pg.config.set_max_epochs(0)


def test_to_json_model_from_json_and_save_model(tmp_path):
    inp = pg.Input(shape=(3,))
    f = pg.Model(inp, layers.Dense(2, activation="tanh")(layers.Dense(4)(inp)))
    s = pg.Sequential([pg.Input(shape=(3,)), layers.Dense(2)])
    for m in (f, s):
        again = pg.models.model_from_json(m.to_json())
        assert type(again) is type(m) and again.count_params() == m.count_params()
        assert [type(l).__name__ for l in again.layers] == [type(l).__name__ for l in m.layers]
    with pytest.raises(ValueError, match="to_json"):
        pg.models.model_from_json('{"a": 1}')
    with pytest.raises(ValueError, match="JSON"):
        pg.models.model_from_json("not json")
    path = str(tmp_path / "f.gguf")
    pg.models.save_model(f, path)
    with pytest.raises(FileExistsError):
        pg.models.save_model(f, path, overwrite=False)
    x = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(pg.models.load_model(path).predict(x, verbose=0), f.predict(x, verbose=0))


def test_is_keras_tensor_and_top_level_base_classes():
    inp = pg.Input(shape=(2,))
    assert pg.backend.is_keras_tensor(inp) and pg.backend.is_keras_tensor(layers.Dense(1)(inp))
    assert not pg.backend.is_keras_tensor(np.ones(2))
    assert pg.Layer is layers.Layer and pg.Loss is pg.losses.Loss and pg.Metric is pg.metrics.Metric
    assert pg.Optimizer is pg.optimizers.Optimizer and issubclass(pg.optimizers.Adam, pg.Optimizer)
    assert pg.Initializer is pg.initializers.Initializer and pg.Regularizer is pg.regularizers.Regularizer
    assert pg.Constraint is pg.constraints.Constraint


def test_model_called_on_arrays_with_training_true_is_one_eager_training_pass():
    # Monte Carlo dropout (keras-io's uncertainty examples): model(x, training=True) samples
    pg.set_seed(0)
    m = pg.Sequential([pg.Input(shape=(8,)), layers.Dense(32, activation="relu"), layers.Dropout(0.5),
                       layers.Dense(1)])
    x = np.ones((4, 8), np.float32)
    plain = m(x)
    np.testing.assert_array_equal(m(x, training=False), plain)
    draws = np.stack([m(x, training=True) for _ in range(40)])
    assert draws.shape == (40, 4, 1) and draws.std(0).mean() > 0
    np.testing.assert_allclose(draws.mean(0), plain, atol=0.6 * np.abs(plain).max() + 0.1)
    # BatchNormalization moves its statistics, as Keras's eager call in training mode
    bn = layers.BatchNormalization(momentum=0.5)
    b = pg.Sequential([pg.Input(shape=(3,)), bn])
    data = np.arange(12, dtype=np.float32).reshape(4, 3)
    b(data, training=True)
    np.testing.assert_allclose(bn.variables[2].numpy(), 0.5 * data.mean(0), rtol=1e-6)
    b(data)
    np.testing.assert_allclose(bn.variables[2].numpy(), 0.5 * data.mean(0), rtol=1e-6)
    with pytest.raises(TypeError, match="its inputs and training= only"):
        m(x, mask=None)                  # (a subclassed model's own call takes what it names)


def test_keras_weight_names_of_normalization_and_embedding_layers():
    """Keras's attribute names for weights whose layout is Keras's too: the same Variables."""
    L = pg.layers
    emb, ln, bn, gn = L.Embedding(10, 4), L.LayerNormalization(), L.BatchNormalization(), L.GroupNormalization(2)
    m = pg.Sequential([pg.Input(shape=(3,), dtype="int32"), emb, ln, bn, gn])
    m.compile(loss="mse")
    assert emb.embeddings is emb.weight and emb.embeddings.shape == (10, 4)
    assert (ln.gamma, ln.beta) == (ln.weight, ln.bias) and (gn.gamma, gn.beta) == (gn.weight, gn.bias)
    assert (bn.gamma, bn.beta, bn.moving_mean, bn.moving_variance) == \
        (bn.weight, bn.bias, bn.running_mean, bn.running_var)
    bn.moving_variance.assign(np.full(4, 2.0))
    np.testing.assert_array_equal(bn.get_weights()["running_var"], np.full(4, 2.0, np.float32))
    assert L.BatchNormalization(scale=False, center=False).built is False


def test_default_layer_names_are_keras_s_for_every_nd_class():
    import pyggml as pg
    L = pg.layers
    inp = pg.Input((6, 6, 2))
    model = pg.Model(inp, L.Conv2DTranspose(2, 3)(L.SpatialDropout2D(0.1)(L.ZeroPadding2D(1)(inp))))
    assert [layer.name for layer in model.layers[1:]] == ["zero_padding2d", "spatial_dropout2d", "conv2d_transpose"]
    from pyggml.layers.layer import snake_case
    assert [snake_case(c) for c in ("ZeroPadding2D", "SpatialDropout2D", "ConvLSTM1D", "Conv2DTranspose",
                                     "GlobalMaxPooling1D", "LSTM", "GRU", "PReLU", "Conv2D")] == \
        ["zero_padding2d", "spatial_dropout2d", "conv_lstm1d", "conv2d_transpose", "global_max_pooling1d",
         "lstm", "gru", "prelu", "conv2d"]
