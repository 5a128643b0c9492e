"""fit with steps_per_epoch shorter than the data: as Keras's epoch iterator, each epoch goes
on where the last one stopped, the data starts again once every batch has been given (an
epoch that reaches its end is cut short there), and each validation starts at the first
batch.  The expected values are real Keras 3.15.1's (torch backend), run on the same data."""

import numpy as np
import pytest

import pyggml as pg

X = np.arange(10, dtype=np.float32).reshape(10, 1)
Y = np.zeros((10, 1), np.float32)

# Keras: batches of 2 rows, 2 steps an epoch, 4 epochs
ROWS_4_EPOCHS = [[(0, 1), (2, 3)], [(4, 5), (6, 7)], [(8, 9)], [(0, 1), (2, 3)]]
# the running mean loss after each batch of a Dense(1) of weight 1 (y = 0, so the loss is x**2)
LOSSES_4_EPOCHS = [[0.5, 3.5], [20.5, 31.5], [72.5], [0.5, 3.5]]


class _Record(pg.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.epochs, self.val = [], []

    def on_epoch_begin(self, epoch, logs=None):
        self.epochs.append([])

    def on_train_batch_end(self, batch, logs=None):
        self.epochs[-1].append(round(float(logs["loss"]), 3))

    def on_epoch_end(self, epoch, logs=None):
        if "val_loss" in logs:
            self.val.append(round(float(logs["val_loss"]), 3))


class _FirstColumn(pg.Model):
    """A custom train_step that only records each batch's first column of x (as ints) with
    ``record`` and returns a loss of 0: what the steps saw, epoch by epoch."""

    def __init__(self, record):
        super().__init__()
        self.d = pg.layers.Dense(1)
        self.record = record

    def call(self, x):
        return self.d(x)

    def train_step(self, data):
        self.record(pg.ops.convert_to_numpy(data[0])[:, 0].astype(int).tolist())
        return {"loss": 0.0}


def _custom_model(record=lambda rows: None):
    m = _FirstColumn(record)
    m.compile("sgd", "mse")
    return m


class _Epochs(pg.callbacks.Callback):
    """A new list in ``seen`` at each epoch's start."""

    def __init__(self, seen):
        super().__init__()
        self.seen = seen

    def on_epoch_begin(self, epoch, logs=None):
        self.seen.append([])


def _identity_model():
    i = pg.Input((1,))
    m = pg.Model(i, pg.layers.Dense(1, kernel_initializer="ones", bias_initializer="zeros")(i))
    m.compile(pg.optimizers.SGD(0.0), "mse")          # no learning: the losses show which rows came
    return m


def test_arrays_go_on_where_the_last_epoch_stopped():
    rec = _Record()
    _identity_model().fit(X, Y, batch_size=2, epochs=4, steps_per_epoch=2, shuffle=False, verbose=0,
                          callbacks=[rec])
    assert rec.epochs == LOSSES_4_EPOCHS


def test_more_steps_than_batches_takes_every_batch_each_epoch():
    rec = _Record()
    _identity_model().fit(X, Y, batch_size=2, epochs=2, steps_per_epoch=7, shuffle=False, verbose=0,
                          callbacks=[rec])
    assert rec.epochs == [[0.5, 3.5, 9.167, 17.5, 28.5]] * 2


def test_shuffled_epochs_share_one_permutation_until_it_is_used_up():
    seen = []
    m = _custom_model(lambda rows: seen[-1].append(rows))
    m.fit(X, Y, batch_size=2, epochs=3, steps_per_epoch=3, shuffle=True, verbose=0, callbacks=[_Epochs(seen)])
    # epochs of 3, 2 and 3 batches: the first two epochs are one permutation of the rows, the
    # third starts a new one
    assert [len(e) for e in seen] == [3, 2, 3]
    assert sorted(r for b in seen[0] + seen[1] for r in b) == list(range(10))
    assert len({r for b in seen[2] for r in b}) == 6


def test_custom_train_step_goes_on_too():
    seen = []
    m = _custom_model(lambda rows: seen[-1].append(tuple(rows)))
    m.fit(X, Y, batch_size=2, epochs=4, steps_per_epoch=2, shuffle=False, verbose=0, callbacks=[_Epochs(seen)])
    assert seen == ROWS_4_EPOCHS


def test_each_validation_starts_at_the_first_batch():
    rec = _Record()
    _identity_model().fit(X, Y, batch_size=2, epochs=3, steps_per_epoch=2, validation_steps=1,
                          validation_data=(X[:6] + 1, Y[:6]), shuffle=False, verbose=0, callbacks=[rec])
    assert rec.epochs == LOSSES_4_EPOCHS[:3]
    assert rec.val == [2.5, 2.5, 2.5]               # rows 1 and 2, every time (Keras)


def test_validation_split_keeps_steps_per_epoch_and_validation_steps():
    # Keras: steps_per_epoch counts the training part's batches, validation_steps and
    # validation_batch_size the held-out part's (before, the split dropped both)
    rec = _Record()
    _identity_model().fit(X, Y, batch_size=2, epochs=3, steps_per_epoch=1, validation_split=0.4,
                          validation_steps=1, validation_batch_size=1, shuffle=False, verbose=0,
                          callbacks=[rec])
    assert rec.epochs == [[0.5], [6.5], [20.5]]
    assert rec.val == [36.0, 36.0, 36.0]             # the held-out row 6 alone, each time


@pytest.mark.parametrize("custom", [False, True])
def test_pydataset_goes_on_and_ends_each_epoch(custom):
    events = []

    class Batches(pg.utils.PyDataset):
        def __len__(self):
            return 5

        def __getitem__(self, i):
            return X[2 * i:2 * i + 2], Y[2 * i:2 * i + 2]

        def on_epoch_end(self):
            events.append("end")

    rec = _Record()
    m = _identity_model()
    if custom:
        got = []
        m = _custom_model(lambda rows: got.append(rows[0]))
        m.fit(Batches(), epochs=4, steps_per_epoch=2, verbose=0)
        assert got == [0, 2, 4, 6, 8, 0, 2]
        return
    m.fit(Batches(), epochs=4, steps_per_epoch=2, shuffle=False, verbose=0, callbacks=[rec])
    assert rec.epochs == LOSSES_4_EPOCHS
    assert events == ["end"] * 4


def test_reiterable_loader_goes_on():
    torch = pytest.importorskip("torch")
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.tensor(X), torch.tensor(Y)),
                                         batch_size=2)
    rec = _Record()
    _identity_model().fit(loader, epochs=4, steps_per_epoch=2, verbose=0, callbacks=[rec])
    assert rec.epochs == LOSSES_4_EPOCHS


