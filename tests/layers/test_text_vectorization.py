"""TextVectorization (a host layer: numpy before the graph), against Keras's
documented examples and references written out by hand from Keras's and
TensorFlow's definitions: standardize (ASCII lowercasing, ASCII punctuation
stripped), split (ASCII whitespace, Unicode characters), ngrams (each width in
turn, joined by a space), the lookup (0 padding, 1 "[UNK]"), the encodings,
adapt's frequency order, and the layer in models (fit, predict, save, load)."""

import json
import math

import numpy as np
import pytest

import pyggml as pg

L = pg.layers


def vocab_of(layer):
    return layer.get_vocabulary(include_special_tokens=False)


# --- Keras's documented examples ------------------------------------------------------------------------------

def test_keras_docs_adapted_example():
    layer = L.TextVectorization(max_tokens=5000, output_mode="int", output_sequence_length=4)
    layer.adapt(["foo bar", "bar baz", "baz bada boom"])
    out = layer([["foo qux bar"], ["qux baz"]])
    np.testing.assert_array_equal(out, [[4, 1, 3, 0], [1, 2, 0, 0]])
    assert isinstance(out, np.ndarray) and out.dtype == np.int32
    np.testing.assert_array_equal(out.numpy()[0, :2], [4, 1])          # as keras-io scripts read a tensor
    # counts: bar 2, baz 2, then boom, foo, bada once; ties: the larger token first
    assert layer.get_vocabulary() == ["", "[UNK]", "baz", "bar", "foo", "boom", "bada"]
    assert layer.vocabulary_size() == 7


def test_keras_docs_vocabulary_example_and_the_sequential_model():
    layer = L.TextVectorization(max_tokens=5000, output_mode="int", output_sequence_length=4,
                                vocabulary=["earth", "wind", "and", "fire"])
    assert layer.get_vocabulary() == ["", "[UNK]", "earth", "wind", "and", "fire"]
    assert layer.get_vocabulary(include_special_tokens=False) == ["earth", "wind", "and", "fire"]
    model = pg.Sequential([pg.Input((1,), dtype="string"), layer])
    np.testing.assert_array_equal(model.predict([["Earth, wind & fire!"], ["water and earth"]]),
                                  [[2, 3, 5, 0], [1, 4, 2, 0]])
    model.free()


# --- standardize, split, ngrams -------------------------------------------------------------------------------

TEXT = "Hello, WORLD! Ça-va?\tit's  OK"


@pytest.mark.parametrize("standardize, tokens", [
    (None, ["Hello,", "WORLD!", "Ça-va?", "it's", "OK"]),
    ("lower", ["hello,", "world!", "Ça-va?", "it's", "ok"]),            # ASCII only, as TensorFlow's lower
    ("strip_punctuation", ["Hello", "WORLD", "Çava", "its", "OK"]),
    ("lower_and_strip_punctuation", ["hello", "world", "Çava", "its", "ok"]),
])
def test_standardize_modes(standardize, tokens):
    layer = L.TextVectorization(standardize=standardize, vocabulary=tokens)
    np.testing.assert_array_equal(layer([TEXT]), [[2, 3, 4, 5, 6]])
    adapted = L.TextVectorization(standardize=standardize)
    adapted.adapt([TEXT])
    assert vocab_of(adapted) == sorted(tokens, reverse=True)          # all once: the larger token first


def test_every_ascii_punctuation_mark_is_stripped_and_nothing_else():
    punctuation = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"
    layer = L.TextVectorization(standardize="strip_punctuation", split=None)
    layer.adapt([f"a{punctuation}b¿é€«»z09 "])
    assert vocab_of(layer) == ["ab¿é€«»z09 "]


