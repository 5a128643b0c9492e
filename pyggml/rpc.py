"""Remote devices: train on another machine's CPU or GPU through ggml's RPC backend.

On the machine with the device::

    pyggml rpc-server --port 50052 --backend cuda0      # or: python -m pyggml.rpc

and where the Python program runs::

    import pyggml as pg
    pg.rpc.connect("127.0.0.1:50052")       # adds rpc0 (rpc1, ... for more devices or servers)
    model.compile(optimizer="adam", loss="mse", backend="rpc0")

The weights, the optimizer state and every compute live on the remote device;
only batches, losses and predictions travel.

ggml's RPC protocol has no authentication and no encryption: anyone who can
reach a server's port can run graphs on it and read and write its memory. So
the server listens on the loopback address (127.0.0.1) unless it is told
otherwise with ``allow_remote=True`` (``--allow-remote``). To use a server on
another machine, keep it on that machine's loopback address and reach it
through an SSH tunnel::

    ssh -N -L 50052:127.0.0.1:50052 user@gpu-box      # then connect to 127.0.0.1:50052

A server serves one client at a time; the next one is served when the first
disconnects (or its process ends). A connection that fails while in use (the
server stopped, the network went away) raises ``pyggml.errors.RPCError`` (a
``ConnectionError``) from the call that noticed it; what lived on the remote
device is then gone, and the last saved model file is the way to go on.
"""

from __future__ import annotations

import sys
import warnings

from pyggml.errors import GGMLError, RPCError

__all__ = ["connect", "disconnect", "connections", "stats", "available", "protocol_version", "serve",
           "Server", "cli_main", "RPCError", "DEFAULT_PORT"]

DEFAULT_PORT = 50052

_UNSAFE = ("ggml's RPC protocol has no authentication and no encryption: anyone who can reach "
           "{where} can run graphs on this machine's devices and read and write their memory. "
           "Prefer the loopback address and an SSH tunnel (ssh -N -L {port}:127.0.0.1:{port} this-host).")


def _core():
    from pyggml.core import _core
    return _core


def available() -> bool:
    """True when this build of pyggml has ggml's RPC backend."""
    return _core().rpc_available()


def protocol_version() -> tuple[int, int, int]:
    """The version of ggml's RPC protocol this build speaks (client and server must agree)."""
    return _core().rpc_protocol_version()


def connect(endpoint: str, timeout: float = 5.0, io_timeout: float | None = 60.0) -> list[str]:
    """Connect to the pyggml (or ggml) RPC server at ``endpoint`` (``"host:port"``)
    and add its devices to ``pg.backends()`` as ``rpc0``, ``rpc1``, ... (numbered
    in the order servers are first connected). Returns their names.

    ``timeout``: seconds for the TCP connect and the handshake; a closed port,
    an unreachable host, a server busy with another client or one that speaks
    another protocol version raises ``RPCError`` within it. ``io_timeout``:
    the longest any later wait for the server may take (None: no limit; a
    server machine that vanished is still noticed within about 25 s).
    Several servers may be connected at once; connecting again to a connected
    server returns its devices."""
    return _core().rpc_connect(endpoint, timeout, io_timeout)


def disconnect(endpoint: str | None = None) -> None:
    """Let go of the connection to ``endpoint`` (every server when None): its
    devices leave ``pg.backends()``, and the server is free for other clients
    once no model of this process uses them."""
    _core().rpc_disconnect(endpoint)


def connections() -> dict[str, list[str]]:
    """``{endpoint: [device names]}`` of the servers connected now."""
    return _core().rpc_connections()


def stats(endpoint: str) -> dict[str, int] | None:
    """Counters of the live connection to ``endpoint``: ``commands`` sent,
    ``round_trips`` (commands that waited for the server's reply),
    ``bytes_sent``, ``bytes_received``. None when there is none."""
    return _core().rpc_stats(endpoint)


