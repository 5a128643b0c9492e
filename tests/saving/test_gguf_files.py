"""Model files: round trips of every layer kind, readable by the gguf package,
atomic writes, and hostile files (fuzzed in a subprocess) that never crash."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import pyggml as pg


def _models():
    L = pg.layers
    yield "dense", pg.Sequential([L.Dense(5, activation="relu"), L.Dropout(0.2), L.Dense(3, activation="softmax")],
                                 input_shape=4), (4,)
    yield "conv", pg.Sequential([L.Conv2D(3, 3, padding="same", activation="relu"), L.BatchNormalization(),
                                 L.MaxPooling2D(), L.AveragePooling2D(pool_size=(1, 1)), L.Conv2D(2, (2, 2)),
                                 L.GlobalAveragePooling2D(), L.Dense(2)], input_shape=(6, 6, 2)), (6, 6, 2)
    yield "seq", pg.Sequential([L.Conv1D(4, 3, padding="same"), L.LayerNormalization(), L.Flatten(),
                                L.Reshape((4, -1)), L.Permute((2, 1)), L.Flatten(), L.Dense(2)],
                               input_shape=(5, 3)), (5, 3)
    inp = pg.Input(6)
    a = L.Dense(4, activation="tanh")(inp)
    b = L.Dense(4, activation="gelu")(inp)
    h = L.Concatenate()([L.Add()([a, b]), b])
    yield "functional", pg.Model(inp, [L.Dense(2, activation="sigmoid")(h), L.Dense(1)(h)]), (6,)
    yield "gmp", pg.Sequential([L.Conv2D(2, 2), L.GlobalMaxPooling2D(), L.Activation("elu"), L.Dense(2)],
                               input_shape=(4, 4, 1)), (4, 4, 1)


@pytest.mark.parametrize("kind", ["dense", "conv", "seq", "functional", "gmp"])
def test_round_trip_every_layer_kind(kind, tmp_path):
    name, model, shape = next((n, m, s) for n, m, s in _models() if n == kind)
    multi = isinstance(model.outputs, list) and len(model.outputs) > 1
    model.compile(optimizer="adam", loss=["binary_crossentropy", "mse"] if multi else "mse", seed=1)
    rng = np.random.default_rng(0)
    x = rng.random((20,) + shape).astype(np.float32)
    outs = model.outputs
    ys = [rng.random((20,) + tuple(o.shape[1:])).astype(np.float32) for o in outs]
    model.fit(x, ys if multi else ys[0], epochs=1, batch_size=10, verbose=0)
    path = tmp_path / f"{kind}.gguf"
    model.save(path)
    loaded = pg.load_model(path)
    p0, p1 = model.predict(x), loaded.predict(x)
    for a, b in zip(p0 if multi else [p0], p1 if multi else [p1]):
        np.testing.assert_array_equal(a, b)
    assert [l.name for l in loaded.layers] == [l.name for l in model.layers]
    gguf = pytest.importorskip("gguf")
    reader = gguf.GGUFReader(str(path))
    tensors = {t.name: t for t in reader.tensors}
    for k, v in model.get_weights().items():
        t = tensors[k]
        # every dimension, leading sizes of 1 too (the Dense(1)'s (1, 8) weight): patch 0015
        assert tuple(int(d) for d in reversed(list(t.shape))) == v.shape
        assert np.asarray(t.data).shape == v.shape
        np.testing.assert_array_equal(np.asarray(t.data), v)
    arch = reader.fields["general.architecture"]
    assert bytes(arch.parts[arch.data[0]]).decode() == "pyggml"
    model.free()
    loaded.free()


def test_fit_after_load_equals_fit_without_the_save(tmp_path):
    pg.set_n_threads(1)
    rng = np.random.default_rng(1)
    x = rng.random((64, 3)).astype(np.float32)
    y = np.eye(2, dtype=np.float32)[(x.sum(1) > 1.5).astype(int)]

    def make():
        pg.set_seed(7)
        return pg.Sequential([pg.layers.Dense(6, activation="relu"), pg.layers.Dense(2, activation="softmax")],
                             input_shape=3).compile(optimizer="adamw", loss="categorical_crossentropy")
    a, b = make(), make()
    a.fit(x, y, epochs=2, batch_size=16, verbose=0, shuffle=False)
    b.fit(x, y, epochs=2, batch_size=16, verbose=0, shuffle=False)
    a.save(tmp_path / "a.gguf")
    c = pg.load_model(tmp_path / "a.gguf")
    b.fit(x, y, epochs=3, batch_size=16, verbose=0, shuffle=False)
    c.fit(x, y, epochs=3, batch_size=16, verbose=0, shuffle=False)
    wb, wc = b.get_weights(), c.get_weights()
    for k in wb:
        np.testing.assert_array_equal(wb[k], wc[k])
    for m in (a, b, c):
        m.free()
    pg.set_n_threads(None)


def test_save_weights_load_weights_and_refusals(tmp_path):
    m = pg.Sequential([pg.layers.Dense(3)], input_shape=2).compile(loss="mse", seed=1)
    m.save_weights(tmp_path / "w.gguf")
    other = pg.Sequential([pg.layers.Dense(3)], input_shape=2).compile(loss="mse", seed=2)
    other.load_weights(tmp_path / "w.gguf")
    for k, v in m.get_weights().items():
        np.testing.assert_array_equal(other.get_weights()[k], v)
    wrong = pg.Sequential([pg.layers.Dense(4)], input_shape=2).compile(loss="mse")
    with pytest.raises(pg.GGUFError, match="dense.weight"):
        wrong.load_weights(tmp_path / "w.gguf")
    renamed = pg.Sequential([pg.layers.Dense(3, name="head")], input_shape=2).compile(loss="mse")
    with pytest.raises(pg.GGUFError, match="head.weight"):
        renamed.load_weights(tmp_path / "w.gguf")
    for mm in (m, other, wrong, renamed):
        mm.free()


def test_a_transposed_weight_of_the_same_size_is_refused(tmp_path):
    # Dense(3) on 2 inputs saved, loaded into Dense(2) on 3 inputs: weight (3, 2) vs (2, 3)
    m = pg.Sequential([pg.layers.Dense(3, use_bias=False)], input_shape=2).compile(loss="mse")
    m.save_weights(tmp_path / "w.gguf")
    t = pg.Sequential([pg.layers.Dense(2, use_bias=False)], input_shape=3).compile(loss="mse")
    with pytest.raises(pg.GGUFError, match=r"dense.weight.*\(3, 2\).*\(2, 3\)"):
        t.load_weights(tmp_path / "w.gguf")
    # a leading extent of 1, which GGUF does not keep, still loads
    one = pg.Sequential([pg.layers.Dense(1)], input_shape=4).compile(loss="mse", seed=3)
    one.save_weights(tmp_path / "one.gguf")
    back = pg.Sequential([pg.layers.Dense(1)], input_shape=4).compile(loss="mse", seed=4)
    back.load_weights(tmp_path / "one.gguf")
    np.testing.assert_array_equal(back.get_weights()["dense.weight"], one.get_weights()["dense.weight"])
    for mm in (m, t, one, back):
        mm.free()


def test_a_failed_save_leaves_the_old_file(tmp_path):
    m = pg.Sequential([pg.layers.Dense(3)], input_shape=2).compile(loss="mse")
    path = tmp_path / "m.gguf"
    m.save(path)
    good = path.read_bytes()
    with pytest.raises(FileNotFoundError):
        m.save(tmp_path / "missing-folder" / "m.gguf")
    assert path.read_bytes() == good
    assert [p.name for p in tmp_path.iterdir()] == ["m.gguf"]     # no temporary left behind
    m.free()


def test_a_snapshot_saves_a_loadable_model(tmp_path):
    m = pg.Sequential([pg.layers.Dense(2)], input_shape=3).compile(loss="mse")
    tr = pg.Trainer(m, batch_size=4)
    snap = tr.snapshot()
    snap.save(tmp_path / "s.gguf")
    x = np.random.default_rng(0).random((4, 3))
    np.testing.assert_array_equal(pg.load_model(tmp_path / "s.gguf").predict(x), snap.predict(x))
    snap.free()
    tr.free()
    m.free()


FUZZ = textwrap.dedent(r"""
    import os, sys, numpy as np
    import pyggml as pg
    from hypothesis import given, settings, strategies as st, HealthCheck
    src = open(sys.argv[1], "rb").read()
    out = sys.argv[2]
    n_cases = int(sys.argv[3])
    counts = {"ok": 0, "error": 0}

    @settings(max_examples=n_cases, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.lists(st.tuples(st.integers(0, len(src) - 1), st.integers(0, 255)), min_size=1, max_size=8),
           st.integers(0, len(src)), st.sampled_from(["flip", "truncate", "both", "big"]))
    def case(edits, cut, mode):
        b = bytearray(src)
        if mode in ("flip", "both", "big"):
            for pos, val in edits:
                b[pos] = 0xFF if mode == "big" else val
        if mode in ("truncate", "both"):
            b = b[:cut]
        with open(out, "wb") as f:
            f.write(bytes(b))
        try:
            m = pg.load_model(out)
            m.predict(np.zeros((2,) + tuple(m.inputs[0].shape)))
            m.free()
            counts["ok"] += 1
        except (pg.GGMLError, ValueError, TypeError, KeyError, OSError, MemoryError, RecursionError):
            counts["error"] += 1
    case()
    print("cases", counts["ok"] + counts["error"], "loaded", counts["ok"], "refused", counts["error"])
