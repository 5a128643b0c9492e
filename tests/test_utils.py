"""pg.utils: Keras's utilities (expected values written from Keras's docs), and
PyDatasets through fit / evaluate / predict."""

import os
import random
import stat

import numpy as np
import pytest

import pyggml as pg
from pyggml.utils import model_visualization

U = pg.utils
L = pg.layers


# --- to_categorical / normalize ------------------------------------------------------------------------

def test_to_categorical_matches_keras():
    np.testing.assert_array_equal(U.to_categorical([0, 1, 2, 3], num_classes=4), np.eye(4))
    out = U.to_categorical(np.array([[1], [0], [2]]))            # (n, 1): the last axis is dropped
    assert out.shape == (3, 3) and out.dtype == np.float32
    np.testing.assert_array_equal(out, np.eye(3)[[1, 0, 2]])
    grid = U.to_categorical(np.array([[0, 2], [1, 1]]), num_classes=3)
    assert grid.shape == (2, 2, 3)
    np.testing.assert_array_equal(grid[0, 1], [0, 0, 1])
    assert U.to_categorical([1.0, 0.0], dtype="int32").dtype == np.int32
    np.testing.assert_array_equal(U.to_categorical([2], num_classes=0), [[0, 0, 1]])   # 0: as None (Keras)


@pytest.mark.parametrize("y, kw, err", [
    ([0, 4], dict(num_classes=4), ValueError), ([-1, 0], {}, ValueError), ([0.5], {}, ValueError),
    (["a"], {}, TypeError), ([], {}, ValueError), ([0], dict(num_classes=-2), ValueError),
    ([np.nan], {}, ValueError),
])
def test_to_categorical_refuses_bad_labels(y, kw, err):
    with pytest.raises(err):
        U.to_categorical(y, **kw)


def test_normalize_rows_and_axes():
    x = np.array([[3.0, 4.0], [0.0, 0.0], [1.0, -1.0]])
    out = U.normalize(x)
    np.testing.assert_allclose(out, [[0.6, 0.8], [0.0, 0.0], [2 ** -0.5, -(2 ** -0.5)]])   # a zero row stays
    np.testing.assert_allclose(U.normalize(x, order=1), [[3 / 7, 4 / 7], [0, 0], [0.5, -0.5]])
    np.testing.assert_allclose(np.linalg.norm(U.normalize(x, axis=0), axis=0), [1.0, 1.0])
    assert U.normalize(np.array([[1, 1]])).dtype == np.float32
    assert U.normalize(np.array([[1.0, 1.0]])).dtype == np.float64
    with pytest.raises(ValueError):
        U.normalize(x, axis=2)
    with pytest.raises(TypeError):
        U.normalize(np.array(["a"]))


# --- pad_sequences -------------------------------------------------------------------------------------

def test_pad_sequences_matches_keras_docs():
    seqs = [[1], [2, 3], [4, 5, 6]]
    out = U.pad_sequences(seqs)
    np.testing.assert_array_equal(out, [[0, 0, 1], [0, 2, 3], [4, 5, 6]])
    assert out.dtype == np.int32
    np.testing.assert_array_equal(U.pad_sequences(seqs, value=-1), [[-1, -1, 1], [-1, 2, 3], [4, 5, 6]])
    np.testing.assert_array_equal(U.pad_sequences(seqs, padding="post"), [[1, 0, 0], [2, 3, 0], [4, 5, 6]])
    np.testing.assert_array_equal(U.pad_sequences(seqs, maxlen=2), [[0, 1], [2, 3], [5, 6]])
    np.testing.assert_array_equal(U.pad_sequences(seqs, maxlen=2, truncating="post"), [[0, 1], [2, 3], [4, 5]])
    np.testing.assert_array_equal(U.pad_sequences(seqs, maxlen=4, padding="post", truncating="post"),
                                  [[1, 0, 0, 0], [2, 3, 0, 0], [4, 5, 6, 0]])


def test_keras_s_older_homes_of_the_utilities():
    """``keras.preprocessing.sequence.pad_sequences`` and ``keras.models.load_model`` (what
    older scripts import) are pg.utils' and pg.saving's."""
    assert pg.preprocessing.sequence.pad_sequences is U.pad_sequences
    assert pg.models.load_model is pg.saving.load_model is pg.load_model


