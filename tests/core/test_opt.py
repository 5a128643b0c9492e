"""OptContext (ggml-opt): training a tiny linear regression, the optimizer
state round trip, reading outputs, and its refusals."""

import numpy as np
import pytest

from pyggml import core, ops
from pyggml.errors import GGMLError

N = 64
RNG = np.random.default_rng(42)
X = RNG.normal(size=(N, 3)).astype(np.float32)
W_TRUE = np.array([[1.5, -2.0, 0.5]], np.float32)
B_TRUE = 0.75
Y = (X @ W_TRUE.T + B_TRUE).astype(np.float32)


@pytest.fixture
def one_thread():
    """Long loops of tiny steps: one thread (a pool of several waits on its
    barriers when the machine is busy); restored afterwards."""
    was = core.get_n_threads() if core.n_threads_is_set() else None
    core.set_n_threads(1)
    yield
    core.set_n_threads(was)


class Regression:
    """y = x @ w.T + b over an OptContext; loss 'mse' against labels, or
    'sum' over our own squared error against a target tensor."""

    def __init__(self, loss="mse", optimizer="adamw", lr=0.05, opt_period=1, w0=None, b0=None, **kw):
        self.be = core.Backend("cpu")
        self.wctx = core.Context(n_tensors=8)
        self.x = self.wctx.new_tensor((N, 3), name="x")
        self.target = self.wctx.new_tensor((N, 1), name="target")
        self.w = self.wctx.new_tensor((1, 3), name="w").set_param()
        self.b = self.wctx.new_tensor((1,), name="b").set_param()
        self.buf = core.BackendBuffer(self.wctx, self.be)
        self.x.set(X)
        self.target.set(Y)
        self.w.set(np.zeros((1, 3)) if w0 is None else w0)
        self.b.set(np.zeros(1) if b0 is None else b0)
        self.cctx = core.Context(n_tensors=1024, graph_size=4096)
        self.y = ops.add(ops.mul_mat(self.w, self.x, ctx=self.cctx), self.b, ctx=self.cctx)
        self.y.set_output()
        out = self.y
        if loss == "sum":
            out = ops.sqr(ops.sub(self.y, self.target, ctx=self.cctx), ctx=self.cctx)
        self.sched = core.Scheduler([self.be], graph_size=8192)
        self.opt = core.OptContext(self.sched, self.cctx, self.x, out, loss=loss, optimizer=optimizer,
                                   learning_rate=lr, opt_period=opt_period, **kw)
        if loss == "mse":
            self.opt.set_labels(Y)

    def predict(self):
        return X @ self.w.numpy().T + self.b.numpy()

    def true_loss(self):
        return float(np.mean((self.predict() - Y) ** 2))


@pytest.mark.parametrize("loss", ["mse", "sum"])
@pytest.mark.parametrize("optimizer", ["adamw", "sgd"])
def test_linear_regression_trains(loss, optimizer, one_thread):
    lr = {"adamw": 0.1, "sgd": 0.05 if loss == "mse" else 0.2 / N}[optimizer]
    r = Regression(loss=loss, optimizer=optimizer, lr=lr)
    first = r.opt.step()
    start = r.true_loss()
    losses = [first] + [r.opt.step() for _ in range(150)]
    assert losses[-1] < 0.01 * losses[0], losses[::15]
    assert r.true_loss() < 0.01 * start
    np.testing.assert_allclose(r.w.numpy(), W_TRUE, atol=0.1)
    np.testing.assert_allclose(r.b.numpy(), [B_TRUE], atol=0.1)
    # the reported loss is the loss of the weights before the step
    if loss == "mse":
        before = r.true_loss()
        assert r.opt.forward() == pytest.approx(before, rel=1e-4, abs=1e-6)
    else:
        before = r.true_loss() * N
        assert r.opt.forward() == pytest.approx(before, rel=1e-4, abs=1e-5)


def test_forward_does_not_train():
    r = Regression()
    w = r.w.numpy().copy()
    l1 = r.opt.forward()
    l2 = r.opt.forward()
    assert l1 == l2 == pytest.approx(float(np.mean(Y ** 2)), rel=1e-5)
    np.testing.assert_array_equal(r.w.numpy(), w)
    assert r.opt.iter == 1


