# ggml's operations over Tensors.  Every function checks shapes, types and the
# context's room before it calls C, because ggml aborts the process on a
# failed assertion.  Axes and dims are ggml's (0 = innermost, numpy's last);
# results go into the first argument's context unless ctx= is given.

cdef inline Context _pick_ctx(Tensor a, object ctx):
    a._check()
    if ctx is None:
        ctx = _active_context()
        if ctx is None:
            return a.ctx
        (<Context>ctx)._check()
        return <Context>ctx
    if not isinstance(ctx, Context):
        raise TypeError("ctx must be a Context")
    (<Context>ctx)._check()
    return <Context>ctx


cdef int _link(Context ctx, Tensor t) except -1:
    """ctx's tensors now refer to t: keep t's context alive, and have it free
    ctx first if it is freed explicitly."""
    t._check()
    if t.ctx is not ctx and t.ctx not in ctx._dependents_of:
        ctx._dependents_of.append(t.ctx)
        t.ctx._add_dependent(ctx)
        _owners_changed()
    return 0


cdef Tensor _out(Context ctx, ggml_tensor * r, int ndim, tuple srcs):
    _check_ptr(r, "ggml operation")
    cdef int j
    if r.type == GGML_TYPE_I32:
        # an integer result (argmax, a cast to i32) passes no gradient, as in TensorFlow: the
        # backward pass stops there (patch 0037's flag) instead of meeting an i32 gradient
        for j in range(GGML_MAX_SRC):
            if r.src[j] != NULL and r.src[j].type != GGML_TYPE_I32:
                r.flags = r.flags | GGML_TENSOR_FLAG_NO_GRAD
                break
    for s in srcs:
        if s is not None:
            _link(ctx, <Tensor>s)
    return Tensor._wrap(ctx, r, ndim)


cdef inline int _need_f32(Tensor t, str what) except -1:
    if t.ptr.type != GGML_TYPE_F32:
        raise TypeError(f"{what}: expected an f32 tensor, got {t.dtype}")
    return 0


cdef inline int _need_contiguous(Tensor t, str what) except -1:
    if not ggml_is_contiguous(t.ptr):
        raise ValueError(f"{what}: expected a contiguous tensor (use ops.cont first)")
    return 0


cdef inline int _need_dense_rows(Tensor t, str what) except -1:
    # ggml's CPU kernels of these ops read each row as consecutive elements
    # (a column slice is fine, a transposed view is not) and abort otherwise
    if t.ptr.nb[0] != ggml_type_size(t.ptr.type):
        raise ValueError(f"{what}: expected rows of consecutive elements, not a transposed view "
                         f"(use ops.cont first)")
    return 0


cdef inline int _nd(Tensor a):
    return max(ggml_n_dims(a.ptr), a._ndim)


cdef int _prep(Context ctx, size_t data_bytes=0) except -1:
    return ctx._reserve(_TENSOR_SLACK, data_bytes)


# --- element-wise -------------------------------------------------------------

cdef Tensor _binary(int which, Tensor a, Tensor b, object ctx):
    cdef Context c = _pick_ctx(a, ctx)
    b._check()
    names = {0: "add", 1: "sub", 2: "mul", 3: "div"}
    _need_f32(a, names[which])
    _need_f32(b, names[which])
    _need_dense_rows(a, names[which])
    cdef int i
    for i in range(4):
        if a.ptr.ne[i] % b.ptr.ne[i] != 0:
            raise ValueError(f"{names[which]}: shape {b.shape} does not broadcast to {a.shape} "
                             f"(each of b's extents must divide a's)")
    _prep(c, ggml_nbytes(a.ptr))
    cdef ggml_tensor * r
    if which == 0:
        r = ggml_add(c.ptr, a.ptr, b.ptr)
    elif which == 1:
        r = ggml_sub(c.ptr, a.ptr, b.ptr)
    elif which == 2:
        r = ggml_mul(c.ptr, a.ptr, b.ptr)
    else:
        r = ggml_div(c.ptr, a.ptr, b.ptr)
    return _out(c, r, max(_nd(a), _nd(b)), (a, b))


def add(Tensor a not None, Tensor b not None, ctx=None):
    """a + b, b broadcast (repeated) to a's shape."""
    return _binary(0, a, b, ctx)

def sub(Tensor a not None, Tensor b not None, ctx=None):
    """a - b, b broadcast to a's shape."""
    return _binary(1, a, b, ctx)

def mul(Tensor a not None, Tensor b not None, ctx=None):
    """a * b element-wise, b broadcast to a's shape."""
    return _binary(2, a, b, ctx)

def div(Tensor a not None, Tensor b not None, ctx=None):
    """a / b element-wise, b broadcast to a's shape."""
    return _binary(3, a, b, ctx)


_UNARY = ("sqr", "sqrt", "log", "exp", "abs", "sgn", "neg", "step", "relu", "silu",
          "softplus", "tanh", "sigmoid", "gelu", "elu", "sin", "cos")


cdef Tensor _unary(str name, Tensor a, object ctx):
    cdef Context c = _pick_ctx(a, ctx)
    _need_f32(a, name)
    _need_contiguous(a, name)
    _prep(c, ggml_nbytes(a.ptr))
    cdef ggml_tensor * r
    cdef ggml_context * p = c.ptr
    if name == "sqr": r = ggml_sqr(p, a.ptr)
    elif name == "sqrt": r = ggml_sqrt(p, a.ptr)
    elif name == "log": r = ggml_log(p, a.ptr)
    elif name == "exp": r = ggml_exp(p, a.ptr)
    elif name == "abs": r = ggml_abs(p, a.ptr)
    elif name == "sgn": r = ggml_sgn(p, a.ptr)
    elif name == "neg": r = ggml_neg(p, a.ptr)
    elif name == "step": r = ggml_step(p, a.ptr)
    elif name == "relu": r = ggml_relu(p, a.ptr)
    elif name == "silu": r = ggml_silu(p, a.ptr)
    elif name == "softplus": r = ggml_softplus(p, a.ptr)
    elif name == "tanh": r = ggml_tanh(p, a.ptr)
    elif name == "sigmoid": r = ggml_sigmoid(p, a.ptr)
    elif name == "gelu": r = ggml_gelu(p, a.ptr)
    elif name == "elu": r = ggml_elu(p, a.ptr)
    elif name == "sin": r = ggml_sin(p, a.ptr)
    elif name == "cos": r = ggml_cos(p, a.ptr)
    else:
        raise ValueError(f"unknown unary op {name!r}")
    return _out(c, r, _nd(a), (a,))


def sqr(Tensor a not None, ctx=None): return _unary("sqr", a, ctx)
def sqrt(Tensor a not None, ctx=None): return _unary("sqrt", a, ctx)
def log(Tensor a not None, ctx=None): return _unary("log", a, ctx)
def exp(Tensor a not None, ctx=None): return _unary("exp", a, ctx)
def abs(Tensor a not None, ctx=None): return _unary("abs", a, ctx)
def sgn(Tensor a not None, ctx=None): return _unary("sgn", a, ctx)
def neg(Tensor a not None, ctx=None): return _unary("neg", a, ctx)
def step(Tensor a not None, ctx=None): return _unary("step", a, ctx)
def relu(Tensor a not None, ctx=None): return _unary("relu", a, ctx)
def silu(Tensor a not None, ctx=None): return _unary("silu", a, ctx)
def softplus(Tensor a not None, ctx=None): return _unary("softplus", a, ctx)
def tanh(Tensor a not None, ctx=None):
    """tanh (forward only in ggml: no backward pass)."""
    return _unary("tanh", a, ctx)
def sigmoid(Tensor a not None, ctx=None):
    """sigmoid (forward only in ggml: no backward pass)."""
    return _unary("sigmoid", a, ctx)
def gelu(Tensor a not None, ctx=None):
    """gelu, tanh approximation (forward only in ggml)."""
    return _unary("gelu", a, ctx)
def elu(Tensor a not None, ctx=None):
    """elu with alpha 1 (forward only in ggml)."""
    return _unary("elu", a, ctx)
def sin(Tensor a not None, ctx=None): return _unary("sin", a, ctx)
def cos(Tensor a not None, ctx=None): return _unary("cos", a, ctx)


def leaky_relu(Tensor a not None, float negative_slope=0.01, ctx=None):
    """max(a, 0) + negative_slope * min(a, 0) (forward only in ggml)."""
    cdef Context c = _pick_ctx(a, ctx)
    _need_f32(a, "leaky_relu")
    _prep(c, ggml_nbytes(a.ptr))
    return _out(c, ggml_leaky_relu(c.ptr, a.ptr, negative_slope, False), _nd(a), (a,))


def scale(Tensor a not None, float s, ctx=None):
    """a * s."""
    cdef Context c = _pick_ctx(a, ctx)
    _need_f32(a, "scale")
    _need_contiguous(a, "scale")
    _prep(c, ggml_nbytes(a.ptr))
    return _out(c, ggml_scale(c.ptr, a.ptr, s), _nd(a), (a,))


def scale_bias(Tensor a not None, float s, float b, ctx=None):
    """a * s + b (the backward pass scales by s)."""
    cdef Context c = _pick_ctx(a, ctx)
    _need_f32(a, "scale_bias")
    _need_contiguous(a, "scale_bias")
    _prep(c, ggml_nbytes(a.ptr))
    return _out(c, ggml_scale_bias(c.ptr, a.ptr, s, b), _nd(a), (a,))


def clamp(Tensor a not None, float min, float max, ctx=None):
    """Clip to [min, max] (forward only in ggml)."""
    cdef Context c = _pick_ctx(a, ctx)
    _need_f32(a, "clamp")
    _need_dense_rows(a, "clamp")
    if not min <= max:
        raise ValueError("clamp: min must be <= max")
    _prep(c, ggml_nbytes(a.ptr))
    return _out(c, ggml_clamp(c.ptr, a.ptr, min, max), _nd(a), (a,))


# --- reductions -----------------------------------------------------------------

def sum(Tensor a not None, ctx=None):
    """The sum of all elements (a 1-element tensor)."""
    cdef Context c = _pick_ctx(a, ctx)
    _need_f32(a, "sum")
    _prep(c, 4)
    return _out(c, ggml_sum(c.ptr, a.ptr), 1, (a,))

def sum_rows(Tensor a not None, ctx=None):
    """Sum over ggml dim 0 (numpy's last axis), kept with extent 1."""
    cdef Context c = _pick_ctx(a, ctx)
    _need_f32(a, "sum_rows")
    _need_dense_rows(a, "sum_rows")
    _prep(c, ggml_nbytes(a.ptr))
    return _out(c, ggml_sum_rows(c.ptr, a.ptr), _nd(a), (a,))

