#!/usr/bin/env python3
"""Fetch the pinned ggml tree, verify it, and apply our patches.

ggml's own source is never committed.  The pin in ``ggml/pin.json`` names a
package release whose source distribution carries ggml; this script finds that
archive, checks its sha256, extracts only the ggml subtree into
``ggml/upstream`` (git-ignored) and applies ``ggml/patches/*.patch`` in name
order.  It needs nothing but the standard library and ``patch``: no pip, so it
runs in pip's isolated build environment, in a venv without pip, and with
``--no-build-isolation`` alike.

Where the tree comes from, first hit wins:

1. ``--dest`` (default ``ggml/upstream``) already extracted from the pin with
   the current patches (its stamp matches): nothing to do.
2. An archive the user points at: ``--archive FILE`` or ``$PYGGML_GGML_ARCHIVE``
   (meson passes ``-Dggml_archive``): for offline builds.
3. The download cache: ``$PYGGML_CACHE_DIR``, else ``$XDG_CACHE_HOME/pyggml``,
   else ``~/.cache/pyggml``.
4. pip's ``find-links`` locations, then the package index's simple API
   (``$PIP_INDEX_URL`` / ``$PIP_EXTRA_INDEX_URL`` or pip's configuration files,
   else the public index), downloaded with urllib; ``$PIP_NO_INDEX`` skips the
   index.  The archive is then kept in the cache.

(A ggml tree given with ``-Dggml_dir`` / ``$PYGGML_GGML_DIR`` comes before all
of these: meson.build uses it and does not run this script.)

When every way fails, one message says what was tried and how to supply the
archive.

Usage: python tools/fetch_ggml.py [--dest DIR] [--archive FILE] [--quiet]
"""

from __future__ import annotations

import argparse
import base64
import configparser
import hashlib
import html.parser
import json
import os
import shutil
import ssl
import subprocess
import sys
import tarfile
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PIN_FILE = ROOT / "ggml" / "pin.json"
PATCH_DIR = ROOT / "ggml" / "patches"
DEFAULT_DEST = ROOT / "ggml" / "upstream"
STAMP_NAME = ".pyggml-stamp"
ARCHIVE_ENV = "PYGGML_GGML_ARCHIVE"
# pip's own default index, used when neither the environment nor pip's
# configuration names one
DEFAULT_INDEX = "https://pypi.org/simple/"

_quiet = False


class FetchError(Exception):
    """One way of getting the archive failed; the message says why."""