def test_pad_sequences_edge_cases():
    np.testing.assert_array_equal(U.pad_sequences([[], [7]]), [[0], [7]])             # an empty sequence
    assert U.pad_sequences([]).shape == (0, 0)
    assert U.pad_sequences([[1, 2]], maxlen=0).shape == (1, 0)
    steps = U.pad_sequences([np.ones((1, 2)), np.ones((3, 2))], dtype="float32")   # steps of shape (2,)
    assert steps.shape == (2, 3, 2) and steps.dtype == np.float32
    np.testing.assert_array_equal(steps[0, :2], 0.0)
    words = U.pad_sequences([["a"], ["b", "c"]], dtype=object, value="<pad>")
    assert words.tolist() == [["<pad>", "a"], ["b", "c"]]
    np.testing.assert_array_equal(U.pad_sequences(np.array([[1, 2], [3, 4]]), maxlen=3), [[0, 1, 2], [0, 3, 4]])
    np.testing.assert_allclose(U.pad_sequences([[0.5]], dtype="float32", maxlen=2, value=0.25), [[0.25, 0.5]])


@pytest.mark.parametrize("args, kw, err", [
    ([[1], 2], {}, ValueError), (5, {}, ValueError), ([[1]], dict(padding="mid"), ValueError),
    ([[1]], dict(truncating="x"), ValueError), ([[1]], dict(maxlen=-1), ValueError),
    ([["a"]], dict(value="x"), ValueError), ([np.ones((1, 2)), np.ones((1, 3))], {}, ValueError),
])
def test_pad_sequences_refuses_bad_input(args, kw, err):
    with pytest.raises(err):
        U.pad_sequences(args, **kw)


# --- set_random_seed --------------------------------------------------------------------------------------

def _fresh_weights():
    m = pg.Sequential([L.Dense(3)], input_shape=(2,)).compile(loss="mse")
    w = m.get_weights()
    m.free()
    return w


def test_set_random_seed_seeds_python_numpy_and_pyggml():
    U.set_random_seed(123)
    a = (random.random(), np.random.rand(), _fresh_weights())
    U.set_random_seed(123)
    b = (random.random(), np.random.rand(), _fresh_weights())
    assert a[0] == b[0] and a[1] == b[1]
    np.testing.assert_array_equal(a[2]["dense.weight"], b[2]["dense.weight"])
    U.set_random_seed(124)
    assert not np.array_equal(_fresh_weights()["dense.weight"], a[2]["dense.weight"])
    for bad in (1.5, "1", None, -1):
        with pytest.raises(ValueError):
            U.set_random_seed(bad)


# --- PyDataset through fit / evaluate / predict -----------------------------------------------------------

def _data(n=20, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3)).astype(np.float32)
    y = (x @ np.array([[1.0], [-2.0], [0.5]], dtype=np.float32) + 0.3).astype(np.float32)
    return x, y


