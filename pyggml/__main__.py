"""``python -m pyggml <command>``: the same as the ``pyggml`` command."""

import sys

from pyggml.cli import main

sys.exit(main())
