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
- rpc.pxi      remote devices (ggml's RPC backend): connections, failure checks, a server
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

from pyggml.errors import (GGMLError, FreedError, AllocationError, ContextFullError,
                           ComputeError, GGUFError)

# ggml's abort handler forks gdb for a backtrace; under memory pressure that can
# hang instead of exiting.  Off unless the user asks (PYGGML_BACKTRACE=1); ggml
# reads the variable when it aborts.
if os.environ.get("PYGGML_BACKTRACE", "") in ("", "0"):
    os.environ.setdefault("GGML_NO_BACKTRACE", "1")

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
    void pyggml_ignore_sigxfsz()

cdef extern from "_guard.h" nogil:
    const char * pyggml_guard_error()
    int pyggml_guard_was_oom()
    void pyggml_guard_clear()
    ggml_backend_t pyggml_dev_init(ggml_backend_dev_t dev)
    ggml_backend_sched_t pyggml_sched_new(ggml_backend_t * backends, int n_backends, size_t graph_size, bint parallel)
    bint pyggml_sched_alloc_graph(ggml_backend_sched_t sched, ggml_cgraph * graph)
    ggml_status pyggml_sched_graph_compute(ggml_backend_sched_t sched, ggml_cgraph * graph)
    void pyggml_sched_reset(ggml_backend_sched_t sched)
    ggml_backend_buffer_t pyggml_alloc_ctx_tensors(ggml_context * ctx, ggml_backend_t backend)
    ggml_backend_buffer_t pyggml_pool_alloc_ctx_tensors(ggml_context * ctx, ggml_backend_t backend, void ** block,
                                                        size_t * block_size)
    void pyggml_pool_give(void * block, size_t block_size)
    void pyggml_pool_release()
    void pyggml_hold_ggml_critical_section(double seconds)
    void pyggml_pool_stats(size_t * held, size_t * in_use, size_t * peak)
    ggml_opt_context_t pyggml_opt_init(ggml_opt_params params)
    ggml_status pyggml_opt_alloc(ggml_opt_context_t opt_ctx, bint backward)
    ggml_status pyggml_opt_eval(ggml_opt_context_t opt_ctx)
    gguf_context * pyggml_gguf_init_empty()
    gguf_context * pyggml_gguf_init_from_file(const char * fname, gguf_init_params params)
    int pyggml_gguf_set_val_u32(gguf_context * ctx, const char * key, unsigned int val)
    int pyggml_gguf_set_val_i32(gguf_context * ctx, const char * key, int val)
    int pyggml_gguf_set_val_i64(gguf_context * ctx, const char * key, int64_t val)
    int pyggml_gguf_set_val_f32(gguf_context * ctx, const char * key, float val)
    int pyggml_gguf_set_val_f64(gguf_context * ctx, const char * key, double val)
    int pyggml_gguf_set_val_bool(gguf_context * ctx, const char * key, bint val)
    int pyggml_gguf_set_val_str(gguf_context * ctx, const char * key, const char * val)
    int pyggml_gguf_set_arr_data(gguf_context * ctx, const char * key, gguf_type type, const void * data, size_t n)
    int pyggml_gguf_set_arr_str(gguf_context * ctx, const char * key, const char ** data, size_t n)
    int pyggml_gguf_set_kv(gguf_context * ctx, const gguf_context * src)
    int pyggml_gguf_add_tensor(gguf_context * ctx, const ggml_tensor * tensor)
    size_t pyggml_gguf_get_meta_size(const gguf_context * ctx)
    int pyggml_gguf_get_meta_data(const gguf_context * ctx, void * data)


cdef str _guard_text():
    """What the last C++ exception caught by _guard.cpp said (in this thread)."""
    cdef const char * e = pyggml_guard_error()
    t = (<bytes>e).decode("utf-8", "replace") if e != NULL else ""
    if pyggml_guard_was_oom():
        t = "out of memory" + (f" ({t})" if t else "")
    return t


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

# Bumped whenever an owner is freed, a buffer is made or contexts are linked:
# what a graph's compute must lock and check changes only then, so a
# Scheduler caches both per graph for as long as this stays the same.
cdef long _owners_gen = 0


cdef inline void _owners_changed() noexcept:
    global _owners_gen
    _owners_gen += 1


# ---------------------------------------------------------------------------
# fork: a child gets copies of locks that threads of the parent may have held
# (and that nobody in the child will release), and no thread pool threads.
# Every lock of the core is taken through _owner_lock / _Pool, which make new
# ones in a child; pools are rebuilt there.

cdef int _fork_gen = 0


def _after_fork_in_child():
    global _fork_gen, _PID
    _fork_gen += 1
    _PID = getpid()
    _pools_after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _hold_ggml_critical_section(double seconds):
    """(Tests) hold ggml's critical section (a mutex every ggml_init takes) for ``seconds``,
    without the GIL, as a thread inside ggml_init holds it: a fork meanwhile must not leave
    the child's copy locked."""
    if not 0 <= seconds <= 60:
        raise ValueError(f"seconds must be in [0, 60], got {seconds}")
    with nogil:
        pyggml_hold_ggml_critical_section(seconds)


cdef list _acquire_all(list owners):
    """Take the locks of these owners (and thread pools), each once, in one
    global order (by id) so that two computes cannot deadlock.  Returns the
    locks taken, for _release_all."""
    seen = {}
    for o in owners:
        if o is not None:
            seen[id(o)] = o
    taken = []
    try:
        for k in sorted(seen):
            l = _lock_of(seen[k])
            l.acquire()
            taken.append(l)
    except BaseException:
        _release_all(taken)
        raise
    return taken


cdef list _acquire_in_order(list locks):
    """Take these locks (already in the global order); returns those taken."""
    taken = []
    try:
        for l in locks:
            l.acquire()
            taken.append(l)
    except BaseException:
        _release_all(taken)
        raise
    return taken


cdef list _lock_order(list owners):
    """The locks of these owners, each once, in the global order of _acquire_all."""
    seen = {}
    for o in owners:
        if o is not None:
            seen[id(o)] = o
    return [_lock_of(seen[k]) for k in sorted(seen)]


cdef void _release_all(list taken):
    for l in reversed(taken):
        try:
            l.release()
        except BaseException:
            pass


cdef object _lock_of(object o):
    if isinstance(o, _Owner):
        return (<_Owner>o)._get_lock()
    return (<_Pool>o)._get_lock()


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
    cdef object _lock            # held while the object is in use (compute) and by free()
    cdef int _lock_gen

    def __cinit__(self, *args, **kwargs):
        self._pid = getpid()
        self._dependents = []
        self._lock = threading.RLock()
        self._lock_gen = _fork_gen

    cdef object _get_lock(self):
        """This object's lock (a fresh one in a forked child: the parent's copy
        may be held by a thread that does not exist here)."""
        if self._lock_gen != _fork_gen:
            self._lock = threading.RLock()
            self._lock_gen = _fork_gen
        return self._lock

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

    cdef bint _has_dependents(self):
        for ref in self._dependents:
            d = ref()
            if d is not None and (<_Owner>d)._alive():
                return True
        return False

    def free(self):
        """Free the native memory. Idempotent; every other method raises afterwards.
        Safe from any thread: waits for a compute that uses the object to end."""
        if not self._alive():
            return
        if getpid() != self._pid:
            self._forget()
            return
        self._free_under_lock()

    cdef _free_under_lock(self):
        """Free dependents (each under its own lock), then this object under its
        lock.  No lock is held while dependents are freed, so a compute holding
        several locks cannot deadlock with a free."""
        while True:
            self._free_dependents()
            lock = self._get_lock()
            with lock:
                if self._has_dependents():
                    continue            # made by another thread meanwhile
                self._before_release()
                if self._alive():
                    self._release()
                _owners_changed()
                return

    cdef _before_release(self):
        """Hook run under the lock just before _release (Python level work)."""
        pass

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
include "rpc.pxi"
include "graph.pxi"
include "opt.pxi"
include "gguf.pxi"
include "ops.pxi"
include "loader.pxi"

# the main thread's thread-local data of _guard.cpp and of libstdc++'s exceptions gets its
# memory now, not on a first error
pyggml_guard_clear()
