"""Values ggml asserts on, and memory used after it was freed (issue 18, items 6 and 8).

- GGUFFile: a NUL byte in a tensor name or key, duplicate names, and
  general.alignment of 3, 0, a float, an i32 kind or a value out of range raise
  (ggml aborted); a valid alignment lays the file out with it.
- get_rows with an index out of range raises ValueError before compute (ggml
  asserted during compute), in Scheduler.compute and in OptContext.step.
- OptContext.step and Scheduler.compute after a BackendBuffer or Context the
  graph uses was freed raise FreedError (one wrote into freed memory, the
  other returned wrong values).
Each case runs in its own interpreter and fails on a signal or a hang."""

import pytest

from _subproc import run_py


def expect_raises(code, exc):
    return f"""
try:
{chr(10).join('    ' + l for l in code.strip().splitlines())}
except {exc} as e:
    print("RAISED", type(e).__name__, e)
else:
    print("NO ERROR")
"""


GGUF_CASES = {
    "nul_in_tensor_name": ("f = core.GGUFFile(); f.add_tensor('a\\x00b', np.ones(2))", "ValueError"),
    "nul_names_colliding": ("f = core.GGUFFile(); f.add_tensor('a\\x00x', np.ones(2)); "
                            "f.add_tensor('a\\x00y', np.ones(2))", "ValueError"),
    "duplicate_name": ("f = core.GGUFFile(); f.add_tensor('a', np.ones(2)); f.add_tensor('a', np.ones(3))",
                       "ValueError"),
    "nul_in_key": ("f = core.GGUFFile(); f.set('a\\x00b', 1)", "ValueError"),
    "nul_in_string": ("f = core.GGUFFile(); f.set('a', 'x\\x00y')", "ValueError"),
    "nul_in_string_list": ("f = core.GGUFFile(); f.set('a', ['x', 'y\\x00'])", "ValueError"),
    "alignment_3": ("f = core.GGUFFile(); f.set('general.alignment', 3)", "ValueError"),
    "alignment_0": ("f = core.GGUFFile(); f.set('general.alignment', 0)", "ValueError"),
    "alignment_negative": ("f = core.GGUFFile(); f.set('general.alignment', -32)", "ValueError"),
    "alignment_48": ("f = core.GGUFFile(); f.set('general.alignment', 48)", "ValueError"),
    "alignment_huge": ("f = core.GGUFFile(); f.set('general.alignment', 2**40)", "ValueError"),
    "alignment_float": ("f = core.GGUFFile(); f.set('general.alignment', 32.0)", "TypeError"),
    "alignment_bool": ("f = core.GGUFFile(); f.set('general.alignment', True)", "TypeError"),
    "alignment_str": ("f = core.GGUFFile(); f.set('general.alignment', '32')", "TypeError"),
    "alignment_list": ("f = core.GGUFFile(); f.set('general.alignment', [32])", "TypeError"),
    "alignment_i32_kind": ("f = core.GGUFFile(); f.set('general.alignment', 32, kind='i32')", "ValueError"),
    "alignment_f64_kind": ("f = core.GGUFFile(); f.set('general.alignment', 32, kind='f64')", "ValueError"),
    "unknown_kind": ("f = core.GGUFFile(); f.set('a', 1, kind='u8')", "ValueError"),
    "set_on_a_read_file": ("p = '/tmp/_pg_vals.gguf'; g = core.GGUFFile(); g.add_tensor('t', np.ones(2)); "
                           "g.write(p); core.GGUFFile.read(p).set('a', 1)", "GGUFError"),
    "layer_name_with_nul_saved": ("m = pg.Sequential([pg.layers.Dense(2, name='a\\x00b')], input_shape=3)"
                                  ".compile(loss='mse'); m.save('/tmp/_pg_nul.gguf')",
                                  "(ValueError, TypeError, GGUFError)"),
}


@pytest.mark.parametrize("case", sorted(GGUF_CASES))
def test_gguf_values_raise(case):
    code, exc = GGUF_CASES[case]
    r = run_py(expect_raises(code, exc))
    assert "RAISED" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("alignment", [1, 8, 64, 128, 4096])
