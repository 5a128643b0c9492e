"""Adamax, Adadelta and Lion: several steps against PyTorch's optimizers (Adamax,
Adadelta) and the update rules in numpy (Keras's Adamax; Lion from the paper),
string names, and a save/load round trip that continues training bit-identically."""

import numpy as np
import pytest

import pyggml as pg

rng = np.random.default_rng(7)
X = rng.normal(size=(16, 3))
Y = X @ rng.normal(size=(3, 2)) + 0.1 * rng.normal(size=(16, 2))
STEPS = 5


def _run(opt, rule):
    """Our model trained STEPS full-batch steps against ``rule(w, g, state, t)`` applied to
    the gradients our model reports at the same weights."""
    m = pg.Sequential([pg.layers.Dense(2, use_bias=False)], input_shape=3).compile(optimizer=opt, loss="mse",
                                                                                    seed=3)
    w = m.get_weights()["dense.weight"].astype(np.float64)
    w0 = w.copy()
    state = {}
    for t in range(1, STEPS + 1):
        g = m.gradients(X, Y)["dense.weight"].astype(np.float64)
        w = rule(w, g, state, t)
        m.fit(X, Y, batch_size=16, epochs=1, shuffle=False, verbose=0)
        np.testing.assert_allclose(m.get_weights()["dense.weight"], w, rtol=1e-5, atol=1e-7, err_msg=f"step {t}")
    assert not np.allclose(w, w0)
    m.free()


def _torch_rule(make):
    torch = pytest.importorskip("torch")

    def rule(w, g, state, t):
        if "p" not in state:
            state["p"] = torch.tensor(w, dtype=torch.float64, requires_grad=True)
            state["opt"] = make(torch, [state["p"]])
        p = state["p"]
        with torch.no_grad():
            p.copy_(torch.from_numpy(w))
        p.grad = torch.from_numpy(g)
        state["opt"].step()
        return p.detach().numpy().copy()
    return rule


def test_adamax_against_torch():
    # PyTorch adds epsilon inside the max (max(b2 u, |g| + eps)), Keras after it: equal at eps = 0
    _run(pg.optimizers.Adamax(0.05, epsilon=0.0),
         _torch_rule(lambda torch, ps: torch.optim.Adamax(ps, lr=0.05, betas=(0.9, 0.999), eps=0.0)))


def test_adamax_keras_rule_with_epsilon_and_decay():
    def rule(w, g, s, t, lr=0.02, wd=0.1):
        m = s.setdefault("m", np.zeros_like(w))
        u = s.setdefault("u", np.zeros_like(w))
        w = w - lr * wd * w
        m[:] = 0.8 * m + 0.2 * g
        u[:] = np.maximum(0.99 * u, np.abs(g))
        return w - lr * m / ((1 - 0.8 ** t) * (u + 1e-3))
    _run(pg.optimizers.Adamax(0.02, beta_1=0.8, beta_2=0.99, epsilon=1e-3, weight_decay=0.1), rule)


@pytest.mark.parametrize("rho,eps,lr", [(0.9, 1e-6, 1.0), (0.95, 1e-7, 0.5)])
def test_adadelta_against_torch(rho, eps, lr):
    _run(pg.optimizers.Adadelta(lr, rho=rho, epsilon=eps),
         _torch_rule(lambda torch, ps: torch.optim.Adadelta(ps, lr=lr, rho=rho, eps=eps)))


@pytest.mark.parametrize("b1,b2,wd", [(0.9, 0.99, None), (0.95, 0.98, 0.5)])
def test_lion_against_the_paper(b1, b2, wd):
    lr = 0.01

    def rule(w, g, s, t):
        m = s.setdefault("m", np.zeros_like(w))
        c = b1 * m + (1 - b1) * g
        w = w - lr * (np.sign(c) + (wd or 0.0) * w)
        m[:] = b2 * m + (1 - b2) * g
        return w
    _run(pg.optimizers.Lion(lr, beta_1=b1, beta_2=b2, weight_decay=wd), rule)


