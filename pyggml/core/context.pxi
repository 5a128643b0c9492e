# Context and Tensor: ggml's memory pool for tensor metadata, and views on it.

_DTYPE_NAMES = {"f32": GGML_TYPE_F32, "float32": GGML_TYPE_F32,
                "f16": GGML_TYPE_F16, "float16": GGML_TYPE_F16,
                "i32": GGML_TYPE_I32, "int32": GGML_TYPE_I32}
_SHORT_NAMES = {"float32": "f32", "float16": "f16", "int32": "i32"}


class DTypeName(str):
    """A tensor's dtype: Keras's name ("float32", "float16", "int32"), as a layer's call
    passes it on (``keras.random.uniform(shape, dtype=x.dtype)``, ``np.dtype(x.dtype)``),
    which also equals ggml's short name ("f32", "f16", "i32"), the name pyggml's tensors
    gave before.  It pickles as a plain string."""

    def __eq__(self, other):
        if isinstance(other, str):
            return str.__eq__(self, other) or _SHORT_NAMES.get(str(self)) == str(other)
        return NotImplemented

    def __ne__(self, other):
        same = self.__eq__(other)
        return same if same is NotImplemented else not same

    __hash__ = str.__hash__

    def __reduce__(self):
        return (str, (str(self),))


_TYPE_TO_NAME = {<int>GGML_TYPE_F32: DTypeName("float32"), <int>GGML_TYPE_F16: DTypeName("float16"),
                 <int>GGML_TYPE_I32: DTypeName("int32")}
_TYPE_TO_NP = {<int>GGML_TYPE_F32: np.float32, <int>GGML_TYPE_F16: np.float16, <int>GGML_TYPE_I32: np.int32}

# the largest tensor pyggml will create: 2**40 elements is far past any
# machine's memory but well inside ggml's int64 arithmetic
cdef int64_t _MAX_ELEMENTS = (<int64_t>1) << 40
cdef size_t _TENSOR_SLACK = 4     # tensor headers reserved per op beyond its result


cdef ggml_type _parse_dtype(object dtype) except *:
    if isinstance(dtype, str):
        key = dtype.lower()
    else:
        try:
            key = np.dtype(dtype).name
        except TypeError:
            raise TypeError(f"dtype must be one of 'f32', 'f16', 'i32', got {dtype!r}") from None
    if key not in _DTYPE_NAMES:
        raise TypeError(f"dtype must be one of 'f32', 'f16', 'i32', got {dtype!r}")
    return <ggml_type>_DTYPE_NAMES[key]


cdef int _parse_shape(object shape, int64_t * ne) except -1:
    """numpy-order shape -> ggml ne (reversed), validated. Returns the rank."""
    if isinstance(shape, (int, np.integer)):
        shape = (int(shape),)
    try:
        dims = tuple(shape)
    except TypeError:
        raise TypeError(f"shape must be an int or a sequence of ints, got {shape!r}") from None
    if not 1 <= len(dims) <= 4:
        raise ValueError(f"shape must have 1 to 4 dimensions, got {len(dims)}")
    cdef int64_t total = 1
    cdef int i
    for i in range(4):
        ne[i] = 1
    for i, d in enumerate(reversed(dims)):
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)):
            raise TypeError(f"shape entries must be ints, got {d!r}")
        if d < 1:
            raise ValueError(f"shape entries must be positive, got {tuple(dims)}")
        if d > _MAX_ELEMENTS:
            raise ValueError(f"shape {tuple(dims)} is too large")
        ne[i] = d
        total *= d
        if total > _MAX_ELEMENTS:
            raise ValueError(f"shape {tuple(dims)} has more than 2**40 elements")
    return len(dims)


# The context that operations go to when no ctx= is given and one is active
# (``with ctx.as_default(): ...``), per thread; else the first operand's.
_default_ctx = threading.local()


cdef inline object _active_context():
    stack = getattr(_default_ctx, "stack", None)
    return stack[len(stack) - 1] if stack else None      # (the core compiles without wraparound)


class _DefaultContext:
    """``with ctx.as_default():`` makes ctx where new operations go."""
    __slots__ = ("ctx",)

    def __init__(self, ctx):
        self.ctx = ctx

    def __enter__(self):
        stack = getattr(_default_ctx, "stack", None)
        if stack is None:
            stack = _default_ctx.stack = []
        stack.append(self.ctx)
        return self.ctx

    def __exit__(self, *exc):
        stack = _default_ctx.stack
        if stack and stack[len(stack) - 1] is self.ctx:
            stack.pop()
        return False


