"""Executors sharing one Vulkan backend while others are freed (ggml patch 0060).

ggml's Vulkan backend gives every dispatch a descriptor set with 12 bindings and
writes only the first n its pipeline uses; the rest keep buffers an earlier
dispatch with more parameters wrote there.  Mesa's lavapipe (22.x) takes and
drops a reference on every binding of a bound set, so once such a buffer was
destroyed (a trainer's or predictor's memory freed while the backend lives on)
the next dispatch with fewer parameters freed its resource a second time:
glibc aborted ("double free or corruption") or the heap was silently damaged.
The models layer hid it by giving every executor a backend of its own.

Each case runs in a subprocess (a heap corruption kills the interpreter) on one
Backend shared by every scheduler, and checks the weights it trains against the
same sequence run with a backend per executor.  Skips without a Vulkan device.
"""

import json
import subprocess
import sys
import textwrap

import pytest

import pyggml as pg

VULKAN = [d for d in pg.backends() if d.startswith("vulkan")]

pytestmark = [pytest.mark.vulkan,
              pytest.mark.skipif(not VULKAN, reason="this build or machine has no Vulkan device")]

SCRIPT = textwrap.dedent(r"""
    import json, sys
    import numpy as np
    from pyggml import core, ops

    device, two_layers, rounds = sys.argv[1], sys.argv[2] == "1", int(sys.argv[3])
    X = np.random.default_rng(0).random((64, 4)).astype(np.float32)
    Y = np.stack([X.sum(1), X[:, 0] - X[:, 1], X[:, 2]], axis=1).astype(np.float32)


    def run(shared):
        rng = np.random.default_rng(1)
        model_backend = core.Backend(device)
        wctx = core.Context(n_tensors=8)
        w1 = wctx.new_tensor((16, 4), name="w1").set_param()
        b1 = wctx.new_tensor((16,), name="b1").set_param()
        w2 = wctx.new_tensor((3, 16), name="w2").set_param()
        b2 = wctx.new_tensor((3,), name="b2").set_param()
        wbuf = core.BackendBuffer(wctx, model_backend)
        for t in (w1, b1, w2, b2):
            t.set(rng.normal(scale=0.5, size=t.shape).astype(np.float32))
        splits = []

        class Executor:
            # what pyggml.models builds per batch size: inputs, a graph, a scheduler
            def __init__(self, train):
                self.be = model_backend if shared else core.Backend(device)
                self.ictx = core.Context(n_tensors=4)
                self.x = self.ictx.new_tensor((16, 4), name="x")
                self.y = self.ictx.new_tensor((16, 3 if two_layers else 16), name="y")
                self.ibuf = core.BackendBuffer(self.ictx, self.be)
                self.cctx = c = core.Context(n_tensors=1024, graph_size=4096)
                h = ops.relu(ops.add(ops.mul_mat(w1, self.x, ctx=c), b1, ctx=c), ctx=c)
                # two layers: the weights' gradient of the second one needs an out_prod
                # with a transposed operand, which the CPU takes (Vulkan -> CPU -> Vulkan)
                self.out = ops.add(ops.mul_mat(w2, h, ctx=c), b2, ctx=c) if two_layers else h
                self.out.set_output()
                self.sched = core.Scheduler([self.be], graph_size=8192)
                self.opt = None
                if train:
                    err = ops.sqr(ops.sub(self.out, self.y, ctx=c), ctx=c)
                    self.opt = core.OptContext(self.sched, c, self.x, err, loss="sum", learning_rate=0.01)
                else:
                    self.graph = core.Graph(c, 4096)
                    self.graph.build_forward(self.out)

            def step(self, k):
                s = slice(16 * (k % 4), 16 * (k % 4) + 16)
                self.x.set(X[s])
                self.y.set(Y[s] if two_layers else np.tile(Y[s], (1, 6))[:, :16])
                loss = self.opt.step()
                splits.append(self.sched.n_splits)
                return loss

            def predict(self, xb):
                self.x.set(xb)
                self.sched.compute(self.graph)
                return self.out.numpy()

            def free(self):
                for o in (self.opt, self.sched, self.ibuf, self.cctx, self.ictx):
                    if o is not None:
                        o.free()
                if self.be is not model_backend:
                    self.be.free()

        losses, preds = [], []
        for r in range(rounds):
            a = Executor(train=True)
            losses.append(a.step(r))
            b = Executor(train=True)
            a.free()                        # one trainer freed before stepping another
            for k in range(3):
                losses.append(b.step(k))
            p = Executor(train=False)
            preds.append(p.predict(X[:16]).tolist())
            b.free()                        # a predictor outliving a trainer
            preds.append(p.predict(X[16:32]).tolist())
            p.free()
        weights = [t.numpy().tolist() for t in (w1, b1, w2, b2)]
        wbuf.free()
        model_backend.free()
        return {"losses": losses, "preds": preds, "weights": weights, "splits": sorted(set(splits))}


    print(json.dumps({"shared": run(True), "separate": run(False)}))
""")


def _run(device, two_layers, rounds=6):
    r = subprocess.run([sys.executable, "-c", SCRIPT, device, "1" if two_layers else "0", str(rounds)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"exit status {r.returncode}:\n{r.stderr[-3000:]}"
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("device", VULKAN or ["vulkan0"])
@pytest.mark.parametrize("two_layers", [True, False], ids=["cpu-split", "one-split"])
def test_executors_sharing_a_vulkan_backend_survive_frees(device, two_layers):
    out = _run(device, two_layers)
    shared, separate = out["shared"], out["separate"]
    # the case exercises what it is named for: with two layers every step goes
    # Vulkan -> CPU -> Vulkan; with one layer the whole graph stays on the device
    if two_layers:
        assert min(shared["splits"]) >= 3, shared["splits"]
    else:
        assert shared["splits"] == [1], shared["splits"]
    # it trained: the loss moved
    assert shared["losses"][-1] != shared["losses"][0]
    # one backend or a backend per executor: the same computation, the same numbers
    assert shared["losses"] == separate["losses"]
    assert shared["preds"] == separate["preds"]
    assert shared["weights"] == separate["weights"]