@pytest.mark.parametrize("kw", [dict(), dict(learning_rate_power=-0.7, initial_accumulator_value=0.3),
                                dict(l1_regularization_strength=0.01, l2_regularization_strength=0.2,
                                     l2_shrinkage_regularization_strength=0.1, beta=0.5, weight_decay=0.05),
                                dict(initial_accumulator_value=0.0, learning_rate_power=-0.6)])
def test_ftrl_keras_rule(kw):
    lr = 0.2
    p = -kw.get("learning_rate_power", -0.5)
    l1 = kw.get("l1_regularization_strength", 0.0)
    l2 = kw.get("l2_regularization_strength", 0.0) + kw.get("beta", 0.0) / (2 * lr)
    l2s = kw.get("l2_shrinkage_regularization_strength", 0.0)
    wd = kw.get("weight_decay", 0.0)

    def rule(w, g, s, t):
        n = s.setdefault("n", np.full_like(w, kw.get("initial_accumulator_value", 0.1)))
        z = s.setdefault("z", np.zeros_like(w))
        w = w - lr * wd * w
        n_new = n + g * g
        z[:] = z + g + 2 * l2s * w - (n_new ** p - n ** p) / lr * w
        n[:] = n_new
        return (np.clip(z, -l1, l1) - z) / (n_new ** p / lr + 2 * l2)
    _run(pg.optimizers.Ftrl(lr, **kw), rule)


@pytest.mark.parametrize("name", ["adamax", "adadelta", "lion", "ftrl"])
def test_names_config_and_resume_bit_identically(name, tmp_path):
    cls = {"adamax": pg.optimizers.Adamax, "adadelta": pg.optimizers.Adadelta, "lion": pg.optimizers.Lion,
           "ftrl": pg.optimizers.Ftrl}[name]
    assert type(pg.optimizers.get(name)) is cls
    assert type(pg.optimizers.get(name.upper())) is cls
    opt = cls(0.01)
    again = pg.optimizers.deserialize(pg.optimizers.serialize(opt))
    assert type(again) is cls and again.get_config() == opt.get_config()
    pg.set_n_threads(1)

    def make():
        pg.set_seed(5)
        return pg.Sequential([pg.layers.Dense(8, activation="relu"), pg.layers.Dense(2)], input_shape=3).compile(
            optimizer=cls(0.01) if name != "adadelta" else cls(1.0), loss="mse")
    a, b = make(), make()
    for mm in (a, b):
        mm.fit(X, Y, epochs=3, batch_size=8, verbose=0, shuffle=False)
    a.save(tmp_path / "a.gguf")
    c = pg.load_model(tmp_path / "a.gguf")
    assert type(c.optimizer) is cls
    b.fit(X, Y, epochs=3, batch_size=8, verbose=0, shuffle=False)
    c.fit(X, Y, epochs=3, batch_size=8, verbose=0, shuffle=False)
    for k, v in b.get_weights().items():
        np.testing.assert_array_equal(c.get_weights()[k], v)
    # a fresh optimizer (no slots) would not continue the same way
    d = pg.load_model(tmp_path / "a.gguf", compile=False)
    d.compile(optimizer=cls(0.01) if name != "adadelta" else cls(1.0), loss="mse")
    d.fit(X, Y, epochs=3, batch_size=8, verbose=0, shuffle=False)
    assert any(not np.array_equal(d.get_weights()[k], v) for k, v in b.get_weights().items())
    for mm in (a, b, c, d):
        mm.free()
    pg.set_n_threads(None)


def test_bad_arguments():
    with pytest.raises(ValueError):
        pg.optimizers.Lion(beta_1=0.0)
    with pytest.raises(ValueError):
        pg.optimizers.Adamax(beta_1=1.5)
    with pytest.raises(ValueError):
        pg.optimizers.Adadelta(rho=-0.1)
    with pytest.raises(ValueError):
        pg.optimizers.Ftrl(learning_rate_power=0.5)
    with pytest.raises(ValueError):
        pg.optimizers.Ftrl(initial_accumulator_value=-1)
