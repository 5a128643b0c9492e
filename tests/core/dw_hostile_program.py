"""Hostile arguments for the depthwise core ops (patch 0043), run by test_ops.py in a
subprocess: wrong shapes, dtypes, views, strides, paddings, dilations and activations are
refused with Python exceptions; what is accepted computes (forward), on 1 to 3 threads.
Prints "ok N refused M"; a crash kills the process."""
import sys
import numpy as np
from pyggml import core
from pyggml.core import ops
from pyggml.errors import GGMLError
EXPECTED = (TypeError, ValueError, GGMLError, OverflowError, MemoryError)
b = core.Backend("cpu"); sched = core.Scheduler([b])
rng = np.random.default_rng(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
shapes_a = [(2, 5, 6, 3), (1, 1, 1, 1), (1, 3, 3, 40), (2, 4, 4, 3, ), (3,), (2, 5, 6), (1, 20, 1, 2)]
shapes_w = [(1, 3, 2, 3), (1, 1, 1, 3), (1, 5, 5, 40), (2, 3, 2, 3), (1, 3, 2, 4), (3, 2, 3), (1, 17, 17, 3),
            (1, 7, 1, 3), (1, 1, 20, 2)]
pads = ["valid", "same", "bogus", (0, 0), (1, 2), (5, 5), (0, 0, 3, 3), (-1, 0), (2**30, 0), (0, 0, 2**30, 1), None,
        (1, 1, 1), 3]
strides = [(1, 1), (2, 3), (0, 1), (-1, 1), 2**31, (1, 2**30), 1]
dils = [(1, 1), (2, 2), (0, 1), (2**30, 1), 1]
acts = ["linear", "relu", "tanh", "gelu", "softmax", "bogus"]
n_ok = n_ref = 0
def pick(lst):
    return lst[0] if rng.random() < 0.7 else pick(lst)
msgs = {}
for trial in range(600):
    ctx = core.Context(n_tensors=64, graph_size=256, no_alloc=True)
    sa = pick(shapes_a); sw = pick(shapes_w)
    dt = pick(["f32", "i32", "f16"])
    a = ctx.new_tensor(sa, dtype=dt)
    w = ctx.new_tensor(sw)
    if rng.random() < 0.2 and len(sa) == 4:
        a = ops.permute(a, (0, 2, 1, 3), ctx=ctx)          # a view: not contiguous
    bias = ctx.new_tensor((sa[-1],)) if rng.random() < 0.5 else (ctx.new_tensor((7,)) if rng.random() < 0.3 else None)
    kind = rng.integers(3)
    try:
        if kind == 0:
            y = ops.conv_2d_cl_dw(a, w, bias, pick(strides), pick(pads),
                                  pick(dils), pick(acts), ctx=ctx)
        elif kind == 1:
            y = ops.conv_2d_cl_dw_back_input(a, w, pick([(5, 6), (1, 1), (0, 3), (2**30, 2), (3, 3)]),
                                             pick(strides), pick(pads),
                                             pick(dils), ctx=ctx)
        else:
            y = ops.conv_2d_cl_dw_back_filter(a, ctx.new_tensor(pick(shapes_a)),
                                              pick([(3, 2), (1, 1), (17, 17), (0, 1), (5, 5)]),
                                              pick(strides), pick(pads),
                                              pick(dils), bool(rng.integers(2)), ctx=ctx)
    except EXPECTED as e:
        n_ref += 1
        k = "build " + type(e).__name__ + ": " + str(e)[:80]
        msgs[k] = msgs.get(k, 0) + 1
        ctx.free()
        continue
    # accepted: allocate and compute it, with a backward pass when it has one
    try:
        buf = core.BackendBuffer(ctx, b)
        for t in ctx.tensors():
            if t.dtype == "f32":
                t.set(rng.normal(size=t.shape).astype(np.float32))
        g = core.Graph(ctx, 256)
        g.build_forward(y)
        sched.alloc(g)
        sched.compute(g, int(rng.integers(1, 4)))
        assert np.all(np.isfinite(y.numpy())) or True
        n_ok += 1
        g.free(); buf.free()
    except EXPECTED as e:
        n_ref += 1
        msgs[type(e).__name__ + ": " + str(e)[:70]] = msgs.get(type(e).__name__ + ": " + str(e)[:70], 0) + 1
    ctx.free()
print("ok", n_ok, "refused", n_ref)
for k, v in sorted(msgs.items(), key=lambda kv: -kv[1])[:5]: print(v, k)