def test_gguf_alignment_lays_out_the_file(tmp_path, alignment):
    """A valid general.alignment (given as a plain int: stored as u32) writes a
    file that ggml's reader and the gguf package both read back exactly."""
    p = tmp_path / "a.gguf"
    r = run_py(f"""
        f = core.GGUFFile()
        f.set("general.alignment", np.int64({alignment}))
        arrays = {{"a": np.arange(5, dtype=np.float32), "b": np.arange(7, dtype=np.float16),
                   "c": np.arange(12, dtype=np.int32).reshape(3, 4)}}
        for k, v in arrays.items():
            f.add_tensor(k, v)
        f.write({str(p)!r})
        g = core.GGUFFile.read({str(p)!r})
        assert g.alignment == {alignment} and g["general.alignment"] == {alignment}
        for k, v in arrays.items():
            np.testing.assert_array_equal(g.read_tensor(k), v)
            assert g.tensor_info(k)[2] % {alignment} == 0
        import gguf
        rd = gguf.GGUFReader({str(p)!r})
        for t in rd.tensors:
            np.testing.assert_array_equal(np.asarray(t.data).ravel(), arrays[t.name].ravel())
        print("OK")
    """)
    assert "OK" in r.stdout


GET_ROWS = """
be = core.Backend("cpu")
def setup(n_rows=5, n_idx=4):
    wctx = core.Context(n_tensors=8)
    table = wctx.new_tensor((n_rows, 3)).set_param()
    idx = wctx.new_tensor((n_idx,), dtype="i32").set_input()
    buf = core.BackendBuffer(wctx, be)
    table.set(np.arange(n_rows * 3).reshape(n_rows, 3))
    idx.set(np.arange(n_idx) % n_rows)
    ctx = core.Context(n_tensors=64, graph_size=256)
    rows = ops.get_rows(table, idx, ctx=ctx)
    return wctx, table, idx, buf, ctx, rows
"""


@pytest.mark.parametrize("bad", [5, 6, -1, 2**31 - 1, -2**31])
def test_get_rows_out_of_range_in_compute(bad):
    r = run_py(GET_ROWS, f"""
        wctx, table, idx, buf, ctx, rows = setup()
        g = core.Graph(ctx, 256).build_forward(rows)
        s = core.Scheduler([be])
        s.compute(g)
        np.testing.assert_array_equal(rows.numpy(), np.arange(15).reshape(5, 3)[[0, 1, 2, 3]])
        idx.set([0, {bad}, 1, 2])
        try:
            s.compute(g)
        except ValueError as e:
            print("RAISED", e)
        idx.set([4, 3, 2, 1])
        s.compute(g)
        np.testing.assert_array_equal(rows.numpy(), np.arange(15).reshape(5, 3)[[4, 3, 2, 1]])
        print("OK")
    """)
    assert "RAISED get_rows: index" in r.stdout and "OK" in r.stdout, r.stdout + r.stderr


def test_get_rows_out_of_range_through_a_view_and_in_training():
    r = run_py(GET_ROWS, """
        wctx = core.Context(n_tensors=8)
        table = wctx.new_tensor((5, 3)).set_param()
        idx = wctx.new_tensor((2, 2), dtype="i32").set_input()
        x = wctx.new_tensor((4, 3)).set_input()
        buf = core.BackendBuffer(wctx, be)
        table.set(np.ones((5, 3))); idx.set([[0, 1], [2, 3]]); x.set(np.ones((4, 3)))
        ctx = core.Context(n_tensors=256, graph_size=2048)
        rows = ops.get_rows(table, ops.reshape(idx, (4,), ctx=ctx), ctx=ctx)
        out = ops.mul(rows, x, ctx=ctx)
        s = core.Scheduler([be])
        opt = core.OptContext(s, ctx, x, out, loss="sum", optimizer="sgd", learning_rate=0.1)
        assert np.isfinite(opt.step())
        idx.set([[0, 1], [9, 3]])
        try:
            opt.step()
        except ValueError as e:
            print("RAISED", e)
        idx.set([[0, 1], [4, 3]])
        assert np.isfinite(opt.step())
        print("OK")
    """)
    assert "RAISED get_rows: index 9" in r.stdout and "OK" in r.stdout, r.stdout + r.stderr


