"""pyggml's low-level layer: owners for ggml's objects.

``Context`` and ``Tensor`` (tensor metadata and numpy interop), ``Backend``
and ``BackendBuffer`` (devices and their memory), ``Graph`` and
``Scheduler`` (compute), ``OptContext`` (ggml-opt training) and ``GGUFFile``.
Operations are in ``pyggml.ops``.  Every owner has an idempotent ``free()``,
is a context manager, and raises ``FreedError`` once freed.
"""

import os as _os

from pyggml.core import _core
from pyggml import _config

# A dispatch build (the wheel) loads ggml's CPU backend for this CPU and the GPU
# backends whose drivers are present from this folder; every build binds the
# CPU backend's functions.  Nothing else in ggml may run before this.
_core._init_backends(_os.path.dirname(_os.path.abspath(_core.__file__)), list(_config.cpu_variants),
                     list(_config.gpu_modules), _config.cpu_target)

from pyggml.core._core import (  # noqa: E402,F401
    Backend,
    BackendBuffer,
    Context,
    GGUFFile,
    Graph,
    OptContext,
    Scheduler,
    Tensor,
    backends,
    devices,
    get_n_threads,
    ggml_commit,
    ggml_version,
    n_threads_adaptive,
    load_info,
    n_threads_is_set,
    pool_release,
    pool_stats,
    reachable_count,
    reachable_sizes,
    reachable_hashes,
    set_n_threads,
)

__all__ = ["Backend", "BackendBuffer", "Context", "GGUFFile", "Graph", "OptContext", "Scheduler",
           "Tensor", "backends", "devices", "get_n_threads", "ggml_version", "load_info", "pool_release",
           "pool_stats", "set_n_threads"]
