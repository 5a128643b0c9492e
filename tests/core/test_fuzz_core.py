"""Random programs over the public core API, run by hypothesis in a
subprocess: whatever the shapes, dtypes, arguments and call order, the
interpreter never dies (no abort, no segfault) and every refusal is a Python
exception of the documented kinds."""

import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("hypothesis")

FUZZ_SCRIPT = textwrap.dedent(r'''
    import gc, sys
    import numpy as np
    from hypothesis import HealthCheck, given, settings, strategies as st
    from pyggml import core, ops
    from pyggml.errors import GGMLError

    core.set_n_threads(1)
    EXPECTED = (TypeError, ValueError, GGMLError, KeyError, OverflowError, MemoryError)
    BACKEND = core.Backend("cpu")
    EXAMPLES = int(sys.argv[1])

    ints = st.one_of(st.integers(-3, 7), st.sampled_from([0, 1, 2, 2 ** 31, -2 ** 31, 2 ** 62]))
    floats = st.one_of(st.floats(-4, 4), st.sampled_from([0.0, float("nan"), float("inf"), -1e30]))
    shapes = st.one_of(
        st.lists(st.integers(1, 5), min_size=1, max_size=4).map(tuple),
        st.lists(st.integers(-1, 6), min_size=0, max_size=5).map(tuple),
        st.integers(-2, 8), st.sampled_from([(2 ** 40, 2), (2 ** 21, 2 ** 21), "ab", None, (2.0, 3), (True,)]))
    dtypes = st.sampled_from(["f32", "f32", "f32", "f16", "i32", "q4_0", np.float64, None, 3, "float16"])

    UNARY = ["sqr", "sqrt", "log", "exp", "abs", "sgn", "neg", "step", "relu", "silu", "softplus", "tanh",
             "sigmoid", "gelu", "elu", "sin", "cos", "sum", "sum_rows", "mean", "argmax", "cont", "dup",
             "transpose", "soft_max", "soft_max_ext"]
    BINARY = ["add", "sub", "mul", "div", "mul_mat", "out_prod", "repeat", "cpy", "get_rows",
              "cross_entropy_loss", "soft_max_ext", "concat"]
    if hasattr(ops, "acc"):
        BINARY.append("acc")


    class State:
        def __init__(self):
            self.ctxs, self.tensors, self.graphs, self.scheds, self.bufs, self.opts = [], [], [], [], [], []

        def owners(self):
            return self.ctxs + self.graphs + self.scheds + self.bufs + self.opts


    def pick(data, items, allow_none=False):
        if not items:
            return None
        if allow_none and data.draw(st.booleans()):
            return None
        return items[data.draw(st.integers(0, len(items) - 1))]


    def a_new_context(data, s):
        kw = dict(n_tensors=data.draw(st.one_of(st.integers(0, 96), ints)),
                  graph_size=data.draw(st.one_of(st.integers(0, 512), ints)),
                  no_alloc=data.draw(st.booleans()),
                  mem_size=data.draw(st.one_of(st.integers(0, 1 << 16), ints)))
        s.ctxs.append(core.Context(**kw))


    def a_new_tensor(data, s):
        ctx = pick(data, s.ctxs)
        if ctx is not None:
            s.tensors.append(ctx.new_tensor(data.draw(shapes), dtype=data.draw(dtypes)))


    def a_buffer(data, s):
        ctx = pick(data, s.ctxs)
        if ctx is not None:
            s.bufs.append(core.BackendBuffer(ctx, BACKEND))


    def a_set(data, s):
        t = pick(data, s.tensors)
        if t is None:
            return
        kind = data.draw(st.sampled_from(["right", "shape", "list", "str"]))
        if kind == "right":
            arr = np.random.default_rng(data.draw(st.integers(0, 9))).normal(size=t.shape)
        elif kind == "shape":
            arr = np.zeros(data.draw(st.lists(st.integers(0, 5), max_size=4)))
        elif kind == "list":
            arr = [1, 2, 3]
        else:
            arr = "abc"
        t.set(arr)


    def a_numpy(data, s):
        t = pick(data, s.tensors)
        if t is not None:
            t.numpy()
            t.shape, t.dtype, t.flags, t.op, t.nbytes, repr(t)


    def a_unary(data, s):
        t = pick(data, s.tensors)
        if t is None:
            return
        name = data.draw(st.sampled_from(UNARY))
        ctx = pick(data, s.ctxs, allow_none=True)
        s.tensors.append(getattr(ops, name)(t, ctx=ctx))


    def a_binary(data, s):
        a, b = pick(data, s.tensors), pick(data, s.tensors)
        if a is None:
            return
        name = data.draw(st.sampled_from(BINARY))
        ctx = pick(data, s.ctxs, allow_none=True)
        if name == "concat":
            r = ops.concat(a, b, data.draw(ints), ctx=ctx)
        elif name == "acc":
            r = ops.acc(a, b, None, data.draw(st.integers(0, 64)), ctx=ctx)
        else:
            r = getattr(ops, name)(a, b, ctx=ctx)
        s.tensors.append(r)


    def a_param_op(data, s):
        t = pick(data, s.tensors)
        if t is None:
            return
        ctx = pick(data, s.ctxs, allow_none=True)
        which = data.draw(st.sampled_from(["scale", "scale_bias", "clamp", "leaky_relu", "norm", "rms_norm",
                                           "reshape", "view", "permute", "pad", "diag_mask_inf", "cast",
                                           "im2col", "pool_2d"]))
        if which == "scale":
            r = ops.scale(t, data.draw(floats), ctx=ctx)
        elif which == "scale_bias":
            r = ops.scale_bias(t, data.draw(floats), data.draw(floats), ctx=ctx)
        elif which == "clamp":
            r = ops.clamp(t, data.draw(floats), data.draw(floats), ctx=ctx)
        elif which == "leaky_relu":
            r = ops.leaky_relu(t, data.draw(floats), ctx=ctx)
        elif which == "norm":
            r = ops.norm(t, data.draw(floats), ctx=ctx)
        elif which == "rms_norm":
            r = ops.rms_norm(t, data.draw(floats), ctx=ctx)
        elif which == "reshape":
            r = ops.reshape(t, data.draw(shapes), ctx=ctx)
        elif which == "view":
            shape = data.draw(shapes)
            strides = data.draw(st.one_of(st.none(), st.lists(st.integers(-8, 64), max_size=4)))
            r = ops.view(t, shape, strides, data.draw(st.integers(0, 128)), ctx=ctx)
        elif which == "permute":
            r = ops.permute(t, data.draw(st.one_of(st.permutations([0, 1, 2, 3]),
                                                   st.lists(st.integers(-1, 4), max_size=5))), ctx=ctx)
        elif which == "pad":
            r = ops.pad(t, *[data.draw(st.integers(-1, 3)) for _ in range(4)], ctx=ctx)
        elif which == "diag_mask_inf":
            r = ops.diag_mask_inf(t, data.draw(ints), ctx=ctx)
        elif which == "cast":
            r = ops.cast(t, data.draw(dtypes), ctx=ctx)
        elif which == "im2col":
            d = pick(data, s.tensors)
            r = ops.im2col(t, d, *[data.draw(st.integers(-1, 3)) for _ in range(6)],
                           is_2d=data.draw(st.booleans()), dtype=data.draw(dtypes), ctx=ctx)
        else:
            r = ops.pool_2d(t, data.draw(st.sampled_from(["max", "avg", "min"])),
                            *[data.draw(st.integers(-1, 4)) for _ in range(4)],
                            data.draw(st.floats(-1, 2)), data.draw(st.floats(-1, 2)), ctx=ctx)
        s.tensors.append(r)


    def a_flags(data, s):
        t = pick(data, s.tensors)
        if t is None:
            return
        getattr(t, data.draw(st.sampled_from(["set_param", "set_loss", "set_input", "set_output"])))()


    def a_graph(data, s):
        ctx = pick(data, s.ctxs)
        if ctx is None:
            return
        g = core.Graph(ctx, data.draw(st.one_of(st.integers(1, 600), ints)), grads=data.draw(st.booleans()))
        s.graphs.append(g)
        for _ in range(data.draw(st.integers(1, 3))):
            t = pick(data, s.tensors)
            if t is not None:
                g.build_forward(t)


    def a_backward(data, s):
        g = pick(data, s.graphs)
        if g is not None:
            g.build_backward()


    def a_compute(data, s):
        g = pick(data, s.graphs)
        if g is None:
            return
        if not s.scheds or data.draw(st.booleans()):
            s.scheds.append(core.Scheduler([BACKEND], graph_size=data.draw(st.sampled_from([16, 1024, 8192]))))
        sched = pick(data, s.scheds)
        how = data.draw(st.sampled_from(["compute", "alloc", "alloc_reset_compute", "reset"]))
        if how == "compute":
            sched.compute(g, n_threads=data.draw(st.sampled_from([None, 1, 2, 0, -1, 5000])))
        elif how == "alloc":
            sched.alloc(g)
        elif how == "reset":
            sched.reset()
        else:
            sched.alloc(g)
            if data.draw(st.booleans()):
                g.reset()
            sched.compute(g)
        for t in g.nodes()[:3]:
            if data.draw(st.booleans()):
                t.numpy()
        t = pick(data, s.tensors)
        if t is not None:
            g.grad(t)


    def a_opt(data, s):
        x, y = pick(data, s.tensors), pick(data, s.tensors)
        ctx = pick(data, s.ctxs)
        if x is None or ctx is None:
            return
        if not s.scheds or data.draw(st.booleans()):
            s.scheds.append(core.Scheduler([BACKEND], graph_size=8192))
        opt = core.OptContext(pick(data, s.scheds), ctx, x, y,
                              loss=data.draw(st.sampled_from(["sum", "mean", "mse", "cross_entropy", "x"])),
                              optimizer=data.draw(st.sampled_from(["adamw", "sgd"])),
                              learning_rate=data.draw(floats))
        s.opts.append(opt)


    def a_opt_use(data, s):
        opt = pick(data, s.opts)
        if opt is None:
            return
        what = data.draw(st.sampled_from(["step", "forward", "alloc", "eval", "state", "read", "labels",
                                          "reset", "lr"]))
        if what == "step":
            opt.step()
        elif what == "forward":
            opt.forward()
        elif what == "alloc":
            opt.alloc(data.draw(st.booleans()))
        elif what == "eval":
            opt.eval()
        elif what == "state":
            st_ = opt.get_state()
            if data.draw(st.booleans()):
                st_["iter"] = data.draw(ints)
            opt.set_state(st_)
        elif what == "read":
            t = pick(data, s.tensors)
            if t is not None:
                opt.read(t)
        elif what == "labels":
            opt.set_labels(np.zeros(data.draw(st.lists(st.integers(0, 5), max_size=3))))
        elif what == "reset":
            opt.reset(data.draw(st.booleans()))
        else:
            opt.learning_rate = data.draw(floats)


    def a_free(data, s):
        o = pick(data, s.owners())
        if o is not None:
            o.free()


    def a_drop(data, s):
        lists = [l for l in (s.ctxs, s.tensors, s.graphs, s.scheds, s.bufs, s.opts) if l]
        if lists:
            l = pick(data, lists)
            l.pop(data.draw(st.integers(0, len(l) - 1)))
            if data.draw(st.booleans()):
                gc.collect()


    ACTIONS = [a_new_context, a_new_context, a_new_tensor, a_new_tensor, a_new_tensor, a_buffer, a_buffer,
               a_set, a_numpy, a_unary, a_unary, a_binary, a_binary, a_param_op, a_param_op, a_flags,
               a_graph, a_graph, a_backward, a_compute, a_compute, a_opt, a_opt_use, a_opt_use, a_free, a_drop]


    @settings(max_examples=EXAMPLES, derandomize=True, database=None, deadline=None, print_blob=False,
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def program(data):
        s = State()
        for _ in range(data.draw(st.integers(1, 30))):
            action = data.draw(st.sampled_from(ACTIONS))
            try:
                action(data, s)
            except EXPECTED:
                pass
        # the end of a program: everything dropped in some order
        for o in s.owners():
            if data.draw(st.booleans()):
                o.free()
        del s
        gc.collect()


    program()
    print("FUZZ-DONE", EXAMPLES)
''')


@pytest.mark.parametrize("examples", [int(os.environ.get("PYGGML_FUZZ_EXAMPLES", "400"))])
def test_random_programs_never_crash(examples, tmp_path):
    proc = subprocess.run([sys.executable, "-c", FUZZ_SCRIPT, str(examples)], capture_output=True, text=True,
                          timeout=900, cwd=str(tmp_path))
    detail = f"exit {proc.returncode} (negative: killed by that signal)\nstdout:\n{proc.stdout[-6000:]}\n" \
             f"stderr:\n{proc.stderr[-6000:]}"
    assert proc.returncode == 0, detail
    assert f"FUZZ-DONE {examples}" in proc.stdout, detail