def test_split_modes():
    text = "  the\tcat\n\nsat\u00a0down  \r\n"
    by_space = L.TextVectorization(standardize=None)
    by_space.adapt([text])
    # ASCII whitespace separates (runs count once, ends trimmed); the no-break space does not
    assert sorted(vocab_of(by_space)) == ["cat", "sat\u00a0down", "the"]
    chars = L.TextVectorization(split="character", vocabulary=["h", "é", "l", "o", " "])
    np.testing.assert_array_equal(chars(["héllo", "olé x"]), [[2, 3, 4, 4, 5], [5, 4, 3, 6, 1]])
    whole = L.TextVectorization(split=None, vocabulary=["new york", "paris"])
    np.testing.assert_array_equal(whole(np.array([["New York"], ["Paris!"], ["Rome"], [""]])),
                                  [[2], [3], [1], [0]])                # the empty string is the padding token
    np.testing.assert_array_equal(whole(np.array(["paris", "new york"])), [[3], [2]])


@pytest.mark.parametrize("ngrams, tokens", [
    (2, ["a", "b", "c", "a b", "b c"]),
    ((2, 3), ["a b", "b c", "a b c"]),
    ((3, 1), ["a b c", "a", "b", "c"]),                                # widths in the order given
    (4, ["a", "b", "c", "a b", "b c", "a b c"]),                       # longer than the text: none of that width
])
def test_ngrams(ngrams, tokens):
    layer = L.TextVectorization(ngrams=ngrams, vocabulary=sorted(set(tokens)))
    index = {t: i + 2 for i, t in enumerate(sorted(set(tokens)))}
    short = ["b"] if isinstance(ngrams, int) or 1 in ngrams else []         # the unigrams of "b" only
    np.testing.assert_array_equal(layer(["A b C", "b"]), [[index[t] for t in tokens],
                                                          [index[t] for t in short] + [0] * (len(tokens) - len(short))])
    adapted = L.TextVectorization(ngrams=ngrams)
    adapted.adapt(["a b c"])
    assert vocab_of(adapted) == sorted(tokens, reverse=True)
    assert adapted.get_config()["ngrams"] == (list(ngrams) if isinstance(ngrams, tuple) else ngrams)


def test_ngrams_of_a_text_too_short_give_padding_only():
    layer = L.TextVectorization(ngrams=(3,), vocabulary=["x y z"])
    np.testing.assert_array_equal(layer(["x y", "x y z"]), [[0], [2]])


def test_callables_see_numpy_and_split_gets_one_string_per_row():
    seen = {}

    def standardize(batch):
        seen["standardize"] = (type(batch), batch.shape)
        return np.char.replace(np.char.lower(batch), "<br />", " ")

    def split(batch):
        seen["split"] = (type(batch), batch.shape)
        return [s.split(";") for s in batch]

    layer = L.TextVectorization(standardize=standardize, split=split, vocabulary=["a", "b c", "d"])
    np.testing.assert_array_equal(layer(np.array([["A;B<br />C"], ["d;q"]])), [[2, 3], [4, 1]])
    assert seen == {"standardize": (np.ndarray, (2, 1)), "split": (np.ndarray, (2,))}
    with pytest.raises(ValueError, match="shape"):
        L.TextVectorization(standardize=lambda b: b[:1])(["a", "b"])
    with pytest.raises(ValueError, match="one sequence"):
        L.TextVectorization(split=lambda b: [["a"]])(["a", "b"])
    with pytest.raises(TypeError, match="split"):
        L.TextVectorization(split=lambda b: [[1, 2] for _ in b])(["a", "b"])


# --- output modes and lengths ---------------------------------------------------------------------------------

VOCAB = ["the", "cat", "sat", "on", "mat"]