""")


def test_hostile_files_never_crash(tmp_path):
    pytest.importorskip("hypothesis")
    m = pg.Sequential([pg.layers.Dense(4, activation="relu"), pg.layers.Dense(2)], input_shape=3)
    m.compile(loss="mse")
    m.fit(np.zeros((8, 3)), np.zeros((8, 2)), epochs=1, batch_size=8, verbose=0)
    good = tmp_path / "good.gguf"
    m.save(good)
    m.free()
    script = tmp_path / "fuzz.py"
    script.write_text(FUZZ)
    n = int(os.environ.get("PYGGML_FUZZ_CASES", "2000"))
    r = subprocess.run([sys.executable, str(script), str(good), str(tmp_path / "bad.gguf"), str(n)],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, f"the loader died (rc {r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}"
    assert "cases" in r.stdout
    print(r.stdout)


def test_unknown_versions_and_other_files_are_refused(tmp_path):
    f = pg.core.GGUFFile()
    f.set("general.architecture", "pyggml")
    f.set("pyggml.format_version", 99, kind="u32")
    f.write(tmp_path / "v99.gguf")
    f.free()
    with pytest.raises(pg.GGUFError, match="version"):
        pg.load_model(tmp_path / "v99.gguf")
    (tmp_path / "junk.gguf").write_bytes(b"GGUF" + b"\xff" * 64)
    with pytest.raises(pg.GGUFError):
        pg.load_model(tmp_path / "junk.gguf")
    (tmp_path / "empty.gguf").write_bytes(b"")
    with pytest.raises(pg.GGUFError):
        pg.load_model(tmp_path / "empty.gguf")
    with pytest.raises(FileNotFoundError):
        pg.load_model(tmp_path / "absent.gguf")


@pytest.mark.parametrize("suffix", [".gguf", ".keras"])
def test_an_uncompiled_model_saves_and_loads_uncompiled(tmp_path, suffix):
    """As in Keras: save before compile, predict after load, compile and train the loaded model."""
    inp = pg.Input((4,))
    m = pg.Model(inp, pg.layers.Dense(2)(pg.layers.Dense(3, activation="relu")(inp)))
    x = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    path = str(tmp_path / f"m{suffix}")
    m.save(path)
    loaded = pg.models.load_model(path)
    assert not loaded.compiled
    np.testing.assert_array_equal(loaded.predict(x, verbose=0), m.predict(x, verbose=0))
    loaded.compile(loss="mse", optimizer="adam")
    before = loaded.evaluate(x, np.zeros((5, 2), np.float32), verbose=0)
    loaded.fit(x, np.zeros((5, 2), np.float32), epochs=20, verbose=0)
    assert loaded.evaluate(x, np.zeros((5, 2), np.float32), verbose=0) < before
    loaded.save(path)
    assert pg.models.load_model(path).compiled
    m.save_weights(str(tmp_path / "w.gguf"))
    m.load_weights(str(tmp_path / "w.gguf"))


@pytest.mark.parametrize("shape", [(1, 8), (1, 1, 5), (3, 1), (1,), (1, 1, 1, 1), (2, 1, 1, 3)])
def test_sizes_of_one_are_kept_in_the_file(shape, tmp_path):
    """ggml's writer drops a tensor's outer sizes of 1 (a Dense(1)'s (1, 8) weight read back as (8,) by
    every GGUF reader); pyggml's files keep each array's own dimensions."""
    from pyggml.core import GGUFFile
    a = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    f = GGUFFile()
    f.add_tensor("t", a)
    f.add_tensor("q", a.astype(np.int8))
    path = str(tmp_path / "ones.gguf")
    f.write(path)
    r = GGUFFile.read(path)
    try:
        for name, want in (("t", a), ("q", a.astype(np.int8))):
            assert r.tensor_info(name)[0] == shape
            got = r.read_tensor(name)
            assert got.shape == shape and got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)
    finally:
        r.free()
    gguf = pytest.importorskip("gguf")
    for t in gguf.GGUFReader(path).tensors:
        assert tuple(int(d) for d in reversed(list(t.shape))) == shape
        assert np.asarray(t.data).shape == shape


def test_a_regression_heads_weight_reads_back_whole(tmp_path):
    """A Dense(1) head's weight, (1, 4) in the model, is (1, 4) in the file and loads back."""
    model = pg.Sequential([pg.layers.Dense(4), pg.layers.Dense(1)], input_shape=3)
    path = tmp_path / "head.gguf"
    model.save(path)
    from pyggml.core import GGUFFile
    r = GGUFFile.read(str(path))
    try:
        names = r.tensor_names()
        shapes = {n: r.tensor_info(n)[0] for n in names}
    finally:
        r.free()
    w = model.get_weights()
    for k, v in w.items():
        assert shapes[k] == v.shape
    loaded = pg.load_model(path)
    x = np.random.default_rng(0).random((5, 3)).astype(np.float32)
    np.testing.assert_array_equal(loaded.predict(x, verbose=0), model.predict(x, verbose=0))
    model.free()
    loaded.free()
