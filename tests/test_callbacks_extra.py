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


# ---------------------------------------------------------------- TensorBoard

import glob  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import struct  # noqa: E402

from pyggml.callbacks import event_file  # noqa: E402


def _varint(b, i):
    shift = n = 0
    while True:
        c = b[i]
        i += 1
        n |= (c & 0x7F) << shift
        shift += 7
        if not c & 0x80:
            return n, i


def _fields(b):
    """A protobuf message as [(field, value)]: ints, 8-byte and 4-byte raw values, bytes."""
    out, i = [], 0
    while i < len(b):
        key, i = _varint(b, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            v, i = _varint(b, i)
        elif wire == 1:
            v, i = b[i:i + 8], i + 8
        elif wire == 5:
            v, i = b[i:i + 4], i + 4
        elif wire == 2:
            n, i = _varint(b, i)
            v, i = b[i:i + n], i + n
        else:
            raise AssertionError(f"wire type {wire}")
        out.append((field, v))
    return out


def _events(logdir):
    """[(step, {tag: value})] of every event file in logdir, the file_version event first."""
    files = sorted(glob.glob(os.path.join(logdir, "events.out.tfevents.*")))
    assert files, f"no event file in {logdir}"
    out = []
    for path in files:
        records = event_file.read_records(path)
        first = dict(_fields(records[0]))
        assert first[3] == b"brain.Event:2"
        for data in records[1:]:
            ev = dict(_fields(data))
            assert struct.unpack("<d", ev[1])[0] > 1.6e9          # wall_time, seconds
            values = {}
            for f, v in _fields(ev[5]):
                assert f == 1
                val = dict(_fields(v))
                tag = val[1].decode()
                if 2 in val:
                    values[tag] = struct.unpack("<f", val[2])[0]
                elif 5 in val:
                    values[tag] = dict(_fields(val[5]))
                else:
                    values[tag] = val
            out.append((ev.get(2, 0), values))
    return out


def test_crc32c_and_record_format(tmp_path):
    assert event_file.crc32c(b"123456789") == 0xE3069283        # the standard CRC-32C check value
    assert event_file.crc32c(b"") == 0
    w = event_file.EventFileWriter(str(tmp_path))
    w.scalar("x", 1.5, 7)
    w.close()
    blob = open(w.path, "rb").read()
    data = event_file.read_records(w.path)
    assert len(data) == 2
    n = struct.unpack("<Q", blob[:8])[0]
    assert n == len(data[0]) and struct.unpack("<I", blob[8:12])[0] == event_file.masked_crc32c(blob[:8])
    corrupt = bytearray(blob)
    corrupt[14] ^= 1
    (tmp_path / "bad").write_bytes(bytes(corrupt))
    with pytest.raises(ValueError, match="checksum"):
        event_file.read_records(str(tmp_path / "bad"))


def test_tensorboard_writes_epoch_scalars_train_and_validation(tmp_path):
    m = _model()
    x, y = _data()
    tb = pg.callbacks.TensorBoard(log_dir=str(tmp_path / "logs"), write_steps_per_second=True)
    h = m.fit(x, y, epochs=3, batch_size=8, validation_split=0.25, callbacks=[tb], verbose=0)
    train = _events(tmp_path / "logs" / "train")
    graph = [v for _, v in train if "keras" in v]
    assert len(graph) == 1                                        # write_graph: the model's config
    tensor = dict(_fields(graph[0]["keras"][8]))
    assert tensor[1] == 7 and json.loads(tensor[8])["class_name"] == "Sequential"
    meta = dict(_fields(dict(_fields(graph[0]["keras"][9]))[1]))
    assert meta[1] == b"graph_keras_model"
    scalars = [(s, v) for s, v in train if "epoch_loss" in v]
    assert [s for s, _ in scalars] == [0, 1, 2]
    for (step, v) in scalars:
        assert v["epoch_loss"] == pytest.approx(h.history["loss"][step], rel=1e-6)
        assert v["epoch_mae"] == pytest.approx(h.history["mae"][step], rel=1e-6)
        assert v["epoch_learning_rate"] == pytest.approx(0.05)
        assert v["epoch_steps_per_second"] > 0
        assert not any(k.startswith("epoch_val") for k in v)
    val = _events(tmp_path / "logs" / "validation")
    assert [s for s, _ in val] == [0, 1, 2]
    for step, v in val:
        assert v["epoch_loss"] == pytest.approx(h.history["val_loss"][step], rel=1e-6)
        assert v["epoch_mae"] == pytest.approx(h.history["val_mae"][step], rel=1e-6)
    # evaluate outside fit: evaluation_<metric>_vs_iterations at the iteration count
    loss = m.evaluate(x, y, batch_size=8, verbose=0, callbacks=[tb])[0]
    ev = [(s, v) for s, v in _events(tmp_path / "logs" / "validation") if "evaluation_loss_vs_iterations" in v]
    assert ev == [(m.optimizer.iterations, pytest.approx({"evaluation_loss_vs_iterations": loss,
                                                         "evaluation_mae_vs_iterations": ev[0][1][
                                                             "evaluation_mae_vs_iterations"]}))]
    assert ev[0][1]["evaluation_loss_vs_iterations"] == pytest.approx(loss, rel=1e-6)


def test_tensorboard_batch_updates_and_histograms(tmp_path):
    m = _model()
    x, y = _data()
    seen = []
    rec = pg.callbacks.LambdaCallback(on_train_batch_end=lambda b, logs: seen.append(logs["loss"]))
    tb = pg.callbacks.TensorBoard(log_dir=str(tmp_path), update_freq=3, histogram_freq=2, write_graph=False)
    m.fit(x, y, epochs=3, batch_size=8, callbacks=[rec, tb], verbose=0)    # 4 batches an epoch, 12 in all
    train = _events(tmp_path / "train")
    batch = [(s, v["batch_loss"]) for s, v in train if "batch_loss" in v]
    assert [s for s, _ in batch] == [3, 6, 9, 12]
    for s, v in batch:
        assert v == pytest.approx(seen[s - 1], rel=1e-6)
    assert not any("keras" in v for _, v in train)
    hist = [(s, v) for s, v in train if any(k.endswith("/histogram") for k in v)]
    assert [s for s, _ in hist] == [0, 2]
    weights = dict(m.named_variables())
    step, v = hist[-1]
    for name, var in weights.items():
        h = v[f"{name}/histogram"]
        w = var.numpy().astype(np.float64)
        d = {k: struct.unpack("<d", h[k])[0] for k in (1, 2, 3, 4, 5)}
        assert d[1] == pytest.approx(w.min()) and d[2] == pytest.approx(w.max()) and d[3] == w.size
        assert d[4] == pytest.approx(w.sum(), abs=1e-6) and d[5] == pytest.approx((w * w).sum(), rel=1e-6)
        counts = struct.unpack(f"<{len(h[7]) // 8}d", h[7])
        assert sum(counts) == w.size


def _decode_png(data):
    import zlib
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks = 8, {}
    while pos < len(data):
        n = struct.unpack(">I", data[pos:pos + 4])[0]
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        assert struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])[0] == zlib.crc32(kind + body)
        chunks[kind] = chunks.get(kind, b"") + body
        pos += 12 + n
    w, h, depth, color = struct.unpack(">IIBB", chunks[b"IHDR"][:10])
    c = {0: 1, 2: 3, 6: 4}[color]
    raw = zlib.decompress(chunks[b"IDAT"])
    rows = [raw[r * (w * c + 1):(r + 1) * (w * c + 1)] for r in range(h)]
    assert all(row[0] == 0 for row in rows)
    return np.frombuffer(b"".join(row[1:] for row in rows), np.uint8).reshape(h, w, c)


