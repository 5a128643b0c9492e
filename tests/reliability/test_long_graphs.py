"""Long sequences and deep stacks train (issue 18, item 3).

ggml-alloc kept at most 256 free blocks per buffer and aborted ("out of free
blocks") past them: LSTM(8) training past ~249 steps, GRU past 126, a Dense
stack past 409 layers.  ggml/patches/0010 grows the list; these train through
the public API, each in its own interpreter (an abort must fail the test, not
end pytest), and the recurrent gradients match a PyTorch twin's on 300 steps.
"""

import numpy as np
import pytest

from _subproc import run_py

TRAIN = """
L = pg.layers
def train(layers, x, y, steps=2):
    m = pg.Sequential(layers, input_shape=x.shape[1:]).compile(loss="mse", optimizer="sgd", seed=0)
    h = m.fit(x, y, epochs=steps, batch_size=len(x), verbose=0)
    assert all(np.isfinite(h.history["loss"])), h.history
    tr = pg.Trainer(m, batch_size=len(x))
    losses = [tr.step(x, y) for _ in range(2)]
    assert all(np.isfinite(losses)), losses
    tr.free()
    m.free()
    print("TRAINED", h.history["loss"], losses, flush=True)

rng = np.random.default_rng(0)
def seq(T, feats=2, batch=4):
    return (rng.normal(size=(batch, T, feats)).astype(np.float32),
            rng.normal(size=(batch, 1)).astype(np.float32))
"""


# (1000 steps; 300, past the old limits of both, are in the PyTorch gradient test below)
@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
@pytest.mark.parametrize("steps", [1000])
def test_recurrent_trains_on_long_sequences(kind, steps):
    r = run_py(TRAIN, f"""
        x, y = seq({steps})
        train([L.{kind}(8), L.Dense(1)], x, y)
    """, timeout=600)
    assert "TRAINED" in r.stdout


def test_stack_of_two_trains_on_1000_steps():
    r = run_py(TRAIN, """
        x, y = seq(1000)
        train([L.LSTM(8, return_sequences=True), L.GRU(8), L.Dense(1)], x, y)
    """, timeout=600)
    assert "TRAINED" in r.stdout


# (past 409 layers, where the old free-block limit aborted)
def test_dense_stack_of_1000_layers_trains():
    r = run_py(TRAIN, """
        x = rng.normal(size=(4, 3)).astype(np.float32)
        y = rng.normal(size=(4, 1)).astype(np.float32)
        train([L.Dense(4) for _ in range(1000)] + [L.Dense(1)], x, y)
    """, timeout=600)
    assert "TRAINED" in r.stdout


def test_core_graph_with_many_free_blocks():
    """The allocator case itself, in core: a graph whose intermediate tensors
    leave more than 256 holes in the scheduler's buffer (sizes alternate so
    that freed blocks cannot merge)."""
    r = run_py("""
        be = core.Backend("cpu")
        wctx = core.Context(n_tensors=4)
        x = wctx.new_tensor((1, 8))
        buf = core.BackendBuffer(wctx, be)
        x.set(np.ones((1, 8)))
        ctx = core.Context(n_tensors=8000, graph_size=8192)
        keep = []
        h = x
        for i in range(1200):
            a = ops.scale(h, 1.0, ctx=ctx)
            wide = ops.repeat(a, ctx.new_tensor((1 + (i % 7), 8)), ctx=ctx)   # a block of another size
            keep.append(ops.sum(wide, ctx=ctx))
            h = ops.add(a, ops.scale(x, 0.0, ctx=ctx), ctx=ctx)
        total = keep[0]
        for k in keep[1:]:
            total = ops.add(total, k, ctx=ctx)
        g = core.Graph(ctx, 8192).build_forward(total)
        s = core.Scheduler([be], graph_size=16384)
        s.compute(g)
        want = sum(8 * (1 + (i % 7)) for i in range(1200))
        assert abs(float(total.numpy().ravel()[0]) - want) < 1e-3 * want, total.numpy()
        print("OK")
    """, timeout=300)
    assert "OK" in r.stdout


# --- gradients equal PyTorch's on 300 steps (one SGD step of rate 1) ----------------------

PARITY = """
import torch
torch.set_default_dtype(torch.float64)
T, B, F, U = 300, 4, 3, 8
rng = np.random.default_rng(11)
x = rng.normal(size=(B, T, F)).astype(np.float32)
y = rng.normal(size=(B, 1)).astype(np.float32)

def check(pg_layers, torch_model):
    m = pg.Sequential(pg_layers, input_shape=(T, F)).compile(
        loss="mse", optimizer=pg.optimizers.SGD(learning_rate=1.0), seed=3)
    w0 = m.get_weights()
    params = {k.replace("_l0", ""): v for k, v in torch_model.named_parameters()}
    assert set(params) == set(w0), (sorted(params), sorted(w0))
    with torch.no_grad():
        for k, v in w0.items():
            assert tuple(params[k].shape) == v.shape, k
            params[k].copy_(torch.tensor(v, dtype=torch.float64))
    tr = pg.Trainer(m, batch_size=B)
    tr.step(x, y)
    w1 = m.get_weights()
    out = torch_model(torch.tensor(x, dtype=torch.float64))
    loss = torch.mean((out - torch.tensor(y, dtype=torch.float64)) ** 2)
    loss.backward()
    worst = 0.0
    for k in w0:
        g_pg = (w0[k].astype(np.float64) - w1[k].astype(np.float64))     # rate 1: the gradient
        g_t = params[k].grad.numpy()
        scale = max(np.abs(g_t).max(), 1e-12)
        assert scale > 1e-4, (k, scale)              # a gradient that says something
        err = np.abs(g_pg - g_t).max() / max(scale, 1.0)
        worst = max(worst, err)
        assert err <= 1e-4, (k, err, scale)
    print("PARITY", worst, flush=True)
    tr.free()
    m.free()

class Last(torch.nn.Module):
    def __init__(self, cell, dense):
        super().__init__()
        setattr(self, cell[0], cell[1])
        self._cell_name = cell[0]
        self.dense = dense
    def forward(self, x):
        h, _ = getattr(self, self._cell_name)(x)
        return self.dense(h[:, -1])

class Stack(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(F, U, batch_first=True)
        self.gru = torch.nn.GRU(U, U, batch_first=True)
        self.dense = torch.nn.Linear(U, 1)
    def forward(self, x):
        h, _ = self.lstm(x)
        h, _ = self.gru(h)
        return self.dense(h[:, -1])
"""


@pytest.mark.parametrize("kind", ["lstm", "gru", "stack"])
def test_gradients_match_pytorch_on_300_steps(kind):
    pytest.importorskip("torch")
    build = {
        "lstm": "check([pg.layers.LSTM(U, name='lstm'), pg.layers.Dense(1, name='dense')], "
                "Last(('lstm', torch.nn.LSTM(F, U, batch_first=True)), torch.nn.Linear(U, 1)))",
        "gru": "check([pg.layers.GRU(U, name='gru'), pg.layers.Dense(1, name='dense')], "
               "Last(('gru', torch.nn.GRU(F, U, batch_first=True)), torch.nn.Linear(U, 1)))",
        "stack": "check([pg.layers.LSTM(U, return_sequences=True, name='lstm'), pg.layers.GRU(U, name='gru'), "
                 "pg.layers.Dense(1, name='dense')], Stack())",
    }[kind]
    r = run_py(PARITY, build, timeout=600)
    assert "PARITY" in r.stdout
