"""GroupedQueryAttention (Keras's GroupQueryAttention): forward, gradients, configs and
training through the harness against a float64 numpy reference; parity with
PyTorch's scaled_dot_product_attention on repeated key/value heads; the masks
(query/value/key masks, attention_mask, causal, the inputs' own padding masks);
scores; Keras's weight layouts; bad arguments."""

import math

import numpy as np
import pytest

import pyggml as pg
from harness import ACTIVATIONS, LayerCase, harness_tests

GQA = pg.layers.GroupQueryAttention


def gqa_ref(d, hq, hkv, causal=False, allowed=None, qmask=None, vmask=None, scores=False):
    """Keras's grouped-query attention in float64: key/value head j serves query heads
    j*g .. j*g+g-1; blocked keys get -1e9 before the softmax (a row with every key
    blocked is uniform, as in float32)."""

    def ref(hs, w, training):
        q = hs[0]
        v = hs[1] if len(hs) > 1 else q
        k = hs[2] if len(hs) > 2 else v

        def linear(x, name):
            return x @ w[f"{name}.weight"].T + w.get(f"{name}.bias", 0.0)
        n, tq, tv = q.shape[0], q.shape[1], v.shape[1]
        qh = linear(q, "q_proj").reshape(n, tq, hq, d)
        kh = np.repeat(linear(k, "k_proj").reshape(n, tv, hkv, d), hq // hkv, axis=2)
        vh = np.repeat(linear(v, "v_proj").reshape(n, tv, hkv, d), hq // hkv, axis=2)
        s = np.einsum("nihd,njhd->nhij", qh / math.sqrt(d), kh)
        ok = np.ones((n, tq, tv))
        if allowed is not None:
            ok = ok * (np.asarray(allowed) != 0)
        if qmask is not None:
            ok = ok * (np.asarray(qmask)[:, :, None] != 0)
        if vmask is not None:
            ok = ok * (np.asarray(vmask)[:, None, :] != 0)
        if causal:
            ok = ok * (np.arange(tq)[:, None] >= np.arange(tv)[None, :])
        s = np.where(ok[:, None] > 0, s, s - 1e9)
        # a query that sees no key: in float32, -1e9 swallows its scores, so its row is uniform
        s = np.where(ok[:, None].any(axis=-1, keepdims=True), s, 0.0)
        probs = ACTIVATIONS["softmax"](s)
        if scores:
            # when Keras computes the scores itself, such a row is all zeros (its output the
            # output projection's bias; checked on real Keras 3.15)
            probs = np.where(ok[:, None].any(axis=-1, keepdims=True), probs, 0.0)
        att = np.einsum("nhij,njhd->nihd", probs, vh).reshape(n, tq, hq * d)
        out = linear(att, "out_proj")
        return (out, probs) if scores else out
    return ref


_KB = {"zero_gradient": ("k_proj.bias",)}     # a key bias shifts every score of a query equally

CASES = [
    LayerCase("gqa_self_attention", lambda: GQA(3, 4, 2), [(4, 6)], gqa_ref(3, 4, 2), extra=_KB),
    LayerCase("gqa_multi_query_cross", lambda: GQA(head_dim=2, num_query_heads=3, num_key_value_heads=1),
              [(3, 4), (5, 4)], gqa_ref(2, 3, 1), call=lambda layer, hs: layer(hs[0], hs[1]), extra=_KB),
    LayerCase("gqa_key_causal_no_bias", lambda: GQA(2, 2, 2, use_bias=False), [(4, 4), (4, 4), (4, 5)],
              gqa_ref(2, 2, 2, causal=True), call=lambda layer, hs: layer(hs[0], hs[1], hs[2], use_causal_mask=True)),
]

test_forward, test_gradient, test_config, test_training_step = harness_tests(CASES)


def _weights(model, rng, scale=0.5):
    w = {k: rng.normal(scale=scale, size=a.shape).astype(np.float32) for k, a in model.get_weights().items()}
    model.set_weights(w)
    return {".".join(k.split(".")[-2:]): v.astype(np.float64) for k, v in w.items()}


def test_matches_torch_scaled_dot_product_attention_with_repeated_heads():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    d, hq, hkv = 4, 6, 2
    inp, vin = pg.Input((5, 8)), pg.Input((7, 8))
    model = pg.Model([inp, vin], GQA(d, hq, hkv)(inp, vin, use_causal_mask=True)).compile(loss="mse")
    w = _weights(model, rng)
    x, y = rng.normal(size=(3, 5, 8)), rng.normal(size=(3, 7, 8))
    got = model.predict([x, y], verbose=0)
    t = {k: torch.tensor(v, dtype=torch.float64) for k, v in w.items()}
    xt, yt = torch.tensor(x), torch.tensor(y)
    q = (xt @ t["q_proj.weight"].T + t["q_proj.bias"]).reshape(3, 5, hq, d).transpose(1, 2)
    k = (yt @ t["k_proj.weight"].T + t["k_proj.bias"]).reshape(3, 7, hkv, d).transpose(1, 2)
    v = (yt @ t["v_proj.weight"].T + t["v_proj.bias"]).reshape(3, 7, hkv, d).transpose(1, 2)
    k, v = k.repeat_interleave(hq // hkv, dim=1), v.repeat_interleave(hq // hkv, dim=1)
    causal = torch.tril(torch.ones(5, 7, dtype=torch.bool))
    att = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=causal)
    want = att.transpose(1, 2).reshape(3, 5, hq * d) @ t["out_proj.weight"].T + t["out_proj.bias"]
    np.testing.assert_allclose(got, want.numpy(), rtol=2e-4, atol=2e-5)
    model.free()


def test_equal_heads_is_multi_head_attention():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 4, 6)).astype(np.float32)
    g = GQA(3, 2, 2)
    g(x)
    m = pg.layers.MultiHeadAttention(2, 3)
    m(x)
    m.set_weights(dict(g.get_weights()))
    np.testing.assert_allclose(g(x), m(x), rtol=1e-5, atol=1e-6)


