# Graph and Scheduler: compute graphs and running them on backends.

cdef extern from "ggml.h" nogil:
    void * ggml_get_mem_buffer(const ggml_context * ctx)

# ops whose backward pass ggml implements (ggml_compute_backward in ggml.c)
cdef set _BACKWARD_OPS = {
    <int>GGML_OP_NONE, <int>GGML_OP_DUP, <int>GGML_OP_ADD, <int>GGML_OP_ADD1, <int>GGML_OP_ACC,
    <int>GGML_OP_SUB, <int>GGML_OP_MUL, <int>GGML_OP_DIV, <int>GGML_OP_SQR, <int>GGML_OP_SQRT,
    <int>GGML_OP_LOG, <int>GGML_OP_SIN, <int>GGML_OP_COS, <int>GGML_OP_SUM, <int>GGML_OP_SUM_ROWS,
    <int>GGML_OP_MEAN, <int>GGML_OP_REPEAT, <int>GGML_OP_RMS_NORM, <int>GGML_OP_MUL_MAT,
    <int>GGML_OP_SCALE, <int>GGML_OP_CPY, <int>GGML_OP_CONT, <int>GGML_OP_RESHAPE,
    <int>GGML_OP_VIEW, <int>GGML_OP_PERMUTE, <int>GGML_OP_TRANSPOSE, <int>GGML_OP_GET_ROWS,
    <int>GGML_OP_DIAG_MASK_INF, <int>GGML_OP_DIAG_MASK_ZERO, <int>GGML_OP_SOFT_MAX,
    <int>GGML_OP_IM2COL, <int>GGML_OP_POOL_2D, <int>GGML_OP_CROSS_ENTROPY_LOSS,
    # ggml/patches/0020 (pyggml's backward passes; see ops.pxi's _check_backward_pyggml)
    <int>GGML_OP_CONCAT, <int>GGML_OP_PAD, <int>GGML_OP_CLAMP, <int>GGML_OP_LEAKY_RELU, <int>GGML_OP_NORM,
    <int>GGML_OP_POOL_1D, <int>GGML_OP_UPSCALE, <int>GGML_OP_BIAS_ACT, <int>GGML_OP_BATCH_NORM,
    <int>GGML_OP_POOL_CL, <int>GGML_OP_CONV_CL, <int>GGML_OP_CONV_CL_BACK_INPUT, <int>GGML_OP_LSTM_CELL,
    <int>GGML_OP_GRU_CELL,
    # ggml/patches/0040 (the backward passes of backward ops: second-order gradients)
    <int>GGML_OP_OUT_PROD, <int>GGML_OP_UNARY_BACK, <int>GGML_OP_REPEAT_BACK, <int>GGML_OP_POOL_CL_BACK,
    <int>GGML_OP_NORM_BACK, <int>GGML_OP_POOL_2D_BACK,
    # ggml/patches/0042 (softmax's and silu's backward ops: attention and silu in second order)
    <int>GGML_OP_SOFT_MAX_BACK, <int>GGML_OP_SILU_BACK,
}
cdef set _BACKWARD_UNARY = {
    <int>GGML_UNARY_OP_ABS, <int>GGML_UNARY_OP_SGN, <int>GGML_UNARY_OP_NEG, <int>GGML_UNARY_OP_STEP,
    <int>GGML_UNARY_OP_RELU, <int>GGML_UNARY_OP_SILU, <int>GGML_UNARY_OP_EXP,
    <int>GGML_UNARY_OP_EXPM1, <int>GGML_UNARY_OP_SOFTPLUS,
    <int>GGML_UNARY_OP_TANH, <int>GGML_UNARY_OP_SIGMOID, <int>GGML_UNARY_OP_GELU, <int>GGML_UNARY_OP_GELU_ERF,
    <int>GGML_UNARY_OP_ELU,
}


cdef int _count_reachable(ggml_tensor * root, set seen) except -1:
    """Distinct tensors reachable from root through src and view_src."""
    stack = [<uintptr_t>root]
    cdef ggml_tensor * t
    cdef int i, n = 0
    while stack:
        addr = stack.pop()
        if addr in seen:
            continue
        seen.add(addr)
        n += 1
        t = <ggml_tensor *><uintptr_t>addr
        for i in range(GGML_MAX_SRC):
            if t.src[i] != NULL:
                stack.append(<uintptr_t>t.src[i])
        if t.view_src != NULL:
            stack.append(<uintptr_t>t.view_src)
    return n


def reachable_hashes(tensors):
    """The hashes (``hash(t)``, the addresses) of every tensor the given ones depend on,
    themselves included."""
    seen = set()
    for t in tensors:
        (<Tensor>t)._check()
        _count_reachable((<Tensor>t).ptr, seen)
    return {hash(a) for a in seen}


# tensors the backward pass of a backward op makes (ggml/patches/0040), beyond the average
# three per node of a first-order pass; a graph holding such ops may also make each node's
# gradient contiguous (two copies per node at most: its own and an accumulated one)
cdef dict _SECOND_ORDER_EXTRA = {
    # (0042: gelu's second derivative takes 23 tensors, softmax's 15, silu's 13; room kept)
    <int>GGML_OP_OUT_PROD: 6, <int>GGML_OP_UNARY_BACK: 32, <int>GGML_OP_POOL_CL_BACK: 8,
    <int>GGML_OP_POOL_2D_BACK: 10, <int>GGML_OP_NORM_BACK: 40, <int>GGML_OP_SOFT_MAX_BACK: 20,
    <int>GGML_OP_SILU_BACK: 18,
}


