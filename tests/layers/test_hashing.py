"""Hashing and HashedCrossing (host layers: numpy before the graph), against
Keras's bins: the values in Keras's documentation and its own tests (computed
there by TensorFlow), and SipHash-2-4's published test vectors; and in models
(fit, predict, save, load)."""

import json

import numpy as np
import pytest

import pyggml as pg

L = pg.layers

NAMES = [["omar"], ["stringer"], ["marlo"], ["wire"], ["skywalker"]]
LETTERS = [["A"], ["B"], ["C"], ["D"], ["E"]]


def test_siphash_matches_the_published_test_vectors():
    from pyggml.layers.preprocessing._siphash import siphash24
    # the paper's key 00..0f, messages 00 01 .. (n - 1); outputs as the reference vectors' little-endian bytes
    k0 = int.from_bytes(bytes(range(8)), "little")
    k1 = int.from_bytes(bytes(range(8, 16)), "little")
    expected = {0: "310e0edd47db6f72", 1: "fd67dc93c539f874", 15: "e545be4961ca29a1",     # 15: the paper's
                63: "724506eb4c328a95"}
    got = {n: siphash24(k0, k1, bytes(range(n))).to_bytes(8, "little").hex() for n in expected}
    assert got == expected
    assert siphash24(k0, k1, bytes(range(15))) == 0xA129CA6149BE45E5


# --- Hashing: Keras's bins -----------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, data, expected", [
    (dict(num_bins=3), LETTERS, [1, 0, 1, 1, 2]),                               # FarmHash64 (the docs)
    (dict(num_bins=3, mask_value=""), [["A"], ["B"], [""], ["C"], ["D"]], [1, 1, 0, 2, 2]),
    (dict(num_bins=3, salt=[133, 137]), LETTERS, [1, 2, 1, 0, 2]),              # SipHash64
    (dict(num_bins=3, salt=133), LETTERS, [0, 0, 2, 1, 0]),                     # the same as [133, 133]
    (dict(num_bins=2), NAMES, [0, 0, 1, 0, 0]),
    (dict(num_bins=3, mask_value=""), NAMES, [1, 1, 2, 1, 1]),
    (dict(num_bins=3, mask_value="omar"), NAMES, [0, 1, 2, 1, 1]),
    (dict(num_bins=2, salt=[133, 137]), NAMES, [0, 1, 0, 1, 0]),
    (dict(num_bins=2, salt=(211, 137)), NAMES, [1, 0, 1, 0, 1]),
    (dict(num_bins=3), np.array([[0], [1], [2], [3], [4]]), [1, 0, 1, 0, 2]),  # integers: their decimal text
    (dict(num_bins=3, salt=[133, 137]), np.array([[0], [1], [2], [3], [4]]), [1, 1, 2, 0, 1]),
    (dict(num_bins=1), LETTERS, [0, 0, 0, 0, 0]),
    (dict(num_bins=1, mask_value="A"), LETTERS, [0, 0, 0, 0, 0]),               # one bin: no mask bin
])
def test_hashing_bins_match_keras(kwargs, data, expected):
    out = L.Hashing(**kwargs)(data)
    assert isinstance(out, np.ndarray) and out.dtype == np.int32
    np.testing.assert_array_equal(out, np.array(expected)[:, None])


@pytest.mark.parametrize("make", [list, tuple, np.array, lambda v: np.array(v, dtype=np.int64),
                                  lambda v: np.array(v, dtype=np.uint16), lambda v: np.array(v, dtype=np.float64)])
def test_hashing_takes_every_kind_of_integer_input(make):
    np.testing.assert_array_equal(L.Hashing(num_bins=3)(make([0, 1, 2, 3, 4])), [1, 0, 1, 0, 2])


def test_hashing_string_forms_and_value_rules():
    layer = L.Hashing(num_bins=1000, salt=[7, 9])
    texts = np.array([["héllo", "中文", "x"]])
    expected = layer(texts)
    np.testing.assert_array_equal(layer(np.array([[s.encode() for s in texts[0]]])), expected)     # UTF-8 bytes
    np.testing.assert_array_equal(layer(texts.astype(object)), expected)
    # as TensorFlow: floats are truncated to integers, integers hashed as their text, booleans as true/false
    np.testing.assert_array_equal(layer(np.array([1.9, -2.5, 40.0])), layer(["1", "-2", "40"]))
    np.testing.assert_array_equal(layer(np.array([-7, 12])), layer(["-7", "12"]))
    np.testing.assert_array_equal(layer(np.array([True, False])), layer(["true", "false"]))
    np.testing.assert_array_equal(L.Hashing(num_bins=5, mask_value=3)(np.array([3.0, 3.5])), [0, L.Hashing(
        num_bins=4)(["3"])[0] + 1])                      # the mask is compared before truncation
    assert layer("x").shape == ()                        # a single value


