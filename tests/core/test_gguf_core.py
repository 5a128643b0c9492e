"""GGUFFile: write/read round trips of keys and tensors, files readable by
the reference `gguf` package, and damaged files refused without a crash."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from pyggml import GGUFError, core

KEYS = {
    "general.name": "tiny model ✓",
    "general.architecture": "pyggml",
    "test.int": 42,
    "test.negative": -(2 ** 40),
    "test.float": 0.25,
    "test.bool_true": True,
    "test.bool_false": False,
    "test.floats": [0.5, 1.5, -2.0],
    "test.ints": [1, 2, 3, 2 ** 35],
    "test.strings": ["relu", "softmax", "", "ünï"],
    "test.u8": np.array([1, 2, 255], dtype=np.uint8),
    "test.f64": np.array([1e-300, 2.5], dtype=np.float64),
}

TENSORS = {
    "dense.weight": np.random.default_rng(0).normal(size=(4, 3)).astype(np.float32),
    "dense.bias": np.arange(4, dtype=np.float32),
    "emb.half": np.random.default_rng(1).normal(size=(2, 3, 5)).astype(np.float16),
    "ids": np.array([[1, -2], [3, 2 ** 31 - 1]], dtype=np.int32),
    "scalar": np.array(3.5, dtype=np.float32),
    "four_d": np.arange(120, dtype=np.float32).reshape(2, 3, 4, 5),
}


def write_file(path):
    f = core.GGUFFile()
    for k, v in KEYS.items():
        f.set(k, v)
    f.set("test.u32", 7, kind="u32")
    f.set("test.i32", -7, kind="i32")
    f.set("test.double", 0.1, kind="f64")
    for name, a in TENSORS.items():
        f.add_tensor(name, a)
    f.write(path)
    f.free()
    return path


@pytest.fixture
def gguf_path(tmp_path):
    return write_file(str(tmp_path / "model.gguf"))


def test_roundtrip_keys(gguf_path):
    with core.GGUFFile.read(gguf_path) as f:
        assert f.version == 3
        assert f.alignment == 32
        keys = f.keys()
        for k, v in KEYS.items():
            assert k in keys and k in f
            got = f[k]
            if isinstance(v, float):
                assert got == pytest.approx(v)
                assert isinstance(got, float)
            elif isinstance(v, bool):
                assert got is v
            elif isinstance(v, np.ndarray):
                assert got.dtype == v.dtype
                np.testing.assert_array_equal(got, v)
            elif isinstance(v, list) and v and isinstance(v[0], float):
                np.testing.assert_allclose(got, v)
                assert got.dtype == np.float32
            elif isinstance(v, list) and v and isinstance(v[0], int):
                assert list(got) == v
                assert got.dtype == np.int64
            else:
                assert got == v and type(got) is type(v)
        assert f["test.u32"] == 7 and f["test.i32"] == -7
        assert f["test.double"] == 0.1            # f64 keeps every digit
        assert len(f) == len(KEYS) + 3
        assert "missing" not in f and 3 not in f
        assert f.get("missing") is None and f.get("missing", 5) == 5
        with pytest.raises(KeyError):
            f["missing"]
        with pytest.raises(TypeError):
            f.get(3)


def test_roundtrip_tensors(gguf_path):
    with core.GGUFFile.read(gguf_path) as f:
        assert f.tensor_names() == list(TENSORS)
        for name, a in TENSORS.items():
            got = f.read_tensor(name)
            want = a.reshape(1) if a.ndim == 0 else a
            assert got.dtype == want.dtype, name
            assert got.shape == want.shape, name
            np.testing.assert_array_equal(got, want)
            shape, dtype, offset, nbytes = f.tensor_info(name)
            assert shape == want.shape and nbytes == want.nbytes
            assert dtype == {np.float32: "f32", np.float16: "f16", np.int32: "i32"}[want.dtype.type]
            assert offset % 32 == 0
        with pytest.raises(KeyError):
            f.read_tensor("nope")


def test_other_dtypes_become_f32_and_writing_is_checked(tmp_path):
    f = core.GGUFFile()
    f.add_tensor("f64", np.arange(3, dtype=np.float64))
    f.add_tensor("i64", np.arange(3, dtype=np.int64))
    f.add_tensor("b", np.array([True, False]))
    with pytest.raises(ValueError):
        f.add_tensor("f64", np.ones(2))             # duplicate
    with pytest.raises(ValueError):
        f.add_tensor("x" * 64, np.ones(2))          # name too long
    with pytest.raises(ValueError):
        f.add_tensor("", np.ones(2))
    with pytest.raises(ValueError):
        f.add_tensor("five", np.ones((1, 1, 1, 1, 2)))
    with pytest.raises(ValueError):
        f.add_tensor("empty", np.ones((0, 3)))
    with pytest.raises(TypeError):
        f.add_tensor("s", np.array(["a"]))
    with pytest.raises(TypeError):
        f.set("", 1)
    with pytest.raises(TypeError):
        f.set(3, 1)
    with pytest.raises(TypeError):
        f.set("obj", object())
    with pytest.raises(ValueError):
        f.set("big", 2 ** 64)
    with pytest.raises(ValueError):
        f.set("u", -1, kind="u32")
    with pytest.raises(ValueError):
        f.set("nd", np.ones((2, 2)))
    with pytest.raises(FileNotFoundError):
        f.write(str(tmp_path / "no" / "such" / "dir" / "x.gguf"))
    p = str(tmp_path / "conv.gguf")
    f.write(p)
    with core.GGUFFile.read(p) as r:
        assert r.read_tensor("f64").dtype == np.float32
        np.testing.assert_array_equal(r.read_tensor("i64"), [0, 1, 2])
        with pytest.raises(GGUFError):
            r.add_tensor("x", np.ones(2))          # opened for reading
        with pytest.raises(GGUFError):
            r.write(p)
    with pytest.raises(FileNotFoundError):
        core.GGUFFile.read(str(tmp_path / "missing.gguf"))
    f.free()
    with pytest.raises(Exception, match="has been freed"):
        f.write(p)


def test_overwrite_is_atomic(tmp_path):
    p = str(tmp_path / "m.gguf")
    write_file(p)
    f = core.GGUFFile()
    f.set("general.name", "second")
    f.write(p)
    with core.GGUFFile.read(p) as r:
        assert r["general.name"] == "second" and r.tensor_names() == []
    assert [n for n in os.listdir(tmp_path) if n.startswith(".tmp")] == []


def test_reference_reader_reads_our_files(gguf_path):
    gguf = pytest.importorskip("gguf")
    reader = gguf.GGUFReader(gguf_path)
    fields = reader.fields
    assert str(bytes(fields["general.name"].parts[-1]), "utf-8") == KEYS["general.name"]
    assert int(fields["test.int"].parts[-1][0]) == 42
    assert float(fields["test.float"].parts[-1][0]) == 0.25
    assert bool(fields["test.bool_true"].parts[-1][0]) is True
    strs = [str(bytes(fields["test.strings"].parts[i]), "utf-8") for i in fields["test.strings"].data]
    assert strs == KEYS["test.strings"]
    floats = [float(fields["test.floats"].parts[i][0]) for i in fields["test.floats"].data]
    np.testing.assert_allclose(floats, KEYS["test.floats"])
    tensors = {t.name: t for t in reader.tensors}
    assert set(tensors) == set(TENSORS)
    for name, a in TENSORS.items():
        t = tensors[name]
        want = a.reshape(1) if a.ndim == 0 else a
        got = np.asarray(t.data).reshape(want.shape)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
        assert tuple(int(d) for d in t.shape) == tuple(reversed(want.shape))   # ggml order


def test_we_read_files_of_the_reference_writer(tmp_path):
    gguf = pytest.importorskip("gguf")
    p = str(tmp_path / "ref.gguf")
    w = gguf.GGUFWriter(p, arch="ref")
    w.add_string("general.name", "from gguf-py")
    w.add_uint32("ref.u32", 9)
    w.add_float32("ref.f", 1.5)
    w.add_array("ref.arr", ["a", "b"])
    w.add_tensor("w", np.arange(6, dtype=np.float32).reshape(2, 3))
    w.add_tensor("h", np.ones((4,), dtype=np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with core.GGUFFile.read(p) as f:
        assert f["general.name"] == "from gguf-py"
        assert f["ref.u32"] == 9 and f["ref.f"] == 1.5 and f["ref.arr"] == ["a", "b"]
        np.testing.assert_array_equal(f.read_tensor("w"), np.arange(6).reshape(2, 3))
        assert f.read_tensor("h").dtype == np.float16


DAMAGE_SCRIPT = textwrap.dedent('''
    import os, random, sys
    import numpy as np
    from pyggml import core, GGUFError
    src, work = sys.argv[1], sys.argv[2]
    data = open(src, "rb").read()

    def attempt(blob):
        with open(work, "wb") as fh:
            fh.write(blob)
        try:
            f = core.GGUFFile.read(work)
        except (GGUFError, ValueError, OSError):
            return "refused"
        whole = True
        try:
            for k in f.keys():
                f.get(k)
            for n in f.tensor_names():
                f.tensor_info(n)
                try:
                    f.read_tensor(n)
                except (GGUFError, ValueError, OSError):
                    whole = False
        finally:
            f.free()
        return "read" if whole else "refused"

    outcomes = {"refused": 0, "read": 0}
    # every truncation: the metadata is refused, or a tensor's data is
    for n in range(len(data)):
        outcomes[attempt(data[:n])] += 1
    assert outcomes["read"] == 0, "a truncated file was read as whole"
    # random byte changes, anywhere in the header and the metadata
    rnd = random.Random(1234)
    header_end = min(len(data), 2048)
    for i in range(1500):
        blob = bytearray(data)
        for _ in range(rnd.randint(1, 4)):
            pos = rnd.randrange(header_end)
            blob[pos] = rnd.randrange(256)
        outcomes[attempt(bytes(blob))] += 1
    # counts and lengths set to huge values
    for off in range(8, min(len(data), 400), 4):
        for v in (0xFFFFFFFF, 0x7FFFFFFF, 0x80000000):
            blob = bytearray(data)
            blob[off:off + 4] = v.to_bytes(4, "little")
            outcomes[attempt(bytes(blob))] += 1
    for blob in (b"", b"GGUF", b"GGUF\\x03\\x00\\x00\\x00", b"NOPE" * 100, os.urandom(4096)):
        outcomes[attempt(blob)] += 1
    print("OUTCOMES", outcomes["refused"], outcomes["read"])
''')


def test_damaged_files_are_refused_without_crashing(gguf_path, tmp_path):
    proc = subprocess.run([sys.executable, "-c", DAMAGE_SCRIPT, gguf_path, str(tmp_path / "bad.gguf")],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"exit {proc.returncode} (a negative code is a signal)\n{proc.stderr[-3000:]}"
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("OUTCOMES")][0]
    refused, read = map(int, line.split()[1:])
    assert refused > len(open(gguf_path, "rb").read())     # every truncation at least


def test_gguf_error_is_a_value_error(tmp_path):
    p = tmp_path / "junk.gguf"
    p.write_bytes(b"not a gguf file at all")
    with pytest.raises(GGUFError) as ei:
        core.GGUFFile.read(str(p))
    assert isinstance(ei.value, ValueError)