class Batches(U.PyDataset):
    """Keras's PyDataset pattern: fixed batches by index, a short last one."""

    def __init__(self, x, y=None, batch_size=8, weights=None, **kwargs):
        super().__init__(**kwargs)
        self.x, self.y, self.w, self.batch_size = x, y, weights, batch_size
        self.ends = 0
        self.seen = []

    def __len__(self):
        return -(-len(self.x) // self.batch_size)

    def __getitem__(self, idx):
        self.seen.append(idx)
        sl = slice(idx * self.batch_size, (idx + 1) * self.batch_size)
        if self.y is None:
            return self.x[sl]
        if self.w is None:
            return self.x[sl], self.y[sl]
        return self.x[sl], self.y[sl], self.w[sl]

    def on_epoch_end(self):
        self.ends += 1


def _model():
    m = pg.Sequential([L.Dense(4, activation="relu"), L.Dense(1)], input_shape=(3,))
    return m.compile(optimizer=pg.optimizers.SGD(0.05), loss="mse", metrics=["mae"], seed=0)


def test_pydataset_accepts_keras_s_arguments_and_sequence_is_it():
    ds = Batches(*_data(), workers=4, use_multiprocessing=True, max_queue_size=3)
    assert (ds.workers, ds.use_multiprocessing, ds.max_queue_size) == (4, True, 3)
    assert U.Sequence is U.PyDataset
    assert ds.num_batches == 3 and len(list(ds)) == 3
    with pytest.raises(TypeError):
        Batches(*_data(), worker=2)

    class Bare(U.PyDataset):                     # no super().__init__(): Keras's defaults
        def __len__(self):
            return 1

        def __getitem__(self, i):
            return np.ones((1, 3)), np.ones((1, 1))
    assert (Bare().workers, Bare().max_queue_size) == (1, 10)
    with pytest.raises(NotImplementedError):
        U.PyDataset()[0]


def test_fit_on_a_pydataset_without_steps_per_epoch_equals_fit_on_its_batches():
    x, y = _data()
    a, b = _model(), _model()
    ds = Batches(x, y)
    ha = a.fit(ds, epochs=3, verbose=0, shuffle=False)
    hb = b.fit(x, y, batch_size=8, epochs=3, verbose=0, shuffle=False)
    assert len(ha.history["loss"]) == 3
    np.testing.assert_allclose(ha.history["loss"], hb.history["loss"], rtol=1e-5)
    for k, v in a.get_weights().items():
        np.testing.assert_allclose(v, b.get_weights()[k], rtol=1e-5, atol=1e-6)
    assert ds.seen.count(2) == 3                          # every batch of every epoch, the short one too
    a.free()
    b.free()


def test_fit_calls_on_epoch_end_after_every_epoch():
    x, y = _data()
    m = _model()
    ds = Batches(x, y)
    m.fit(ds, epochs=3, verbose=0)
    assert ds.ends == 3
    m.free()


def test_evaluate_and_predict_on_a_pydataset():
    x, y = _data(19)
    m = _model()
    m.fit(x, y, epochs=2, batch_size=8, verbose=0)
    by_arrays = m.evaluate(x, y, batch_size=8, verbose=0)
    by_dataset = m.evaluate(Batches(x, y), verbose=0)
    np.testing.assert_allclose(by_dataset, by_arrays, rtol=1e-5)
    p = m.predict(x)
    np.testing.assert_allclose(m.predict(Batches(x, y)), p, rtol=1e-6, atol=1e-7)       # (x, y) items
    w = np.linspace(0.5, 2.0, 19).astype(np.float32)
    np.testing.assert_allclose(m.evaluate(Batches(x, y, weights=w), verbose=0, return_dict=True)["loss"],
                               m.evaluate(x, y, batch_size=8, sample_weight=w, verbose=0, return_dict=True)["loss"],
                               rtol=1e-5)
    m.free()


def test_predict_on_a_pydataset_of_inputs_only():
    x, y = _data(19)
    m = _model()
    try:
        np.testing.assert_allclose(m.predict(Batches(x)), m.predict(x), rtol=1e-6, atol=1e-7)
    finally:
        m.free()


def test_fit_on_an_iterable_with_len_and_on_sample_weights():
    x, y = _data()

    class Loader:
        """Not a PyDataset: any iterable with __len__ (a torch DataLoader's shape)."""

        def __len__(self):
            return 2

        def __iter__(self):
            yield x[:10], y[:10]
            yield x[10:], y[10:]
    m = _model()
    h = m.fit(Loader(), epochs=2, verbose=0)
    assert len(h.history["loss"]) == 2 and all(np.isfinite(h.history["loss"]))
    w = np.zeros(20, dtype=np.float32)
    w[:8] = 1.0
    before = m.get_weights()
    m.fit(Batches(x, y, weights=w), epochs=1, verbose=0, shuffle=False)     # (x, y, w) items
    assert any(not np.array_equal(v, before[k]) for k, v in m.get_weights().items())
    m.free()


# --- plot_model / model_to_dot -----------------------------------------------------------------------

def _functional():
    a = pg.Input((4,), name="a")
    b = pg.Input((2,), name="b")
    h = L.Dense(8, activation="relu", name="hidden")(a)
    c = L.Concatenate(name="join")([h, b])
    out = L.Dense(1, activation="sigmoid", name="out")(c)
    return pg.Model([a, b], out, name="two_inputs")


def test_model_to_dot_has_every_layer_and_connection():
    m = _functional()
    dot = U.model_to_dot(m, show_shapes=True, show_dtype=True, show_layer_activations=True, show_trainable=True,
                         rankdir="LR")
    assert dot.startswith('digraph "two_inputs" {') and dot.rstrip().endswith("}")
    assert "rankdir=LR" in dot
    ids = {}
    for line in dot.splitlines():
        if "[label=" in line:
            nid, label = line.strip().split(" [label=", 1)
            ids[label.split(" (")[0].strip('"')] = nid
    assert set(ids) == {"a", "b", "hidden", "join", "out"}
    edges = {tuple(line.strip().rstrip(";").split(" -> ")) for line in dot.splitlines() if "->" in line}
    want = {("a", "hidden"), ("hidden", "join"), ("b", "join"), ("join", "out")}
    assert edges == {(ids[s], ids[d]) for s, d in want}
    assert "Output shape: (None, 10)" in dot and "Input shape: [(None, 8), (None, 2)]" in dot
    assert "Activation: relu" in dot and "Trainable: Y" in dot and "Output dtype: float32" in dot
    plain = U.model_to_dot(m)
    assert "Input shape" not in plain and "Output shape" not in plain and "hidden (Dense)" in plain
    assert "(Dense)" not in U.model_to_dot(m, show_layer_names=False)
    with pytest.raises(ValueError):
        U.model_to_dot(m, rankdir="XY")
    m.free()


def test_model_to_dot_sequential_nested_and_unbuilt():
    seq = pg.Sequential([L.Dense(3, name="d1"), L.Dense(2, name="d2")], input_shape=(5,))
    dot = U.model_to_dot(seq, show_shapes=True)
    assert "d1 (Dense)" in dot and "d2 (Dense)" in dot and "InputLayer" in dot
    assert dot.count("->") == 2
    inner = pg.Sequential([L.Dense(3, name="inner_dense")], input_shape=(4,), name="inner")
    inp = pg.Input((4,), name="x")
    outer = pg.Model(inp, L.Dense(1, name="head")(inner(inp)), name="outer")
    flat = U.model_to_dot(outer)
    assert "inner (Sequential)" in flat and "inner_dense" not in flat
    nested = U.model_to_dot(outer, expand_nested=True)
    assert "subgraph cluster_" in nested and "inner_dense (Dense)" in nested
    with pytest.raises(ValueError, match="not built"):
        U.model_to_dot(pg.Sequential([L.Dense(1)]))
    with pytest.raises(TypeError):
        U.model_to_dot(L.Dense(1))
    seq.free()
    outer.free()


def test_plot_model_without_graphviz_writes_the_dot_source_and_prints_the_graph(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(model_visualization, "_find_dot", lambda: None)
    m = _functional()
    target = tmp_path / "model.png"
    assert U.plot_model(m, to_file=str(target), show_shapes=True) is None         # no exception
    out = capsys.readouterr().out
    assert "dot" in out and "graphviz" in out and str(tmp_path / "model.dot") in out
    assert "hidden (Dense)" in out and "(None, 8)" in out and "a, b" not in out.split("join")[0][-5:]
    assert not target.exists()
    source = (tmp_path / "model.dot").read_text()
    assert source == U.model_to_dot(m, show_shapes=True)
    m.free()


def test_plot_model_writes_dot_source_by_extension_and_refuses_unknown_ones(tmp_path, monkeypatch):
    monkeypatch.setattr(model_visualization, "_find_dot", lambda: None)
    m = _functional()
    U.plot_model(m, to_file=str(tmp_path / "g.gv"))
    assert (tmp_path / "g.gv").read_text().startswith("digraph")
    umask = os.umask(0o022)
    os.umask(umask)
    assert (tmp_path / "g.gv").stat().st_mode & 0o777 == 0o666 & ~umask        # not a temporary file's 0600
    with pytest.raises(ValueError, match="format"):
        U.plot_model(m, to_file=str(tmp_path / "g.docx"))
    m.free()


def _fake_dot(tmp_path, script):
    path = tmp_path / "fake-dot"
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_plot_model_renders_through_dot_and_falls_back_when_it_fails(tmp_path, monkeypatch, capsys):
    m = _functional()
    # a stand-in for graphviz's dot: checks its format argument and echoes a PNG signature plus its input
    fake = _fake_dot(tmp_path, 'test "$1" = "-Tpng" || exit 3\nprintf "\\211PNG\\r\\n"\ncat\n')
    monkeypatch.setattr(model_visualization, "_find_dot", lambda: fake)
    U.plot_model(m, to_file=str(tmp_path / "m.png"))
    data = (tmp_path / "m.png").read_bytes()
    assert data.startswith(b"\x89PNG\r\n") and b"hidden (Dense)" in data
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".plot-")]           # no temporary left
    broken = _fake_dot(tmp_path, "echo 'Error: syntax' >&2\nexit 1\n")
    monkeypatch.setattr(model_visualization, "_find_dot", lambda: broken)
    assert U.plot_model(m, to_file=str(tmp_path / "n.svg")) is None
    assert "failed" in capsys.readouterr().out and (tmp_path / "n.dot").exists()
    assert not (tmp_path / "n.svg").exists()
    m.free()


