# cython: language_level=3
"""pyggml's compiled core: owners for ggml's objects.

Everything compiled lives in this one extension so that ggml, linked
statically, exists once in the process (its backend registry, log and abort
callbacks are global).  The areas are split into .pxi files:

- context.pxi  Context, Tensor and numpy interop
- backend.pxi  Backend, BackendBuffer, the device registry, CPU threads
- graph.pxi    Graph, Scheduler, compute with Ctrl-C
- opt.pxi      OptContext (ggml-opt)
- gguf.pxi     GGUFFile
- ops.pxi      ggml's operations, each checked before it reaches C
- loader.pxi   ggml's backend modules loaded at import (dispatch builds)
"""

cimport cython
from cpython.ref cimport PyObject
from libc.stdint cimport int32_t, int64_t, uint8_t, uintptr_t
from libc.string cimport memcpy, memset, strlen
from libc.stdlib cimport malloc, free as c_free

cimport numpy as cnp
import numpy as np

from pyggml.core.ggml cimport *
from pyggml.core.ggml_alloc cimport *
from pyggml.core.ggml_backend cimport *
from pyggml.core.ggml_cpu cimport *
from pyggml.core.ggml_opt cimport *
from pyggml.core.gguf cimport *

import os
import threading

from pyggml.errors import (GGMLError, FreedError, AllocationError, ComputeError,
                           GGUFError)

cnp.import_array()

cdef extern from "unistd.h" nogil:
    int getpid()

cdef extern from "Python.h":
    int PyErr_CheckSignals() except -1

cdef extern from "_helpers.h" nogil:
    ctypedef struct pyggml_opt_hparams:
        float alpha
        float beta1
        float beta2
        float eps
        float wd
    ggml_opt_optimizer_params pyggml_get_opt_pars(void * userdata) noexcept
    void pyggml_sigint_arm()
    bint pyggml_abort_cb(void * data) noexcept
    void pyggml_sigint_clear()
    int pyggml_sigint_get()


# ---------------------------------------------------------------------------
# errors and status codes, in one place (no call site checks codes by hand)

cdef object _STATUS_ERRORS = {
    <int>GGML_STATUS_ALLOC_FAILED: (AllocationError, "ggml could not allocate memory"),
    <int>GGML_STATUS_FAILED: (ComputeError, "ggml compute failed"),
}


cdef int _check_status(ggml_status status, str what) except -1:
    """Turn an enum ggml_status into an exception (KeyboardInterrupt for ABORTED)."""
    if status == GGML_STATUS_SUCCESS:
        return 0
    if status == GGML_STATUS_ABORTED:
        PyErr_CheckSignals()
        raise KeyboardInterrupt(f"{what} was interrupted")
    cls, msg = _STATUS_ERRORS.get(<int>status, (GGMLError, "ggml returned an error"))
    raise cls(f"{what}: {msg} (status {<int>status})")


cdef inline int _check_ptr(const void * p, str what, type cls=AllocationError) except -1:
    if p == NULL:
        raise cls(f"{what} failed (ggml returned NULL)")
    return 0


cdef int _PID = getpid()


# ---------------------------------------------------------------------------
# ggml's log goes to logging.getLogger("pyggml")

_logger = None           # logging.getLogger("pyggml"), imported at ggml's first message (import time)
cdef list _log_pending = []
cdef int _log_last_level = GGML_LOG_LEVEL_INFO

cdef void _log_callback(ggml_log_level level, const char * text, void * user_data) noexcept with gil:
    global _log_last_level, _logger
    try:
        if level != GGML_LOG_LEVEL_CONT:
            _log_last_level = level
        _log_pending.append(text.decode("utf-8", "replace"))
        joined = "".join(_log_pending)
        if joined.endswith("\n"):
            _log_pending.clear()
            lvl = _log_last_level
            import logging
            if _logger is None:
                _logger = logging.getLogger("pyggml")
            pylevel = (logging.DEBUG if lvl == GGML_LOG_LEVEL_DEBUG else
                       logging.INFO if lvl == GGML_LOG_LEVEL_INFO else
                       logging.WARNING if lvl == GGML_LOG_LEVEL_WARN else
                       logging.ERROR if lvl == GGML_LOG_LEVEL_ERROR else logging.DEBUG)
            _logger.log(pylevel, "%s", joined.rstrip("\n"))
    except BaseException:
        pass

ggml_log_set(_log_callback, NULL)


# under other names: the Python functions below shadow ggml's (they called themselves)
cdef extern from "ggml.h" nogil:
    const char * _c_ggml_version "ggml_version"()
    const char * _c_ggml_commit "ggml_commit"()


def ggml_version():
    """The version of the ggml library compiled in."""
    return (<bytes>_c_ggml_version()).decode()


def ggml_commit():
    """The llama.cpp commit of the ggml library compiled in."""
    return (<bytes>_c_ggml_commit()).decode()


# ---------------------------------------------------------------------------
# the owner protocol shared by every cdef class: free() and __dealloc__ share
# one path, act only once, never in a forked child, and free dependents first

cdef class _Owner:
    cdef int _pid
    cdef object _dependents      # list of weakrefs to owners that must go first
    cdef object __weakref__
    cdef object _lock

    def __cinit__(self, *args, **kwargs):
        self._pid = getpid()
        self._dependents = []
        self._lock = threading.RLock()

    cdef bint _alive(self):
        return False

    cdef void _release(self) noexcept:
        """Free the native object (only called when alive, in the owning process)."""
        pass

    cdef void _forget(self) noexcept:
        """Drop the native pointer without freeing it (forked child)."""
        pass

    cdef _add_dependent(self, _Owner dep):
        import weakref
        # prune dead references now and then so long-lived owners stay small
        if len(self._dependents) > 64:
            self._dependents = [r for r in self._dependents if r() is not None]
        self._dependents.append(weakref.ref(dep))

    cdef _free_dependents(self):
        deps = self._dependents
        self._dependents = []
        for ref in reversed(deps):
            d = ref()
            if d is not None:
                (<_Owner>d).free()

    def free(self):
        """Free the native memory. Idempotent; every other method raises afterwards."""
        if not self._alive():
            return
        if getpid() != self._pid:
            self._forget()
            return
        self._free_dependents()
        if self._alive():
            self._release()

    cdef void _dealloc(self) noexcept:
        """Called from each subclass's __dealloc__ (dependents hold strong
        references to their parents, so none is alive here)."""
        if self._alive():
            if getpid() != self._pid:
                self._forget()
            else:
                self._release()

    @property
    def closed(self):
        """True once free() has run."""
        return not self._alive()

    def __enter__(self):
        self._check()
        return self

    def __exit__(self, *exc):
        self.free()
        return False

    cdef int _check(self) except -1:
        if not self._alive():
            raise FreedError(f"{type(self).__name__} has been freed")
        return 0


include "context.pxi"
include "backend.pxi"
include "graph.pxi"
include "opt.pxi"
include "gguf.pxi"
include "ops.pxi"
include "loader.pxi"
