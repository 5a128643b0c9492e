"""ProgbarLogger, TensorBoard, RemoteMonitor and SwapEMAWeights."""

import numpy as np
import pytest

import pyggml as pg


def _model():
    m = pg.Sequential([pg.Input((3,)), pg.layers.Dense(1)])
    m.compile(pg.optimizers.SGD(0.05), "mse", metrics=["mae"])
    return m


def _data(n=32):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, 3)).astype("float32")
    return x, (x @ np.array([[1.0], [-2.0], [0.5]])).astype("float32")


# ---------------------------------------------------------------- ProgbarLogger

def test_fit_prints_through_one_progbar_logger(capsys):
    m = _model()
    x, y = _data()
    h = m.fit(x, y, epochs=2, batch_size=8, validation_split=0.25, verbose=1)
    out = capsys.readouterr().out
    assert out.count("Epoch 1/2") == 1 and out.count("Epoch 2/2") == 1
    last = [line for line in out.splitlines() if line.strip()][-1]
    assert last.lstrip("\r").startswith("3/3 [====================]")
    assert f"loss: {h.history['loss'][-1]:.4f}" in last and f"val_mae: {h.history['val_mae'][-1]:.4f}" in last
    # a ProgbarLogger passed in replaces the one fit adds: still one line per epoch end
    m.fit(x, y, epochs=2, batch_size=8, callbacks=[pg.callbacks.ProgbarLogger()])
    assert capsys.readouterr().out.count("4/4 [====================]") == 2
    m.fit(x, y, epochs=2, batch_size=8, verbose=2, callbacks=[pg.callbacks.ProgbarLogger()])
    out = capsys.readouterr().out
    assert out.count("4/4 ") == 2 and "[" not in out and "Epoch 2/2" in out
    m.fit(x, y, epochs=1, batch_size=8, verbose=0)
    assert capsys.readouterr().out == ""
    m.evaluate(x, y, batch_size=8)
    out = capsys.readouterr().out
    assert "4/4 [====================]" in out and "loss:" in out
    m.evaluate(x, y, batch_size=8, verbose=0)
    assert capsys.readouterr().out == ""
    with pytest.raises(ValueError, match="verbose"):
        m.evaluate(x, y, verbose=5)


def test_progbar_logger_in_predict_and_single_epoch(capsys):
    m = _model()
    x, y = _data(10)
    m.fit(x, y, epochs=1, batch_size=5)
    out = capsys.readouterr().out
    assert "Epoch" not in out and "2/2 [" in out          # Keras: no "Epoch 1/1" line
    # the predict hooks, driven by hand (pyggml's predict does not call callbacks yet)
    logger = pg.callbacks.ProgbarLogger()
    logger.set_params({"steps": 3, "verbose": 1})
    logger.on_predict_begin()
    for b in range(3):
        logger.on_predict_batch_end(b, {"outputs": None})
    logger.on_predict_end()
    assert capsys.readouterr().out.splitlines()[-1].lstrip("\r").startswith("3/3 [====================]")
