"""Attention, AdditiveAttention, GroupNormalization and EinsumDense: the layer
harness over several configurations of each, masks and causal masks against
float64 numpy references, PyTorch parity (scaled dot-product attention,
nn.GroupNorm, torch.einsum; forward and gradients) and bad arguments."""

import json

import numpy as np
import pytest

import pyggml as pg
from harness import LayerCase, harness_tests

L = pg.layers


# --- float64 references -----------------------------------------------------------------

def _softmax(z):
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def attention_np(q, v, k=None, mode="dot", scale=None, concat_weight=None, q_mask=None, v_mask=None,
                 causal=False, return_scores=False):
    """Keras's Attention ("dot", "concat") and AdditiveAttention ("additive") in float64."""
    k = v if k is None else k
    if mode == "dot":
        s = q @ np.swapaxes(k, -1, -2)
        if scale is not None:
            s = s * scale[0]
    else:
        summed = q[:, :, None, :] + k[:, None, :, :]
        if mode == "concat":
            s = np.tanh(summed * (scale[0] if scale is not None else 1.0)).sum(-1) * concat_weight[0]
        else:
            s = (np.tanh(summed) * (scale if scale is not None else 1.0)).sum(-1)
    allowed = np.ones(s.shape, dtype=bool)
    if v_mask is not None:
        allowed &= np.asarray(v_mask, bool)[:, None, :]
    if causal:
        allowed &= np.tril(np.ones(s.shape[1:], dtype=bool))[None]
    s = s - 1e9 * (~allowed)
    p = _softmax(s)
    out = p @ v
    if q_mask is not None:
        out = out * np.asarray(q_mask, np.float64)[:, :, None]
    return (out, p) if return_scores else out


def attention_ref(mode="dot", causal=False):
    def ref(hs, w, training):
        q = hs[0]
        v = hs[1] if len(hs) > 1 else q
        k = hs[2] if len(hs) > 2 else None
        return attention_np(q, v, k, mode, w.get("scale"), w.get("concat_score_weight"), causal=causal)
    return ref