def test_explicit_masks_as_nodes_and_scores_save_and_load(tmp_path):
    rng = np.random.default_rng(2)
    d, hq, hkv = 2, 4, 2
    q_in, v_in = pg.Input((4, 6)), pg.Input((5, 6))
    qm_in, vm_in, am_in = pg.Input((4,)), pg.Input((5,)), pg.Input((4, 5))
    out, scores = GQA(d, hq, hkv)(q_in, v_in, query_mask=qm_in, value_mask=vm_in, attention_mask=am_in,
                                  return_attention_scores=True)
    assert scores.shape == (None, hq, 4, 5)
    model = pg.Model([q_in, v_in, qm_in, vm_in, am_in], [out, scores]).compile(loss=["mse", None])
    w = _weights(model, rng)
    x, y = rng.normal(size=(3, 4, 6)), rng.normal(size=(3, 5, 6))
    qm = np.ones((3, 4)); qm[0, 3] = 0
    vm = np.ones((3, 5)); vm[1, 3:] = 0
    am = (rng.random((3, 4, 5)) < 0.7).astype(np.float32); am[:, :, 0] = 1
    feed = [x, y, qm, vm, am]
    got_out, got_scores = model.predict(feed, verbose=0)
    want_out, want_scores = gqa_ref(d, hq, hkv, allowed=am, qmask=qm, vmask=vm, scores=True)([x, y], w, False)
    np.testing.assert_allclose(got_out, want_out, rtol=2e-4, atol=2e-5)
    np.testing.assert_allclose(got_scores, want_scores, rtol=2e-4, atol=2e-6)
    assert np.abs(got_out - gqa_ref(d, hq, hkv)([x, y], w, False)).max() > 1e-3      # the masks mattered
    path = str(tmp_path / "gqa.gguf")
    model.save(path)
    again = pg.load_model(path)
    np.testing.assert_array_equal(again.predict(feed, verbose=0)[0], got_out)
    again.free()
    model.free()


def test_masks_on_arrays_and_key_mask():
    rng = np.random.default_rng(3)
    g = GQA(2, 2, 1)
    x, y = rng.normal(size=(2, 3, 4)).astype(np.float32), rng.normal(size=(2, 5, 4)).astype(np.float32)
    g(x, y)
    w = {k: v.astype(np.float64) for k, v in g.get_weights().items()}
    km = np.array([[1, 1, 0, 1, 0], [1, 0, 1, 1, 1]], dtype=bool)
    got = g(x, y, key_mask=km, use_causal_mask=True)
    want = gqa_ref(2, 2, 1, causal=True, vmask=km)([x, y], w, False)
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-5)


def test_the_inputs_padding_masks_are_used():
    """Masking's padding mask on the query and the value: as Keras, padded keys are not
    attended to, and padded queries see no key (their row is uniform)."""
    rng = np.random.default_rng(4)
    inp = pg.Input((5, 4))
    h = pg.layers.Masking(0.0)(inp)
    model = pg.Model(inp, GQA(2, 2, 1)(h, h)).compile(loss="mse")
    w = _weights(model, rng)
    x = rng.normal(size=(2, 5, 4))
    x[0, 3:] = 0.0
    keep = np.any(x != 0, axis=-1)
    got = model.predict(x, verbose=0)
    want = gqa_ref(2, 2, 1, qmask=keep, vmask=keep)([x], w, False)
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-5)


def test_keras_weight_layouts_and_counts():
    g = GQA(head_dim=2, num_query_heads=4, num_key_value_heads=2)
    g(np.zeros((1, 3, 5), np.float32), np.zeros((1, 3, 5), np.float32))
    kw = g.get_weights()
    assert kw["q_proj.weight"].shape == (8, 5) and kw["k_proj.weight"].shape == (4, 5)
    assert kw["out_proj.weight"].shape == (5, 8)
    keras = [kw[i] for i in range(8)]
    assert [a.shape for a in keras] == [(5, 4, 2), (4, 2), (5, 2, 2), (2, 2), (5, 2, 2), (2, 2), (4, 2, 5), (5,)]
    np.testing.assert_array_equal(keras[0][:, 1, :], kw["q_proj.weight"][2:4].T)
    assert g.count_params() == 8 * 5 + 8 + 2 * (4 * 5 + 4) + 5 * 8 + 5
    cfg = g.get_config()
    assert cfg["head_dim"] == 2 and cfg["num_query_heads"] == 4 and cfg["num_key_value_heads"] == 2
    assert GQA.kind() == "grouped_query_attention"