def _check_host(host, allow_remote):
    import ipaddress
    if not isinstance(host, str):
        raise TypeError(f"host must be a str, got {type(host).__name__}")
    if host == "localhost":
        host = "127.0.0.1"
    try:
        addr = ipaddress.ip_address(host)
    except ValueError:
        raise ValueError(f"host must be an IPv4 address such as 127.0.0.1 (or 0.0.0.0 for every "
                         f"interface), got {host!r}") from None
    if addr.version != 4:
        raise ValueError(f"ggml's RPC server listens on IPv4 addresses only, got {host!r}")
    if not addr.is_loopback and not allow_remote:
        raise ValueError(
            f"refusing to listen on {host}: ggml's RPC protocol has no authentication and no "
            f"encryption, so anyone who can reach the port could run graphs and read memory on this "
            f"machine. Listen on 127.0.0.1 and reach it through an SSH tunnel, or pass "
            f"allow_remote=True (--allow-remote) if every machine that can reach it is trusted.")
    return host, addr.is_loopback


def _check_threads(threads):
    if threads is None:
        return None
    if isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= 1024:
        raise ValueError(f"threads must be an int between 1 and 1024 (or None), got {threads!r}")
    return threads


class Server:
    """A ggml RPC server for this machine's devices, listening at once:
    ``Server(host="127.0.0.1", port=50052, backend="cpu", threads=None,
    allow_remote=False)``. ``port=0`` takes a free port (see ``.port``).
    ``serve_forever()`` blocks, serving one client at a time, until ``stop()``
    (from another thread) or Ctrl-C; ``close()`` releases the port.

    ``backend``: a device name of this machine (``"cpu"``, ``"vulkan0"``,
    ``"cuda0"``, ...), or several (a list or ``"cuda0,cpu"``): clients see
    them as consecutive rpc devices. ``threads``: CPU threads for the cpu
    device (None: every core)."""

    def __init__(self, host: str = "127.0.0.1", port: int = DEFAULT_PORT, backend="cpu",
                 threads: int | None = None, allow_remote: bool = False):
        core = _core()
        if not core.rpc_available():
            raise GGMLError("this build of pyggml has no RPC backend "
                            "(rebuild with `pip install . -Csetup-args=-Drpc=enabled`)")
        host, self.loopback = _check_host(host, allow_remote)
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise ValueError(f"port must be an int in 0..65535, got {port!r}")
        threads = _check_threads(threads)
        names = backend.split(",") if isinstance(backend, str) else list(backend)
        names = [n.strip().lower() for n in names]
        if not names or not all(names):
            raise ValueError(f"backend must name one or more devices, got {backend!r}")
        if any(n.startswith("rpc") for n in names):
            raise ValueError("a server serves this machine's devices, not remote ones")
        self.backends = [core.Backend(n) for n in names]
        n_threads = threads or core._default_threads()
        for b in self.backends:
            core._rpc_backend_threads(b, n_threads)
        self.threads = n_threads
        try:
            self._server = core.RPCServer(host, port, self.backends)
        except BaseException:
            for b in self.backends:
                b.free()
            raise
        self.host = host
        self.port = self._server.port
        if not self.loopback:
            warnings.warn(_UNSAFE.format(where=f"{host}:{self.port}", port=self.port), RuntimeWarning, stacklevel=2)

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.port}"

    def devices(self) -> list[dict]:
        """What clients get, in order: ``{"name", "description", "type"}`` per device."""
        from pyggml.core import devices
        info = {d["name"]: d for d in devices()}
        out = []
        for i, b in enumerate(self.backends):
            d = info.get(b.name, {})
            out.append({"index": i, "name": b.name, "description": d.get("description", ""),
                        "type": d.get("type", b.device_type), "memory_total": d.get("memory_total", 0)})
        return out

    def serve_forever(self) -> None:
        """Serve until stop() or Ctrl-C (KeyboardInterrupt)."""
        self._server.serve()

    def stop(self) -> None:
        self._server.stop()

    def close(self) -> None:
        """Stop serving and release the port and the devices. Idempotent."""
        self._server.free()
        for b in self.backends:
            b.free()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def _describe(server: Server) -> str:
    v = ".".join(str(x) for x in protocol_version())
    lines = [f"pyggml RPC server listening on {server.endpoint} (ggml RPC protocol {v})"]
    for d in server.devices():
        extra = f", {server.threads} threads" if d["name"] == "cpu" else ""
        mem = f", {d['memory_total'] / 2**30:.1f} GiB" if d["memory_total"] else ""
        lines.append(f"  serves device {d['index']}: {d['name']} ({d['description']}{mem}{extra})")
    connect_to = server.endpoint if not server.host == "0.0.0.0" else f"<this host>:{server.port}"
    lines.append(f"clients: pyggml.rpc.connect(\"{connect_to}\") (one client at a time); Ctrl-C stops the server")
    if not server.loopback:
        lines.append("WARNING: " + _UNSAFE.format(where=f"{server.host}:{server.port}", port=server.port))
    return "\n".join(lines)