def test_int_rows_pad_to_the_longest_or_to_output_sequence_length():
    data = ["the cat sat on the mat", "the dog", "cat"]
    full = [[2, 3, 4, 5, 2, 6], [2, 1, 0, 0, 0, 0], [3, 0, 0, 0, 0, 0]]
    np.testing.assert_array_equal(L.TextVectorization(vocabulary=VOCAB)(data), full)
    np.testing.assert_array_equal(L.TextVectorization(vocabulary=VOCAB)(["cat", "the dog"]), [[3, 0], [2, 1]])
    for n in (1, 3, 6, 9):
        out = L.TextVectorization(vocabulary=VOCAB, output_sequence_length=n)(np.array(data)[:, None])
        expected = np.zeros((3, n), dtype=np.int64)
        k = min(n, 6)
        expected[:, :k] = np.array(full)[:, :k]
        np.testing.assert_array_equal(out, expected)
    # a batch of empty texts: one padding column (never a zero-length array); no rows: none
    np.testing.assert_array_equal(L.TextVectorization(vocabulary=VOCAB)(["", "  !"]), [[0], [0]])
    for split in ("whitespace", None):
        assert L.TextVectorization(vocabulary=VOCAB, split=split)(np.zeros((0, 1), np.str_)).shape == (0, 1)
        assert L.TextVectorization(vocabulary=VOCAB, split=split, output_mode="count")(
            np.zeros(0, np.str_)).shape == (0, 6)


def test_a_single_string_gives_one_row_without_the_batch():
    layer = L.TextVectorization(vocabulary=VOCAB)
    np.testing.assert_array_equal(layer("The mat."), [2, 6])
    np.testing.assert_array_equal(layer(np.array("the dog")), [2, 1])
    np.testing.assert_array_equal(layer([b"the cat", "sat".encode()]), [[2, 3], [4, 0]])   # bytes: UTF-8


def test_multi_hot_count_and_tf_idf_against_hand_written_vectors():
    data = ["the cat sat on the mat", "the dog", ""]
    multi = L.TextVectorization(vocabulary=VOCAB, output_mode="multi_hot")
    np.testing.assert_array_equal(multi(data), [[0, 1, 1, 1, 1, 1], [1, 1, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0]])
    assert multi.get_vocabulary() == ["[UNK]"] + VOCAB                    # no padding index outside "int"
    binary = L.TextVectorization(vocabulary=VOCAB, output_mode="binary")
    assert binary.output_mode == "multi_hot"
    count = L.TextVectorization(vocabulary=VOCAB, output_mode="count")
    np.testing.assert_array_equal(count(data), [[0, 2, 1, 1, 1, 1], [1, 1, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0]])
    padded = L.TextVectorization(vocabulary=VOCAB, output_mode="count", max_tokens=9, pad_to_max_tokens=True)
    np.testing.assert_array_equal(padded(["mat mat dog"]), [[1, 0, 0, 0, 0, 2, 0, 0, 0]])
    idf = [0.5, 1.0, 2.0, 3.0, 4.0, 5.0]                                  # the OOV index's weight first
    tf_idf = L.TextVectorization(vocabulary=["[UNK]"] + VOCAB, idf_weights=idf, output_mode="tf-idf")
    np.testing.assert_allclose(tf_idf(data), [[0, 2.0, 2.0, 3.0, 4.0, 5.0], [0.5, 1.0, 0, 0, 0, 0], [0] * 6])
    # the weights of the vocabulary alone: the OOV index weighs their mean (Keras's)
    plain = L.TextVectorization(vocabulary=VOCAB, idf_weights=idf[1:], output_mode="tf_idf")
    np.testing.assert_allclose(plain(["dog dog the"]), [[6.0, 1.0, 0, 0, 0, 0]])


def test_tf_idf_adapt_learns_inverse_document_frequencies():
    docs = ["the cat", "the cat sat", "the dog the end"]
    layer = L.TextVectorization(output_mode="tf_idf")
    layer.adapt(docs)
    assert layer.get_vocabulary() == ["[UNK]", "the", "cat", "sat", "end", "dog"]
    n = 3.0
    w = [math.log(1 + n / (1 + d)) for d in (3, 2, 1, 1, 1)]             # documents holding each token
    np.testing.assert_allclose(layer.idf_weights, [np.mean(w)] + w, rtol=1e-6)
    np.testing.assert_allclose(layer(["the the dog zz"]), [[np.mean(w), 2 * w[0], 0, 0, 0, w[4]]], rtol=1e-6)


