"""Helpers of the remote-device tests: a real pyggml RPC server in a subprocess
on 127.0.0.1 (a free port, chosen by the server), and client scripts run in
their own processes."""

import os
import queue
import subprocess
import sys
import textwrap
import threading
import time

import pyggml as pg

# the server's command line, as `pyggml rpc-server` runs it (pyggml.rpc.cli_main)
SERVER = [sys.executable, "-c", "import sys, pyggml.rpc as r; sys.exit(r.cli_main(sys.argv[1:]))"]


class ServerProcess:
    """`pyggml rpc-server --port 0` in a subprocess; .endpoint once it listens.
    Its output is collected in .lines (a reader thread keeps the pipe drained)."""

    def __init__(self, *args, threads=1, start_timeout=30.0):
        cmd = SERVER + ["--port", "0", "--threads", str(threads), *args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
        self.lines = []
        self._q = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.endpoint = None
        deadline = time.monotonic() + start_timeout
        while self.endpoint is None:
            try:
                line = self._q.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                self.kill()
                raise RuntimeError(f"the RPC server did not start: {self.output()}") from None
            if line is None:
                raise RuntimeError(f"the RPC server exited ({self.proc.wait()}): {self.output()}")
            if "listening on " in line:
                self.endpoint = line.split("listening on ")[1].split()[0]
        self.port = int(self.endpoint.rsplit(":", 1)[1])

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            self._q.put(line)
        self._q.put(None)

    def output(self):
        return "\n".join(self.lines)

    def wait_for_line(self, text, timeout=10.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(text in line for line in self.lines):
                return True
            time.sleep(0.02)
        return False

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self._reader.join(timeout=5)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.kill()


def run_client(code, timeout=120, **env):
    """Run a client script (dedented) in a fresh interpreter; returns the CompletedProcess."""
    e = dict(os.environ)
    e.update({k: str(v) for k, v in env.items()})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, env=e)


def rpc_available():
    return pg.rpc.available()