def test_hashing_keras_list_input_examples():
    layer = L.Hashing(num_bins=2)
    assert layer([1, 2, 3]).tolist() == [1, 1, 1]
    assert layer([[1], [2], [3]]).tolist() == [[1], [1], [1]]
    assert layer([[1, 2], [2, 3], [3, 4]]).tolist() == [[1, 1], [1, 1], [1, 1]]
    assert layer([[[1], [2]], [[2], [3]], [[3], [4]]]).tolist() == [[[1], [1]], [[1], [1]], [[1], [1]]]


def test_hashing_output_modes_match_keras():
    one_hot = L.Hashing(num_bins=3, output_mode="one_hot")
    expected = [[0, 1, 0], [1, 0, 0], [0, 1, 0], [1, 0, 0], [0, 0, 1]]
    np.testing.assert_array_equal(one_hot(np.array([0, 1, 2, 3, 4])), expected)
    np.testing.assert_array_equal(one_hot(np.array([[0], [1], [2], [3], [4]])), expected)  # (n, 1): that axis
    assert one_hot(pg.Input((1,), dtype="int32")).shape == (None, 3)
    multi = L.Hashing(num_bins=3, output_mode="multi_hot")
    np.testing.assert_array_equal(multi(np.array([[0, 1, 2, 3, 4]])), [[1, 1, 1]])
    assert multi(pg.Input((None,), dtype="int32")).shape == (None, 3)
    count = L.Hashing(num_bins=3, output_mode="count")
    np.testing.assert_array_equal(count(np.array([0, 1, 2, 3, 4])), [2, 2, 1])
    np.testing.assert_array_equal(count(np.array([[0, 1, 2, 3, 4]])), [[2, 2, 1]])
    assert count(np.array([[0, 1]])).dtype == np.float32
    masked = L.Hashing(num_bins=3, mask_value="", output_mode="count")
    np.testing.assert_array_equal(masked([["omar", "", "marlo", "marlo"]]), [[1, 1, 2]])


def test_hashing_config_round_trips():
    for layer in (L.Hashing(num_bins=8), L.Hashing(num_bins=5, salt=133, mask_value="", output_mode="count"),
                  L.Hashing(num_bins=4, mask_value=-1, output_mode="one_hot", name="hashing_x")):
        cfg = json.loads(json.dumps(layer.get_config()))
        again = L.Hashing.from_config(cfg)
        assert again.get_config() == cfg
        data = np.array([[-1], [5], [6]]) if isinstance(layer.mask_value, int) else NAMES
        np.testing.assert_array_equal(again(data), layer(data))
    assert L.Hashing(num_bins=5, salt=133).get_config()["salt"] == [133, 133]


@pytest.mark.parametrize("kwargs, match", [
    (dict(num_bins=None), "num_bins"),
    (dict(num_bins=0), "num_bins"),
    (dict(num_bins=-1), "num_bins"),
    (dict(num_bins=2.0), "num_bins"),
    (dict(num_bins=True), "num_bins"),
    (dict(num_bins=2, salt="string"), "salt"),
    (dict(num_bins=2, salt=[1]), "salt"),
    (dict(num_bins=1, salt=[133, 137, 177]), "salt"),
    (dict(num_bins=2, salt=-1), "salt"),
    (dict(num_bins=2, salt=[1, 2 ** 64]), "salt"),
    (dict(num_bins=2, output_mode="tf_idf"), "output_mode"),
    (dict(num_bins=2, output_mode="one_hot", sparse=True), "sparse"),
    (dict(num_bins=2, mask_value=[1]), "mask_value"),
])
def test_hashing_refuses_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        L.Hashing(**kwargs)


