#!/usr/bin/env python3
"""A functional model with two inputs and two outputs.

Two kinds of input describe each sample: six "sensor" readings and four
"context" values.  One head classifies the sample into three classes
(softmax, categorical cross-entropy), the other predicts a continuous
quantity (linear, mean squared error).  The branches are merged with
Concatenate and share a trunk; the losses are named per output and weighted.

    python examples/functional_two_heads.py [--epochs N] [--seed N]
"""

import argparse
import sys

import numpy as np

import pyggml as pg


def make_data(n, rng):
    """Synthetic data whose targets need both inputs."""
    sensors = rng.normal(size=(n, 6)).astype(np.float32)
    context = rng.normal(size=(n, 4)).astype(np.float32)
    score = np.stack([sensors[:, 0] + context[:, 0],
                      sensors[:, 1] - sensors[:, 2] * context[:, 1],
                      0.5 * np.ones(n, np.float32)], axis=1)
    label = np.argmax(score, axis=1)
    amount = np.sin(sensors[:, 3]) + context[:, 2] * context[:, 3] + 0.05 * rng.normal(size=n)
    return sensors, context, np.eye(3, dtype=np.float32)[label], amount.astype(np.float32)[:, None]


def build_model():
    L = pg.layers
    sensors = pg.Input(shape=6, name="sensors")
    context = pg.Input(shape=4, name="context")
    s = L.Dense(32, activation="relu", name="sensor_branch")(sensors)
    c = L.Dense(16, activation="relu", name="context_branch")(context)
    trunk = L.Concatenate(name="merge")([s, c])
    trunk = L.Dense(64, activation="relu", name="trunk")(trunk)
    trunk = L.Dense(64, activation="relu", name="trunk_2")(trunk)
    cls = L.Dense(3, activation="softmax", name="cls")(trunk)
    amount = L.Dense(1, name="amount")(trunk)
    return pg.Model(inputs=[sensors, context], outputs=[cls, amount], name="two_heads")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=int, default=40)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    rng = np.random.default_rng(args.seed)
    xs_tr, xc_tr, ycls_tr, yamt_tr = make_data(2000, rng)
    xs_te, xc_te, ycls_te, yamt_te = make_data(500, rng)

    pg.set_seed(args.seed)
    model = build_model()
    model.compile(optimizer=pg.optimizers.Adam(learning_rate=2e-3),
                  loss={"cls": "categorical_crossentropy", "amount": "mse"},
                  loss_weights={"cls": 1.0, "amount": 0.5})
    model.summary()
    print("layers:", ", ".join(l.name for l in model.layers))

    before = model.evaluate([xs_te, xc_te], [ycls_te, yamt_te], batch_size=100, return_dict=True)
    # x: a list in the order of the inputs; y: a list, or a dict by output name
    hist = model.fit([xs_tr, xc_tr], {"cls": ycls_tr, "amount": yamt_tr},
                     epochs=args.epochs, batch_size=64, validation_split=0.1, verbose=0)
    h = hist.history
    print(f"trained {len(hist.epoch)} epochs: loss {h['loss'][0]:.3f} -> {h['loss'][-1]:.3f} "
          f"(cls_loss {h['cls_loss'][-1]:.3f}, amount_loss {h['amount_loss'][-1]:.3f}, "
          f"val_loss {h['val_loss'][-1]:.3f})")

    after = model.evaluate([xs_te, xc_te], [ycls_te, yamt_te], batch_size=100, return_dict=True)
    print("held-out evaluate before training: " + ", ".join(f"{k} {v:.3f}" for k, v in before.items()))
    print("held-out evaluate after training:  " + ", ".join(f"{k} {v:.3f}" for k, v in after.items()))

    p_cls, p_amount = model.predict([xs_te, xc_te])
    acc = float(np.mean(p_cls.argmax(axis=1) == ycls_te.argmax(axis=1)))
    mse = float(np.mean((p_amount - yamt_te) ** 2))
    base = float(np.var(yamt_te))
    print(f"predict returns {len([p_cls, p_amount])} arrays: cls {p_cls.shape}, amount {p_amount.shape}")
    print(f"held-out accuracy of the cls head: {acc:.3f} (chance: {np.max(ycls_te.mean(axis=0)):.3f})")
    print(f"held-out mse of the amount head: {mse:.3f} (predicting the mean: {base:.3f})")
    # the total is the weighted sum of the heads' losses
    total = after["cls_loss"] + 0.5 * after["amount_loss"]
    print(f"loss = cls_loss + 0.5 * amount_loss: {after['loss']:.4f} = {total:.4f}")
    model.free()
    ok = acc > 0.8 and mse < 0.5 * base and abs(after["loss"] - total) < 1e-3 * max(1.0, total)
    print("OK" if ok else "FAILED: the model did not learn both heads")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
