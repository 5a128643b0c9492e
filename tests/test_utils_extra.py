"""pg.tree, pg.config, Keras's serialization names, get_file, Progbar, the data-packing
helpers and audio_dataset_from_directory."""

import collections
import logging

import numpy as np
import pytest

import pyggml as pg

tree = pg.tree


# ---------------------------------------------------------------- pg.tree

Point = collections.namedtuple("Point", ["x", "y"])


def test_tree_flatten_orders_dicts_by_key_and_keeps_none_as_leaf():
    s = {"b": [1, (2, 3)], "a": None, "c": Point(4, {"z": 5, "y": 6})}
    assert tree.flatten(s) == [None, 1, 2, 3, 4, 6, 5]
    assert tree.flatten(7) == [7]
    assert tree.flatten("text") == ["text"]
    assert tree.flatten([]) == []
    od = collections.OrderedDict([("z", 1), ("a", 2)])
    assert tree.flatten(od) == [1, 2]            # an OrderedDict keeps its own order


def test_tree_pack_sequence_as_rebuilds_types_and_insertion_order():
    s = {"b": [1, (2, 3)], "a": None, "c": Point(4, 5)}
    out = tree.pack_sequence_as(s, list(range(10, 16)))
    assert out == {"b": [11, (12, 13)], "a": 10, "c": Point(14, 15)}
    assert list(out) == ["b", "a", "c"] and isinstance(out["c"], Point)
    assert tree.unflatten_as(s, list(range(6))) == tree.pack_sequence_as(s, list(range(6)))
    with pytest.raises(ValueError, match="6 leaves"):
        tree.pack_sequence_as(s, [1, 2])
    with pytest.raises(TypeError, match="flat_sequence"):
        tree.pack_sequence_as(s, 3)


def test_tree_flatten_with_path_and_is_nested():
    s = {"a": [1, {"k": 2}], "b": (3,)}
    assert tree.flatten_with_path(s) == [(("a", 0), 1), (("a", 1, "k"), 2), (("b", 0), 3)]
    assert tree.is_nested([]) and tree.is_nested({}) and tree.is_nested(Point(1, 2))
    assert not tree.is_nested("ab") and not tree.is_nested(None) and not tree.is_nested(np.zeros(3))


def test_tree_map_structure_and_assert_same_structure():
    a = {"x": [1, 2], "y": (3,)}
    b = {"y": (30,), "x": [10, 20]}
    assert tree.map_structure(lambda u, v: u + v, a, b) == {"x": [11, 22], "y": (33,)}
    with pytest.raises(ValueError, match="differ"):
        tree.assert_same_structure([1, 2], [1, 2, 3])
    with pytest.raises(ValueError, match="list and tuple"):
        tree.assert_same_structure([1, 2], (1, 2))
    with pytest.warns(DeprecationWarning, match="check_types"):
        with pytest.raises(ValueError, match="list and tuple"):
            tree.assert_same_structure([1, 2], (1, 2), check_types=False)
    tree.assert_same_paths([1, 2], (1, 2))
    tree.assert_same_paths(Point(1, 2), [3, 4])
    with pytest.raises(ValueError, match="only in the second"):
        tree.assert_same_paths([1, 2], [1, [2, 3]])
    tree.assert_same_structure({"a": 1}, collections.OrderedDict(a=2))
    Other = collections.namedtuple("Point", ["x", "y"])
    with pytest.raises(ValueError, match="differ"):
        tree.assert_same_structure(Point(1, 2), Other(1, 2))
    assert tree.map_structure(lambda v: v * 2, [1, None], none_is_leaf=False) == [2, None]
    assert tree.map_structure(lambda v: v is None, [1, None]) == [False, True]
    with pytest.raises(TypeError):
        tree.map_structure(len)
    dq = collections.deque([1, [2]])
    assert tree.flatten(dq) == [1, 2] and isinstance(tree.map_structure(str, dq), collections.deque)
    with pytest.raises(ValueError, match="keys"):
        tree.assert_same_structure({"a": 1}, {"b": 1})
    with pytest.raises(ValueError, match="nested"):
        tree.assert_same_structure([1], [[1]])
    with pytest.raises(ValueError):
        tree.map_structure(lambda u, v: u, [1, 2], [1])
    with pytest.raises(TypeError):
        tree.map_structure(3, [1])