def test_hashing_refuses_bad_inputs():
    with pytest.raises(TypeError, match="mask_value"):
        L.Hashing(num_bins=3, mask_value="a")(np.array([1, 2]))
    with pytest.raises(TypeError, match="mask_value"):
        L.Hashing(num_bins=3, mask_value=1)(["a"])
    with pytest.raises(TypeError, match="strings or integers"):
        L.Hashing(num_bins=3)(np.array([["a", 3]], dtype=object))
    with pytest.raises(ValueError, match="finite"):
        L.Hashing(num_bins=3)(np.array([1.0, np.nan]))
    with pytest.raises(ValueError, match="int64"):
        L.Hashing(num_bins=3)(np.array([1e30]))
    with pytest.raises(TypeError, match="dtype"):
        L.Hashing(num_bins=3)(np.array([1 + 2j]))


# --- HashedCrossing: Keras's bins ----------------------------------------------------------------------------

FEAT1 = np.array(["A", "B", "A", "B", "A"])
FEAT2 = np.array([101, 101, 101, 102, 102])
CROSSED = [1, 4, 1, 1, 3]                                   # Keras's docs, num_bins=5


def test_hashed_crossing_matches_keras_docs():
    out = L.HashedCrossing(num_bins=5)((FEAT1, FEAT2))
    np.testing.assert_array_equal(out, CROSSED)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(L.HashedCrossing(num_bins=5, output_mode="one_hot")((FEAT1, FEAT2)),
                                  np.eye(5)[CROSSED])
    scalar = L.HashedCrossing(num_bins=10)((np.array("A"), np.array(101)))
    assert scalar.shape == () and int(scalar) == 1
    assert L.HashedCrossing(num_bins=10, output_mode="one_hot")(("A", 101)).tolist() == np.eye(10)[1].tolist()
    # (n, 1) columns, lists, bytes and int32 give the same bins
    np.testing.assert_array_equal(L.HashedCrossing(num_bins=5)([FEAT1[:, None], FEAT2[:, None]]),
                                  np.array(CROSSED)[:, None])
    np.testing.assert_array_equal(L.HashedCrossing(num_bins=5)([[s.encode() for s in FEAT1],
                                                                FEAT2.astype(np.int32)]), CROSSED)


def test_hashed_crossing_depends_on_order_and_every_feature():
    layer = L.HashedCrossing(num_bins=1 << 30)
    a, b, c = np.array(["x", "y"]), np.array([1, 2]), np.array(["p", "p"])
    ab, ba, abc = layer([a, b]), layer([b, a]), layer([a, b, c])
    assert (ab != ba).all() and (ab != abc).all()
    assert layer([a, b]).tolist() == ab.tolist()                       # deterministic


def test_hashed_crossing_refuses_what_keras_refuses():
    layer = L.HashedCrossing(num_bins=10)
    with pytest.raises(ValueError, match="list or tuple"):
        layer(np.array(1))
    with pytest.raises(ValueError, match="at least two"):
        layer([np.array(1)])
    with pytest.raises(ValueError, match="integer or string"):
        layer((np.array([1.0]), np.array([1.0])))
    with pytest.raises(ValueError, match="should have shape"):
        layer((np.array([[[1]]]), np.array([[[1]]])))
    with pytest.raises(ValueError, match="should have shape"):
        layer((np.array([[1, 2]]), np.array([[1, 2]])))
    with pytest.raises(ValueError, match="equal shapes"):
        layer((np.array([1, 2]), np.array([1])))
    with pytest.raises(ValueError, match="integer or string"):
        layer([pg.Input((1,)), pg.Input((1,), dtype="string")])
    with pytest.raises(ValueError, match=r"shape \(1,\)"):
        layer([pg.Input((2,), dtype="int64"), pg.Input((2,), dtype="int64")])
    with pytest.raises(ValueError, match="list or tuple"):
        layer(pg.Input((1,), dtype="int64"))
    for kwargs in (dict(num_bins=0), dict(num_bins=None), dict(num_bins=3, output_mode="count"),
                   dict(num_bins=3, output_mode="one_hot", sparse=True)):
        with pytest.raises(ValueError):
            L.HashedCrossing(**kwargs)
    cfg = json.loads(json.dumps(L.HashedCrossing(num_bins=7, output_mode="one_hot").get_config()))
    assert L.HashedCrossing.from_config(cfg).get_config() == cfg


# --- in models -------------------------------------------------------------------------------------------------

