# GGUFFile: reading and writing GGUF files (key/values and tensors).

_GGUF_SCALAR_NP = {
    <int>GGUF_TYPE_UINT8: np.uint8, <int>GGUF_TYPE_INT8: np.int8, <int>GGUF_TYPE_UINT16: np.uint16,
    <int>GGUF_TYPE_INT16: np.int16, <int>GGUF_TYPE_UINT32: np.uint32, <int>GGUF_TYPE_INT32: np.int32,
    <int>GGUF_TYPE_FLOAT32: np.float32, <int>GGUF_TYPE_UINT64: np.uint64, <int>GGUF_TYPE_INT64: np.int64,
    <int>GGUF_TYPE_FLOAT64: np.float64, <int>GGUF_TYPE_BOOL: np.bool_,
}
_GGUF_TENSOR_NP = {<int>GGML_TYPE_F32: np.float32, <int>GGML_TYPE_F16: np.float16, <int>GGML_TYPE_I32: np.int32,
                   <int>GGML_TYPE_I8: np.int8}
_NP_TO_GGML = {np.dtype(np.float32): GGML_TYPE_F32, np.dtype(np.float16): GGML_TYPE_F16,
               np.dtype(np.int32): GGML_TYPE_I32, np.dtype(np.int8): GGML_TYPE_I8}


