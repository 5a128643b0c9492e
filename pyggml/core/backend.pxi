# Backend, BackendBuffer, the device registry and CPU threads.

# --- CPU threads: one setting for every CPU compute ------------------------

cdef int _n_threads_user = 0          # 0: not set by the user (choose per graph)
cdef bint _n_threads_adaptive = True   # the models layer may use fewer when fewer is faster


def _default_threads():
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def set_n_threads(n, adaptive=True):
    """Set the number of CPU threads for all compute (None or 0: one per CPU).

    With ``adaptive`` (the default) ``n`` is a ceiling: a model's training step
    and forward pass time themselves and run on the count, up to ``n``, that is
    fastest now (on a busy machine fewer threads can be faster), checking again
    now and then.  Results do not depend on the count.  ``adaptive=False``
    computes with exactly ``n`` threads."""
    global _n_threads_user, _n_threads_adaptive
    if not isinstance(adaptive, (bool, np.bool_)):
        raise TypeError(f"adaptive must be True or False, got {adaptive!r}")
    if n is None:
        _n_threads_user = 0
        _n_threads_adaptive = bool(adaptive)
        return
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"n_threads must be a positive int, got {n!r}")
    if n < 0 or n > 1024:
        raise ValueError(f"n_threads must be between 1 and 1024, got {n}")
    _n_threads_user = int(n)
    _n_threads_adaptive = bool(adaptive)


def get_n_threads():
    """The CPU thread count in force (the ceiling when adaptive)."""
    return _n_threads_user if _n_threads_user > 0 else _default_threads()


def n_threads_is_set():
    """True when the user chose a thread count with set_n_threads."""
    return _n_threads_user > 0


def n_threads_adaptive():
    """True when the models layer may pick fewer threads than get_n_threads()."""
    return _n_threads_adaptive


# --- CPU thread pools, shared by every CPU Backend of the process ------------
#
# A waiting pool thread spins this many microseconds, then sleeps until woken
# (ggml patch 0023).  ggml spun ~100 ms, which on a shared machine took the
# cores the working threads needed.  PYGGML_SPIN_US overrides it (0..100000).

def _spin_us():
    raw = os.environ.get("PYGGML_SPIN_US", "")
    try:
        v = int(raw)
    except ValueError:
        return 50
    return min(max(v, 0), 100000)

#
# A ggml thread pool runs one graph at a time; a pool per Backend made 200
# small models with 4 threads hold 602 threads.  Backends now share one pool
# per thread count (reference-counted; freed when the last Backend lets go).
# A compute holds its pool's lock, always the last lock it takes, and a
# Backend switches pools only while it holds the old pool's lock (ggml pauses
# the pool it leaves, which must not happen under a running graph).  A forked
# child has none of the parent's pool threads: the registry starts afresh.

cdef dict _pools = {}            # n_threads -> _Pool
cdef object _pools_lock = threading.Lock()


cdef class _Pool:
    cdef ggml_threadpool * ptr
    cdef readonly int n_threads
    cdef int refs
    cdef int gen
    cdef object _lock

    cdef object _get_lock(self):
        if self.gen != _fork_gen:
            # a pool of the parent process: nobody runs on it here
            self._lock = threading.Lock()
            self.gen = _fork_gen
            self.ptr = NULL
        return self._lock


cdef _Pool _pool_get(int n):
    """A reference to the shared pool of n threads (made on first use)."""
    global _pools_lock
    if _pools_lock is None:
        _pools_lock = threading.Lock()
    cdef _Pool pool
    cdef ggml_threadpool_params params
    with _pools_lock:
        pool = _pools.get(n)
        if pool is None or pool.gen != _fork_gen or pool.ptr == NULL:
            params = ggml_threadpool_params_default(n)
            params.poll = _spin_us()
            pool = _Pool.__new__(_Pool)
            with nogil:
                pool.ptr = ggml_threadpool_new(&params)
            if pool.ptr == NULL:
                raise AllocationError(f"could not start a pool of {n} CPU threads")
            pool.n_threads = n
            pool.refs = 0
            pool.gen = _fork_gen
            pool._lock = threading.Lock()
            _pools[n] = pool
        pool.refs += 1
        return pool


cdef void _pool_put(_Pool pool) noexcept:
    """Drop one reference; the last one frees the pool (its threads end)."""
    global _pools_lock
    cdef ggml_threadpool * tp = NULL
    try:
        with _pools_lock:
            pool.refs -= 1
            if pool.refs > 0 or pool.gen != _fork_gen or pool.ptr == NULL:
                return
            if _pools.get(pool.n_threads) is pool:
                del _pools[pool.n_threads]
            tp = pool.ptr
            pool.ptr = NULL
        with pool._get_lock():
            with nogil:
                ggml_threadpool_free(tp)
    except BaseException:
        pass


