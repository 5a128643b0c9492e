"""Keras 3.15's MultiHeadAttention / GroupedQueryAttention options (use_gate, sliding_window,
flash_attention, seed) and Keras's mask rules, against real Keras's numbers.

The ``KERAS`` literals at the end were computed once with real Keras 3.15.1 (torch backend):
the same table of cases (``keras.layers.MultiHeadAttention`` / ``GroupQueryAttention`` with the
same arguments, and the same Embedding(mask_zero=True) functional model), the same inputs and
weights (the numpy default_rng draws below, given to Keras with ``set_weights``), outputs and
attention scores printed to 7 decimals.
"""

import numpy as np
import pytest

import pyggml as pg

# every test on both graph forms: pyggml's fused CPU ops and the composed ones (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("graph_path")

L = pg.layers
GQA = L.GroupedQueryAttention

# the query's (2, 4), the value's (2, 5) padding masks, and a key mask, as given to Keras
VM = np.array([[1, 1, 1, 0, 0], [0, 1, 1, 1, 1]], bool)
KM = np.array([[1, 0, 1, 1, 1], [1, 1, 1, 1, 0]], bool)
QM = np.array([[1, 1, 0, 0], [1, 1, 1, 1]], bool)
TOK_Q = np.array([[1, 2, 0, 0], [3, 0, 4, 5]])
TOK_V = np.array([[1, 2, 3, 0, 0], [0, 4, 5, 6, 7]])


def _data():
    rng = np.random.default_rng(7)
    q = rng.normal(size=(2, 4, 3)).astype(np.float32)
    v = rng.normal(size=(2, 5, 3)).astype(np.float32)
    x = rng.normal(size=(2, 5, 3)).astype(np.float32)
    return q, v, x


def _weights(shapes, seed):
    """The weights given to both Keras's layer and pyggml's (Keras's layouts and order)."""
    rng = np.random.default_rng(seed)
    return [(0.6 * rng.normal(size=s)).astype(np.float32) for s in shapes]


def _attention_mask():
    am = np.ones((2, 4, 5), bool)
    am[0, 1, :2] = False
    am[1, :, 4] = False
    return am


# name: (layer, which inputs, call arguments, weight seed) -- as in the Keras script
def _cases():
    q, v, x = _data()
    return {
        "gate": (lambda: L.MultiHeadAttention(2, 2, value_dim=3, use_gate=True), (q, v),
                 dict(return_attention_scores=True), 1),
        "gate_plain": (lambda: L.MultiHeadAttention(2, 2, value_dim=3, use_gate=True), (q, v), {}, 1),
        "gate_nobias_out5": (lambda: L.MultiHeadAttention(2, 2, use_gate=True, use_bias=False, output_shape=5),
                             (q, v), {}, 2),
        "sw1_self_causal": (lambda: L.MultiHeadAttention(2, 2, sliding_window=1), (x, x),
                            dict(use_causal_mask=True, return_attention_scores=True), 3),
        "sw2_self_causal": (lambda: L.MultiHeadAttention(2, 2, sliding_window=2), (x, x),
                            dict(use_causal_mask=True, return_attention_scores=True), 3),
        "sw3_self_causal": (lambda: L.MultiHeadAttention(2, 2, sliding_window=3), (x, x),
                            dict(use_causal_mask=True, return_attention_scores=True), 3),
        "sw2_cross": (lambda: L.MultiHeadAttention(2, 2, sliding_window=2), (q, v),
                      dict(return_attention_scores=True), 4),
        "sw2_cross_fast": (lambda: L.MultiHeadAttention(2, 2, sliding_window=2), (q, v), {}, 4),
        # rows that see no key: all zeros where Keras returns the scores, uniform on its fused path
        "sw2_vm_km_causal_scores": (lambda: L.MultiHeadAttention(2, 2, sliding_window=2), (q, v, v),
                                    dict(value_mask=VM, key_mask=KM, use_causal_mask=True,
                                         return_attention_scores=True), 5),
        "sw2_vm_km_causal_fast": (lambda: L.MultiHeadAttention(2, 2, sliding_window=2), (q, v, v),
                                  dict(value_mask=VM, key_mask=KM, use_causal_mask=True), 5),
        "sw3_am_gate": (lambda: L.MultiHeadAttention(2, 2, sliding_window=3, use_gate=True), (q, v),
                        dict(attention_mask=_attention_mask(), return_attention_scores=True), 6),
        # Keras's MultiHeadAttention reads the query's own mask, never its query_mask argument
        "query_mask_ignored": (lambda: L.MultiHeadAttention(2, 2), (q, v), dict(query_mask=QM, value_mask=VM), 7),
        "gqa_gate_sw_causal": (lambda: GQA(2, 4, 2, sliding_window=2, use_gate=True), (x, x),
                               dict(use_causal_mask=True, return_attention_scores=True), 8),
        # GroupedQueryAttention does use its query_mask argument
        "gqa_gate_sw_qm_fast": (lambda: GQA(2, 4, 2, sliding_window=2, use_gate=True), (q, v),
                                dict(query_mask=np.array([[1, 1, 0, 1], [1, 1, 1, 1]], bool), value_mask=VM), 9),
    }


def _check(got, want):
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", list(_cases()))
def test_outputs_and_scores_match_keras(name):
    make, args, call, seed = _cases()[name]
    want = KERAS[name]
    layer = make()
    layer(*args)
    w = layer.get_weights()
    assert [w[i].shape for i in range(len(w))] == want["shapes"]        # Keras's weights, in Keras's order
    layer.set_weights(_weights(want["shapes"], seed))
    res = layer(*args, **call)
    if "scores" in want:
        _check(res[0], want["out"])
        _check(res[1], want["scores"])
    else:
        _check(res, want["out"])