def test_tree_map_structure_up_to_hands_deeper_parts_whole():
    shallow = {"a": None, "b": [None, None]}
    deep = {"a": [1, 2, 3], "b": [(4, 5), {"q": 6}]}
    out = tree.map_structure_up_to(shallow, lambda v: len(tree.flatten(v)), deep)
    assert out == {"a": 3, "b": [2, 1]}
    with pytest.raises(ValueError, match="2 elements"):
        tree.map_structure_up_to([None, None], lambda v: v, [1, 2, 3])
    with pytest.raises(ValueError, match="leaf"):
        tree.map_structure_up_to([None, [None]], lambda v: v, [1, 2])


def test_tree_traverse_top_down_bottom_up_and_map_to_none():
    s = [1, [2, 3], {"a": 4}]
    # top down: replacing a node stops the descent into it
    out = tree.traverse(lambda n: "LIST" if isinstance(n, list) and len(n) == 2 else None, s)
    assert out == [1, "LIST", {"a": 4}]
    seen = []
    tree.traverse(lambda n: seen.append(n), s, top_down=False)
    assert seen[0] == 1 and seen[-1] == s            # children before their parent
    out = tree.traverse(lambda n: n * 10 if isinstance(n, int) else None, s, top_down=False)
    assert out == [10, [20, 30], {"a": 40}]
    out = tree.traverse(lambda n: tree.MAP_TO_NONE if n == 2 else None, s)
    assert out == [1, [None, 3], {"a": 4}]


def test_tree_lists_to_tuples_and_map_shape_structure():
    assert tree.lists_to_tuples({"a": [1, [2]], "b": (3, [4])}) == {"a": (1, (2,)), "b": (3, (4,))}
    shapes = {"x": (None, 3), "y": [(2, 2), (5,)]}
    assert tree.map_shape_structure(lambda s: len(s), shapes) == {"x": 2, "y": [2, 1]}


# ---------------------------------------------------------------- pg.config

def test_config_shares_backend_state():
    old = pg.config.epsilon()
    try:
        pg.config.set_epsilon(1e-5)
        assert pg.backend.epsilon() == 1e-5
        pg.backend.set_epsilon(1e-3)
        assert pg.config.epsilon() == 1e-3
    finally:
        pg.backend.set_epsilon(old)
    try:
        pg.config.set_image_data_format("channels_first")
        assert pg.backend.image_data_format() == "channels_first"
    finally:
        pg.config.set_image_data_format("channels_last")
    assert pg.config.floatx() == "float32" and pg.config.backend() == pg.backend.backend() == "ggml"
    pg.config.set_floatx("float32")
    with pytest.raises(ValueError, match="float32"):
        pg.config.set_floatx("float16")
    with pytest.raises(ValueError):
        pg.config.set_epsilon(-1)
    with pytest.raises(ValueError, match="channels"):
        pg.config.set_image_data_format("nhwc")
    pg.config.set_backend("ggml")
    with pytest.raises(ValueError, match="jax"):
        pg.config.set_backend("jax")
    assert pg.config.dtype_policy() == "float32"
    with pytest.raises(ValueError, match="float16"):
        pg.config.set_dtype_policy("float16")          # variables in 16 bits: refused


def test_config_flags_toggle():
    assert pg.config.is_interactive_logging_enabled()
    pg.config.disable_interactive_logging()
    try:
        assert not pg.config.is_interactive_logging_enabled()
    finally:
        pg.config.enable_interactive_logging()
    assert pg.config.is_interactive_logging_enabled()
    assert pg.config.is_traceback_filtering_enabled()
    pg.config.disable_traceback_filtering()
    assert not pg.config.is_traceback_filtering_enabled()
    pg.config.enable_traceback_filtering()
    assert pg.config.in_safe_mode()
    assert pg.utils.disable_interactive_logging is pg.config.disable_interactive_logging
    assert pg.utils.clear_session is pg.backend.clear_session
    assert pg.config.is_flash_attention_enabled() is False
    pg.config.disable_flash_attention()
    with pytest.raises(ValueError, match="flash attention"):
        pg.config.enable_flash_attention()


def test_enable_unsafe_deserialization_turns_safe_mode_off(monkeypatch):
    from pyggml import config
    monkeypatch.setitem(config._STATE, "safe_mode", True)
    pg.config.enable_unsafe_deserialization()
    assert not pg.config.in_safe_mode()
    lam = pg.saving.serialize_keras_object(lambda v: v)
    with pytest.raises(ValueError, match="never runs code"):
        pg.saving.deserialize_keras_object(lam)