cdef class GGUFFile(_Owner):
    """A GGUF file.  ``GGUFFile.read(path)`` opens one (metadata only; tensor
    data is read on demand, bounds-checked against the file); ``GGUFFile()``
    starts an empty one to fill with ``set`` and ``add_tensor`` and ``write``.
    Malformed files raise GGUFError, never crash."""
    cdef gguf_context * ptr
    cdef readonly object path
    cdef dict _new_kv          # key -> (value, kind) for files being written
    cdef dict _new_tensors     # name -> array
    cdef size_t _file_size

    def __init__(self):
        self.ptr = pyggml_gguf_init_empty()
        _check_ptr(self.ptr, "gguf_init_empty")
        self.path = None
        self._new_kv = {}
        self._new_tensors = {}

    @staticmethod
    def read(path):
        """Open a GGUF file for reading."""
        p = os.fspath(path)
        if not isinstance(p, str):
            p = os.fsdecode(p)
        if not os.path.isfile(p):
            raise FileNotFoundError(f"no such file: {p!r}")
        cdef GGUFFile f = GGUFFile.__new__(GGUFFile)
        cdef gguf_init_params params
        params.no_alloc = True
        params.ctx = NULL
        b = os.fsencode(p)
        cdef const char * cp = b
        pyggml_guard_clear()
        with nogil:
            f.ptr = pyggml_gguf_init_from_file(cp, params)
        if f.ptr == NULL:
            if pyggml_guard_was_oom():
                raise AllocationError(f"out of memory reading {p!r}")
            raise GGUFError(f"{p!r} is not a valid GGUF file (or is truncated or corrupted)")
        f.path = p
        f._new_kv = {}
        f._new_tensors = {}
        f._file_size = os.path.getsize(p)
        return f

    def __dealloc__(self):
        self._dealloc()

    cdef bint _alive(self):
        return self.ptr != NULL

    cdef void _release(self) noexcept:
        gguf_free(self.ptr)
        self.ptr = NULL

    cdef void _forget(self) noexcept:
        self.ptr = NULL

    # --- key/values -----------------------------------------------------------
    @property
    def version(self):
        self._check()
        return int(gguf_get_version(self.ptr))

    @property
    def alignment(self):
        self._check()
        return int(gguf_get_alignment(self.ptr))

    def keys(self):
        self._check()
        return [(<bytes>gguf_get_key(self.ptr, i)).decode("utf-8", "surrogateescape")
                for i in range(gguf_get_n_kv(self.ptr))]

    def __contains__(self, key):
        self._check()
        if not isinstance(key, str):
            return False
        return gguf_find_key(self.ptr, key.encode("utf-8", "surrogateescape")) >= 0

    def __len__(self):
        self._check()
        return int(gguf_get_n_kv(self.ptr))

    def __getitem__(self, key):
        return self.get(key, _missing=True)

    def get(self, key, default=None, _missing=False):
        """The value of a key: int, float, bool, str, or a list / numpy array for arrays."""
        self._check()
        if not isinstance(key, str):
            raise TypeError("GGUF keys are str")
        cdef int64_t kid = gguf_find_key(self.ptr, key.encode("utf-8", "surrogateescape"))
        if kid < 0:
            if _missing:
                raise KeyError(key)
            return default
        cdef gguf_type t = gguf_get_kv_type(self.ptr, kid)
        cdef gguf_type at
        cdef size_t n, i
        if t == GGUF_TYPE_STRING:
            return (<bytes>gguf_get_val_str(self.ptr, kid)).decode("utf-8", "replace")
        if t == GGUF_TYPE_ARRAY:
            at = gguf_get_arr_type(self.ptr, kid)
            n = gguf_get_arr_n(self.ptr, kid)
            if at == GGUF_TYPE_STRING:
                return [(<bytes>gguf_get_arr_str(self.ptr, kid, i)).decode("utf-8", "replace") for i in range(n)]
            if <int>at not in _GGUF_SCALAR_NP:
                raise GGUFError(f"key {key!r} holds an array of an unsupported type")
            dt = np.dtype(_GGUF_SCALAR_NP[<int>at])
            if n == 0:
                return np.empty(0, dtype=dt)
            buf = (<const char *>gguf_get_arr_data(self.ptr, kid))[:n * dt.itemsize]
            return np.frombuffer(buf, dtype=dt).copy()
        if <int>t not in _GGUF_SCALAR_NP:
            raise GGUFError(f"key {key!r} has an unsupported type")
        dt = np.dtype(_GGUF_SCALAR_NP[<int>t])
        buf = (<const char *>gguf_get_val_data(self.ptr, kid))[:dt.itemsize]
        v = np.frombuffer(buf, dtype=dt)[0]
        return v.item()

    def set(self, key, value, kind=None):
        """Set a key (files being written): str, bool, int (int64 unless
        kind='u32'/'i32'), float (f32 unless kind='f64'), or a list of str or
        numbers (numbers: f32 unless a numpy array of another dtype).
        ``general.alignment`` takes a power of two from 1 to 65536 (stored as u32)."""
        self._check()
        if self.path is not None:
            raise GGUFError("this GGUFFile was opened for reading; write a new GGUFFile()")
        if not isinstance(key, str) or not key:
            raise TypeError("GGUF keys are non-empty str")
        if "\0" in key:
            raise ValueError(f"GGUF keys cannot hold a NUL character: {key!r}")
        if kind not in (None, "u32", "i32", "f64"):
            raise ValueError(f"kind must be None, 'u32', 'i32' or 'f64', got {kind!r}")
        kb = key.encode()
        cdef cnp.ndarray arr
        cdef const char ** strs
        cdef int rc = 0
        if key == "general.alignment":
            # ggml aborts on any other type or on a value that is not a power of two
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
                raise TypeError(f"general.alignment must be an int (a power of two), got {value!r}")
            if kind not in (None, "u32"):
                raise ValueError("general.alignment is stored as u32")
            v = int(value)
            if not 1 <= v <= 65536 or v & (v - 1):
                raise ValueError(f"general.alignment must be a power of two from 1 to 65536, got {v}")
            rc = pyggml_gguf_set_val_u32(self.ptr, kb, <unsigned int>v)
        elif isinstance(value, str):
            if "\0" in value:
                raise ValueError(f"{key}: GGUF strings cannot hold a NUL character")
            rc = pyggml_gguf_set_val_str(self.ptr, kb, value.encode())
        elif isinstance(value, (bool, np.bool_)):
            rc = pyggml_gguf_set_val_bool(self.ptr, kb, bool(value))
        elif isinstance(value, (int, np.integer)):
            if kind == "u32":
                if not 0 <= value < 2**32:
                    raise ValueError(f"{key}: {value} does not fit u32")
                rc = pyggml_gguf_set_val_u32(self.ptr, kb, <unsigned int>value)
            elif kind == "i32":
                if not -2**31 <= value < 2**31:
                    raise ValueError(f"{key}: {value} does not fit i32")
                rc = pyggml_gguf_set_val_i32(self.ptr, kb, <int>value)
            else:
                if not -2**63 <= value < 2**63:
                    raise ValueError(f"{key}: {value} does not fit i64")
                rc = pyggml_gguf_set_val_i64(self.ptr, kb, <int64_t>value)
        elif isinstance(value, (float, np.floating)):
            if kind == "f64":
                rc = pyggml_gguf_set_val_f64(self.ptr, kb, float(value))
            else:
                rc = pyggml_gguf_set_val_f32(self.ptr, kb, float(value))
        elif isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value) and len(value) > 0:
            if any("\0" in v for v in value):
                raise ValueError(f"{key}: GGUF strings cannot hold a NUL character")
            encoded = [v.encode() for v in value]
            strs = <const char **>malloc(len(encoded) * sizeof(char *))
            if strs == NULL:
                raise MemoryError()
            try:
                for i, e in enumerate(encoded):
                    strs[i] = e
                rc = pyggml_gguf_set_arr_str(self.ptr, kb, strs, len(encoded))
            finally:
                c_free(strs)
        elif isinstance(value, (list, tuple, np.ndarray)):
            a = np.asarray(value)
            if a.ndim != 1:
                raise ValueError(f"{key}: arrays must be one-dimensional")
            if a.dtype.kind == "f" and not isinstance(value, np.ndarray):
                a = a.astype(np.float32)
            elif a.dtype.kind in "iu" and not isinstance(value, np.ndarray):
                a = a.astype(np.int64)
            gt = None
            for k, dt in _GGUF_SCALAR_NP.items():
                if np.dtype(dt) == a.dtype:
                    gt = k
            if gt is None:
                raise TypeError(f"{key}: unsupported array dtype {a.dtype}")
            arr = np.ascontiguousarray(a)
            rc = pyggml_gguf_set_arr_data(self.ptr, kb, <gguf_type><int>gt, cnp.PyArray_DATA(arr), len(arr))
        else:
            raise TypeError(f"{key}: unsupported value type {type(value).__name__}")
        if rc != 0:
            raise AllocationError(f"could not set {key!r}: {_guard_text()}")

    # --- tensors --------------------------------------------------------------
    def tensor_names(self):
        self._check()
        return [(<bytes>gguf_get_tensor_name(self.ptr, i)).decode("utf-8", "surrogateescape")
                for i in range(gguf_get_n_tensors(self.ptr))]

    cdef int64_t _tensor_id(self, name) except -2:
        self._check()
        if not isinstance(name, str):
            raise TypeError("tensor names are str")
        cdef int64_t tid = gguf_find_tensor(self.ptr, name.encode("utf-8", "surrogateescape"))
        if tid < 0:
            raise KeyError(f"no tensor named {name!r}")
        return tid

    def tensor_info(self, name):
        """(shape in numpy order, dtype name, offset in the data section, nbytes)."""
        cdef int64_t tid = self._tensor_id(name)
        cdef const int64_t * ne = gguf_get_tensor_ne(self.ptr, tid)
        # as many dimensions as the file holds (a (1, 8) weight stays (1, 8): patch 0015)
        nd = <int>gguf_get_tensor_n_dims(self.ptr, tid)
        shape = tuple(int(ne[i]) for i in range(nd - 1, -1, -1))
        cdef ggml_type t = gguf_get_tensor_type(self.ptr, tid)
        return (shape, (<bytes>ggml_type_name(t)).decode(), int(gguf_get_tensor_offset(self.ptr, tid)),
                int(gguf_get_tensor_size(self.ptr, tid)))

    def read_tensor(self, name):
        """The tensor's data as a numpy array (f32, f16, i32 or i8), read from the file."""
        if self.path is None:
            if name in self._new_tensors:
                return self._new_tensors[name].copy()
            raise KeyError(f"no tensor named {name!r}")
        cdef int64_t tid = self._tensor_id(name)
        shape, tname, offset, nbytes = self.tensor_info(name)
        cdef ggml_type t = gguf_get_tensor_type(self.ptr, tid)
        if <int>t not in _GGUF_TENSOR_NP:
            raise GGUFError(f"tensor {name!r} has type {tname}; pyggml reads f32, f16, i32 and i8")
        dt = np.dtype(_GGUF_TENSOR_NP[<int>t])
        count = 1
        for d in shape:
            count *= d
        start = int(gguf_get_data_offset(self.ptr)) + offset
        if count * dt.itemsize != nbytes or start + nbytes > self._file_size:
            raise GGUFError(f"tensor {name!r} lies outside the file (truncated or corrupted)")
        with open(self.path, "rb") as fh:
            fh.seek(start)
            data = fh.read(nbytes)
        if len(data) != nbytes:
            raise GGUFError(f"tensor {name!r} is truncated")
        return np.frombuffer(data, dtype=dt).reshape(shape).copy()

    def add_tensor(self, name, array):
        """Add a tensor (f32, f16, i32 or i8 array; other real dtypes become f32)."""
        self._check()
        if self.path is not None:
            raise GGUFError("this GGUFFile was opened for reading; write a new GGUFFile()")
        if not isinstance(name, str) or not name or len(name.encode()) >= 64:
            raise ValueError(f"tensor names are non-empty str of at most 63 bytes, got {name!r}")
        if "\0" in name:
            # ggml's names end at the NUL: two such names could become one (ggml aborts)
            raise ValueError(f"tensor names cannot hold a NUL character: {name!r}")
        if name in self._new_tensors:
            raise ValueError(f"duplicate tensor name {name!r}")
        a = np.asarray(array)
        if a.dtype.kind not in "biuf":
            raise TypeError(f"tensor {name!r}: expected real numbers, got {a.dtype}")
        if a.dtype not in _NP_TO_GGML:
            a = a.astype(np.float32)
        if a.ndim == 0:
            a = a.reshape(1)
        if a.ndim > 4:
            raise ValueError(f"tensor {name!r}: at most 4 dimensions")
        if a.size == 0:
            raise ValueError(f"tensor {name!r} is empty")
        self._new_tensors[name] = np.ascontiguousarray(a)

    def write(self, path):
        """Write the file atomically and durably: into a temporary file beside
        the destination (through symlinks: the link's target is replaced, the
        link stays), every write checked, fsync'd, renamed over the old file,
        and the folder fsync'd.  The old file keeps its mode (a new one gets
        0666 less the umask).  Anything that is not a regular file (a folder,
        FIFO, device) is refused and left alone.  On any failure the temporary
        file is removed, the old file is untouched, and the error is raised."""
        self._check()
        if self.path is not None:
            raise GGUFError("this GGUFFile was opened for reading; write a new GGUFFile()")
        p = os.fspath(path)
        if not isinstance(p, str):
            p = os.fsdecode(p)
        if not p:
            raise FileNotFoundError("empty path")
        meta = self._meta()
        _atomic_write(p, meta, self._new_tensors.values(), self.alignment_for_write())

    cdef size_t alignment_for_write(self):
        v = self.get("general.alignment")
        return 32 if v is None else int(v)

    cdef bytes _meta(self):
        """The file's metadata (header, key/values, tensor infos, padding) as ggml lays it out."""
        cdef Context ctx = Context(n_tensors=len(self._new_tensors) + 1, no_alloc=True)
        cdef Tensor t
        cdef cnp.ndarray a
        cdef gguf_context * out = pyggml_gguf_init_empty()
        _check_ptr(out, "gguf_init_empty")
        cdef size_t n
        cdef bytearray buf
        cdef int64_t ne[4]
        cdef int nd
        cdef ggml_tensor * p
        try:
            # key/values first (copied: the alignment sets the tensors' offsets), then tensors
            if pyggml_gguf_set_kv(out, self.ptr) != 0:
                raise AllocationError(f"could not copy the key/values: {_guard_text()}")
            for name, arr in self._new_tensors.items():
                a = arr
                if a.dtype == np.int8:
                    # (int8 is a file type only here, for quantized weights: no op takes it, so the
                    # tensor API does not make it)
                    nd = _parse_shape(tuple(arr.shape), ne)
                    p = ggml_new_tensor(ctx.ptr, GGML_TYPE_I8, nd, ne)
                    _check_ptr(p, "ggml_new_tensor")
                    t = Tensor._wrap(ctx, p, nd)
                    t.name = name
                else:
                    t = ctx.new_tensor(tuple(arr.shape), dtype=_TYPE_TO_NAME[<int>_NP_TO_GGML[a.dtype]], name=name)
                if pyggml_gguf_add_tensor(out, t.ptr) != 0:
                    raise AllocationError(f"could not add tensor {name!r}: {_guard_text()}")
                # every dimension written, leading sizes of 1 too (ggml's writer drops them: a
                # Dense(1)'s (1, 8) weight would read back as (8,) in every GGUF reader)
                gguf_set_tensor_n_dims(out, name.encode(), <unsigned int>max(a.ndim, 1))
            pyggml_guard_clear()
            n = pyggml_gguf_get_meta_size(out)
            if n == 0:
                raise AllocationError(f"could not lay out the file: {_guard_text()}")
            buf = bytearray(n)
            if pyggml_gguf_get_meta_data(out, <char *>buf) != 0:
                raise AllocationError(f"could not lay out the file: {_guard_text()}")
            return bytes(buf)
        finally:
            gguf_free(out)
            ctx.free()


