#!/usr/bin/env python3
"""A training loop written by hand with ``pg.Trainer``, on a regression task.

The loop shuffles, cuts batches, steps the trainer, sets its own learning
rate every step (a warm-up, then a cosine decay), measures the validation
error after every epoch and keeps the best weights so far as a
``pg.Snapshot``.  At the end the snapshot predicts the test set, is saved as a
GGUF file and loaded back with ``pg.load_model``.

    python examples/custom_loop.py [--epochs N] [--seed N]
"""

import argparse
import math
import os
import sys
import tempfile

import numpy as np

import pyggml as pg


def target_function(x):
    """A smooth surface with some curvature in both inputs."""
    return (np.sin(2.0 * x[:, 0]) * np.cos(1.5 * x[:, 1]) + 0.3 * x[:, 0] * x[:, 1])[:, None]


def make_data(n, rng, noise=0.05):
    x = rng.uniform(-2, 2, size=(n, 2)).astype(np.float32)
    return x, (target_function(x) + noise * rng.normal(size=(n, 1))).astype(np.float32)


def learning_rate(step, total, peak, warmup):
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return peak * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * progress)))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=int, default=60)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch-size", type=int, default=32)
    args = p.parse_args(argv)

    rng = np.random.default_rng(args.seed)
    x_train, y_train = make_data(2048, rng)
    x_val, y_val = make_data(512, rng)
    x_test, y_test = make_data(1024, rng, noise=0.0)

    pg.set_seed(args.seed)
    L = pg.layers
    model = pg.Sequential([L.Dense(64, activation="tanh"), L.Dense(64, activation="tanh"), L.Dense(1)],
                          input_shape=2)
    model.compile(optimizer=pg.optimizers.Adam(learning_rate=1e-3), loss="mse")

    bs = args.batch_size
    tr = pg.Trainer(model, batch_size=bs)
    steps_per_epoch = len(x_train) // bs      # a step takes exactly batch_size rows
    total = steps_per_epoch * args.epochs
    best, best_mse, best_epoch = None, float("inf"), -1
    print(f"{'epoch':>5} {'lr':>9} {'train mse':>10} {'val mse':>9}")
    for epoch in range(args.epochs):
        order = rng.permutation(len(x_train))
        losses = []
        for i in range(steps_per_epoch):
            tr.set_lr(learning_rate(tr.n_steps, total, peak=3e-3, warmup=steps_per_epoch))
            rows = order[i * bs:(i + 1) * bs]
            losses.append(tr.step(x_train[rows], y_train[rows]))
        val_mse = float(np.mean((tr.predict(x_val) - y_val) ** 2))
        if val_mse < best_mse:
            if best is not None:
                best.free()
            best, best_mse, best_epoch = tr.snapshot(), val_mse, epoch + 1
        if epoch % 10 == 0 or epoch == args.epochs - 1:
            print(f"{epoch + 1:>5} {tr.lr:>9.2e} {np.mean(losses):>10.5f} {val_mse:>9.5f}")

    # tr.eval: the loss of one batch without training
    print(f"tr.eval on the first validation batch: {tr.eval(x_val[:bs], y_val[:bs]):.5f}")
    final_mse = float(np.mean((tr.predict(x_test) - y_test) ** 2))
    best_pred = best.predict(x_test)
    best_test_mse = float(np.mean((best_pred - y_test) ** 2))
    baseline = float(np.var(y_test))
    print(f"{tr.n_steps} steps; test mse: last weights {final_mse:.5f}, best snapshot (epoch {best_epoch}) "
          f"{best_test_mse:.5f}; predicting the mean: {baseline:.5f}")

    with tempfile.TemporaryDirectory(prefix="pyggml-loop-") as d:
        path = os.path.join(d, "best.gguf")
        best.save(path)
        loaded = pg.load_model(path)
        exact = bool(np.array_equal(loaded.predict(x_test), best_pred))
        print(f"best snapshot saved and loaded with pg.load_model: predictions match exactly: {exact}")
        loaded.free()

    # the trained model itself stays usable after the trainer is freed
    tr.free()
    after = float(np.mean((model.predict(x_test) - y_test) ** 2))
    print(f"model.predict after tr.free(): test mse {after:.5f}")
    best.free()
    model.free()
    ok = exact and best_test_mse < 0.1 * baseline and abs(after - final_mse) < 1e-6
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