# ---------------------------------------------------------------- serialization names

def test_serialization_names_are_shared_between_utils_and_saving():
    for name in ("register_keras_serializable", "serialize_keras_object", "deserialize_keras_object",
                 "custom_object_scope", "get_custom_objects", "get_registered_name", "get_registered_object"):
        assert getattr(pg.utils, name) is getattr(pg.saving, name), name


def test_serialize_round_trip_of_builtins():
    s = pg.saving
    d = pg.layers.Dense(3, activation="relu", name="dd")
    c = s.serialize_keras_object(d)
    assert c["module"] == "keras.layers" and c["class_name"] == "Dense" and c["registered_name"] is None
    import json
    c = json.loads(json.dumps(c))
    d2 = s.deserialize_keras_object(c)
    assert isinstance(d2, pg.layers.Dense) and d2.get_config() == d.get_config()
    c = s.serialize_keras_object(pg.layers.Conv2D(2, (3, 3)))
    assert s.deserialize_keras_object(json.loads(json.dumps(c))).get_config()["kernel_size"] == (3, 3)
    loss = s.deserialize_keras_object(s.serialize_keras_object(pg.losses.MeanAbsoluteError()))
    assert isinstance(loss, pg.losses.MeanAbsoluteError)
    opt = s.deserialize_keras_object(s.serialize_keras_object(pg.optimizers.Adam(0.01)))
    assert isinstance(opt, pg.optimizers.Adam) and opt.learning_rate == pytest.approx(0.01)
    fn = s.serialize_keras_object(pg.activations.relu)
    assert fn == {"module": "keras.activations", "class_name": "function", "config": "relu",
                  "registered_name": None}
    assert s.deserialize_keras_object(fn) is pg.activations.relu
    # models: nested configs (Input's batch_shape tuple, a regularizer object) come back
    inp = pg.Input((4,))
    model = pg.Model(inp, pg.layers.Dense(1)(pg.layers.Dense(3, kernel_regularizer=pg.regularizers.L2(0.1))(inp)))
    back = s.deserialize_keras_object(json.loads(json.dumps(s.serialize_keras_object(model))))
    assert isinstance(back, pg.Model) and back.count_params() == model.count_params() == 19
    assert [l.get_config() for l in back.layers] == [l.get_config() for l in model.layers]
    value = {"a": (1, 2), "b": np.arange(3.0), "c": b"\x00\xff", "d": [None, "s", 2.5]}
    back = s.deserialize_keras_object(json.loads(json.dumps(s.serialize_keras_object(value))))
    assert back["a"] == (1, 2) and back["c"] == b"\x00\xff" and back["d"] == [None, "s", 2.5]
    np.testing.assert_array_equal(back["b"], np.arange(3.0))


@pg.saving.register_keras_serializable(package="utilsx_test")
class _Scaler:
    def __init__(self, factor=2.0):
        self.factor = factor

    def get_config(self):
        return {"factor": self.factor}

    @classmethod
    def from_config(cls, config):
        return cls(**config)


def test_serialize_user_registered_class_and_custom_objects():
    s = pg.saving
    c = s.serialize_keras_object(_Scaler(3.0))
    assert c["registered_name"] == "utilsx_test>_Scaler" and c["module"] == __name__
    assert s.deserialize_keras_object(c).factor == 3.0
    assert s.get_registered_name(_Scaler) == "utilsx_test>_Scaler"
    assert s.get_registered_object("utilsx_test>_Scaler") is _Scaler
    assert s.get_custom_objects()["utilsx_test>_Scaler"] is _Scaler

    class Unregistered(_Scaler):
        pass
    c = s.serialize_keras_object(Unregistered(5.0))
    with pytest.raises(ValueError, match="Unregistered"):
        s.deserialize_keras_object(c)
    assert s.deserialize_keras_object(c, custom_objects={"Unregistered": Unregistered}).factor == 5.0
    with s.custom_object_scope({"Unregistered": Unregistered}):
        assert s.get_registered_object("Unregistered") is Unregistered
        assert s.deserialize_keras_object(c).factor == 5.0
    assert s.get_registered_object("Unregistered") is None
    s.get_custom_objects()["Unregistered"] = Unregistered
    try:
        assert s.deserialize_keras_object(c).factor == 5.0
    finally:
        del s.get_custom_objects()["Unregistered"]
    assert s.get_registered_object("x", module_objects={"x": len}) is len