def test_get_rows_with_computed_indices_is_checked_when_built():
    r = run_py(GET_ROWS, """
        wctx = core.Context(n_tensors=8)
        table = wctx.new_tensor((5, 3))
        f = wctx.new_tensor((4,))
        wide = wctx.new_tensor((4, 9))
        narrow = wctx.new_tensor((4, 5))
        ctx = core.Context(n_tensors=64, graph_size=256)
        for what, make in [("cast", lambda: ops.cast(f, "i32", ctx=ctx)),
                           ("argmax over 9 for 5 rows", lambda: ops.argmax(wide, ctx=ctx))]:
            try:
                ops.get_rows(table, make(), ctx=ctx)
            except ValueError as e:
                print("RAISED", what)
        ops.get_rows(table, ops.argmax(narrow, ctx=ctx), ctx=ctx)     # always in range
        print("OK")
    """)
    assert r.stdout.count("RAISED") == 2 and "OK" in r.stdout, r.stdout + r.stderr


def test_embedding_index_out_of_range_in_training():
    r = run_py("""
        m = pg.Sequential([pg.layers.Embedding(5, 2), pg.layers.Flatten(), pg.layers.Dense(1)],
                          input_shape=3).compile(loss="mse")
        x = np.array([[0, 1, 2], [3, 4, 7]]); y = np.zeros((2, 1), dtype=np.float32)
        for call in (lambda: m.fit(x, y, verbose=0), lambda: pg.Trainer(m, batch_size=2).step(x, y)):
            try:
                call()
            except (ValueError, IndexError) as e:
                print("RAISED", type(e).__name__)
        print("OK")
    """)
    assert r.stdout.count("RAISED") == 2 and "OK" in r.stdout, r.stdout + r.stderr


WORLD = """
be = core.Backend("cpu")
wctx = core.Context(n_tensors=8)
x = wctx.new_tensor((4, 3)).set_input()
w = wctx.new_tensor((2, 3)).set_param()
buf = core.BackendBuffer(wctx, be)
X = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
W = np.array([[1, 2, 3], [-1, 0, 1]], dtype=np.float32)
x.set(X); w.set(W)
ctx = core.Context(n_tensors=256, graph_size=2048)
y = ops.mul_mat(w, x, ctx=ctx)
sched = core.Scheduler([be])
"""


def test_opt_step_after_the_weights_buffer_was_freed():
    r = run_py(WORLD, """
        opt = core.OptContext(sched, ctx, x, y, loss="sum", optimizer="sgd", learning_rate=0.1)
        opt.step()
        buf.free()
        for _ in range(3):
            try:
                opt.step()
            except FreedError as e:
                print("RAISED", e)
        # memory again: training goes on, from the values set now
        buf2 = core.BackendBuffer(wctx, be)
        x.set(X); w.set(W)
        l1 = opt.forward()
        assert abs(l1 - float((X @ W.T).sum())) < 1e-4, l1
        opt.step()
        print("OK")
    """)
    assert r.stdout.count("RAISED") == 3 and "OK" in r.stdout, r.stdout + r.stderr


def test_scheduler_compute_after_the_buffer_was_freed():
    r = run_py(WORLD, """
        g = core.Graph(ctx, 64).build_forward(y)
        sched.compute(g)
        np.testing.assert_allclose(y.numpy(), X @ W.T, rtol=1e-6)
        buf.free()
        try:
            sched.compute(g)
        except FreedError as e:
            print("RAISED", e)
        buf2 = core.BackendBuffer(wctx, be)
        x.set(X); w.set(W)
        sched.compute(g)
        np.testing.assert_allclose(y.numpy(), X @ W.T, rtol=1e-6)
        print("OK")
    """)
    assert "RAISED" in r.stdout and "OK" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("which", ["wctx", "ctx", "sched", "be"])
def test_use_after_a_context_or_backend_was_freed(which):
    r = run_py(WORLD, f"""
        g = core.Graph(ctx, 64).build_forward(y)
        opt = core.OptContext(sched, ctx, x, y, loss="sum", optimizer="sgd", learning_rate=0.1)
        opt.step()
        {which}.free()
        for call in (lambda: opt.step(), lambda: sched.compute(g)):
            try:
                call()
            except FreedError as e:
                print("RAISED", e)
        print("OK")
    """)
    assert r.stdout.count("RAISED") == 2 and "OK" in r.stdout, r.stdout + r.stderr


def test_context_full_error_is_an_allocation_error():
    r = run_py("""
        assert issubclass(ContextFullError, AllocationError)
        c = core.Context(n_tensors=2)
        try:
            for _ in range(100):
                c.new_tensor((2,))
        except ContextFullError as e:
            print("RAISED", e)
        try:
            core.Graph(core.Context(n_tensors=1), 4096)
        except ContextFullError as e:
            print("RAISED", e)
    """)
    assert r.stdout.count("RAISED") == 2, r.stdout + r.stderr