cdef _pools_after_fork():
    global _pools_lock
    _pools.clear()            # the parent's pools are left alone (no threads to join here)
    _pools_lock = threading.Lock()


def _thread_pools():
    """{n_threads: number of Backends using that pool} (for tests and diagnostics)."""
    cdef _Pool pool
    out = {}
    with _pools_lock:
        for n, p in _pools.items():
            pool = p
            if pool.gen == _fork_gen and pool.ptr != NULL:
                out[n] = pool.refs
    return out


# --- devices ---------------------------------------------------------------

_BUILD_OPTION = {"cuda": "-Csetup-args=-Dcuda=enabled", "vulkan": "-Csetup-args=-Dvulkan=enabled",
                 "metal": "-Csetup-args=-Dmetal=enabled"}

_DEV_TYPES = {<int>GGML_BACKEND_DEVICE_TYPE_CPU: "cpu", <int>GGML_BACKEND_DEVICE_TYPE_GPU: "gpu",
              <int>GGML_BACKEND_DEVICE_TYPE_IGPU: "igpu", <int>GGML_BACKEND_DEVICE_TYPE_ACCEL: "accel"}


def devices():
    """The devices of ggml's registry in this build: a list of dicts with
    ``name`` (lower case, e.g. 'cpu', 'cuda0', 'vulkan0'), ``description``,
    ``type`` ('cpu', 'gpu', 'igpu', 'accel'), ``memory_free`` and ``memory_total``."""
    out = []
    cdef size_t i, n = ggml_backend_dev_count()
    cdef ggml_backend_dev_t d
    cdef size_t free_mem, total_mem
    for i in range(n):
        d = ggml_backend_dev_get(i)
        if _rpc_hidden(d):
            continue
        with nogil:
            ggml_backend_dev_memory(d, &free_mem, &total_mem)
        out.append({
            "name": (<bytes>ggml_backend_dev_name(d)).decode().lower(),
            "description": (<bytes>ggml_backend_dev_description(d)).decode(errors="replace"),
            "type": "rpc" if _rpc_is_remote(d) else _DEV_TYPES.get(<int>ggml_backend_dev_get_type(d), "other"),
            "memory_free": int(free_mem),
            "memory_total": int(total_mem),
        })
    return out


def backends():
    """Names of the usable devices, best first, 'cpu' last (e.g. ['cuda0', 'cpu']);
    remote devices (pyggml.rpc) after the local GPUs."""
    cdef size_t i, n = ggml_backend_dev_count()
    cdef ggml_backend_dev_t d
    gpus, others, remote = [], [], []
    for i in range(n):
        d = ggml_backend_dev_get(i)
        if _rpc_hidden(d):
            continue
        name = (<bytes>ggml_backend_dev_name(d)).decode().lower()
        kind = _DEV_TYPES.get(<int>ggml_backend_dev_get_type(d), "other")
        if _rpc_is_remote(d):
            remote.append(name)
        elif kind in ("gpu", "igpu"):
            gpus.append(name)
        elif kind == "accel":
            others.append(name)
    return gpus + others + remote + ["cpu"]


cdef ggml_backend_dev_t _find_device(str name) except NULL:
    cdef size_t i, n = ggml_backend_dev_count()
    cdef ggml_backend_dev_t d
    want = name.lower()
    if want == "auto":
        want = backends()[0]
    for i in range(n):
        d = ggml_backend_dev_get(i)
        if (<bytes>ggml_backend_dev_name(d)).decode().lower() == want and not _rpc_hidden(d, False):
            return d
    known = backends()
    _rpc_unknown_device(want, known)
    for family, opt in _BUILD_OPTION.items():
        if want.startswith(family) and not any(k.startswith(family) for k in known):
            raise GGMLError(f"backend {name!r} is not available: this build of pyggml has no "
                            f"{family} support (rebuild with `pip install . {opt}`); "
                            f"available: {known}")
    raise ValueError(f"unknown backend {name!r}; available: {known} or 'auto'")


