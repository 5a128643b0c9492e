"""tools/fetch_ggml.py finds the pinned archive without pip: an archive the user
points at, the cache, find-links folders, the index's simple API over HTTP
(with pip's settings read from the environment), and when all fail one
message that says what was tried and how to supply the archive."""

import hashlib
import http.server
import io
import os
import subprocess
import sys
import tarfile
import threading
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[2] / "tools" / "fetch_ggml.py"
pytestmark = pytest.mark.skipif(not TOOL.is_file(), reason="needs the source tree's tools/fetch_ggml.py")


def _module():
    import importlib.util
    spec = importlib.util.spec_from_file_location("fetch_ggml_under_test", TOOL)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _archive(tmp_path):
    """A small stand-in for the pinned archive, and a pin naming it."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        data = b"#define GGML_FAKE 1\n"
        info = tarfile.TarInfo("pkg-1.0/vendor/ggml/include/ggml.h")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    blob = buf.getvalue()
    pin = {"package": "Fake_Pkg", "version": "1.0", "archive": "fake_pkg-1.0.tar.gz",
           "sha256": hashlib.sha256(blob).hexdigest(), "subtree": "pkg-1.0/vendor/ggml"}
    return blob, pin


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    """No pip configuration from this machine, an empty cache, no proxy for 127.0.0.1."""
    for k in list(os.environ):
        if k.startswith("PIP_") or k in ("PYGGML_GGML_ARCHIVE", "XDG_CACHE_HOME"):
            monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PYGGML_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    return tmp_path


class _Index:
    """A local simple-API index serving one project page and its file."""

    def __init__(self, pin, blob, auth=None):
        self.requests = []
        outer = self
        page = (f'<html><body><a href="../../files/{pin["archive"]}#sha256={pin["sha256"]}">'
                f'{pin["archive"]}</a></body></html>').encode()

        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                outer.requests.append((self.path, self.headers.get("Authorization")))
                if auth and self.headers.get("Authorization") != auth:
                    self.send_response(401)
                    self.end_headers()
                    return
                if self.path == "/simple/fake-pkg/":
                    body = page
                elif self.path == f"/files/{pin['archive']}":
                    body = blob
                else:
                    self.send_response(404)
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/simple/"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def test_downloads_from_the_index_in_pip_index_url(clean_env, monkeypatch):
    fg = _module()
    blob, pin = _archive(clean_env)
    with _Index(pin, blob) as idx:
        monkeypatch.setenv("PIP_INDEX_URL", idx.url)
        got = fg.find_archive(pin, None)
    assert got == clean_env / "cache" / pin["archive"]
    assert got.read_bytes() == blob
    assert [p for p, _ in idx.requests] == ["/simple/fake-pkg/", f"/files/{pin['archive']}"]
    # the second time comes from the cache: no request
    with _Index(pin, blob) as idx2:
        monkeypatch.setenv("PIP_INDEX_URL", idx2.url)
        assert fg.find_archive(pin, None) == got
    assert idx2.requests == []


def test_index_credentials_are_sent_as_basic_auth(clean_env, monkeypatch):
    fg = _module()
    blob, pin = _archive(clean_env)
    import base64
    auth = "Basic " + base64.b64encode(b"user:p@ss").decode()
    with _Index(pin, blob, auth=auth) as idx:
        monkeypatch.setenv("PIP_INDEX_URL", idx.url.replace("http://", "http://user:p%40ss@"))
        got = fg.find_archive(pin, None)
    assert got.read_bytes() == blob
    assert all(a == auth for _, a in idx.requests)


def test_pip_conf_index_url_is_read(clean_env, monkeypatch):
    fg = _module()
    blob, pin = _archive(clean_env)
    with _Index(pin, blob) as idx:
        conf = clean_env / "pip.conf"
        conf.write_text(f"[global]\nindex-url = {idx.url}\n")
        monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
        assert fg.find_archive(pin, None).read_bytes() == blob


def test_a_wrong_download_is_refused(clean_env, monkeypatch):
    fg = _module()
    blob, pin = _archive(clean_env)
    with _Index(pin, blob + b"tampered") as idx:
        monkeypatch.setenv("PIP_INDEX_URL", idx.url)
        with pytest.raises(SystemExit) as e:
            fg.find_archive(pin, None)
    assert "sha256 mismatch" in str(e.value)
    assert not (clean_env / "cache" / pin["archive"]).exists()


def test_find_links_folder(clean_env, monkeypatch):
    fg = _module()
    blob, pin = _archive(clean_env)
    links = clean_env / "links"
    links.mkdir()
    (links / pin["archive"]).write_bytes(blob)
    monkeypatch.setenv("PIP_FIND_LINKS", str(links))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    assert fg.find_archive(pin, None).read_bytes() == blob


def test_user_archive_is_checked_against_the_pin(clean_env):
    fg = _module()
    blob, pin = _archive(clean_env)
    good = clean_env / "mine.tar.gz"
    good.write_bytes(blob)
    assert fg.find_archive(pin, good) == good
    bad = clean_env / "bad.tar.gz"
    bad.write_bytes(blob[:-1])
    with pytest.raises(SystemExit, match="is not the pinned archive"):
        fg.find_archive(pin, bad)
    with pytest.raises(SystemExit, match="does not exist"):
        fg.find_archive(pin, clean_env / "missing.tar.gz")


def test_when_everything_fails_one_message_says_what_was_tried(clean_env, monkeypatch):
    fg = _module()
    _, pin = _archive(clean_env)
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple/")      # nothing listens there
    monkeypatch.setenv("PIP_FIND_LINKS", str(clean_env / "nolinks"))
    with pytest.raises(SystemExit) as e:
        fg.find_archive(pin, None)
    msg = str(e.value)
    assert "Tried:" in msg
    assert "the cache" in msg and "find-links" in msg and "http://127.0.0.1:9/simple/fake-pkg/" in msg
    assert "PYGGML_GGML_ARCHIVE=" in msg and "-Dggml_archive=" in msg and "PYGGML_GGML_DIR" in msg
    assert pin["sha256"] in msg


def test_runs_without_site_packages(clean_env):
    """No pip, no site-packages (python -S): the download still works."""
    blob, pin = _archive(clean_env)
    code = (f"import sys, importlib.util; assert importlib.util.find_spec('pip') is None, 'pip importable'; "
            f"sys.path.insert(0, {str(TOOL.parent)!r}); import fetch_ggml as f, json; "
            f"print(f.find_archive(json.loads(sys.argv[1]), None))")
    import json
    with _Index(pin, blob) as idx:
        env = dict(os.environ, PIP_INDEX_URL=idx.url)
        r = subprocess.run([sys.executable, "-S", "-c", code, json.dumps(pin)], capture_output=True, text=True,
                           env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert Path(r.stdout.strip()).read_bytes() == blob
