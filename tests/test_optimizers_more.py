"""Lamb and Muon: several full-batch steps of a two-layer model against float64
numpy implementations of Keras's update rules (every weight: kernels and
biases, Muon's AdamW fallback included), training, names, configs, and a
save/load round trip that continues training bit-identically."""

import math
import re

import numpy as np
import pytest

import pyggml as pg

rng = np.random.default_rng(13)
X = rng.normal(size=(16, 3))
Y = np.tanh(X @ rng.normal(size=(3, 2))) + 0.1 * rng.normal(size=(16, 2))
STEPS = 5


def _model(opt, layers=None):
    layers = layers or [pg.layers.Dense(5, activation="tanh"), pg.layers.Dense(2)]
    return pg.Sequential(layers, input_shape=3).compile(optimizer=opt, loss="mse", seed=3)


def _run(opt, rule, rtol=1e-5, atol=1e-7, layers=None):
    """STEPS full-batch steps of our model against ``rule(name, w, g, state, t)`` applied
    to every weight, given the gradients our model reports at the same weights."""
    m = _model(opt, layers)
    ws = {k: v.astype(np.float64) for k, v in m.get_weights().items()}
    w0 = {k: v.copy() for k, v in ws.items()}
    state = {}
    for t in range(1, STEPS + 1):
        gs = m.gradients(X, Y)
        ws = {k: rule(k, ws[k], gs[k].astype(np.float64), state.setdefault(k, {}), t) for k in ws}
        m.fit(X, Y, batch_size=16, epochs=1, shuffle=False, verbose=0)
        got = m.get_weights()
        for k in ws:
            np.testing.assert_allclose(got[k], ws[k], rtol=rtol, atol=atol, err_msg=f"{k}, step {t}")
    for k in ws:
        assert not np.allclose(ws[k], w0[k]), k
    m.free()


# --- Lamb -----------------------------------------------------------------------------------------------