cdef class Context(_Owner):
    """A ggml context: the memory pool that holds tensor and graph metadata
    (and, with ``no_alloc=False``, tensor data in host memory).

    ``Context(n_tensors=256, graph_size=0, no_alloc=True, mem_size=0)`` sizes
    the pool for that many tensors plus one graph of ``graph_size`` nodes;
    ``mem_size`` adds bytes (data, when ``no_alloc`` is False).
    """
    cdef ggml_context * ptr
    cdef readonly bint no_alloc
    cdef object _buffers
    cdef list _dependents_of     # contexts whose tensors this one's tensors use
    cdef set _freed              # addresses of tensors whose BackendBuffer was freed
    # ``value_source(tensor)``, or None: called by Tensor.numpy() on a tensor of this context
    # that has no memory yet, to compute it (a GradientTape's lazily computed tensors)
    cdef public object value_source

    def __init__(self, n_tensors=256, graph_size=0, no_alloc=True, mem_size=0):
        for nm, v in (("n_tensors", n_tensors), ("graph_size", graph_size), ("mem_size", mem_size)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                raise TypeError(f"{nm} must be an int, got {v!r}")
            if v < 0:
                raise ValueError(f"{nm} must be >= 0, got {v}")
        if n_tensors > (1 << 24) or graph_size > (1 << 24) or mem_size > (1 << 40):
            raise ValueError("Context is too large (n_tensors and graph_size <= 2**24, mem_size <= 2**40)")
        cdef size_t size = <size_t>n_tensors * ggml_tensor_overhead() + <size_t>mem_size
        if graph_size:
            size += 3 * ggml_graph_overhead_custom(<size_t>graph_size, True)
        size += 1024
        cdef ggml_init_params params
        params.mem_size = size
        params.mem_buffer = NULL
        params.no_alloc = bool(no_alloc)
        with nogil:
            self.ptr = ggml_init(params)     # NULL when the memory cannot be had (ggml/patches/0011)
        if self.ptr == NULL:
            raise AllocationError(f"could not allocate a Context of {size} bytes "
                                  f"({'metadata only' if no_alloc else 'with tensor data'})")
        self.no_alloc = bool(no_alloc)
        self._buffers = []
        self._dependents_of = []
        self._freed = set()

    def __dealloc__(self):
        self._dealloc()

    cdef bint _alive(self):
        return self.ptr != NULL

    cdef void _release(self) noexcept:
        ggml_free(self.ptr)
        self.ptr = NULL

    cdef void _forget(self) noexcept:
        self.ptr = NULL

    def free(self):
        """Free the context (and the buffers allocated for its tensors).  Safe
        from any thread: waits for a compute that uses it to end."""
        if self.ptr == NULL:
            return
        if getpid() != self._pid:
            self.ptr = NULL
            return
        self._free_dependents()
        # each buffer under its own lock, before this context's lock is taken
        for b in list(self._buffers):
            b.free()
        self._buffers = []
        self._free_under_lock()

    cdef int _reserve(self, size_t n_tensors, size_t data_bytes) except -1:
        """Raise unless the pool has room for this many tensors (and data)."""
        self._check()
        cdef size_t need = n_tensors * ggml_tensor_overhead()
        if not ggml_get_no_alloc(self.ptr):
            need += data_bytes + 64 * n_tensors
        cdef size_t used = ggml_used_mem(self.ptr)
        cdef size_t size = ggml_get_mem_size(self.ptr)
        if used + need > size:
            raise ContextFullError(
                f"Context is full: {size - used} bytes free, {need} needed; "
                f"create it with a larger n_tensors/mem_size")
        return 0

    @property
    def mem_size(self):
        self._check()
        return ggml_get_mem_size(self.ptr)

    @property
    def mem_used(self):
        self._check()
        return ggml_used_mem(self.ptr)

    def new_tensor(self, shape, dtype="f32", name=None):
        """A new tensor of ``shape`` (numpy order) and ``dtype`` ('f32', 'f16', 'i32')."""
        self._check()
        cdef int64_t ne[4]
        cdef int nd = _parse_shape(shape, ne)
        cdef ggml_type t = _parse_dtype(dtype)
        cdef int64_t n = ne[0] * ne[1] * ne[2] * ne[3]
        self._reserve(1, <size_t>n * ggml_type_size(t))
        cdef ggml_tensor * p = ggml_new_tensor(self.ptr, t, nd, ne)
        _check_ptr(p, "ggml_new_tensor")
        tensor = Tensor._wrap(self, p, nd)
        if name is not None:
            tensor.name = name
        return tensor

    def as_default(self):
        """A context manager: operations called without ``ctx=`` inside the
        ``with`` block (and Tensor arithmetic) put their results here."""
        self._check()
        return _DefaultContext(self)

    def tensors(self):
        """All tensors of this context, in creation order."""
        self._check()
        out = []
        cdef ggml_tensor * p = ggml_get_first_tensor(self.ptr)
        while p != NULL:
            out.append(Tensor._wrap(self, p, 0))
            p = ggml_get_next_tensor(self.ptr, p)
        return out

    def __repr__(self):
        if self.ptr == NULL:
            return "<pyggml.core.Context (freed)>"
        return f"<pyggml.core.Context {ggml_used_mem(self.ptr)}/{ggml_get_mem_size(self.ptr)} bytes>"


def _string_operand(Tensor t, other):
    """A string met by a tensor that stands for an input of strings, while a graph is built."""
    if not isinstance(other, (str, bytes)) and not (isinstance(other, np.ndarray) and other.dtype.kind in "US"):
        return False
    from pyggml import _scope
    return _scope.current() is not None and _scope.holds_strings(t)


def _elementwise_operand(other):
    """A number or a numeric array, met by a tensor while a graph is built: == compares values."""
    if isinstance(other, bool) or other is None:
        return False
    if not isinstance(other, (int, float, np.number, np.ndarray)):
        return False
    if isinstance(other, np.ndarray) and other.dtype.kind not in "biuf":
        return False
    from pyggml import _scope
    return _scope.current() is not None


cdef class Tensor:
    """A view on one ggml tensor. It keeps its Context alive; once the context
    is freed every method raises FreedError.  Shapes are in numpy order
    (ggml's ``ne`` reversed)."""
    cdef ggml_tensor * ptr
    cdef readonly Context ctx
    cdef int _ndim
    cdef object __weakref__

    def __init__(self):
        raise TypeError("Tensors are made by Context.new_tensor or by pyggml.ops")

    @staticmethod
    cdef Tensor _wrap(Context ctx, ggml_tensor * p, int ndim):
        cdef Tensor t = Tensor.__new__(Tensor)
        t.ptr = p
        t.ctx = ctx
        t._ndim = ndim
        return t

    cdef int _check(self) except -1:
        if self.ctx is None or self.ctx.ptr == NULL:
            raise FreedError("Tensor has been freed (its Context was freed)")
        return 0

    cdef inline ggml_tensor * _p(self) except NULL:
        self._check()
        return self.ptr

    @property
    def closed(self):
        return self.ctx is None or self.ctx.ptr == NULL

    @property
    def ndim(self):
        self._check()
        cdef int n = ggml_n_dims(self.ptr)
        return max(n, self._ndim)

    @property
    def shape(self):
        """numpy-order shape."""
        cdef ggml_tensor * p = self._p()
        cdef int n = max(ggml_n_dims(p), self._ndim)
        return tuple(int(p.ne[i]) for i in range(n - 1, -1, -1))

    @property
    def ne(self):
        """ggml-order extents, all four."""
        cdef ggml_tensor * p = self._p()
        return tuple(int(p.ne[i]) for i in range(4))

    @property
    def nb(self):
        cdef ggml_tensor * p = self._p()
        return tuple(int(p.nb[i]) for i in range(4))

    @property
    def dtype(self):
        cdef ggml_tensor * p = self._p()
        return _TYPE_TO_NAME.get(<int>p.type, (<bytes>ggml_type_name(p.type)).decode())

    @property
    def nelements(self):
        return int(ggml_nelements(self._p()))

    @property
    def nbytes(self):
        return int(ggml_nbytes(self._p()))

    @property
    def op(self):
        """The operation that makes this tensor ('NONE' for a leaf)."""
        return (<bytes>ggml_op_desc(self._p())).decode()

    @property
    def is_contiguous(self):
        return bool(ggml_is_contiguous(self._p()))

    @property
    def is_allocated(self):
        """True when the tensor has memory (host or device)."""
        return self._p().data != NULL

    @property
    def name(self):
        return (<bytes>ggml_get_name(self._p())).decode("utf-8", "replace")

    @name.setter
    def name(self, value):
        if not isinstance(value, str):
            raise TypeError(f"name must be a str, got {type(value).__name__}")
        b = value.encode()
        if len(b) >= 64:
            raise ValueError(f"name is longer than 63 bytes: {value!r}")
        ggml_set_name(self._p(), b)

    @property
    def flags(self):
        """Set of 'input', 'output', 'param', 'loss'."""
        cdef int32_t f = self._p().flags
        return {n for n, bit in (("input", GGML_TENSOR_FLAG_INPUT), ("output", GGML_TENSOR_FLAG_OUTPUT),
                                 ("param", GGML_TENSOR_FLAG_PARAM), ("loss", GGML_TENSOR_FLAG_LOSS))
                if f & bit}

    def set_input(self):
        """Mark as a graph input (leaf tensors only)."""
        cdef ggml_tensor * p = self._p()
        if p.op != GGML_OP_NONE:
            raise ValueError("only leaf tensors (not results of operations) can be inputs")
        ggml_set_input(p)
        return self

    def set_output(self):
        ggml_set_output(self._p())
        return self

    def set_param(self, flag=True):
        """Mark as a trainable parameter (f32 leaf tensors only); ``flag=False``
        clears the mark (graphs built afterwards compute no gradient for it)."""
        cdef ggml_tensor * p = self._p()
        if p.op != GGML_OP_NONE:
            raise ValueError("only leaf tensors (not results of operations) can be parameters")
        if p.type != GGML_TYPE_F32:
            raise TypeError("parameters must be f32")
        if flag:
            ggml_set_param(p)
        else:
            p.flags = p.flags & ~GGML_TENSOR_FLAG_PARAM
        return self

    def mark_source(self, flag=True):
        """Mark any f32 tensor, a result of operations too, as a source of the next
        backward pass built (``flag=False`` clears the mark): its gradient is computed,
        and only what depends on it gets one (a gradient with respect to a recorded
        result, which another pass differentiates again)."""
        cdef ggml_tensor * p = self._p()
        if p.type != GGML_TYPE_F32:
            raise TypeError("a gradient's source must be f32")
        if flag:
            p.flags = p.flags | GGML_TENSOR_FLAG_PARAM
        else:
            p.flags = p.flags & ~GGML_TENSOR_FLAG_PARAM
        return self

    def set_loss(self, flag=True):
        """Mark as the loss to minimise (a scalar f32 tensor); ``flag=False`` clears the
        mark (a graph built afterwards does not start a backward pass from it)."""
        cdef ggml_tensor * p = self._p()
        if not flag:
            p.flags = p.flags & ~GGML_TENSOR_FLAG_LOSS
            return self
        if ggml_nelements(p) != 1 or p.type != GGML_TYPE_F32:
            raise ValueError("a loss must be a scalar f32 tensor")
        ggml_set_loss(p)
        return self

    def numpy(self):
        """A copy of the data as a numpy array (numpy-order shape)."""
        cdef ggml_tensor * p = self._p()
        if self.ctx.value_source is not None and not self.ctx.value_source.computed(self):
            # a tensor recorded by a GradientTape: its context computes it now
            self.ctx.value_source.compute(self)
            p = self._p()
        if p.data == NULL or (p.view_src != NULL and p.view_src.data == NULL):
            from pyggml import _scope
            if _scope.current() is not None:
                # int(t), float(t), np.asarray(t) in a layer's call: the call builds the graph
                raise TypeError("a graph tensor has no value while its graph is being built (a layer's call "
                                "runs once, to build the graph, not on each batch's values): compute with "
                                "pyggml.ops inside the graph; shapes (x.shape) are known in Python")
            raise GGMLError("tensor has no memory yet: allocate its context's tensors "
                            "(BackendBuffer) or compute its graph first")
        if not ggml_is_contiguous(p):
            raise ValueError("tensor is not contiguous: make a copy with ops.cont first")
        if <int>p.type not in _TYPE_TO_NP:
            raise TypeError(f"no numpy type for {self.dtype}")
        cdef cnp.ndarray arr = np.empty(self.shape, dtype=_TYPE_TO_NP[<int>p.type])
        cdef size_t nbytes = ggml_nbytes(p)
        cdef void * dst = cnp.PyArray_DATA(arr)
        with nogil:
            if p.buffer != NULL:
                ggml_backend_tensor_get(p, dst, 0, nbytes)
            else:
                memcpy(dst, p.data, nbytes)
        _rpc_check_tensor(p)
        vs = self.ctx.value_source
        if vs is not None and arr.shape[0] == 1 and arr.ndim == 1:
            is_scalar = getattr(vs, "is_scalar", None)
            if is_scalar is not None and is_scalar(self):
                return arr.reshape(())          # a GradientTape's 0-d value (a loss): numpy's 0-d, as Keras's
        return arr

    def set(self, array):
        """Copy ``array`` (any real dtype and layout, the tensor's shape or its
        number of elements) into the tensor."""
        cdef ggml_tensor * p = self._p()
        if p.data == NULL or (p.view_src != NULL and p.view_src.data == NULL):
            raise GGMLError("tensor has no memory yet: allocate its context's tensors (BackendBuffer) first")
        if not ggml_is_contiguous(p):
            raise ValueError("cannot set a non-contiguous tensor")
        if <int>p.type not in _TYPE_TO_NP:
            raise TypeError(f"no numpy type for {self.dtype}")
        cdef cnp.ndarray arr = _as_array(array, _TYPE_TO_NP[<int>p.type], self.shape)
        cdef size_t nbytes = ggml_nbytes(p)
        cdef const void * src = cnp.PyArray_DATA(arr)
        with nogil:
            if p.buffer != NULL:
                ggml_backend_tensor_set(p, src, 0, nbytes)
            else:
                memcpy(p.data, src, nbytes)
        _rpc_check_tensor(p)
        return self

    # --- values as numbers: numpy() (a tape's tensors compute on first use) -------------------
    def __array__(self, dtype=None, copy=None):
        a = self.numpy()
        return a if dtype is None else a.astype(dtype, copy=False)

    def item(self):
        """The value of a one-element tensor as a Python number."""
        if self.nelements != 1:
            raise ValueError(f"item() needs a tensor of one element, this one has shape {self.shape}")
        return self.numpy().reshape(-1)[0].item()

    def __float__(self):
        if self.nelements != 1:
            raise TypeError(f"only a tensor of one element converts to a float, this one has shape {self.shape}")
        return float(self.numpy().reshape(-1)[0])

    def __int__(self):
        if self.nelements != 1:
            raise TypeError(f"only a tensor of one element converts to an int, this one has shape {self.shape}")
        return int(self.numpy().reshape(-1)[0])

    def __format__(self, spec):
        if spec and self.nelements == 1:
            return format(float(self), spec)
        return format(repr(self), spec)

    def __repr__(self):
        if self.closed:
            return "<pyggml.core.Tensor (freed)>"
        return f"<pyggml.core.Tensor {self.name!r} {self.dtype} {self.shape} op={self.op}>"

    # --- arithmetic, with numpy's broadcasting where ggml allows it -----------
    def __add__(self, other):
        return _arith(0, self, other, False)

    def __radd__(self, other):
        return _arith(0, self, other, True)

    def __sub__(self, other):
        return _arith(1, self, other, False)

    def __rsub__(self, other):
        return _arith(1, self, other, True)

    def __mul__(self, other):
        return _arith(2, self, other, False)

    def __rmul__(self, other):
        return _arith(2, self, other, True)

    def __truediv__(self, other):
        return _arith(3, self, other, False)

    def __rtruediv__(self, other):
        return _arith(3, self, other, True)

    def __neg__(self):
        return neg(self)

    def __abs__(self):
        return abs(self)

    def __pow__(self, other, modulo=None):
        if modulo is not None:
            return NotImplemented
        from pyggml._ops_numpy import power
        return power(self, other)

    def __rpow__(self, other, modulo=None):
        if modulo is not None:
            return NotImplemented
        from pyggml._ops_numpy import power
        return power(other, self)

    def _keras_op(self, name, other, reflected):
        """Keras's op ``name`` of pyggml.ops on this tensor and ``other`` (a number, an array
        or a tensor); NotImplemented for anything else. A GradientTape's tensor after its
        block gives numpy's result on the values at once, as the comparisons."""
        if not isinstance(other, Tensor) and not _elementwise_operand(other):
            return NotImplemented
        from pyggml import ops as keras_ops
        fn = getattr(keras_ops, name)
        v = self._values_now(other)
        if v is not None:
            return fn(v[1], v[0]) if reflected else fn(v[0], v[1])
        return fn(other, self) if reflected else fn(self, other)

    def __floordiv__(self, other):
        return self._keras_op("floor_divide", other, False)

    def __rfloordiv__(self, other):
        return self._keras_op("floor_divide", other, True)

    def __mod__(self, other):
        return self._keras_op("mod", other, False)

    def __rmod__(self, other):
        return self._keras_op("mod", other, True)

    def __and__(self, other):
        return self._keras_op("logical_and", other, False)

    def __rand__(self, other):
        return self._keras_op("logical_and", other, True)

    def __or__(self, other):
        return self._keras_op("logical_or", other, False)

    def __ror__(self, other):
        return self._keras_op("logical_or", other, True)

    def __xor__(self, other):
        return self._keras_op("logical_xor", other, False)

    def __rxor__(self, other):
        return self._keras_op("logical_xor", other, True)

    def __invert__(self):
        from pyggml.ops import logical_not
        return logical_not(self)

    def __pos__(self):
        return self

    def __round__(self, ndigits=None):
        from pyggml.ops import round as keras_round
        return keras_round(self, decimals=ndigits or 0)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        """numpy's ufuncs with a tensor among their operands (``array - tensor``,
        ``np.maximum(tensor, array)``): the Keras op doing the same on graph tensors
        (pyggml._tensor_arrays), instead of numpy looping over the array."""
        from pyggml._tensor_arrays import tensor_ufunc
        return tensor_ufunc(ufunc, method, inputs, kwargs)

    # comparisons are Keras's: float tensors of 0 and 1 (== and != stay identity: tensors are dict keys);
    # a GradientTape's tensor after its block compares its values at once (TensorFlow's eager
    # ``if loss > max_loss:``), as numpy's bools
    def _values_now(self, other):
        from pyggml import _scope
        if _scope.current() is not None or getattr(self.ctx, "value_source", None) is None:
            return None
        b = other
        if isinstance(other, Tensor):
            if getattr((<Tensor>other).ctx, "value_source", None) is None:
                return None
            b = (<Tensor>other).numpy()
        return self.numpy(), np.asarray(b)

    def __bool__(self):
        """A GradientTape's tensor after its block: the truth of its one value.  A tensor of a
        graph being built has no value yet: ``if tensor:`` is refused, where it would always be
        true (Keras's eager ``if ops.random.uniform(()) < 0.5:`` in an augmenting call)."""
        from pyggml import _scope
        if _scope.current() is None and getattr(self.ctx, "value_source", None) is not None:
            a = self.numpy()
            if a.size != 1:
                raise ValueError(f"the truth value of a tensor of shape {self.shape} is ambiguous: use ops.any or "
                                 f"ops.all")
            return bool(a.reshape(-1)[0])
        if _scope.current() is not None:
            # a constant of the graph being built (a Python bool or number made a tensor: gaugan's
            # loss(pred, False) whose call branches on it): its value is known
            from pyggml._ops_numpy import host_value
            known = host_value(self)
            if known is not None and known.size == 1:
                return bool(known.reshape(-1)[0])
        raise TypeError("the truth value of a graph tensor is not known while its graph is being built (a layer's "
                        "call runs once, to build the graph, not on each batch): branch inside the graph with "
                        "ops.cond(pred, true_fn, false_fn) or ops.where(pred, x, y); shapes and Python numbers "
                        "can be tested in Python")

    def __lt__(self, other):
        v = self._values_now(other)
        if v is not None:
            return np.less(*v)
        from pyggml._ops_numpy import less
        return less(self, other)

    def __le__(self, other):
        v = self._values_now(other)
        if v is not None:
            return np.less_equal(*v)
        from pyggml._ops_numpy import less_equal
        return less_equal(self, other)

    def __gt__(self, other):
        v = self._values_now(other)
        if v is not None:
            return np.greater(*v)
        from pyggml._ops_numpy import greater
        return greater(self, other)

    def __ge__(self, other):
        v = self._values_now(other)
        if v is not None:
            return np.greater_equal(*v)
        from pyggml._ops_numpy import greater_equal
        return greater_equal(self, other)

    def __getitem__(self, key):
        """numpy's basic indexing (ints, slices, ..., None) as a contiguous copy of a
        strided view, which trains (pyggml._indexing)."""
        from pyggml._ops_numpy import tensor_index
        picked = tensor_index(self, key)          # an integer tensor among the key: take (Keras's)
        if picked is not None:
            return picked
        from pyggml._indexing import getitem
        return getitem(self, key)

    def __matmul__(self, other):
        if type(other).__module__.startswith("torch") and hasattr(other, "detach"):
            from pyggml._validation import host
            other = np.asarray(host(other))          # a torch tensor: its values
        if not isinstance(other, Tensor):
            v = self._values_now(other)       # a GradientTape's tensor after its block: values
            if v is not None:
                from pyggml._tensor_arrays import as_ops_result
                return as_ops_result(np.matmul(v[0].astype(np.float32), v[1]))
            if isinstance(other, (np.ndarray, list, tuple)):
                from pyggml._ops_numpy import matmul as keras_matmul     # a constant of the graph
                return keras_matmul(self, other)
            return NotImplemented
        return matmul(self, other)

    def __rmatmul__(self, other):
        if type(other).__module__.startswith("torch") and hasattr(other, "detach"):
            from pyggml._validation import host
            other = np.asarray(host(other))          # a torch tensor: its values
        if not isinstance(other, Tensor):
            v = self._values_now(other)
            if v is not None:
                from pyggml._tensor_arrays import as_ops_result
                return as_ops_result(np.matmul(v[1], v[0].astype(np.float32)))
            if isinstance(other, (np.ndarray, list, tuple)):
                from pyggml._ops_numpy import matmul as keras_matmul
                return keras_matmul(other, self)
            return NotImplemented
        return matmul(other, self)

    def __eq__(self, other):
        # a tensor with a number or an array, in a graph being built, compares element by element
        # (Keras's ``x == 1.0`` in a layer's call; an input of strings with a string); tensors among
        # themselves stay identity (dict keys)
        if not isinstance(other, Tensor) and (_elementwise_operand(other) or _string_operand(self, other)):
            from pyggml._ops_numpy import equal
            return equal(self, other)
        return isinstance(other, Tensor) and (<Tensor>other).ptr == self.ptr

    def __ne__(self, other):
        if not isinstance(other, Tensor) and (_elementwise_operand(other) or _string_operand(self, other)):
            from pyggml._ops_numpy import not_equal
            return not_equal(self, other)
        return not (isinstance(other, Tensor) and (<Tensor>other).ptr == self.ptr)

    def __hash__(self):
        return hash(<uintptr_t>self.ptr)


cdef int _set_array(Tensor t, object array) except -1:
    """Tensor.set, without its conversions when the array is already exactly what
    the tensor holds (a contiguous array of its type and size)."""
    cdef ggml_tensor * p = t._p()
    cdef cnp.ndarray a
    if type(array) is np.ndarray and p.data != NULL and ggml_is_contiguous(p) and \
            (p.view_src == NULL or p.view_src.data != NULL):
        a = <cnp.ndarray>array
        if cnp.PyArray_IS_C_CONTIGUOUS(a) and <size_t>cnp.PyArray_NBYTES(a) == ggml_nbytes(p) and \
                ((p.type == GGML_TYPE_F32 and cnp.PyArray_TYPE(a) == cnp.NPY_FLOAT32) or
                 (p.type == GGML_TYPE_I32 and cnp.PyArray_TYPE(a) == cnp.NPY_INT32)):
            with nogil:
                if p.buffer != NULL:
                    ggml_backend_tensor_set(p, cnp.PyArray_DATA(a), 0, ggml_nbytes(p))
                else:
                    memcpy(p.data, cnp.PyArray_DATA(a), ggml_nbytes(p))
            return 0
    t.set(array)
    return 0


cdef object _get_array(Tensor t):
    """Tensor.numpy() for a contiguous f32 tensor with memory, with fewer checks."""
    cdef ggml_tensor * p = t._p()
    cdef cnp.ndarray arr
    if p.type == GGML_TYPE_F32 and p.data != NULL and ggml_is_contiguous(p) and \
            (p.view_src == NULL or p.view_src.data != NULL):
        arr = np.empty(t.shape, dtype=np.float32)
        with nogil:
            if p.buffer != NULL:
                ggml_backend_tensor_get(p, cnp.PyArray_DATA(arr), 0, ggml_nbytes(p))
            else:
                memcpy(cnp.PyArray_DATA(arr), p.data, ggml_nbytes(p))
        return arr
    return t.numpy()


cdef cnp.ndarray _as_array(object array, object np_dtype, tuple shape):
    """Convert to a C-contiguous array of np_dtype whose shape is ``shape``."""
    cdef cnp.ndarray fast
    if type(array) is np.ndarray:
        # the common case costs no copy and no conversion
        fast = <cnp.ndarray>array
        if fast.dtype is np.dtype(np_dtype) and cnp.PyArray_IS_C_CONTIGUOUS(fast) and array.shape == shape:
            return fast
    if isinstance(array, Tensor):
        raise TypeError("expected a numpy array, got a Tensor (use Tensor.numpy())")
    try:
        a = np.asarray(array)
    except Exception as e:
        raise TypeError(f"expected an array-like of numbers: {e}") from None
    if a.dtype.kind not in "biuf":
        raise TypeError(f"expected real numbers, got an array of dtype {a.dtype}")
    cdef int64_t want = 1
    for d in shape:
        want *= d
    if a.size != want:
        raise ValueError(f"expected an array of shape {shape}, got {a.shape}")
    if a.shape != shape and not (a.ndim >= 4 and len(shape) == a.ndim - 1 and
                                 (a.shape[0] * a.shape[1],) + a.shape[2:] == tuple(shape)):
        # (the data of a 5-D node (or its sparse labels) goes into its folded tensor, batch and
        # first axis as one: pyggml._fold)
        squeezed_a = tuple(d for d in a.shape if d != 1)
        squeezed_s = tuple(d for d in shape if d != 1)
        if squeezed_a != squeezed_s:
            raise ValueError(f"expected an array of shape {shape}, got {a.shape}")
    return np.ascontiguousarray(a, dtype=np_dtype).reshape(shape)


cdef bint _divides(Tensor small, Tensor big):
    """small broadcasts to big as numpy's rules allow: each dim equal, or 1 in small (ggml would
    also tile a dim that divides the other's, (4, 8) over (12, 8), which numpy and Keras refuse)."""
    cdef int i
    for i in range(4):
        if small.ptr.ne[i] != big.ptr.ne[i] and small.ptr.ne[i] != 1:
            return False
    return True


cdef object _graph_operand(object other):
    """A numpy array (or a list of numbers) in arithmetic with a tensor: a constant of the
    graph being built (None outside one)."""
    from pyggml import _scope
    b = _scope.current()
    if b is None:
        return None
    arr = np.asarray(other)
    if arr.dtype == object or arr.dtype.kind not in "biuf":
        return None
    if arr.ndim > 4:
        return None          # numpy's reflected operator takes it to pyggml.ops (a wide constant: pyggml._wide)
    return b.constant(np.ascontiguousarray(arr.reshape(arr.shape or (1,)), dtype=np.float32), "float32")


cdef bint _int_operand(object v):
    """A whole-number operand: an int32 tensor, a Python or numpy int, an array of ints."""
    if isinstance(v, Tensor):
        return (<Tensor>v).ptr.type == GGML_TYPE_I32
    if isinstance(v, (bool, np.bool_)):
        return False
    if isinstance(v, (int, np.integer)):
        return True
    return isinstance(v, np.ndarray) and v.dtype.kind in "iu"


cdef object _arith(int which, Tensor a, object other, bint reflected):
    """a (op) other, or other (op) a when reflected: 0 add, 1 sub, 2 mul, 3 div.  Sums,
    differences and products of whole numbers are int32, as Keras's (``f[:, None] - f[None]
    + 2``: a relative-position index for ops.take); computed in float32 (exact to 2**24)."""
    a._check()
    if type(other).__module__.startswith("torch") and hasattr(other, "detach"):
        # a torch tensor (a target of a PyTorch user's loop, ``pred - y``): its values, as an array
        from pyggml._validation import host
        other = np.asarray(host(other))
    if isinstance(other, Tensor) and (<Tensor>other).ctx is not a.ctx:
        # a tensor of another GradientTape, met while a tape records: its value (pyggml._scope)
        from pyggml import _scope
        from pyggml._scope import foreign_tape_value
        if _scope.current() is None:
            # two tapes' tensors after their blocks (losses of a loop added up): recorded on the
            # first one's tape, which takes the other's value
            tape = _scope.tape_of([a])
            if tape is not None and _scope.tape_of([other]) is not None:
                with _scope.entered(tape):
                    return _arith(which, a, other, reflected)
        mine, theirs = foreign_tape_value(a), foreign_tape_value(other)
        if theirs is not None:
            other = theirs
        if mine is not None:
            if isinstance(other, Tensor):
                return _arith(which, other, mine, not reflected)
            from pyggml import ops as keras_ops
            fn = (keras_ops.add, keras_ops.subtract, keras_ops.multiply, keras_ops.divide)[which]
            return fn(other, mine) if reflected else fn(mine, other)
    cdef bint ints = which != 3 and a.ptr.type == GGML_TYPE_I32 and _int_operand(other)
    r = _arith_f32(which, a, other, reflected)
    if ints and isinstance(r, Tensor) and (<Tensor>r).ptr.type != GGML_TYPE_I32:
        r = cast(r if (<Tensor>r).is_contiguous else cont(r), "i32")
    if isinstance(r, Tensor) and a.ctx is not None and a.ctx.value_source is not None:
        # a GradientTape's 0-d values (a loss) in arithmetic with numbers or each other stay 0-d
        scalars = getattr(a.ctx.value_source, "scalars", None)
        if scalars is not None and hash(a) in scalars and (<Tensor>r).shape == (1,) and (
                (isinstance(other, Tensor) and hash(other) in scalars) or
                (not isinstance(other, Tensor) and np.ndim(other) == 0)):
            scalars.add(hash(r))
    return r


cdef object _arith_f32(int which, Tensor a, object other, bint reflected):
    if a.ptr.type == GGML_TYPE_I32:
        a = cast(a, "f32")                      # integer tensors (positions, aranges) compute as float32
    if isinstance(other, (np.ndarray, list)):
        converted = _graph_operand(other)
        if converted is None:
            return NotImplemented
        other = converted
    if isinstance(other, (int, float, np.integer, np.floating)) and not isinstance(other, bool):
        if reflected and which == 3:
            from pyggml import _scope
            if _scope.current() is not None:
                from pyggml._ops_numpy import divide
                return divide(float(other), a)
        s = float(other)
        if which == 0:
            return scale_bias(a, 1.0, s)
        if which == 1:
            return scale_bias(a, -1.0, s) if reflected else scale_bias(a, 1.0, -s)
        if which == 2:
            return scale(a, s)
        if reflected:
            vals = a._values_now(other)
            if vals is not None:
                # a GradientTape's tensor after its block (PSNR's 10 * log10(1 / mse)): the
                # quotient of its value, as its other operators give
                from pyggml import ops as keras_ops
                return keras_ops.divide(vals[1], vals[0])
            raise TypeError("number / Tensor is not supported: write number * (1 / x) with ops that train "
                            "(e.g. ops.exp(-ops.log(x)) for positive x)")
        if s == 0.0:
            raise ZeroDivisionError("Tensor divided by zero")
        return scale(a, 1.0 / s)
    if not isinstance(other, Tensor):
        return NotImplemented
    cdef Tensor x = other if reflected else a
    cdef Tensor y = a if reflected else other
    y._check()
    if x.ptr.type == GGML_TYPE_I32:
        x = cast(x, "f32")
    if y.ptr.type == GGML_TYPE_I32:
        y = cast(y, "f32")
    if x.ptr.type != GGML_TYPE_F32 or y.ptr.type != GGML_TYPE_F32:
        raise TypeError(f"Tensor arithmetic needs f32 tensors, got {x.dtype} and {y.dtype}")
    if not x.is_contiguous:
        x = cont(x)
    if not y.is_contiguous:
        y = cont(y)
    cdef bint y_in_x = _divides(y, x)
    cdef bint x_in_y = _divides(x, y)
    cdef int i
    if not y_in_x and not x_in_y:
        # both broadcast (numpy's (3, 1) with (1, 4)): repeat each to the joint shape
        ne = []
        for i in range(4):
            if x.ptr.ne[i] == y.ptr.ne[i] or y.ptr.ne[i] == 1:
                ne.append(x.ptr.ne[i])
            elif x.ptr.ne[i] == 1:
                ne.append(y.ptr.ne[i])
            else:
                raise ValueError(f"shapes {x.shape} and {y.shape} do not broadcast")
        r = max(x.ndim, y.ndim)
        template = _pick_ctx(x, None).new_tensor(tuple(ne[i] for i in range(r - 1, -1, -1)))
        x = repeat(x, template)
        y = repeat(y, template)
        y_in_x = True
    if which == 0:
        return add(x, y) if y_in_x else add(y, x)
    if which == 2:
        return mul(x, y) if y_in_x else mul(y, x)
    if which == 1:
        if y_in_x and ggml_are_same_shape(x.ptr, y.ptr):
            return sub(x, y)
        # x - y as x + (-y): add's backward handles a broadcast second argument, sub's does not
        return add(x, neg(y)) if y_in_x else add(neg(y), x)
    if y_in_x:
        # a broadcast divisor is repeated first: div's backward takes same-shaped operands only
        return div(x, y) if ggml_are_same_shape(x.ptr, y.ptr) else div(x, repeat(y, x))
    return div(repeat(x, y), y)