def test_read_returns_outputs_after_eval():
    r = Regression()
    for _ in range(5):
        r.opt.step()
    r.opt.forward()
    np.testing.assert_allclose(r.opt.read(r.y), r.predict(), rtol=1e-5, atol=1e-5)
    # after a training step: the prediction of the weights before the update
    before = r.predict()
    r.opt.step()
    np.testing.assert_allclose(r.opt.read(r.y), before, rtol=1e-5, atol=1e-5)
    r.opt.alloc()
    with pytest.raises(GGMLError, match="between alloc"):
        r.opt.read(r.y)
    r.opt.eval()


def test_state_round_trip_resumes_identically(one_thread):
    a = Regression(lr=0.05)
    for _ in range(7):
        a.opt.step()
    state = a.opt.get_state()
    assert state["iter"] == 8 == a.opt.iter
    assert len(state["m"]) == len(state["v"]) == 2
    for m, v, p in zip(state["m"], state["v"], a.opt.params):
        assert m.shape == v.shape == p.shape
        assert np.any(m != 0) and np.all(v >= 0) and np.any(v > 0)
    w, b = a.w.numpy().copy(), a.b.numpy().copy()
    # a fresh context with the same weights and state continues exactly alike
    c = Regression(lr=0.05, w0=w, b0=b)
    c.opt.set_state(state)
    assert c.opt.iter == 8
    again = c.opt.get_state()
    for x, y in zip(state["m"] + state["v"], again["m"] + again["v"]):
        np.testing.assert_array_equal(x, y)
    for _ in range(3):
        la, lc = a.opt.step(), c.opt.step()
        assert la == pytest.approx(lc, rel=1e-6, abs=1e-7)
    np.testing.assert_allclose(c.w.numpy(), a.w.numpy(), rtol=1e-6, atol=1e-7)
    # without the state (fresh moments, iter 1) the next step differs
    d = Regression(lr=0.05, w0=w, b0=b)
    d.opt.step()
    a2 = Regression(lr=0.05, w0=w, b0=b)
    a2.opt.set_state(state)
    a2.opt.step()
    assert not np.allclose(d.w.numpy(), a2.w.numpy(), rtol=1e-7, atol=0)
    # reset(optimizer=True) forgets moments and the counter
    a.opt.reset(optimizer=True)
    assert a.opt.iter == 1
    assert all(np.all(m == 0) for m in a.opt.get_state()["m"])


def test_set_state_checks():
    r = Regression()
    r.opt.step()
    s = r.opt.get_state()
    with pytest.raises(TypeError):
        r.opt.set_state([1, 2])
    with pytest.raises(ValueError):
        r.opt.set_state({"iter": 2, "m": s["m"][:1], "v": s["v"]})
    with pytest.raises(ValueError):
        r.opt.set_state({"iter": 2, "m": [np.zeros((5, 5)), s["m"][1]], "v": s["v"]})
    with pytest.raises(ValueError):
        r.opt.set_state({"iter": 0, "m": s["m"], "v": s["v"]})
    with pytest.raises(ValueError):
        r.opt.iter = -3


def test_sgd_has_no_moments():
    r = Regression(optimizer="sgd", lr=0.01)
    r.opt.step()
    s = r.opt.get_state()
    assert s["m"] == [None, None] and s["v"] == [None, None]
    assert s["iter"] == 2


def test_gradient_accumulation_period():
    r = Regression(opt_period=3, lr=0.1)
    w0 = r.w.numpy().copy()
    r.opt.step()
    r.opt.step()
    np.testing.assert_array_equal(r.w.numpy(), w0)       # accumulating
    assert r.opt.accumulation_index == 2
    r.opt.step()
    assert not np.array_equal(r.w.numpy(), w0)          # the optimizer stepped
    assert r.opt.accumulation_index == 0 and r.opt.iter == 2


def test_learning_rate_changes_take_effect():
    r = Regression(optimizer="sgd", lr=0.01)
    r.opt.learning_rate = 0.02
    assert r.opt.learning_rate == pytest.approx(0.02)
    w0 = r.w.numpy().copy()
    r.opt.step()
    # sgd on mse from w = 0, b = 0: dL/dw = -2/N * sum((y) x) ... the step is lr * grad
    grad_w = -2.0 / N * (Y.T @ X)
    np.testing.assert_allclose(r.w.numpy(), w0 - 0.02 * grad_w, rtol=1e-4, atol=1e-6)


