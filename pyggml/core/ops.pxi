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