def group_norm_np(x, groups, axis=-1, eps=1e-3, gamma=None, beta=None):
    x = np.moveaxis(np.asarray(x, np.float64), axis, -1)
    c = x.shape[-1]
    g = c if groups == -1 else groups
    r = x.reshape(x.shape[:-1] + (g, c // g))
    red = tuple(range(1, r.ndim - 2)) + (r.ndim - 1,)
    mean = r.mean(axis=red, keepdims=True)
    var = r.var(axis=red, keepdims=True)
    y = ((r - mean) / np.sqrt(var + eps)).reshape(x.shape)
    if gamma is not None:
        y = y * gamma
    if beta is not None:
        y = y + beta
    return np.moveaxis(y, -1, axis)


def group_norm_ref(groups, axis=-1, eps=1e-3):
    def ref(hs, w, training):
        return group_norm_np(hs[0], groups, axis, eps, w.get("weight"), w.get("bias"))
    return ref


def einsum_ref(equation, activation=None):
    acts = {None: lambda z: z, "tanh": np.tanh}

    def ref(hs, w, training):
        y = np.einsum(equation, hs[0], w["kernel"])
        if "bias" in w:
            y = y + w["bias"]
        return acts[activation](y)
    return ref


# --- harness cases ---------------------------------------------------------------------------

def _causal(layer, hs):
    return layer(hs if len(hs) > 1 else hs[0], use_causal_mask=True)


ATTENTION_CASES = [
    LayerCase("attention_dot", lambda: L.Attention(), [(3, 4), (5, 4)], attention_ref()),
    LayerCase("attention_dot_scaled_key", lambda: L.Attention(use_scale=True), [(3, 4), (5, 6), (5, 4)],
              attention_ref()),
    LayerCase("attention_concat", lambda: L.Attention(score_mode="concat"), [(4, 3), (2, 3)],
              attention_ref("concat")),
    LayerCase("attention_concat_scaled", lambda: L.Attention(use_scale=True, score_mode="concat"),
              [(3, 2), (4, 5), (4, 2)], attention_ref("concat")),
    LayerCase("attention_self", lambda: L.Attention(use_scale=True), [(4, 3)], attention_ref()),
    LayerCase("attention_causal", lambda: L.Attention(use_scale=True), [(4, 3), (4, 3)],
              attention_ref(causal=True), call=_causal),
    LayerCase("attention_causal_self", lambda: L.Attention(), [(5, 2)], attention_ref(causal=True), call=_causal,
              sequential=False),
    LayerCase("additive", lambda: L.AdditiveAttention(), [(3, 4), (5, 4)], attention_ref("additive")),
    LayerCase("additive_no_scale_key", lambda: L.AdditiveAttention(use_scale=False), [(2, 3), (4, 5), (4, 3)],
              attention_ref("additive")),
    LayerCase("additive_self", lambda: L.AdditiveAttention(), [(4, 3)], attention_ref("additive")),
    LayerCase("additive_causal", lambda: L.AdditiveAttention(), [(3, 2), (4, 2)],
              attention_ref("additive", causal=True), call=_causal),
]

GROUP_NORM_CASES = [
    LayerCase("group_norm_dense", lambda: L.GroupNormalization(groups=2), [(6,)], group_norm_ref(2)),
    LayerCase("group_norm_sequence", lambda: L.GroupNormalization(groups=3, epsilon=1e-5), [(4, 6)],
              group_norm_ref(3, eps=1e-5)),
    LayerCase("group_norm_image", lambda: L.GroupNormalization(groups=2), [(3, 2, 4)], group_norm_ref(2)),
    LayerCase("group_norm_instance", lambda: L.GroupNormalization(groups=-1), [(5, 3)], group_norm_ref(-1)),
    LayerCase("group_norm_one_group_no_center", lambda: L.GroupNormalization(groups=1, center=False), [(3, 4)],
              group_norm_ref(1)),
    LayerCase("group_norm_axis1_no_scale", lambda: L.GroupNormalization(groups=2, axis=1, scale=False), [(4, 3)],
              group_norm_ref(2, axis=1)),
]

EINSUM_CASES = [
    LayerCase("einsum_dense_2d", lambda: L.EinsumDense("ab,bc->ac", 3, bias_axes="c"), [(5,)],
              einsum_ref("ab,bc->ac")),
    LayerCase("einsum_sequence", lambda: L.EinsumDense("abc,cd->abd", (4, 3), bias_axes="d", activation="tanh"),
              [(4, 5)], einsum_ref("abc,cd->abd", "tanh")),
    LayerCase("einsum_no_bias", lambda: L.EinsumDense("abc,cd->abd", (None, 2)), [(3, 4)],
              einsum_ref("abc,cd->abd")),
    LayerCase("einsum_heads", lambda: L.EinsumDense("abc,cde->abde", (4, 2, 3), bias_axes="de"), [(4, 5)],
              einsum_ref("abc,cde->abde")),
    LayerCase("einsum_heads_back", lambda: L.EinsumDense("abcd,cde->abe", (4, 5), bias_axes="e"), [(4, 2, 3)],
              einsum_ref("abcd,cde->abe")),
    LayerCase("einsum_left_ellipsis", lambda: L.EinsumDense("...b,bc->...c", 3, bias_axes="c"), [(4, 5)],
              einsum_ref("...b,bc->...c")),
    LayerCase("einsum_right_ellipsis", lambda: L.EinsumDense("ab...,bc->ac...", 3, bias_axes="c"), [(5, 2)],
              einsum_ref("ab...,bc->ac...")),
    LayerCase("einsum_bias_inner", lambda: L.EinsumDense("abc,cde->abde", (3, 2, 4), bias_axes="d"), [(3, 5)],
              einsum_ref("abc,cde->abde")),
    LayerCase("einsum_per_head", lambda: L.EinsumDense("abcd,cde->abce", (3, 2, 5), bias_axes="ce"), [(3, 2, 4)],
              einsum_ref("abcd,cde->abce")),
    LayerCase("einsum_transposed_out", lambda: L.EinsumDense("abc,cd->adb", (3, 4)), [(4, 5)],
              einsum_ref("abc,cd->adb")),
]

CASES = ATTENTION_CASES + GROUP_NORM_CASES + EINSUM_CASES

# the harness's four checks over every case (forward, gradient, config, a training step)
test_forward, test_gradient, test_config, test_training_step = harness_tests(CASES)


# --- helpers -----------------------------------------------------------------------------------

def _set_random(m, rng, scale=0.5):
    w = {k: rng.normal(scale=scale, size=a.shape).astype(np.float32) for k, a in m.get_weights().items()}
    m.set_weights(w)
    return w


def _sgd_grads(m, xs, y, batch):
    """The gradient of the mse loss as one SGD(lr=1) step moves the weights."""
    w0 = m.get_weights()
    m.fit(xs, y, epochs=1, batch_size=batch, shuffle=False, verbose=0)
    w1 = m.get_weights()
    return {k: w0[k].astype(np.float64) - w1[k] for k in w0}


# --- Attention: masks, scores, causal masks ------------------------------------------------------

def test_attention_eager_masks_scores_and_causal_against_numpy():
    rng = np.random.default_rng(0)
    q, v, k = (rng.normal(size=s).astype(np.float32) for s in ((2, 4, 3), (2, 5, 6), (2, 5, 3)))
    q_mask = np.array([[1, 1, 1, 0], [1, 0, 1, 1]], dtype=bool)
    v_mask = np.array([[1, 1, 0, 1, 0], [1, 1, 1, 1, 1]], dtype=bool)
    for layer, mode in ((L.Attention(), "dot"), (L.Attention(score_mode="concat"), "concat"),
                        (L.AdditiveAttention(use_scale=False), "additive")):
        for causal in (False, True):
            out, scores = layer([q, v, k], mask=[q_mask, v_mask], use_causal_mask=causal,
                                return_attention_scores=True)
            w = {n: a.astype(np.float64) for n, a in layer.get_weights().items()}
            ref_out, ref_p = attention_np(q.astype(np.float64), v.astype(np.float64), k.astype(np.float64), mode,
                                          w.get("scale"), w.get("concat_score_weight"), q_mask, v_mask, causal,
                                          return_scores=True)
            np.testing.assert_allclose(out, ref_out, rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(scores, ref_p, rtol=1e-5, atol=1e-6)
            assert np.all(scores[0][:, [2, 4]] == 0)                   # masked value steps get no attention
            assert np.all(out[0, 3] == 0) and np.all(out[1, 1] == 0)    # masked query steps are zero
            if causal:
                assert np.all(np.triu(scores[1], 1) == 0)


def test_additive_attention_default_scale_is_learned_glorot_vector():
    layer = L.AdditiveAttention()
    q = np.ones((1, 2, 8), np.float32)
    layer([q, q])
    w = layer.get_weights()
    assert sorted(w.keys()) == ["scale"] and w["scale"].shape == (8,)
    assert np.all(np.abs(w["scale"]) <= np.sqrt(6 / 16)) and np.any(w["scale"] != 0)
    att = L.Attention(use_scale=True, score_mode="concat")
    att([q, q])
    assert {n: a.tolist() for n, a in att.get_weights().items()} == {"scale": [1.0], "concat_score_weight": [1.0]}
    assert L.Attention()([q, q]) is not None and L.Attention().get_weights() == {}


def _embedded_attention_model(layer, causal=False):
    # two token sequences whose zeros are padding: Embedding(mask_zero=True) makes the masks
    qi, vi = pg.Input((4,), dtype="int32"), pg.Input((5,), dtype="int32")
    qe = L.Embedding(10, 3, mask_zero=True, name="emb_q")(qi)
    ve = L.Embedding(10, 3, mask_zero=True, name="emb_v")(vi)
    out = layer([qe, ve], use_causal_mask=causal) if causal else layer([qe, ve])
    return pg.Model([qi, vi], out).compile(optimizer=pg.optimizers.SGD(learning_rate=1.0), loss="mse", seed=0)


@pytest.mark.parametrize("make, mode", [(lambda: L.Attention(use_scale=True), "dot"),
                                        (lambda: L.AdditiveAttention(), "additive")])
@pytest.mark.parametrize("causal", [False, True])
def test_propagated_padding_masks_in_a_model(make, mode, causal):
    rng = np.random.default_rng(1)
    m = _embedded_attention_model(make(), causal)
    w = _set_random(m, rng)
    qi = np.array([[3, 1, 0, 0], [2, 5, 7, 1], [4, 0, 0, 0]], np.int32)
    vi = np.array([[1, 2, 0, 0, 0], [9, 8, 7, 0, 0], [6, 5, 4, 3, 2]], np.int32)
    qe, ve = w["emb_q.weight"][qi].astype(np.float64), w["emb_v.weight"][vi].astype(np.float64)
    name = m.layers[-1].name
    ref = attention_np(qe, ve, None, mode, w[f"{name}.scale"].astype(np.float64), None, qi != 0, vi != 0, causal)
    np.testing.assert_allclose(m.predict([qi, vi]), ref, rtol=1e-5, atol=1e-6)
    # the query's mask goes on to the loss: padded query steps do not count
    y = rng.normal(size=ref.shape)
    loss = m.evaluate([qi, vi], y, batch_size=3)
    keep = (qi != 0)[:, :, None]
    want = np.sum(((ref - y) ** 2).mean(-1) * keep[:, :, 0]) / keep.sum()
    np.testing.assert_allclose(loss, want, rtol=1e-4)
    m.free()


def test_masks_given_as_model_inputs(tmp_path):
    # Keras's functional form: attention([q, v], mask=[query_mask, value_mask]) with mask Inputs
    rng = np.random.default_rng(10)
    q_in, v_in = pg.Input((3, 4)), pg.Input((5, 4))
    qm_in, vm_in = pg.Input((3,)), pg.Input((5,), dtype="int32")
    att = L.Attention(use_scale=True, name="att")
    out = att([q_in, v_in], mask=[qm_in, vm_in], use_causal_mask=True)
    assert out.shape == (None, 3, 4)
    m = pg.Model([q_in, v_in, qm_in, vm_in], out).compile(optimizer=pg.optimizers.SGD(learning_rate=1.0),
                                                          loss="mse", seed=0)
    w = _set_random(m, rng)
    q, v = rng.normal(size=(2, 3, 4)).astype(np.float32), rng.normal(size=(2, 5, 4)).astype(np.float32)
    qm = np.array([[1, 1, 0], [1, 0, 1]], np.float32)
    vm = np.array([[1, 0, 1, 1, 0], [1, 1, 0, 1, 1]], np.int32)      # no row masked whole (Keras: undefined)
    xs = [q, v, qm, vm]
    ref = attention_np(q.astype(np.float64), v.astype(np.float64), None, "dot", w["att.scale"].astype(np.float64),
                       None, qm, vm, causal=True)
    got = m.predict(xs)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)
    # the same layer called on arrays with array masks agrees
    np.testing.assert_allclose(att([q, v], mask=[qm, vm], use_causal_mask=True), ref, rtol=1e-5, atol=1e-6)
    # the query mask is the output's: masked query steps leave the loss
    y = rng.normal(size=ref.shape)
    want = np.sum(((ref - y) ** 2).mean(-1) * qm) / qm.sum()
    np.testing.assert_allclose(m.evaluate(xs, y, batch_size=2), want, rtol=1e-4)
    path = str(tmp_path / "masked.gguf")
    m.save(path)
    m2 = pg.load_model(path)
    np.testing.assert_array_equal(m2.predict(xs), got)
    m2.free()
    # only a value mask: one mask input
    m3 = pg.Model([q_in, v_in, vm_in], L.AdditiveAttention(name="add")([q_in, v_in], mask=[None, vm_in]))
    m3.compile(loss="mse", seed=0)
    w3 = m3.get_weights()
    ref3 = attention_np(q.astype(np.float64), v.astype(np.float64), None, "additive",
                        w3["add.scale"].astype(np.float64), v_mask=vm)
    np.testing.assert_allclose(m3.predict([q, v, vm]), ref3, rtol=1e-5, atol=1e-6)
    m3.free()
    m.free()


def test_return_attention_scores_in_a_model_saves_and_loads(tmp_path):
    rng = np.random.default_rng(2)
    q_in, v_in = pg.Input((3, 4)), pg.Input((5, 4))
    out, scores = L.Attention(use_scale=True, name="att")([q_in, v_in], return_attention_scores=True,
                                                          use_causal_mask=True)
    assert out.shape == (None, 3, 4) and scores.shape == (None, 3, 5)
    m = pg.Model([q_in, v_in], [out, scores]).compile(loss="mse", seed=0)
    w = _set_random(m, rng)
    q, v = rng.normal(size=(2, 3, 4)).astype(np.float32), rng.normal(size=(2, 5, 4)).astype(np.float32)
    got = m.predict([q, v])
    ref_out, ref_p = attention_np(q.astype(np.float64), v.astype(np.float64), None, "dot",
                                  w["att.scale"].astype(np.float64), causal=True, return_scores=True)
    np.testing.assert_allclose(got[0], ref_out, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1], ref_p, rtol=1e-5, atol=1e-6)
    for suffix in ("gguf", "keras"):
        path = str(tmp_path / f"att.{suffix}")
        m.save(path)
        m2 = pg.load_model(path)
        again = m2.predict([q, v])
        np.testing.assert_array_equal(again[0], got[0])
        np.testing.assert_array_equal(again[1], got[1])
        m2.free()
    m.free()


def test_attention_dropout_acts_only_while_training():
    rng = np.random.default_rng(3)
    layer = L.Attention(dropout=0.5, seed=7)
    q, v = rng.normal(size=(4, 3, 2)).astype(np.float32), rng.normal(size=(4, 6, 2)).astype(np.float32)
    ref = attention_np(q.astype(np.float64), v.astype(np.float64))
    np.testing.assert_allclose(layer([q, v]), ref, rtol=1e-5, atol=1e-6)
    _, p = layer([q, v], training=True, return_attention_scores=True)
    kept = p[p != 0]
    assert 0 < kept.size < p.size                          # some probabilities dropped, the rest scaled by 2
    _, p0 = layer([q, v], return_attention_scores=True)
    np.testing.assert_allclose(kept, 2 * p0[p != 0], rtol=1e-5)
    assert layer.get_config()["dropout"] == 0.5 and layer.get_config()["seed"] == 7


def test_attention_matches_torch_scaled_dot_product_attention_with_masks_and_gradients():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    n, tq, tv, d, dv = 3, 4, 6, 5, 3
    q_in, v_in, k_in = pg.Input((tq, d)), pg.Input((tv, dv)), pg.Input((tv, d))
    layer = L.Attention(use_scale=True, name="att")
    m = pg.Model([q_in, v_in, k_in], layer([q_in, v_in, k_in], use_causal_mask=True)).compile(
        optimizer=pg.optimizers.SGD(learning_rate=1.0), loss="mse", seed=0)
    m.set_weights({"att.scale": np.array([0.7], np.float32)})
    q, v, k = (rng.normal(size=s).astype(np.float32) for s in ((n, tq, d), (n, tv, dv), (n, tv, d)))
    y = rng.normal(size=(n, tq, dv))
    tq_, tv_, tk_ = (torch.tensor(a, dtype=torch.float64) for a in (q, v, k))
    s = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    causal = torch.tril(torch.ones(tq, tv, dtype=torch.bool))
    # SDPA's scale is a float: the learned scale multiplies the query instead (q . k * s = (s q) . k)
    ref = torch.nn.functional.scaled_dot_product_attention(tq_ * s, tk_, tv_, attn_mask=causal, scale=1.0)
    np.testing.assert_allclose(m.predict([q, v, k]), ref.detach().numpy(), rtol=1e-5, atol=1e-6)
    loss = ((ref - torch.tensor(y)) ** 2).mean()
    loss.backward()
    g = _sgd_grads(m, [q, v, k], y, n)
    np.testing.assert_allclose(g["att.scale"][0], s.grad.item(), rtol=1e-3, atol=1e-6)


# --- GroupNormalization ----------------------------------------------------------------------

def test_group_normalization_matches_torch_group_norm_forward_and_gradients():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    n, h, wd, c, groups = 2, 3, 4, 6, 3
    inp = pg.Input((h, wd, c))
    m = pg.Model(inp, L.GroupNormalization(groups=groups, epsilon=1e-5, name="gn")(inp)).compile(
        optimizer=pg.optimizers.SGD(learning_rate=1.0), loss="mse", seed=0)
    w = _set_random(m, rng)
    x = rng.normal(size=(n, h, wd, c)).astype(np.float32) * 3 + 1
    y = rng.normal(size=x.shape)
    gn = torch.nn.GroupNorm(groups, c, eps=1e-5, dtype=torch.float64)
    with torch.no_grad():
        gn.weight.copy_(torch.tensor(w["gn.weight"]))
        gn.bias.copy_(torch.tensor(w["gn.bias"]))
    # contiguous: torch 2.13's GroupNorm backward crashes on a permuted float64 input
    ref = gn(torch.tensor(x, dtype=torch.float64).permute(0, 3, 1, 2).contiguous()).permute(0, 2, 3, 1)
    np.testing.assert_allclose(m.predict(x), ref.detach().numpy(), rtol=1e-4, atol=1e-5)
    ((ref - torch.tensor(y)) ** 2).mean().backward()
    g = _sgd_grads(m, x, y, n)
    np.testing.assert_allclose(g["gn.weight"], gn.weight.grad.numpy(), rtol=1e-3, atol=1e-6)
    np.testing.assert_allclose(g["gn.bias"], gn.bias.grad.numpy(), rtol=1e-3, atol=1e-6)
    m.free()


def test_group_normalization_eager_and_defaults():
    layer = L.GroupNormalization()
    cfg = layer.get_config()
    assert (cfg["groups"], cfg["axis"], cfg["epsilon"], cfg["center"], cfg["scale"]) == (32, -1, 1e-3, True, True)
    x = np.random.default_rng(6).normal(size=(2, 5, 64)).astype(np.float32)
    np.testing.assert_allclose(layer(x), group_norm_np(x, 32), rtol=1e-4, atol=1e-4)
    w = layer.get_weights()
    assert np.all(w["weight"] == 1) and np.all(w["bias"] == 0) and w["weight"].shape == (64,)
    # channels first: axis=1
    x = np.random.default_rng(7).normal(size=(2, 4, 3, 5)).astype(np.float32)
    np.testing.assert_allclose(L.GroupNormalization(2, axis=1)(x), group_norm_np(x, 2, axis=1), rtol=1e-4,
                               atol=1e-4)


# --- EinsumDense ----------------------------------------------------------------------------

@pytest.mark.parametrize("equation, out_shape, bias_axes, in_shape", [
    ("ab,bc->ac", 4, "c", (5,)),
    ("abc,cd->abd", (3, 4), "d", (3, 5)),
    ("abc,cde->abde", (3, 2, 4), "de", (3, 5)),
    ("abcd,cde->abe", (3, 4), "e", (3, 2, 5)),
    ("...b,bc->...c", 4, None, (2, 3, 5)),
])
def test_einsum_dense_matches_torch_einsum_forward_and_gradients(equation, out_shape, bias_axes, in_shape):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(8)
    inp = pg.Input(in_shape)
    layer = L.EinsumDense(equation, out_shape, bias_axes=bias_axes, name="ed")
    m = pg.Model(inp, layer(inp)).compile(optimizer=pg.optimizers.SGD(learning_rate=1.0), loss="mse", seed=0)
    w = _set_random(m, rng)
    x = rng.normal(size=(3,) + in_shape).astype(np.float32)
    kernel = torch.tensor(w["ed.kernel"], dtype=torch.float64, requires_grad=True)
    ref = torch.einsum(equation, torch.tensor(x, dtype=torch.float64), kernel)
    bias = None
    if bias_axes:
        bias = torch.tensor(w["ed.bias"], dtype=torch.float64, requires_grad=True)
        ref = ref + bias
    assert layer.output_shape == (None,) + tuple(ref.shape[1:])
    np.testing.assert_allclose(m.predict(x), ref.detach().numpy(), rtol=1e-5, atol=1e-5)
    y = rng.normal(size=tuple(ref.shape))
    ((ref - torch.tensor(y)) ** 2).mean().backward()
    g = _sgd_grads(m, x, y, 3)
    np.testing.assert_allclose(g["ed.kernel"], kernel.grad.numpy(), rtol=1e-3, atol=1e-6)
    if bias is not None:
        np.testing.assert_allclose(g["ed.bias"], bias.grad.numpy(), rtol=1e-3, atol=1e-6)
    m.free()


def test_einsum_dense_shapes_and_config_as_keras():
    # Keras's documented examples: the kernel's and bias's shapes and the output shape
    for eq, out, bias_axes, in_shape, kernel, bias, full in (
            ("ab,bc->ac", 64, "c", (32,), (32, 64), (64,), (None, 64)),
            ("abc,cd->abd", (None, 64), "d", (32, 128), (128, 64), (64,), (None, 32, 64)),
            ("abc,cde->abde", (None, 16, 64), "de", (32, 128), (128, 16, 64), (16, 64), (None, 32, 16, 64)),
            ("...b,bc->...c", 64, "c", (32, 128), (128, 64), (64,), (None, 32, 64)),
            ("abc,cde->abde", (4, 2, 3), "d", (4, 5), (5, 2, 3), (2, 1), (None, 4, 2, 3)),
            ("ab...,bc->ac...", 3, "c", (5, 2), (5, 3), (3, 1), (None, 3, 2)),
            ("ab...,bc->ac...", 3, "c", (5,), (5, 3), (3,), (None, 3)),
            ("...ab,bc->...ac", (4, 3), "c", (4, 5), (5, 3), (3,), (None, 4, 3)),
            ("...ab,bc->...ac", 3, None, (5,), (5, 3), None, (None, 3))):
        layer = L.EinsumDense(eq, out, bias_axes=bias_axes)
        inp = pg.Input(in_shape)
        assert layer(inp).shape == full
        assert layer.compute_output_shape((None,) + in_shape) == full
        w = {v.name: v.shape for v in layer.variables}
        assert w == ({"kernel": kernel, "bias": bias} if bias else {"kernel": kernel})
        cfg = layer.get_config()
        assert cfg["equation"] == eq and cfg["bias_axes"] == bias_axes
        assert L.EinsumDense.from_config(json.loads(json.dumps(cfg))).get_config() == json.loads(json.dumps(cfg))
    # glorot-uniform with Keras's fans: (16 + 64) * 128 for a (128, 16, 64) kernel
    k = L.EinsumDense("abc,cde->abde", (None, 16, 64))
    k(np.zeros((1, 2, 128), np.float32))
    kern = k.get_weights()["kernel"]
    limit = np.sqrt(6 / ((16 + 64) * 128))
    assert np.abs(kern).max() <= limit and np.abs(kern).max() > 0.95 * limit
    x = np.random.default_rng(9).normal(size=(2, 3, 4)).astype(np.float32)
    layer = L.EinsumDense("abc,cd->abd", (3, 2), bias_axes="d", bias_initializer="ones")
    np.testing.assert_allclose(layer(x), x @ layer.get_weights()["kernel"] + 1, rtol=1e-5, atol=1e-6)


# --- bad arguments -----------------------------------------------------------------------------

def test_attention_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="score_mode"):
        L.Attention(score_mode="general")
    with pytest.raises(ValueError, match="dropout"):
        L.Attention(dropout=1.0)
    with pytest.raises((TypeError, ValueError), match="use_scale"):
        L.AdditiveAttention(use_scale="yes")
    with pytest.raises(TypeError, match="seed"):
        L.Attention(seed="x")
    q, v = pg.Input((3, 4)), pg.Input((5, 4))
    with pytest.raises(ValueError, match=r"\[query, value\]"):
        L.Attention()([q, v, v, v])
    with pytest.raises(ValueError, match=r"\[query, value\]"):
        L.Attention()([q])
    with pytest.raises(ValueError, match="same number of steps"):
        L.Attention()([q, v, pg.Input((6, 4))])
    with pytest.raises(ValueError, match="last dimensions"):
        L.Attention()([q, pg.Input((5, 3))])
    with pytest.raises(ValueError, match="last dimensions"):
        L.AdditiveAttention()([q, v, pg.Input((5, 2))])
    with pytest.raises(ValueError, match=r"\(batch, steps, dim\)"):
        L.Attention()([pg.Input((4,)), pg.Input((4,))])
    with pytest.raises(TypeError, match="unexpected call arguments"):
        L.Attention()([q, v], attention_mask=None)
    with pytest.raises(TypeError, match="use_causal_mask"):
        L.Attention()([q, v], use_causal_mask="yes")
    with pytest.raises(ValueError, match="mask must be a list"):
        L.Attention()([q, v], mask=np.ones((2, 3)))
    a = np.zeros((2, 3, 4), np.float32)
    b = np.zeros((2, 5, 4), np.float32)
    with pytest.raises(TypeError, match="model nodes"):
        L.Attention()([a, b], mask=[pg.Input((3,)), None])
    with pytest.raises(TypeError, match="model nodes"):
        L.Attention()([q, v], mask=[pg.Input((3,)), np.ones((2, 5))])
    with pytest.raises(ValueError, match=r"value mask must have shape \(batch, steps\) = \(None, 5\)"):
        L.Attention()([q, v], mask=[None, pg.Input((4,))])
    with pytest.raises(ValueError, match=r"query mask must have shape"):
        L.Attention()([q, v], mask=[pg.Input((3, 2)), None])
    with pytest.raises(ValueError, match=r"value mask must have shape \(2, 5\)"):
        L.Attention()([a, b], mask=[None, np.ones((2, 4))])
    with pytest.raises(TypeError, match="booleans or numbers"):
        L.Attention()([a, b], mask=[np.array([["x"] * 3] * 2), None])
    with pytest.raises(TypeError):
        L.Attention()(a, b)
    with pytest.raises(ValueError, match="same batch size"):
        L.Attention()([np.zeros((4, 3, 4)), b])                 # ggml would broadcast 2 over 4
    with pytest.raises(ValueError, match="same batch size"):
        L.AdditiveAttention()([a, b, np.zeros((3, 5, 4))])        # (a batch of 1 broadcasts, as Keras's)


