"""pyggml's demo: a small CNN on scikit-learn's handwritten digits, end to end.

    python -m pyggml.demo [--epochs N] [--backend NAME] [--seed N] [--out PATH]

It trains a convolutional network on the 8x8 digits that ship with
scikit-learn (no download), reports the accuracy on a held-out fifth of them,
saves the model as one GGUF file, loads it back with ``pg.load_model`` and
checks that the loaded model predicts exactly what the trained one does.
"""

import argparse
import os
import sys
import tempfile
import time

import numpy as np

import pyggml as pg

__all__ = ["main", "build_model", "load_digits_split"]


def load_digits_split(seed, test_fraction=0.2):
    """(x_train, y_train, x_test, y_test): images (n, 8, 8, 1) in [0, 1] and
    integer labels, split per class so both parts hold every digit alike."""
    from sklearn.datasets import load_digits
    d = load_digits()
    x = (d.images / 16.0).astype(np.float32)[..., None]
    y = d.target.astype(np.int64)
    rng = np.random.default_rng(seed)
    test = np.zeros(len(y), dtype=bool)
    for c in np.unique(y):
        rows = rng.permutation(np.flatnonzero(y == c))
        test[rows[:round(len(rows) * test_fraction)]] = True
    return x[~test], y[~test], x[test], y[test]


def shifted_copies(x, y):
    """The images plus copies moved by one pixel up, down, left and right (zero
    filled): handwriting is rarely centred, and the network learns that."""
    out = [x]
    for dy, dx in ((1, 0), (-1, 0), (0, 1), (0, -1)):
        out.append(np.roll(x, (dy, dx), axis=(1, 2)))
        if dy:
            out[-1][:, 0 if dy > 0 else -1] = 0
        else:
            out[-1][:, :, 0 if dx > 0 else -1] = 0
    return np.concatenate(out), np.tile(y, len(out))


def build_model():
    L = pg.layers
    return pg.Sequential([
        L.Conv2D(16, 3, padding="same", activation="relu"),
        L.MaxPooling2D(),
        L.Conv2D(32, 3, padding="same", activation="relu"),
        L.MaxPooling2D(),
        L.Flatten(),
        L.Dropout(0.25),
        L.Dense(64, activation="relu"),
        L.Dense(10, activation="softmax"),
    ], input_shape=(8, 8, 1), name="digits_cnn")


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m pyggml.demo", description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=int, default=10,
                   help="training epochs over the digits and their shifted copies (default 10)")
    p.add_argument("--backend", default="auto",
                   help=f"device to train on: 'auto' (default), 'cpu' or one of {pg.backends()}")
    p.add_argument("--seed", type=int, default=0, help="seed of the split, the weights and the shuffling (default 0)")
    p.add_argument("--out", default=None,
                   help="where to save the model (GGUF); default: a temporary file, removed at the end")
    p.add_argument("--batch-size", type=int, default=32, help="default 32")
    p.add_argument("--learning-rate", type=float, default=3e-3,
                   help="Adam's learning rate in the first epoch, x0.8 each epoch after (default 3e-3)")
    p.add_argument("--threads", type=int, default=0,
                   help="the most CPU threads (default 0: one per core); each graph times itself on 1, n/2 "
                        "and n threads and keeps the fastest (pg.set_n_threads)")
    p.add_argument("--quiet", action="store_true", help="no progress bar and no summary")
    args = p.parse_args(argv)
    if args.epochs < 1:
        p.error("--epochs must be at least 1")
    if args.threads < 0:
        p.error("--threads must be 0 (automatic) or more")
    if args.backend != "auto" and args.backend.lower() not in pg.backends():
        p.error(f"--backend {args.backend!r} is not available here; this build can use {pg.backends()} or 'auto'")
    return args


def main(argv=None):
    args = parse_args(argv)
    t0 = time.perf_counter()
    try:
        import sklearn  # noqa: F401
    except ImportError:
        print("The pyggml demo needs scikit-learn, for the handwritten digits it ships with "
              "(nothing is downloaded).\nInstall it with:  pip install scikit-learn", file=sys.stderr)
        return 2
    pg.set_n_threads(args.threads or None)
    backend = pg.backends()[0] if args.backend == "auto" else args.backend

    x_train, y_train, x_test, y_test = load_digits_split(args.seed)
    x_fit, y_fit = shifted_copies(x_train, y_train)
    n = pg.get_n_threads()
    print(f"pyggml {pg.__version__} (ggml {pg.ggml_version()}), backend {backend}, "
          f"{n} CPU thread{'' if n == 1 else 's'}")
    print(f"digits: {len(x_train)} training images (x5 with shifted copies), {len(x_test)} held out")

    pg.set_seed(args.seed)
    model = build_model()
    model.compile(optimizer=pg.optimizers.Adam(learning_rate=args.learning_rate),
                  loss="sparse_categorical_crossentropy", metrics=["accuracy"], backend=args.backend)
    if not args.quiet:
        model.summary()
    t_fit = time.perf_counter()
    decay = pg.callbacks.LearningRateScheduler(lambda epoch, lr: args.learning_rate * 0.8 ** epoch)
    model.fit(x_fit, y_fit, epochs=args.epochs, batch_size=args.batch_size, verbose=0 if args.quiet else 1,
              callbacks=[decay])
    t_fit = time.perf_counter() - t_fit

    pred = model.predict(x_test)
    acc = float(np.mean(pred.argmax(axis=1) == y_test))
    print(f"test accuracy: {acc:.4f} ({int(round(acc * len(y_test)))}/{len(y_test)} held-out digits)")

    tmpdir = None
    path = args.out
    if path is None:
        tmpdir = tempfile.TemporaryDirectory(prefix="pyggml-demo-")
        path = os.path.join(tmpdir.name, "digits_cnn.gguf")
    try:
        model.save(path)
        loaded = pg.load_model(path, backend=args.backend)
        same = loaded.predict(x_test)
        exact = bool(np.array_equal(same, pred))
        print(f"saved to {path} ({os.path.getsize(path) / 1024:.1f} KiB)" + (" (temporary)" if tmpdir else ""))
        print(f"loaded back with pg.load_model: predictions match exactly: {exact} "
              f"(max |difference| {float(np.max(np.abs(same - pred))):.3g})")
        loaded.free()
    finally:
        if tmpdir is not None:
            tmpdir.cleanup()
    model.free()
    print(f"backend: {backend}; time: {time.perf_counter() - t0:.1f} s in all, {t_fit:.1f} s training")
    return 0 if exact else 1


if __name__ == "__main__":
    sys.exit(main())