def test_sharing_the_scheduler_with_other_graphs():
    """Computing another graph on the OptContext's scheduler in between does
    not corrupt training (ggml-opt lays its graph out again)."""
    r = Regression(lr=0.1)
    ref = Regression(lr=0.1)
    big = core.Context(n_tensors=4)
    a = big.new_tensor((256, 256))
    bbuf = core.BackendBuffer(big, r.be)
    a.set(np.eye(256))
    c2 = core.Context(n_tensors=16, graph_size=32)
    z = ops.scale(ops.mul_mat(a, a, ctx=c2), 2.0, ctx=c2)
    g = core.Graph(c2, 32).build_forward(z)
    for i in range(20):
        la, lb = r.opt.step(), ref.opt.step()
        assert la == pytest.approx(lb, rel=1e-5, abs=1e-6), i
        r.sched.compute(g)
        np.testing.assert_array_equal(z.numpy()[:2, :2], 2 * np.eye(2))
        with pytest.raises(GGMLError, match="another graph"):
            r.opt.read(r.y)
    # between alloc() and eval(): refused, and alloc() again works
    r.opt.alloc()
    r.sched.compute(g)
    with pytest.raises(GGMLError, match="alloc"):
        r.opt.eval()
    r.opt.step()
    ref.opt.step()
    np.testing.assert_allclose(r.w.numpy(), ref.w.numpy(), rtol=1e-5, atol=1e-6)


def test_refusals():
    r = Regression()
    be, wctx, cctx, sched = r.be, r.wctx, r.cctx, r.sched
    # no parameter behind the outputs
    c = core.Context(n_tensors=64, graph_size=4096)
    only_x = ops.scale(r.x, 2.0, ctx=c)
    with pytest.raises(ValueError, match="no parameter"):
        core.OptContext(sched, c, r.x, only_x)
    c2 = core.Context(n_tensors=1024, graph_size=4096)
    y2 = ops.mul_mat(r.w, r.x, ctx=c2)
    for lr in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="learning_rate"):
            core.OptContext(sched, c2, r.x, y2, learning_rate=lr)
    with pytest.raises(ValueError):
        core.OptContext(sched, c2, r.x, y2, loss="hinge")
    with pytest.raises(ValueError):
        core.OptContext(sched, c2, r.x, y2, optimizer="lbfgs")
    with pytest.raises(ValueError):
        core.OptContext(sched, c2, r.x, y2, opt_period=0)
    with pytest.raises(ValueError):
        core.OptContext(sched, c2, r.x, y2, beta_1=1.5)
    with pytest.raises(ValueError):
        core.OptContext(sched, c2, r.x, y2, weight_decay=2.0)
    with pytest.raises(ValueError, match="ctx_compute"):
        core.OptContext(sched, cctx, r.x, y2)               # outputs made elsewhere
    with pytest.raises(ValueError, match="depend"):
        core.OptContext(sched, c2, r.target, y2)           # not an input of y2
    with pytest.raises(TypeError):
        core.OptContext(sched, c2, r.x, ops.cast(y2, "f16", ctx=c2))
    nomem = core.Context(n_tensors=4)
    xin = nomem.new_tensor((N, 3))
    c3 = core.Context(n_tensors=1024, graph_size=4096)
    with pytest.raises(ValueError, match="memory"):
        core.OptContext(sched, c3, xin, ops.mul_mat(r.w, xin, ctx=c3))
    small = core.Scheduler([be], graph_size=64)
    with pytest.raises(GGMLError, match="graph_size"):
        core.OptContext(small, c2, r.x, y2)
    # hyper-parameters at run time
    with pytest.raises(ValueError):
        r.opt.set_hparams(learning_rate=0)
    with pytest.raises(ValueError):
        r.opt.learning_rate = -0.1
    assert r.opt.learning_rate == pytest.approx(0.05)
    # labels
    with pytest.raises(ValueError):
        r.opt.set_labels(np.zeros((N, 2)))
    s = Regression(loss="sum")
    with pytest.raises(ValueError, match="no labels"):
        s.opt.set_labels(Y)
    # call order
    with pytest.raises(GGMLError, match="alloc"):
        r.opt.eval()
    r.opt.alloc()
    with pytest.raises(GGMLError, match="already"):
        r.opt.alloc()
    with pytest.raises(GGMLError):
        r.opt.reset()
    r.opt.eval()
    with pytest.raises(ValueError):
        r.opt.step(n_threads=-1)
    with pytest.raises(ValueError, match="shape"):
        r.opt.set_state({"iter": 1, "m": [np.zeros((1, 3)), np.zeros(1)], "v": [np.zeros((1, 3)), np.zeros((2, 2))]})