def test_tensorboard_write_images(tmp_path):
    m = pg.Sequential([pg.Input((5,)), pg.layers.Dense(2)])
    m.compile("sgd", "mse")
    x = np.random.default_rng(0).normal(size=(8, 5)).astype("float32")
    m.fit(x, x[:, :2], epochs=1, verbose=0,
          callbacks=[pg.callbacks.TensorBoard(str(tmp_path), histogram_freq=1, write_images=True)])
    (_, values), = [(s, v) for s, v in _events(tmp_path / "train") if any("/image/" in k for k in v)]
    kernel = m.layers[0].get_weights()[0]                     # Keras's (5, 2): shown as 2 x 5
    img = dict(_fields(values["dense.weight/image/0"][4]))
    assert (img[1], img[2], img[3]) == (2, 5, 1)
    pixels = _decode_png(img[4])[:, :, 0]
    np.testing.assert_array_equal(pixels, np.round(np.clip(kernel.T, 0, 1) * 255).astype(np.uint8))
    bias = dict(_fields(values["dense.bias/image/0"][4]))
    assert (bias[1], bias[2]) == (2, 1)


def test_tensorboard_files_read_by_tensorboard_if_installed(tmp_path):
    ea = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    m = _model()
    x, y = _data()
    h = m.fit(x, y, epochs=2, batch_size=8, verbose=0, callbacks=[pg.callbacks.TensorBoard(str(tmp_path))])
    acc = ea.EventAccumulator(str(tmp_path / "train"))
    acc.Reload()
    losses = [e.value for e in acc.Scalars("epoch_loss")]
    assert losses == pytest.approx(h.history["loss"], rel=1e-6)