# --- adapt -----------------------------------------------------------------------------------------------------

TEXTS = ["The cat sat.", "the dog", "A cat"]
EXPECTED_VOCAB = ["", "[UNK]", "the", "cat", "sat", "dog", "a"]


def _batches():
    yield np.array(TEXTS[:2])
    yield np.array(TEXTS[2:])


class _Dataset(pg.utils.PyDataset):
    def __len__(self):
        return 2

    def __getitem__(self, i):
        x = np.array(TEXTS[:2] if i == 0 else TEXTS[2:])
        return x, np.zeros(len(x))


@pytest.mark.parametrize("make", [
    lambda: TEXTS, lambda: tuple(TEXTS), lambda: np.array(TEXTS), lambda: np.array(TEXTS)[:, None],
    lambda: np.array([t.encode() for t in TEXTS]), lambda: np.array(TEXTS, dtype=object), _batches, _Dataset,
    lambda: iter([(np.array(TEXTS), np.zeros(3))]),
], ids=["list", "tuple", "array", "column", "bytes", "object", "generator", "pydataset", "xy_pairs"])
def test_adapt_from_every_data_form(make):
    layer = L.TextVectorization()
    layer.adapt(make())
    assert layer.get_vocabulary() == EXPECTED_VOCAB


def test_adapt_orders_by_frequency_ties_by_the_larger_token_and_keeps_max_tokens():
    data = ["b a c a", "[UNK] b e e", "zz"]
    layer = L.TextVectorization(standardize=None)
    layer.adapt(data)
    # a, b, e twice; c, zz once; the OOV token is not counted
    assert layer.get_vocabulary() == ["", "[UNK]", "e", "b", "a", "zz", "c"]
    capped = L.TextVectorization(standardize=None, max_tokens=5)             # padding and OOV count too
    capped.adapt(data)
    assert capped.get_vocabulary() == ["", "[UNK]", "e", "b", "a"]
    hot = L.TextVectorization(standardize=None, max_tokens=5, output_mode="multi_hot")
    hot.adapt(data)
    assert hot.get_vocabulary() == ["[UNK]", "e", "b", "a", "zz"]
    steps = L.TextVectorization()
    steps.adapt(_batches(), steps=1)
    assert steps.get_vocabulary() == ["", "[UNK]", "the", "sat", "dog", "cat"]
    again = L.TextVectorization()
    again.adapt(["x"])
    again.adapt(["y y z"])                                                   # adapt starts afresh
    assert again.get_vocabulary() == ["", "[UNK]", "y", "z"]


def test_set_vocabulary_and_a_vocabulary_file(tmp_path):
    layer = L.TextVectorization()
    layer.set_vocabulary(["earth", "wind"])
    np.testing.assert_array_equal(layer(["wind fire earth"]), [[3, 1, 2]])
    layer.set_vocabulary(["", "[UNK]", "fire"])                              # the special tokens first
    assert layer.get_vocabulary() == ["", "[UNK]", "fire"]
    path = tmp_path / "vocab.txt"
    path.write_text("earth\nwind\nand fire\n", encoding="utf-8")
    from_file = L.TextVectorization(vocabulary=str(path), split=None)
    assert from_file.get_vocabulary() == ["", "[UNK]", "earth", "wind", "and fire"]
    np.testing.assert_array_equal(from_file(["And Fire"]), [[4]])


# --- in models -------------------------------------------------------------------------------------------------

REVIEWS = np.array(["great movie, loved it", "terrible film. hated it", "loved the acting, great",
                    "awful and boring", "what a great film", "boring, terrible plot", "loved it, great fun",
                    "hated the boring acting"])
LABELS = np.array([1, 0, 1, 0, 1, 0, 1, 0], dtype=np.float32)


def _text_classifier(vectorizer):
    inputs = pg.Input(shape=(1,), dtype="string")
    x = vectorizer(inputs)
    x = L.Embedding(vectorizer.vocabulary_size(), 8)(x)
    x = L.GlobalAveragePooling1D()(x)
    outputs = L.Dense(1, activation="sigmoid")(x)
    return pg.Model(inputs, outputs)