cdef class Backend(_Owner):
    """A ggml backend on one device of the registry: ``Backend("cpu")``,
    ``Backend("cuda0")``, ``Backend("vulkan0")``, ``Backend("metal")`` or
    ``Backend("auto")`` for the best available device."""
    cdef ggml_backend_t ptr
    cdef _Pool pool              # the shared thread pool it computes on (CPU)
    cdef dict kept               # n_threads -> the pools it has computed on, one reference each:
                                 # a model's thread trials go back and forth between counts, and a
                                 # pool given up at each switch was rebuilt (its threads started and
                                 # joined) at the next, dozens of times a second for a small model
    cdef readonly str name
    cdef readonly str device_type
    cdef readonly bint is_cpu

    def __init__(self, name="auto"):
        if not isinstance(name, str):
            raise TypeError(f"backend name must be a str, got {type(name).__name__}")
        cdef ggml_backend_dev_t dev = _find_device(name)
        pyggml_guard_clear()
        with nogil:
            self.ptr = pyggml_dev_init(dev)
        if self.ptr == NULL:
            _rpc_check_device_init(dev, name)
            why = _guard_text()
            raise (AllocationError if pyggml_guard_was_oom() else GGMLError)(
                f"initialising backend {name!r} failed" + (f": {why}" if why else ""))
        self.name = (<bytes>ggml_backend_dev_name(dev)).decode().lower()
        self.device_type = _DEV_TYPES.get(<int>ggml_backend_dev_get_type(dev), "other")
        self.is_cpu = ggml_backend_is_cpu(self.ptr)
        self.pool = None
        self.kept = {}
        if self.is_cpu:
            ggml_backend_cpu_set_n_threads(self.ptr, 1)

    def __dealloc__(self):
        self._dealloc()

    cdef bint _alive(self):
        return self.ptr != NULL

    cdef void _release(self) noexcept:
        cdef _Pool pool = self.pool
        cdef dict kept = self.kept
        self.pool = None
        self.kept = {}
        if pool is not None:
            try:
                if pool.gen == _fork_gen and pool.ptr != NULL:
                    with pool._get_lock():
                        ggml_backend_cpu_set_threadpool(self.ptr, NULL)
            except BaseException:
                pass
        if kept:
            for p in kept.values():
                _pool_put(p)
        ggml_backend_free(self.ptr)
        self.ptr = NULL

    cdef void _forget(self) noexcept:
        self.ptr = NULL
        self.pool = None
        self.kept = {}

    cdef int _use_threads(self, int n) except -1:
        """Make the CPU backend compute with n threads on the process's shared
        pool of n threads (rebuilt after a fork, whose child has no pool
        threads).  Called with this backend's lock held."""
        if not self.is_cpu:
            return 0
        cdef _Pool old = self.pool
        if old is not None and old.n_threads == n and old.gen == _fork_gen and old.ptr != NULL:
            return 0
        cdef _Pool pool = self.kept.get(n)
        cdef _Pool stale = None
        cdef bint fresh = pool is None or pool.gen != _fork_gen or pool.ptr == NULL
        if fresh:
            stale = pool                 # a pool of the parent process (forked child), or none
            pool = _pool_get(n)
        try:
            if old is not None and old.gen == _fork_gen and old.ptr != NULL:
                # ggml pauses the pool the backend leaves: never under a running graph
                with old._get_lock():
                    ggml_backend_cpu_set_threadpool(self.ptr, pool.ptr)
            else:
                if old is not None or getpid() != self._pid:
                    # the parent's pool (forked child): its threads do not exist here
                    # and its mutex may be held; leave it untouched
                    ggml_backend_cpu_forget_threadpool(self.ptr)
                ggml_backend_cpu_set_threadpool(self.ptr, pool.ptr)
            ggml_backend_cpu_set_n_threads(self.ptr, n)
        except BaseException:
            if fresh:
                _pool_put(pool)
            raise
        if fresh:
            if stale is not None:
                _pool_put(stale)
            self.kept[n] = pool
        self.pool = pool
        return 0

    cdef object _pool_lock(self):
        """The lock of the pool this backend computes on (None: not a CPU backend)."""
        if self.pool is None:
            return None
        return self.pool._get_lock()

    @property
    def n_threads(self):
        return 0 if self.pool is None or self.pool.gen != _fork_gen else self.pool.n_threads

    def synchronize(self):
        self._check()
        with nogil:
            ggml_backend_synchronize(self.ptr)

    def supports_op(self, Tensor t):
        self._check()
        return bool(ggml_backend_supports_op(self.ptr, t._p()))

    def __repr__(self):
        if self.ptr == NULL:
            return "<pyggml.core.Backend (freed)>"
        return f"<pyggml.core.Backend {self.name}>"


cdef long _buffer_epoch = 0     # bumped whenever a BackendBuffer is made or freed


cdef inline void _bump_buffer_epoch() noexcept:
    global _buffer_epoch
    _buffer_epoch += 1


def pool_stats():
    """pyggml's pool of CPU memory for pooled buffers (``BackendBuffer(..., pooled=True)``,
    a GradientTape's): a dict of bytes ``held`` for reuse, ``in_use`` (lent to buffers now)
    and ``peak`` (most lent at once since the last ``pool_release``; the pool keeps no more
    than that)."""
    cdef size_t held = 0, in_use = 0, peak = 0
    pyggml_pool_stats(&held, &in_use, &peak)
    return {"held": int(held), "in_use": int(in_use), "peak": int(peak)}