def mean(Tensor a not None, ctx=None):
    """Mean over ggml dim 0 (numpy's last axis), kept with extent 1."""
    cdef Context c = _pick_ctx(a, ctx)
    _need_f32(a, "mean")
    _prep(c, ggml_nbytes(a.ptr))
    return _out(c, ggml_mean(c.ptr, a.ptr), _nd(a), (a,))

def argmax(Tensor a not None, ctx=None):
    """Index of the maximum of each row (i32), for matrices."""
    cdef Context c = _pick_ctx(a, ctx)
    _need_f32(a, "argmax")
    if a.ptr.ne[2] != 1 or a.ptr.ne[3] != 1:
        raise ValueError("argmax: expected a matrix (at most 2 dimensions)")
    _prep(c, 4 * a.ptr.ne[1])
    return _out(c, ggml_argmax(c.ptr, a.ptr), 1, (a,))


def argsort(Tensor a not None, descending=False, ctx=None):
    """The indices (i32) that sort each row (the first axis of ggml, numpy's last) of a
    contiguous f32 tensor, ascending or descending; equal values keep their order and NaN
    comes last (pyggml's patch 0044).  No gradient."""
    cdef Context c = _pick_ctx(a, ctx)
    _need_f32(a, "argsort")
    if not ggml_is_contiguous(a.ptr):
        raise ValueError("argsort: expected a contiguous tensor")
    if a.ptr.ne[0] > 2147483647:
        raise ValueError("argsort: a row is longer than 2**31 - 1")
    _prep(c, ggml_nbytes(a.ptr))
    return _out(c, ggml_argsort(c.ptr, a.ptr, GGML_SORT_ORDER_DESC if descending else GGML_SORT_ORDER_ASC),
                _nd(a), (a,))


def repeat(Tensor a not None, Tensor b not None, ctx=None):
    """a repeated to b's shape (each of a's extents divides b's)."""
    cdef Context c = _pick_ctx(a, ctx)
    b._check()
    if not ggml_can_repeat(a.ptr, b.ptr):
        raise ValueError(f"repeat: {a.shape} does not repeat to {b.shape}")
    _need_dense_rows(a, "repeat")
    _prep(c, ggml_nbytes(b.ptr))
    return _out(c, ggml_repeat(c.ptr, a.ptr, b.ptr), _nd(b), (a, b))


def concat(Tensor a not None, Tensor b not None, int dim=0, ctx=None):
    """a and b joined along ggml dim (forward only in ggml)."""
    cdef Context c = _pick_ctx(a, ctx)
    b._check()
    if not 0 <= dim < 4:
        raise ValueError("concat: dim must be 0..3 (ggml order)")
    if a.ptr.type != b.ptr.type:
        raise TypeError("concat: tensors must have the same type")
    for i in range(4):
        if i != dim and a.ptr.ne[i] != b.ptr.ne[i]:
            raise ValueError(f"concat: shapes {a.shape} and {b.shape} differ outside dim {dim}")
    _prep(c, ggml_nbytes(a.ptr) + ggml_nbytes(b.ptr))
    return _out(c, ggml_concat(c.ptr, a.ptr, b.ptr, dim), max(_nd(a), _nd(b), dim + 1), (a, b))


# --- normalisation, matrices ----------------------------------------------------

def norm(Tensor a not None, float eps=1e-5, ctx=None):
    """(a - mean) / sqrt(var + eps) over ggml dim 0 (forward only in ggml)."""
    cdef Context c = _pick_ctx(a, ctx)
    _need_f32(a, "norm")
    if not eps >= 0:
        raise ValueError("norm: eps must be >= 0")
    _prep(c, ggml_nbytes(a.ptr))
    return _out(c, ggml_norm(c.ptr, a.ptr, eps), _nd(a), (a,))

def rms_norm(Tensor a not None, float eps=1e-6, ctx=None):
    """a / sqrt(mean(a^2) + eps) over ggml dim 0."""
    cdef Context c = _pick_ctx(a, ctx)
    _need_f32(a, "rms_norm")
    _need_dense_rows(a, "rms_norm")
    if not eps >= 0:
        raise ValueError("rms_norm: eps must be >= 0")
    _prep(c, ggml_nbytes(a.ptr))
    return _out(c, ggml_rms_norm(c.ptr, a.ptr, eps), _nd(a), (a,))


def mul_mat(Tensor a not None, Tensor b not None, ctx=None):
    """ggml's matrix product: rows of a dotted with rows of b.  With a of
    numpy shape (m, k) and b of (n, k) the result is (n, m) = b @ a.T;
    a's batch dims broadcast over b's."""
    cdef Context c = _pick_ctx(a, ctx)
    b._check()
    if a.ptr.type not in (GGML_TYPE_F32, GGML_TYPE_F16) or b.ptr.type != GGML_TYPE_F32:
        raise TypeError("mul_mat: a must be f32 or f16 and b f32")
    if a.ptr.ne[0] != b.ptr.ne[0]:
        raise ValueError(f"mul_mat: inner extents differ: {a.shape} and {b.shape} (last axes must match)")
    if b.ptr.ne[2] % a.ptr.ne[2] != 0 or b.ptr.ne[3] % a.ptr.ne[3] != 0:
        raise ValueError(f"mul_mat: batch dims of {a.shape} do not broadcast over {b.shape}")
    if ggml_is_transposed(a.ptr):
        raise ValueError("mul_mat: a must not be transposed (use ops.cont)")
    _need_dense_rows(b, "mul_mat")
    _prep(c, 4 * a.ptr.ne[1] * b.ptr.ne[1] * b.ptr.ne[2] * b.ptr.ne[3])
    return _out(c, ggml_mul_mat(c.ptr, a.ptr, b.ptr), max(_nd(a), _nd(b)), (a, b))


def matmul(Tensor a not None, Tensor b not None, ctx=None):
    """numpy's ``a @ b``: a of shape (..., n, k) times b of (k, m), or of
    (..., k, m) with a's batch dims; the result is (..., n, m).  Built from
    mul_mat (b transposed, a 2-D weight applied to the rows of a), so it trains."""
    cdef Context c = _pick_ctx(a, ctx)
    b._check()
    # (the core compiles without wraparound: no negative indices here)
    sa, sb = list(a.shape), list(b.shape)
    cdef int ra = len(sa), rb = len(sb)
    if ra < 2 or rb < 2:
        raise ValueError(f"matmul: both operands need at least 2 dims, got {tuple(sa)} and {tuple(sb)}")
    if sa[ra - 1] != sb[rb - 2]:
        raise ValueError(f"matmul: {tuple(sa)} @ {tuple(sb)}: the last axis of a must equal the second-to-last "
                         f"of b")
    bt = cont(transpose(b, ctx=c), ctx=c)                 # (..., m, k)
    if rb == 2:
        lead = sa[:ra - 1]
        rows = 1
        for d in lead:
            rows *= d
        a2 = a if a.is_contiguous else cont(a, ctx=c)
        if ra > 2:
            a2 = reshape(a2, (rows, sa[ra - 1]), ctx=c)
        r = mul_mat(bt, a2, ctx=c)
        return reshape(r, tuple(lead) + (sb[1],), ctx=c) if ra > 2 else r
    if sa[:ra - 2] != sb[:rb - 2]:
        raise ValueError(f"matmul: batch dims differ: {tuple(sa)} and {tuple(sb)} (a 2-D b broadcasts; "
                         f"batched ones must match)")
    return mul_mat(bt, a if a.is_contiguous else cont(a, ctx=c), ctx=c)


def out_prod(Tensor a not None, Tensor b not None, ctx=None):
    """Sum of outer products over ggml dim 1: result ne = [a.ne0, b.ne0, b.ne2, b.ne3]."""
    cdef Context c = _pick_ctx(a, ctx)
    b._check()
    _need_f32(a, "out_prod")
    _need_f32(b, "out_prod")
    if a.ptr.ne[1] != b.ptr.ne[1]:
        raise ValueError(f"out_prod: ggml dim 1 differs: {a.shape} and {b.shape}")
    if b.ptr.ne[2] % a.ptr.ne[2] != 0 or b.ptr.ne[3] % a.ptr.ne[3] != 0:
        raise ValueError("out_prod: batch dims do not broadcast")
    if ggml_is_transposed(a.ptr):
        raise ValueError("out_prod: a must not be transposed")
    _prep(c, 4 * a.ptr.ne[0] * b.ptr.ne[0] * b.ptr.ne[2] * b.ptr.ne[3])
    return _out(c, ggml_out_prod(c.ptr, a.ptr, b.ptr), max(_nd(a), _nd(b)), (a, b))


# --- copies, views, layout -------------------------------------------------------

def cpy(Tensor a not None, Tensor b not None, ctx=None):
    """Copy a into b (same number of elements); returns the view of b written."""
    cdef Context c = _pick_ctx(a, ctx)
    b._check()
    if ggml_nelements(a.ptr) != ggml_nelements(b.ptr):
        raise ValueError(f"cpy: {a.shape} and {b.shape} have different sizes")
    if <int>a.ptr.type not in _TYPE_TO_NP or <int>b.ptr.type not in _TYPE_TO_NP:
        raise TypeError("cpy: f32, f16 and i32 only")
    _prep(c)
    return _out(c, ggml_cpy(c.ptr, a.ptr, b.ptr), _nd(b), (a, b))


def cast(Tensor a not None, dtype, ctx=None):
    """a converted to dtype ('f32', 'f16', 'i32')."""
    cdef Context c = _pick_ctx(a, ctx)
    cdef ggml_type t = _parse_dtype(dtype)
    if <int>a.ptr.type not in _TYPE_TO_NP:
        raise TypeError("cast: f32, f16 and i32 only")
    _prep(c, ggml_nelements(a.ptr) * 4)
    return _out(c, ggml_cast(c.ptr, a.ptr, t), _nd(a), (a,))


def cont(Tensor a not None, ctx=None):
    """A contiguous copy of a (e.g. after permute)."""
    cdef Context c = _pick_ctx(a, ctx)
    _prep(c, ggml_nbytes(a.ptr))
    return _out(c, ggml_cont(c.ptr, a.ptr), _nd(a), (a,))


def stop_gradient(Tensor a not None, ctx=None):
    """A copy of a that passes no gradient back to a (patch 0037's flag): the backward pass
    treats it as a constant."""
    cdef Context c = _pick_ctx(a, ctx)
    _prep(c, ggml_nbytes(a.ptr))
    cdef ggml_tensor* r = ggml_cont(c.ptr, a.ptr)
    if r != NULL:
        r.flags = r.flags | GGML_TENSOR_FLAG_NO_GRAD
    return _out(c, r, _nd(a), (a,))


def dup(Tensor a not None, ctx=None):
    cdef Context c = _pick_ctx(a, ctx)
    _prep(c, ggml_nbytes(a.ptr))
    return _out(c, ggml_dup(c.ptr, a.ptr), _nd(a), (a,))


