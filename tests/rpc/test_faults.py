"""Failures: a server that dies mid-fit or mid-step, one that stops answering,
a client that is killed, and Ctrl-C on the server.  The clients that live
through a failure run in their own processes: a failure handled wrongly would
abort the interpreter, and that must fail the test, not end the run."""

import json
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import pyggml as pg
from rpc_support import SERVER, ServerProcess, run_client

# A client that trains on the server's device and reports, as one JSON line, what
# happened when the server was killed under it (by the test, once it prints "go").
FIT_CLIENT = """
    import json, os, sys, time, numpy as np, pyggml as pg
    dev = pg.rpc.connect(os.environ["EP"])[0]
    path = os.environ["CKPT"]
    pg.set_seed(0)
    m = pg.Sequential([pg.layers.Dense(64, activation="relu"), pg.layers.Dense(4)], input_shape=8)
    m.compile(optimizer="adam", loss="mse", backend=dev)
    x = np.random.default_rng(0).random((2048, 8)).astype(np.float32)
    y = x[:, :4] * 2
    class Go(pg.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            if epoch == 1:
                print("go", flush=True)
    out = {}
    t = None
    try:
        m.fit(x, y, epochs=100000, batch_size=16, verbose=0,
              callbacks=[pg.callbacks.ModelCheckpoint(path, monitor="loss", save_best_only=False), Go()])
        out["error"] = None
    except Exception as e:
        out["error"] = type(e).__name__
        out["message"] = str(e)
        out["is_connection_error"] = isinstance(e, ConnectionError)
        out["raised_at"] = time.time()
    try:
        m.predict(x[:4])
        out["after"] = "no error"
    except Exception as e:
        out["after"] = type(e).__name__
    saved = pg.load_model(path, backend="cpu")
    out["saved_predicts"] = bool(np.all(np.isfinite(saved.predict(x[:16]))))
    print(json.dumps(out), flush=True)
"""

STEP_CLIENT = """
    import json, os, time, numpy as np, pyggml as pg
    dev = pg.rpc.connect(os.environ["EP"])[0]
    pg.set_seed(0)
    inp = pg.Input(8)
    h = pg.layers.Dense(64, activation="relu")(inp)
    m = pg.Model(inp, pg.layers.Dense(4)(h)).compile(optimizer="adam", loss="mse", backend=dev)
    tr = pg.Trainer(m, batch_size=32, loss_mask=4)
    target = tr.snapshot()
    x = np.random.default_rng(0).random((32, 8)).astype(np.float32)
    out = {}
    try:
        for k in range(10 ** 7):
            tr.step(x, x[:, :4], np.ones((32, 4)))
            tr.update_target(target, tau=0.1)
            if k == 20:
                print("go", flush=True)
        out["error"] = None
    except Exception as e:
        out["error"] = type(e).__name__
        out["message"] = str(e)
        out["raised_at"] = time.time()
    for name, call in (("step", lambda: tr.step(x, x[:, :4], np.ones((32, 4)))), ("snapshot", tr.snapshot),
                       ("predict", lambda: target.predict(x))):
        try:
            call()
            out[name] = "no error"
        except Exception as e:
            out[name] = type(e).__name__
    tr.free(); target.free(); m.free()
    print(json.dumps(out), flush=True)
"""


