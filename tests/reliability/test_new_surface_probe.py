"""Regressions from the hostile probe of the new surface (keras ops, the new layers,
pg.data, the image and directory utilities), each in its own interpreter: a very deep
graph killed the interpreter (SIGSEGV in ggml's recursive graph build), one_hot and
cumsum of long axes and constants of absurd shapes asked for many GiB (the OOM killer,
or a MemoryError from numpy), fit/predict on a dataset that repeats forever hung, and
some misuses gave errors that did not say what was expected."""

import pytest

from _subproc import run_py

LAYERS = """
    L = pg.layers
    X2 = np.random.default_rng(0).random((2, 3)).astype(np.float32)
    def raises(exc, fn, *words):
        try:
            fn()
        except exc as e:
            msg = str(e)
            assert all(w in msg for w in words), msg
        else:
            raise AssertionError(f"no {exc.__name__}")
"""


def chain(n):
    return f"""
        def chain(t):
            for _ in range({n}):
                t = t + 1.0
            return t
    """


def test_a_very_deep_graph_predicts_fits_and_runs_eagerly():
    # 200,000 chained additions: ggml's recursion went past the 8 MiB stack (SIGSEGV)
    run_py(LAYERS, chain(200000), """
        m = pg.Sequential([L.Lambda(chain), L.Dense(1)], input_shape=(3,)).compile(loss="mse")
        m.set_weights({k: np.ones_like(v) if v.ndim == 2 else np.zeros_like(v) for k, v in m.get_weights().items()})
        np.testing.assert_allclose(m.predict(X2)[:, 0], X2.sum(1) + 3 * 200000, rtol=1e-6)
        np.testing.assert_allclose(L.Lambda(chain)(X2), X2 + 200000, rtol=1e-6)
        h = m.fit(np.ones((4, 3), np.float32), np.ones((4, 1), np.float32), verbose=0)
        assert len(h.history["loss"]) == 1
    """, timeout=240)


def test_a_deep_graph_builds_on_a_thread_with_a_small_stack():
    # past SMALL tensors the build moves to a thread with its own large stack
    run_py(LAYERS, chain(30000), """
        def short(t):                     # just under SMALL: built in place
            for _ in range(1900):
                t = t + 1.0
            return t
        threading.stack_size(256 * 1024)
        got = []
        def work():
            got.append(L.Lambda(chain)(X2))
            got.append(L.Lambda(short)(X2))
        t = threading.Thread(target=work)
        t.start(); t.join()
        np.testing.assert_allclose(got[0], X2 + 30000, rtol=1e-6)
        np.testing.assert_allclose(got[1], X2 + 1900, rtol=1e-6)
    """, timeout=240)


def test_one_hot_of_a_large_vocabulary_builds_no_square_table():
    # a 50,000 x 50,000 table (10 GB) was built for two indices
    run_py("""
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
        got = ops.one_hot(np.array([1, 49999, -3, 50000]), 50000)
        assert got.shape == (4, 50000)
        assert got[0, 1] == 1 and got[1, 49999] == 1 and got.sum() == 2     # out of range: zeros
        want = np.zeros((2, 2, 3), np.float32)
        want[0, 0, 0] = want[0, 1, 2] = want[1, 0, 1] = 1              # 5 is out of range: a zero row
        np.testing.assert_array_equal(ops.one_hot(np.array([[0, 2], [1, 5]]), 3), want)
        np.testing.assert_array_equal(ops.one_hot(np.array(2), 4), [0, 0, 1, 0])
    """)


@pytest.mark.parametrize("code, exc, words", [
    ("ops.cumsum(np.ones(30000, np.float32))", "ValueError", ["cumsum", "30000", "8192"]),
    ("ops.zeros((100000, 100000))", "ValueError", ["zeros", "too large"]),
    ("ops.full((10**9, 4, 4), 1.0)", "ValueError", ["full", "too large"]),
    ("ops.ones_like(np.broadcast_to(np.float32(0), (70000, 70000)))", "ValueError", ["ones_like", "too large"]),
    ("ops.eye(10**9, 4)", "ValueError", ["eye", "too large"]),
    ("ops.eye(-1)", "ValueError", ["eye", "positive"]),
    ("ops.eye(2.5)", "ValueError", ["eye", "positive"]),
    ("ops.eye(3, k='x')", "TypeError", ["eye", "k"]),
    ("ops.eye(3, dtype='complex64')", "ValueError", ["eye", "dtype"]),
    ("ops.full((2, 3), {'a': 1})", "TypeError", ["full", "fill_value"]),
    ("ops.one_hot(np.array([1, 2]), 10**6 * 3000)", "ValueError", ["one_hot", "too large"]),
])
def test_huge_or_wrong_sizes_fail_before_allocating(code, exc, words):
    run_py(LAYERS, """
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
    """, f"raises({exc}, lambda: {code}, *{words!r})")