def reshape(Tensor a not None, shape, ctx=None):
    """a with a new numpy-order shape (same number of elements; a contiguous)."""
    cdef Context c = _pick_ctx(a, ctx)
    cdef int64_t ne[4]
    cdef int nd = _parse_shape(shape, ne)
    if ne[0] * ne[1] * ne[2] * ne[3] != ggml_nelements(a.ptr):
        raise ValueError(f"reshape: cannot reshape {a.shape} to {tuple(shape)}")
    _need_contiguous(a, "reshape")
    _prep(c)
    return _out(c, ggml_reshape_4d(c.ptr, a.ptr, ne[0], ne[1], ne[2], ne[3]), nd, (a,))


def view(Tensor a not None, shape, strides=None, size_t offset=0, ctx=None):
    """A view into a: numpy-order shape, byte strides (numpy order, default
    contiguous), byte offset; it must lie inside a."""
    cdef Context c = _pick_ctx(a, ctx)
    cdef int64_t ne[4]
    cdef int nd = _parse_shape(shape, ne)
    cdef size_t es = ggml_type_size(a.ptr.type)
    cdef size_t nb[4]
    nb[0] = es
    if strides is None:
        nb[1] = nb[0] * ne[0]
        nb[2] = nb[1] * ne[1]
        nb[3] = nb[2] * ne[2]
    else:
        st = tuple(strides)
        if len(st) != nd:
            raise ValueError("view: strides must have one entry per dimension")
        rev = list(reversed(st)) + [0] * (4 - nd)
        if rev[0] != es:
            raise ValueError(f"view: the innermost stride must be the element size {es}")
        for i in range(1, 4):
            if i < nd:
                if rev[i] <= 0:
                    raise ValueError("view: strides must be positive")
                nb[i] = rev[i]
            else:
                nb[i] = nb[i - 1] * ne[i - 1]
    cdef size_t last = offset + es
    for i in range(4):
        last += (ne[i] - 1) * nb[i]
    if last > ggml_nbytes(a.ptr):
        raise ValueError(f"view: the view reaches byte {last} of a tensor of {ggml_nbytes(a.ptr)} bytes")
    _prep(c)
    return _out(c, ggml_view_4d(c.ptr, a.ptr, ne[0], ne[1], ne[2], ne[3], nb[1], nb[2], nb[3], offset), nd, (a,))


cdef Tensor _grad_safe_view_src(Context c, Tensor a):
    """permute's and transpose's backward hand their source a permuted (not
    contiguous) gradient: ggml's backward of cont and cpy asserts a contiguous
    one (cont(permute(cont(permute(x)))) aborted in training) and pool_2d's
    reads it as contiguous (wrong gradients).  A reshape in between is a free
    view forward, and its backward conts the gradient."""
    if ggml_is_contiguous(a.ptr):
        _prep(c)
        return _out(c, ggml_reshape_4d(c.ptr, a.ptr, a.ptr.ne[0], a.ptr.ne[1], a.ptr.ne[2], a.ptr.ne[3]),
                    _nd(a), (a,))
    return a


def permute(Tensor a not None, axes, ctx=None):
    """ggml_permute: axes[i] is where ggml dim i goes (a permutation of 0..3)."""
    cdef Context c = _pick_ctx(a, ctx)
    ax = tuple(axes)
    if sorted(ax) != [0, 1, 2, 3]:
        raise ValueError(f"permute: axes must be a permutation of (0, 1, 2, 3), got {ax}")
    a = _grad_safe_view_src(c, a)
    _prep(c)
    return _out(c, ggml_permute(c.ptr, a.ptr, ax[0], ax[1], ax[2], ax[3]), max(_nd(a), 2), (a,))


def transpose(Tensor a not None, ctx=None):
    """Swap ggml dims 0 and 1 (a view)."""
    cdef Context c = _pick_ctx(a, ctx)
    a = _grad_safe_view_src(c, a)
    _prep(c)
    return _out(c, ggml_transpose(c.ptr, a.ptr), max(_nd(a), 2), (a,))


def get_rows(Tensor a not None, Tensor rows not None, ctx=None):
    """Rows of a (ggml dim 1) picked by the i32 indices in rows."""
    cdef Context c = _pick_ctx(a, ctx)
    rows._check()
    if rows.ptr.type != GGML_TYPE_I32:
        raise TypeError("get_rows: indices must be i32")
    if a.ptr.ne[2] != rows.ptr.ne[1] or rows.ptr.ne[3] != 1:
        raise ValueError(f"get_rows: indices of shape {rows.shape} do not fit data of shape {a.shape}")
    if a.ptr.type not in (GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_I32):
        raise TypeError("get_rows: f32, f16 or i32 data")
    # indices are checked against the rows before every compute (ggml aborts on one out of range)
    _check_index_tensor(rows.ptr, a.ptr.ne[1], "get_rows")
    _prep(c, 4 * a.ptr.ne[0] * rows.ptr.ne[0] * rows.ptr.ne[1] * rows.ptr.ne[2])
    return _out(c, ggml_get_rows(c.ptr, a.ptr, rows.ptr), max(_nd(a), _nd(rows) + 1), (a, rows))


def pad(Tensor a not None, int p0=0, int p1=0, int p2=0, int p3=0, ctx=None):
    """Zero padding at the end of each ggml dim (forward only in ggml)."""
    cdef Context c = _pick_ctx(a, ctx)
    _need_f32(a, "pad")
    if min(p0, p1, p2, p3) < 0:
        raise ValueError("pad: padding must be >= 0")
    _prep(c, (ggml_nelements(a.ptr) + (p0 + 1) * (p1 + 1) * (p2 + 1) * (p3 + 1)) * 4 * 16)
    return _out(c, ggml_pad(c.ptr, a.ptr, p0, p1, p2, p3), _nd(a), (a,))


# --- softmax, convolutions, pooling, losses ----------------------------------------

def soft_max(Tensor a not None, ctx=None):
    """softmax over ggml dim 0 (numpy's last axis)."""
    cdef Context c = _pick_ctx(a, ctx)
    _need_f32(a, "soft_max")
    _need_contiguous(a, "soft_max")
    _prep(c, ggml_nbytes(a.ptr))
    return _out(c, ggml_soft_max(c.ptr, a.ptr), _nd(a), (a,))


def soft_max_ext(Tensor a not None, Tensor mask=None, float scale=1.0, ctx=None):
    """softmax(a * scale + mask) over ggml dim 0; mask (f32) is [ne0, >= ne1]."""
    cdef Context c = _pick_ctx(a, ctx)
    _need_f32(a, "soft_max_ext")
    _need_contiguous(a, "soft_max_ext")
    cdef ggml_tensor * m = NULL
    if mask is not None:
        mask._check()
        if mask.ptr.type != GGML_TYPE_F32 or not ggml_is_contiguous(mask.ptr):
            raise TypeError("soft_max_ext: mask must be a contiguous f32 tensor")
        if mask.ptr.ne[0] != a.ptr.ne[0] or mask.ptr.ne[1] < a.ptr.ne[1] or \
                a.ptr.ne[2] % mask.ptr.ne[2] != 0 or a.ptr.ne[3] % mask.ptr.ne[3] != 0:
            raise ValueError(f"soft_max_ext: mask {mask.shape} does not fit {a.shape}")
        m = mask.ptr
    _prep(c, ggml_nbytes(a.ptr))
    return _out(c, ggml_soft_max_ext(c.ptr, a.ptr, m, scale, 0.0), _nd(a), (a, mask))


def diag_mask_inf(Tensor a not None, int n_past=0, ctx=None):
    """Set a[i, j] to -inf where j > n_past + i (causal mask)."""
    cdef Context c = _pick_ctx(a, ctx)
    _need_f32(a, "diag_mask_inf")
    _need_contiguous(a, "diag_mask_inf")
    if n_past < 0:
        raise ValueError("diag_mask_inf: n_past must be >= 0")
    _prep(c, ggml_nbytes(a.ptr))
    return _out(c, ggml_diag_mask_inf(c.ptr, a.ptr, n_past), _nd(a), (a,))


def im2col(Tensor kernel not None, Tensor data not None, int s0=1, int s1=1, int p0=0, int p1=0,
           int d0=1, int d1=1, bint is_2d=True, dtype="f32", ctx=None):
    """Unfold data for a convolution.  2-D: kernel ne [KW, KH, C, OC] (only
    its shape is used; it must not be a parameter), data ne [W, H, C, N];
    result ne [C*KH*KW, OW, OH, N].  1-D: kernel [K, C, OC], data [L, C, N]."""
    cdef Context c = _pick_ctx(kernel, ctx)
    data._check()
    cdef ggml_type t = _parse_dtype(dtype)
    if t not in (GGML_TYPE_F32, GGML_TYPE_F16):
        raise TypeError("im2col: dtype must be f32 or f16")
    _need_f32(data, "im2col")
    if s0 < 1 or s1 < 1 or d0 < 1 or d1 < 1 or p0 < 0 or p1 < 0:
        raise ValueError("im2col: strides and dilations must be >= 1, padding >= 0")
    cdef int64_t ow, oh = 1
    if is_2d:
        if kernel.ptr.ne[2] != data.ptr.ne[2]:
            raise ValueError(f"im2col: kernel channels {kernel.ptr.ne[2]} != data channels {data.ptr.ne[2]}")
        oh = (data.ptr.ne[1] + 2 * p1 - d1 * (kernel.ptr.ne[1] - 1) - 1) // s1 + 1
    else:
        if kernel.ptr.ne[1] != data.ptr.ne[1] or data.ptr.ne[3] != 1:
            raise ValueError("im2col: 1-D needs kernel [K, C, OC] and data [L, C, N] with equal C")
    ow = (data.ptr.ne[0] + 2 * p0 - d0 * (kernel.ptr.ne[0] - 1) - 1) // s0 + 1
    if ow < 1 or oh < 1:
        raise ValueError("im2col: the kernel is larger than the padded input")
    cdef int64_t n = ow * oh * kernel.ptr.ne[0] * kernel.ptr.ne[1] * (kernel.ptr.ne[2] if is_2d else 1) * \
        data.ptr.ne[3 if is_2d else 2]
    if n > _MAX_ELEMENTS:
        raise ValueError("im2col: result too large")
    _prep(c, n * 4)
    return _out(c, ggml_im2col(c.ptr, kernel.ptr, data.ptr, s0, s1, p0, p1, d0, d1, is_2d, t),
                4 if is_2d else 3, (kernel, data))