def _reference(model, vectorizer, texts):
    w = model.get_weights()
    idx = vectorizer(np.asarray(texts)[:, None])
    h = w["embedding.weight"][idx].mean(axis=1)                 # the padding positions are averaged in too
    return 1.0 / (1.0 + np.exp(-(h @ w["dense.weight"].T + w["dense.bias"])))


def test_embedding_pooling_dense_model_trains_predicts_saves_and_loads(tmp_path):
    vectorizer = L.TextVectorization(max_tokens=40, output_sequence_length=5)
    vectorizer.adapt(REVIEWS)
    model = _text_classifier(vectorizer)
    model.compile(optimizer=pg.optimizers.Adam(0.05), loss="binary_crossentropy", metrics=["accuracy"], seed=0)
    np.testing.assert_allclose(model.predict(REVIEWS), _reference(model, vectorizer, REVIEWS), rtol=1e-5,
                               atol=1e-6)
    history = model.fit(REVIEWS, LABELS, epochs=30, batch_size=4, verbose=0)
    assert history.history["loss"][-1] < 0.5 * history.history["loss"][0]
    assert history.history["accuracy"][-1] == 1.0
    predicted = model.predict(REVIEWS)
    np.testing.assert_allclose(predicted, _reference(model, vectorizer, REVIEWS), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(model.predict(["great fun, loved it", "terrible and boring"]) > 0.5,
                                  [[True], [False]])
    for name in ("model.gguf", "model.keras"):
        path = str(tmp_path / name)
        model.save(path)
        loaded = pg.load_model(path)
        np.testing.assert_array_equal(loaded.predict(REVIEWS), predicted)
        assert loaded.layers[1].get_vocabulary() == vectorizer.get_vocabulary()
        assert loaded.layers[1].output_sequence_length == 5
        loaded.free()
    model.free()


def test_variable_length_rows_in_a_sequential_with_fit_and_predict():
    vectorizer = L.TextVectorization()
    vectorizer.adapt(REVIEWS)
    model = pg.Sequential([pg.Input((1,), dtype="string"), vectorizer,
                           L.Embedding(vectorizer.vocabulary_size(), 4, mask_zero=True),
                           L.GlobalAveragePooling1D(), L.Dense(1)])
    model.compile(optimizer=pg.optimizers.SGD(0.1), loss="mse", seed=0)
    assert model.layers[0].output_shape == (None, None)
    before = model.evaluate(REVIEWS, LABELS, verbose=0)
    model.fit(REVIEWS, LABELS, epochs=5, batch_size=3, verbose=0)
    assert model.evaluate(REVIEWS, LABELS, verbose=0) < before
    w = model.get_weights()
    rows = [vectorizer([t])[0] for t in REVIEWS[:3]]
    expected = [w["embedding.weight"][r[r > 0]].mean(axis=0) @ w["dense.weight"].T + w["dense.bias"] for r in rows]
    np.testing.assert_allclose(model.predict(REVIEWS[:3]), expected, rtol=1e-5, atol=1e-6)
    model.free()


def test_multi_hot_vectors_feed_a_dense_layer_and_reload(tmp_path):
    vectorizer = L.TextVectorization(output_mode="tf_idf", ngrams=2)
    vectorizer.adapt(REVIEWS)
    inputs = pg.Input((1,), dtype="string")
    model = pg.Model(inputs, L.Dense(1, activation="sigmoid")(vectorizer(inputs)))
    assert vectorizer.compute_output_shape((None, 1)) == (None, vectorizer.vocabulary_size())
    model.compile(loss="binary_crossentropy", seed=0)
    model.fit(REVIEWS, LABELS, epochs=3, verbose=0)
    w = model.get_weights()
    expected = 1 / (1 + np.exp(-(vectorizer(REVIEWS) @ w["dense.weight"].T + w["dense.bias"])))
    np.testing.assert_allclose(model.predict(REVIEWS), expected, rtol=1e-5, atol=1e-6)
    path = str(tmp_path / "tfidf.gguf")
    model.save(path)
    loaded = pg.load_model(path)
    np.testing.assert_array_equal(loaded.predict(REVIEWS), model.predict(REVIEWS))
    np.testing.assert_allclose(loaded.layers[1].idf_weights, vectorizer.idf_weights)
    loaded.free()
    model.free()
    with pytest.raises(RuntimeError, match="fixed"):                      # the Dense's input size is fixed
        vectorizer.adapt(["a b c"])


@pg.saving.register_serializable(package="test_text")
def strip_html(batch):
    return np.char.replace(np.char.lower(batch), "<br />", " ")


@pg.saving.register_serializable(package="test_text")
def split_on_semicolons(batch):
    return [s.split(";") for s in batch]


def test_registered_callables_are_saved_by_name_and_others_refused(tmp_path):
    layer = L.TextVectorization(standardize=strip_html, split=split_on_semicolons, output_sequence_length=3)
    layer.adapt(["a;b<br />c", "a;b"])
    cfg = json.loads(json.dumps(layer.get_config()))
    assert cfg["standardize"]["registered_name"] == "test_text>strip_html"
    again = L.TextVectorization.from_config(cfg)
    assert again.standardize is strip_html and again.split is split_on_semicolons
    np.testing.assert_array_equal(again(["A;B<br />C"]), layer(["A;B<br />C"]))
    model = pg.Sequential([pg.Input((1,), dtype="string"), layer]).compile(loss="mse")
    path = str(tmp_path / "callables.gguf")
    model.save(path)
    loaded = pg.load_model(path)
    assert layer.get_vocabulary() == ["", "[UNK]", "a", "b c", "b"]
    np.testing.assert_array_equal(loaded.predict(["a;b"]), [[2, 4, 0]])
    loaded.free()
    model.free()
    with pytest.raises(ValueError, match="standardize.*register"):
        L.TextVectorization(standardize=lambda b: b).get_config()

    def local_split(batch):
        return [s.split() for s in batch]
    with pytest.raises(ValueError, match="split.*register"):
        L.TextVectorization(split=local_split).get_config()
    cfg["split"] = {"class_name": "function", "config": "nowhere>split", "registered_name": "nowhere>split"}
    with pytest.raises(ValueError, match="split.*custom_objects"):
        L.TextVectorization.from_config(cfg)


def test_config_round_trips_with_the_adapted_state():
    for layer in (L.TextVectorization(max_tokens=6, ngrams=(1, 2), output_sequence_length=7),
                  L.TextVectorization(output_mode="count", split="character", standardize="lower"),
                  L.TextVectorization(output_mode="tf_idf", max_tokens=10, pad_to_max_tokens=True)):
        layer.adapt(REVIEWS)
        cfg = json.loads(json.dumps(layer.get_config()))
        assert cfg["vocabulary_size"] == layer.vocabulary_size()
        again = L.TextVectorization.from_config(cfg)
        assert json.loads(json.dumps(again.get_config())) == cfg
        np.testing.assert_array_equal(again(REVIEWS), layer(REVIEWS))
        again.adapt(["fresh words"])                                      # an adapted layer stays adaptable
    given = L.TextVectorization.from_config(L.TextVectorization(vocabulary=["a"]).get_config())
    with pytest.raises(ValueError, match="given a vocabulary"):
        given.adapt(["b"])


# --- bad arguments and inputs ------------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, err, match", [
    (dict(standardize="upper"), ValueError, "standardize"),
    (dict(split="comma"), ValueError, "split"),
    (dict(split=3), ValueError, "split"),
    (dict(ngrams=0), ValueError, "ngrams"),
    (dict(ngrams=(1, "2")), ValueError, "ngrams"),
    (dict(ngrams=True), ValueError, "ngrams"),
    (dict(ngrams=2.0), ValueError, "ngrams"),
    (dict(output_mode="embedding"), ValueError, "output_mode"),
    (dict(output_mode="one_hot"), ValueError, "split=None"),
    (dict(output_mode="count", output_sequence_length=3), ValueError, "output_sequence_length"),
    (dict(output_sequence_length=0), ValueError, "output_sequence_length"),
    (dict(output_sequence_length=2.5), TypeError, "output_sequence_length"),
    (dict(sparse=True), ValueError, "sparse"),
    (dict(ragged=True), ValueError, "ragged"),
    (dict(pad_to_max_tokens=True, output_mode="count"), ValueError, "max_tokens"),
    (dict(max_tokens=1), ValueError, "max_tokens"),
    (dict(vocabulary=["a", "b", "a"]), ValueError, "repeats"),
    (dict(vocabulary=["a", "b", "c"], max_tokens=4), ValueError, "max_tokens"),
    (dict(vocabulary=["a"], output_mode="tf_idf"), ValueError, "idf_weights"),
    (dict(vocabulary=["a"], idf_weights=[1.0]), ValueError, "idf_weights"),
    (dict(encoding=8), TypeError, "encoding"),
    (dict(encoding="no-such-codec"), ValueError, "encoding"),
    (dict(unknown_argument=1), TypeError, "unknown_argument"),
])
def test_bad_arguments_are_refused(kwargs, err, match):
    with pytest.raises(err, match=match) as info:
        L.TextVectorization(**kwargs)
    assert "StringLookup" not in str(info.value)