def test_tensorboard_bad_arguments():
    TB = pg.callbacks.TensorBoard
    with pytest.raises(ValueError, match="update_freq"):
        TB(update_freq="step")
    with pytest.raises(ValueError, match="update_freq"):
        TB(update_freq=0)
    with pytest.raises(ValueError, match="histogram_freq"):
        TB(histogram_freq=-1)
    with pytest.raises(ValueError, match="profile_batch"):
        TB(profile_batch=(2, 4))
    with pytest.raises(ValueError, match="embeddings_freq"):
        TB(embeddings_freq=1)
    with pytest.raises(TypeError, match="log_dir"):
        TB(log_dir=3)
    assert TB(update_freq="batch").update_freq == 1


# ---------------------------------------------------------------- RemoteMonitor

import http.server  # noqa: E402
import threading  # noqa: E402
import urllib.parse  # noqa: E402


@pytest.fixture
def post_server():
    got = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            n = int(self.headers["Content-Length"])
            got.append((self.path, dict(self.headers), self.rfile.read(n)))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *a):
            pass
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", got
    server.shutdown()
    server.server_close()


def test_remote_monitor_posts_each_epoch(post_server):
    root, got = post_server
    m = _model()
    x, y = _data()
    h = m.fit(x, y, epochs=2, batch_size=8, verbose=0,
              callbacks=[pg.callbacks.RemoteMonitor(root=root, headers={"X-Run": "r1"})])
    assert len(got) == 2
    path, headers, body = got[1]
    assert path == "/publish/epoch/end/" and headers["X-Run"] == "r1"
    assert headers["Content-Type"] == "application/x-www-form-urlencoded"
    data = json.loads(urllib.parse.parse_qs(body.decode())["data"][0])
    assert data["epoch"] == 1 and data["loss"] == pytest.approx(h.history["loss"][1])
    got.clear()
    m.fit(x, y, epochs=1, batch_size=8, verbose=0,
          callbacks=[pg.callbacks.RemoteMonitor(root=root, path="/p", send_as_json=True)])
    path, headers, body = got[0]
    assert path == "/p" and headers["Content-Type"] == "application/json"
    assert set(json.loads(body)) == {"epoch", "loss", "mae", "learning_rate"}


def test_remote_monitor_unreachable_warns_and_bad_arguments():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()                                          # nothing listens there now
    m = _model()
    x, y = _data()
    with pytest.warns(UserWarning, match="could not reach"):
        m.fit(x, y, epochs=1, batch_size=8, verbose=0,
              callbacks=[pg.callbacks.RemoteMonitor(root=f"http://127.0.0.1:{port}")])
    with pytest.raises(ValueError, match="http"):
        pg.callbacks.RemoteMonitor(root="ftp://x")
    with pytest.raises(TypeError, match="headers"):
        pg.callbacks.RemoteMonitor(headers={"a": 1})
    with pytest.raises(TypeError, match="path"):
        pg.callbacks.RemoteMonitor(path=3)


# ---------------------------------------------------------------- SwapEMAWeights

def _ema_model():
    m = pg.Sequential([pg.Input((3,)), pg.layers.Dense(1)])
    m.compile(pg.optimizers.SGD(0.05, use_ema=True, ema_momentum=0.8), "mse")
    return m