@pytest.mark.skipif(model_visualization._find_dot() is None, reason="graphviz's dot is not installed")
@pytest.mark.parametrize("ext, magic", [("png", b"\x89PNG"), ("svg", b"<?xml"), ("pdf", b"%PDF")])
def test_plot_model_with_graphviz(tmp_path, ext, magic):
    m = _functional()
    U.plot_model(m, to_file=str(tmp_path / f"m.{ext}"), show_shapes=True, expand_nested=True, dpi=72)
    assert (tmp_path / f"m.{ext}").read_bytes().startswith(magic)
    m.free()


def test_fit_shuffles_the_batch_order_of_a_pydataset():
    x, y = _data(40)
    m = _model()
    ds = Batches(x, y, batch_size=4)
    pg.set_seed(0)
    m.fit(ds, epochs=3, verbose=0, shuffle=True)
    orders = [ds.seen[i:i + 10] for i in range(0, 30, 10)]
    assert any(o != list(range(10)) for o in orders) and all(sorted(o) == list(range(10)) for o in orders)
    m.free()


# --- timeseries_dataset_from_array -----------------------------------------------------------

def _windows(data, targets, length, stride=1, rate=1, start=0, end=None):
    """The windows and targets in order, written out step by step."""
    end = len(data) if end is None else end
    xs, ys = [], []
    p = 0
    while start + p + (length - 1) * rate < end and (targets is None or start + p < len(targets)):
        xs.append([data[start + p + j * rate] for j in range(length)])
        if targets is not None:
            ys.append(targets[start + p])
        p += stride
    return np.array(xs), (np.array(ys) if targets is not None else None)


