"""Connecting to RPC servers: the device registry, the errors of connects that
cannot work (closed port, silent server, busy server, another protocol
version), and the loopback rule of the server."""

import socket
import struct
import threading
import time

import numpy as np
import pytest

import pyggml as pg
from pyggml.errors import GGMLError, RPCError
from rpc_support import SERVER, ServerProcess, run_client


def _free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_rpc_error_is_a_connection_error_and_a_pyggml_error():
    assert issubclass(RPCError, ConnectionError)
    assert issubclass(RPCError, GGMLError)
    assert pg.RPCError is RPCError


def test_a_closed_port_fails_fast_and_says_so():
    port = _free_port()
    t = time.monotonic()
    with pytest.raises(RPCError, match=f"127.0.0.1:{port}.*refused"):
        pg.rpc.connect(f"127.0.0.1:{port}")
    assert time.monotonic() - t < 5
    assert f"127.0.0.1:{port}" not in pg.rpc.connections()


def test_a_server_that_never_answers_fails_within_the_timeout():
    # a socket that accepts connections and says nothing
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(4)
    try:
        t = time.monotonic()
        with pytest.raises(RPCError, match="did not answer the handshake in time"):
            pg.rpc.connect(f"127.0.0.1:{s.getsockname()[1]}", timeout=0.5)
        assert time.monotonic() - t < 3
    finally:
        s.close()