def pool_2d(Tensor a not None, op="max", int k0=2, int k1=2, int s0=2, int s1=2, float p0=0, float p1=0, ctx=None):
    """2-D max or average pooling over ggml dims 0 and 1 (data ne [W, H, C, N])."""
    cdef Context c = _pick_ctx(a, ctx)
    _need_f32(a, "pool_2d")
    if op not in ("max", "avg"):
        raise ValueError("pool_2d: op must be 'max' or 'avg'")
    if k0 < 1 or k1 < 1 or s0 < 1 or s1 < 1 or p0 < 0 or p1 < 0:
        raise ValueError("pool_2d: kernel and stride must be >= 1, padding >= 0")
    cdef int64_t ow = <int64_t>((a.ptr.ne[0] + 2 * p0 - k0) / s0 + 1)
    cdef int64_t oh = <int64_t>((a.ptr.ne[1] + 2 * p1 - k1) / s1 + 1)
    if ow < 1 or oh < 1 or a.ptr.ne[0] + 2 * p0 < k0 or a.ptr.ne[1] + 2 * p1 < k1:
        raise ValueError(f"pool_2d: window {k1}x{k0} is larger than the input {a.ptr.ne[1]}x{a.ptr.ne[0]}")
    _prep(c, ow * oh * a.ptr.ne[2] * a.ptr.ne[3] * 4)
    return _out(c, ggml_pool_2d(c.ptr, a.ptr, GGML_OP_POOL_MAX if op == "max" else GGML_OP_POOL_AVG,
                                k0, k1, s0, s1, p0, p1), max(_nd(a), 2), (a,))


def cross_entropy_loss(Tensor logits not None, Tensor labels not None, ctx=None):
    """Mean over rows of -sum(labels * log_softmax(logits)) (fused, stable)."""
    cdef Context c = _pick_ctx(logits, ctx)
    labels._check()
    _need_f32(logits, "cross_entropy_loss")
    _need_f32(labels, "cross_entropy_loss")
    if not ggml_are_same_shape(logits.ptr, labels.ptr):
        raise ValueError(f"cross_entropy_loss: logits {logits.shape} and labels {labels.shape} differ")
    if not (ggml_is_contiguous(logits.ptr) and ggml_is_contiguous(labels.ptr)):
        # ggml's kernels (forward and backward) read whole rows: a view would abort
        raise ValueError("cross_entropy_loss: logits and labels must be contiguous (ops.cont of a view)")
    _prep(c, 4)
    return _out(c, ggml_cross_entropy_loss(c.ptr, logits.ptr, labels.ptr), 1, (logits, labels))


def opt_step_adamw(Tensor a not None, Tensor grad not None, Tensor m not None, Tensor v not None,
                   Tensor params not None, ctx=None):
    """AdamW update of parameter a in place; params (f32, 7): alpha, beta1,
    beta2, eps, wd, 1/(1-beta1^t), 1/(1-beta2^t)."""
    cdef Context c = _pick_ctx(a, ctx)
    for t in (grad, m, v, params):
        (<Tensor>t)._check()
        _need_f32(<Tensor>t, "opt_step_adamw")
    _need_f32(a, "opt_step_adamw")
    if not a.ptr.flags & GGML_TENSOR_FLAG_PARAM:
        raise ValueError("opt_step_adamw: a must be a parameter (set_param)")
    if not (ggml_are_same_shape(a.ptr, grad.ptr) and ggml_are_same_shape(a.ptr, m.ptr)
            and ggml_are_same_shape(a.ptr, v.ptr)):
        raise ValueError("opt_step_adamw: a, grad, m and v must have the same shape")
    for t in (a, grad, m, v, params):
        # the kernel walks grad, m and v with a's strides, writing m and v
        _need_contiguous(<Tensor>t, "opt_step_adamw")
    if ggml_nelements(params.ptr) != 7:
        raise ValueError("opt_step_adamw: params must have 7 elements")
    _prep(c)
    return _out(c, ggml_opt_step_adamw(c.ptr, a.ptr, grad.ptr, m.ptr, v.ptr, params.ptr), _nd(a),
                (a, grad, m, v, params))


def opt_step_sgd(Tensor a not None, Tensor grad not None, Tensor params not None, ctx=None):
    """SGD update of parameter a in place; params (f32, 2): alpha, wd."""
    cdef Context c = _pick_ctx(a, ctx)
    for t in (grad, params):
        (<Tensor>t)._check()
        _need_f32(<Tensor>t, "opt_step_sgd")
    _need_f32(a, "opt_step_sgd")
    if not a.ptr.flags & GGML_TENSOR_FLAG_PARAM:
        raise ValueError("opt_step_sgd: a must be a parameter (set_param)")
    if not ggml_are_same_shape(a.ptr, grad.ptr):
        raise ValueError("opt_step_sgd: a and grad must have the same shape")
    for t in (a, grad, params):
        _need_contiguous(<Tensor>t, "opt_step_sgd")
    if ggml_nelements(params.ptr) != 2:
        raise ValueError("opt_step_sgd: params must have 2 elements")
    _prep(c)
    return _out(c, ggml_opt_step_sgd(c.ptr, a.ptr, grad.ptr, params.ptr), _nd(a), (a, grad, params))


def acc(Tensor a not None, Tensor b not None, nb=None, size_t offset=0, ctx=None):
    """a with b added into the view of a at byte ``offset`` with byte strides
    ``nb`` (numpy order, b's rank; default: a's strides).  Has a backward pass,
    so it pads (acc into zeros) and scatters."""
    cdef Context c = _pick_ctx(a, ctx)
    b._check()
    _need_f32(a, "acc")
    _need_f32(b, "acc")
    _need_contiguous(a, "acc")
    _need_contiguous(b, "acc")
    cdef size_t s1 = a.ptr.nb[1], s2 = a.ptr.nb[2], s3 = a.ptr.nb[3]
    if nb is not None:
        st = list(reversed(tuple(nb)))
        if not 1 <= len(st) <= 4 or st[0] != 4:
            raise ValueError("acc: strides in bytes, numpy order, the innermost being 4")
        st = st + [0] * (4 - len(st))
        s1 = st[1] if st[1] else s1
        s2 = st[2] if st[2] else s2
        s3 = st[3] if st[3] else s3
    cdef size_t last = offset + 4 + (b.ptr.ne[0] - 1) * 4 + (b.ptr.ne[1] - 1) * s1 + \
        (b.ptr.ne[2] - 1) * s2 + (b.ptr.ne[3] - 1) * s3
    if last > ggml_nbytes(a.ptr) or offset % 4 != 0 or s1 % 4 or s2 % 4 or s3 % 4:
        raise ValueError("acc: b does not fit inside a at that offset and strides")
    _prep(c, ggml_nbytes(a.ptr))
    return _out(c, ggml_acc(c.ptr, a.ptr, b.ptr, s1, s2, s3, offset), _nd(a), (a, b))


# --- pyggml's ops (ggml/patches/0020): backward passes and fused CPU kernels -------------
# These run on the CPU backend only; other backends refuse them and the scheduler runs them
# on the CPU.  The channels-last ops take numpy-order shapes and arguments: images are
# (N, H, W, C), kernels (OC, KH, KW, C), pairs are (height, width).

_ACTS = {"linear": GGML_ACT_NONE, None: GGML_ACT_NONE, "relu": GGML_ACT_RELU, "tanh": GGML_ACT_TANH,
         "sigmoid": GGML_ACT_SIGMOID, "elu": GGML_ACT_ELU, "leaky_relu": GGML_ACT_LEAKY_RELU,
         "softplus": GGML_ACT_SOFTPLUS, "gelu": GGML_ACT_GELU, "gelu_erf": GGML_ACT_GELU_ERF,
         "silu": GGML_ACT_SILU, "clamp": GGML_ACT_CLAMP}
# activations whose derivative the fused ops compute from their output
_FUSED_ACTS = ("linear", None, "relu", "tanh", "sigmoid", "elu", "leaky_relu", "softplus")
_POOL_CL_OPS = {"max": GGML_POOL_CL_MAX, "avg": GGML_POOL_CL_AVG, "avg_pad": GGML_POOL_CL_AVG_PAD,
                "sum": GGML_POOL_CL_SUM}
cdef int64_t _MAX_EXTENT = 1 << 24


cdef ggml_act _act_of(object act, float alpha, str what, bint fused) except *:
    if not isinstance(act, (str, type(None))) or act not in _ACTS:
        raise ValueError(f"{what}: unknown activation {act!r}; known: "
                         f"{sorted(k for k in _ACTS if k)}")
    if fused and act not in _FUSED_ACTS:
        raise ValueError(f"{what}: activation {act!r} cannot be fused (its derivative needs the input); "
                         f"use one of {[k for k in _FUSED_ACTS if k]}, or a separate op")
    if alpha != alpha:
        raise ValueError(f"{what}: alpha must be a number, got NaN")
    if fused and act in ("elu", "leaky_relu") and alpha < 0:
        raise ValueError(f"{what}: {act}'s alpha must be >= 0 to be fused")
    return <ggml_act>_ACTS[act]


cdef inline int _need_plain(Tensor t, str what, str name) except -1:
    t._check()
    if t.ptr.type != GGML_TYPE_F32:
        raise TypeError(f"{what}: {name} must be an f32 tensor, got {t.dtype}")
    if not ggml_is_contiguous(t.ptr):
        raise ValueError(f"{what}: {name} must be contiguous (use ops.cont first)")
    return 0


cdef tuple _int_pair(object v, str what, str name, int lo):
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        v = (int(v), int(v))
    try:
        t = tuple(v)
    except TypeError:
        raise TypeError(f"{what}: {name} must be an int or a pair of ints, got {v!r}") from None
    if len(t) != 2 or not all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in t):
        raise TypeError(f"{what}: {name} must be an int or a pair of ints, got {v!r}")
    if t[0] < lo or t[1] < lo or t[0] > _MAX_EXTENT or t[1] > _MAX_EXTENT:
        raise ValueError(f"{what}: {name} must be between {lo} and {_MAX_EXTENT}, got {t}")
    return (int(t[0]), int(t[1]))