cdef Py_ssize_t _backward_bound(list ptrs) except -1:
    """At most how many tensors (and graph nodes) ggml's backward pass makes for a graph of
    these tensors (addresses of the graph's tensors)."""
    cdef Py_ssize_t n = len(ptrs), extra = 0
    cdef ggml_tensor * t
    cdef bint second = False
    for addr in ptrs:
        t = <ggml_tensor *><uintptr_t>addr
        e = _SECOND_ORDER_EXTRA.get(<int>t.op)
        if e is not None:
            extra += <Py_ssize_t>e
            second = True
    return 3 * n + 16 + extra + (2 * n if second else 0)


cdef size_t _largest_nbytes(list ptrs):
    cdef size_t m = 0
    for addr in ptrs:
        m = max(m, ggml_nbytes(<ggml_tensor *><uintptr_t>addr))
    return m


def reachable_sizes(tensors):
    """(how many distinct tensors the given ones depend on, themselves included; at most how
    many tensors ggml's backward pass adds to a graph of them): one walk, to size a graph
    and its context (its forward tensors plus the backward pass's)."""
    seen = set()
    for t in tensors:
        (<Tensor>t)._check()
        _count_reachable((<Tensor>t).ptr, seen)
    return len(seen), _backward_bound(list(seen))


def reachable_count(tensors):
    """How many distinct tensors the given ones depend on, themselves included: the
    size a forward graph of them needs (a backward pass adds about three times that)."""
    seen = set()
    for t in tensors:
        (<Tensor>t)._check()
        _count_reachable((<Tensor>t).ptr, seen)
    return len(seen)


# --- get_rows indices: ggml asserts (aborts) on one out of range at compute time,
# so the core checks them before every compute.  Indices are data: a leaf (or a
# view or copy of one) is read and checked; indices made by argmax are bounded
# by its input's width; anything else is refused when get_rows is called.

cdef ggml_tensor * _index_source(ggml_tensor * t, int64_t * bound) noexcept:
    """Follow views and i32 copies from t to the leaf whose values t holds.
    Returns the leaf, or NULL with *bound set to an exclusive upper bound of the
    values (argmax, argsort), or NULL with *bound = -1 when nothing is known."""
    bound[0] = -1
    cdef int depth = 0
    while t != NULL and depth < 100000:
        depth += 1
        if t.op == GGML_OP_NONE:
            return t
        if t.op == GGML_OP_VIEW or t.op == GGML_OP_RESHAPE or t.op == GGML_OP_PERMUTE \
                or t.op == GGML_OP_TRANSPOSE:
            t = t.src[0]
            continue
        if (t.op == GGML_OP_CONT or t.op == GGML_OP_DUP or t.op == GGML_OP_CPY) and t.src[0] != NULL \
                and t.src[0].type == GGML_TYPE_I32:
            t = t.src[0]
            continue
        if (t.op == GGML_OP_ARGMAX or t.op == GGML_OP_ARGSORT) and t.src[0] != NULL:
            bound[0] = t.src[0].ne[0]           # positions along the row it searched or sorted
        return NULL
    return NULL


cdef int _check_index_tensor(ggml_tensor * rows, int64_t n_rows, str where) except -1:
    """Refuse (at graph building time) indices whose values cannot be checked
    before compute, or that may exceed n_rows."""
    cdef int64_t bound
    cdef ggml_tensor * leaf = _index_source(rows, &bound)
    if leaf != NULL:
        return 0
    if bound < 0:
        raise ValueError(f"{where}: the indices are computed by {(<bytes>ggml_op_desc(rows)).decode()}, "
                         f"whose values cannot be checked before compute (ggml aborts on an index "
                         f"out of range); give them as an i32 tensor with data, argmax or argsort")
    if bound > n_rows:
        raise ValueError(f"{where}: the indices (argmax over {bound} values) may exceed the "
                         f"{n_rows} rows")
    return 0


cdef list _collect_row_checks(list nodes):
    """(leaf address, number of rows) for every get_rows among the node
    addresses whose indices come from a leaf."""
    out = []
    cdef ggml_tensor * t
    cdef ggml_tensor * leaf
    cdef int64_t bound
    for addr in nodes:
        t = <ggml_tensor *><uintptr_t>addr
        if t.op != GGML_OP_GET_ROWS or t.src[1] == NULL:
            continue
        leaf = _index_source(t.src[1], &bound)
        if leaf != NULL:
            out.append((<uintptr_t>leaf, int(t.src[0].ne[1])))
        elif bound < 0 or bound > t.src[0].ne[1]:
            raise ValueError("get_rows: indices computed in the graph cannot be checked before compute")
    return out


cdef int _check_row_indices(list checks) except -1:
    """Raise ValueError unless every index of these leaves is within its rows."""
    cdef ggml_tensor * leaf
    cdef int64_t n, i, lo, hi, n_rows
    cdef const int32_t * vals
    cdef int32_t * tmp
    for addr, rows in checks:
        leaf = <ggml_tensor *><uintptr_t>addr
        if leaf.data == NULL or leaf.type != GGML_TYPE_I32:
            raise GGMLError("get_rows: the index tensor has no memory")
        n = ggml_nelements(leaf)
        n_rows = rows
        tmp = NULL
        if leaf.buffer != NULL and not ggml_backend_buffer_is_host(leaf.buffer):
            tmp = <int32_t *>malloc(<size_t>n * sizeof(int32_t))
            if tmp == NULL:
                raise MemoryError()
            with nogil:
                ggml_backend_tensor_get(leaf, tmp, 0, <size_t>n * sizeof(int32_t))
            vals = tmp
        else:
            vals = <const int32_t *>leaf.data
        lo = 0
        hi = 0
        with nogil:
            for i in range(n):
                if vals[i] < 0 or vals[i] >= n_rows:
                    lo = i
                    hi = 1
                    break
        bad = int(vals[lo]) if hi else 0
        if tmp != NULL:
            c_free(tmp)
        if hi:
            raise ValueError(f"get_rows: index {bad} (at position {lo} of "
                             f"{(<bytes>leaf.name).decode('utf-8', 'replace')!r}) is out of range "
                             f"for {n_rows} rows")
    return 0