def test_timeseries_windows_follow_keras_examples():
    # Keras's example 1: indices 0..98, length 10, rate 2, stride 3: [0 2 .. 18], [3 5 .. 21], ...,
    # the last [78 80 .. 96]
    ds = pg.utils.timeseries_dataset_from_array(np.arange(99), None, sequence_length=10, sampling_rate=2,
                                                sequence_stride=3, batch_size=1000)
    (x,) = list(ds)
    np.testing.assert_array_equal(x[0], np.arange(0, 20, 2))
    np.testing.assert_array_equal(x[1], np.arange(3, 23, 2))
    np.testing.assert_array_equal(x[-1], np.arange(78, 98, 2))
    # example 2: the past 10 steps predict the next one
    data = np.arange(50, dtype=np.float32) * 0.5
    ds = pg.preprocessing.timeseries_dataset_from_array(data[:-10], data[10:], sequence_length=10, batch_size=8)
    inputs, targets = next(iter(ds))
    np.testing.assert_array_equal(inputs[0], data[:10])
    assert targets[0] == data[10]
    assert inputs.numpy().shape == (8, 10) and isinstance(inputs.numpy(), np.ndarray)


@pytest.mark.parametrize("kw", [dict(), dict(sequence_stride=4, sampling_rate=3),
                                dict(start_index=7, end_index=60, sampling_rate=2),
                                dict(batch_size=None, sequence_stride=5)])