class _Recorder(pg.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.after_step, self.at_eval, self.at_epoch_end = [], [], []

    def on_train_batch_end(self, batch, logs=None):
        self.after_step.append(list(self.model.get_weights().values()))

    def on_test_batch_begin(self, batch, logs=None):
        if batch == 0:
            self.at_eval.append(list(self.model.get_weights().values()))

    def on_epoch_end(self, epoch, logs=None):
        self.at_epoch_end.append(list(self.model.get_weights().values()))


def _ema_of(steps, momentum=0.8):
    """The optimizer's average, in float64: ema = m * ema + (1 - m) * w after each step, m = 0 at the first."""
    ema = None
    for ws in steps:
        ema = [np.asarray(w, np.float64) for w in ws] if ema is None else \
            [momentum * e + (1 - momentum) * np.asarray(w, np.float64) for e, w in zip(ema, ws)]
    return ema


def test_swap_ema_weights_validates_with_the_averages(tmp_path):
    x, y = _data(32)
    xv, yv = _data(12)
    m = _ema_model()
    rec = _Recorder()
    h = m.fit(x, y, epochs=2, batch_size=8, validation_data=(xv + 1, yv), verbose=0,
              callbacks=[pg.callbacks.SwapEMAWeights(), rec])
    for epoch in range(2):
        ema = _ema_of(rec.after_step[:4 * (epoch + 1)])
        for got, want in zip(rec.at_eval[epoch], ema):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        # training went on from the raw weights: they are back after the validation
        for got, want in zip(rec.at_epoch_end[epoch], rec.after_step[4 * (epoch + 1) - 1]):
            np.testing.assert_array_equal(got, want)
        k, b = [np.asarray(w, np.float64) for w in rec.at_eval[epoch]]
        ref = np.mean(((xv + 1) @ k.reshape(3, 1) + b - yv) ** 2)
        assert h.history["val_loss"][epoch] == pytest.approx(ref, rel=1e-4)
    # fit leaves the averages in the model (use_ema), as without the callback
    for got, want in zip(m.get_weights().values(), _ema_of(rec.after_step)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    # evaluate with the callback also uses (and then puts back) the ema slots' values
    before = list(m.get_weights().values())
    m.evaluate(xv, yv, verbose=0, callbacks=[pg.callbacks.SwapEMAWeights()])
    for got, want in zip(m.get_weights().values(), before):
        np.testing.assert_array_equal(got, want)


def test_swap_ema_weights_on_epoch(tmp_path):
    x, y = _data(32)
    m = _ema_model()
    rec = _Recorder()
    m.fit(x, y, epochs=3, batch_size=8, verbose=0, shuffle=False,
          callbacks=[pg.callbacks.SwapEMAWeights(swap_on_epoch=True), rec])
    for epoch in range(3):                     # callbacks after it see the averages at each epoch's end
        for got, want in zip(rec.at_epoch_end[epoch], _ema_of(rec.after_step[:4 * (epoch + 1)])):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    # each epoch's first step starts from the raw weights of the last epoch's end, not the averages:
    # it is the SGD step (lr 0.05, mse) from those raw weights on the first batch
    for epoch in (1, 2):
        k, b = [np.asarray(w, np.float64) for w in rec.after_step[4 * epoch - 1]]
        k = k.reshape(3, 1)
        err = x[:8] @ k + b - y[:8]
        k_new = k - 0.05 * 2 / 8 * x[:8].T @ err
        b_new = b - 0.05 * 2 / 8 * err.sum()
        np.testing.assert_allclose(rec.after_step[4 * epoch][0].reshape(3, 1), k_new, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(rec.after_step[4 * epoch][1], b_new, rtol=1e-5, atol=1e-6)
    for got, want in zip(m.get_weights().values(), _ema_of(rec.after_step)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_swap_ema_weights_needs_use_ema():
    m = _model()
    x, y = _data(8)
    with pytest.raises(ValueError, match="use_ema"):
        m.fit(x, y, epochs=1, verbose=0, callbacks=[pg.callbacks.SwapEMAWeights()])
    with pytest.raises(TypeError, match="swap_on_epoch"):
        pg.callbacks.SwapEMAWeights(swap_on_epoch=1)


def test_predict_calls_the_predict_hooks_and_prints_progress(capsys):
    """Keras's predict: on_predict_begin, a batch begin/end per batch with the batch's outputs,
    on_predict_end; verbose=1 prints the bar; the predictions equal the quiet path's."""
    m = pg.Sequential([pg.Input((4,)), pg.layers.Dense(2)])
    x = np.random.default_rng(0).random((100, 4)).astype(np.float32)
    seen = []

    class Recorder(pg.callbacks.Callback):
        def on_predict_begin(self, logs=None):
            seen.append("begin")

        def on_predict_batch_begin(self, batch, logs=None):
            seen.append(("b", batch))

        def on_predict_batch_end(self, batch, logs=None):
            seen.append(("e", batch, logs["outputs"].shape))

        def on_predict_end(self, logs=None):
            seen.append("end")
    got = m.predict(x, batch_size=40, callbacks=[Recorder()])
    assert seen == ["begin", ("b", 0), ("e", 0, (40, 2)), ("b", 1), ("e", 1, (40, 2)), ("b", 2), ("e", 2, (20, 2)),
                    "end"]
    np.testing.assert_array_equal(got, m.predict(x, batch_size=40))
    capsys.readouterr()
    m.predict(x, batch_size=25, verbose=1)
    assert "4/4" in capsys.readouterr().out
    with pytest.raises(ValueError, match="verbose"):
        m.predict(x, verbose=3)
