"""``pyggml.ops``: ggml's operations over ``pyggml.core.Tensor`` (see ``pyggml.core.ops``)."""

from pyggml.core.ops import *  # noqa: F401,F403
from pyggml.core import ops as _ops

__all__ = [n for n in dir(_ops) if not n.startswith("_")]