def test_deserialize_refuses_lambdas_and_bad_input():
    s = pg.saving
    c = s.serialize_keras_object(lambda x: x + 1)
    assert c["class_name"] == "__lambda__"
    with pytest.raises(ValueError, match="lambda"):
        s.deserialize_keras_object(c)
    with pytest.raises(ValueError, match="lambda"):
        s.deserialize_keras_object(c, safe_mode=False)
    with pytest.raises(TypeError, match="get_config"):
        s.serialize_keras_object(object())
    with pytest.raises(TypeError, match="class"):
        s.serialize_keras_object(pg.layers.Dense)
    with pytest.raises(TypeError, match="custom_objects"):
        s.deserialize_keras_object({"class_name": "Dense", "config": {}}, custom_objects=[1])
    with pytest.raises(TypeError):
        s.get_registered_object(3)


# ---------------------------------------------------------------- get_file

import hashlib  # noqa: E402
import http.server  # noqa: E402
import io  # noqa: E402
import os  # noqa: E402
import tarfile  # noqa: E402
import threading  # noqa: E402
import zipfile  # noqa: E402


def _url(path):
    return "file://" + os.path.abspath(path)


def _make_tar(path, members, mode="w:gz"):
    """members: {name: bytes} regular files, or {name: ("sym"|"hard", target)} links."""
    with tarfile.open(path, mode) as tf:
        for name, content in members.items():
            info = tarfile.TarInfo(name)
            if isinstance(content, tuple):
                info.type = tarfile.SYMTYPE if content[0] == "sym" else tarfile.LNKTYPE
                info.linkname = content[1]
                tf.addfile(info)
            else:
                info.size = len(content)
                tf.addfile(info, io.BytesIO(content))


def test_get_file_downloads_caches_and_checks_hashes(tmp_path, capsys):
    src = tmp_path / "src" / "data.bin"
    src.parent.mkdir()
    payload = os.urandom(200_000)
    src.write_bytes(payload)
    cache = tmp_path / "cache"
    path = pg.utils.get_file(origin=_url(src), cache_dir=str(cache))
    assert path == str(cache / "datasets" / "data.bin")
    assert open(path, "rb").read() == payload
    assert "Downloading data from" in capsys.readouterr().out
    # cached: no second download even when the source changes
    src.write_bytes(b"changed")
    assert pg.utils.get_file("data.bin", _url(src), cache_dir=str(cache)) == path
    assert open(path, "rb").read() == payload
    assert "Downloading" not in capsys.readouterr().out
    sha = hashlib.sha256(payload).hexdigest()
    assert pg.utils.get_file("data.bin", _url(src), file_hash=sha, cache_dir=str(cache)) == path
    # a stale cached file (wrong hash) is downloaded again, and then checked
    new_sha = hashlib.sha256(b"changed").hexdigest()
    pg.utils.get_file("data.bin", _url(src), file_hash=new_sha, cache_dir=str(cache))
    assert open(path, "rb").read() == b"changed"
    assert "downloading it again" in capsys.readouterr().out
    md5 = hashlib.md5(b"changed").hexdigest()
    pg.utils.get_file("data.bin", _url(src), md5_hash=md5, cache_dir=str(cache))
    pg.utils.get_file("data.bin", _url(src), file_hash=md5, hash_algorithm="md5", cache_dir=str(cache),
                      force_download=True)
    assert "Downloading" in capsys.readouterr().out
    # the download does not match: a ValueError, and nothing is left in the cache
    with pytest.raises(ValueError, match="hash does not match"):
        pg.utils.get_file("other.bin", _url(src), file_hash=sha, cache_dir=str(cache))
    assert sorted(os.listdir(cache / "datasets")) == ["data.bin"]
    # an absolute cache_subdir is used as it is
    out = tmp_path / "abs"
    assert pg.utils.get_file("x.bin", _url(src), cache_subdir=str(out), cache_dir=str(cache)) == str(out / "x.bin")


