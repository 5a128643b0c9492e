"""Batches whose inputs have different row counts: keras-io's message-passing networks batch
disjoint graphs (a row per atom in one input, per bond in another, per molecule in the
targets), and Keras trains on such batches from a dataset.  pyggml takes them wherever the
data comes as whole batches (a generator or PyDataset, train_on_batch, test_on_batch,
predict_on_batch, predict, the model called on them); fit and evaluate on arrays cannot cut
them into batches and say so.  Checked against the same computation in numpy and PyTorch."""

import numpy as np
import pytest

import pyggml as pg
from pyggml import layers, ops

try:
    import torch
except ImportError:
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")


class _Pool(layers.Layer):
    """Sum of each graph's node features (the molecule indicator gives each node's graph)."""

    def __init__(self, graphs, **kw):
        super().__init__(**kw)
        self.graphs = graphs

    def call(self, inputs):
        nodes, graph_of = inputs
        return ops.segment_sum(nodes, graph_of, num_segments=self.graphs)


class _Messages(layers.Layer):
    """Each node gets the sum of its neighbours' features (edges as (target, source) pairs)."""

    def call(self, inputs):
        nodes, pairs = inputs
        sent = ops.take(nodes, pairs[:, 1], axis=0)
        return ops.segment_sum(sent, pairs[:, 0], num_segments=ops.shape(nodes)[0])


def _model(graphs=2, seed=0):
    pg.set_seed(seed)
    atoms = pg.Input((3,), name="atoms")
    pairs = pg.Input((2,), dtype="int32", name="pairs")
    graph_of = pg.Input((), dtype="int32", name="graph_of")
    h = layers.Dense(4, activation="tanh")(atoms)
    h = layers.Add()([h, _Messages()([h, pairs])])
    out = layers.Dense(1)(_Pool(graphs)([h, graph_of]))
    return pg.Model([atoms, pairs, graph_of], out)


def _batch(rng, nodes=(3, 4)):
    """One batch of disjoint graphs: ring-shaped molecules of the given sizes."""
    atoms = rng.normal(size=(sum(nodes), 3)).astype(np.float32)
    pairs, graph_of, start = [], [], 0
    for g, k in enumerate(nodes):
        for i in range(k):
            pairs += [(start + i, start + (i + 1) % k), (start + (i + 1) % k, start + i)]
        graph_of += [g] * k
        start += k
    return {"atoms": atoms, "pairs": np.array(pairs, np.int32), "graph_of": np.array(graph_of, np.int32)}


def _numpy_forward(model, x):
    w = [v.numpy() for v in model.trainable_variables]          # PyTorch's layout: (out, in)
    h = np.tanh(x["atoms"] @ w[0].T + w[1])
    msg = np.zeros_like(h)
    np.add.at(msg, x["pairs"][:, 0], h[x["pairs"][:, 1]])
    h = h + msg
    pooled = np.zeros((x["graph_of"].max() + 1, h.shape[1]), np.float32)
    np.add.at(pooled, x["graph_of"], h)
    return pooled @ w[2].T + w[3]