cdef tuple _window_geometry(object padding, int64_t h, int64_t w, int kh, int kw, int sh, int sw, int dh, int dw,
                            str what):
    """(top, left, oh, ow) of a sliding window: "valid", "same" (Keras/TF: the extra
    padding at the end), (top, left) (the same at both ends) or (top, left, oh, ow)."""
    cdef int64_t ekh = <int64_t>dh * (kh - 1) + 1, ekw = <int64_t>dw * (kw - 1) + 1
    cdef int64_t top, left, oh, ow
    if isinstance(padding, str):
        if padding == "valid":
            if h < ekh or w < ekw:
                raise ValueError(f"{what}: the window ({ekh}, {ekw}) is larger than the input ({h}, {w})")
            return (0, 0, (h - ekh) // sh + 1, (w - ekw) // sw + 1)
        if padding == "same":
            oh, ow = (h + sh - 1) // sh, (w + sw - 1) // sw
            top = max((oh - 1) * sh + ekh - h, 0) // 2
            left = max((ow - 1) * sw + ekw - w, 0) // 2
            return (top, left, oh, ow)
        raise ValueError(f"{what}: padding must be 'valid', 'same' or a tuple of ints, got {padding!r}")
    try:
        p = tuple(padding)
    except TypeError:
        raise TypeError(f"{what}: padding must be 'valid', 'same', (top, left) or (top, left, oh, ow)") from None
    if len(p) not in (2, 4) or not all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in p):
        raise TypeError(f"{what}: padding must be 'valid', 'same', (top, left) or (top, left, oh, ow), got {padding!r}")
    top, left = int(p[0]), int(p[1])
    if top < 0 or left < 0 or top > _MAX_EXTENT or left > _MAX_EXTENT:
        raise ValueError(f"{what}: padding must be >= 0, got {p}")
    if len(p) == 4:
        oh, ow = int(p[2]), int(p[3])
    else:
        if h + 2 * top < ekh or w + 2 * left < ekw:
            raise ValueError(f"{what}: the window ({ekh}, {ekw}) is larger than the padded input")
        oh, ow = (h + 2 * top - ekh) // sh + 1, (w + 2 * left - ekw) // sw + 1
    if not 1 <= oh <= _MAX_EXTENT or not 1 <= ow <= _MAX_EXTENT:
        raise ValueError(f"{what}: output size ({oh}, {ow}) out of range")
    return (top, left, oh, ow)


def gelu_erf(Tensor a not None, ctx=None):
    """Exact gelu, x * (1 + erf(x / sqrt 2)) / 2 (Keras' and PyTorch's default)."""
    cdef Context c = _pick_ctx(a, ctx)
    _need_f32(a, "gelu_erf")
    _need_contiguous(a, "gelu_erf")
    _prep(c, ggml_nbytes(a.ptr))
    return _out(c, ggml_gelu_erf(c.ptr, a.ptr), _nd(a), (a,))


def unary_back(Tensor grad not None, Tensor b not None, act, bint from_output=True, float alpha=0.0,
               float beta=0.0, ctx=None):
    """grad * act'(.): b is the activation's output (from_output: linear, relu, tanh,
    sigmoid, elu, leaky_relu with alpha >= 0, softplus) or its input (any but linear;
    clamp to [alpha, beta], elu and leaky_relu with alpha).  The backward pass of the
    activations, and of bias_act, batch_norm and conv_2d_cl's."""
    cdef Context c = _pick_ctx(grad, ctx)
    b._check()
    cdef ggml_act code = _act_of(act, alpha, "unary_back", from_output)
    for t, n in ((grad, "grad"), (b, "b")):
        (<Tensor>t)._check()
        _need_f32(<Tensor>t, "unary_back")
        _need_dense_rows(<Tensor>t, "unary_back")
    if not ggml_are_same_shape(grad.ptr, b.ptr):
        raise ValueError(f"unary_back: grad {grad.shape} and b {b.shape} differ")
    if act == "clamp" and not alpha <= beta:
        raise ValueError("unary_back: clamp needs alpha (min) <= beta (max)")
    _prep(c, ggml_nbytes(grad.ptr))
    return _out(c, ggml_unary_back(c.ptr, grad.ptr, b.ptr, code, from_output, alpha, beta), _nd(grad), (grad, b))


def silu_back(Tensor grad not None, Tensor x not None, ctx=None):
    """grad * silu'(x): silu's backward op (ggml's SILU_BACK), which a second-order pass
    differentiates again."""
    cdef Context c = _pick_ctx(grad, ctx)
    x._check()
    for t in (grad, x):
        _need_f32(<Tensor>t, "silu_back")
        _need_contiguous(<Tensor>t, "silu_back")
    if not ggml_are_same_shape(grad.ptr, x.ptr):
        raise ValueError(f"silu_back: grad {grad.shape} and x {x.shape} differ")
    _prep(c, ggml_nbytes(x.ptr))
    return _out(c, ggml_silu_back(c.ptr, grad.ptr, x.ptr), _nd(x), (grad, x))


def soft_max_back(Tensor grad not None, Tensor y not None, float scale=1.0, ctx=None):
    """The gradient through a softmax (over ggml dim 0, numpy's last axis) from its output y:
    scale * y * (grad - sum(grad * y)) row by row (ggml's SOFT_MAX_BACK)."""
    cdef Context c = _pick_ctx(grad, ctx)
    y._check()
    for t in (grad, y):
        _need_f32(<Tensor>t, "soft_max_back")
        _need_contiguous(<Tensor>t, "soft_max_back")
    if not ggml_are_same_shape(grad.ptr, y.ptr):
        raise ValueError(f"soft_max_back: grad {grad.shape} and y {y.shape} differ")
    if not np.isfinite(scale):
        raise ValueError("soft_max_back: scale must be finite")
    _prep(c, ggml_nbytes(y.ptr))
    return _out(c, ggml_soft_max_ext_back(c.ptr, grad.ptr, y.ptr, scale, 0.0), _nd(y), (grad, y))


def norm_back(Tensor grad not None, Tensor a not None, float eps=1e-5, ctx=None):
    """The gradient through ops.norm(a, eps) (over ggml dim 0) of grad."""
    cdef Context c = _pick_ctx(grad, ctx)
    a._check()
    for t in (grad, a):
        _need_f32(<Tensor>t, "norm_back")
        _need_dense_rows(<Tensor>t, "norm_back")
    if not ggml_are_same_shape(grad.ptr, a.ptr):
        raise ValueError(f"norm_back: grad {grad.shape} and a {a.shape} differ")
    if not eps >= 0:
        raise ValueError("norm_back: eps must be >= 0")
    _prep(c, ggml_nbytes(a.ptr))
    return _out(c, ggml_norm_back(c.ptr, grad.ptr, a.ptr, eps), _nd(a), (grad, a))


def bias_act(Tensor a not None, Tensor b not None, act="linear", float alpha=0.0, ctx=None):
    """act(a + b) in one pass, b broadcast (repeated) to a's shape with its last axis
    a's last axis or 1 (a bias per column: Dense, channels-last convolutions).  act:
    linear, relu, tanh, sigmoid, elu (alpha), leaky_relu (alpha, the negative slope),
    softplus; its backward pass takes the derivative from the output."""
    cdef Context c = _pick_ctx(a, ctx)
    b._check()
    cdef ggml_act code = _act_of(act, alpha, "bias_act", True)
    _need_f32(a, "bias_act")
    _need_dense_rows(a, "bias_act")
    _need_plain(b, "bias_act", "b")
    if not ggml_can_repeat(b.ptr, a.ptr) or not (b.ptr.ne[0] == a.ptr.ne[0] or b.ptr.ne[0] == 1):
        raise ValueError(f"bias_act: b {b.shape} does not broadcast to a {a.shape} "
                         f"(its last axis must be a's or 1, its others divide a's)")
    _prep(c, ggml_nbytes(a.ptr))
    return _out(c, ggml_bias_act(c.ptr, a.ptr, b.ptr, code, alpha), max(_nd(a), _nd(b)), (a, b))


cdef int _bn_check(Tensor a, Tensor gamma, Tensor beta, Tensor stats, float eps, str what) except -1:
    _need_plain(a, what, "a")
    _need_plain(gamma, what, "gamma")
    if beta is not None:
        _need_plain(beta, what, "beta")
    cdef int64_t ch = a.ptr.ne[0]
    for t, n in ((gamma, "gamma"), (beta, "beta")):
        if t is not None and ggml_nelements((<Tensor>t).ptr) != ch:
            raise ValueError(f"{what}: {n} must have {ch} elements (a's last axis), got {(<Tensor>t).shape}")
    if stats is not None:
        _need_plain(stats, what, "stats")
        if ggml_nelements(stats.ptr) != 2 * ch:
            raise ValueError(f"{what}: stats must have 2 x {ch} elements, got {stats.shape}")
        if stats.ptr.flags & GGML_TENSOR_FLAG_PARAM:
            raise ValueError(f"{what}: stats is written by the op; it must not be a parameter")
    if not eps > 0:
        raise ValueError(f"{what}: eps must be > 0")
    return 0


def batch_norm(Tensor a not None, Tensor gamma not None, Tensor beta not None, Tensor stats=None,
               float eps=1e-3, act="linear", float alpha=0.0, ctx=None):
    """Batch normalisation with the batch's statistics (training mode), channels in a's
    last axis: act(gamma * (a - mean) / sqrt(var + eps) + beta), mean and (biased) var
    of each channel over all of a's other axes.  stats (2, C), if given, receives mean
    and var when the graph runs (for the running averages: give it memory of its own, a
    BackendBuffer, to read them with Tensor.numpy(); the backward pass reads them too)."""
    cdef Context c = _pick_ctx(a, ctx)
    gamma._check()
    beta._check()
    cdef ggml_act code = _act_of(act, alpha, "batch_norm", True)
    _bn_check(a, gamma, beta, stats, eps, "batch_norm")
    _prep(c, ggml_nbytes(a.ptr))
    return _out(c, ggml_batch_norm(c.ptr, a.ptr, gamma.ptr, beta.ptr, NULL if stats is None else stats.ptr,
                                   eps, code, alpha), _nd(a), (a, gamma, beta, stats))


def batch_norm_back(Tensor grad not None, Tensor a not None, Tensor y not None, Tensor gamma not None,
                    Tensor stats=None, float eps=1e-3, act="linear", float alpha=0.0, ctx=None):
    """batch_norm's backward pass: a 1-d tensor [da (a's elements), dgamma (C), dbeta (C)]."""
    cdef Context c = _pick_ctx(grad, ctx)
    cdef ggml_act code = _act_of(act, alpha, "batch_norm_back", True)
    _bn_check(a, gamma, None, stats, eps, "batch_norm_back")
    _need_plain(grad, "batch_norm_back", "grad")
    _need_plain(y, "batch_norm_back", "y")
    if not ggml_are_same_shape(grad.ptr, a.ptr) or not ggml_are_same_shape(y.ptr, a.ptr):
        raise ValueError("batch_norm_back: grad, a and y must have the same shape")
    _prep(c, ggml_nbytes(a.ptr) + 8 * a.ptr.ne[0])
    return _out(c, ggml_batch_norm_back(c.ptr, grad.ptr, a.ptr, y.ptr, gamma.ptr,
                                        NULL if stats is None else stats.ptr, eps, code, alpha),
                1, (grad, a, y, gamma, stats))


