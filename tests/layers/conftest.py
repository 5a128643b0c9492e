"""Make the shared layer-test harness importable (tests/layers has no __init__.py)."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