cdef int _check_freed(list ctxs, object reachable) except -1:
    """FreedError if a tensor the graph reads lost its memory to a freed BackendBuffer.
    reachable: a set of addresses, or a callable making it (only called when needed)."""
    cdef ggml_tensor * t
    freed = None
    for c in ctxs:
        if (<Context>c)._freed:
            freed = True
            break
    if freed is None:
        return 0
    if callable(reachable):
        reachable = reachable()
    for c in ctxs:
        hit = (<Context>c)._freed & reachable
        if hit:
            t = <ggml_tensor *><uintptr_t>next(iter(hit))
            raise FreedError(f"the graph uses the tensor {(<bytes>t.name).decode('utf-8', 'replace')!r}, "
                             f"whose BackendBuffer has been freed; allocate it again (a new "
                             f"BackendBuffer), or lay it out with Scheduler.alloc and set it")
    return 0


cdef set _graph_reachable(ggml_cgraph * g):
    seen = set()
    cdef int i
    for i in range(ggml_graph_n_nodes(g)):
        _count_reachable(ggml_graph_node(g, i), seen)
    return seen


cdef list _owners_for(list ctxs):
    """The contexts and their live buffers: what a compute over them must hold."""
    out = list(ctxs)
    for c in ctxs:
        for b in (<Context>c)._buffers:
            if (<BackendBuffer>b).ptr != NULL:
                out.append(b)
    return out


cdef bint _needs_grad(ggml_tensor * t, dict memo):
    """True if a parameter lies upstream of t."""
    cdef uintptr_t key = <uintptr_t>t
    if key in memo:
        return memo[key]
    memo[key] = False
    cdef bint r = (t.flags & GGML_TENSOR_FLAG_PARAM) != 0
    cdef int i
    if not r and not (t.flags & GGML_TENSOR_FLAG_NO_GRAD):       # a stop-gradient passes none
        for i in range(GGML_MAX_SRC):
            if i == 1 and ((t.op == GGML_OP_UNARY_BACK and _act_piecewise_linear(t.op_params[0])) or
                           t.op == GGML_OP_POOL_CL_BACK or t.op == GGML_OP_POOL_2D_BACK):
                continue            # g f'(b) does not vary with b; the input gives a shape, an argmax (0040)
            if t.src[i] != NULL and _needs_grad(t.src[i], memo):
                r = True
                break
    memo[key] = r
    return r


cdef int _check_backward(ggml_cgraph * g) except -1:
    """Refuse, with a clear message, any graph whose backward pass ggml would abort on."""
    cdef int i, j, n = ggml_graph_n_nodes(g)
    cdef ggml_tensor * t
    cdef bint has_loss = False
    memo = {}
    for i in range(n):
        t = ggml_graph_node(g, i)
        if t.flags & GGML_TENSOR_FLAG_LOSS:
            has_loss = True
            if t.type != GGML_TYPE_F32 or ggml_nelements(t) != 1:
                raise ValueError("the loss must be a scalar f32 tensor")
    if not has_loss:
        raise ValueError("the graph has no loss: mark a scalar with Tensor.set_loss() before build_backward")
    for i in range(n):
        if ggml_graph_node(g, i).flags & GGML_TENSOR_FLAG_PARAM:
            break
    else:
        # ggml asserts on it; Keras says "no gradients provided for any variable"
        raise ValueError("the loss does not depend on any trainable weight (no parameter in its graph: "
                         "is the output a constant, or made of zeros_like/ones_like?)")
    for i in range(n):
        t = ggml_graph_node(g, i)
        if t.flags & GGML_TENSOR_FLAG_NO_GRAD:
            continue                # passes no gradient back (a stop-gradient, an integer result)
        needs = [t.src[j] != NULL and _needs_grad(t.src[j], memo) for j in range(GGML_MAX_SRC)]
        if not any(needs):
            continue
        if t.view_src != NULL and t.op not in (GGML_OP_CPY, GGML_OP_SET_ROWS, GGML_OP_VIEW, GGML_OP_RESHAPE,
                                                GGML_OP_PERMUTE, GGML_OP_TRANSPOSE, GGML_OP_ACC):
            raise GGMLError(f"ggml has no backward pass for the in-place {(<bytes>ggml_op_desc(t)).decode()} "
                            f"(tensor {t.name.decode()!r})")
        if t.type != GGML_TYPE_F32:
            raise TypeError(f"backward pass needs f32 tensors; {t.name.decode()!r} is "
                            f"{(<bytes>ggml_type_name(t.type)).decode()}")
        if t.op == GGML_OP_UNARY:
            if <int>ggml_get_unary_op(t) not in _BACKWARD_UNARY:
                raise GGMLError(f"ggml has no backward pass for {(<bytes>ggml_op_desc(t)).decode()} "
                                f"(tensor {t.name.decode()!r}); build it from ops that have one")
        elif <int>t.op not in _BACKWARD_OPS:
            raise GGMLError(f"ggml has no backward pass for {(<bytes>ggml_op_desc(t)).decode()} "
                            f"(tensor {t.name.decode()!r}); build it from ops that have one")
        if t.op == GGML_OP_IM2COL and needs[0]:
            raise GGMLError("im2col's kernel argument must not be a parameter (only its shape is used)")
        if t.op in (GGML_OP_SOFT_MAX, GGML_OP_GET_ROWS, GGML_OP_CROSS_ENTROPY_LOSS) and needs[1]:
            raise GGMLError(f"ggml has no gradient for the second argument of {(<bytes>ggml_op_desc(t)).decode()}")
        _check_backward_pyggml(t, needs)
        if t.op == GGML_OP_MEAN and ggml_nelements(t) != 1:
            raise GGMLError("ggml's mean has a backward pass only for a scalar result; "
                            "use ops.scale(ops.sum_rows(x), 1 / n) instead")
        if t.op == GGML_OP_MUL_MAT and needs[0] and (t.src[0].ne[2] != t.src[1].ne[2] or
                                                       t.src[0].ne[3] != t.src[1].ne[3]):
            raise GGMLError("ggml has no backward pass for a broadcast mul_mat's first argument")
        if t.op in (GGML_OP_SUB, GGML_OP_DIV) and needs[1] and not ggml_are_same_shape(t.src[0], t.src[1]):
            raise GGMLError(f"ggml has no backward pass for the broadcast second argument of "
                            f"{(<bytes>ggml_op_desc(t)).decode()} (give it the first one's shape)")
    return 0


