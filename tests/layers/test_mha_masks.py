"""MultiHeadAttention's call arguments for masks and scores, as keras-io's
transformers use them: ``use_causal_mask``, ``attention_mask`` (an array or a
tensor inside a layer's call, a node in a functional model) and
``return_attention_scores``; against a float64 numpy reference, through the
harness, saved and loaded, and with bad arguments."""

import math

import numpy as np
import pytest

import pyggml as pg
from harness import ACTIVATIONS, LayerCase, harness_tests

MHA = pg.layers.MultiHeadAttention


def masked_ref(num_heads, key_dim, causal=False, allowed=None, scores=False):
    """The numpy attention of test_attention's mha_ref, with blocked keys at -1e9 (as
    Keras's masked softmax): ``allowed`` (n or 1, tq, tv) of 0/1, ``causal`` j <= i."""

    def ref(hs, w, training, allowed=allowed):
        q = hs[0]
        v = hs[1] if len(hs) > 1 else q
        k = hs[2] if len(hs) > 2 else v

        def linear(x, name):
            return x @ w[f"{name}.weight"].T + w.get(f"{name}.bias", 0.0)
        n, tq, tv = q.shape[0], q.shape[1], v.shape[1]
        qh = linear(q, "q_proj").reshape(n, tq, num_heads, key_dim)
        kh = linear(k, "k_proj").reshape(n, tv, num_heads, key_dim)
        vh = linear(v, "v_proj").reshape(n, tv, num_heads, key_dim)
        s = np.einsum("nihd,njhd->nhij", qh, kh) / math.sqrt(key_dim)
        ok = np.ones((n, tq, tv))
        if allowed is not None:
            ok = ok * (np.asarray(allowed) != 0)
        if causal:
            ok = ok * (np.arange(tq)[:, None] >= np.arange(tv)[None, :])
        s = np.where(ok[:, None] > 0, s, s - 1e9)
        probs = ACTIVATIONS["softmax"](s)
        att = np.einsum("nhij,njhd->nihd", probs, vh).reshape(n, tq, num_heads * key_dim)
        out = linear(att, "out_proj")
        return (out, probs) if scores else out
    return ref


_KB = {"zero_gradient": ("k_proj.bias",)}

CASES = [
    LayerCase("mha_use_causal_mask", lambda: MHA(2, 3), [(4, 5)], masked_ref(2, 3, causal=True),
              sequential=False, call=lambda layer, hs: layer(hs[0], hs[0], use_causal_mask=True), extra=_KB),
    LayerCase("mha_causal_cross_longer_values", lambda: MHA(2, 2), [(3, 4), (5, 4)], masked_ref(2, 2, causal=True),
              call=lambda layer, hs: layer(hs[0], hs[1], use_causal_mask=True), extra=_KB),
]

test_forward, test_gradient, test_config, test_training_step = harness_tests(CASES)


def _weights(model, rng, scale=0.5):
    w = {k: rng.normal(scale=scale, size=a.shape).astype(np.float32) for k, a in model.get_weights().items()}
    model.set_weights(w)
    return {".".join(k.split(".")[-2:]): v.astype(np.float64) for k, v in w.items()}


def test_attention_mask_node_in_a_functional_model():
    rng = np.random.default_rng(1)
    x_in, m_in = pg.Input((4, 6)), pg.Input((4, 5))
    y_in = pg.Input((5, 6))
    out = MHA(2, 3)(x_in, y_in, attention_mask=m_in)
    model = pg.Model([x_in, y_in, m_in], out).compile(loss="mse")
    w = _weights(model, rng)
    x, y = rng.normal(size=(3, 4, 6)), rng.normal(size=(3, 5, 6))
    mask = rng.random((3, 4, 5)) < 0.6
    mask[:, :, 0] = True                          # every query sees a key
    got = model.predict([x, y, mask.astype(np.float32)], verbose=0)
    want = masked_ref(2, 3, allowed=mask)([x, y], w, False)
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-5)
    free = masked_ref(2, 3)([x, y], w, False)
    assert np.abs(got - free).max() > 1e-3            # the mask changed the output
    model.free()


@pg.saving.register_serializable(package="test_mha_masks")
class Block(pg.layers.Layer):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.att = MHA(2, 2)

    def call(self, x):
        t = pg.ops.shape(x)[1]
        mask = np.tril(np.ones((t, t), bool))[None]
        out, scores = self.att(x, x, attention_mask=mask, return_attention_scores=True)
        assert tuple(scores.shape) == (x.shape[0], 2, t, t)
        return out


def test_attention_mask_array_and_scores_inside_a_custom_layer(tmp_path):
    """keras-io's TransformerBlock: the mask made inside call(), the scores returned too."""

    rng = np.random.default_rng(2)
    inp = pg.Input((5, 4))
    model = pg.Model(inp, Block()(inp)).compile(loss="mse")
    w = _weights(model, rng)
    x = rng.normal(size=(2, 5, 4))
    want = masked_ref(2, 2, causal=True)([x], w, False)
    np.testing.assert_allclose(model.predict(x, verbose=0), want, rtol=2e-4, atol=2e-5)
    model.fit(x, rng.normal(size=(2, 5, 4)), epochs=1, batch_size=2, verbose=0)
    model.free()