def test_group_normalization_bad_arguments_are_refused():
    for bad, err in ((0, ValueError), (-2, ValueError), (2.5, ValueError), ("4", ValueError)):   # Keras's types
        with pytest.raises(err, match="groups"):
            L.GroupNormalization(groups=bad)
    with pytest.raises(ValueError, match="batch"):
        L.GroupNormalization(axis=0)
    with pytest.raises(ValueError, match="epsilon"):
        L.GroupNormalization(epsilon=0)
    with pytest.raises(ValueError):
        L.GroupNormalization(gamma_initializer="nope")
    with pytest.raises(ValueError, match="cannot be more than the number of channels"):
        L.GroupNormalization(groups=8)(pg.Input((4,)))
    with pytest.raises(ValueError, match="multiple of the number of groups"):
        L.GroupNormalization(groups=4)(pg.Input((6,)))
    with pytest.raises(ValueError, match="out of range"):
        L.GroupNormalization(groups=2, axis=3)(pg.Input((4, 6)))
    with pytest.raises(ValueError, match="defined dimension"):
        L.GroupNormalization(groups=2)(pg.Input((3, None)))


def test_einsum_dense_bad_equations_and_arguments_are_refused():
    inp = pg.Input((4, 5))
    with pytest.raises(ValueError, match="invalid equation"):
        L.EinsumDense("abc->abd", 3)
    with pytest.raises(ValueError, match="invalid equation"):
        L.EinsumDense("abc,cd,de->abe", 3)
    with pytest.raises(TypeError, match="equation"):
        L.EinsumDense(3, 3)
    with pytest.raises(ValueError, match="repeats a letter"):
        L.EinsumDense("abb,bc->ac", 3)
    with pytest.raises(TypeError, match="output_shape"):
        L.EinsumDense("ab,bc->ac", None)
    with pytest.raises(ValueError, match="output_shape"):
        L.EinsumDense("ab,bc->ac", 0)
    with pytest.raises(ValueError, match="not part of the output"):
        L.EinsumDense("abc,cd->abd", (4, 3), bias_axes="c")
    with pytest.raises(TypeError, match="bias_axes"):
        L.EinsumDense("abc,cd->abd", (4, 3), bias_axes=1)
    with pytest.raises(ValueError, match="lora_rank"):
        L.EinsumDense("ab,bc->ac", 3, lora_rank=-4)
    with pytest.raises(ValueError, match="has 3 input letters"):
        L.EinsumDense("abc,cd->abd", (4, 3))(pg.Input((5,)))
    with pytest.raises(ValueError, match="output_shape .* has 1 entries"):
        L.EinsumDense("abc,cd->abd", 3)(inp)
    with pytest.raises(ValueError, match="do not match at shared dimension 'b'"):
        L.EinsumDense("abc,cd->abd", (7, 3))(inp)
    with pytest.raises(ValueError, match="weight dimension 'e'"):
        L.EinsumDense("abc,cde->abd", (4, 3))(inp)
    with pytest.raises(ValueError, match="neither the input"):
        L.EinsumDense("abc,cd->abde", (4, 3, 2))(inp)
    with pytest.raises(ValueError, match="sum over the input alone"):
        L.EinsumDense("abc,cd->ad", 3)(inp)
    with pytest.raises(ValueError, match="batch"):
        L.EinsumDense("abc,ad->abd", (4, 3))(inp)
    with pytest.raises(ValueError, match="batch"):
        L.EinsumDense("abc,cd->bad", (4, 3))(inp)
    with pytest.raises(ValueError, match="at most 2"):
        L.EinsumDense("abcd,bcd->abcd", (4, 2, 3))(pg.Input((4, 2, 3)))
    with pytest.raises(ValueError, match="unknown size"):
        L.EinsumDense("abc,cd->abd", (None, 3))(pg.Input((4, None)))