cdef class Graph(_Owner):
    """A compute graph, held in a Context's memory: ``Graph(ctx, size=2048,
    grads=False)``. ``build_forward(t)`` adds t and what it depends on;
    ``build_backward()`` adds the gradients of the loss (grads=True)."""
    cdef ggml_cgraph * ptr
    cdef readonly Context ctx
    cdef readonly int size
    cdef readonly bint grads
    cdef set _seen
    cdef list _ctxs          # contexts whose tensors are in the graph (kept alive)
    cdef list _leaves        # leaf tensors given to build_forward (addresses)
    cdef list _row_checks    # get_rows indices to check before compute
    cdef int _row_checks_n   # the node count they were collected for
    cdef object _compute_cache   # (owners generation, scheduler id, its locks, fork generation): compute
    cdef Context _tctx           # the context build_backward made its tensors in (None: self.ctx)

    def __init__(self, Context ctx not None, size=GGML_DEFAULT_GRAPH_SIZE, grads=False):
        ctx._check()
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)):
            raise TypeError("size must be an int")
        if not 1 <= size <= (1 << 22):
            raise ValueError(f"graph size must be between 1 and 2**22, got {size}")
        cdef size_t need = ggml_graph_overhead_custom(<size_t>size, bool(grads))
        if ggml_used_mem(ctx.ptr) + need + 256 > ggml_get_mem_size(ctx.ptr):
            raise ContextFullError(f"Context is too small for a graph of {size} nodes "
                                  f"(create it with graph_size={size})")
        self.ptr = ggml_new_graph_custom(ctx.ptr, <size_t>size, bool(grads))
        _check_ptr(self.ptr, "ggml_new_graph_custom")
        self.ctx = ctx
        self.size = size
        self.grads = bool(grads)
        self._seen = set()
        self._ctxs = [ctx]
        self._leaves = []
        self._row_checks = []
        self._row_checks_n = -1
        ctx._add_dependent(self)

    def __dealloc__(self):
        self._dealloc()

    cdef bint _alive(self):
        return self.ptr != NULL and self.ctx is not None and self.ctx.ptr != NULL

    cdef void _release(self) noexcept:
        self.ptr = NULL          # the memory belongs to the context
        # nor does a freed graph keep other contexts alive (a GradientTape's, with its memory:
        # a scheduler holds its last graph until it lays out the next)
        self._ctxs = []
        self._tctx = None

    cdef void _forget(self) noexcept:
        self.ptr = NULL

    def build_forward(self, Tensor t not None):
        """Add ``t`` and everything it depends on."""
        self._check()
        t._check()
        # conservative capacity check: every reachable tensor counts once
        cdef int add = _count_reachable(t.ptr, self._seen)
        if len(self._seen) >= self.size:
            raise ContextFullError(f"graph is full: {len(self._seen)} tensors for a size of {self.size}; "
                            f"create the Graph with a larger size")
        if t.ctx is not self.ctx and t.ctx not in self._ctxs:
            # the graph now points into t's context: keep it alive, and go first
            # if it is freed
            self._ctxs.append(t.ctx)
            t.ctx._add_dependent(self)
        if t.ptr.op == GGML_OP_NONE:
            self._leaves.append(<uintptr_t>t.ptr)
        ggml_build_forward_expand(self.ptr, t.ptr)
        return self

    def build_backward(self, accumulators=None, tensor_ctx=None):
        """Add the backward pass of the loss (tensors marked with set_loss)
        to the parameters (tensors marked with set_param).

        ``accumulators`` maps nodes of the graph (the loss, parameters) to
        tensors of their shape that hold their gradient across computes:
        a parameter's gradient is added into its accumulator (zero it to start
        anew), and the loss's accumulator is its seed gradient (set it to 1).
        Without one, a parameter's gradient is computed afresh by each compute
        and the loss's seed is set by reset().

        ``tensor_ctx``: the Context the backward pass's tensors are made in (the
        graph's own by default); a GradientTape makes a gradient that another tape
        differentiates again in its own context."""
        self._check()
        cdef Context tctx = self.ctx
        if tensor_ctx is not None:
            if not isinstance(tensor_ctx, Context):
                raise TypeError("tensor_ctx must be a Context")
            tctx = <Context>tensor_ctx
            tctx._check()
        if not self.grads:
            raise ValueError("create the Graph with grads=True to build a backward pass")
        _check_backward(self.ptr)
        cdef int n = ggml_graph_n_nodes(self.ptr)
        cdef Py_ssize_t bound = _backward_bound(list(self._seen))
        if len(self._seen) + bound >= self.size:
            raise ContextFullError(f"graph of size {self.size} is too small for the backward pass of "
                                   f"{n} nodes; use a size of at least {len(self._seen) + bound + 1}")
        cdef ggml_tensor ** accs = NULL
        cdef ggml_tensor * node
        cdef Tensor key, acc
        cdef int i
        index = {}
        if accumulators:
            if not isinstance(accumulators, dict):
                raise TypeError("accumulators must be a dict {node tensor: accumulator tensor}")
            for i in range(n):
                index[<uintptr_t>ggml_graph_node(self.ptr, i)] = i
            for k, v in accumulators.items():
                if not isinstance(k, Tensor) or not isinstance(v, Tensor):
                    raise TypeError("accumulators must map Tensors to Tensors")
                key, acc = <Tensor>k, <Tensor>v
                key._check()
                acc._check()
                if <uintptr_t>key.ptr not in index:
                    raise ValueError(f"accumulator given for {key.name!r}, which is not a node of the graph")
                if not (key.ptr.flags & (GGML_TENSOR_FLAG_PARAM | GGML_TENSOR_FLAG_LOSS)):
                    raise ValueError(f"{key.name!r} is neither a parameter nor the loss")
                if acc.ptr.type != GGML_TYPE_F32 or not ggml_are_same_shape(acc.ptr, key.ptr) \
                        or not ggml_is_contiguous(acc.ptr):
                    raise ValueError(f"the accumulator of {key.name!r} must be a contiguous f32 tensor of "
                                     f"shape {key.shape}")
                if acc.ptr.data == NULL:
                    raise ValueError(f"the accumulator of {key.name!r} needs memory (a BackendBuffer)")
            accs = <ggml_tensor **>malloc(n * sizeof(ggml_tensor *))
            if accs == NULL:
                raise MemoryError()
            memset(accs, 0, n * sizeof(ggml_tensor *))
            for k, v in accumulators.items():
                accs[index[<uintptr_t>(<Tensor>k).ptr]] = (<Tensor>v).ptr
                if (<Tensor>v).ctx is not self.ctx and (<Tensor>v).ctx not in self._ctxs:
                    self._ctxs.append((<Tensor>v).ctx)
                    (<Tensor>v).ctx._add_dependent(self)
        try:
            # a context that holds data (no_alloc=False) gives each new tensor memory at once: at
            # most the largest tensor of the graph each (the gradients take the shapes of its tensors)
            tctx._reserve(<size_t>bound, 0 if ggml_get_no_alloc(tctx.ptr) else
                          <size_t>bound * _largest_nbytes(list(self._seen)))
            if tctx is not self.ctx and tctx not in self._ctxs:
                self._ctxs.append(tctx)
                tctx._add_dependent(self)
            self._tctx = tctx
            ggml_build_backward_expand(tctx.ptr, self.ptr, accs)
        finally:
            if accs != NULL:
                c_free(accs)
        for i in range(ggml_graph_n_nodes(self.ptr)):
            self._seen.add(<uintptr_t>ggml_graph_node(self.ptr, i))
        return self

    @property
    def n_nodes(self):
        self._check()
        return ggml_graph_n_nodes(self.ptr)

    def count_outside(self, *contexts):
        """How many tensors of the graph (its nodes, their sources and views' sources) lie in
        none of ``contexts`` (a GradientTape refuses a graph that reaches into another tape)."""
        self._check()
        cdef list lo = [], hi = []
        cdef Context c
        for c in contexts:
            c._check()
            lo.append(<uintptr_t>ggml_get_mem_buffer(c.ptr))
            hi.append(<uintptr_t>ggml_get_mem_buffer(c.ptr) + ggml_get_mem_size(c.ptr))
        cdef int i, j, k, n = ggml_graph_n_nodes(self.ptr), out = 0
        cdef ggml_tensor * t
        cdef ggml_tensor * cand[GGML_MAX_SRC + 2]
        cdef uintptr_t a
        seen = set()
        for i in range(n):
            t = ggml_graph_node(self.ptr, i)
            cand[0] = t
            cand[1] = t.view_src
            for j in range(GGML_MAX_SRC):
                cand[2 + j] = t.src[j]
            for j in range(GGML_MAX_SRC + 2):
                if cand[j] == NULL:
                    continue
                a = <uintptr_t>cand[j]
                if a in seen:
                    continue
                seen.add(a)
                for k in range(len(lo)):
                    if lo[k] <= a < hi[k]:
                        break
                else:
                    out += 1
        return out

    def nodes(self):
        self._check()
        return [Tensor._wrap(self.ctx, ggml_graph_node(self.ptr, i), 0)
                for i in range(ggml_graph_n_nodes(self.ptr))]

    def node_hashes(self):
        """The hashes (addresses) of the graph's nodes, as ``hash(t)`` gives them, without
        a Tensor object per node."""
        self._check()
        return [hash(<uintptr_t>ggml_graph_node(self.ptr, i)) for i in range(ggml_graph_n_nodes(self.ptr))]

    def work(self):
        """About how many multiply-adds a compute of the graph does: a product's output
        elements times its inner length, one per output element for every other op (what
        a thread count is chosen by)."""
        self._check()
        cdef int i, n = ggml_graph_n_nodes(self.ptr)
        cdef ggml_tensor * t
        cdef double w = 0
        for i in range(n):
            t = ggml_graph_node(self.ptr, i)
            if t.op == GGML_OP_MUL_MAT and t.src[0] != NULL:
                w += <double>ggml_nelements(t) * <double>t.src[0].ne[0]
            elif t.op == GGML_OP_OUT_PROD and t.src[0] != NULL:
                w += <double>ggml_nelements(t) * <double>t.src[0].ne[1]
            else:
                w += <double>ggml_nelements(t)
        return w

    def grad(self, Tensor t not None):
        """The gradient tensor of t in this graph, or None."""
        self._check()
        t._check()
        if not self.grads:
            return None
        cdef ggml_tensor * g = ggml_graph_get_grad(self.ptr, t.ptr)
        if g == NULL:
            return None
        return Tensor._wrap(self.ctx if self._tctx is None else self._tctx, g, 0)

    def reset(self):
        """Zero the gradients and set the loss gradient to 1 (after allocation)."""
        self._check()
        if not self.grads:
            raise ValueError("the Graph has no gradients (grads=False)")
        cdef int i, k = 0
        cdef ggml_tensor * g
        cdef ggml_tensor * node
        cdef float scratch[64]
        if not _graph_ready(self.ptr):
            raise GGMLError("allocate the graph (Scheduler.alloc) before resetting its gradients")
        lent = []
        try:
            for i in range(ggml_graph_n_nodes(self.ptr)):
                node = ggml_graph_node(self.ptr, i)
                g = ggml_graph_get_grad(self.ptr, node)
                if g == NULL or g.data != NULL:
                    continue
                if node.flags & GGML_TENSOR_FLAG_LOSS and g.buffer == NULL and g.view_src == NULL \
                        and ggml_nelements(g) == 1 and k < 64:
                    # a loss whose gradient no other gradient reads (the parameters
                    # reach it only through sgn or step) has no memory; ggml still
                    # sets it to 1, so lend it a float for that
                    g.data = &scratch[k]
                    k += 1
                    lent.append(<uintptr_t>g)
                    continue
                raise GGMLError("allocate the graph (Scheduler.alloc) before resetting its gradients")
            ggml_graph_reset(self.ptr)
        finally:
            for addr in lent:
                (<ggml_tensor *><uintptr_t>addr).data = NULL


