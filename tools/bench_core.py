#!/usr/bin/env python3
"""The wrapper's overhead on small calls of pyggml.core, in microseconds.

Times (best of several timeit repeats, per call):
- making one op (ops.add, ops.mul_mat, ops.relu) in a context with room;
- Tensor.set, Tensor.numpy and Scheduler.compute on a tiny graph
  (c = a + b, 2x3), alone and as one round trip (set, compute, numpy);
- the same round trip at several thread counts.

A benchmark only: nothing here decides a test.  Usage:
    python tools/bench_core.py [--number N] [--repeat R]
"""

from __future__ import annotations

import argparse
import timeit

import numpy as np

from pyggml import core, ops


def best_us(fn, number: int, repeat: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--number", type=int, default=2000, help="calls per timing")
    ap.add_argument("--repeat", type=int, default=5, help="timings; the best is kept")
    args = ap.parse_args()
    n, r = args.number, args.repeat

    be = core.Backend("cpu")
    lctx = core.Context(n_tensors=8)
    a = lctx.new_tensor((2, 3), name="a")
    b = lctx.new_tensor((2, 3), name="b")
    m = lctx.new_tensor((16, 16), name="m")
    buf = core.BackendBuffer(lctx, be)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    a.set(x)
    b.set(np.ones((2, 3), np.float32))
    m.set(np.eye(16, dtype=np.float32))

    rows = []
    # op creation: each call adds a tensor, so give the context room for all of them
    total = n * r + 16
    for name, make in (("ops.add (2x3)", lambda c: ops.add(a, b, ctx=c)),
                       ("ops.mul_mat (16x16)", lambda c: ops.mul_mat(m, m, ctx=c)),
                       ("ops.relu (2x3)", lambda c: ops.relu(a, ctx=c))):
        c = core.Context(n_tensors=total)
        rows.append((f"create {name}", best_us(lambda: make(c), n, r)))
        c.free()

    cctx = core.Context(n_tensors=16, graph_size=16)
    c = ops.add(a, b, ctx=cctx)
    g = core.Graph(cctx, 16)
    g.build_forward(c)
    sched = core.Scheduler([be], graph_size=64)
    sched.compute(g, n_threads=1)
    assert np.allclose(c.numpy(), x + 1)

    rows.append(("Tensor.set (2x3 float32)", best_us(lambda: a.set(x), n, r)))
    x64 = x.astype(np.float64)
    rows.append(("Tensor.set (2x3 float64, converted)", best_us(lambda: a.set(x64), n, r)))
    rows.append(("Tensor.numpy (2x3)", best_us(c.numpy, n, r)))
    for threads in (1, 2, None):
        label = "default" if threads is None else str(threads)
        rows.append((f"Scheduler.compute, tiny graph, threads={label}",
                     best_us(lambda: sched.compute(g, n_threads=threads), n, r)))

    def round_trip(threads):
        a.set(x)
        sched.compute(g, n_threads=threads)
        return c.numpy()

    for threads in (1, 2, None):
        label = "default" if threads is None else str(threads)
        rows.append((f"set + compute + numpy, threads={label}", best_us(lambda: round_trip(threads), n, r)))

    def fresh_graph():
        cc = core.Context(n_tensors=4, graph_size=4)
        gg = core.Graph(cc, 4)
        gg.build_forward(ops.add(a, b, ctx=cc))
        sched.compute(gg, n_threads=1)
        cc.free()

    rows.append(("new context + op + graph + alloc + compute + free", best_us(fresh_graph, max(1, n // 10), r)))

    width = max(len(k) for k, _ in rows)
    print(f"pyggml {core.ggml_version()} core call overhead (best of {r} x {n} calls)")
    print(f"{'call'.ljust(width)}  microseconds")
    print(f"{'-' * width}  ------------")
    for k, v in rows:
        print(f"{k.ljust(width)}  {v:12.2f}")
    for o in (sched, g, cctx, buf, lctx, be):
        o.free()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