def test_attention_output_shapes():
    q, v, k = pg.Input((3, 4)), pg.Input((5, 6)), pg.Input((5, 4))
    layer = L.Attention()
    assert layer([q, v, k]).shape == (None, 3, 6)
    assert layer.compute_output_shape([(None, 3, 4), (None, 5, 6), (None, 5, 4)]) == (None, 3, 6)
    out, scores = L.AdditiveAttention()([q, v, k], return_attention_scores=True)
    assert (out.shape, scores.shape) == ((None, 3, 6), (None, 3, 5))
    assert L.Attention()(pg.Input((None, 4))).shape == (None, None, 4)


def test_self_attention_in_a_sequential_takes_the_embedding_mask():
    # beyond Keras: one input is self-attention, so a Sequential can hold the layer
    m = pg.Sequential([L.Embedding(10, 3, mask_zero=True, name="emb"), L.Attention(use_scale=True, name="att")],
                      input_shape=(5,))
    m.compile(loss="mse", seed=0)
    w = _set_random(m, np.random.default_rng(11))
    x = np.array([[1, 2, 0, 0, 0], [3, 4, 5, 6, 0]], np.int32)
    e = w["emb.weight"][x].astype(np.float64)
    ref = attention_np(e, e, None, "dot", w["att.scale"].astype(np.float64), None, x != 0, x != 0)
    np.testing.assert_allclose(m.predict(x), ref, rtol=1e-5, atol=1e-6)
    m.free()