cdef list _graph_contexts(Graph g):
    """The live contexts whose tensors g can reach: those it was built from and
    the ones their tensors' operations refer to."""
    out = []
    todo = list(g._ctxs)
    while todo:
        c = todo.pop()
        if c is None or any(c is o for o in out):
            continue
        out.append(c)
        todo.extend((<Context>c)._dependents_of)
    return [c for c in out if (<Context>c).ptr != NULL]


cdef object _owner_of(uintptr_t addr, list ctxs):
    """The context whose memory pool holds the tensor at addr, or None."""
    cdef uintptr_t base
    for c in ctxs:
        base = <uintptr_t>ggml_get_mem_buffer((<Context>c).ptr)
        if base <= addr < base + ggml_get_mem_size((<Context>c).ptr):
            return c
    return None


cdef bint _graph_ready(ggml_cgraph * g) noexcept nogil:
    """True when every node of g and every tensor it reads has memory: what a
    completed allocation leaves behind.  Anything else (a freed buffer, memory
    taken back by a scheduler) needs a new allocation before compute."""
    cdef int i, j, n = ggml_graph_n_nodes(g)
    cdef ggml_tensor * t
    cdef ggml_tensor * s
    for i in range(n):
        t = ggml_graph_node(g, i)
        if t.data == NULL or (t.view_src != NULL and t.view_src.data == NULL):
            return False
        for j in range(GGML_MAX_SRC):
            s = t.src[j]
            if s != NULL and (s.data == NULL or (s.view_src != NULL and s.view_src.data == NULL)):
                return False
    return True