def test_gate_weights_are_named_and_change_the_output():
    q, v, _ = _data()
    m = L.MultiHeadAttention(2, 2, value_dim=3, use_gate=True)
    m(q, v)
    assert list(m.get_weights().keys())[4:6] == ["gate_proj.weight", "gate_proj.bias"]
    assert m.get_weights()["gate_proj.weight"].shape == (6, 3)         # (heads * value_dim, query features)
    m.set_weights(_weights(KERAS["gate"]["shapes"], 1))
    plain = L.MultiHeadAttention(2, 2, value_dim=3)
    plain(q, v)
    ws = _weights(KERAS["gate"]["shapes"], 1)
    plain.set_weights(ws[:4] + ws[6:])
    assert np.abs(np.asarray(plain(q, v)) - np.asarray(m(q, v))).max() > 1e-2
    g = GQA(2, 4, 2, use_gate=True, use_bias=False)
    g(q, v)
    assert list(g.get_weights().keys()) == ["q_proj.weight", "k_proj.weight", "gate_proj.weight",
                                            "v_proj.weight", "out_proj.weight"]


def test_sliding_window_several_sizes_against_a_numpy_band():
    _, _, x = _data()
    for w in (1, 2, 4, 9):
        m = L.MultiHeadAttention(1, 2, sliding_window=w)
        _, scores = m(x, x, value_mask=VM, return_attention_scores=True)
        i, j = np.arange(5)[:, None], np.arange(5)[None, :]
        allowed = (np.abs(i - j) < w)[None] & VM[:, None, :]
        s = np.asarray(scores)[:, 0]
        assert np.all(s[~allowed] == 0)
        np.testing.assert_allclose(s.sum(-1), allowed.any(-1).astype(np.float32), rtol=1e-5, atol=1e-6)
    # a window wider than the sequence is full attention
    full = L.MultiHeadAttention(1, 2)
    wide = L.MultiHeadAttention(1, 2, sliding_window=5)
    full(x, x)
    wide(x, x)
    wide.set_weights(full.get_weights())
    np.testing.assert_array_equal(np.asarray(wide(x, x)), np.asarray(full(x, x)))


@pytest.mark.parametrize("sw", [None, 2])
@pytest.mark.parametrize("scores", [True, False])
def test_masks_carried_by_an_embedding_match_keras(sw, scores):
    want = KERAS[f"embedding_sw{sw}_{'scores' if scores else 'fast'}"]
    tq, tv = pg.Input((4,), dtype="int32"), pg.Input((5,), dtype="int32")
    emb = L.Embedding(10, 3, mask_zero=True)
    r = L.MultiHeadAttention(2, 2, sliding_window=sw, use_gate=True)(emb(tq), emb(tv),
                                                                       return_attention_scores=scores)
    model = pg.Model([tq, tv], list(r) if scores else r)
    model.set_weights(_weights(want["shapes"], 10))
    res = model.predict([TOK_Q, TOK_V], verbose=0)
    if scores:
        _check(res[0], want["out"])
        _check(res[1], want["scores"])
    else:
        _check(res, want["out"])
    model.free()


def test_flash_attention_changes_nothing_and_refuses_what_keras_refuses():
    q, v, _ = _data()
    ref = L.MultiHeadAttention(2, 2, sliding_window=2)
    ref(q, v)
    for flash in (True, False, None):
        m = L.MultiHeadAttention(2, 2, sliding_window=2, flash_attention=flash)
        m(q, v)
        m.set_weights(ref.get_weights())
        np.testing.assert_array_equal(np.asarray(m(q, v, use_causal_mask=True)),
                                      np.asarray(ref(q, v, use_causal_mask=True)))
    with pytest.raises(ValueError, match="flash_attention"):
        L.MultiHeadAttention(2, 2, flash_attention=True)(q, v, return_attention_scores=True)
    with pytest.raises(ValueError, match="dropout"):
        L.MultiHeadAttention(2, 2, flash_attention=True, dropout=0.1)
    with pytest.raises(ValueError, match="flash_attention"):
        GQA(2, 2, 1, flash_attention=True)(q, v, return_attention_scores=True)
    with pytest.raises(ValueError, match="dropout"):
        GQA(2, 2, 1, flash_attention=True, dropout=0.1)


@pytest.mark.parametrize("cls", ["mha", "gqa"])
def test_seed_seeds_the_attention_dropout(cls):
    _, _, x = _data()

    def make(seed):
        if cls == "mha":
            return L.MultiHeadAttention(2, 2, dropout=0.5, seed=seed)
        return GQA(2, 2, 1, dropout=0.5, seed=seed)
    a, b, c = make(3), make(3), make(4)
    for m in (a, b, c):
        m(x)
    b.set_weights(a.get_weights())
    c.set_weights(a.get_weights())
    ya, yb, yc = (np.asarray(m(x, training=True)) for m in (a, b, c))
    np.testing.assert_array_equal(ya, yb)                   # one seed, one mask
    assert np.abs(ya - yc).max() > 1e-4                     # another seed, another mask
    assert np.abs(ya - np.asarray(a(x))).max() > 1e-4       # dropout did act while training
    np.testing.assert_array_equal(np.asarray(a(x)), np.asarray(b(x)))   # none in inference


@pytest.mark.parametrize("cls", ["mha", "gqa"])
def test_fit_trains_the_gate(cls):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(16, 5, 4)).astype(np.float32)
    y = np.tanh(x[:, ::-1] * 0.8).astype(np.float32)
    inp = pg.Input((5, 4))
    att = (L.MultiHeadAttention(2, 3, use_gate=True, sliding_window=3) if cls == "mha"
           else GQA(2, 4, 2, use_gate=True, sliding_window=3))
    model = pg.Model(inp, att(inp, inp, use_causal_mask=True))
    model.compile(optimizer=pg.optimizers.Adam(0.02), loss="mse")
    before = att.get_weights()["gate_proj.weight"].copy()
    hist = model.fit(x, y, epochs=6, batch_size=8, verbose=0)
    losses = hist.history["loss"]
    assert losses[-1] < losses[0]
    assert np.abs(att.get_weights()["gate_proj.weight"] - before).max() > 1e-3
    model.free()