def test_the_ops_still_compute_what_numpy_does():
    run_py("""
        x = np.random.default_rng(1).random((3, 5)).astype(np.float32)
        np.testing.assert_allclose(ops.cumsum(x, axis=1), np.cumsum(x, axis=1), rtol=1e-5)
        np.testing.assert_allclose(ops.cumsum(np.ones(8192, np.float32))[-1], 8192)
        np.testing.assert_array_equal(ops.eye(3, 4, k=1), np.eye(3, 4, 1))
        np.testing.assert_array_equal(ops.full((2, 3), np.arange(3)), np.tile(np.arange(3), (2, 1)))
        assert ops.zeros(5, dtype="int32").dtype == np.int32
    """)


@pytest.mark.parametrize("call", ["m.fit(ds.repeat().batch(2), verbose=0)",
                                  "m.predict(ds.repeat().batch(2))",
                                  "m.evaluate(ds.repeat().batch(2), verbose=0)",
                                  "m.fit(ds.batch(2), validation_data=ds.repeat().batch(2), verbose=0)"])
def test_a_dataset_that_repeats_forever_needs_steps(call):
    # these ran forever
    run_py(LAYERS, f"""
        ds = pg.data.Dataset.from_tensor_slices((np.arange(10, dtype=np.float32).reshape(10, 1),
                                                 np.arange(10, dtype=np.float32)))
        m = pg.Sequential([L.Dense(1)], input_shape=(1,)).compile(loss="mse")
        raises(ValueError, lambda: {call}, "repeats forever", "steps")
        assert m.fit(ds.repeat().batch(2), steps_per_epoch=3, verbose=0).history["loss"]
        assert m.predict(ds.repeat().batch(2), steps=2).shape == (4, 1)
    """, timeout=120)


def test_unclear_errors_now_say_what_was_expected():
    run_py(LAYERS, """
        # an identity layer given a dict handed the dict back to the graph: AttributeError 'op'; now
        # the dict comes back, as Keras's identity gives it
        got = L.GaussianNoise(0.1)({"a": X2})
        assert list(got) == ["a"] and np.array_equal(np.asarray(got["a"]), X2)
        raises(ValueError, lambda: pg.utils.array_to_img(np.zeros((0, 4, 3))), "no pixels")
        ds = pg.data.Dataset.range(3)
        raises(ValueError, lambda: ds.prefetch("x"), "prefetch", "buffer_size")
        raises(TypeError, lambda: ds.enumerate(2.5), "enumerate", "start")
        assert [int(i) for i, _ in ds.enumerate(5).prefetch(pg.data.AUTOTUNE)] == [5, 6, 7]
        raises(ValueError, lambda: pg.data.Dataset.range(2**63), "int64")
        raises(ValueError, lambda: pg.data.Dataset.range(-2**63, 2**63 - 1), "Dataset.range")
        raises(TypeError, lambda: pg.data.Dataset.range(2.5), "Dataset.range")
        raises(ValueError, lambda: ds.enumerate(2**63), "enumerate", "int64")
    """)


@pytest.mark.parametrize("code, exc, words", [
    ("L.TextVectorization(ngrams=10**9)", "ValueError", ["ngrams", "too large"]),
    ("L.TextVectorization(ngrams=2**63)", "ValueError", ["ngrams", "too large"]),
    ("L.TextVectorization(ngrams=(2, 10**9))", "ValueError", ["ngrams"]),
    ("(lambda tv: (tv.adapt(T), tv(T)))(L.TextVectorization(max_tokens=10**9, output_mode='multi_hot', "
     "pad_to_max_tokens=True))", "ValueError", ["multi_hot", "too large"]),
    ("pg.utils.load_img(IMG, target_size=(10**5, 10**5))", "ValueError", ["target_size", "too large"]),
    ("pg.utils.image_dataset_from_directory(DIR, image_size=(10**5, 10**5))", "ValueError",
     ["image_size", "too large"]),
    ("L.RNN(HugeStateCell())(np.ones((2, 3, 4), np.float32))", "ValueError", ["state_size", "too large"]),
])
def test_absurd_preprocessing_and_cell_sizes_fail_before_allocating(code, exc, words):
    # each asked numpy for 7 to 112 GiB (a MemoryError at best, the OOM killer at worst)
    run_py(LAYERS, """
        import resource, tempfile
        from PIL import Image
        DIR = tempfile.mkdtemp()
        for c in ("a", "b"):
            os.makedirs(os.path.join(DIR, c))
            Image.fromarray(np.zeros((5, 7, 3), np.uint8)).save(os.path.join(DIR, c, "0.png"))
        IMG = os.path.join(DIR, "a", "0.png")
        T = np.array(["the cat sat", "a dog", ""])
        class HugeStateCell(L.Layer):
            state_size = 10**9
            def call(self, x, states):
                return x, states
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
    """, f"raises({exc}, lambda: {code}, *{words!r})")


