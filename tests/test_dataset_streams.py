"""Dataset.from_generator read as a stream: a generator that never ends trains with
steps_per_epoch, as with tf.data in Keras, and every transformation reads only as far
as it is asked."""

import numpy as np
import pytest

import pyggml as keras
from pyggml import layers
from pyggml.utils import dataset_utils

Dataset = keras.data.Dataset


def _endless(calls=None, seed=0):
    def gen():
        if calls is not None:
            calls.append(1)
        rng = np.random.default_rng(seed)
        while True:
            x = rng.random(3).astype(np.float32)
            yield x, np.float32(2 * x[0] - x[1] + 0.5 * x[2])
    return gen


def _counting(n, reads):
    def gen():
        for i in range(n):
            reads.append(i)
            yield np.full((2,), i, np.float32), np.float32(i)
    return gen


def test_an_endless_generator_trains_with_steps_per_epoch_continuing_across_epochs():
    calls = []
    ds = Dataset.from_generator(_endless(calls), output_signature=None).batch(32)
    assert ds.cardinality() == keras.data.UNKNOWN_CARDINALITY
    keras.utils.set_random_seed(1)
    model = keras.Sequential([keras.Input((3,)), layers.Dense(1)])
    model.compile(keras.optimizers.Adam(0.05), "mse")
    hist = model.fit(ds, steps_per_epoch=25, epochs=6, verbose=0)
    loss = hist.history["loss"]
    assert loss[-1] < 0.05 * loss[0]
    w, b = model.layers[0].get_weights()
    np.testing.assert_allclose(w.ravel(), [2, -1, 0.5], atol=0.1)
    assert len(calls) == 1                       # one stream for the whole fit, as Keras's iterator
    assert model.evaluate(ds, steps=4, verbose=0) < 0.05 * loss[0]
    assert model.predict(ds.map(lambda x, y: x), steps=3, verbose=0).shape == (96, 1)


def test_take_skip_and_length_read_an_endless_generator_only_as_far_as_asked():
    ds = Dataset.from_generator(_endless())
    first = [float(y) for _, y in ds.take(4)]
    assert len(ds.take(5)) == 5 and len(first) == 4
    assert [float(y) for _, y in ds.skip(2).take(2)] == first[2:]
    assert float(ds[3][1]) == first[3]
    assert [a.shape for a, _ in ds.repeat().batch(4).take(2)] == [(4, 3), (4, 3)]
    assert sum(1 for _ in ds.batch(8).unbatch().take(20)) == 20
    kept = [float(y) for _, y in ds.filter(lambda x, y: y > 1.0).take(5)]
    assert len(kept) == 5 and min(kept) > 1.0
    shuffled = [float(y) for _, y in ds.take(50).shuffle(10, seed=3)]
    assert sorted(shuffled) == sorted(float(y) for _, y in ds.take(50)) and shuffled != first


def test_a_finite_generator_gives_the_same_elements_through_every_step():
    reads = []
    src = _counting(7, reads)

    def ys(d):
        return [float(np.asarray(y).ravel()[0]) if np.ndim(y) else float(y) for _, y in d]
    assert Dataset.from_generator(src).cardinality() == keras.data.UNKNOWN_CARDINALITY
    d = Dataset.from_generator(src)
    assert len(d) == 7 and d.cardinality() == 7
    assert ys(Dataset.from_generator(src)) == list(range(7))
    assert ys(Dataset.from_generator(src).repeat(2)) == list(range(7)) * 2
    assert len(Dataset.from_generator(src).repeat(3)) == 21
    assert [a.shape[0] for a, _ in Dataset.from_generator(src).batch(3)] == [3, 3, 1]
    assert [a.shape[0] for a, _ in Dataset.from_generator(src).batch(3, drop_remainder=True)] == [3, 3]
    assert len(Dataset.from_generator(src).batch(3)) == 3
    assert ys(Dataset.from_generator(src).skip(5)) == [5, 6] and len(Dataset.from_generator(src).skip(2)) == 5
    assert ys(Dataset.from_generator(src).concatenate(Dataset.from_generator(src)).take(9)) == \
        list(range(7)) + [0, 1]
    assert sorted(ys(Dataset.from_generator(src).shuffle(3))) == list(range(7))
    assert ys(Dataset.from_generator(src).filter(lambda x, y: y % 2 == 0)) == [0, 2, 4, 6]
    assert ys(Dataset.from_generator(src).batch(2).unbatch()) == list(range(7))
    assert len(Dataset.from_generator(src).batch(2).unbatch()) == 7
    with pytest.raises(IndexError):
        Dataset.from_generator(src)[7]
    reads.clear()
    d = Dataset.from_generator(src)
    assert ys(d) == ys(d) == list(range(7))
    assert reads == list(range(7))               # a small dataset is read once and kept