def pool_release():
    """Give the memory the pool holds for reuse back to the system (what buffers use now stays
    theirs, and returns to the system when they are freed).  Returns the bytes released."""
    held = pool_stats()["held"]
    with nogil:
        pyggml_pool_release()
    return held


cdef class BackendBuffer(_Owner):
    """Device memory for every not yet allocated tensor of a Context:
    ``BackendBuffer(ctx, backend)``.  Freeing it detaches the tensors.

    ``pooled=True`` (a buffer made and freed again and again, as a GradientTape's each
    step): on the CPU, from 1 MiB, the memory comes from pyggml's pool and goes back to it
    when the buffer is freed, so the next such buffer skips the system's fresh pages (a
    page fault and a page of zeros per 4 KiB).  See ``pool_stats`` and ``pool_release``."""
    cdef ggml_backend_buffer_t ptr
    cdef object _ctx_ref         # weak: the Context holds its buffers, not the reverse
    cdef readonly Backend backend
    cdef void * _block           # the pool's block the tensors are in (NULL: the buffer's own memory)
    cdef size_t _block_size

    def __init__(self, Context ctx not None, Backend backend not None, *, bint pooled=False):
        ctx._check()
        backend._check()
        if not ctx.no_alloc:
            raise ValueError("the Context already holds its tensors' data (no_alloc=False)")
        cdef ggml_tensor * t = ggml_get_first_tensor(ctx.ptr)
        cdef bint any_unallocated = False
        while t != NULL:
            if t.data == NULL and t.view_src == NULL:
                any_unallocated = True
            t = ggml_get_next_tensor(ctx.ptr, t)
        if not any_unallocated:
            raise ValueError("the Context has no tensors without memory to allocate")
        pyggml_guard_clear()
        with nogil:
            if pooled:
                self.ptr = pyggml_pool_alloc_ctx_tensors(ctx.ptr, backend.ptr, &self._block, &self._block_size)
            else:
                self.ptr = pyggml_alloc_ctx_tensors(ctx.ptr, backend.ptr)
        if self.ptr == NULL:
            _rpc_check_backend(backend.ptr)
            why = _guard_text()
            raise AllocationError(f"could not allocate the Context's tensors on {backend.name}"
                                  + (f" ({why})" if why else ""))
        import weakref
        self._ctx_ref = weakref.ref(ctx)
        self.backend = backend
        ctx._buffers.append(self)
        _owners_changed()
        backend._add_dependent(self)
        _bump_buffer_epoch()
        if ctx._freed:
            # tensors whose earlier buffer was freed have memory again
            ctx._freed = {a for a in ctx._freed if (<ggml_tensor *><uintptr_t>a).data == NULL}

    def __dealloc__(self):
        self._dealloc()

    cdef bint _alive(self):
        return self.ptr != NULL

    @property
    def ctx(self):
        """The Context whose tensors this buffer holds (None once it is gone)."""
        return None if self._ctx_ref is None else self._ctx_ref()

    cdef void _release(self) noexcept:
        cdef ggml_tensor * t
        cdef Context ctx = None
        try:
            ctx = self.ctx
        except BaseException:
            pass
        if ctx is not None and ctx.ptr != NULL:
            t = ggml_get_first_tensor(ctx.ptr)
            while t != NULL:
                if t.buffer == self.ptr:
                    t.data = NULL
                    t.buffer = NULL
                    try:
                        # a graph that reads it must raise FreedError, not let a
                        # scheduler give it fresh (garbage) memory
                        ctx._freed.add(<uintptr_t>t)
                    except BaseException:
                        pass
                t = ggml_get_next_tensor(ctx.ptr, t)
        ggml_backend_buffer_free(self.ptr)
        self.ptr = NULL
        pyggml_pool_give(self._block, self._block_size)      # (nothing when not pooled)
        self._block = NULL
        _bump_buffer_epoch()

    cdef void _forget(self) noexcept:
        self.ptr = NULL
        self._block = NULL       # (its memory is no longer known to be unused: never lent again)

    @property
    def size(self):
        self._check()
        return int(ggml_backend_buffer_get_size(self.ptr))

    @property
    def name(self):
        self._check()
        return (<bytes>ggml_backend_buffer_name(self.ptr)).decode()

    @property
    def is_host(self):
        self._check()
        return bool(ggml_backend_buffer_is_host(self.ptr))

    def clear(self, int value=0):
        """Fill the whole buffer with one byte value."""
        self._check()
        if not 0 <= value <= 255:
            raise ValueError("value must be a byte (0..255)")
        with nogil:
            ggml_backend_buffer_clear(self.ptr, <unsigned char>value)
        _rpc_check_buffer(self.ptr)
