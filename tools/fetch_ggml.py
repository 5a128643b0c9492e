#!/usr/bin/env python3
"""Fetch the pinned ggml tree, verify it, and apply our patches.

ggml's own source is never committed.  The pin in ``ggml/pin.json`` names a
package release whose source distribution carries ggml; this script downloads
that archive with pip (by package name and version), checks its sha256,
extracts only the ggml subtree into ``ggml/upstream`` (git-ignored) and applies
``ggml/patches/*.patch`` in name order.

The archive is cached (``$PYGGML_CACHE_DIR``, else ``$XDG_CACHE_HOME/pyggml``,
else ``~/.cache/pyggml``) so rebuilds and fresh clones on the same machine do
not download again.  The extracted tree carries a stamp of the pin and the
patches; a tree whose stamp differs is replaced.

Usage: python tools/fetch_ggml.py [--dest DIR] [--archive FILE] [--quiet]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PIN_FILE = ROOT / "ggml" / "pin.json"
PATCH_DIR = ROOT / "ggml" / "patches"
DEFAULT_DEST = ROOT / "ggml" / "upstream"
STAMP_NAME = ".pyggml-stamp"


def log(msg: str, quiet: bool) -> None:
    if not quiet:
        print(f"fetch_ggml: {msg}", file=sys.stderr)


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def cache_dir() -> Path:
    env = os.environ.get("PYGGML_CACHE_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "pyggml"


def patches() -> list[Path]:
    return sorted(PATCH_DIR.glob("*.patch")) if PATCH_DIR.is_dir() else []


def stamp_text(pin: dict) -> str:
    h = hashlib.sha256(pin["sha256"].encode())
    for p in patches():
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()


def download(pin: dict, quiet: bool) -> Path:
    """Return the verified archive, downloading it into the cache if needed."""
    cache = cache_dir()
    cached = cache / pin["archive"]
    if cached.is_file() and sha256_of(cached) == pin["sha256"]:
        log(f"using cached {cached}", quiet)
        return cached
    cache.mkdir(parents=True, exist_ok=True)
    spec = f"{pin['package']}=={pin['version']}"
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        base = [sys.executable, "-m", "pip", "download", "--no-deps",
                "--no-binary", ":all:", "--disable-pip-version-check",
                "-d", tmp, spec]
        # Without build isolation pip reads the sdist's metadata with the build
        # backend already installed (scikit-build-core, a build requirement of
        # ours) instead of installing a fresh backend environment first.
        attempts = [base[:4] + ["--no-build-isolation"] + base[4:], base]
        err = ""
        for cmd in attempts:
            log("running " + " ".join(cmd), quiet)
            res = subprocess.run(cmd, capture_output=True, text=True)
            got = Path(tmp) / pin["archive"]
            if res.returncode == 0 and got.is_file():
                break
            err = res.stderr[-2000:]
        else:
            raise SystemExit(f"fetch_ggml: could not download {spec}:\n{err}")
        digest = sha256_of(got)
        if digest != pin["sha256"]:
            raise SystemExit(
                f"fetch_ggml: sha256 mismatch for {pin['archive']}: expected "
                f"{pin['sha256']}, got {digest}")
        os.replace(got, cached)
    return cached


def extract(archive: Path, pin: dict, dest: Path, quiet: bool) -> None:
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
            tf.extractall(tmp, members=members, filter="data")
        for p in patches():
            log(f"applying {p.name}", quiet)
            res = subprocess.run(["patch", "-p1", "--forward", "--batch", "-d",
                                  str(tmp), "-i", str(p)],
                                 capture_output=True, text=True)
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


def is_current(dest: Path, pin: dict) -> bool:
    stamp = dest / STAMP_NAME
    return stamp.is_file() and stamp.read_text().strip() == stamp_text(pin)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dest", type=Path, default=DEFAULT_DEST,
                    help="where the ggml tree goes (default: ggml/upstream)")
    ap.add_argument("--archive", type=Path,
                    help="use this already-downloaded archive (checked against the pin)")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)

    pin = json.loads(PIN_FILE.read_text())
    dest = args.dest.resolve()
    if is_current(dest, pin):
        log(f"{dest} is current", args.quiet)
        print(dest)
        return 0
    if args.archive:
        archive = args.archive
        if sha256_of(archive) != pin["sha256"]:
            raise SystemExit(f"fetch_ggml: {archive} does not match the pinned sha256")
    else:
        archive = download(pin, args.quiet)
    extract(archive, pin, dest, args.quiet)
    log(f"ggml {pin['ggml_version']} ready in {dest}", args.quiet)
    print(dest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