def test_adapt_on_a_dataset_that_repeats_forever():
    # adapt ignored steps (TypeError from len) and, without steps, would read forever
    run_py(LAYERS, """
        T = np.array(["the cat sat", "a dog", ""])
        ds = pg.data.Dataset.from_tensor_slices(T).repeat().batch(2)
        tv = L.TextVectorization()
        tv.adapt(ds, steps=2)                 # batches ['the cat sat', 'a dog'], ['', 'the cat sat']
        assert set(tv.get_vocabulary()) == {"", "[UNK]", "the", "cat", "sat", "a", "dog"}
        raises(ValueError, lambda: L.TextVectorization().adapt(ds), "repeats forever", "steps")
        nums = pg.data.Dataset.from_tensor_slices(np.ones((4, 2), np.float32)).repeat().batch(2)
        raises(ValueError, lambda: L.Normalization().adapt(nums), "repeats forever", "steps")
        raises(TypeError, lambda: L.Normalization().adapt(np.ones((3, 2)), steps="x"), "steps")
        n = L.Normalization()
        n.adapt(pg.data.Dataset.from_tensor_slices(np.arange(8, dtype=np.float32).reshape(4, 2)).repeat().batch(2),
                steps=2)
        np.testing.assert_allclose(n(np.array([[3.0, 4.0]], np.float32)), [[0, 0]], atol=1e-6)
    """)


def test_a_keras_argument_on_a_tensor_outside_a_graph_says_why():
    # "mean() got an unexpected keyword argument 'axis'" did not say that ggml's form was taken
    run_py(LAYERS, """
        t = core.Context(n_tensors=8).new_tensor((2, 3))
        raises(TypeError, lambda: ops.mean(t, axis=0), "outside any model's graph", "axis")
        assert ops.mean(t).shape == (2, 1)          # ggml's form still works
    """)


def test_directories_with_pipes_devices_and_symlink_cycles():
    # a named pipe blocked the loader forever; a link to /dev/zero was read until memory ran
    # out; a symlink cycle was walked until the OS refused the path (the same files many times)
    run_py(LAYERS, """
        import resource, tempfile
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
        d = tempfile.mkdtemp()
        for c in ("a", "b"):
            os.makedirs(os.path.join(d, c))
            with open(os.path.join(d, c, "0.txt"), "w") as f:
                f.write(c)
        os.mkfifo(os.path.join(d, "a", "pipe.txt"))
        os.symlink("/dev/zero", os.path.join(d, "a", "zero.txt"))
        os.symlink(d, os.path.join(d, "b", "loop"))
        os.symlink(os.path.join(d, "a", "0.txt"), os.path.join(d, "b", "link.txt"))
        texts = [list(b[0]) for b in pg.utils.text_dataset_from_directory(d, shuffle=False, verbose=False)][0]
        assert texts == ["a", "b", "a"], texts              # a/0, b/0, b/link (a link to a file is read)
        texts = [list(b[0]) for b in pg.utils.text_dataset_from_directory(d, shuffle=False, verbose=False,
                                                                           follow_links=True)][0]
        assert sorted(texts) == ["a", "a", "a", "b"], texts  # and b/loop/a/0.txt once
        for p in (os.path.join(d, "a", "pipe.txt"), "/dev/zero", d):
            raises(ValueError, lambda: pg.utils.load_img(p), "not a regular file")
    """, timeout=60)


def test_tile_past_four_dimensions_names_tile():
    run_py(LAYERS, """
        raises(ValueError, lambda: ops.tile(np.ones((2, 3), np.float32), (1, 1, 1, 1, 2)), "tile", "4 dimensions")
        np.testing.assert_array_equal(ops.tile(np.arange(3, dtype=np.float32), (2, 1, 2)),
                                      np.tile(np.arange(3, dtype=np.float32), (2, 1, 2)))
    """)
