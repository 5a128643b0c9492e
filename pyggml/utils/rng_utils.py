"""set_random_seed: one seed for every generator a Keras user's script draws from."""

import random
import sys

import numpy as np

from pyggml._validation import is_int

__all__ = ["set_random_seed"]


def set_random_seed(seed):
    """Seed Python's ``random``, numpy's global generator and pyggml's own
    (``pg.set_seed``: weight initialisation, dropout, shuffling), as Keras's
    ``utils.set_random_seed`` does for its backends; and torch's, when the script imported it."""
    if not is_int(seed):
        raise ValueError(f"set_random_seed: seed must be an int, got {seed!r} (of type {type(seed).__name__})")
    if not 0 <= seed < 2 ** 32:
        raise ValueError(f"set_random_seed: seed must be in [0, 2**32), got {seed}")
    from pyggml._random import set_seed
    random.seed(int(seed))
    np.random.seed(int(seed))
    set_seed(int(seed))
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "manual_seed"):
        # a script that imported torch draws from it too (a DataLoader's shuffle, torch.rand),
        # as Keras's torch backend seeds it
        torch.manual_seed(int(seed))