def test_symbolic_output_shapes():
    q, v = pg.Input((4, 3)), pg.Input((5, 3))
    out, scores = L.MultiHeadAttention(2, 2, use_gate=True, sliding_window=2, output_shape=7)(
        q, v, return_attention_scores=True)
    assert out.shape == (None, 4, 7) and scores.shape == (None, 2, 4, 5)
    out = GQA(2, 4, 2, use_gate=True, sliding_window=2)(q, v)
    assert out.shape == (None, 4, 3)
    m = L.MultiHeadAttention(2, 2, use_gate=True, sliding_window=2)
    assert m.compute_output_shape([(None, 4, 3), (None, 5, 3)]) == (None, 4, 3)


@pytest.mark.parametrize("cls", ["mha", "gqa"])
def test_config_round_trip(cls):
    q, v, _ = _data()
    kw = dict(sliding_window=2, flash_attention=False, use_gate=True, seed=5)
    layer = L.MultiHeadAttention(2, 2, **kw) if cls == "mha" else GQA(2, 4, 2, **kw)
    cfg = layer.get_config()
    for k, val in kw.items():
        assert cfg[k] == val
    again = type(layer).from_config(cfg)
    for k, val in kw.items():
        assert getattr(again, k) == val
    assert again.get_config() == cfg
    layer(q, v)
    again(q, v)
    again.set_weights(layer.get_weights())
    np.testing.assert_array_equal(np.asarray(again(q, v, use_causal_mask=True)),
                                  np.asarray(layer(q, v, use_causal_mask=True)))
    plain = (L.MultiHeadAttention(2, 2) if cls == "mha" else GQA(2, 4, 2)).get_config()
    assert (plain["sliding_window"], plain["use_gate"], plain["seed"]) == (None, False, None)
    assert "flash_attention" not in plain          # (Keras 3.15's config names it only when set)


def test_save_and_load_keep_the_options(tmp_path):
    _, _, x = _data()
    inp = pg.Input((5, 3))
    h = L.MultiHeadAttention(2, 2, use_gate=True, sliding_window=2, flash_attention=False, seed=3,
                             dropout=0.1)(inp, inp, use_causal_mask=True)
    out = GQA(2, 4, 2, use_gate=True, sliding_window=3, seed=1)(h)
    model = pg.Model(inp, out)
    want = model.predict(x, verbose=0)
    path = str(tmp_path / "att.gguf")
    model.save(path)
    again = pg.models.load_model(path)
    np.testing.assert_array_equal(again.predict(x, verbose=0), want)
    cfgs = [lay.get_config() for lay in again.layers if isinstance(lay, L.MultiHeadAttention)]
    assert [(c["use_gate"], c["sliding_window"], c.get("flash_attention"), c["seed"]) for c in cfgs] == [
        (True, 2, False, 3), (True, 3, None, 1)]
    again.free()
    model.free()


@pytest.mark.parametrize("cls", ["mha", "gqa"])
def test_bad_values_are_refused(cls):
    def make(**kw):
        return L.MultiHeadAttention(2, 2, **kw) if cls == "mha" else GQA(2, 2, 1, **kw)
    for sw in (0, -1, 2.0, "2", True, [2]):
        with pytest.raises(ValueError, match="sliding_window"):
            make(sliding_window=sw)
    for name, bad in (("flash_attention", "yes"), ("use_gate", 1), ("use_gate", None), ("seed", 1.5),
                      ("seed", "1")):
        with pytest.raises(TypeError, match=name):
            make(**{name: bad})
    with pytest.raises(ValueError, match="seed"):
        make(seed=-1)


def test_sliding_window_with_four_dimensional_inputs_is_refused():
    x = np.zeros((2, 3, 4, 5), np.float32)
    with pytest.raises(ValueError, match="sliding_window"):
        L.MultiHeadAttention(2, 2, sliding_window=2)(x, x)


