#!/usr/bin/env python3
"""meson dist script: copy the ggml tree into the source distribution
(ggml/upstream), so that an sdist builds without a network."""

import os
import shutil
import sys
from pathlib import Path

src = Path(sys.argv[1])
dist_root = Path(os.environ["MESON_DIST_ROOT"])
dest = dist_root / "ggml" / "upstream"
if dest.exists():
    shutil.rmtree(dest)
shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".git"))