def test_return_attention_scores_gives_the_probabilities_and_saves(tmp_path):
    rng = np.random.default_rng(3)
    inp = pg.Input((4, 3))
    out, scores = MHA(2, 2)(inp, inp, use_causal_mask=True, return_attention_scores=True)
    assert scores.shape == (None, 2, 4, 4)
    model = pg.Model(inp, [out, scores]).compile(loss=["mse", None])
    w = _weights(model, rng)
    x = rng.normal(size=(3, 4, 3))
    got_out, got_scores = model.predict(x, verbose=0)
    want_out, want_scores = masked_ref(2, 2, causal=True, scores=True)([x], w, False)
    np.testing.assert_allclose(got_out, want_out, rtol=2e-4, atol=2e-5)
    np.testing.assert_allclose(got_scores, want_scores, rtol=2e-4, atol=1e-6)
    assert np.all(np.triu(got_scores[0, 0], 1) < 1e-6)          # nothing from later steps
    # one target for the only output with a loss (Keras's matching), then the file round trips
    model.fit(x, rng.normal(size=(3, 4, 3)), epochs=1, batch_size=3, verbose=0)
    before = model.predict(x, verbose=0)
    for name in ("m.gguf", "m.keras"):
        model.save(str(tmp_path / name))
        back = pg.load_model(str(tmp_path / name))
        for a, b in zip(before, back.predict(x, verbose=0)):
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
        back.free()
    model.free()


def test_saved_model_with_a_mask_input_loads(tmp_path):
    rng = np.random.default_rng(4)
    x_in, m_in = pg.Input((3, 4)), pg.Input((3, 3))
    model = pg.Model([x_in, m_in], MHA(1, 4)(x_in, x_in, attention_mask=m_in)).compile(loss="mse")
    _weights(model, rng)
    x, m = rng.normal(size=(2, 3, 4)), np.tril(np.ones((2, 3, 3)))
    before = model.predict([x, m], verbose=0)
    model.save(str(tmp_path / "m.gguf"))
    back = pg.load_model(str(tmp_path / "m.gguf"))
    np.testing.assert_allclose(back.predict([x, m], verbose=0), before, rtol=1e-6, atol=1e-7)
    back.free()
    model.free()


def test_matches_torch_with_a_causal_mask():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    e, heads, t = 8, 2, 6
    inp = pg.Input((t, e))
    m = pg.Model(inp, MHA(heads, e // heads)(inp, inp, use_causal_mask=True)).compile(loss="mse")
    w = {k: rng.normal(scale=0.4, size=a.shape).astype(np.float32) for k, a in m.get_weights().items()}
    m.set_weights(w)
    p = "multi_head_attention."
    tm = torch.nn.MultiheadAttention(e, heads, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        tm.in_proj_weight.copy_(torch.tensor(np.concatenate([w[p + f"{n}_proj.weight"] for n in "qkv"])))
        tm.in_proj_bias.copy_(torch.tensor(np.concatenate([w[p + f"{n}_proj.bias"] for n in "qkv"])))
        tm.out_proj.weight.copy_(torch.tensor(w[p + "out_proj.weight"]))
        tm.out_proj.bias.copy_(torch.tensor(w[p + "out_proj.bias"]))
    x = rng.normal(size=(3, t, e))
    tx = torch.tensor(x)
    blocked = torch.triu(torch.ones(t, t, dtype=torch.bool), 1)       # torch: True = not allowed
    ref, _ = tm(tx, tx, tx, attn_mask=blocked)
    np.testing.assert_allclose(m.predict(x, verbose=0), ref.detach().numpy(), rtol=1e-4, atol=1e-5)
    m.free()


def test_bad_mask_arguments_are_refused():
    q, v = pg.Input((3, 4)), pg.Input((5, 4))
    with pytest.raises(ValueError, match=r"attention_mask must be of shape"):
        MHA(2, 2)(q, v, attention_mask=pg.Input((3, 4)))
    with pytest.raises(TypeError, match="must hold booleans"):
        MHA(2, 2)(q, v, attention_mask=np.array([["a"] * 5] * 3))
    with pytest.raises(ValueError, match=r"attention_mask must be of shape .* \(1, 3, 5\), got \(1, 3, 4\)"):
        MHA(2, 2)(q, v, attention_mask=np.ones((3, 4)))
    with pytest.raises(TypeError, match="use_causal_mask"):
        MHA(2, 2)(q, v, use_causal_mask="yes")
    with pytest.raises(TypeError, match="return_attention_scores"):
        MHA(2, 2)(q, v, return_attention_scores=1)
    x = np.zeros((2, 3, 4), np.float32)
    with pytest.raises(ValueError, match=r"attention_mask must be of shape"):
        MHA(2, 2)(x, x, attention_mask=np.ones((2, 4, 3)))          # eager: checked before any graph op
    with pytest.raises(TypeError, match="booleans or 0/1"):
        MHA(2, 2)(x, x, attention_mask=np.array([["a"] * 3] * 3))


def test_a_padding_mask_of_one_query_row_broadcasts():
    """keras-io's encoders pass mask[:, None, :] (batch, 1, value steps)."""
    rng = np.random.default_rng(6)
    x_in, m_in = pg.Input((4, 6)), pg.Input((1, 4))
    model = pg.Model([x_in, m_in], MHA(2, 3)(x_in, x_in, attention_mask=m_in)).compile(loss="mse")
    w = _weights(model, rng)
    x = rng.normal(size=(3, 4, 6))
    keep = np.array([[1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 1, 1]], np.float32)
    got = model.predict([x, keep[:, None, :]], verbose=0)
    want = masked_ref(2, 3, allowed=np.broadcast_to(keep[:, None, :], (3, 4, 4)))([x], w, False)
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-5)
    model.free()
