"""pyggml's exceptions.

Every failure inside ggml that pyggml can detect becomes one of these (or a
plain TypeError / ValueError for wrong arguments) instead of an abort.
"""

__all__ = ["GGMLError", "FreedError", "AllocationError", "ContextFullError", "ComputeError", "GGUFError",
           "RPCError"]


class GGMLError(Exception):
    """Base class of pyggml's errors."""


class FreedError(GGMLError, RuntimeError):
    """An object was used after free() ("... has been freed")."""


class AllocationError(GGMLError, MemoryError):
    """ggml could not allocate memory (GGML_STATUS_ALLOC_FAILED, a NULL buffer, a full context)."""


class ContextFullError(AllocationError):
    """A Context (or a Graph in it) has no room left for more tensors or nodes: make it
    with a larger ``n_tensors``/``graph_size``.  Raised before ggml is asked, so nothing
    was changed."""


class ComputeError(GGMLError, RuntimeError):
    """A graph computation failed (GGML_STATUS_FAILED)."""


class GGUFError(GGMLError, ValueError):
    """A GGUF file is malformed, truncated or not what was expected."""


class RPCError(GGMLError, ConnectionError):
    """A remote device (ggml's RPC backend, pyggml.rpc) cannot be reached: the
    connect was refused or timed out, the server speaks another protocol
    version, or the connection failed while in use (what lived on the device
    is then gone)."""
