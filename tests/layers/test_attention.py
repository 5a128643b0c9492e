"""MultiHeadAttention through the layer harness, its calling forms, its
PyTorch-like weights (checked against torch.nn.MultiheadAttention when torch
is installed) and bad inputs."""

import math

import numpy as np
import pytest

import pyggml as pg
from harness import ACTIVATIONS, LayerCase, harness_tests

MHA = pg.layers.MultiHeadAttention


def mha_ref(num_heads, key_dim, value_dim=None):
    value_dim = value_dim or key_dim

    def ref(hs, w, training):
        q = hs[0]
        v = hs[1] if len(hs) > 1 else q
        k = hs[2] if len(hs) > 2 else v

        def linear(x, name):
            return x @ w[f"{name}.weight"].T + w.get(f"{name}.bias", 0.0)
        n, tq, tv = q.shape[0], q.shape[1], v.shape[1]
        qh = linear(q, "q_proj").reshape(n, tq, num_heads, key_dim)
        kh = linear(k, "k_proj").reshape(n, tv, num_heads, key_dim)
        vh = linear(v, "v_proj").reshape(n, tv, num_heads, value_dim)
        scores = np.einsum("nihd,njhd->nhij", qh, kh) / math.sqrt(key_dim)
        probs = ACTIVATIONS["softmax"](scores)
        att = np.einsum("nhij,njhd->nihd", probs, vh).reshape(n, tq, num_heads * value_dim)
        return linear(att, "out_proj")
    return ref


# softmax over the keys ignores k_proj.bias (it shifts a query's scores equally)
_KB = {"zero_gradient": ("k_proj.bias",)}

CASES = [
    LayerCase("self", lambda: MHA(2, 3), [(4, 5)], mha_ref(2, 3), extra=_KB),
    LayerCase("self_one_head_nobias", lambda: MHA(1, 4, use_bias=False), [(3, 2)], mha_ref(1, 4)),
    LayerCase("cross", lambda: MHA(2, 2), [(3, 4), (5, 6)], mha_ref(2, 2), extra=_KB),
    LayerCase("query_value_key", lambda: MHA(3, 2, value_dim=3, output_shape=7), [(3, 4), (5, 6), (5, 2)],
              mha_ref(3, 2, 3), extra=_KB),
    LayerCase("keras_positional_call", lambda: MHA(2, 2), [(2, 3), (4, 3)], mha_ref(2, 2),
              call=lambda layer, hs: layer(hs[0], hs[1]), extra=_KB),
    LayerCase("same_node_twice", lambda: MHA(2, 2), [(3, 4)], mha_ref(2, 2), sequential=False,
              call=lambda layer, hs: layer([hs[0], hs[0]]), extra=_KB),
]


# the harness's four checks over every case (forward, gradient, config, a training step)
test_forward, test_gradient, test_config, test_training_step = harness_tests(CASES)


def test_weight_names_and_shapes():
    q, v = pg.Input((3, 4)), pg.Input((5, 6))
    k = pg.Input((5, 2))
    out = MHA(3, 2, value_dim=5, output_shape=7)(q, v, k)
    assert out.shape == (None, 3, 7)              # Keras's shape: the batch first, as None
    m = pg.Model([q, v, k], out).compile(loss="mse", seed=0)
    shapes = {n: a.shape for n, a in m.get_weights().items()}
    assert shapes == {
        "multi_head_attention.q_proj.weight": (6, 4), "multi_head_attention.q_proj.bias": (6,),
        "multi_head_attention.k_proj.weight": (6, 2), "multi_head_attention.k_proj.bias": (6,),
        "multi_head_attention.v_proj.weight": (15, 6), "multi_head_attention.v_proj.bias": (15,),
        "multi_head_attention.out_proj.weight": (7, 15), "multi_head_attention.out_proj.bias": (7,),
    }
    w = m.get_weights()
    assert not np.any(w["multi_head_attention.q_proj.bias"])              # zero biases
    limit = np.sqrt(6.0 / (4 + 6))                                          # glorot-uniform (out, in)
    assert np.all(np.abs(w["multi_head_attention.q_proj.weight"]) <= limit)
    m.free()