cdef tuple _pool_args(Tensor a, object op, object pool_size, object strides, object padding, str what):
    _need_plain(a, what, "a")
    if not isinstance(op, str) or op not in _POOL_CL_OPS:
        raise ValueError(f"{what}: op must be one of {sorted(_POOL_CL_OPS)}, got {op!r}")
    kh, kw = _int_pair(pool_size, what, "pool_size", 1)
    sh, sw = _int_pair(pool_size if strides is None else strides, what, "strides", 1)
    return (kh, kw, sh, sw)


def pool_cl(Tensor a not None, op="max", pool_size=(2, 2), strides=None, padding="valid", ctx=None):
    """Pooling of channels-last images a (N, H, W, C) over H and W: op "max", "avg" (the
    mean of the taps inside the input: Keras), "avg_pad" (sum / window size: PyTorch's
    default) or "sum"; strides default to pool_size; padding "valid", "same" (Keras),
    (top, left) or (top, left, oh, ow).  Result (N, OH, OW, C).  Pool a sequence
    (N, L, C) as (N, 1, L, C) with pool_size (1, k)."""
    cdef Context c = _pick_ctx(a, ctx)
    kh, kw, sh, sw = _pool_args(a, op, pool_size, strides, padding, "pool_cl")
    cdef int64_t h = a.ptr.ne[2], w = a.ptr.ne[1]
    top, left, oh, ow = _window_geometry(padding, h, w, kh, kw, sh, sw, 1, 1, "pool_cl")
    if top >= kh or left >= kw or (oh - 1) * sh - top >= h or (ow - 1) * sw - left >= w:
        raise ValueError(f"pool_cl: every window must hold part of the input (padding {top, left}, "
                         f"output {oh, ow}, input {h, w})")
    _prep(c, 4 * a.ptr.ne[0] * ow * oh * a.ptr.ne[3])
    return _out(c, ggml_pool_cl(c.ptr, a.ptr, <ggml_pool_cl_op>_POOL_CL_OPS[op], kw, kh, sw, sh, left, top, ow, oh),
                4, (a,))


def pool_cl_back(Tensor grad not None, Tensor a not None, op="max", pool_size=(2, 2), strides=None,
                 padding="valid", ctx=None):
    """pool_cl's backward pass: grad (N, OH, OW, C), a the forward input (N, H, W, C);
    padding as pool_cl's (only top and left are read; the output size is grad's)."""
    cdef Context c = _pick_ctx(grad, ctx)
    kh, kw, sh, sw = _pool_args(a, op, pool_size, strides, padding, "pool_cl_back")
    _need_plain(grad, "pool_cl_back", "grad")
    cdef int64_t h = a.ptr.ne[2], w = a.ptr.ne[1]
    cdef int64_t oh = grad.ptr.ne[2], ow = grad.ptr.ne[1]
    top, left = _window_geometry(padding, h, w, kh, kw, sh, sw, 1, 1, "pool_cl_back")[:2]
    if grad.ptr.ne[0] != a.ptr.ne[0] or grad.ptr.ne[3] != a.ptr.ne[3]:
        raise ValueError(f"pool_cl_back: grad {grad.shape} does not match a {a.shape} (batch and channels)")
    if top >= kh or left >= kw or (oh - 1) * sh - top >= h or (ow - 1) * sw - left >= w:
        raise ValueError("pool_cl_back: every window must hold part of the input")
    _prep(c, ggml_nbytes(a.ptr))
    return _out(c, ggml_pool_cl_back(c.ptr, grad.ptr, a.ptr, <ggml_pool_cl_op>_POOL_CL_OPS[op], kw, kh, sw, sh,
                                     left, top), 4, (grad, a))


cdef int _conv_elems(int64_t n, str what) except -1:
    if n > _MAX_ELEMENTS:
        raise ValueError(f"{what}: result too large")
    return 0


def conv_2d_cl(Tensor a not None, Tensor w not None, Tensor b=None, strides=(1, 1), padding="valid",
               dilation=(1, 1), act="linear", float alpha=0.0, ctx=None):
    """Channels-last 2-D convolution (cross-correlation, as Keras and PyTorch): a
    (N, H, W, C), w (OC, KH, KW, C), b (OC,) or None; act fused (linear, relu, tanh,
    sigmoid, elu, leaky_relu, softplus).  padding "valid", "same" (Keras: the extra at the
    end), (top, left) or (top, left, OH, OW).  Result (N, OH, OW, OC).  A Conv1D is this
    with a (N, 1, L, C) and w (OC, 1, K, C)."""
    cdef Context c = _pick_ctx(a, ctx)
    w._check()
    cdef ggml_act code = _act_of(act, alpha, "conv_2d_cl", True)
    _need_plain(a, "conv_2d_cl", "a")
    _need_plain(w, "conv_2d_cl", "w")
    if w.ptr.ne[0] != a.ptr.ne[0]:
        raise ValueError(f"conv_2d_cl: w {w.shape} and a {a.shape} have different channels (last axes)")
    if b is not None:
        _need_plain(b, "conv_2d_cl", "b")
        if ggml_nelements(b.ptr) != w.ptr.ne[3]:
            raise ValueError(f"conv_2d_cl: b must have {w.ptr.ne[3]} elements (w's first axis), got {b.shape}")
    sh, sw = _int_pair(strides, "conv_2d_cl", "strides", 1)
    dh, dw = _int_pair(dilation, "conv_2d_cl", "dilation", 1)
    top, left, oh, ow = _window_geometry(padding, a.ptr.ne[2], a.ptr.ne[1], w.ptr.ne[2], w.ptr.ne[1],
                                         sh, sw, dh, dw, "conv_2d_cl")
    _conv_elems(w.ptr.ne[3] * ow * oh * a.ptr.ne[3], "conv_2d_cl")
    _prep(c, 4 * w.ptr.ne[3] * ow * oh * a.ptr.ne[3])
    return _out(c, ggml_conv_cl(c.ptr, a.ptr, w.ptr, NULL if b is None else b.ptr, sw, sh, left, top, dw, dh,
                                ow, oh, code, alpha), 4, (a, w, b))


def conv_transpose_2d_cl(Tensor a not None, Tensor w not None, strides=(1, 1), padding="valid",
                         dilation=(1, 1), output_size=None, ctx=None):
    """The transposed convolution of channels-last a (N, H, W, OC) with w (OC, KH, KW, C):
    the gradient of conv_2d_cl's input, and Keras' Conv2DTranspose (whose kernel
    (KH, KW, C, OC) is this w transposed).  padding "valid" (output H*s + max(dilated
    kernel - s, 0), Keras'), "same" (output H*s) or (top, left) with output_size (OH, OW)
    required; output_size also overrides the "valid"/"same" size (Keras' output_padding).
    Result (N, OH, OW, C).  Add a bias and activation with bias_act."""
    cdef Context c = _pick_ctx(a, ctx)
    w._check()
    _need_plain(a, "conv_transpose_2d_cl", "a")
    _need_plain(w, "conv_transpose_2d_cl", "w")
    if w.ptr.ne[3] != a.ptr.ne[0]:
        raise ValueError(f"conv_transpose_2d_cl: w {w.shape}'s first axis must be a {a.shape}'s channels")
    sh, sw = _int_pair(strides, "conv_transpose_2d_cl", "strides", 1)
    dh, dw = _int_pair(dilation, "conv_transpose_2d_cl", "dilation", 1)
    cdef int64_t ih = a.ptr.ne[2], iw = a.ptr.ne[1]
    cdef int64_t ekh = dh * (w.ptr.ne[2] - 1) + 1, ekw = dw * (w.ptr.ne[1] - 1) + 1
    if isinstance(padding, str) and padding in ("valid", "same"):
        if output_size is not None:
            oh, ow = _int_pair(output_size, "conv_transpose_2d_cl", "output_size", 1)
        elif padding == "valid":
            # Keras' deconv_output_length: H*s + max(kernel - s, 0)
            oh, ow = ih * sh + max(ekh - sh, 0), iw * sw + max(ekw - sw, 0)
        else:
            oh, ow = ih * sh, iw * sw
        top = max((ih - 1) * sh + ekh - oh, 0) // 2 if padding == "same" else 0
        left = max((iw - 1) * sw + ekw - ow, 0) // 2 if padding == "same" else 0
    else:
        if output_size is None:
            raise ValueError("conv_transpose_2d_cl: give output_size with explicit padding")
        p = _int_pair(padding, "conv_transpose_2d_cl", "padding", 0)
        top, left = p
        oh, ow = _int_pair(output_size, "conv_transpose_2d_cl", "output_size", 1)
    if not 1 <= oh <= _MAX_EXTENT or not 1 <= ow <= _MAX_EXTENT:
        raise ValueError(f"conv_transpose_2d_cl: output size ({oh}, {ow}) out of range")
    _conv_elems(w.ptr.ne[0] * ow * oh * a.ptr.ne[3], "conv_transpose_2d_cl")
    _prep(c, 4 * w.ptr.ne[0] * ow * oh * a.ptr.ne[3])
    return _out(c, ggml_conv_cl_back_input(c.ptr, a.ptr, w.ptr, sw, sh, left, top, dw, dh, ow, oh), 4, (a, w))


def conv_2d_cl_back_filter(Tensor dy not None, Tensor a not None, kernel_size, strides=(1, 1), padding="valid",
                           dilation=(1, 1), bint with_bias=True, ctx=None):
    """The gradients of conv_2d_cl's kernel and bias: dy (N, OH, OW, OC), a the forward
    input (N, H, W, C); a 1-d tensor [dw (OC*KH*KW*C, numpy order of w), db (OC, with_bias)].
    padding as conv_2d_cl's (top and left are read; the output size is dy's)."""
    cdef Context c = _pick_ctx(dy, ctx)
    a._check()
    _need_plain(dy, "conv_2d_cl_back_filter", "dy")
    _need_plain(a, "conv_2d_cl_back_filter", "a")
    if dy.ptr.ne[3] != a.ptr.ne[3]:
        raise ValueError(f"conv_2d_cl_back_filter: dy {dy.shape} and a {a.shape} differ in batch")
    kh, kw = _int_pair(kernel_size, "conv_2d_cl_back_filter", "kernel_size", 1)
    sh, sw = _int_pair(strides, "conv_2d_cl_back_filter", "strides", 1)
    dh, dw = _int_pair(dilation, "conv_2d_cl_back_filter", "dilation", 1)
    top, left = _window_geometry(padding, a.ptr.ne[2], a.ptr.ne[1], kh, kw, sh, sw, dh, dw,
                                 "conv_2d_cl_back_filter")[:2]
    cdef int64_t n = a.ptr.ne[0] * kh * kw * dy.ptr.ne[0] + (dy.ptr.ne[0] if with_bias else 0)
    _conv_elems(n, "conv_2d_cl_back_filter")
    _prep(c, 4 * n)
    return _out(c, ggml_conv_cl_back_filter(c.ptr, dy.ptr, a.ptr, kw, kh, sw, sh, left, top, dw, dh, with_bias),
                1, (dy, a))


