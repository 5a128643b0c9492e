# OptContext: ggml-opt's training context (static graphs, AdamW or SGD).

cdef extern from "ggml-opt.h" nogil:
    # ggml/patches/0002: make the next ggml_opt_alloc lay out its graph anew
    void ggml_opt_forget_allocation(ggml_opt_context_t opt_ctx)

_LOSS_TYPES = {"mean": GGML_OPT_LOSS_TYPE_MEAN, "sum": GGML_OPT_LOSS_TYPE_SUM,
               "cross_entropy": GGML_OPT_LOSS_TYPE_CROSS_ENTROPY,
               "mse": GGML_OPT_LOSS_TYPE_MEAN_SQUARED_ERROR}
_OPTIMIZERS = {"adamw": GGML_OPT_OPTIMIZER_TYPE_ADAMW, "sgd": GGML_OPT_OPTIMIZER_TYPE_SGD}


cdef list _reachable_nodes(ggml_tensor * root):
    seen = set()
    _count_reachable(root, seen)
    return list(seen)


cdef int _check_backward_from(ggml_tensor * root) except -1:
    """Like _check_backward, over everything root depends on (before a graph exists)."""
    memo = {}
    cdef ggml_tensor * t
    cdef int j
    for addr in _reachable_nodes(root):
        t = <ggml_tensor *><uintptr_t>addr
        if t.op == GGML_OP_NONE:
            continue
        needs = [t.src[j] != NULL and _needs_grad(t.src[j], memo) for j in range(GGML_MAX_SRC)]
        if not any(needs):
            continue
        if t.op == GGML_OP_UNARY:
            ok = <int>ggml_get_unary_op(t) in _BACKWARD_UNARY
        else:
            ok = <int>t.op in _BACKWARD_OPS
        if not ok:
            raise GGMLError(f"ggml has no backward pass for {(<bytes>ggml_op_desc(t)).decode()} "
                            f"(tensor {t.name.decode()!r}); build it from ops that have one")
        if t.type != GGML_TYPE_F32:
            raise TypeError("backward pass needs f32 tensors")
        if t.op == GGML_OP_IM2COL and needs[0]:
            raise GGMLError("im2col's kernel argument must not be a parameter (only its shape is used)")
        if t.op in (GGML_OP_SOFT_MAX, GGML_OP_GET_ROWS, GGML_OP_CROSS_ENTROPY_LOSS) and needs[1]:
            raise GGMLError(f"ggml has no gradient for the second argument of {(<bytes>ggml_op_desc(t)).decode()}")
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


cdef list _opt_contexts(Context ctx):
    """ctx and the live contexts its tensors refer to."""
    out = []
    todo = [ctx]
    while todo:
        c = todo.pop()
        if c is None or any(c is o for o in out):
            continue
        out.append(c)
        todo.extend((<Context>c)._dependents_of)
    return [c for c in out if (<Context>c).ptr != NULL]


cdef int _check_hparams(float lr, float beta1, float beta2, float eps, float wd) except -1:
    if not lr > 0 or lr != lr or lr == float("inf"):
        raise ValueError(f"learning_rate must be a positive finite number, got {lr}")
    if not 0.0 <= beta1 <= 1.0 or not 0.0 <= beta2 <= 1.0:
        raise ValueError("beta_1 and beta_2 must be in [0, 1]")
    if not eps >= 0:
        raise ValueError("epsilon must be >= 0")
    if not 0.0 <= wd <= 1.0:
        raise ValueError("weight_decay must be in [0, 1]")
    return 0