@pytest.mark.parametrize("make", [L.Attention, L.AdditiveAttention])
def test_keras_docs_example_trains_on_variable_length_sequences(make):
    # the model of Keras's Attention docs: a shared Embedding and Conv1D encode query and value
    # tokens of any length; attention, pooling, concatenation; here on a toy task (is the
    # query's first token among the value's?)
    pg.set_seed(0)
    query_input, value_input = pg.Input(shape=(None,), dtype="int32"), pg.Input(shape=(None,), dtype="int32")
    token_embedding = L.Embedding(input_dim=20, output_dim=8)
    cnn_layer = L.Conv1D(filters=8, kernel_size=3, padding="same")
    query_seq_encoding = cnn_layer(token_embedding(query_input))
    value_seq_encoding = cnn_layer(token_embedding(value_input))
    query_value_attention_seq = make()([query_seq_encoding, value_seq_encoding])
    assert query_value_attention_seq.shape == (None, None, 8)
    query_encoding = L.GlobalAveragePooling1D()(query_seq_encoding)
    query_value_attention = L.GlobalAveragePooling1D()(query_value_attention_seq)
    h = L.Concatenate()([query_encoding, query_value_attention])
    m = pg.Model([query_input, value_input], L.Dense(1, activation="sigmoid")(h))
    m.compile(optimizer=pg.optimizers.Adam(learning_rate=0.01), loss="binary_crossentropy")
    rng = np.random.default_rng(0)
    q, v = rng.integers(1, 20, size=(128, 6)), rng.integers(1, 20, size=(128, 7))
    y = np.array([[float(q[i, 0] in v[i])] for i in range(128)])
    hist = m.fit([q, v], y, epochs=30, batch_size=32, verbose=0).history["loss"]
    assert hist[-1] < 0.7 * hist[0]
    assert m.predict([q[:3, :4], v[:3, :9]]).shape == (3, 1)       # other lengths
    m.free()