def test_matches_torch_multihead_attention():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    e, heads = 8, 4
    q_in, kv_in = pg.Input((5, e)), pg.Input((7, e))
    m = pg.Model([q_in, kv_in], MHA(heads, e // heads)([q_in, kv_in])).compile(loss="mse", seed=1)
    w = {k: rng.normal(scale=0.4, size=a.shape).astype(np.float32) for k, a in m.get_weights().items()}
    m.set_weights(w)
    p = "multi_head_attention."
    tm = torch.nn.MultiheadAttention(e, heads, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        tm.in_proj_weight.copy_(torch.tensor(np.concatenate([w[p + f"{n}_proj.weight"] for n in "qkv"])))
        tm.in_proj_bias.copy_(torch.tensor(np.concatenate([w[p + f"{n}_proj.bias"] for n in "qkv"])))
        tm.out_proj.weight.copy_(torch.tensor(w[p + "out_proj.weight"]))
        tm.out_proj.bias.copy_(torch.tensor(w[p + "out_proj.bias"]))
    q = rng.normal(size=(6, 5, e)).astype(np.float32)
    kv = rng.normal(size=(6, 7, e)).astype(np.float32)
    tq, tkv = torch.tensor(q, dtype=torch.float64), torch.tensor(kv, dtype=torch.float64)
    ref, _ = tm(tq, tkv, tkv)
    got = m.predict([q, kv])
    np.testing.assert_allclose(got, ref.detach().numpy(), rtol=1e-4, atol=1e-5)
    m.free()


def test_dropout_acts_only_while_training():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(4, 3, 4)).astype(np.float32)
    inp = pg.Input((3, 4))
    m = pg.Model(inp, MHA(2, 2, dropout=0.5)(inp)).compile(optimizer="sgd", loss="mse", seed=0)
    w = m.get_weights()
    ref = mha_ref(2, 2)([x.astype(np.float64)], {k.split(".", 1)[1]: v.astype(np.float64) for k, v in w.items()},
                        False)
    np.testing.assert_allclose(m.predict(x), ref, rtol=1e-4, atol=1e-5)      # inference: no dropout
    y = np.zeros((4, 3, 4))
    ev = m.evaluate(x, y, batch_size=4, return_dict=True)["loss"]
    train_losses = [m.fit(x, y, epochs=1, batch_size=4, shuffle=False, verbose=0).history["loss"][0]
                    for _ in range(3)]
    assert all(np.isfinite(train_losses))
    assert any(abs(t - ev) > 1e-4 * ev for t in train_losses)              # masks change the training loss
    m.free()


def test_a_transformer_block_learns():
    # attention + residual + layer norm + position-wise Dense on (steps, features):
    # is the first token's feature larger than the mean of the others?
    rng = np.random.default_rng(0)
    x = rng.normal(size=(96, 4, 3)).astype(np.float32)
    y = (x[:, 0, 0] > x[:, 1:, 0].mean(axis=1)).astype(np.float32)[:, None]
    pg.set_seed(1)
    inp = pg.Input((4, 3))
    h = pg.layers.Dense(8)(inp)
    a = MHA(2, 4)(h)
    h = pg.layers.LayerNormalization()(pg.layers.Add()([h, a]))
    h = pg.layers.Dense(8, activation="relu")(h)
    out = pg.layers.Dense(1, activation="sigmoid")(pg.layers.Flatten()(h))
    m = pg.Model(inp, out).compile(optimizer=pg.optimizers.Adam(learning_rate=0.01), loss="binary_crossentropy",
                                   metrics=["accuracy"])
    hist = m.fit(x, y, epochs=60, batch_size=32, verbose=0)
    assert hist.history["loss"][-1] < 0.5 * hist.history["loss"][0]
    assert m.evaluate(x, y, return_dict=True)["accuracy"] > 0.9
    m.free()


def test_bad_arguments_and_inputs_are_refused():
    for bad in (0, -2, 1.5, "2", None):
        with pytest.raises((TypeError, ValueError)):
            MHA(bad, 2)
        with pytest.raises((TypeError, ValueError)):
            MHA(2, bad)
    with pytest.raises(ValueError, match="dropout"):
        MHA(2, 2, dropout=1.0)
    with pytest.raises(ValueError, match="output_shape"):
        MHA(2, 2, output_shape=(3, 4))
    q, v, k = pg.Input((3, 4)), pg.Input((5, 4)), pg.Input((6, 4))
    with pytest.raises(ValueError, match="same number of steps"):
        MHA(2, 2)([q, v, k])
    with pytest.raises(ValueError, match="1 to 3 inputs"):
        MHA(2, 2)([q, v, v, v])
    with pytest.raises(ValueError, match=r"\(steps, features\)"):
        MHA(2, 2)(pg.Input((4,)))
    with pytest.raises(ValueError, match="needs a value"):
        MHA(2, 2)(q, key=k)
    with pytest.raises(TypeError, match="not both"):
        MHA(2, 2)([q, v], v)
    with pytest.raises(TypeError, match="unsupported call arguments"):
        MHA(2, 2)(q, v, bogus=None)
    with pytest.raises((TypeError, ValueError)):       # on arrays it runs at once: (3, 4) is no sequence
        MHA(2, 2)(np.zeros((3, 4)))
