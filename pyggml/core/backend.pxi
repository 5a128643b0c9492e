# Backend, BackendBuffer, the device registry and CPU threads.

# --- CPU threads: one setting for every CPU compute ------------------------

cdef int _n_threads_user = 0          # 0: not set by the user (choose per graph)


def _default_threads():
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def set_n_threads(n):
    """Set the number of CPU threads for all compute (None or 0: automatic)."""
    global _n_threads_user
    if n is None:
        _n_threads_user = 0
        return
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"n_threads must be a positive int, got {n!r}")
    if n < 0 or n > 1024:
        raise ValueError(f"n_threads must be between 1 and 1024, got {n}")
    _n_threads_user = int(n)


def get_n_threads():
    """The CPU thread count in force (the automatic choice's maximum when unset)."""
    return _n_threads_user if _n_threads_user > 0 else _default_threads()


def n_threads_is_set():
    """True when the user chose a thread count with set_n_threads."""
    return _n_threads_user > 0


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
    cdef ggml_threadpool * tp
    cdef int tp_threads
    cdef int tp_pid
    cdef readonly str name
    cdef readonly str device_type
    cdef readonly bint is_cpu

    def __init__(self, name="auto"):
        if not isinstance(name, str):
            raise TypeError(f"backend name must be a str, got {type(name).__name__}")
        cdef ggml_backend_dev_t dev = _find_device(name)
        with nogil:
            self.ptr = ggml_backend_dev_init(dev, NULL)
        if self.ptr == NULL:
            _rpc_check_device_init(dev, name)
        _check_ptr(self.ptr, f"initialising backend {name!r}", GGMLError)
        self.name = (<bytes>ggml_backend_dev_name(dev)).decode().lower()
        self.device_type = _DEV_TYPES.get(<int>ggml_backend_dev_get_type(dev), "other")
        self.is_cpu = ggml_backend_is_cpu(self.ptr)
        self.tp = NULL
        self.tp_threads = 0
        if self.is_cpu:
            ggml_backend_cpu_set_n_threads(self.ptr, 1)

    def __dealloc__(self):
        self._dealloc()

    cdef bint _alive(self):
        return self.ptr != NULL

    cdef void _release(self) noexcept:
        if self.tp != NULL and self.tp_pid == getpid():
            ggml_backend_cpu_set_threadpool(self.ptr, NULL)
            ggml_threadpool_free(self.tp)
        self.tp = NULL
        ggml_backend_free(self.ptr)
        self.ptr = NULL

    cdef void _forget(self) noexcept:
        self.ptr = NULL
        self.tp = NULL

    cdef int _use_threads(self, int n) except -1:
        """Make the CPU backend compute with n threads on a persistent pool
        (rebuilt after a fork, whose child has no pool threads)."""
        if not self.is_cpu:
            return 0
        cdef int pid = getpid()
        if self.tp != NULL and self.tp_pid != pid:
            self.tp = NULL          # the parent's pool: its threads do not exist here
            self.tp_threads = 0
        if n == self.tp_threads and self.tp != NULL:
            return 0
        cdef ggml_threadpool_params params = ggml_threadpool_params_default(n)
        cdef ggml_threadpool * tp = ggml_threadpool_new(&params)
        _check_ptr(tp, "ggml_threadpool_new")
        ggml_backend_cpu_set_threadpool(self.ptr, tp)
        ggml_backend_cpu_set_n_threads(self.ptr, n)
        if self.tp != NULL:
            ggml_threadpool_free(self.tp)
        self.tp = tp
        self.tp_threads = n
        self.tp_pid = pid
        return 0

    @property
    def n_threads(self):
        return self.tp_threads

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


cdef class BackendBuffer(_Owner):
    """Device memory for every not yet allocated tensor of a Context:
    ``BackendBuffer(ctx, backend)``.  Freeing it detaches the tensors."""
    cdef ggml_backend_buffer_t ptr
    cdef object _ctx_ref         # weak: the Context holds its buffers, not the reverse
    cdef readonly Backend backend

    def __init__(self, Context ctx not None, Backend backend not None):
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
        with nogil:
            self.ptr = ggml_backend_alloc_ctx_tensors(ctx.ptr, backend.ptr)
        if self.ptr == NULL:
            _rpc_check_backend(backend.ptr)
            raise AllocationError(f"could not allocate the Context's tensors on {backend.name}")
        import weakref
        self._ctx_ref = weakref.ref(ctx)
        self.backend = backend
        ctx._buffers.append(self)
        backend._add_dependent(self)

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
                t = ggml_get_next_tensor(ctx.ptr, t)
        ggml_backend_buffer_free(self.ptr)
        self.ptr = NULL

    cdef void _forget(self) noexcept:
        self.ptr = NULL

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