def test_fit_on_a_finite_generator_reads_every_batch_each_epoch():
    reads = []
    model = keras.Sequential([keras.Input((2,)), layers.Dense(1)])
    model.compile("sgd", "mse")
    seen = []

    class Count(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            seen.append(batch)
    model.fit(Dataset.from_generator(_counting(7, reads)).batch(3), epochs=2, verbose=0, callbacks=[Count()])
    assert seen == [0, 1, 2, 0, 1, 2]


def test_a_large_stream_keeps_only_its_last_elements_and_each_pass_calls_the_generator_again(monkeypatch):
    monkeypatch.setattr(dataset_utils, "_KEEP_BYTES", 10 * 12)     # ten elements of 3 float32
    calls = []
    d = Dataset.from_generator(_endless(calls)).take(40)
    first = [float(y) for _, y in d]
    source = d._parents[0]._get.__self__
    assert len(source.kept) <= 10 and source.base >= 30
    assert [float(y) for _, y in d] == first and len(calls) == 2   # a new pass: the generator again
    assert float(d[2][1]) == first[2]                             # an early element: read again from the start
    assert len(calls) == 3


def test_the_length_of_an_endless_generator_is_refused_after_a_limit(monkeypatch):
    monkeypatch.setattr(dataset_utils, "_MAX_GENERATED", 500)
    with pytest.raises(ValueError, match="steps_per_epoch"):
        len(Dataset.from_generator(_endless()))
    model = keras.Sequential([keras.Input((3,)), layers.Dense(1)])
    model.compile("sgd", "mse")
    with pytest.raises(ValueError, match="steps_per_epoch"):
        model.fit(Dataset.from_generator(_endless()).batch(4), epochs=1, verbose=0)


def test_from_generator_checks_its_arguments():
    with pytest.raises(TypeError, match="callable"):
        Dataset.from_generator(iter([1, 2]))
    with pytest.raises(TypeError, match="args"):
        Dataset.from_generator(lambda n: iter(range(n)), args=3)
    assert [int(v) for v in Dataset.from_generator(lambda n: iter(range(n)), args=(3,))] == [0, 1, 2]


def test_a_filter_that_keeps_nothing_of_an_endless_dataset_is_refused_not_read_forever(monkeypatch):
    monkeypatch.setattr(dataset_utils, "_MAX_DRY", 300)
    ds = Dataset.from_tensor_slices((np.ones((4, 1), np.float32), np.arange(4, dtype=np.float32)))
    with pytest.raises(ValueError, match="kept none"):
        next(iter(ds.repeat().filter(lambda x, y: False)))
    with pytest.raises(ValueError, match="kept none"):
        next(iter(Dataset.from_generator(_endless()).filter(lambda x, y: y > 100)))
    assert [float(y) for _, y in ds.repeat().filter(lambda x, y: y == 3).take(3)] == [3.0, 3.0, 3.0]
    assert ds.repeat().filter(lambda x, y: y > 0).cardinality() == keras.data.INFINITE_CARDINALITY