def log(msg: str) -> None:
    if not _quiet:
        print(f"fetch_ggml: {msg}", file=sys.stderr, flush=True)


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def cache_dir() -> Path:
    env = os.environ.get("PYGGML_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "pyggml"


def patches() -> list[Path]:
    return sorted(PATCH_DIR.glob("*.patch")) if PATCH_DIR.is_dir() else []


def stamp_text(pin: dict) -> str:
    h = hashlib.sha256(pin["sha256"].encode())
    for p in patches():
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()


def is_current(dest: Path, pin: dict) -> bool:
    stamp = dest / STAMP_NAME
    return stamp.is_file() and stamp.read_text().strip() == stamp_text(pin)


# --- pip's settings, read without pip ------------------------------------------

def _pip_config() -> configparser.ConfigParser:
    """pip's configuration files, later ones overriding earlier ones, as pip
    reads them (global, user, site; PIP_CONFIG_FILE last)."""
    files: list[Path] = []
    for d in os.environ.get("XDG_CONFIG_DIRS", "/etc/xdg").split(os.pathsep):
        if d:
            files.append(Path(d) / "pip" / "pip.conf")
    files.append(Path("/etc/pip.conf"))
    home = Path.home()
    files.append(home / ".pip" / "pip.conf")
    xdg_home = os.environ.get("XDG_CONFIG_HOME")
    files.append((Path(xdg_home) if xdg_home else home / ".config") / "pip" / "pip.conf")
    venv = os.environ.get("VIRTUAL_ENV") or (sys.prefix if sys.prefix != sys.base_prefix else "")
    if venv:
        files.append(Path(venv) / "pip.conf")
    env_file = os.environ.get("PIP_CONFIG_FILE")
    cp = configparser.ConfigParser(interpolation=None)
    if env_file == os.devnull:
        return cp
    if env_file:
        files.append(Path(env_file))
    for f in files:
        try:
            cp.read(f)
        except (OSError, configparser.Error) as e:
            log(f"ignoring pip configuration {f}: {e}")
    return cp


def _pip_setting(cp: configparser.ConfigParser, name: str) -> str | None:
    env = os.environ.get("PIP_" + name.upper().replace("-", "_"))
    if env is not None:
        return env
    for section in ("download", "install", "global"):
        if cp.has_option(section, name):
            return cp.get(section, name)
    return None


def _truthy(v: str | None) -> bool:
    return v is not None and v.strip().lower() in ("1", "true", "yes", "on")


def sources() -> tuple[list[str], list[str], dict]:
    """(find-links locations, index URLs, options) from pip's environment
    variables and configuration files."""
    cp = _pip_config()
    find_links = (_pip_setting(cp, "find-links") or "").split()
    if _truthy(_pip_setting(cp, "no-index")):
        indexes: list[str] = []
    else:
        indexes = [(_pip_setting(cp, "index-url") or DEFAULT_INDEX).strip()]
        indexes += (_pip_setting(cp, "extra-index-url") or "").split()
    opts = {"cert": _pip_setting(cp, "cert") or os.environ.get("REQUESTS_CA_BUNDLE"),
            "timeout": float(_pip_setting(cp, "timeout") or _pip_setting(cp, "default-timeout") or 60)}
    return find_links, indexes, opts


# --- HTTP ---------------------------------------------------------------------

class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            for k, v in attrs:
                if k == "href" and v:
                    self.hrefs.append(v)


def _split_auth(url: str) -> tuple[str, str | None]:
    """The URL without user:password, and a Basic authorization header for them."""
    p = urllib.parse.urlsplit(url)
    if p.username is None:
        return url, None
    netloc = p.hostname or ""
    if p.port:
        netloc += f":{p.port}"
    creds = f"{urllib.parse.unquote(p.username)}:{urllib.parse.unquote(p.password or '')}"
    return (urllib.parse.urlunsplit(p._replace(netloc=netloc)),
            "Basic " + base64.b64encode(creds.encode()).decode())


def _open(url: str, opts: dict, auth: str | None = None):
    url, auth_here = _split_auth(url)
    req = urllib.request.Request(url, headers={"User-Agent": "pyggml-fetch_ggml",
                                               "Accept": "text/html"})
    if auth or auth_here:
        req.add_header("Authorization", auth_here or auth)
    ctx = None
    if url.startswith("https:"):
        ctx = ssl.create_default_context(cafile=opts.get("cert") or None)
    return urllib.request.urlopen(req, timeout=opts["timeout"], context=ctx)


def _describe(e: BaseException) -> str:
    if isinstance(e, urllib.error.HTTPError):
        return f"HTTP {e.code} {e.reason}"
    if isinstance(e, urllib.error.URLError):
        return f"{e.reason}"
    return f"{type(e).__name__}: {e}"


def _find_link(page_url: str, archive: str, opts: dict) -> str:
    """The URL of `archive` listed on an index or find-links page."""
    with _open(page_url, opts) as r:
        body = r.read().decode("utf-8", errors="replace")
        base = r.geturl()
    parser = _Links()
    parser.feed(body)
    for href in parser.hrefs:
        url = urllib.parse.urljoin(base, href)
        name = urllib.parse.unquote(urllib.parse.urlsplit(url).path.rsplit("/", 1)[-1])
        if name == archive:
            return url
    raise FetchError(f"{archive} is not listed there")


def _download(url: str, dest: Path, pin: dict, opts: dict, page: str) -> None:
    """Stream url (listed on page) into dest, checking the pinned sha256.  The
    page's credentials go along only to the page's own host."""
    page_plain, auth = _split_auth(page)
    if urllib.parse.urlsplit(url).netloc != urllib.parse.urlsplit(page_plain).netloc:
        auth = None
    h = hashlib.sha256()
    tmp = dest.with_name(dest.name + f".part{os.getpid()}")
    try:
        with _open(url, opts, auth) as r, open(tmp, "wb") as f:
            total = int(r.headers.get("Content-Length") or 0)
            if total:
                log(f"downloading {total / 1e6:.0f} MB")
            for block in iter(lambda: r.read(1 << 20), b""):
                h.update(block)
                f.write(block)
        if h.hexdigest() != pin["sha256"]:
            raise FetchError(f"sha256 mismatch: expected {pin['sha256']}, got {h.hexdigest()}")
        os.replace(tmp, dest)
    finally:
        if tmp.exists():
            tmp.unlink()


def _normalize(name: str) -> str:
    out = "".join(c if c.isalnum() else "-" for c in name.lower())
    while "--" in out:
        out = out.replace("--", "-")
    return out


def download(pin: dict, tried: list[str]) -> Path | None:
    """Download the archive into the cache (or a temporary folder when the cache
    cannot be written); None when every source failed (reasons in `tried`)."""
    cache = cache_dir()
    try:
        cache.mkdir(parents=True, exist_ok=True)
        probe = cache / f".write-test{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
        target_dir = cache
    except OSError as e:
        target_dir = Path(tempfile.mkdtemp(prefix="pyggml-ggml-"))
        log(f"the cache {cache} cannot be written ({e}); downloading to {target_dir}")
    target = target_dir / pin["archive"]
    archive = pin["archive"]
    find_links, indexes, opts = sources()
    for loc in find_links:
        if "://" not in loc or loc.startswith("file:"):
            d = Path(urllib.request.url2pathname(urllib.parse.urlsplit(loc).path)
                     if loc.startswith("file:") else loc).expanduser()
            cand = d / archive if d.is_dir() else d
            if cand.name == archive and cand.is_file():
                if sha256_of(cand) == pin["sha256"]:
                    shutil.copyfile(cand, target)
                    log(f"copied {archive} from find-links {d}")
                    return target
                tried.append(f"find-links {cand}: sha256 does not match the pin")
            else:
                tried.append(f"find-links {d}: no {archive}")
            continue
        try:
            url = _find_link(loc, archive, opts)
            log(f"fetching {archive} from find-links {_split_auth(loc)[0]}")
            _download(url, target, pin, opts, loc)
            return target
        except (OSError, FetchError, ValueError) as e:
            tried.append(f"find-links {_split_auth(loc)[0]}: {_describe(e)}")
    if not indexes:
        tried.append("the package index: skipped (PIP_NO_INDEX / no-index is set)")
    for index in indexes:
        page = index.rstrip("/") + "/" + _normalize(pin["package"]) + "/"
        shown = _split_auth(page)[0]
        try:
            url = _find_link(page, archive, opts)
            log(f"fetching {archive} from {shown}")
            _download(url, target, pin, opts, page)
            return target
        except (OSError, FetchError, ValueError) as e:
            tried.append(f"index {shown}: {_describe(e)}")
    return None


# --- extracting -------------------------------------------------------------------

def extract(archive: Path, pin: dict, dest: Path) -> None:
    prefix = pin["subtree"].rstrip("/") + "/"
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".ggml-", dir=dest.parent))
    try:
        with tarfile.open(archive, "r:gz") as tf:
            members = []
            for m in tf.getmembers():
                if not m.name.startswith(prefix) or not (m.isfile() or m.isdir()):
                    continue
                m.name = m.name[len(prefix):]
                if not m.name or m.name.startswith("/") or ".." in Path(m.name).parts:
                    continue
                members.append(m)
            if not members:
                raise SystemExit(f"fetch_ggml: {prefix} not found in {archive}")
            if sys.version_info >= (3, 12) or hasattr(tarfile, "data_filter"):
                tf.extractall(tmp, members=members, filter="data")
            else:  # names were checked above
                tf.extractall(tmp, members=members)
        patch_exe, git_exe = shutil.which("patch"), shutil.which("git")
        if patches() and not (patch_exe or git_exe):
            raise SystemExit("fetch_ggml: `patch` or `git` is needed to apply ggml/patches "
                             "(e.g. apt-get install patch)")
        for p in patches():
            log(f"applying {p.name}")
            if patch_exe:
                cmd = [patch_exe, "-p1", "--forward", "--batch", "-d", str(tmp), "-i", str(p)]
            else:   # outside a repository git apply is a plain patch program (the
                    # ceiling keeps it from finding the clone around ggml/)
                cmd = [git_exe, "-C", str(tmp), "apply", "-p1", str(p)]
            env = dict(os.environ, GIT_CEILING_DIRECTORIES=str(tmp.parent))
            res = subprocess.run(cmd, capture_output=True, text=True, env=env)
            if res.returncode != 0:
                raise SystemExit(f"fetch_ggml: patch {p.name} failed:\n"
                                 f"{res.stdout}{res.stderr}")
        (tmp / STAMP_NAME).write_text(stamp_text(pin) + "\n")
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(tmp, dest)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def find_archive(pin: dict, user_archive: Path | None) -> Path:
    tried: list[str] = []
    if user_archive is not None:
        user_archive = user_archive.expanduser()
        if not user_archive.is_absolute():
            # meson runs this script from its build folder: a relative path is
            # taken from where the build was started, or the source root
            for base in (os.environ.get("PWD"), os.getcwd(), str(ROOT)):
                if base and (Path(base) / user_archive).is_file():
                    user_archive = Path(base) / user_archive
                    break
        if not user_archive.is_file():
            raise SystemExit(f"fetch_ggml: the archive {user_archive} (from --archive or "
                             f"{ARCHIVE_ENV}) does not exist")
        got = sha256_of(user_archive)
        if got != pin["sha256"]:
            raise SystemExit(f"fetch_ggml: {user_archive} is not the pinned archive "
                             f"{pin['archive']}: sha256 {got}, expected {pin['sha256']}")
        log(f"using the archive {user_archive}")
        return user_archive
    cached = cache_dir() / pin["archive"]
    if cached.is_file():
        if sha256_of(cached) == pin["sha256"]:
            log(f"using the cached {cached}")
            return cached
        tried.append(f"the cache {cached}: sha256 does not match the pin (replacing it)")
    else:
        tried.append(f"the cache {cached}: not there")
    got = download(pin, tried)
    if got is not None:
        return got
    lines = "\n".join(f"  - {t}" for t in tried)
    raise SystemExit(
        f"fetch_ggml: could not get ggml's source, the archive {pin['archive']} "
        f"({pin['package']} {pin['version']}, sha256 {pin['sha256']}).\n"
        f"Tried:\n{lines}\n"
        f"To build without a network, download that file elsewhere and point the build at it:\n"
        f"  {ARCHIVE_ENV}=/path/to/{pin['archive']} pip install .\n"
        f"  (or pip install . -Csetup-args=-Dggml_archive=/path/to/{pin['archive']},\n"
        f"   or copy it into {cache_dir()}),\n"
        f"or build an existing ggml tree: PYGGML_GGML_DIR=/path/to/ggml pip install .")


def main(argv: list[str] | None = None) -> int:
    global _quiet
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dest", type=Path, default=DEFAULT_DEST,
                    help="where the ggml tree goes (default: ggml/upstream)")
    ap.add_argument("--archive", type=Path,
                    help=f"use this already-downloaded archive (checked against the pin; "
                         f"default: ${ARCHIVE_ENV})")
    ap.add_argument("--quiet", action="store_true", help="no progress messages (errors still show)")
    args = ap.parse_args(argv)
    _quiet = args.quiet

    pin = json.loads(PIN_FILE.read_text())
    dest = args.dest.resolve()
    if is_current(dest, pin):
        log(f"{dest} is current")
        print(dest)
        return 0
    user_archive = args.archive or (Path(os.environ[ARCHIVE_ENV]) if os.environ.get(ARCHIVE_ENV) else None)
    archive = find_archive(pin, user_archive)
    extract(archive, pin, dest)
    log(f"ggml {pin['ggml_version']} ready in {dest}")
    print(dest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