def test_bad_inputs_are_refused_with_what_was_expected():
    layer = L.TextVectorization(vocabulary=VOCAB)
    with pytest.raises(TypeError, match="strings"):
        layer(np.array([[1.0], [2.0]]))
    with pytest.raises(TypeError, match="strings"):
        layer(np.array([["a"], [3]], dtype=object))
    with pytest.raises(ValueError, match=r"\(batch, 1\)"):
        layer(np.array([["the cat", "sat"]]))
    with pytest.raises(ValueError, match="rectangular"):
        layer([["a"], ["b", "c"]])
    with pytest.raises(TypeError, match="dtype='string'"):
        layer(pg.Input((1,)))
    with pytest.raises(ValueError, match=r"shape \(1,\)"):
        layer(pg.Input((3,), dtype="string"))
    with pytest.raises(ValueError, match=r"shape \(k,\)"):
        L.TextVectorization(split=None)(pg.Input((2, 2), dtype="string"))
    with pytest.raises(RuntimeError, match="^TextVectorization: .*vocabulary"):
        L.TextVectorization(output_mode="multi_hot")(pg.Input((1,), dtype="string"))
    with pytest.raises(ValueError, match="adapt needs data"):
        L.TextVectorization().adapt(None)
    with pytest.raises(ValueError, match="no data"):
        L.TextVectorization().adapt(iter([]))
    model = _text_classifier(layer)
    model.compile(loss="mse", seed=0)
    with pytest.raises(TypeError, match="strings"):
        model.predict(np.ones((2, 1)))
    model.free()