def test_hashed_strings_feed_an_embedding_trained_saved_and_loaded(tmp_path):
    words = np.array(["red", "green", "blue", "red", "cyan", "green"])
    y = np.array([[1.0], [0.0], [-1.0], [1.0], [0.5], [0.0]], dtype=np.float32)
    inp = pg.Input((1,), dtype="string")
    hashing = L.Hashing(num_bins=16, salt=[5, 6], mask_value="")
    out = L.Dense(1)(L.Flatten()(L.Embedding(16, 3)(hashing(inp))))
    model = pg.Model(inp, out)
    model.compile(optimizer=pg.optimizers.SGD(0.2), loss="mse", seed=0)
    before = model.evaluate(words, y, verbose=0)
    model.fit(words, y, epochs=40, batch_size=3, verbose=0)
    assert model.evaluate(words, y, verbose=0) < 0.2 * before
    w = model.get_weights()
    bins = hashing(words[:, None])
    expected = w["embedding.weight"][bins[:, 0]] @ w["dense.weight"].T + w["dense.bias"]
    predicted = model.predict(words)
    np.testing.assert_allclose(predicted, expected, rtol=1e-5, atol=1e-6)
    for name in ("hash.gguf", "hash.keras"):
        path = str(tmp_path / name)
        model.save(path)
        loaded = pg.load_model(path)
        np.testing.assert_array_equal(loaded.predict(words), predicted)
        assert loaded.layers[1].salt == [5, 6] and loaded.layers[1].mask_value == ""
        loaded.free()
    model.free()


def test_sequential_hashing_of_integers_and_a_crossed_feature_model(tmp_path):
    seq = pg.Sequential([pg.Input((1,), dtype="int64"), L.Hashing(num_bins=4, output_mode="one_hot"), L.Dense(2)])
    seq.compile(loss="mse", seed=0)
    codes = np.array([[0], [1], [2], [3], [4]])
    w = seq.get_weights()
    np.testing.assert_allclose(seq.predict(codes), np.eye(4)[L.Hashing(num_bins=4)(codes)[:, 0]]
                               @ w["dense.weight"].T + w["dense.bias"], rtol=1e-5, atol=1e-6)
    seq.free()

    a = pg.Input((1,), dtype="string", name="letter")
    b = pg.Input((1,), dtype="int64", name="code")
    crossed = L.HashedCrossing(num_bins=5, output_mode="one_hot", name="cross")([a, b])
    model = pg.Model({"letter": a, "code": b}, L.Dense(1, name="head")(crossed))
    model.compile(loss="mse", seed=0)
    data = {"letter": FEAT1, "code": FEAT2}
    y = np.array([[1.0], [2.0], [1.0], [1.0], [3.0]], dtype=np.float32)
    model.fit(data, y, epochs=2, batch_size=5, verbose=0)
    w = model.get_weights()
    expected = np.eye(5)[CROSSED] @ w["head.weight"].T + w["head.bias"]
    np.testing.assert_allclose(model.predict(data), expected, rtol=1e-5, atol=1e-6)
    path = str(tmp_path / "cross.gguf")
    model.save(path)
    loaded = pg.load_model(path)
    np.testing.assert_array_equal(loaded.predict(data), model.predict(data))
    loaded.free()
    model.free()


@pytest.mark.parametrize("make, data", [
    (lambda: L.Hashing(num_bins=4), np.array([["a", "b", "c"]])),
    (lambda: L.Hashing(num_bins=4, output_mode="one_hot"), np.array([["a"], ["b"]])),
    (lambda: L.Hashing(num_bins=4, output_mode="one_hot"), np.array([["a", "b"]])),
    (lambda: L.Hashing(num_bins=4, output_mode="count"), np.array([[1, 2, 2]])),
    (lambda: L.Hashing(num_bins=4, output_mode="multi_hot", mask_value=0), np.array([[[1, 2], [0, 0]]])),
])
def test_hashing_symbolic_call_gives_the_shape_and_dtype_of_the_host_call(make, data):
    layer = make()
    node = layer(pg.Input(data.shape[1:], dtype="string" if data.dtype.kind == "U" else "int64"))
    out = layer(data)
    assert node.shape == (None,) + out.shape[1:]
    assert node.dtype == layer.output_dtype == {np.dtype(np.int32): "int32", np.dtype(np.float32): "float32"}[out.dtype]
    crossing = L.HashedCrossing(num_bins=3, output_mode="one_hot")
    node = crossing([pg.Input((1,), dtype="string"), pg.Input((1,), dtype="int64")])
    assert node.shape == (None, 3) and node.dtype == "float32"
    assert crossing([np.array([["a"]]), np.array([[1]])]).shape == (1, 3)
