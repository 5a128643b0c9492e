#!/usr/bin/env python3
"""Microseconds per Trainer.step (forward, backward, Adam) beside PyTorch's
for the same step: the seed's 4-8-2 network at batch 16 (cross-entropy) and an
8-64-64-4 network at batch 32 (mse).  Median of several runs; a benchmark,
never a test."""

import os
import statistics
import time

import numpy as np

import pyggml as pg


def _time(fn, n):
    fn()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t) / n * 1e6


def pyggml_step(sizes, batch, loss, n):
    pg.set_seed(0)
    layers = [pg.layers.Dense(h, activation="relu") for h in sizes[1:-1]]
    layers.append(pg.layers.Dense(sizes[-1], activation="softmax" if loss == "categorical_crossentropy" else None))
    m = pg.Sequential(layers, input_shape=sizes[0]).compile(optimizer="adam", loss=loss)
    rng = np.random.default_rng(0)
    x = rng.random((batch, sizes[0])).astype(np.float32)
    y = np.eye(sizes[-1], dtype=np.float32)[rng.integers(0, sizes[-1], batch)]
    tr = pg.Trainer(m, batch_size=batch)
    us = [_time(lambda: tr.step(x, y), n) for _ in range(5)]
    tr.free()
    m.free()
    return statistics.median(us)


def torch_step(sizes, batch, loss, n, threads):
    import torch
    torch.set_num_threads(threads)
    mods = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        mods += [torch.nn.Linear(a, b), torch.nn.ReLU()]
    net = torch.nn.Sequential(*mods[:-1])
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    lf = torch.nn.CrossEntropyLoss() if loss == "categorical_crossentropy" else torch.nn.MSELoss()
    x = torch.rand(batch, sizes[0])
    y = torch.nn.functional.one_hot(torch.randint(0, sizes[-1], (batch,)), sizes[-1]).float()

    def step():
        opt.zero_grad()
        out = lf(net(x), y)
        out.backward()
        opt.step()
        return out.item()
    return statistics.median(_time(step, n) for _ in range(5))


def main():
    threads = int(os.environ.get("BENCH_THREADS", "2"))
    rows = []
    for name, sizes, batch, loss in (("4-8-2, batch 16", (4, 8, 2), 16, "categorical_crossentropy"),
                                     ("8-64-64-4, batch 32", (8, 64, 64, 4), 32, "mse")):
        ours = pyggml_step(sizes, batch, loss, 2000)
        try:
            theirs = torch_step(sizes, batch, loss, 2000, threads)
        except ImportError:
            theirs = float("nan")
        rows.append((name, ours, theirs))
    print(f"Trainer.step, us per step (median of 5 x 2000), {threads} threads for PyTorch, pyggml automatic")
    print(f"{'workload':<22}{'pyggml':>10}{'PyTorch':>10}{'speed-up':>10}")
    for name, a, b in rows:
        print(f"{name:<22}{a:>10.1f}{b:>10.1f}{b / a:>9.1f}x")


if __name__ == "__main__":
    main()
