"""pyggml's low-level layer: owners for ggml's objects.

``Context`` and ``Tensor`` (tensor metadata and numpy interop), ``Backend``
and ``BackendBuffer`` (devices and their memory), ``Graph`` and
``Scheduler`` (compute), ``OptContext`` (ggml-opt training) and ``GGUFFile``.
Operations are in ``pyggml.ops``.  Every owner has an idempotent ``free()``,
is a context manager, and raises ``FreedError`` once freed.
"""

from pyggml.core._core import (  # noqa: F401
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
    n_threads_is_set,
    reachable_count,
    set_n_threads,
)

__all__ = ["Backend", "BackendBuffer", "Context", "GGUFFile", "Graph", "OptContext", "Scheduler",
           "Tensor", "backends", "devices", "get_n_threads", "ggml_version", "set_n_threads"]