def serve(host: str = "127.0.0.1", port: int = DEFAULT_PORT, backend="cpu", threads: int | None = None,
          allow_remote: bool = False, verbose: bool = True) -> None:
    """Serve this machine's ``backend`` device(s) to RPC clients until Ctrl-C
    (which ends it cleanly: the port is released and KeyboardInterrupt is
    raised). Listens on the loopback address unless ``allow_remote=True``
    and another ``host`` are given; see the module's note on safety.
    ``verbose``: print where it listens and which devices it serves."""
    with Server(host, port, backend, threads, allow_remote) as server:
        if verbose:
            print(_describe(server), flush=True)
        server.serve_forever()


def cli_main(argv=None) -> int:
    """``pyggml rpc-server [--host 127.0.0.1] [--port 50052] [--backend cpu] [--threads N] [--allow-remote]``"""
    import argparse
    ap = argparse.ArgumentParser(
        prog="pyggml rpc-server",
        description="Serve this machine's devices to pyggml (or ggml) clients over ggml's RPC protocol. "
                    "The protocol has no authentication and no encryption: the server listens on "
                    "127.0.0.1 unless --allow-remote is given; reach it from elsewhere through an SSH "
                    "tunnel (ssh -N -L 50052:127.0.0.1:50052 this-host).")
    ap.add_argument("--host", default="127.0.0.1",
                    help="IPv4 address to listen on (default 127.0.0.1; any other needs --allow-remote)")
    ap.add_argument("--port", type=int, default=DEFAULT_PORT,
                    help=f"TCP port (default {DEFAULT_PORT}; 0: a free port, printed)")
    ap.add_argument("--backend", default="cpu",
                    help="device(s) to serve: cpu, vulkan0, cuda0, ... or a comma-separated list (default cpu)")
    ap.add_argument("--threads", type=int, default=None, help="CPU threads for the cpu device (default: all cores)")
    ap.add_argument("--allow-remote", action="store_true",
                    help="allow a --host other than the loopback address: UNSAFE on any network you do not trust")
    args = ap.parse_args(argv)
    if not available():
        print("pyggml rpc-server: this build of pyggml has no RPC backend "
              "(rebuild with `pip install . -Csetup-args=-Drpc=enabled`)", file=sys.stderr)
        return 2
    import logging
    log = logging.getLogger("pyggml")
    if not log.handlers:
        # client connections and failures, as ggml reports them
        handler = logging.StreamHandler(sys.stdout)
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)       # the CLI prints its own warning
            server = Server(args.host, args.port, args.backend, args.threads, args.allow_remote)
    except (ValueError, TypeError, GGMLError) as e:
        print(f"pyggml rpc-server: {e}", file=sys.stderr)
        return 2
    with server:
        print(_describe(server), flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            print("pyggml rpc-server: stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(cli_main())