# --- Keras 3.15.1's numbers (torch backend), computed once ------------------------------------
KERAS = {
    'gate': dict(
        shapes=[(3, 2, 2), (2, 2), (3, 2, 2), (2, 2), (3, 2, 3), (2, 3), (3, 2, 3), (2, 3), (2, 3, 3), (3,)],
        out=np.array([[[-0.6246593,  0.0981954, -0.4380039],
      [-0.5783803,  0.0458296, -0.1951963],
      [-0.4565078,  0.1748287, -0.9037874],
      [-0.4001394,  0.1197249, -0.4135574]],
     [[-1.9181534, -0.0876588,  0.548239 ],
      [-1.9875135, -0.1051398,  0.5490133],
      [-2.1252832, -0.1861144,  0.9005108],
      [-2.0068164, -0.0999523,  0.6091264]]], np.float32),
        scores=np.array([[[[0.093641 , 0.2998356, 0.1839419, 0.2007477, 0.2218338],
       [0.0041759, 0.6257765, 0.0677352, 0.1155624, 0.1867501],
       [0.3410831, 0.1260447, 0.1977097, 0.1758573, 0.1593052],
       [0.0968113, 0.2949888, 0.1789682, 0.2029386, 0.226293 ]],
      [[0.2306633, 0.1948413, 0.1903996, 0.18532  , 0.1987758],
       [0.2269273, 0.1803473, 0.1822113, 0.2042017, 0.2063124],
       [0.2583853, 0.1937507, 0.1841995, 0.1689006, 0.194764 ],
       [0.2458269, 0.1577604, 0.163887 , 0.2181472, 0.2143785]]],
     [[[0.0837273, 0.4468054, 0.08943  , 0.2198823, 0.1601551],
       [0.073668 , 0.4813048, 0.0804018, 0.2102944, 0.1543309],
       [0.0091468, 0.7857668, 0.0099824, 0.1477745, 0.0473295],
       [0.0609942, 0.5193142, 0.0655825, 0.2158049, 0.1383042]],
      [[0.1992769, 0.2022913, 0.1994033, 0.1980086, 0.20102  ],
       [0.2042318, 0.2421235, 0.1788267, 0.1549467, 0.2198713],
       [0.1926062, 0.1623444, 0.2172355, 0.249381 , 0.1784329],
       [0.1834732, 0.1827069, 0.2146225, 0.2309789, 0.1882184]]]], np.float32),
    ),
    'gate_plain': dict(
        shapes=[(3, 2, 2), (2, 2), (3, 2, 2), (2, 2), (3, 2, 3), (2, 3), (3, 2, 3), (2, 3), (2, 3, 3), (3,)],
        out=np.array([[[-0.6246594,  0.0981954, -0.4380038],
      [-0.5783803,  0.0458296, -0.1951963],
      [-0.4565079,  0.1748287, -0.9037875],
      [-0.4001395,  0.1197249, -0.4135574]],
     [[-1.9181534, -0.0876588,  0.548239 ],
      [-1.9875135, -0.1051398,  0.5490134],
      [-2.1252832, -0.1861144,  0.9005108],
      [-2.0068164, -0.0999522,  0.6091264]]], np.float32),
    ),
    'gate_nobias_out5': dict(
        shapes=[(3, 2, 2), (3, 2, 2), (3, 2, 2), (3, 2, 2), (2, 2, 5)],
        out=np.array([[[-0.3441381, -0.1622798,  0.2812133, -0.1332715,  0.4922636],
      [-0.5524196, -0.0196547,  0.254245 , -0.3837538,  0.5020158],
      [-0.1635448, -0.258159 ,  0.3103081,  0.0778712,  0.4351468],
      [-0.3604448, -0.1204688,  0.3328481, -0.0906455,  0.54627  ]],
     [[ 0.2153942,  0.0181075,  0.1829861,  0.3824023, -0.074352 ],
      [ 0.2378593,  0.0089465,  0.2320374,  0.4850025,  0.0485474],
      [ 0.0271154,  0.2110837, -0.2940667, -0.3831463, -0.7941791],
      [ 0.2152165,  0.0464717,  0.1564417,  0.3519886, -0.1311134]]], np.float32),
    ),
    'sw1_self_causal': dict(
        shapes=[(3, 2, 2), (2, 2), (3, 2, 2), (2, 2), (3, 2, 2), (2, 2), (2, 2, 3), (3,)],
        out=np.array([[[-0.949651 , -1.0229121, -0.3375149],
      [-1.2810172, -1.3680856, -0.0828881],
      [-2.2732866,  0.4572601, -0.341773 ],
      [-1.6180854, -0.3134262, -0.5686454],
      [-2.2655005, -0.9892997,  0.0101622]],
     [[-2.0530939, -1.5809491, -0.2560285],
      [-0.5125419, -0.2106618, -0.5590969],
      [-2.8826215,  0.5548921, -0.1964478],
      [-0.3188611, -1.9946594, -0.2710661],
      [-1.2489696, -0.7494335, -0.3692423]]], np.float32),
        scores=np.array([[[[1., 0., 0., 0., 0.],
       [0., 1., 0., 0., 0.],
       [0., 0., 1., 0., 0.],
       [0., 0., 0., 1., 0.],
       [0., 0., 0., 0., 1.]],
      [[1., 0., 0., 0., 0.],
       [0., 1., 0., 0., 0.],
       [0., 0., 1., 0., 0.],
       [0., 0., 0., 1., 0.],
       [0., 0., 0., 0., 1.]]],
     [[[1., 0., 0., 0., 0.],
       [0., 1., 0., 0., 0.],
       [0., 0., 1., 0., 0.],
       [0., 0., 0., 1., 0.],
       [0., 0., 0., 0., 1.]],
      [[1., 0., 0., 0., 0.],
       [0., 1., 0., 0., 0.],
       [0., 0., 1., 0., 0.],
       [0., 0., 0., 1., 0.],
       [0., 0., 0., 0., 1.]]]], np.float32),
    ),
    'sw2_self_causal': dict(
        shapes=[(3, 2, 2), (2, 2), (3, 2, 2), (2, 2), (3, 2, 2), (2, 2), (2, 2, 3), (3,)],
        out=np.array([[[-0.949651 , -1.0229121, -0.3375149],
      [-1.053273 , -1.1244546, -0.2566395],
      [-1.64645  , -0.2950282, -0.2920559],
      [-1.8958778,  0.0085644, -0.4735148],
      [-1.5822827, -0.3124915, -0.5547901]],
     [[-2.0530939, -1.5809491, -0.2560285],
      [-1.836325 , -0.4650143, -0.2764372],
      [-1.6243882,  0.2962918, -0.4520814],
      [-1.2820473, -0.1223826, -0.454924 ],
      [-0.7629129, -1.3210181, -0.3397001]]], np.float32),
        scores=np.array([[[[1.       , 0.       , 0.       , 0.       , 0.       ],
       [0.6584051, 0.3415949, 0.       , 0.       , 0.       ],
       [0.       , 0.4060325, 0.5939675, 0.       , 0.       ],
       [0.       , 0.       , 0.4147214, 0.5852786, 0.       ],
       [0.       , 0.       , 0.       , 0.9108734, 0.0891267]],
      [[1.       , 0.       , 0.       , 0.       , 0.       ],
       [0.4915466, 0.5084534, 0.       , 0.       , 0.       ],
       [0.       , 0.523638 , 0.476362 , 0.       , 0.       ],
       [0.       , 0.       , 0.4325538, 0.5674462, 0.       ],
       [0.       , 0.       , 0.       , 0.6126416, 0.3873585]]],
     [[[1.       , 0.       , 0.       , 0.       , 0.       ],
       [0.2903403, 0.7096596, 0.       , 0.       , 0.       ],
       [0.       , 0.1518344, 0.8481656, 0.       , 0.       ],
       [0.       , 0.       , 0.7808387, 0.2191613, 0.       ],
       [0.       , 0.       , 0.       , 0.4550709, 0.5449291]],
      [[1.       , 0.       , 0.       , 0.       , 0.       ],
       [0.7565231, 0.2434769, 0.       , 0.       , 0.       ],
       [0.       , 0.4858058, 0.5141942, 0.       , 0.       ],
       [0.       , 0.       , 0.4773367, 0.5226633, 0.       ],
       [0.       , 0.       , 0.       , 0.4969033, 0.5030967]]]], np.float32),
    ),
    'sw3_self_causal': dict(
        shapes=[(3, 2, 2), (2, 2), (3, 2, 2), (2, 2), (3, 2, 2), (2, 2), (2, 2, 3), (3,)],
        out=np.array([[[-0.949651 , -1.0229121, -0.3375149],
      [-1.053273 , -1.1244546, -0.2566395],
      [-1.4093158, -0.5208511, -0.3114191],
      [-1.9612832, -0.6755947, -0.1827745],
      [-1.7586213,  0.087782 , -0.4849993]],
     [[-2.0530939, -1.5809491, -0.2560285],
      [-1.836325 , -0.4650143, -0.2764372],
      [-1.7957087, -0.1182134, -0.3912991],
      [-1.2869011, -0.0873343, -0.4363821],
      [-1.4240577, -0.6663564, -0.3099478]]], np.float32),
        scores=np.array([[[[1.       , 0.       , 0.       , 0.       , 0.       ],
       [0.6584051, 0.3415949, 0.       , 0.       , 0.       ],
       [0.3044604, 0.2824117, 0.4131279, 0.       , 0.       ],
       [0.       , 0.5000254, 0.2073502, 0.2926245, 0.       ],
       [0.       , 0.       , 0.5507384, 0.4092205, 0.0400412]],
      [[1.       , 0.       , 0.       , 0.       , 0.       ],
       [0.4915466, 0.5084534, 0.       , 0.       , 0.       ],
       [0.3338659, 0.3488131, 0.317321 , 0.       , 0.       ],
       [0.       , 0.2821299, 0.3105175, 0.4073526, 0.       ],
       [0.       , 0.       , 0.1083532, 0.5462599, 0.345387 ]]],
     [[[1.       , 0.       , 0.       , 0.       , 0.       ],
       [0.2903403, 0.7096596, 0.       , 0.       , 0.       ],
       [0.2278027, 0.1172461, 0.6549512, 0.       , 0.       ],
       [0.       , 0.3337407, 0.520241 , 0.1460182, 0.       ],
       [0.       , 0.       , 0.3550382, 0.2935034, 0.3514585]],
      [[1.       , 0.       , 0.       , 0.       , 0.       ],
       [0.7565231, 0.2434769, 0.       , 0.       , 0.       ],
       [0.376014 , 0.303136 , 0.32085  , 0.       , 0.       ],
       [0.       , 0.0433916, 0.4566242, 0.499984 , 0.       ],
       [0.       , 0.       , 0.320758 , 0.3375176, 0.3417245]]]], np.float32),
    ),
    'sw2_cross': dict(
        shapes=[(3, 2, 2), (2, 2), (3, 2, 2), (2, 2), (3, 2, 2), (2, 2), (2, 2, 3), (3,)],
        out=np.array([[[-0.6119676,  1.5251082,  0.5714815],
      [ 0.373385 ,  1.2164928,  0.5382903],
      [ 0.0486117,  1.2285198,  0.8403847],
      [-0.1156515,  1.3178985,  0.8667594]],
     [[ 1.0003452,  0.2486245,  0.9139086],
      [ 1.0455616,  0.3298353,  1.0066117],
      [ 0.959285 ,  0.0552116,  1.242991 ],
      [ 0.7434411,  0.5872499,  1.2451364]]], np.float32),
        scores=np.array([[[[0.5720642, 0.4279357, 0.       , 0.       , 0.       ],
       [0.009453 , 0.3524109, 0.6381361, 0.       , 0.       ],
       [0.       , 0.2757784, 0.2628053, 0.4614163, 0.       ],
       [0.       , 0.       , 0.2499872, 0.3238164, 0.4261964]],
      [[0.7215661, 0.2784339, 0.       , 0.       , 0.       ],
       [0.3962577, 0.3180549, 0.2856873, 0.       , 0.       ],
       [0.       , 0.2393162, 0.495453 , 0.2652307, 0.       ],
       [0.       , 0.       , 0.5743874, 0.2464342, 0.1791784]]],
     [[[0.1907999, 0.8092   , 0.       , 0.       , 0.       ],
       [0.0507359, 0.718922 , 0.230342 , 0.       , 0.       ],
       [0.       , 0.9382351, 0.0578101, 0.0039548, 0.       ],
       [0.       , 0.       , 0.3675029, 0.1387874, 0.4937097]],
      [[0.5397759, 0.4602241, 0.       , 0.       , 0.       ],
       [0.2655588, 0.254434 , 0.4800071, 0.       , 0.       ],
       [0.       , 0.5169412, 0.1653959, 0.317663 , 0.       ],
       [0.       , 0.       , 0.4621471, 0.1832221, 0.3546308]]]], np.float32),
    ),
    'sw2_cross_fast': dict(
        shapes=[(3, 2, 2), (2, 2), (3, 2, 2), (2, 2), (3, 2, 2), (2, 2), (2, 2, 3), (3,)],
        out=np.array([[[-0.6119677,  1.5251082,  0.5714815],
      [ 0.373385 ,  1.2164927,  0.5382903],
      [ 0.0486117,  1.2285198,  0.8403847],
      [-0.1156515,  1.3178984,  0.8667594]],
     [[ 1.0003452,  0.2486245,  0.9139087],
      [ 1.0455614,  0.3298353,  1.0066117],
      [ 0.9592848,  0.0552117,  1.242991 ],
      [ 0.7434411,  0.5872499,  1.2451364]]], np.float32),
    ),
    'sw2_vm_km_causal_scores': dict(
        shapes=[(3, 2, 2), (2, 2), (3, 2, 2), (2, 2), (3, 2, 2), (2, 2), (2, 2, 3), (3,)],
        out=np.array([[[ 0.3985804, -3.2421432,  0.8754227],
      [ 0.3985804, -3.2421432,  0.8754227],
      [-0.1877245, -1.2603254,  0.4466032],
      [-0.1877245, -1.2603254,  0.4466032]],
     [[ 0.5069956,  0.5044097, -0.3639669],
      [-0.1595494,  0.1504518, -1.708493 ],
      [ 0.1029327, -1.176672 , -0.9332513],
      [ 0.5846648, -2.4896963, -0.9087601]]], np.float32),
        scores=np.array([[[[1.       , 0.       , 0.       , 0.       , 0.       ],
       [1.       , 0.       , 0.       , 0.       , 0.       ],
       [0.       , 0.       , 1.       , 0.       , 0.       ],
       [0.       , 0.       , 1.       , 0.       , 0.       ]],
      [[1.       , 0.       , 0.       , 0.       , 0.       ],
       [1.       , 0.       , 0.       , 0.       , 0.       ],
       [0.       , 0.       , 1.       , 0.       , 0.       ],
       [0.       , 0.       , 1.       , 0.       , 0.       ]]],
     [[[0.       , 0.       , 0.       , 0.       , 0.       ],
       [0.       , 1.       , 0.       , 0.       , 0.       ],
       [0.       , 0.3662204, 0.6337796, 0.       , 0.       ],
       [0.       , 0.       , 0.4054558, 0.5945442, 0.       ]],
      [[0.       , 0.       , 0.       , 0.       , 0.       ],
       [0.       , 1.       , 0.       , 0.       , 0.       ],
       [0.       , 0.3784466, 0.6215534, 0.       , 0.       ],
       [0.       , 0.       , 0.5165811, 0.483419 , 0.       ]]]], np.float32),
    ),
    'sw2_vm_km_causal_fast': dict(
        shapes=[(3, 2, 2), (2, 2), (3, 2, 2), (2, 2), (3, 2, 2), (2, 2), (2, 2, 3), (3,)],
        out=np.array([[[ 0.3985804, -3.2421432,  0.8754227],
      [ 0.3985804, -3.2421432,  0.8754227],
      [-0.1877245, -1.2603254,  0.4466032],
      [-0.1877245, -1.2603254,  0.4466032]],
     [[ 0.2024578, -1.3155334, -1.1757903],
      [-0.1595494,  0.1504518, -1.708493 ],
      [ 0.1029327, -1.176672 , -0.9332513],
      [ 0.5846649, -2.4896955, -0.9087601]]], np.float32),
    ),
    'sw3_am_gate': dict(
        shapes=[(3, 2, 2), (2, 2), (3, 2, 2), (2, 2), (3, 2, 2), (2, 2), (3, 2, 2), (2, 2), (2, 2, 3), (3,)],
        out=np.array([[[-1.3006424, -0.177974 , -0.8354896],
      [-0.740466 ,  0.1865715, -0.8331305],
      [-1.5503998, -0.1128671, -0.8911874],
      [-0.6491288,  0.0037981, -0.6352329]],
     [[-0.2764062,  0.0267926, -0.7321911],
      [-0.2239958,  0.0811501, -0.6357608],
      [-0.4427293,  0.040853 , -0.534997 ],
      [-0.1589243,  0.1791193, -0.7205391]]], np.float32),
        scores=np.array([[[[3.6928231e-01, 3.2502741e-01, 3.0569029e-01, 0.0000000e+00, 0.0000000e+00],
       [0.0000000e+00, 0.0000000e+00, 3.4817907e-01, 6.5182090e-01, 0.0000000e+00],
       [8.6771005e-01, 2.3035932e-02, 3.2030459e-02, 2.5904609e-02, 5.1319078e-02],
       [0.0000000e+00, 2.7292809e-01, 2.2804895e-01, 2.6749852e-01, 2.3152444e-01]],
      [[7.6156145e-01, 1.3336180e-01, 1.0507669e-01, 0.0000000e+00, 0.0000000e+00],
       [0.0000000e+00, 0.0000000e+00, 3.4682402e-01, 6.5317601e-01, 0.0000000e+00],
       [7.2634649e-01, 3.3653397e-02, 1.9639775e-02, 6.8103768e-02, 1.5225659e-01],
       [0.0000000e+00, 2.0833386e-01, 1.4250199e-01, 2.6407871e-01, 3.8508543e-01]]],
     [[[6.2123857e-02, 5.9137416e-01, 3.4650204e-01, 0.0000000e+00, 0.0000000e+00],
       [5.3917006e-02, 3.6548850e-01, 2.3115671e-01, 3.4943780e-01, 0.0000000e+00],
       [2.0557960e-05, 6.3076472e-01, 5.8389384e-02, 3.1082538e-01, 0.0000000e+00],
       [0.0000000e+00, 4.4570598e-01, 1.8501720e-01, 3.6927691e-01, 0.0000000e+00]],
      [[3.4477654e-01, 3.0886084e-01, 3.4636265e-01, 0.0000000e+00, 0.0000000e+00],
       [2.7344713e-01, 2.2935389e-01, 2.9055154e-01, 2.0664735e-01, 0.0000000e+00],
       [3.2964566e-01, 1.6543037e-01, 1.7371003e-01, 3.3121398e-01, 0.0000000e+00],
       [0.0000000e+00, 3.9149791e-01, 3.4765831e-01, 2.6084381e-01, 0.0000000e+00]]]], np.float32),
    ),
    'query_mask_ignored': dict(
        shapes=[(3, 2, 2), (2, 2), (3, 2, 2), (2, 2), (3, 2, 2), (2, 2), (2, 2, 3), (3,)],
        out=np.array([[[ 0.3183739,  1.7410839,  0.1112808],
      [ 0.2147901,  1.8467922,  0.2043044],
      [ 0.4086531,  1.6922116,  0.0417355],
      [ 0.3925317,  1.7479711,  0.0356489]],
     [[-0.1194735,  1.6875241,  0.5870307],
      [-0.1090025,  1.655365 ,  0.6028576],
      [-0.0771591,  1.704504 ,  0.5838293],
      [-0.114278 ,  1.7098169,  0.5795603]]], np.float32),
    ),
    'gqa_gate_sw_causal': dict(
        shapes=[(3, 4, 2), (4, 2), (3, 2, 2), (2, 2), (3, 4, 2), (4, 2), (3, 2, 2), (2, 2), (4, 2, 3), (3,)],
        out=np.array([[[-0.5233302,  1.5042772, -0.0918018],
      [-0.5305955,  0.8738401, -0.554759 ],
      [-0.277185 ,  0.7230218, -0.4684311],
      [-0.3657877,  2.298198 , -0.1753575],
      [-0.4747238,  1.287878 ,  0.0367353]],
     [[-0.1159438,  2.7593749, -1.1430689],
      [-0.9144607,  2.4748521, -0.176863 ],
      [-0.6505317,  1.3147326,  0.4797838],
      [-0.5079589,  1.0647901, -0.6386848],
      [-0.5103697,  1.442193 , -0.1713657]]], np.float32),
        scores=np.array([[[[1.       , 0.       , 0.       , 0.       , 0.       ],
       [0.5039887, 0.4960113, 0.       , 0.       , 0.       ],
       [0.       , 0.4049178, 0.5950823, 0.       , 0.       ],
       [0.       , 0.       , 0.5670239, 0.4329761, 0.       ],
       [0.       , 0.       , 0.       , 0.7792813, 0.2207188]],
      [[1.       , 0.       , 0.       , 0.       , 0.       ],
       [0.4774671, 0.5225329, 0.       , 0.       , 0.       ],
       [0.       , 0.3873018, 0.6126982, 0.       , 0.       ],
       [0.       , 0.       , 0.6089037, 0.3910963, 0.       ],
       [0.       , 0.       , 0.       , 0.4173081, 0.5826918]],
      [[1.       , 0.       , 0.       , 0.       , 0.       ],
       [0.1315005, 0.8684995, 0.       , 0.       , 0.       ],
       [0.       , 0.9149569, 0.0850431, 0.       , 0.       ],
       [0.       , 0.       , 0.5514701, 0.4485299, 0.       ],
       [0.       , 0.       , 0.       , 0.0068809, 0.9931191]],
      [[1.       , 0.       , 0.       , 0.       , 0.       ],
       [0.4602799, 0.5397201, 0.       , 0.       , 0.       ],
       [0.       , 0.7745627, 0.2254374, 0.       , 0.       ],
       [0.       , 0.       , 0.1334399, 0.86656  , 0.       ],
       [0.       , 0.       , 0.       , 0.6298193, 0.3701807]]],
     [[[1.       , 0.       , 0.       , 0.       , 0.       ],
       [0.6063756, 0.3936243, 0.       , 0.       , 0.       ],
       [0.       , 0.6842819, 0.3157182, 0.       , 0.       ],
       [0.       , 0.       , 0.4675929, 0.5324072, 0.       ],
       [0.       , 0.       , 0.       , 0.5484679, 0.4515321]],
      [[1.       , 0.       , 0.       , 0.       , 0.       ],
       [0.6097729, 0.3902271, 0.       , 0.       , 0.       ],
       [0.       , 0.3286454, 0.6713545, 0.       , 0.       ],
       [0.       , 0.       , 0.2698711, 0.7301288, 0.       ],
       [0.       , 0.       , 0.       , 0.5432625, 0.4567375]],
      [[1.       , 0.       , 0.       , 0.       , 0.       ],
       [0.7387732, 0.2612268, 0.       , 0.       , 0.       ],
       [0.       , 0.8114249, 0.1885752, 0.       , 0.       ],
       [0.       , 0.       , 0.9690578, 0.0309422, 0.       ],
       [0.       , 0.       , 0.       , 0.5054208, 0.4945792]],
      [[1.       , 0.       , 0.       , 0.       , 0.       ],
       [0.024762 , 0.975238 , 0.       , 0.       , 0.       ],
       [0.       , 0.9276003, 0.0723996, 0.       , 0.       ],
       [0.       , 0.       , 0.0755221, 0.9244779, 0.       ],
       [0.       , 0.       , 0.       , 0.7198545, 0.2801455]]]], np.float32),
    ),
    'gqa_gate_sw_qm_fast': dict(
        shapes=[(3, 4, 2), (4, 2), (3, 2, 2), (2, 2), (3, 4, 2), (4, 2), (3, 2, 2), (2, 2), (4, 2, 3), (3,)],
        out=np.array([[[ 0.297531 , -0.7841449,  0.9117239],
      [ 0.9508792, -1.0431069,  1.1478888],
      [ 1.4014471, -0.5846183,  0.6647264],
      [ 1.417007 , -1.1873915,  1.0869365]],
     [[ 2.1269116, -0.0450823,  0.7796991],
      [ 3.1801333,  0.0585409,  0.8870066],
      [ 4.1935954,  0.1520361,  0.7706202],
      [ 3.2660804,  0.2394007,  0.7092472]]], np.float32),
    ),
    'embedding_swNone_scores': dict(
        shapes=[(10, 3), (3, 2, 2), (2, 2), (3, 2, 2), (2, 2), (3, 2, 2), (2, 2), (3, 2, 2), (2, 2), (2, 2, 3), (3,)],
        out=np.array([[[-0.386262 ,  0.759115 , -0.1404447],
      [-0.3709902,  0.7253963, -0.1389906],
      [-0.3578176,  0.5615942, -0.1840098],
      [-0.3578176,  0.5615942, -0.1840098]],
     [[-0.2735766,  1.1570852, -0.0551611],
      [-0.3578176,  0.5615942, -0.1840098],
      [-0.2613992,  1.150768 , -0.0467973],
      [-0.2386609,  1.247759 , -0.0277241]]], np.float32),
        scores=np.array([[[[0.3496178, 0.3072799, 0.3431023, 0.       , 0.       ],
       [0.338764 , 0.2787399, 0.3824961, 0.       , 0.       ],
       [0.       , 0.       , 0.       , 0.       , 0.       ],
       [0.       , 0.       , 0.       , 0.       , 0.       ]],
      [[0.3367136, 0.3156736, 0.3476128, 0.       , 0.       ],
       [0.3363907, 0.3154236, 0.3481856, 0.       , 0.       ],
       [0.       , 0.       , 0.       , 0.       , 0.       ],
       [0.       , 0.       , 0.       , 0.       , 0.       ]]],
     [[[0.       , 0.2479753, 0.2799774, 0.2374492, 0.2345981],
       [0.       , 0.       , 0.       , 0.       , 0.       ],
       [0.       , 0.238862 , 0.3556817, 0.2305793, 0.174877 ],
       [0.       , 0.1877859, 0.5534315, 0.1864579, 0.0723248]],
      [[0.       , 0.2470004, 0.2601674, 0.2366428, 0.2561892],
       [0.       , 0.       , 0.       , 0.       , 0.       ],
       [0.       , 0.2497791, 0.2687357, 0.2377407, 0.2437445],
       [0.       , 0.2549461, 0.2890886, 0.2381259, 0.2178394]]]], np.float32),
    ),
    'embedding_swNone_fast': dict(
        shapes=[(10, 3), (3, 2, 2), (2, 2), (3, 2, 2), (2, 2), (3, 2, 2), (2, 2), (3, 2, 2), (2, 2), (2, 2, 3), (3,)],
        out=np.array([[[-0.386262 ,  0.759115 , -0.1404447],
      [-0.3709902,  0.7253963, -0.1389906],
      [-0.2720739,  1.0272028, -0.1463245],
      [-0.2720739,  1.0272028, -0.1463245]],
     [[-0.2735766,  1.1570852, -0.0551611],
      [-0.2217033,  1.1988673, -0.1038495],
      [-0.2613992,  1.150768 , -0.0467973],
      [-0.2386609,  1.2477589, -0.0277242]]], np.float32),
    ),
    'embedding_sw2_scores': dict(
        shapes=[(10, 3), (3, 2, 2), (2, 2), (3, 2, 2), (2, 2), (3, 2, 2), (2, 2), (3, 2, 2), (2, 2), (2, 2, 3), (3,)],
        out=np.array([[[-0.5049254,  0.5368958, -0.154839 ],
      [-0.3709902,  0.7253963, -0.1389906],
      [-0.3578176,  0.5615942, -0.1840098],
      [-0.3578176,  0.5615942, -0.1840098]],
     [[-0.2809002,  1.1816602, -0.0460921],
      [-0.3578176,  0.5615942, -0.1840098],
      [-0.2778252,  1.2353413,  0.0041316],
      [-0.2314268,  1.2654077, -0.0175454]]], np.float32),
        scores=np.array([[[[0.5322257, 0.4677743, 0.       , 0.       , 0.       ],
       [0.338764 , 0.2787399, 0.3824961, 0.       , 0.       ],
       [0.       , 0.       , 0.       , 0.       , 0.       ],
       [0.       , 0.       , 0.       , 0.       , 0.       ]],
      [[0.5161254, 0.4838746, 0.       , 0.       , 0.       ],
       [0.3363907, 0.3154236, 0.3481856, 0.       , 0.       ],
       [0.       , 0.       , 0.       , 0.       , 0.       ],
       [0.       , 0.       , 0.       , 0.       , 0.       ]]],
     [[[0.       , 1.       , 0.       , 0.       , 0.       ],
       [0.       , 0.       , 0.       , 0.       , 0.       ],
       [0.       , 0.2894866, 0.4310651, 0.2794483, 0.       ],
       [0.       , 0.       , 0.6813861, 0.2295674, 0.0890465]],
      [[0.       , 1.       , 0.       , 0.       , 0.       ],
       [0.       , 0.       , 0.       , 0.       , 0.       ],
       [0.       , 0.3302841, 0.3553504, 0.3143655, 0.       ],
       [0.       , 0.       , 0.3880103, 0.319609 , 0.2923808]]]], np.float32),
    ),
    'embedding_sw2_fast': dict(
        shapes=[(10, 3), (3, 2, 2), (2, 2), (3, 2, 2), (2, 2), (3, 2, 2), (2, 2), (3, 2, 2), (2, 2), (2, 2, 3), (3,)],
        out=np.array([[[-0.5049254,  0.5368958, -0.154839 ],
      [-0.3709902,  0.7253963, -0.1389906],
      [-0.2720739,  1.0272028, -0.1463245],
      [-0.2720739,  1.0272028, -0.1463245]],
     [[-0.2809002,  1.1816602, -0.0460921],
      [-0.2217033,  1.1988673, -0.1038495],
      [-0.2778252,  1.2353413,  0.0041316],
      [-0.2314268,  1.2654076, -0.0175454]]], np.float32),
    ),
}
