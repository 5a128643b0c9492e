"""Graphs that are too deep for the calling thread's stack.

ggml adds a tensor and what it depends on to a graph by recursion
(``ggml_visit_parents``; the backward pass too), one C stack frame per link of
the longest chain of operations.  A chain of some 150,000 operations (a Lambda
that loops, a very long unrolled sequence) overflows an 8 MiB stack, and the
interpreter dies of SIGSEGV with no Python error.  ``Graph`` here builds a
graph of more than ``SMALL`` tensors on a helper thread whose stack is sized
for it; smaller graphs, which any thread's stack holds, are built in place.
"""

import threading

from pyggml.core import Graph as _CoreGraph
from pyggml.core import reachable_count

__all__ = ["Graph", "SMALL"]

SMALL = 2000                      # tensors: a chain this long needs about 160 KiB of stack (~80 B a link)
_BYTES_PER_TENSOR = 512           # ggml's frames are about 100 bytes; a wide margin
_MIN_STACK = 64 << 20
_lock = threading.Lock()          # threading.stack_size is process-wide


def _on_large_stack(n_tensors, fn, *args):
    size = max(_MIN_STACK, n_tensors * _BYTES_PER_TENSOR)
    size = (size + 0xFFFF) & ~0xFFFF
    result = {}

    def work():
        try:
            result["value"] = fn(*args)
        except BaseException as e:            # handed to the caller's thread
            result["error"] = e

    with _lock:
        old = threading.stack_size()
        try:
            threading.stack_size(size)
            worker = threading.Thread(target=work, name="pyggml-deep-graph", daemon=True)
            worker.start()
        except (ValueError, RuntimeError, MemoryError, OverflowError) as e:
            raise ValueError(f"a graph of {n_tensors} tensors is too deep to build here (ggml builds graphs "
                             f"by recursion and needs a {size >> 20} MiB stack for it): {e}") from None
        finally:
            threading.stack_size(old)
    worker.join()
    if "error" in result:
        raise result["error"]
    return result["value"]


class Graph(_CoreGraph):
    """pyggml.core.Graph whose builds of very deep graphs cannot overflow the C stack."""

    def build_forward(self, t):
        n = reachable_count([t])
        if n <= SMALL:
            return super().build_forward(t)
        return _on_large_stack(n, super().build_forward, t)

    def build_backward(self, accumulators=None, tensor_ctx=None):
        n = self.n_nodes
        if n <= SMALL // 4:
            return super().build_backward(accumulators, tensor_ctx)
        return _on_large_stack(4 * n, super().build_backward, accumulators, tensor_ctx)