@pytest.mark.parametrize("make, data", [
    (lambda: L.TextVectorization(vocabulary=VOCAB, output_sequence_length=4), [["the cat"], ["on the mat"]]),
    (lambda: L.TextVectorization(vocabulary=VOCAB, split=None), [["the", "cat", "dog"]]),
    (lambda: L.TextVectorization(vocabulary=VOCAB, split=None, ngrams=(1, 2)), [["the", "cat", "dog"]]),
    (lambda: L.TextVectorization(vocabulary=VOCAB, split=None, ngrams=(3,)), [["the", "cat"]]),
    (lambda: L.TextVectorization(vocabulary=VOCAB, split=None, output_mode="one_hot"), [["cat"], ["x"]]),
    (lambda: L.TextVectorization(vocabulary=VOCAB, split=None, output_mode="one_hot"), [["cat", "x"]]),
    (lambda: L.TextVectorization(vocabulary=VOCAB, output_mode="multi_hot"), [["the cat"], ["x"]]),
    (lambda: L.TextVectorization(vocabulary=VOCAB, output_mode="count", max_tokens=12, pad_to_max_tokens=True),
     [["the cat the"]]),
    (lambda: L.TextVectorization(vocabulary=VOCAB, idf_weights=[1.0] * 5, output_mode="tf_idf"), [["on"]]),
])
def test_symbolic_call_gives_the_shape_and_dtype_of_the_host_call(make, data):
    layer = make()
    a = np.asarray(data)
    node = layer(pg.Input(a.shape[1:], dtype="string"))
    out = layer(a)
    assert node.shape == (None,) + out.shape[1:]
    assert node.dtype == layer.output_dtype == {np.dtype(np.int32): "int32", np.dtype(np.float32): "float32"}[out.dtype]
    with pytest.raises(TypeError, match="host"):
        layer.call(None)