# the most taps a depthwise kernel may have (the kernels gather one pointer per tap on the stack)
cdef int _DW_MAX_TAPS = 256


cdef tuple _dw_kernel(Tensor w, int64_t channels, str what):
    """(KH, KW) of a depthwise kernel w (1, KH, KW, C), checked."""
    _need_plain(w, what, "w")
    if w.ptr.ne[3] != 1 or w.ptr.ne[0] != channels or ggml_n_dims(w.ptr) > 4:
        raise ValueError(f"{what}: w must be (1, KH, KW, {channels}) (a kernel per channel), got {w.shape}")
    if w.ptr.ne[1] * w.ptr.ne[2] > _DW_MAX_TAPS:
        raise ValueError(f"{what}: a depthwise kernel of {w.ptr.ne[2]} x {w.ptr.ne[1]} taps is more than "
                         f"{_DW_MAX_TAPS}")
    return (w.ptr.ne[2], w.ptr.ne[1])


def conv_2d_cl_dw(Tensor a not None, Tensor w not None, Tensor b=None, strides=(1, 1), padding="valid",
                  dilation=(1, 1), act="linear", float alpha=0.0, ctx=None):
    """Channels-last depthwise 2-D convolution (patch 0043): each of a's channels (N, H, W, C)
    with its own kernel, w (1, KH, KW, C), plus b (C,) or None, act fused as conv_2d_cl's.
    padding as conv_2d_cl's.  Result (N, OH, OW, C)."""
    cdef Context c = _pick_ctx(a, ctx)
    cdef ggml_act code = _act_of(act, alpha, "conv_2d_cl_dw", True)
    _need_plain(a, "conv_2d_cl_dw", "a")
    kh, kw = _dw_kernel(w, a.ptr.ne[0], "conv_2d_cl_dw")
    if b is not None:
        _need_plain(b, "conv_2d_cl_dw", "b")
        if ggml_nelements(b.ptr) != a.ptr.ne[0]:
            raise ValueError(f"conv_2d_cl_dw: b must have {a.ptr.ne[0]} elements (a's channels), got {b.shape}")
    sh, sw = _int_pair(strides, "conv_2d_cl_dw", "strides", 1)
    dh, dw = _int_pair(dilation, "conv_2d_cl_dw", "dilation", 1)
    top, left, oh, ow = _window_geometry(padding, a.ptr.ne[2], a.ptr.ne[1], kh, kw, sh, sw, dh, dw, "conv_2d_cl_dw")
    _conv_elems(a.ptr.ne[0] * ow * oh * a.ptr.ne[3], "conv_2d_cl_dw")
    _prep(c, 4 * a.ptr.ne[0] * ow * oh * a.ptr.ne[3])
    return _out(c, ggml_conv_cl_dw(c.ptr, a.ptr, w.ptr, NULL if b is None else b.ptr, sw, sh, left, top, dw, dh,
                                   ow, oh, code, alpha), 4, (a, w, b))


def conv_2d_cl_dw_back_input(Tensor dy not None, Tensor w not None, input_size, strides=(1, 1), padding="valid",
                             dilation=(1, 1), ctx=None):
    """The gradient of conv_2d_cl_dw's input: dy (N, OH, OW, C), w (1, KH, KW, C),
    input_size (H, W) of the forward input; padding as the forward's.  Result (N, H, W, C)."""
    cdef Context c = _pick_ctx(dy, ctx)
    _need_plain(dy, "conv_2d_cl_dw_back_input", "dy")
    kh, kw = _dw_kernel(w, dy.ptr.ne[0], "conv_2d_cl_dw_back_input")
    ih, iw = _int_pair(input_size, "conv_2d_cl_dw_back_input", "input_size", 1)
    if ih > _MAX_EXTENT or iw > _MAX_EXTENT:
        raise ValueError(f"conv_2d_cl_dw_back_input: input_size ({ih}, {iw}) out of range")
    sh, sw = _int_pair(strides, "conv_2d_cl_dw_back_input", "strides", 1)
    dh, dw = _int_pair(dilation, "conv_2d_cl_dw_back_input", "dilation", 1)
    top, left, oh, ow = _window_geometry(padding, ih, iw, kh, kw, sh, sw, dh, dw, "conv_2d_cl_dw_back_input")
    if (oh, ow) != (dy.ptr.ne[2], dy.ptr.ne[1]):
        raise ValueError(f"conv_2d_cl_dw_back_input: dy {dy.shape} is not the output ({oh}, {ow}) of an input "
                         f"({ih}, {iw})")
    _conv_elems(dy.ptr.ne[0] * iw * ih * dy.ptr.ne[3], "conv_2d_cl_dw_back_input")
    _prep(c, 4 * dy.ptr.ne[0] * iw * ih * dy.ptr.ne[3])
    return _out(c, ggml_conv_cl_dw_back_input(c.ptr, dy.ptr, w.ptr, sw, sh, left, top, dw, dh, iw, ih), 4, (dy, w))


def conv_2d_cl_dw_back_filter(Tensor dy not None, Tensor a not None, kernel_size, strides=(1, 1), padding="valid",
                              dilation=(1, 1), bint with_bias=True, ctx=None):
    """The gradients of conv_2d_cl_dw's kernel and bias: dy (N, OH, OW, C), a the forward
    input (N, H, W, C); a 1-d tensor [dw (KH*KW*C, w's order), db (C, with_bias)]."""
    cdef Context c = _pick_ctx(dy, ctx)
    _need_plain(dy, "conv_2d_cl_dw_back_filter", "dy")
    _need_plain(a, "conv_2d_cl_dw_back_filter", "a")
    if dy.ptr.ne[3] != a.ptr.ne[3] or dy.ptr.ne[0] != a.ptr.ne[0]:
        raise ValueError(f"conv_2d_cl_dw_back_filter: dy {dy.shape} and a {a.shape} differ in batch or channels")
    kh, kw = _int_pair(kernel_size, "conv_2d_cl_dw_back_filter", "kernel_size", 1)
    if kh * kw > _DW_MAX_TAPS:
        raise ValueError(f"conv_2d_cl_dw_back_filter: a kernel of {kh} x {kw} taps is more than {_DW_MAX_TAPS}")
    sh, sw = _int_pair(strides, "conv_2d_cl_dw_back_filter", "strides", 1)
    dh, dw = _int_pair(dilation, "conv_2d_cl_dw_back_filter", "dilation", 1)
    top, left, oh, ow = _window_geometry(padding, a.ptr.ne[2], a.ptr.ne[1], kh, kw, sh, sw, dh, dw,
                                         "conv_2d_cl_dw_back_filter")
    if (oh, ow) != (dy.ptr.ne[2], dy.ptr.ne[1]):
        raise ValueError(f"conv_2d_cl_dw_back_filter: dy {dy.shape} is not the output ({oh}, {ow}) of a {a.shape}")
    cdef int64_t n = a.ptr.ne[0] * kh * kw + (a.ptr.ne[0] if with_bias else 0)
    _conv_elems(n, "conv_2d_cl_dw_back_filter")
    _prep(c, 4 * n)
    return _out(c, ggml_conv_cl_dw_back_filter(c.ptr, dy.ptr, a.ptr, kw, kh, sw, sh, left, top, dw, dh, with_bias),
                1, (dy, a))


cdef int _cell_check(Tensor zx, Tensor zh, Tensor state, Tensor h, Tensor mask, int gates, str what) except -1:
    _need_plain(zx, what, "the input projection")
    _need_plain(zh, what, "the recurrent projection")
    _need_plain(state, what, "the state")
    cdef int64_t u = state.ptr.ne[0], nb = ggml_nelements(state.ptr) // max(state.ptr.ne[0], 1)
    if zx.ptr.ne[0] != gates * u or ggml_nelements(zx.ptr) != gates * u * nb:
        raise ValueError(f"{what}: the projections must be (batch, {gates} * units) = ({nb}, {gates * u}), "
                         f"got {zx.shape}")
    if not ggml_are_same_shape(zx.ptr, zh.ptr):
        raise ValueError(f"{what}: the two projections differ: {zx.shape} and {zh.shape}")
    if h is not None:
        _need_plain(h, what, "h")
        if not ggml_are_same_shape(h.ptr, state.ptr):
            raise ValueError(f"{what}: h {h.shape} and the state {state.shape} differ")
    if mask is not None:
        _need_plain(mask, what, "mask")
        if ggml_nelements(mask.ptr) != nb:
            raise ValueError(f"{what}: mask must have one value per row ({nb}), got {mask.shape}")
    return 0


def lstm_cell(Tensor zx not None, Tensor zh not None, Tensor c not None, Tensor h=None, Tensor mask=None, ctx=None):
    """One LSTM step, PyTorch's gate order (i, f, g, o): zx and zh (B, 4U) the input and
    recurrent projections (biases included), c (B, U) the cell state.  With a mask (B,)
    of 1 (step) and 0 (keep the state), h (B, U), the previous output, is required.
    Result (2, B, U): the new h and c (views with ops.view: offsets 0 and B*U*4)."""
    cdef Context ctx_ = _pick_ctx(zx, ctx)
    zh._check()
    c._check()
    _cell_check(zx, zh, c, h, mask, 4, "lstm_cell")
    if mask is not None and h is None:
        raise ValueError("lstm_cell: a mask needs h (the state it keeps)")
    _prep(ctx_, 8 * ggml_nelements(c.ptr))
    return _out(ctx_, ggml_lstm_cell(ctx_.ptr, zx.ptr, zh.ptr, c.ptr, NULL if h is None else h.ptr,
                                     NULL if mask is None else mask.ptr), 3, (zx, zh, c, h, mask))


def lstm_cell_back(Tensor grad not None, Tensor zx not None, Tensor zh not None, Tensor c not None,
                   Tensor h=None, Tensor mask=None, ctx=None):
    """lstm_cell's backward pass: grad (2, B, U); a 1-d tensor [dz (B*4U), dc (B*U), and
    with a mask dh (B*U)]."""
    cdef Context ctx_ = _pick_ctx(grad, ctx)
    _cell_check(zx, zh, c, h, mask, 4, "lstm_cell_back")
    _need_plain(grad, "lstm_cell_back", "grad")
    if mask is not None and h is None:
        raise ValueError("lstm_cell_back: a mask needs h")
    if ggml_nelements(grad.ptr) != 2 * ggml_nelements(c.ptr):
        raise ValueError(f"lstm_cell_back: grad must have the result's shape (2, B, U), got {grad.shape}")
    _prep(ctx_, 28 * ggml_nelements(c.ptr))
    return _out(ctx_, ggml_lstm_cell_back(ctx_.ptr, grad.ptr, zx.ptr, zh.ptr, c.ptr, NULL if h is None else h.ptr,
                                          NULL if mask is None else mask.ptr), 1, (grad, zx, zh, c, h, mask))