cdef class Scheduler(_Owner):
    """ggml's backend scheduler over one or more backends; the CPU backend is
    added (last) if missing, and takes the ops the others lack.
    ``Scheduler([backend, ...], graph_size=8192)``.

    The memory the scheduler gives a graph's tensors is its own: the next
    allocation (of any graph, or an OptContext's step) reuses it, and free()
    releases it.  Those tensors are then detached (``Tensor.numpy()`` raises
    until they are computed again) instead of pointing at reused memory."""
    cdef ggml_backend_sched_t ptr
    cdef readonly list backends
    cdef readonly int graph_size
    cdef object _last_graph
    cdef list _given             # (Context, address) of tensors the last alloc gave memory
    cdef int _gen                # bumped by every allocation on this scheduler

    def __init__(self, backends, graph_size=8192, parallel=False):
        if isinstance(backends, Backend):
            backends = [backends]
        try:
            bl = list(backends)
        except TypeError:
            raise TypeError("backends must be a Backend or a list of Backends") from None
        if not bl or not all(isinstance(b, Backend) for b in bl):
            raise TypeError("backends must be a non-empty list of Backend objects")
        for b in bl:
            (<Backend>b)._check()
        if isinstance(graph_size, bool) or not isinstance(graph_size, (int, np.integer)) \
                or not 16 <= graph_size <= (1 << 22):
            raise ValueError("graph_size must be an int between 16 and 2**22")
        cpus = [b for b in bl if (<Backend>b).is_cpu]
        others = [b for b in bl if not (<Backend>b).is_cpu]
        if not cpus:
            cpus = [Backend("cpu")]
        bl = others + cpus[:1]
        if len(bl) > 16:
            raise ValueError("at most 16 backends")
        if len({id(b) for b in bl}) != len(bl):
            raise ValueError("the same Backend is listed twice")
        cdef ggml_backend_t arr[16]
        for i, b in enumerate(bl):
            arr[i] = (<Backend>b).ptr
        cdef int nb = len(bl)
        cdef bint par = bool(parallel)
        cdef size_t gs = <size_t>graph_size
        pyggml_guard_clear()
        with nogil:
            self.ptr = pyggml_sched_new(arr, nb, gs, par)
        if self.ptr == NULL:
            why = _guard_text()
            raise AllocationError(f"could not allocate a Scheduler for graphs of {graph_size} nodes"
                                  + (f" ({why})" if why else ""))
        self.backends = bl
        self.graph_size = graph_size
        self._given = []
        self._gen = 0
        for b in bl:
            (<Backend>b)._add_dependent(self)

    def __dealloc__(self):
        self._dealloc()

    cdef bint _alive(self):
        return self.ptr != NULL

    cdef void _release(self) noexcept:
        try:
            self._take_back()
        except BaseException:
            pass
        ggml_backend_sched_free(self.ptr)
        self.ptr = NULL

    cdef void _forget(self) noexcept:
        self.ptr = NULL

    cdef int _take_back(self) except -1:
        """Detach the tensors the last allocation gave memory to: that memory
        is about to be reused or freed."""
        given = self._given
        self._given = []
        self._last_graph = None
        cdef ggml_tensor * t
        if given is None:
            return 0
        for c, addr in given:
            if c is not None and (<Context>c).ptr != NULL:
                t = <ggml_tensor *><uintptr_t>addr
                t.data = NULL
                t.buffer = NULL
        return 0

    cdef list _lock_for(self, list extra, list ctxs):
        """Hold this scheduler's, its backends', the contexts' and their buffers'
        locks (and extra owners'), in one global order: one compute per backend
        at a time, and no free() of anything the compute uses until it ends."""
        return _acquire_all(extra + self._lock_owners(ctxs))

    cdef list _lock_owners(self, list ctxs):
        return [self] + list(self.backends) + _owners_for(ctxs)

    cdef object _cpu_pool_lock(self):
        for b in self.backends:
            if (<Backend>b).is_cpu:
                return (<Backend>b)._pool_lock()
        return None

    cdef int _check_graph(self, Graph g) except -1:
        self._check()
        g._check()
        cdef int j
        if g.size > self.graph_size:
            raise ValueError(f"graph of size {g.size} exceeds the scheduler's graph_size {self.graph_size}")
        cdef int i
        cdef ggml_tensor * t
        for i in range(ggml_graph_n_nodes(g.ptr)):
            t = ggml_graph_node(g.ptr, i)
            if t.buffer != NULL and t.data == NULL:
                raise GGMLError("the graph uses a tensor whose buffer was freed")
        if ggml_graph_n_nodes(g.ptr) == 0:
            raise ValueError("the graph has no operation to compute: add results of ops with build_forward")
        # a leaf that no operation reads gets no backend from the scheduler,
        # which aborts unless the leaf has memory already
        missing = [a for a in g._leaves if (<ggml_tensor *><uintptr_t>a).data == NULL]
        if missing:
            used = set()
            for i in range(ggml_graph_n_nodes(g.ptr)):
                t = ggml_graph_node(g.ptr, i)
                for j in range(GGML_MAX_SRC):
                    if t.src[j] != NULL:
                        used.add(<uintptr_t>t.src[j])
            for a in missing:
                if a not in used:
                    raise GGMLError(f"the graph holds the tensor {(<ggml_tensor *><uintptr_t>a).name.decode()!r}, "
                                    f"which has no memory and which no operation of the graph uses; "
                                    f"allocate it (BackendBuffer) or leave it out")
        return 0

    cdef int _set_threads(self, int n_threads) except -1:
        cdef int n = n_threads if n_threads > 0 else get_n_threads()
        for b in self.backends:
            (<Backend>b)._use_threads(n)
        return 0

    def reset(self):
        """Forget the current allocation (the next graph is laid out anew)."""
        self._check()
        with self._get_lock():
            self._check()
            self._take_back()
            pyggml_sched_reset(self.ptr)
            self._gen += 1

    cdef int _alloc(self, Graph graph) except -1:
        cdef ggml_cgraph * gp = graph.ptr
        cdef ggml_tensor * t
        cdef ggml_tensor * gr
        cdef int i
        cdef bint ok
        self._take_back()
        # the tensors this allocation will give memory to: those without any
        # now (views: without a buffer), nodes, what they read, and gradients
        seen = set()
        for i in range(ggml_graph_n_nodes(gp)):
            _count_reachable(ggml_graph_node(gp, i), seen)
        if graph.grads:
            for addr in list(seen):
                gr = ggml_graph_get_grad(gp, <ggml_tensor *><uintptr_t>addr)
                if gr != NULL:
                    _count_reachable(gr, seen)
        empty = []
        for addr in seen:
            t = <ggml_tensor *><uintptr_t>addr
            if t.data == NULL or (t.view_src != NULL and t.buffer == NULL):
                empty.append(addr)
        pyggml_sched_reset(self.ptr)
        self._gen += 1
        pyggml_guard_clear()
        with nogil:
            ok = pyggml_sched_alloc_graph(self.ptr, gp)
        ctxs = _graph_contexts(graph)
        given = []
        for addr in empty:
            t = <ggml_tensor *><uintptr_t>addr
            if t.data != NULL:
                given.append((_owner_of(addr, ctxs), addr))
        self._given = given
        if not ok:
            self._take_back()
            why = _guard_text()
            raise AllocationError("the scheduler could not allocate the graph" + (f" ({why})" if why else ""))
        if not _graph_ready(gp):
            self._take_back()
            raise FreedError("the graph uses a tensor whose memory was freed (its BackendBuffer "
                             "or Context); rebuild the graph")
        self._last_graph = graph
        return 0

    def alloc(self, Graph graph not None):
        """Lay out the graph's intermediate tensors in the backends' memory."""
        self._check()
        graph._check()
        ctxs = _graph_contexts(graph)
        taken = self._lock_for([graph], ctxs)
        try:
            self._check_graph(graph)
            self._alloc(graph)
            # an explicit alloc gives tensors whose buffer was freed the scheduler's
            # memory, to be set before compute (like any input without a buffer)
            for c in ctxs:
                if (<Context>c)._freed:
                    (<Context>c)._freed = {a for a in (<Context>c)._freed
                                           if (<ggml_tensor *><uintptr_t>a).data == NULL}
        finally:
            _release_all(taken)

    def compute(self, Graph graph not None, n_threads=None):
        """Run the graph (allocating it first if it is not the one allocated).
        Releases the GIL; Ctrl-C stops it with KeyboardInterrupt."""
        self._check()
        graph._check()
        if n_threads is not None and (isinstance(n_threads, bool) or not isinstance(n_threads, (int, np.integer))
                                      or not 0 <= n_threads <= 1024):
            raise ValueError(f"n_threads must be an int between 1 and 1024 (or None), got {n_threads!r}")
        cdef int nt = 0 if n_threads is None else int(n_threads)
        cdef ggml_status st
        cdef int n_nodes
        cdef long gen = _owners_gen
        cache = graph._compute_cache
        if cache is not None and cache[0] == gen and cache[1] == id(self) and cache[3] == _fork_gen:
            # nothing was freed, made or linked since this graph was checked: the same
            # locks, and the same checks would pass
            taken = _acquire_in_order(cache[2])
            fresh = _owners_gen != gen          # something changed before the locks were held
        else:
            fresh = True
        if fresh:
            if cache is not None and cache[0] == gen and cache[1] == id(self) and cache[3] == _fork_gen:
                _release_all(taken)
            ctxs = _graph_contexts(graph)
            locks = _lock_order([graph] + self._lock_owners(ctxs))
            taken = _acquire_in_order(locks)
        try:
            if fresh:
                # checked under the locks: another thread may have freed something
                self._check_graph(graph)
                _check_freed(ctxs, lambda: _graph_reachable(graph.ptr))
                graph._compute_cache = (_owners_gen, id(self), locks, _fork_gen)   # (an id: no cycle)
            n_nodes = ggml_graph_n_nodes(graph.ptr)
            if graph._row_checks_n != n_nodes:
                graph._row_checks = _collect_row_checks(
                    [<uintptr_t>ggml_graph_node(graph.ptr, i) for i in range(n_nodes)])
                graph._row_checks_n = n_nodes
            self._set_threads(nt)
            if self._last_graph is not graph or not _graph_ready(graph.ptr):
                self._alloc(graph)
            if graph._row_checks:
                _check_row_indices(graph._row_checks)
            pyggml_sigint_arm()
            pyggml_sigint_clear()
            for b in self.backends:
                if (<Backend>b).is_cpu:
                    ggml_backend_cpu_set_abort_callback((<Backend>b).ptr, pyggml_abort_cb, NULL)
            pool_lock = self._cpu_pool_lock()
            if pool_lock is not None:
                pool_lock.acquire()
            pyggml_guard_clear()
            try:
                with nogil:
                    st = pyggml_sched_graph_compute(self.ptr, graph.ptr)
            finally:
                if pool_lock is not None:
                    pool_lock.release()
                for b in self.backends:
                    if (<Backend>b).is_cpu:
                        ggml_backend_cpu_set_abort_callback((<Backend>b).ptr, NULL, NULL)
        finally:
            _release_all(taken)
        if st == GGML_STATUS_ABORTED:
            # the allocation stays valid; a later compute starts afresh
            pyggml_sigint_clear()
        _rpc_check_compute(self.backends, graph.ptr, st)
        _check_status(st, "graph compute")

    def run(self, Graph graph not None, sets=(), reads=(), n_threads=None):
        """One step in one call: copy each (tensor, array) of ``sets`` in, compute the
        graph, return the arrays of the tensors in ``reads`` (a training step, a prediction)."""
        for pair in sets:
            _set_array(<Tensor>pair[0], pair[1])
        self.compute(graph, n_threads)
        return [_get_array(<Tensor>t) for t in reads]

    def run_scalar(self, Graph graph not None, tuple tensors, tuple arrays, Tensor read not None, n_threads=None):
        """``run`` for a training step's hot path: copy ``arrays[i]`` into ``tensors[i]``,
        compute, and return the first value of ``read`` (the loss) as a float."""
        if len(tensors) != len(arrays):
            raise ValueError(f"run_scalar: {len(tensors)} tensors and {len(arrays)} arrays")
        cdef Py_ssize_t i
        for i in range(len(tensors)):
            _set_array(<Tensor?>tensors[i], arrays[i])
        self.compute(graph, n_threads)
        cdef ggml_tensor * p = read._p()
        cdef float v
        if p.type == GGML_TYPE_F32 and p.data != NULL and ggml_nelements(p) >= 1 and \
                (p.view_src == NULL or p.view_src.data != NULL):
            with nogil:
                if p.buffer != NULL:
                    ggml_backend_tensor_get(p, &v, 0, sizeof(float))
                else:
                    v = (<float *>p.data)[0]
            return v
        return float(read.numpy().reshape(-1)[0])

    @property
    def n_splits(self):
        self._check()
        return ggml_backend_sched_get_n_splits(self.ptr)