def _fake_server(reply):
    """A server that reads a HELLO and answers with reply(bytes) (or closes)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)

    def run():
        c, _ = s.accept()
        try:
            want = 1 + 8 + 24                     # command byte, size, hello request
            got = b""
            while len(got) < want:
                part = c.recv(want - len(got))
                if not part:
                    return
                got += part
            assert got[0] == 14                   # RPC_CMD_HELLO
            out = reply(got)
            if out:
                c.sendall(out)
            time.sleep(0.2)
        finally:
            c.close()

    th = threading.Thread(target=run, daemon=True)
    th.start()
    return s, th


def test_a_protocol_version_mismatch_is_a_clear_error():
    major, minor, patch = pg.rpc.protocol_version()
    assert major >= 1

    def hello_reply(_):
        body = bytes([major + 1, 0, 0, 0]) + bytes(24)
        return struct.pack("<Q", len(body)) + body

    s, th = _fake_server(hello_reply)
    try:
        with pytest.raises(RPCError) as e:
            pg.rpc.connect(f"127.0.0.1:{s.getsockname()[1]}")
        msg = str(e.value)
        assert "version mismatch" in msg
        assert f"{major + 1}.0.0" in msg and f"{major}.{minor}.{patch}" in msg
    finally:
        th.join(5)
        s.close()


def test_a_server_that_hangs_up_on_the_handshake_is_a_clear_error():
    s, th = _fake_server(lambda _: b"")
    try:
        with pytest.raises(RPCError, match="handshake"):
            pg.rpc.connect(f"127.0.0.1:{s.getsockname()[1]}")
    finally:
        th.join(5)
        s.close()


@pytest.mark.parametrize("bad, exc", [
    (50052, TypeError), ("127.0.0.1", ValueError), ("127.0.0.1:0", ValueError), ("127.0.0.1:70000", ValueError),
    (":50052", ValueError), ("127.0.0.1:port", ValueError), ("a b:1", ValueError), ("[::1]:50052", ValueError),
])
def test_malformed_endpoints_are_refused(bad, exc):
    with pytest.raises(exc):
        pg.rpc.connect(bad)


@pytest.mark.parametrize("kw", [dict(timeout=0), dict(timeout=-1), dict(timeout=None), dict(timeout="5"),
                                dict(io_timeout=0), dict(io_timeout=float("nan"))])
def test_bad_timeouts_are_refused(kw):
    with pytest.raises(ValueError, match="seconds"):
        pg.rpc.connect("127.0.0.1:50052", **kw)


def test_connect_lists_the_devices_and_disconnect_removes_them():
    with ServerProcess() as srv:
        assert not any(b.startswith("rpc") for b in pg.backends())
        names = pg.rpc.connect(srv.endpoint)
        try:
            assert len(names) == 1 and names[0].startswith("rpc")
            assert pg.rpc.connections() == {srv.endpoint: names}
            assert pg.backends()[-2:] == [names[0], "cpu"]       # remote devices after local GPUs, before the CPU
            info = {d["name"]: d for d in pg.core.devices()}[names[0]]
            assert info["type"] == "rpc" and info["description"] == srv.endpoint
            assert info["memory_total"] > 0
            assert pg.rpc.connect(srv.endpoint) == names              # again: the same devices
            b = pg.core.Backend(names[0])
            assert b.name == names[0] and not b.is_cpu
            b.free()
            stats = pg.rpc.stats(srv.endpoint)
            assert stats["round_trips"] >= 1 and stats["bytes_received"] > 0
        finally:
            pg.rpc.disconnect(srv.endpoint)
        assert names[0] not in pg.backends()
        assert pg.rpc.connections() == {}
        with pytest.raises(ValueError, match="connect to a server first"):
            pg.core.Backend(names[0])
        with pytest.raises(ValueError, match="pyggml.rpc.connect"):
            pg.Sequential([pg.layers.Dense(2)], input_shape=2).compile(loss="mse", backend=names[0])


def test_two_servers_give_two_devices_that_train_alike():
    with ServerProcess() as a, ServerProcess() as b:
        da = pg.rpc.connect(a.endpoint)[0]
        db = pg.rpc.connect(b.endpoint)[0]
        try:
            assert da != db and {da, db} <= set(pg.backends())
            x = np.random.default_rng(0).random((32, 4)).astype(np.float32)
            y = x @ np.ones((4, 2), np.float32)
            preds = []
            for dev in (da, db, "cpu"):
                pg.set_seed(5)
                m = pg.Sequential([pg.layers.Dense(8, activation="relu"), pg.layers.Dense(2)], input_shape=4)
                m.compile(optimizer="adam", loss="mse", backend=dev)
                m.fit(x, y, epochs=3, batch_size=8, verbose=0, shuffle=False)
                preds.append(m.predict(x))
                m.free()
            np.testing.assert_allclose(preds[0], preds[2], rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(preds[1], preds[2], rtol=1e-5, atol=1e-5)
        finally:
            pg.rpc.disconnect()


def test_a_busy_server_is_reported_as_such():
    # a server serves one client at a time: while this process holds it, another waits
    with ServerProcess() as srv:
        pg.rpc.connect(srv.endpoint)
        try:
            r = run_client(f"""
                import time, pyggml as pg
                t = time.monotonic()
                try:
                    pg.rpc.connect("{srv.endpoint}", timeout=1.0)
                except pg.RPCError as e:
                    print("RPCError", round(time.monotonic() - t, 1), e)
            """)
            assert "RPCError" in r.stdout, r.stderr
            assert "one client at a time" in r.stdout
            assert float(r.stdout.split()[1]) < 5
        finally:
            pg.rpc.disconnect(srv.endpoint)
        # let go of, the server takes the next client
        r = run_client(f"""
            import pyggml as pg
            print(pg.rpc.connect("{srv.endpoint}", timeout=5.0))
        """)
        assert r.returncode == 0 and "rpc" in r.stdout, r.stderr


def test_the_server_listens_on_loopback_unless_told_otherwise():
    with pytest.raises(ValueError, match="no authentication"):
        pg.rpc.Server(host="0.0.0.0", port=0)
    with pytest.raises(ValueError, match="IPv4 address"):
        pg.rpc.Server(host="example.org", port=0)
    with pytest.raises(ValueError, match="remote ones"):
        pg.rpc.Server(port=0, backend="rpc0")
    with pg.rpc.Server(port=0) as s:
        assert s.host == "127.0.0.1" and s.port > 0 and s.loopback
        assert [d["name"] for d in s.devices()] == ["cpu"]
    import subprocess
    r = subprocess.run(SERVER + ["--host", "0.0.0.0", "--port", "0"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--allow-remote" in r.stderr


def test_allow_remote_warns_in_the_output():
    with ServerProcess("--host", "0.0.0.0", "--allow-remote") as srv:
        assert srv.endpoint.startswith("0.0.0.0:")
        assert srv.wait_for_line("WARNING")
        out = srv.output()
        assert "no authentication" in out and "read and write their memory" in out
        assert "ssh -N -L" in out


def test_a_port_in_use_is_a_clear_error():
    with ServerProcess() as srv:
        with pytest.raises(RPCError, match=f"cannot listen on 127.0.0.1:{srv.port}"):
            pg.rpc.Server(port=srv.port)


def test_a_malformed_client_is_dropped_and_the_server_serves_the_next():
    """A client whose graph points outside its buffer (ggml's server asserted and
    aborted on that) is disconnected; the server goes on."""
    with ServerProcess() as srv:
        c = socket.create_connection(("127.0.0.1", srv.port), timeout=10)

        def cmd(code, payload, reply_size=None):
            c.sendall(bytes([code]) + struct.pack("<Q", len(payload)) + payload)
            if reply_size is None:
                return None
            got = b""
            while len(got) < 8 + reply_size:
                part = c.recv(8 + reply_size - len(got))
                assert part, "the server hung up"
                got += part
            assert struct.unpack("<Q", got[:8])[0] == reply_size
            return got[8:]

        cmd(14, bytes(24), 4 + 24)                                      # HELLO
        remote_ptr, size = struct.unpack("<QQ", cmd(0, struct.pack("<IQ", 0, 1024), 16))   # ALLOC_BUFFER
        base, = struct.unpack("<Q", cmd(3, struct.pack("<Q", remote_ptr), 8))             # BUFFER_GET_BASE
        # rpc_tensor: id, type, buffer, ne[4], nb[4], op, op_params[16], flags, src[10], view_src, view_offs,
        # data, name[64], use_count
        tensor = struct.pack("<QIQ4I4II16iI10QQQQ64si", 1, 0, remote_ptr, 1 << 20, 1, 1, 1, 4, 4 << 20, 4 << 20, 4 << 20,
                             0, *([0] * 16), 0, *([0] * 10), 0, 0, base, b"evil", 0)
        assert len(tensor) == 296
        graph = struct.pack("<II", 0, 1) + struct.pack("<Q", 1) + struct.pack("<I", 1) + tensor
        cmd(10, graph)                                                  # GRAPH_COMPUTE
        c.settimeout(10)
        assert c.recv(1) == b""                                         # dropped, not crashed
        c.close()
        assert srv.proc.poll() is None
        assert srv.wait_for_line("disconnected")
        names = pg.rpc.connect(srv.endpoint)
        try:
            m = pg.Sequential([pg.layers.Dense(2)], input_shape=2).compile(loss="mse", backend=names[0])
            assert m.predict(np.ones((3, 2))).shape == (3, 2)
            m.free()
        finally:
            pg.rpc.disconnect(srv.endpoint)


def test_models_keep_their_connection_after_disconnect():
    with ServerProcess() as srv:
        dev = pg.rpc.connect(srv.endpoint)[0]
        m = pg.Sequential([pg.layers.Dense(3)], input_shape=2).compile(loss="mse", backend=dev)
        p = m.predict(np.ones((4, 2)), batch_size=4)
        pg.rpc.disconnect(srv.endpoint)
        assert dev not in pg.backends()
        # the model holds the connection: new executors (another batch size) still work
        np.testing.assert_array_equal(m.predict(np.ones((4, 2)), batch_size=2), p)
        m.fit(np.ones((4, 2)), np.zeros((4, 3)), epochs=1, batch_size=2, verbose=0)
        assert pg.rpc.stats(srv.endpoint) is not None
        m.free()
        # the last user gone, the connection closes and the server takes other clients
        assert pg.rpc.stats(srv.endpoint) is None
        assert srv.wait_for_line("disconnected")
        r = run_client(f"""
            import pyggml as pg
            print(pg.rpc.connect("{srv.endpoint}", timeout=5.0))
        """)
        assert r.returncode == 0 and "rpc" in r.stdout, r.stderr


def test_freeing_the_last_user_while_commands_are_on_the_wire_is_safe():
    """Commands without a reply (a buffer's free, a small upload) are queued and not
    waited for; freeing the model that holds the last reference to the connection
    closes it while the connection's worker thread may still be sending them.  The
    socket used to be closed under that send (a segfault in about half of the runs
    of this loop; ggml/patches/0053)."""
    with ServerProcess() as srv:
        r = run_client(f"""
            import numpy as np
            import pyggml as pg
            x = np.ones((4, 2), np.float32)
            y = np.zeros((4, 3), np.float32)
            for i in range(300):
                dev = pg.rpc.connect("{srv.endpoint}")[0]
                m = pg.Sequential([pg.layers.Dense(3)], input_shape=2).compile(loss="mse", backend=dev)
                p = m.predict(x, batch_size=4)
                pg.rpc.disconnect("{srv.endpoint}")
                np.testing.assert_array_equal(m.predict(x, batch_size=2), p)
                m.fit(x, y, epochs=1, batch_size=2, verbose=0)
                m.free()
            print("DONE")
        """, timeout=300)
        assert r.returncode == 0 and "DONE" in r.stdout, (r.returncode, r.stderr[-3000:])


def test_a_server_of_two_devices_gives_two_remote_devices():
    with ServerProcess("--backend", "cpu,cpu") as srv:
        assert srv.wait_for_line("serves device 1: cpu")
        names = pg.rpc.connect(srv.endpoint)
        try:
            assert len(names) == 2 and names[0] != names[1]
            assert pg.backends()[-3:] == names + ["cpu"]
            x = np.random.default_rng(0).random((32, 4))
            preds = []
            for dev in (names[1], "cpu"):
                pg.set_seed(2)
                m = pg.Sequential([pg.layers.Dense(8, activation="relu"), pg.layers.Dense(2)], input_shape=4)
                m.compile(optimizer="adam", loss="mse", backend=dev)
                m.fit(x, x[:, :2], epochs=2, batch_size=8, verbose=0, shuffle=False)
                preds.append(m.predict(x))
                m.free()
            np.testing.assert_allclose(preds[0], preds[1], rtol=1e-5, atol=1e-5)
        finally:
            pg.rpc.disconnect(srv.endpoint)