def test_dropout_only_while_training():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(2, 4, 4)).astype(np.float32)
    g = GQA(2, 2, 1, dropout=0.5)
    a, b = g(x), g(x)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(g(x, training=True), a)


def test_bad_arguments():
    with pytest.raises(ValueError, match="divisible"):
        GQA(2, 3, 2)
    with pytest.raises(ValueError, match="head_dim"):
        GQA(0, 2, 1)
    with pytest.raises(ValueError, match="dropout"):
        GQA(2, 2, 1, dropout=0.2, flash_attention=True)
    with pytest.raises(TypeError, match="flash_attention"):
        GQA(2, 2, 1, flash_attention="yes")
    g = GQA(2, 2, 1, flash_attention=False)
    x = np.zeros((2, 3, 4), np.float32)
    with pytest.raises(ValueError, match="same last dimension"):
        g(x, np.zeros((2, 3, 5), np.float32))
    with pytest.raises(TypeError, match="use_causal_mask"):
        g(x, use_causal_mask="yes")
    with pytest.raises(TypeError, match="unsupported"):
        g(x, bogus=1)
    with pytest.raises(ValueError, match="query_mask"):
        g(x, x, query_mask=np.ones((2, 4)))
    with pytest.raises(ValueError, match="attention_mask"):
        g(x, x, attention_mask=np.ones((2, 3, 4)))
    with pytest.raises(TypeError, match="booleans"):
        g(x, x, value_mask=np.array([["a"] * 3] * 2))
    with pytest.raises(ValueError, match=r"\(steps, features\)"):
        GQA(2, 2, 1)(np.zeros((2, 4), np.float32))
    inp = pg.Input((3, 4))
    with pytest.raises(TypeError, match="node"):
        g(inp, inp, value_mask=np.ones((2, 3)))
    with pytest.raises(ValueError, match="flash_attention"):
        GQA(2, 2, 1, flash_attention=True)(x, return_attention_scores=True)


@pg.saving.register_serializable(package="test_grouped_query_attention")
class DecoderBlock(pg.layers.Layer):
    """keras-io's decoder block: the causal mask made inside call() as an array."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.att = GQA(2, 4, 2)

    def call(self, x):
        t = x.shape[1]
        return self.att(x, x, attention_mask=np.tril(np.ones((t, t), bool))[None])


def test_array_mask_inside_a_custom_layer_trains_saves_and_loads(tmp_path):
    rng = np.random.default_rng(6)
    inp = pg.Input((5, 4))
    model = pg.Model(inp, DecoderBlock()(inp)).compile(loss="mse")
    w = _weights(model, rng)
    x = rng.normal(size=(2, 5, 4))
    want = gqa_ref(2, 4, 2, causal=True)([x], w, False)
    np.testing.assert_allclose(model.predict(x, verbose=0), want, rtol=2e-4, atol=2e-5)
    h = model.fit(x, rng.normal(size=(2, 5, 4)), epochs=2, batch_size=2, verbose=0)
    assert h.history["loss"][1] < h.history["loss"][0]
    path = str(tmp_path / "block.gguf")
    model.save(path)
    again = pg.load_model(path)
    np.testing.assert_array_equal(again.predict(x, verbose=0), model.predict(x, verbose=0))
    again.free()
    model.free()


def test_gradients_reach_every_projection_through_grouped_heads():
    """Each key/value head's gradient sums over the query heads of its group: the
    training step of a causal model matches the float64 reference's finite differences."""
    import harness
    case = LayerCase("gqa_grouped_grad", lambda: GQA(2, 6, 3, use_bias=False), [(3, 4)],
                     gqa_ref(2, 6, 3, causal=True), call=lambda layer, hs: layer(hs[0], use_causal_mask=True))
    harness.check_gradient(case, "functional")


def test_regularizers_see_keras_layouts():
    g = GQA(2, 4, 2, kernel_regularizer=pg.regularizers.L2(0.1), bias_regularizer=pg.regularizers.L1(0.2))
    g(np.zeros((1, 3, 5), np.float32))
    w = {k: v.astype(np.float64) for k, v in g.get_weights().items()}
    kernels = sum(np.sum(w[f"{p}_proj.weight"] ** 2) for p in "qkv") + np.sum(w["out_proj.weight"] ** 2)
    biases = sum(np.sum(np.abs(w[f"{p}_proj.bias"])) for p in "qkv") + np.sum(np.abs(w["out_proj.bias"]))
    np.testing.assert_allclose(sum(g.losses), 0.1 * kernels + 0.2 * biases, rtol=1e-5)