def test_evaluate_and_predict_with_steps_start_at_the_first_batch():
    m = _identity_model()
    for _ in range(2):
        assert m.evaluate(X, Y, batch_size=2, steps=2, verbose=0) == pytest.approx(3.5)
        np.testing.assert_array_equal(m.predict(X, batch_size=2, steps=2, verbose=0).ravel(), [0, 1, 2, 3])


def test_a_model_without_targets_keeps_steps_per_epoch():
    # a model whose only loss is add_loss trained on inputs alone: the steps limit held only for
    # targeted data before
    class AddLoss(pg.layers.Layer):
        def call(self, x):
            self.add_loss(pg.ops.mean(x * x))
            return x
    i = pg.Input((1,))
    m = pg.Model(i, AddLoss()(pg.layers.Dense(1, kernel_initializer="ones", bias_initializer="zeros")(i)))
    m.compile(pg.optimizers.SGD(0.0))
    counts = []

    class Count(pg.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            counts.append(0)

        def on_train_batch_end(self, batch, logs=None):
            counts[-1] += 1
    m.fit(X, batch_size=2, epochs=3, steps_per_epoch=2, shuffle=False, verbose=0, callbacks=[Count()])
    assert counts == [2, 2, 1]


@pytest.mark.parametrize("custom", [False, True])
def test_a_generator_that_runs_out_stops_training_with_keras_warning(custom):
    # Keras: "Your input ran out of data; interrupting training" (a warning, not an error); the
    # epochs that had batches are kept
    def batches():
        for _ in range(3):
            yield np.ones((2, 1), np.float32), np.zeros((2, 1), np.float32)
    m = _custom_model() if custom else _identity_model()
    with pytest.warns(UserWarning, match="ran out of data"):
        history = m.fit(batches(), epochs=4, steps_per_epoch=2, verbose=0)
    assert len(history.history["loss"]) == 2                    # epochs of 2 and 1 batches


def test_an_empty_generator_is_an_error():
    with pytest.raises(ValueError, match="no batches"):
        _identity_model().fit(iter([]), epochs=2, steps_per_epoch=2, verbose=0)


@pytest.mark.parametrize("kwargs,name", [({"validation_steps": 0}, "validation_steps"),
                                         ({"validation_steps": "x"}, "validation_steps"),
                                         ({"validation_batch_size": -1}, "validation_batch_size"),
                                         ({"validation_batch_size": np.ones(2)}, "validation_batch_size")])
def test_validation_arguments_are_checked(kwargs, name):
    with pytest.raises((ValueError, TypeError), match=name):
        _identity_model().fit(X, Y, validation_split=0.2, verbose=0, **kwargs)


@pytest.mark.parametrize("steps", [0, -1, 2.5, "x"])
def test_evaluate_and_predict_check_steps(steps):
    m = _identity_model()
    with pytest.raises((ValueError, TypeError), match="steps"):
        m.evaluate(X, Y, steps=steps, verbose=0)
    with pytest.raises((ValueError, TypeError), match="steps"):
        m.predict(X, steps=steps, verbose=0)