def gru_cell(Tensor xp not None, Tensor hp not None, Tensor h not None, Tensor mask=None, ctx=None):
    """One GRU step as PyTorch's (Keras' reset_after=True), gates r, z, n: xp and hp (B, 3U)
    the input and recurrent projections with their biases, h (B, U):
    n = tanh(xp_n + r * hp_n), h' = (1 - z) n + z h; where mask (B,) is 0, h' = h.
    Result (B, U)."""
    cdef Context ctx_ = _pick_ctx(xp, ctx)
    hp._check()
    h._check()
    _cell_check(xp, hp, h, None, mask, 3, "gru_cell")
    _prep(ctx_, 4 * ggml_nelements(h.ptr))
    return _out(ctx_, ggml_gru_cell(ctx_.ptr, xp.ptr, hp.ptr, h.ptr, NULL if mask is None else mask.ptr),
                _nd(h), (xp, hp, h, mask))


def gru_cell_back(Tensor grad not None, Tensor xp not None, Tensor hp not None, Tensor h not None,
                  Tensor mask=None, ctx=None):
    """gru_cell's backward pass: a 1-d tensor [dxp (B*3U), dhp (B*3U), dh (B*U)]."""
    cdef Context ctx_ = _pick_ctx(grad, ctx)
    _cell_check(xp, hp, h, None, mask, 3, "gru_cell_back")
    _need_plain(grad, "gru_cell_back", "grad")
    if not ggml_are_same_shape(grad.ptr, h.ptr):
        raise ValueError(f"gru_cell_back: grad {grad.shape} must have h's shape {h.shape}")
    _prep(ctx_, 28 * ggml_nelements(h.ptr))
    return _out(ctx_, ggml_gru_cell_back(ctx_.ptr, grad.ptr, xp.ptr, hp.ptr, h.ptr,
                                         NULL if mask is None else mask.ptr), 1, (grad, xp, hp, h, mask))


def pool_1d(Tensor a not None, op="max", int k0=2, s0=None, int p0=0, ctx=None):
    """ggml's 1-D pooling along ggml dim 0 (numpy's last axis) of every row: window k0,
    stride s0 (default k0), p0 padding at both ends; "avg" is the mean of the taps inside
    the row.  Result's last axis: (L + 2*p0 - k0) // s0 + 1."""
    cdef Context c = _pick_ctx(a, ctx)
    _need_f32(a, "pool_1d")
    _need_dense_rows(a, "pool_1d")
    if op not in ("max", "avg"):
        raise ValueError("pool_1d: op must be 'max' or 'avg'")
    cdef int s = k0 if s0 is None else s0
    if k0 < 1 or s < 1 or p0 < 0 or k0 > _MAX_EXTENT or s > _MAX_EXTENT:
        raise ValueError("pool_1d: kernel and stride must be >= 1, padding >= 0")
    if p0 >= k0:
        raise ValueError("pool_1d: padding must be smaller than the window")
    cdef int64_t L = a.ptr.ne[0]
    if L + 2 * p0 < k0:
        raise ValueError(f"pool_1d: window {k0} is larger than the padded row ({L} + 2 * {p0})")
    cdef int64_t ow = (L + 2 * p0 - k0) // s + 1
    if (ow - 1) * s - p0 >= L:
        raise ValueError("pool_1d: every window must hold part of the row")
    _prep(c, 4 * ow * (ggml_nelements(a.ptr) // max(L, 1)))
    return _out(c, ggml_pool_1d(c.ptr, a.ptr, GGML_OP_POOL_MAX if op == "max" else GGML_OP_POOL_AVG, k0, s, p0),
                _nd(a), (a,))


def upscale(Tensor a not None, factors, ctx=None):
    """Nearest-neighbour upscaling by whole factors, one per numpy axis of a (e.g.
    (1, 2, 2, 1) for channels-last images: Keras' UpSampling2D).  The backward pass needs
    the scaled axes to be numpy's last two, or the two before the last."""
    cdef Context c = _pick_ctx(a, ctx)
    _need_f32(a, "upscale")
    cdef int nd = _nd(a)
    try:
        f = tuple(factors)
    except TypeError:
        raise TypeError("upscale: factors must be a tuple of ints, one per axis") from None
    if len(f) != nd or not all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in f):
        raise TypeError(f"upscale: factors must be {nd} ints (one per axis of {a.shape}), got {factors!r}")
    if any(x < 1 or x > 4096 for x in f):
        raise ValueError("upscale: factors must be between 1 and 4096")
    rev = list(reversed([int(x) for x in f])) + [1] * (4 - nd)
    cdef int64_t ne[4]
    cdef int64_t total = 1
    for i in range(4):
        ne[i] = a.ptr.ne[i] * rev[i]
        total *= ne[i]
    _conv_elems(total, "upscale")
    _prep(c, 4 * total)
    return _out(c, ggml_interpolate(c.ptr, a.ptr, ne[0], ne[1], ne[2], ne[3], GGML_SCALE_MODE_NEAREST), nd, (a,))


def pad_ext(Tensor a not None, pads, ctx=None):
    """Zero padding before and after each numpy axis: pads ((before, after), ...), one
    pair per axis of a."""
    cdef Context c = _pick_ctx(a, ctx)
    _need_f32(a, "pad_ext")
    cdef int nd = _nd(a)
    try:
        pp = [tuple(x) for x in pads]
    except TypeError:
        raise TypeError("pad_ext: pads must be pairs (before, after), one per axis") from None
    if len(pp) != nd or any(len(x) != 2 for x in pp) or \
            not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for x in pp for v in x):
        raise TypeError(f"pad_ext: pads must be {nd} pairs of ints (one per axis of {a.shape}), got {pads!r}")
    if any(v < 0 or v > _MAX_EXTENT for x in pp for v in x):
        raise ValueError("pad_ext: padding must be between 0 and 2**24")
    rev = list(reversed(pp)) + [(0, 0)] * (4 - nd)
    cdef int64_t total = 1
    for i in range(4):
        total *= a.ptr.ne[i] + rev[i][0] + rev[i][1]
    _conv_elems(total, "pad_ext")
    _prep(c, 4 * total)
    return _out(c, ggml_pad_ext(c.ptr, a.ptr, rev[0][0], rev[0][1], rev[1][0], rev[1][1], rev[2][0], rev[2][1],
                                rev[3][0], rev[3][1]), nd, (a,))


cdef int _check_backward_pyggml(ggml_tensor * t, list needs) except -1:
    """The conditions under which the backward passes pyggml's patches add would abort."""
    cdef int64_t f[4]
    cdef int i
    if t.op == GGML_OP_PAD and needs[0] and t.op_params[8] != 0:
        raise GGMLError("no backward pass for circular padding")
    if t.op == GGML_OP_UPSCALE and needs[0]:
        if t.op_params[0] != GGML_SCALE_MODE_NEAREST:
            raise GGMLError("upscale has a backward pass for nearest-neighbour upscaling only")
        for i in range(4):
            if t.ne[i] % t.src[0].ne[i] != 0:
                raise GGMLError("upscale's backward pass needs whole scale factors")
            f[i] = t.ne[i] // t.src[0].ne[i]
        if not (f[2] == 1 and f[3] == 1) and not (f[0] == 1 and f[3] == 1):
            raise GGMLError("upscale's backward pass needs the scaled axes to be numpy's last two or "
                            "the two before the last")
    if t.op == GGML_OP_POOL_1D and needs[0]:
        if t.op_params[3] >= t.op_params[1]:
            raise GGMLError("pool_1d's backward pass needs padding smaller than the window")
    if t.op == GGML_OP_LSTM_CELL and len(needs) > 4 and needs[4]:
        raise GGMLError("lstm_cell has no gradient for its mask")
    if t.op == GGML_OP_GRU_CELL and needs[3]:
        raise GGMLError("gru_cell has no gradient for its mask")
    if t.op == GGML_OP_BATCH_NORM and needs[3]:
        raise GGMLError("batch_norm's stats must not need a gradient")
    if t.op == GGML_OP_OUT_PROD and (needs[0] or needs[1]) and \
            (t.src[0].ne[2] != t.src[1].ne[2] or t.src[0].ne[3] != t.src[1].ne[3]):
        raise GGMLError("no backward pass for a broadcast out_prod (a second-order gradient through a product "
                        "of a weight with a batch of matrices)")
    if t.op == GGML_OP_POOL_CL_BACK and needs[0] and t.op_params[0] == GGML_POOL_CL_MAX and \
            not ((t.src[0].ne[1] == 1 or t.op_params[1] <= t.op_params[3]) and
                 (t.src[0].ne[2] == 1 or t.op_params[2] <= t.op_params[4])):
        raise GGMLError("no second-order gradient through max pooling whose windows overlap (pool_size larger "
                        "than strides)")
    if t.op == GGML_OP_POOL_2D_BACK and needs[0] and t.op_params[0] == GGML_OP_POOL_MAX and \
            not ((t.src[0].ne[0] == 1 or t.op_params[1] <= t.op_params[3]) and
                 (t.src[0].ne[1] == 1 or t.op_params[2] <= t.op_params[4])):
        raise GGMLError("no second-order gradient through max pooling whose windows overlap (pool_size larger "
                        "than strides)")
    if t.op == GGML_OP_UNARY_BACK and needs[1] and not _act_piecewise_linear(t.op_params[0]) and \
            not (t.op_params[1] != 0 and t.op_params[0] in (GGML_ACT_TANH, GGML_ACT_SIGMOID, GGML_ACT_ELU,
                                                            GGML_ACT_SOFTPLUS)) and \
            not (t.op_params[1] == 0 and t.op_params[0] in (GGML_ACT_GELU, GGML_ACT_GELU_ERF)):
        raise GGMLError(f"no second-order gradient through the activation {_ACT_NAMES[t.op_params[0]]} (pyggml has "
                        f"them for relu, leaky_relu, clamp, tanh, sigmoid, elu, softplus, gelu and silu)")
    if t.op == GGML_OP_SOFT_MAX_BACK and (needs[0] or needs[1]) and (<float *>t.op_params)[1] != 0.0:
        raise GGMLError("no second-order gradient through a softmax with an ALiBi slope (max_bias)")
    return 0


cdef bint _act_piecewise_linear(int act) noexcept:
    """Activations whose derivative is piecewise constant (ggml/patches/0040)."""
    return act == GGML_ACT_NONE or act == GGML_ACT_RELU or act == GGML_ACT_LEAKY_RELU or act == GGML_ACT_CLAMP


_ACT_NAMES = ("none", "relu", "tanh", "sigmoid", "elu", "leaky_relu", "softplus", "gelu", "gelu (exact)", "silu",
              "clamp")