cdef class OptContext(_Owner):
    """ggml-opt's training context over a static forward graph.

    ``OptContext(sched, ctx_compute, inputs, outputs, loss="sum",
    optimizer="adamw", opt_period=1, learning_rate=1e-3, beta_1=0.9,
    beta_2=0.999, epsilon=1e-8, weight_decay=0.0)``

    ``inputs`` must already have memory (static graphs); other leaf tensors of
    ``ctx_compute`` get theirs from the scheduler and are set between
    ``alloc()`` and ``eval()``.  ``outputs`` is reduced by ``loss`` ("sum",
    "mean", "cross_entropy" or "mse" against ``labels``).  Hyper-parameters
    can change at any step (ggml-opt reads them through its get_opt_pars
    callback).  The Adam moments and the step counter are readable and
    writable (``get_state``/``set_state``) for saving and resuming.
    """
    cdef ggml_opt_context_t ptr
    cdef pyggml_opt_hparams hp
    cdef readonly Scheduler sched
    cdef readonly Context ctx_compute
    cdef readonly Tensor inputs
    cdef readonly Tensor outputs
    cdef readonly str optimizer
    cdef readonly str loss_type
    cdef readonly int opt_period
    cdef readonly int graph_size
    cdef list _params
    cdef bint _ready
    cdef bint _ready_backward
    cdef int _sched_gen          # the scheduler's allocation count after our last alloc
    cdef set _reach              # addresses of every tensor the forward graph reads
    cdef list _row_checks        # get_rows indices to check before each eval
    cdef long _epoch             # _buffer_epoch at the last alloc

    def __init__(self, Scheduler sched not None, Context ctx_compute not None, Tensor inputs not None,
                 Tensor outputs not None, loss="sum", optimizer="adamw", opt_period=1,
                 learning_rate=1e-3, beta_1=0.9, beta_2=0.999, epsilon=1e-8, weight_decay=0.0,
                 graph_size=None):
        sched._check()
        ctx_compute._check()
        inputs._check()
        outputs._check()
        if loss not in _LOSS_TYPES:
            raise ValueError(f"loss must be one of {sorted(_LOSS_TYPES)}, got {loss!r}")
        if optimizer not in _OPTIMIZERS:
            raise ValueError(f"optimizer must be 'adamw' or 'sgd', got {optimizer!r}")
        if isinstance(opt_period, bool) or not isinstance(opt_period, (int, np.integer)) or not 1 <= opt_period <= 1 << 20:
            raise ValueError(f"opt_period must be a positive int, got {opt_period!r}")
        _check_hparams(learning_rate, beta_1, beta_2, epsilon, weight_decay)
        if inputs.ptr.data == NULL:
            raise ValueError("inputs must have memory already (allocate them with a BackendBuffer)")
        if outputs.ptr.type != GGML_TYPE_F32:
            raise TypeError("outputs must be f32")
        if outputs.ctx is not ctx_compute:
            raise ValueError("outputs must be made in ctx_compute")
        nodes = _reachable_nodes(outputs.ptr)
        if <uintptr_t>inputs.ptr not in nodes:
            raise ValueError("outputs do not depend on inputs")
        params = [a for a in nodes if (<ggml_tensor *><uintptr_t>a).flags & GGML_TENSOR_FLAG_PARAM]
        if not params:
            raise ValueError("outputs depend on no parameter (mark weights with Tensor.set_param())")
        for a in params:
            if (<ggml_tensor *><uintptr_t>a).data == NULL:
                raise ValueError("every parameter must have memory (allocate the weights first)")
        _check_backward_from(outputs.ptr)
        cdef int n = len(nodes)
        cdef int gsize = max(GGML_DEFAULT_GRAPH_SIZE, 6 * n + 2 * len(params) + 64) if graph_size is None else int(graph_size)
        if gsize < 4 * n + len(params) + 32:
            raise ValueError(f"graph_size {gsize} is too small for {n} tensors")
        if gsize > sched.graph_size:
            raise GGMLError(f"the scheduler's graph_size ({sched.graph_size}) is too small for the "
                             f"{gsize} this model needs; create it with graph_size >= {gsize}")
        cdef size_t need = 3 * ggml_graph_overhead_custom(<size_t>gsize, True) + \
            <size_t>(4 * n + 2 * len(params) + 64) * ggml_tensor_overhead()
        if ggml_used_mem(ctx_compute.ptr) + need > ggml_get_mem_size(ctx_compute.ptr):
            raise ContextFullError(f"ctx_compute is too small for training: {need} more bytes needed "
                                  f"(create it with graph_size={gsize} and n_tensors >= {5 * n + 2 * len(params) + 64})")
        if loss in ("cross_entropy", "mse") and outputs.ptr.ne[2] * outputs.ptr.ne[3] != 1:
            raise ValueError(f"loss {loss!r} needs 2-D outputs")
        self.hp.alpha = learning_rate
        self.hp.beta1 = beta_1
        self.hp.beta2 = beta_2
        self.hp.eps = epsilon
        self.hp.wd = weight_decay
        cdef ggml_opt_params p = ggml_opt_default_params(sched.ptr, <ggml_opt_loss_type>_LOSS_TYPES[loss])
        p.ctx_compute = ctx_compute.ptr
        p.inputs = inputs.ptr
        p.outputs = outputs.ptr
        p.build_type = GGML_OPT_BUILD_TYPE_OPT
        p.opt_period = opt_period
        p.get_opt_pars = pyggml_get_opt_pars
        p.get_opt_pars_ud = &self.hp
        p.optimizer = <ggml_opt_optimizer_type>_OPTIMIZERS[optimizer]
        p.graph_size = gsize
        row_checks = _collect_row_checks(nodes)
        pyggml_guard_clear()
        with nogil:
            self.ptr = pyggml_opt_init(p)
        if self.ptr == NULL:
            why = _guard_text()
            raise AllocationError("could not allocate the optimizer's state (ggml_opt_init)"
                                  + (f": {why}" if why else ""))
        self.sched = sched
        self.ctx_compute = ctx_compute
        self.inputs = inputs
        self.outputs = outputs
        self.optimizer = optimizer
        self.loss_type = loss
        self.opt_period = opt_period
        self.graph_size = gsize
        self._params = [Tensor._wrap(outputs.ctx, <ggml_tensor *><uintptr_t>a, 0) for a in params]
        self._ready = False
        self._sched_gen = -1
        self._reach = set(nodes)
        self._row_checks = row_checks
        self._epoch = _buffer_epoch
        sched._add_dependent(self)
        ctx_compute._add_dependent(self)

    def __dealloc__(self):
        self._dealloc()

    cdef bint _alive(self):
        return self.ptr != NULL

    cdef void _release(self) noexcept:
        ggml_opt_free(self.ptr)
        self.ptr = NULL

    cdef void _forget(self) noexcept:
        self.ptr = NULL

    # --- hyper-parameters ---------------------------------------------------
    @property
    def learning_rate(self):
        return float(self.hp.alpha)

    @learning_rate.setter
    def learning_rate(self, value):
        self.set_hparams(learning_rate=value)

    def set_hparams(self, learning_rate=None, beta_1=None, beta_2=None, epsilon=None, weight_decay=None):
        """Change the optimizer's hyper-parameters from the next step on."""
        self._check()
        lr = self.hp.alpha if learning_rate is None else float(learning_rate)
        b1 = self.hp.beta1 if beta_1 is None else float(beta_1)
        b2 = self.hp.beta2 if beta_2 is None else float(beta_2)
        ep = self.hp.eps if epsilon is None else float(epsilon)
        wd = self.hp.wd if weight_decay is None else float(weight_decay)
        _check_hparams(lr, b1, b2, ep, wd)
        self.hp.alpha, self.hp.beta1, self.hp.beta2, self.hp.eps, self.hp.wd = lr, b1, b2, ep, wd

    # --- running --------------------------------------------------------------
    cdef list _lock_all(self):
        """Hold this context's, the scheduler's, its backends', and every
        context's and buffer's lock that the graph uses (see Scheduler._lock_for)."""
        cdef Scheduler sched = self.sched
        sched._check()
        ctxs = _opt_contexts(self.ctx_compute)
        taken = sched._lock_for([self], ctxs)
        try:
            self._check()
            sched._check()
            _check_freed(ctxs, self._reach)
        except BaseException:
            _release_all(taken)
            raise
        return taken

    def alloc(self, backward=True):
        """Lay out the next graph: forward only, or forward+backward(+optimizer
        step, every opt_period-th call)."""
        self._check()
        if self._ready:
            raise GGMLError("alloc() was already called; call eval() first")
        cdef bint bw = bool(backward)
        cdef Scheduler sched = self.sched
        cdef ggml_status st
        taken = self._lock_all()
        try:
            if sched._gen != self._sched_gen or self._epoch != _buffer_epoch:
                # the scheduler laid out other graphs since (its memory is reused),
                # or tensors got new memory: ggml-opt must lay out its graph again
                # (and the tensors the scheduler gave memory to lose it)
                sched._take_back()
                ggml_opt_forget_allocation(self.ptr)
            pyggml_guard_clear()
            with nogil:
                st = pyggml_opt_alloc(self.ptr, bw)
            sched._gen += 1
            sched._last_graph = None
            if st != GGML_STATUS_SUCCESS:
                sched._take_back()
                self._sched_gen = -1
                why = _guard_text()
                raise AllocationError("could not allocate the training graph"
                                      + (f" ({why})" if why else "")
                                      + "; free other models or use smaller batches")
            self._sched_gen = sched._gen
            self._epoch = _buffer_epoch
            self._ready = True
            self._ready_backward = bool(backward)
        finally:
            _release_all(taken)

    def eval(self, n_threads=None):
        """Run the graph laid out by alloc(); returns the loss."""
        self._check()
        if not self._ready:
            raise GGMLError("call alloc() before eval()")
        if n_threads is not None and (isinstance(n_threads, bool) or not isinstance(n_threads, (int, np.integer))
                                      or not 0 <= n_threads <= 1024):
            raise ValueError(f"n_threads must be an int between 1 and 1024 (or None), got {n_threads!r}")
        cdef Scheduler sched = self.sched
        cdef ggml_status st
        sched._check()
        taken = self._lock_all()
        try:
            if sched._gen != self._sched_gen or self._epoch != _buffer_epoch:
                ggml_opt_forget_allocation(self.ptr)
                self._ready = False
                raise GGMLError("the Scheduler laid out another graph (or a buffer was made or "
                                "freed) between alloc() and eval(); call alloc() again")
            try:
                if self._row_checks:
                    _check_row_indices(self._row_checks)
                sched._set_threads(0 if n_threads is None else int(n_threads))
            except BaseException:
                # nothing ran: the next alloc() starts afresh
                ggml_opt_forget_allocation(self.ptr)
                self._ready = False
                raise
            pool_lock = sched._cpu_pool_lock()
            if pool_lock is not None:
                pool_lock.acquire()
            pyggml_guard_clear()
            try:
                with nogil:
                    st = pyggml_opt_eval(self.ptr)
            finally:
                if pool_lock is not None:
                    pool_lock.release()
            self._ready = False
            if st != GGML_STATUS_SUCCESS:
                sched._take_back()
                self._sched_gen = -1
                why = _guard_text()
                if st == GGML_STATUS_ALLOC_FAILED:
                    raise AllocationError("ggml could not allocate memory for the training step"
                                          + (f" ({why})" if why else ""))
                _check_status(st, "training step")
            _rpc_check_opt(sched.backends, self._params)
            return self._loss()
        finally:
            _release_all(taken)

    def step(self, n_threads=None):
        """alloc(backward=True) + eval(): one training batch."""
        self.alloc(True)
        return self.eval(n_threads)

    def forward(self, n_threads=None):
        """alloc(backward=False) + eval(): the loss without training."""
        self.alloc(False)
        return self.eval(n_threads)

    def loss(self):
        """The loss of the last eval() (as ggml-opt reports it)."""
        with self._get_lock():
            return self._loss()

    cdef object _loss(self):
        self._check()
        cdef ggml_tensor * t = ggml_opt_loss(self.ptr)
        cdef float v = 0
        if t == NULL or t.data == NULL:
            raise GGMLError("no loss computed yet")
        with nogil:
            ggml_backend_tensor_get(t, &v, 0, sizeof(float))
        _rpc_check_tensor(t)
        return float(v)

    def read(self, Tensor t not None):
        """The value of a tensor of the forward graph after the last eval()
        (mark it with set_output() before the OptContext is made, so that its
        memory is kept).  For inputs and weights use Tensor.numpy()."""
        self._check()
        t._check()
        if self._ready:
            raise GGMLError("read() between alloc() and eval()")
        if self.sched._gen != self._sched_gen:
            raise GGMLError("the Scheduler laid out another graph since the last eval(): "
                            "its values are gone")
        cdef ggml_tensor * c = ggml_opt_get_node_copy(self.ptr, t.ptr)
        if c == NULL or c.data == NULL:
            raise GGMLError("that tensor was not computed by the last eval()")
        if not (t.ptr.flags & GGML_TENSOR_FLAG_OUTPUT) and c.op != GGML_OP_NONE:
            raise GGMLError("mark the tensor with set_output() before creating the OptContext")
        if c.type != GGML_TYPE_F32 or not ggml_is_contiguous(c):
            raise TypeError("read() returns contiguous f32 tensors only")
        # the copy fills an array of t's shape: anything else would write past it
        if c.type != t.ptr.type or not ggml_are_same_shape(c, t.ptr):
            raise GGMLError(f"ggml-opt paired {t.name!r} with a copy of another shape or type")
        cdef cnp.ndarray arr = np.empty(t.shape, dtype=np.float32)
        ggml_backend_tensor_get(c, cnp.PyArray_DATA(arr), 0, ggml_nbytes(c))
        _rpc_check_tensor(c)
        return arr

    def set_labels(self, array):
        """Set the labels (cross_entropy and mse losses)."""
        self._check()
        cdef ggml_tensor * t = ggml_opt_labels(self.ptr)
        if t == NULL:
            raise ValueError(f"loss {self.loss_type!r} takes no labels")
        shape = tuple(int(t.ne[i]) for i in range(ggml_n_dims(t) - 1, -1, -1))
        cdef cnp.ndarray arr = _as_array(array, np.float32, shape)
        ggml_backend_tensor_set(t, cnp.PyArray_DATA(arr), 0, ggml_nbytes(t))
        _rpc_check_tensor(t)

    def reset(self, optimizer=True):
        """Zero the gradients; with optimizer=True also the moments and the step counter."""
        self._check()
        if self._ready:
            raise GGMLError("cannot reset between alloc() and eval()")
        ggml_opt_reset(self.ptr, bool(optimizer))

    @property
    def iter(self):
        """ggml-opt's step counter t (1 before the first optimizer step)."""
        self._check()
        return int(ggml_opt_get_iter(self.ptr))

    @iter.setter
    def iter(self, value):
        self._check()
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError("iter must be an int >= 1")
        ggml_opt_set_iter(self.ptr, value)

    @property
    def accumulation_index(self):
        """How many physical batches of the current accumulation period ran."""
        self._check()
        return int(ggml_opt_get_opt_i(self.ptr))

    @property
    def params(self):
        self._check()
        return list(self._params)

    cdef ggml_tensor * _state_tensor(self, Tensor p, int which) except? NULL:
        self._check()
        p._check()
        if p not in self._params:
            raise ValueError("not a parameter of this OptContext")
        if which == 0:
            return ggml_opt_grad_m(self.ptr, p.ptr)
        return ggml_opt_grad_v(self.ptr, p.ptr)

    def get_state(self):
        """{'iter': t, 'm': [array per param], 'v': [...]} (AdamW; SGD has no moments)."""
        self._check()
        ms, vs = [], []
        cdef ggml_tensor * t
        for p in self._params:
            for which, out in ((0, ms), (1, vs)):
                t = self._state_tensor(p, which)
                if t == NULL or t.data == NULL:
                    out.append(None)
                    continue
                a = np.empty(int(ggml_nelements(t)), dtype=np.float32)
                ggml_backend_tensor_get(t, cnp.PyArray_DATA(a), 0, ggml_nbytes(t))
                _rpc_check_tensor(t)
                out.append(a.reshape((<Tensor>p).shape))
        return {"iter": self.iter, "m": ms, "v": vs}

    def set_state(self, state):
        """Restore what get_state() returned (shapes must match)."""
        self._check()
        if not isinstance(state, dict) or "iter" not in state:
            raise TypeError("state must be a dict as returned by get_state()")
        ms, vs = state.get("m"), state.get("v")
        if ms is not None and len(ms) != len(self._params) or vs is not None and len(vs) != len(self._params):
            raise ValueError("state has a different number of parameters")
        cdef ggml_tensor * t
        cdef cnp.ndarray a
        for i, p in enumerate(self._params):
            for which, src in ((0, ms), (1, vs)):
                if src is None or src[i] is None:
                    continue
                t = self._state_tensor(p, which)
                if t == NULL or t.data == NULL:
                    continue
                a = _as_array(src[i], np.float32, (<Tensor>p).shape)
                ggml_backend_tensor_set(t, cnp.PyArray_DATA(a), 0, ggml_nbytes(t))
                _rpc_check_tensor(t)
        self.iter = int(state["iter"])