def test_timeseries_batches_hold_every_window_once(kw):
    rng = np.random.default_rng(8)
    data = rng.standard_normal((80, 3)).astype(np.float32)
    targets = rng.standard_normal(80).astype(np.float32)
    bs = kw.pop("batch_size", 16)
    ds = pg.utils.timeseries_dataset_from_array(data, targets, 6, batch_size=bs, **kw)
    want_x, want_y = _windows(data, targets, 6, kw.get("sequence_stride", 1), kw.get("sampling_rate", 1),
                              kw.get("start_index", 0), kw.get("end_index"))
    items = list(ds)
    assert len(items) == len(ds) == (len(want_x) if bs is None else -(-len(want_x) // bs))
    xs = np.stack([x for x, _ in items]) if bs is None else np.concatenate([x for x, _ in items])
    ys = np.stack([y for _, y in items]) if bs is None else np.concatenate([y for _, y in items])
    np.testing.assert_array_equal(xs, want_x)
    np.testing.assert_array_equal(ys, want_y)
    # shuffled: the same windows with their targets, in another order, the same for a seed
    sh = list(pg.utils.timeseries_dataset_from_array(data, targets, 6, batch_size=bs, shuffle=True, seed=3, **kw))
    sx = np.stack([x for x, _ in sh]) if bs is None else np.concatenate([x for x, _ in sh])
    sy = np.stack([y for _, y in sh]) if bs is None else np.concatenate([y for _, y in sh])
    order = [int(np.flatnonzero((want_x == w).all(axis=(1, 2)))[0]) for w in sx]
    assert sorted(order) == list(range(len(want_x))) and order != list(range(len(want_x)))
    np.testing.assert_array_equal(sy, want_y[order])
    again = pg.utils.timeseries_dataset_from_array(data, targets, 6, batch_size=bs, shuffle=True, seed=3, **kw)
    np.testing.assert_array_equal(next(iter(again))[0], sh[0][0])


def test_a_keras_weather_script_trains_and_predicts_on_the_dataset():
    """keras-io's timeseries_weather_forecasting, its data calls as written: take(1), .numpy(),
    fit with validation_data, predict on a batch from take(5)."""
    rng = np.random.default_rng(9)
    series = np.cumsum(rng.standard_normal((600, 4)), axis=0).astype(np.float32) * 0.1
    past, future, step = 24, 6, 2
    start = past + future
    x_train, y_train = series[:400], series[start:start + 400, 0]
    ds_train = pg.preprocessing.timeseries_dataset_from_array(x_train, y_train, sequence_length=past // step,
                                                              sampling_rate=step, batch_size=64)
    x_val, y_val = series[400:-start], series[400 + start:, 0]
    ds_val = pg.utils.timeseries_dataset_from_array(x_val, y_val, sequence_length=past // step,
                                                    sampling_rate=step, batch_size=64)
    for batch in ds_train.take(1):
        inputs, targets = batch
    assert inputs.numpy().shape == (64, past // step, 4) and targets.numpy().shape == (64,)
    inp = pg.Input(shape=(inputs.shape[1], inputs.shape[2]))
    model = pg.Model(inp, pg.layers.Dense(1)(pg.layers.LSTM(8)(inp)))
    model.compile(optimizer=pg.optimizers.Adam(learning_rate=0.01), loss="mse")
    h = model.fit(ds_train, epochs=3, validation_data=ds_val, verbose=0)
    assert h.history["loss"][-1] < h.history["loss"][0] and "val_loss" in h.history
    n = 0
    for x, y in ds_val.take(5):
        pred = model.predict(x)
        assert pred.shape == (len(x), 1) and y[0].numpy().shape == ()
        n += 1
    assert n == min(5, len(ds_val))
    assert len(ds_val.skip(1)) == len(ds_val) - 1
    model.free()


@pytest.mark.parametrize("kw, err", [
    (dict(sequence_length=0), "sequence_length"), (dict(sampling_rate=0), "sampling_rate"),
    (dict(sampling_rate=100), "sampling_rate"), (dict(sequence_stride=-1), "sequence_stride"),
    (dict(start_index=-1), "start_index"), (dict(start_index=5, end_index=5), "end_index"),
    (dict(end_index=500), "end_index"), (dict(batch_size=0), "batch_size"), (dict(seed="x", shuffle=True), "seed"),
])
def test_timeseries_bad_arguments_say_which(kw, err):
    args = dict(data=np.zeros((20, 2)), targets=None, sequence_length=3)
    args.update(kw)
    with pytest.raises(ValueError, match=err):
        pg.utils.timeseries_dataset_from_array(**args)
    with pytest.raises(TypeError, match="numbers"):
        pg.utils.timeseries_dataset_from_array(np.array(["a", "b"]), None, 1)
    ds = pg.utils.timeseries_dataset_from_array(np.zeros((20, 2)), None, 3, batch_size=4)
    with pytest.raises(IndexError):
        ds[len(ds)]
    with pytest.raises(ValueError, match="take"):
        ds.take(-2)