def test_get_file_default_cache_is_keras_home(tmp_path, monkeypatch):
    src = tmp_path / "f.txt"
    src.write_text("hi")
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "kh"))
    assert pg.utils.get_file(origin=_url(src)) == str(tmp_path / "kh" / "datasets" / "f.txt")
    monkeypatch.delenv("KERAS_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert pg.utils.get_file(origin=_url(src)) == str(tmp_path / "home" / ".keras" / "datasets" / "f.txt")


def test_get_file_bad_arguments(tmp_path):
    src = tmp_path / "f.txt"
    src.write_text("hi")
    with pytest.raises(ValueError, match="origin"):
        pg.utils.get_file("f.txt")
    with pytest.raises(ValueError, match="http"):
        pg.utils.get_file("f.txt", "gopher://x/f.txt", cache_dir=str(tmp_path))
    with pytest.raises(ValueError, match="not a path"):
        pg.utils.get_file("a/b.txt", _url(src), cache_dir=str(tmp_path))
    with pytest.raises(ValueError, match="file name"):
        pg.utils.get_file(origin="file:///", cache_dir=str(tmp_path))
    with pytest.raises(ValueError, match="hash_algorithm"):
        pg.utils.get_file("f.txt", _url(src), hash_algorithm="sha1", cache_dir=str(tmp_path))
    with pytest.raises(ValueError, match="hex"):
        pg.utils.get_file("f.txt", _url(src), file_hash="xyz", cache_dir=str(tmp_path))
    with pytest.raises(ValueError, match="archive_format"):
        pg.utils.get_file("f.txt", _url(src), extract=True, archive_format="rar", cache_dir=str(tmp_path))
    with pytest.raises(OSError, match="URL fetch failure"):
        pg.utils.get_file("g.txt", _url(tmp_path / "missing.txt"), cache_dir=str(tmp_path / "c"))
    assert os.listdir(tmp_path / "c" / "datasets") == []


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"x" * 5000
        self.send_response(200)
        if self.path == "/short":                # promises more than it sends, then hangs up
            self.send_header("Content-Length", str(len(body) * 4))
        else:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()
        self.close_connection = True

    def log_message(self, *args):
        pass


@pytest.fixture
def http_server():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_get_file_over_http_and_a_download_failing_midway(tmp_path, http_server):
    path = pg.utils.get_file("ok.bin", http_server + "/ok", cache_dir=str(tmp_path))
    assert open(path, "rb").read() == b"x" * 5000
    with pytest.raises(Exception):
        pg.utils.get_file("short.bin", http_server + "/short", cache_dir=str(tmp_path))
    assert sorted(os.listdir(tmp_path / "datasets")) == ["ok.bin"]     # no half file, no temp file


def test_get_file_interrupted_download_leaves_nothing(tmp_path, monkeypatch):
    src = tmp_path / "big.bin"
    src.write_bytes(os.urandom(300_000))
    import pyggml.utils.file_utils as fu
    real = fu.urllib.request.urlopen

    class Breaking:
        def __init__(self, resp):
            self.resp, self.headers, self.n = resp, resp.headers, 0

        def read(self, n):
            self.n += 1
            if self.n == 3:
                raise KeyboardInterrupt
            return self.resp.read(n)

        def __enter__(self):
            return self

        def __exit__(self, *a):
            self.resp.close()
    monkeypatch.setattr(fu.urllib.request, "urlopen", lambda url: Breaking(real(url)))
    with pytest.raises(KeyboardInterrupt):
        pg.utils.get_file("big.bin", _url(src), cache_dir=str(tmp_path / "c"))
    assert os.listdir(tmp_path / "c" / "datasets") == []


def test_get_file_extracts_tar_and_zip(tmp_path):
    tgz = tmp_path / "pack.tar.gz"
    _make_tar(tgz, {"pack/a.txt": b"A", "pack/sub/b.txt": b"B", "pack/link": ("sym", "a.txt")})
    cache = tmp_path / "cache"
    out = pg.utils.get_file("pack.tar.gz", _url(tgz), extract=True, cache_dir=str(cache))
    assert out == str(cache / "datasets" / "pack_extracted")
    assert open(os.path.join(out, "pack", "sub", "b.txt")).read() == "B"
    assert open(os.path.join(out, "pack", "link")).read() == "A"
    assert os.path.isfile(cache / "datasets" / "pack.tar.gz")
    # no fname: Keras's names, the archive kept as <name>_archive
    out = pg.utils.get_file(origin=_url(tgz), extract=True, cache_dir=str(cache))
    assert out == str(cache / "datasets" / "pack.tar.gz")
    assert os.path.isfile(cache / "datasets" / "pack.tar.gz_archive")
    out = pg.utils.get_file("flowers", _url(tgz), untar=True, cache_dir=str(cache))
    assert out == str(cache / "datasets" / "flowers") and os.path.isdir(os.path.join(out, "pack"))
    z = tmp_path / "z.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("d/one.txt", "1")
    out = pg.utils.get_file("z.zip", _url(z), extract=True, cache_dir=str(cache))
    assert open(os.path.join(out, "d", "one.txt")).read() == "1"
    # a plain file with extract: a warning, the folder path
    plain = tmp_path / "p.txt"
    plain.write_text("no archive")
    with pytest.warns(UserWarning, match="not an archive"):
        pg.utils.get_file("p.txt", _url(plain), extract=True, cache_dir=str(cache))


@pytest.mark.parametrize("members, why", [
    ({"../evil.txt": b"x"}, "'..'"),
    ({"ok/../../evil.txt": b"x"}, "'..'"),
    ({"/tmp/evil_abs.txt": b"x"}, "absolute"),
    ({"ok.txt": b"1", "esc": ("sym", "../../outside")}, "outside"),
    ({"esc": ("sym", "/etc/passwd")}, "absolute"),
    ({"ok.txt": b"1", "hard": ("hard", "../x")}, "outside"),
])
def test_get_file_refuses_hostile_tar(tmp_path, members, why):
    bad = tmp_path / "bad.tar"
    _make_tar(bad, members, mode="w")
    cache = tmp_path / "cache"
    with pytest.raises(ValueError, match=why):
        pg.utils.get_file("bad.tar", _url(bad), extract=True, cache_dir=str(cache))
    # nothing was written outside, and no extraction folder was left
    assert not (tmp_path / "evil.txt").exists() and not (cache / "evil.txt").exists()
    assert sorted(os.listdir(cache / "datasets")) == ["bad.tar"]


def test_get_file_refuses_hostile_zip(tmp_path):
    bad = tmp_path / "bad.zip"
    with zipfile.ZipFile(bad, "w") as zf:
        zf.writestr("fine.txt", "1")
        zf.writestr("../../evil.txt", "x")
    with pytest.raises(ValueError, match="'..'"):
        pg.utils.get_file("bad.zip", _url(bad), extract=True, cache_dir=str(tmp_path / "c"))
    assert not (tmp_path / "evil.txt").exists()
    assert sorted(os.listdir(tmp_path / "c" / "datasets")) == ["bad.zip"]


# ---------------------------------------------------------------- Progbar

def test_progbar_averages_and_stateful_metrics(capsys):
    bar = pg.utils.Progbar(4, width=8, stateful_metrics=["acc"], interval=0)
    bar.update(1, [("loss", 4.0), ("acc", 0.5)])
    bar.update(3, [("loss", 1.0), ("acc", 0.75)])       # covers 2 steps: weight 2
    bar.add(1, [("loss", 2.0), ("acc", 0.25)])
    out = capsys.readouterr().out
    last = out.strip().splitlines()[-1]
    # (4*1 + 1*2 + 2*1) / 4 = 2.0 ; acc as given
    assert "4/4 [========]" in last and "loss: 2.0000" in last and "acc: 0.2500" in last
    assert "1/4 [=>......]" in out and "ETA" in out


def test_progbar_verbose_2_unknown_target_and_logging(capsys, caplog):
    bar = pg.utils.Progbar(3, verbose=2)
    bar.update(1, [("loss", 1.0)])
    bar.update(2, [("loss", 1.0)])
    assert capsys.readouterr().out == ""
    bar.update(3, [("loss", 4.0)])
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and out.startswith("3/3 - ") and "loss: 2.0000" in out and "[" not in out
    open_bar = pg.utils.Progbar(None, interval=0)
    open_bar.update(5)
    assert capsys.readouterr().out.startswith("5 ")
    pg.config.disable_interactive_logging()
    try:
        with caplog.at_level(logging.INFO, logger="pyggml"):
            pg.utils.Progbar(2, verbose=2, unit_name="sample").update(2, [("loss", 1e-5)])
    finally:
        pg.config.enable_interactive_logging()
    assert capsys.readouterr().out == ""
    assert "loss: 1.0000e-05" in caplog.text and "/sample" in caplog.text
    pg.utils.Progbar(2, verbose=0).update(2)
    assert capsys.readouterr().out == ""


def test_progbar_bad_arguments():
    with pytest.raises(ValueError, match="verbose"):
        pg.utils.Progbar(3, verbose=3)
    with pytest.raises(ValueError, match="width"):
        pg.utils.Progbar(3, width=0)
    with pytest.raises(TypeError, match="target"):
        pg.utils.Progbar("3")
    with pytest.raises(ValueError, match="pairs"):
        pg.utils.Progbar(3).update(1, [("loss",)])
    with pytest.raises(TypeError, match="current"):
        pg.utils.Progbar(3).update(None)


# ---------------------------------------------------------------- pack / unpack

def test_pack_and_unpack_x_y_sample_weight():
    x, y, w = np.ones(2), np.zeros(2), np.full(2, 0.5)
    assert pg.utils.pack_x_y_sample_weight(x) is x
    assert pg.utils.pack_x_y_sample_weight((x, x)) == ((x, x),)
    assert pg.utils.pack_x_y_sample_weight(x, y) == (x, y)
    assert pg.utils.pack_x_y_sample_weight(x, y, w) == (x, y, w)
    with pytest.raises(ValueError, match="sample_weight"):
        pg.utils.pack_x_y_sample_weight(x, None, w)
    un = pg.utils.unpack_x_y_sample_weight
    assert un(x)[0] is x and un(x)[1:] == (None, None)
    assert un((x,))[0] is x and un([x, y])[1] is y and un((x, y, w))[2] is w
    packed = pg.utils.pack_x_y_sample_weight((x, x))
    assert un(packed)[0] == (x, x)
    with pytest.raises(ValueError, match="4 parts"):
        un((x, y, w, w))


# ---------------------------------------------------------------- audio_dataset_from_directory

import wave  # noqa: E402


def _write_wav(path, data, rate=8000, width=2):
    """data: float array (samples, channels) in [-1, 1)."""
    data = np.asarray(data, dtype=np.float64)
    if data.ndim == 1:
        data = data[:, None]
    if width == 1:
        raw = np.clip(np.round(data * 128 + 128), 0, 255).astype(np.uint8).tobytes()
    elif width == 3:
        v = np.round(data * (1 << 23)).astype(np.int64) & 0xFFFFFF
        raw = np.stack([v & 255, (v >> 8) & 255, v >> 16], axis=-1).astype(np.uint8).tobytes()
    else:
        dt = {2: "<i2", 4: "<i4"}[width]
        raw = np.round(data * (1 << (8 * width - 1))).astype(dt).tobytes()
    path.parent.mkdir(parents=True, exist_ok=True)
    with wave.open(str(path), "wb") as w:
        w.setnchannels(data.shape[1])
        w.setsampwidth(width)
        w.setframerate(rate)
        w.writeframes(raw)


@pytest.mark.parametrize("width", [1, 2, 3, 4])
def test_read_wav_decodes_every_pcm_width(tmp_path, width):
    from pyggml.utils.audio_dataset_utils import read_wav
    q = 1 << (8 * width - 1)
    ints = np.array([[-q, q - 1], [0, 1], [q // 2, -q // 3]])
    data = ints / q
    _write_wav(tmp_path / "a.wav", data, rate=11025, width=width)
    audio, rate = read_wav(tmp_path / "a.wav")
    assert rate == 11025 and audio.dtype == np.float32 and audio.shape == (3, 2)
    np.testing.assert_allclose(audio, data, atol=1e-7)


def test_audio_dataset_pads_batches_and_labels(tmp_path, capsys, caplog):
    lengths = {"cat": [5, 9], "dog": [3, 7, 4]}
    rng = np.random.default_rng(1)
    clips = {}
    for cls, ls in lengths.items():
        for k, n in enumerate(ls):
            d = np.round(rng.uniform(-0.9, 0.9, size=(n, 1)) * 32768) / 32768
            _write_wav(tmp_path / cls / f"{k}.wav", d)
            clips[str(tmp_path / cls / f"{k}.wav")] = d
    (tmp_path / "cat" / "notes.txt").write_text("not audio")
    ds = pg.utils.audio_dataset_from_directory(str(tmp_path), batch_size=2, shuffle=False, verbose=False)
    assert ds.class_names == ["cat", "dog"] and len(ds) == 3
    batches = list(ds)
    audio, labels = batches[0]
    assert audio.shape == (2, 9, 1) and audio.dtype == np.float32 and list(labels) == [0, 0]
    paths = ds.file_paths
    np.testing.assert_allclose(audio[0, :5], clips[paths[0]], atol=1e-7)
    np.testing.assert_array_equal(audio[0, 5:], 0)
    assert batches[1][0].shape == (2, 7, 1) and batches[2][0].shape == (1, 4, 1)
    assert [int(v) for b in batches for v in b[1]] == [0, 0, 1, 1, 1]
    fixed = pg.utils.audio_dataset_from_directory(str(tmp_path), batch_size=5, output_sequence_length=6,
                                                  label_mode="categorical", shuffle=False, verbose=False)
    audio, labels = next(iter(fixed))
    assert audio.shape == (5, 6, 1) and labels.shape == (5, 2)
    np.testing.assert_allclose(audio[1], clips[fixed.file_paths[1]][:6], atol=1e-7)
    ragged = pg.utils.audio_dataset_from_directory(str(tmp_path), batch_size=5, ragged=True, shuffle=False,
                                                   label_mode=None, verbose=False)
    audio = next(iter(ragged))
    assert audio.dtype == object and [a.shape[0] for a in audio] == [5, 9, 3, 7, 4]
    caplog.set_level(logging.INFO, logger="pyggml")
    pg.config.disable_interactive_logging()           # the loaders' messages go to the "pyggml" logger
    try:
        train, val = pg.utils.audio_dataset_from_directory(str(tmp_path), batch_size=None, validation_split=0.4,
                                                           subset="both", seed=3)
    finally:
        pg.config.enable_interactive_logging()
    assert len(train) == 3 and len(val) == 2
    assert capsys.readouterr().out == ""
    assert "Found 5 files belonging to 2 classes." in caplog.text and "Using 2 files for validation." in caplog.text
    assert not set(train.file_paths) & set(val.file_paths)
    a, lab = train[0]
    assert a.ndim == 2 and a.shape[1] == 1


def test_audio_dataset_resamples_a_sine(tmp_path):
    rate_in, rate_out, f = 8000, 16000, 440.0
    t = np.arange(800) / rate_in
    _write_wav(tmp_path / "c" / "s.wav", 0.5 * np.sin(2 * np.pi * f * t), rate=rate_in)
    ds = pg.utils.audio_dataset_from_directory(str(tmp_path), batch_size=1, sampling_rate=rate_out,
                                               verbose=False, shuffle=False)
    audio = next(iter(ds))[0][0, :, 0]
    assert audio.shape == (1600,)
    t2 = np.arange(1600) / rate_out
    # 440 Hz over 800 samples at 8 kHz is exactly 44 periods: the FFT resampling is exact
    np.testing.assert_allclose(audio, 0.5 * np.sin(2 * np.pi * f * t2), atol=2e-4)
    ds = pg.utils.audio_dataset_from_directory(str(tmp_path), batch_size=1, sampling_rate=4000, verbose=False)
    down = next(iter(ds))[0][0, :, 0]
    np.testing.assert_allclose(down, 0.5 * np.sin(2 * np.pi * f * np.arange(400) / 4000), atol=2e-4)


def test_audio_dataset_bad_arguments_and_files(tmp_path):
    _write_wav(tmp_path / "a" / "x.wav", np.zeros((4, 1)))
    _write_wav(tmp_path / "b" / "y.wav", np.zeros((4, 2)))
    f = pg.utils.audio_dataset_from_directory
    with pytest.raises(ValueError, match="ragged"):
        f(str(tmp_path), ragged=True, output_sequence_length=4)
    with pytest.raises(ValueError, match="sampling_rate"):
        f(str(tmp_path), sampling_rate=0)
    with pytest.raises(ValueError, match="output_sequence_length"):
        f(str(tmp_path), output_sequence_length=2.5)
    with pytest.raises(TypeError, match="ragged"):
        f(str(tmp_path), ragged="yes")
    with pytest.raises(ValueError, match="label_mode"):
        f(str(tmp_path), label_mode="sparse")
    with pytest.raises(ValueError, match="channel"):
        list(f(str(tmp_path), batch_size=2, shuffle=False, verbose=False))
    (tmp_path / "a" / "bad.wav").write_bytes(b"RIFF\x00\x00junk")
    ds = f(str(tmp_path / "a"), labels=None, batch_size=1, shuffle=False, verbose=False)
    with pytest.raises(ValueError, match="bad.wav"):
        list(ds)
    empty = tmp_path / "empty" / "k"
    empty.mkdir(parents=True)
    with pytest.raises(ValueError, match="no audio files"):
        f(str(tmp_path / "empty"))