def _run_until_go_then(client_code, action, env, timeout=120):
    p = subprocess.Popen([sys.executable, "-c", __import__("textwrap").dedent(client_code)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = p.stdout.readline()
        assert line.strip() == "go", (line, p.stderr.read() if p.poll() is not None else "")
        t_action = time.time()
        action()
        out, err = p.communicate(timeout=timeout)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, f"the client died ({p.returncode}): {err[-3000:]}"
    return json.loads(out.strip().splitlines()[-1]), t_action


def _env(**kw):
    import os
    e = dict(os.environ)
    e.update({k: str(v) for k, v in kw.items()})
    return e


def test_killing_the_server_mid_fit_raises_in_the_client_and_the_saved_model_survives(tmp_path):
    ckpt = tmp_path / "ckpt.gguf"
    with ServerProcess() as srv:
        res, t_kill = _run_until_go_then(FIT_CLIENT, srv.proc.kill, _env(EP=srv.endpoint, CKPT=ckpt))
    assert res["error"] == "RPCError", res
    assert res["is_connection_error"]
    assert srv.endpoint in res["message"] and "load the last saved model" in res["message"]
    assert res["raised_at"] - t_kill < 10
    assert res["after"] == "RPCError"
    # the checkpoint written before the server died is whole
    assert res["saved_predicts"]
    saved = pg.load_model(ckpt, backend="cpu")
    assert np.all(np.isfinite(saved.predict(np.ones((2, 8)))))
    saved.free()
    assert not list(tmp_path.glob("*.tmp*"))


def test_killing_the_server_mid_step_raises_in_the_client():
    with ServerProcess() as srv:
        res, t_kill = _run_until_go_then(STEP_CLIENT, srv.proc.kill, _env(EP=srv.endpoint))
    assert res["error"] == "RPCError", res
    assert res["raised_at"] - t_kill < 10
    assert res["step"] == res["snapshot"] == res["predict"] == "RPCError", res


def test_a_server_that_stops_answering_raises_after_io_timeout():
    # SIGSTOP: the server's kernel still holds the connection open, but nothing answers
    with ServerProcess() as srv:
        code = STEP_CLIENT.replace('pg.rpc.connect(os.environ["EP"])', 'pg.rpc.connect(os.environ["EP"], timeout=1, io_timeout=2)')
        try:
            res, t_stop = _run_until_go_then(code, lambda: srv.proc.send_signal(signal.SIGSTOP), _env(EP=srv.endpoint))
        finally:
            srv.proc.send_signal(signal.SIGCONT)
    assert res["error"] == "RPCError", res
    assert "time limit" in res["message"]
    assert 1 <= res["raised_at"] - t_stop < 10


def test_the_server_serves_the_next_client_after_one_is_killed():
    with ServerProcess() as srv:
        p = subprocess.Popen([sys.executable, "-c", __import__("textwrap").dedent(STEP_CLIENT)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(EP=srv.endpoint))
        try:
            assert p.stdout.readline().strip() == "go"
            p.kill()
        finally:
            p.wait()
        assert srv.wait_for_line("disconnected")
        # the next client is served in full
        r = run_client(f"""
            import numpy as np, pyggml as pg
            dev = pg.rpc.connect("{srv.endpoint}")[0]
            pg.set_seed(1)
            m = pg.Sequential([pg.layers.Dense(32, activation="relu"), pg.layers.Dense(2)], input_shape=4)
            m.compile(optimizer="adam", loss="mse", backend=dev)
            x = np.random.default_rng(0).random((64, 4)); y = x[:, :2]
            h = m.fit(x, y, epochs=5, batch_size=16, verbose=0, shuffle=False)
            print(h.history["loss"][0] > h.history["loss"][-1])
        """)
        assert r.returncode == 0 and r.stdout.strip() == "True", r.stderr[-2000:]
        assert srv.proc.poll() is None


def test_ctrl_c_stops_the_server_cleanly_and_frees_the_port():
    with ServerProcess() as srv:
        names = pg.rpc.connect(srv.endpoint)
        pg.rpc.disconnect(srv.endpoint)
        assert names
        srv.proc.send_signal(signal.SIGINT)
        assert srv.proc.wait(timeout=10) == 0
        srv._reader.join(5)
        assert "stopped" in srv.output()
        assert "Traceback" not in srv.output()
        # the port is free again
        with pg.rpc.Server(port=srv.port) as again:
            assert again.port == srv.port


def test_ctrl_c_stops_the_server_while_a_client_is_connected():
    with ServerProcess() as srv:
        pg.rpc.connect(srv.endpoint)
        try:
            assert srv.wait_for_line("connected")
            srv.proc.send_signal(signal.SIGINT)
            assert srv.proc.wait(timeout=10) == 0
        finally:
            pg.rpc.disconnect(srv.endpoint)
        assert "stopped" in srv.output()


def test_a_server_object_stops_from_another_thread():
    import threading
    s = pg.rpc.Server(port=0)
    th = threading.Thread(target=s.serve_forever)
    th.start()
    try:
        names = pg.rpc.connect(s.endpoint)
        m = pg.Sequential([pg.layers.Dense(2)], input_shape=3).compile(loss="mse", backend=names[0])
        assert m.predict(np.ones((2, 3))).shape == (2, 2)
        m.free()
        pg.rpc.disconnect(s.endpoint)
    finally:
        s.stop()
        th.join(10)
        assert not th.is_alive()
        s.close()
    with pytest.raises(pg.GGMLError, match="freed"):
        s.serve_forever()


def test_the_cli_describes_the_server():
    with ServerProcess() as srv:
        assert srv.wait_for_line("clients: pyggml.rpc.connect")
        out = srv.output()
        assert f"listening on {srv.endpoint}" in out
        assert "serves device 0: cpu" in out and "1 threads" in out
        assert "protocol" in out
    r = subprocess.run(SERVER + ["--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "--allow-remote" in r.stdout and "ssh" in r.stdout
    r = subprocess.run(SERVER + ["--backend", "cuda7", "--port", "0"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "cuda7" in r.stderr