def _lamb_rule(lr, b1=0.9, b2=0.999, eps=1e-7, wd=None):
    def rule(name, w, g, s, t):
        m = s.setdefault("m", np.zeros_like(w))
        v = s.setdefault("v", np.zeros_like(w))
        if wd:
            w = w - w * wd * lr
        m[:] = m + (g - m) * (1 - b1)
        v[:] = v + (g * g - v) * (1 - b2)
        u = (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
        wn, un = np.linalg.norm(w), np.linalg.norm(u)
        ratio = wn / un if wn > 0 and un > 0 else 1.0
        return w - ratio * lr * u
    return rule


@pytest.mark.parametrize("kw", [dict(), dict(beta_1=0.8, beta_2=0.99, epsilon=1e-3), dict(weight_decay=0.1)])
def test_lamb_keras_rule(kw):
    lr = 0.01
    _run(pg.optimizers.Lamb(lr, **kw), _lamb_rule(lr, kw.get("beta_1", 0.9), kw.get("beta_2", 0.999),
                                                    kw.get("epsilon", 1e-7), kw.get("weight_decay")))


def test_lamb_trust_ratio_is_one_for_zero_weights():
    # the biases start at zero: their first step is plain lr * u (|u| = about 1 per value on step 1)
    m = _model(pg.optimizers.Lamb(0.01))
    assert not m.get_weights()["dense.bias"].any()
    g = m.gradients(X, Y)["dense.bias"].astype(np.float64)
    m.fit(X, Y, batch_size=16, epochs=1, verbose=0)
    u = g / (np.abs(g) + 1e-7)
    np.testing.assert_allclose(m.get_weights()["dense.bias"], -0.01 * u, rtol=1e-5)
    m.free()


# --- Muon -----------------------------------------------------------------------------------------------

def _newton_schulz(g, steps, a=3.4445, b=-4.7750, c=2.0315):
    tall = g.shape[0] > g.shape[1]
    x = g.T if tall else g
    x = x / (np.linalg.norm(x) + 1e-7)
    for _ in range(steps):
        gram = x @ x.T
        x = a * x + (b * gram + c * gram @ gram) @ x
    return x.T if tall else x


def _muon_rule(lr, momentum=0.95, nesterov=True, ns_steps=5, rms_rate=0.2, wd=0.004, adam_wd=0.004, b1=0.9,
               b2=0.999, eps=1e-7, adam_lr_ratio=1.0, adamw_names=()):
    def rule(name, w, g, s, t):
        m = s.setdefault("m", np.zeros_like(w))
        if w.ndim != 2 or any(re.search(k, name) for k in adamw_names) or "embedding" in name:
            v = s.setdefault("v", np.zeros_like(w))
            if adam_wd:
                w = w - w * adam_wd * lr
            alpha = lr * adam_lr_ratio * math.sqrt(1 - b2 ** t) / (1 - b1 ** t)
            m[:] = m + (g - m) * (1 - b1)
            v[:] = v + (g * g - v) * (1 - b2)
            return w - m * alpha / (np.sqrt(v) + eps)
        if wd:
            w = w - w * wd * lr
        m[:] = m + g + m * (momentum - 1)
        eff = g + momentum * m if nesterov else m
        # Keras's kernels are (in, out), ours (out, in): orthogonalise Keras's layout, then transpose back
        o = _newton_schulz(eff.T, ns_steps).T
        if rms_rate is not None:
            o = o * math.sqrt(max(w.shape)) * rms_rate
        return w - lr * o
    return rule


def test_newton_schulz_reference_orthogonalises():
    # the reference itself: singular values pushed near 1 (the quintic's band is about 0.7 to 1.2)
    g = rng.normal(size=(7, 4))
    s = np.linalg.svd(_newton_schulz(g, 5), compute_uv=False)
    assert np.all((s > 0.6) & (s < 1.3))
    np.testing.assert_allclose(_newton_schulz(g.T, 5), _newton_schulz(g, 5).T, rtol=1e-12)


@pytest.mark.parametrize("kw", [dict(), dict(nesterov=False, rms_rate=None, ns_steps=3, weight_decay=0.1,
                                             adam_weight_decay=0.05, adam_lr_ratio=0.5),
                                dict(momentum=0.8, adam_beta_1=0.8, adam_beta_2=0.99, epsilon=1e-4,
                                     exclude_layers=["dense_1"], weight_decay=None, adam_weight_decay=None)])
def test_muon_keras_rule(kw):
    lr = 0.02
    rule = _muon_rule(lr, kw.get("momentum", 0.95), kw.get("nesterov", True), kw.get("ns_steps", 5),
                      kw.get("rms_rate", 0.2), kw.get("weight_decay", 0.004), kw.get("adam_weight_decay", 0.004),
                      kw.get("adam_beta_1", 0.9), kw.get("adam_beta_2", 0.999), kw.get("epsilon", 1e-7),
                      kw.get("adam_lr_ratio", 1.0), kw.get("exclude_layers", ()))
    _run(pg.optimizers.Muon(lr, **kw), rule, rtol=2e-4, atol=2e-6)


def test_muon_routes_embeddings_and_excluded_layers_to_adamw():
    opt = pg.optimizers.Muon(exclude_layers=["head"])
    assert opt.uses_adamw("dense.bias", (4,))
    assert opt.uses_adamw("embedding.weight", (10, 4))
    assert opt.uses_adamw("head.weight", (2, 4))
    assert not opt.uses_adamw("dense.weight", (4, 3))
    assert not pg.optimizers.Muon(exclude_embeddings=False).uses_adamw("embedding.weight", (10, 4))
    # an Embedding model: the table takes AdamW, the Dense kernel Muon
    x = rng.integers(0, 6, (16, 3)).astype(np.int32)
    y = rng.normal(size=(16, 2))
    lr = 0.02
    m = pg.Sequential([pg.layers.Embedding(6, 4), pg.layers.Flatten(), pg.layers.Dense(2)], input_shape=3)
    m.compile(optimizer=pg.optimizers.Muon(lr), loss="mse", seed=2)
    rule = _muon_rule(lr)
    ws = {k: v.astype(np.float64) for k, v in m.get_weights().items()}
    state = {}
    for t in range(1, 4):
        gs = m.gradients(x, y)
        ws = {k: rule(k, ws[k], gs[k].astype(np.float64), state.setdefault(k, {}), t) for k in ws}
        m.fit(x, y, batch_size=16, epochs=1, shuffle=False, verbose=0)
        for k, v in m.get_weights().items():
            np.testing.assert_allclose(v, ws[k], rtol=2e-4, atol=2e-6, err_msg=f"{k} step {t}")
    m.free()


# --- training, names, configs, save/load -----------------------------------------------------------------

@pytest.mark.parametrize("opt", [pg.optimizers.Lamb(0.05), pg.optimizers.Muon(0.05)])
def test_trains(opt):
    m = _model(opt)
    before = m.evaluate(X, Y, verbose=0)
    m.fit(X, Y, epochs=30, batch_size=8, verbose=0)
    assert m.evaluate(X, Y, verbose=0) < 0.5 * before
    m.free()


@pytest.mark.parametrize("name", ["lamb", "muon"])
def test_names_config_and_resume_bit_identically(name, tmp_path):
    cls = {"lamb": pg.optimizers.Lamb, "muon": pg.optimizers.Muon}[name]
    assert type(pg.optimizers.get(name)) is cls
    assert type(pg.optimizers.get(name.capitalize())) is cls
    opt = cls(0.01) if name == "lamb" else cls(0.01, exclude_layers=["dense_1"], rms_rate=None, weight_decay=None)
    again = pg.optimizers.deserialize(pg.optimizers.serialize(opt))
    assert type(again) is cls and again.get_config() == opt.get_config()
    if name == "muon":
        assert again.weight_decay is None and again.exclude_layers == ["dense_1"] and again.rms_rate is None
    pg.set_n_threads(1)

    def make():
        pg.set_seed(5)
        return pg.Sequential([pg.layers.Dense(8, activation="relu"), pg.layers.Dense(2)], input_shape=3).compile(
            optimizer=cls(0.01), loss="mse")
    a, b = make(), make()
    for mm in (a, b):
        mm.fit(X, Y, epochs=3, batch_size=8, verbose=0, shuffle=False)
    a.save(tmp_path / "a.gguf")
    c = pg.load_model(tmp_path / "a.gguf")
    assert type(c.optimizer) is cls and c.optimizer.get_config() == a.optimizer.get_config()
    b.fit(X, Y, epochs=3, batch_size=8, verbose=0, shuffle=False)
    c.fit(X, Y, epochs=3, batch_size=8, verbose=0, shuffle=False)
    for k, v in b.get_weights().items():
        np.testing.assert_array_equal(c.get_weights()[k], v)
    # a fresh optimizer (no slots) would not continue the same way
    d = pg.load_model(tmp_path / "a.gguf", compile=False)
    d.compile(optimizer=cls(0.01), loss="mse")
    d.fit(X, Y, epochs=3, batch_size=8, verbose=0, shuffle=False)
    assert any(not np.array_equal(d.get_weights()[k], v) for k, v in b.get_weights().items())
    for mm in (a, b, c, d):
        mm.free()
    pg.set_n_threads(None)


def test_keras_defaults():
    lamb = pg.optimizers.Lamb()
    assert (lamb.learning_rate, lamb.beta_1, lamb.beta_2, lamb.epsilon, lamb.weight_decay) == \
        (0.001, 0.9, 0.999, 1e-7, None)
    mu = pg.optimizers.Muon()
    assert mu.get_config() == {
        "learning_rate": 0.001, "weight_decay": 0.004, "adam_beta_1": 0.9, "adam_beta_2": 0.999, "epsilon": 1e-7,
        "exclude_layers": [], "muon_a": 3.4445, "muon_b": -4.775, "muon_c": 2.0315, "adam_lr_ratio": 1.0,
        "momentum": 0.95, "ns_steps": 5, "nesterov": True, "exclude_embeddings": True, "adam_weight_decay": 0.004,
        "rms_rate": 0.2}


def test_bad_arguments():
    with pytest.raises(ValueError):
        pg.optimizers.Lamb(beta_1=1.5)
    with pytest.raises(ValueError):
        pg.optimizers.Lamb(epsilon=-1)
    with pytest.raises(TypeError):
        pg.optimizers.Lamb(amsgrad=True)
    with pytest.raises(TypeError, match="exclude_layers"):
        pg.optimizers.Muon(exclude_layers="dense")
    with pytest.raises(ValueError, match="exclude_layers"):
        pg.optimizers.Muon(exclude_layers=["(unclosed"])
    with pytest.raises(ValueError, match="momentum"):
        pg.optimizers.Muon(momentum=1.5)
    with pytest.raises(TypeError, match="ns_steps"):
        pg.optimizers.Muon(ns_steps=2.5)
    with pytest.raises(ValueError, match="ns_steps"):
        pg.optimizers.Muon(ns_steps=-1)
    with pytest.raises(ValueError, match="rms_rate"):
        pg.optimizers.Muon(rms_rate=0)
    with pytest.raises(TypeError, match="rms_rate"):
        pg.optimizers.Muon(rms_rate="0.2")
    with pytest.raises(TypeError, match="nesterov"):
        pg.optimizers.Muon(nesterov="yes")
    with pytest.raises(ValueError, match="adam_weight_decay"):
        pg.optimizers.Muon(adam_weight_decay=-0.1)


@pytest.mark.parametrize("name", ["lamb", "muon"])
def test_apply_gradients_takes_the_same_step(name):
    # Keras's custom-loop form: the same rule as fit's step (Muon tells the weights apart by name there too)
    lr = 0.02
    opt = pg.optimizers.Lamb(lr) if name == "lamb" else pg.optimizers.Muon(lr, exclude_layers=["dense_1"])
    rule = _lamb_rule(lr) if name == "lamb" else _muon_rule(lr, adamw_names=("dense_1",))
    m = _model(opt)
    ws = {k: v.astype(np.float64) for k, v in m.get_weights().items()}
    state = {}
    for t in (1, 2):
        gs = m.gradients(X, Y)
        ws = {k: rule(k, ws[k], gs[k].astype(np.float64), state.setdefault(k, {}), t) for k in ws}
        m.optimizer.apply_gradients(zip(gs.values(), m.trainable_variables))
        for k, v in m.get_weights().items():
            np.testing.assert_allclose(v, ws[k], rtol=2e-4, atol=2e-6, err_msg=f"{k} step {t}")
    m.free()