def test_calling_and_predicting_a_batch_of_disjoint_graphs():
    rng = np.random.default_rng(0)
    m = _model()
    x = _batch(rng)
    assert [len(a) for a in x.values()] == [7, 14, 7]             # atoms, pairs (both ways), indicators
    want = _numpy_forward(m, x)
    np.testing.assert_allclose(np.asarray(m(x)), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(m.predict(x, verbose=0), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(m.predict_on_batch(x), want, rtol=1e-5, atol=1e-6)


@needs_torch
def test_train_on_batch_of_disjoint_graphs_steps_as_pytorch():
    rng = np.random.default_rng(1)
    m = _model(seed=1)
    m.compile(pg.optimizers.SGD(0.01), "mse")
    x, y = _batch(rng), rng.normal(size=(2, 1)).astype(np.float32)
    w = [torch.tensor(v.numpy(), dtype=torch.float64, requires_grad=True) for v in m.trainable_variables]
    loss = m.train_on_batch(x, y)
    h = torch.tanh(torch.tensor(x["atoms"], dtype=torch.float64) @ w[0].T + w[1])
    pairs = torch.tensor(x["pairs"], dtype=torch.long)
    h = h + torch.zeros_like(h).index_add(0, pairs[:, 0], h[pairs[:, 1]])
    pooled = torch.zeros(2, 4, dtype=torch.float64).index_add(0, torch.tensor(x["graph_of"], dtype=torch.long), h)
    tl = ((pooled @ w[2].T + w[3] - torch.tensor(y, dtype=torch.float64)) ** 2).mean()
    grads = torch.autograd.grad(tl, w)
    assert loss == pytest.approx(tl.item(), rel=1e-5)
    for v, t, g in zip(m.trainable_variables, w, grads):
        np.testing.assert_allclose(v.numpy(), (t - 0.01 * g).detach().numpy(), rtol=1e-5, atol=1e-6)
    assert m.test_on_batch(x, y) < loss                                # the step lowered it


def test_fit_evaluate_predict_on_a_generator_of_disjoint_graph_batches():
    rng = np.random.default_rng(2)
    sizes = [(3, 4), (5, 3), (4, 4), (3, 6)]
    batches = [(_batch(rng, s), rng.normal(size=(2, 1)).astype(np.float32)) for s in sizes]
    m = _model(seed=2)
    m.compile(pg.optimizers.Adam(0.02), "mse")

    class Molecules(pg.utils.PyDataset):               # keras-io's MPNN feeds a dataset of such batches
        def __len__(self):
            return len(batches)

        def __getitem__(self, i):
            return batches[i]

    def data():
        yield from batches
    before = m.evaluate(data(), verbose=0)
    hist = m.fit(Molecules(), epochs=30, verbose=0)
    after = m.evaluate(Molecules(), verbose=0)
    assert after < before / 2 and len(hist.history["loss"]) == 30
    got = m.predict((b[0] for b in batches), verbose=0)
    want = np.concatenate([_numpy_forward(m, b[0]) for b in batches])
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    # Keras's loss average weighs each batch by its first input's rows (atoms here)
    per_batch = [float(np.mean((_numpy_forward(m, bx) - by) ** 2)) for bx, by in batches]
    rows = [len(bx["atoms"]) for bx, _ in batches]
    assert m.evaluate(data(), verbose=0) == pytest.approx(np.average(per_batch, weights=rows), rel=1e-4)


def test_sample_weights_of_a_ragged_batch_go_with_the_targets():
    rng = np.random.default_rng(3)
    m = _model(seed=3)
    m.compile(pg.optimizers.SGD(0.0), "mse")
    x, y = _batch(rng), rng.normal(size=(2, 1)).astype(np.float32)
    sq = ((_numpy_forward(m, x) - y) ** 2).ravel()
    assert m.test_on_batch(x, y) == pytest.approx(sq.mean(), rel=1e-5)
    got = m.evaluate(iter([(x, y, np.array([1.0, 0.0], np.float32))]), verbose=0)
    assert got == pytest.approx(sq[0] / 2, rel=1e-5)            # Keras: sum(w * loss) / rows


def test_what_cannot_be_batched_or_does_not_match_is_refused():
    rng = np.random.default_rng(4)
    m = _model(seed=4)
    m.compile("adam", "mse")
    x, y = _batch(rng), rng.normal(size=(2, 1)).astype(np.float32)
    with pytest.raises(ValueError, match="whole batches"):
        m.fit(x, y, epochs=1, verbose=0)
    with pytest.raises(ValueError, match="whole batches"):
        m.evaluate(x, y, verbose=0)
    with pytest.raises(ValueError, match="rows|shape"):
        m.train_on_batch(x, rng.normal(size=(3, 1)).astype(np.float32))      # 3 targets for 2 graphs
    with pytest.raises(ValueError, match="sample_weight"):
        m.train_on_batch(x, y, sample_weight=np.ones(7, np.float32))         # weights go with the targets