def test_keras_io_text_classification_pattern_vectorize_then_an_end_to_end_model(tmp_path):
    # keras-io's text_classification_from_scratch: adapt on the text of a dataset of (text, label) batches,
    # train a model on the integer sequences, then wrap it with the layer for raw strings
    class Reviews(pg.utils.PyDataset):
        def __len__(self):
            return 2

        def __getitem__(self, i):
            return REVIEWS[4 * i:4 * i + 4], LABELS[4 * i:4 * i + 4]
    vectorize_layer = L.TextVectorization(max_tokens=50, output_mode="int", output_sequence_length=6)
    vectorize_layer.adapt(x for x, _ in Reviews())
    inputs = pg.Input(shape=(None,), dtype="int64")
    x = L.Embedding(50, 8)(inputs)
    x = L.GlobalMaxPooling1D()(x)
    predictions = L.Dense(1, activation="sigmoid", name="predictions")(x)
    model = pg.Model(inputs, predictions)
    model.compile(loss="binary_crossentropy", optimizer="adam", metrics=["accuracy"], seed=0)
    model.fit(vectorize_layer(REVIEWS[:, None]), LABELS, epochs=3, verbose=0)

    inputs = pg.Input(shape=(1,), dtype="string")
    indices = vectorize_layer(inputs)
    outputs = model(indices)
    end_to_end_model = pg.Model(inputs, outputs)
    end_to_end_model.compile(loss="binary_crossentropy", optimizer="adam", metrics=["accuracy"])
    loss, accuracy = end_to_end_model.evaluate(Reviews(), verbose=0)
    assert loss == pytest.approx(model.evaluate(vectorize_layer(REVIEWS[:, None]), LABELS, verbose=0)[0], rel=1e-5)
    np.testing.assert_allclose(end_to_end_model.predict(REVIEWS), model.predict(vectorize_layer(REVIEWS[:, None])),
                               rtol=1e-6)
    path = str(tmp_path / "end_to_end.keras")
    end_to_end_model.save(path)
    loaded = pg.load_model(path)
    np.testing.assert_array_equal(loaded.predict(REVIEWS), end_to_end_model.predict(REVIEWS))
    loaded.free()
    end_to_end_model.free()
    model.free()


def upper_only(batch):
    """A module-level function, not registered: saved by its name, loaded through custom_objects."""
    return np.char.upper(batch)


def test_an_unregistered_named_callable_loads_through_custom_objects(tmp_path):
    layer = L.TextVectorization(standardize=upper_only, vocabulary=["CAT", "DOG"])
    model = pg.Sequential([pg.Input((1,), dtype="string"), layer]).compile(loss="mse")
    path = str(tmp_path / "upper.gguf")
    model.save(path)
    with pytest.raises(ValueError, match="standardize.*upper_only.*custom_objects"):
        pg.load_model(path)
    loaded = pg.load_model(path, custom_objects={"upper_only": upper_only})
    np.testing.assert_array_equal(loaded.predict(["cat dog bird"]), [[2, 3, 1]])
    loaded.free()
    model.free()