def _penalized_step(layer, in_shape, forward, penalty, project, lr=0.1):
    """One SGD step of ``layer`` alone in a Sequential on mse plus penalties equals
    PyTorch's step (float64), then the constraints' numpy projection."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(12)
    m = pg.Sequential([layer], input_shape=in_shape).compile(optimizer=pg.optimizers.SGD(lr), loss="mse")
    w0 = _set_random(m, rng)
    x = rng.normal(size=(4,) + in_shape).astype(np.float32)
    y = rng.normal(size=m.predict(x).shape)
    wt = {k.split(".", 1)[1]: torch.tensor(v, dtype=torch.float64, requires_grad=True) for k, v in w0.items()}
    out = forward(wt, torch.tensor(x, dtype=torch.float64))
    data = ((out - torch.tensor(y)) ** 2).mean()
    loss = data + penalty(wt)
    loss.backward()
    assert loss.item() > 1.001 * data.item()
    np.testing.assert_allclose(m.fit(x, y, batch_size=4, verbose=0).history["loss"][0], loss.item(), rtol=1e-5)
    want = project({k: (v - lr * v.grad).detach().numpy() for k, v in wt.items()})
    got = m.get_weights()
    for k, v in want.items():
        np.testing.assert_allclose(got[f"{layer.name}.{k}"], v, rtol=1e-5, atol=1e-6, err_msg=k)
    cfg = layer.get_config()
    assert type(layer).from_config(json.loads(json.dumps(cfg))).get_config() == json.loads(json.dumps(cfg))
    m.free()


def test_einsum_dense_regularizers_and_constraints():
    import torch

    def max_norm(w, limit=0.5):                         # Keras's MaxNorm over axis 0
        n = np.sqrt((w ** 2).sum(axis=0, keepdims=True))
        return w * np.clip(n, 0, limit) / (1e-7 + n)
    layer = L.EinsumDense("abc,cde->abde", (3, 2, 2), bias_axes="de", kernel_regularizer=pg.regularizers.L2(0.05),
                          bias_regularizer=pg.regularizers.L1(0.1), kernel_constraint=pg.constraints.MaxNorm(0.5),
                          name="ed")
    _penalized_step(layer, (3, 4),
                    lambda w, x: torch.einsum("abc,cde->abde", x, w["kernel"]) + w["bias"],
                    lambda w: 0.05 * (w["kernel"] ** 2).sum() + 0.1 * w["bias"].abs().sum(),
                    lambda w: dict(w, kernel=max_norm(w["kernel"])))


def test_group_normalization_regularizers_and_constraints():
    import torch
    layer = L.GroupNormalization(2, gamma_regularizer=pg.regularizers.L2(0.2), beta_regularizer="l1",
                                 beta_constraint="non_neg", name="gn")

    def forward(w, x):
        gn = torch.nn.functional.group_norm(x.permute(0, 2, 1).contiguous(), 2, w["weight"], w["bias"], eps=1e-3)
        return gn.permute(0, 2, 1)
    _penalized_step(layer, (3, 4), forward,
                    lambda w: 0.2 * (w["weight"] ** 2).sum() + 0.01 * w["bias"].abs().sum(),
                    lambda w: dict(w, bias=np.maximum(w["bias"], 0)))