# --- atomic, durable file writes ---------------------------------------------

def _write_all(int fd, data):
    """os.write until every byte is written (a short write is retried; an error raises)."""
    mv = memoryview(data).cast("B")
    cdef Py_ssize_t done = 0, total = len(mv)
    while done < total:
        n = os.write(fd, mv[done:done + (1 << 30)])
        if n <= 0:
            raise OSError(f"write returned {n}")
        done += n


def _atomic_write(str p, bytes meta, arrays, size_t alignment):
    import errno, stat
    real = os.path.realpath(p)      # through symlinks: the target is what gets replaced
    d = os.path.dirname(real) or "."
    if not os.path.isdir(d):
        raise FileNotFoundError(f"no such folder: {os.path.dirname(os.path.abspath(p))!r}")
    try:
        st = os.stat(real)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        kind = ("a folder" if stat.S_ISDIR(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode)
                else "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)
                else "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file")
        cls = IsADirectoryError if stat.S_ISDIR(st.st_mode) else FileExistsError
        raise cls(errno.EISDIR if cls is IsADirectoryError else errno.EEXIST,
                  f"{p!r} is {kind}; pyggml writes only regular files, and left it as it was", p)
    pyggml_ignore_sigxfsz()        # a file-size limit must fail the write, not kill the process
    base = os.path.basename(real)
    fd = -1
    tmp = None
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = os.path.join(d, f".{base[:200]}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
        try:
            fd = os.open(tmp, flags, 0o666)     # 0666 less the umask, as open() would make it
            break
        except FileExistsError:
            continue
    else:
        raise FileExistsError(f"could not create a temporary file in {d!r}")
    try:
        if st is not None:
            # keep the old file's mode (and owner, where allowed)
            os.fchmod(fd, stat.S_IMODE(st.st_mode))
            if hasattr(os, "fchown") and (st.st_uid != os.geteuid() or st.st_gid != os.getegid()):
                try:
                    os.fchown(fd, st.st_uid, st.st_gid)
                except OSError:
                    pass
        _write_all(fd, meta)
        zeros = bytes(alignment)
        for arr in arrays:
            _write_all(fd, arr)
            pad = (-arr.nbytes) % alignment
            if pad:
                _write_all(fd, zeros[:pad])
        os.fsync(fd)
        c = fd
        fd = -1
        os.close(c)                 # raises on a deferred write error
        os.replace(tmp, real)
        tmp = None
    finally:
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
    # the rename itself is durable once the folder is
    try:
        dfd = os.open(d, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError as e:
        if e.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise
    finally:
        os.close(dfd)


cdef extern from "gguf.h" nogil:
    void gguf_set_kv_copy "gguf_set_kv"(gguf_context * ctx, const gguf_context * src)
