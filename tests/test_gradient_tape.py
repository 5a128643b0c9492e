"""pg.GradientTape: gradients of Python-written computations, checked against PyTorch
(same weights, same inputs) and hand-derived values; its values, its errors, and
optimizer steps on weights that no compiled model holds."""

import numpy as np
import pytest

import pyggml as pg
from pyggml import layers, ops

try:
    import torch
except ImportError:          # parity tests skip; the rest run
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")


def _mlp(seed=0):
    pg.set_seed(seed)
    return pg.Sequential([pg.Input(shape=(4,)), layers.Dense(6, activation="tanh"), layers.Dense(3)])


def _data(seed=1, n=8):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, 4)).astype(np.float32), rng.normal(size=(n, 3)).astype(np.float32)


@needs_torch
def test_mlp_gradients_match_pytorch():
    m = _mlp()
    x, y = _data()
    with pg.GradientTape() as tape:
        loss = ops.mean(ops.square(m(x, training=True) - y))
    grads = tape.gradient(loss, m.trainable_variables)
    w = [torch.tensor(v.numpy(), dtype=torch.float64, requires_grad=True) for v in m.trainable_variables]
    h = torch.tanh(torch.tensor(x, dtype=torch.float64) @ w[0].T + w[1])
    tl = ((h @ w[2].T + w[3] - torch.tensor(y, dtype=torch.float64)) ** 2).mean()
    tl.backward()
    assert float(loss) == pytest.approx(float(tl), rel=1e-5)
    for g, t in zip(grads, w):
        np.testing.assert_allclose(g, t.grad.numpy(), rtol=2e-4, atol=1e-6)


@needs_torch
def test_conv_model_gradients_and_input_gradient_match_pytorch():
    pg.set_seed(3)
    m = pg.Sequential([pg.Input(shape=(6, 6, 2)), layers.Conv2D(3, 3, padding="same", activation="relu"),
                       layers.Flatten(), layers.Dense(2)])
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4, 6, 6, 2)).astype(np.float32)
    with pg.GradientTape() as tape:
        tape.watch(x)
        out = m(x)
        target = ops.sum(ops.square(out))
    gk, gx = tape.gradient(target, [m.layers[0].trainable_variables[0], x])
    k = m.layers[0].trainable_variables[0].numpy()        # pyggml's (out, in, kh, kw), PyTorch's layout
    tx = torch.tensor(x.transpose(0, 3, 1, 2), dtype=torch.float64, requires_grad=True)
    tk = torch.tensor(k, dtype=torch.float64, requires_grad=True)
    tb = torch.tensor(m.layers[0].trainable_variables[1].numpy(), dtype=torch.float64)
    conv = torch.relu(torch.nn.functional.conv2d(tx, tk, tb, padding=1))
    flat = conv.permute(0, 2, 3, 1).reshape(4, -1)               # Flatten of channels-last
    dw, db = (torch.tensor(v.numpy(), dtype=torch.float64) for v in m.layers[2].trainable_variables)
    tt = ((flat @ dw.T + db) ** 2).sum()
    tt.backward()
    np.testing.assert_allclose(gk, tk.grad.numpy(), rtol=2e-4, atol=1e-5)
    np.testing.assert_allclose(gx, tx.grad.numpy().transpose(0, 2, 3, 1), rtol=2e-4, atol=1e-5)


def test_nonscalar_target_is_summed_and_output_gradients_weight_it():
    v = pg.Variable("v", (3,))
    v.assign(np.array([1.0, 2.0, 3.0], np.float32))
    with pg.GradientTape(persistent=True) as tape:
        y = ops.square(v.graph_tensor())                       # [1, 4, 9], dy/dv = 2v
    np.testing.assert_allclose(tape.gradient(y, v), [2.0, 4.0, 6.0])
    np.testing.assert_allclose(tape.gradient(y, v, output_gradients=np.array([1.0, 0.0, -1.0])), [2.0, 0.0, -6.0])
    jac = tape.jacobian(y, v)
    np.testing.assert_allclose(jac, np.diag([2.0, 4.0, 6.0]))


def test_unconnected_sources_give_none_or_zeros():
    a, b = _mlp(), _mlp(1)
    x, _ = _data()
    with pg.GradientTape(persistent=True) as tape:
        loss = ops.sum(a(x))
        b(x)                                                   # recorded, but not in the loss
    g = tape.gradient(loss, [a.trainable_variables[0], b.trainable_variables[0]])
    assert g[0] is not None and g[1] is None
    z = tape.gradient(loss, [b.trainable_variables[0]], unconnected_gradients="zero")[0]
    assert z.shape == b.trainable_variables[0].shape and not z.any()
    with pg.GradientTape() as tape2:
        const = ops.sum(ops.ones((2, 2)))                      # arrays: computed at once, not recorded
    assert tape2.gradient(const, a.trainable_variables) == [None] * 4


def test_values_are_readable_before_and_after_gradient_and_unchanged():
    m = _mlp()
    x, y = _data()
    with pg.GradientTape() as tape:
        out = m(x)
        loss = ops.mean(ops.square(out - y))
        early = float(loss)                                    # computed on this read
    np.testing.assert_allclose(np.asarray(out), m.predict(x, verbose=0), rtol=1e-5, atol=1e-6)
    tape.gradient(loss, m.trainable_variables)
    assert float(loss) == early
    assert f"{loss:.3f}" == f"{early:.3f}" and loss.item() == pytest.approx(early)
    assert ops.convert_to_numpy(out).shape == (8, 3)


def test_non_persistent_tape_computes_once_and_errors_are_clear():
    m = _mlp()
    x, y = _data()
    with pg.GradientTape() as tape:
        loss = ops.mean(m(x))
    tape.gradient(loss, m.trainable_variables)
    with pytest.raises(RuntimeError, match="persistent"):
        tape.gradient(loss, m.trainable_variables)
    with pytest.raises(RuntimeError, match="recorded nothing"):
        pg.GradientTape().gradient(loss, m.trainable_variables)
    with pg.GradientTape() as t2:
        l2 = ops.mean(m(x))
    with pytest.raises(TypeError, match="sources"):
        t2.gradient(l2, ["not a weight name"])
    with pytest.raises(ValueError, match="max_tensors"):
        pg.GradientTape(max_tensors=3)


def test_gradient_inside_the_with_block_as_older_keras_code_does():
    m = _mlp()
    x, y = _data()
    with pg.GradientTape() as tape:
        loss = ops.mean(ops.square(m(x) - y))
        grads = tape.gradient(loss, m.trainable_weights)
    assert [g.shape for g in grads] == [v.shape for v in m.trainable_variables]


def test_batchnorm_in_training_mode_updates_its_statistics_once():
    pg.set_seed(0)
    bn = layers.BatchNormalization(momentum=0.5)
    m = pg.Sequential([pg.Input(shape=(3,)), bn])
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    with pg.GradientTape() as tape:
        loss = ops.sum(m(x, training=True))
    tape.gradient(loss, m.trainable_variables)
    np.testing.assert_allclose(bn.variables[2].numpy(), 0.5 * x.mean(0), rtol=1e-5)
    with pg.GradientTape() as tape2:
        out = m(x)                                             # inference mode: no update
    np.asarray(out)
    assert tape2 is not None
    np.testing.assert_allclose(bn.variables[2].numpy(), 0.5 * x.mean(0), rtol=1e-5)


def test_dropout_mask_is_drawn_once_so_values_and_gradients_agree():
    pg.set_seed(0)
    m = pg.Sequential([pg.Input(shape=(50,)), layers.Dropout(0.5), layers.Dense(1, use_bias=False)])
    x = np.ones((1, 50), np.float32)
    with pg.GradientTape() as tape:
        out = m(x, training=True)
        first = float(out)
    g = tape.gradient(out, m.trainable_variables)[0]
    # d out / d w = the kept (and scaled) inputs; out = w . that
    w = m.trainable_variables[0].numpy().reshape(-1)
    assert float(out) == first
    assert float(np.dot(w, g.reshape(-1))) == pytest.approx(first, rel=1e-5)
    assert 0 < np.count_nonzero(g) < 50


def test_regularization_losses_are_tensors_on_the_tape():
    pg.set_seed(0)
    m = pg.Sequential([pg.Input(shape=(2,)), layers.Dense(2, kernel_regularizer=pg.regularizers.L2(0.5))])
    with pg.GradientTape() as tape:
        m(np.ones((1, 2), np.float32))
        penalty = m.losses[0]
    k = m.trainable_variables[0]
    np.testing.assert_allclose(tape.gradient(penalty, k), 2 * 0.5 * k.numpy(), rtol=1e-5)


def test_add_loss_in_a_layer_call_is_recorded():
    class Act(layers.Layer):
        def call(self, x):
            self.add_loss(ops.sum(ops.square(x)))
            return x

    pg.set_seed(0)
    d = layers.Dense(2)
    m = pg.Sequential([pg.Input(shape=(2,)), d, Act()])
    with pg.GradientTape() as tape:
        m(np.ones((1, 2), np.float32))
        extra = m.losses[0]
    w, b = d.trainable_variables
    out = np.ones((1, 2)) @ w.numpy().T + b.numpy()
    np.testing.assert_allclose(tape.gradient(extra, b), 2 * out.reshape(-1), rtol=1e-5)


def test_stop_recording_computes_at_once():
    m = _mlp()
    x, _ = _data()
    with pg.GradientTape() as tape:
        with tape.stop_recording():
            plain = m(x)
        assert isinstance(plain, np.ndarray)
        rec = m(x)
    assert isinstance(rec, pg.core.Tensor)


def test_an_op_without_a_backward_pass_is_refused_not_a_crash():
    v = pg.Variable("v", (4,), initializer="ones")
    with pg.GradientTape() as tape:
        s = ops.argmax(ops.reshape(v.graph_tensor(), (1, 4)), axis=-1)
    assert tape.gradient(s, v) is None                       # an int result: nothing to differentiate


def test_sgd_step_on_weights_of_an_uncompiled_model_is_exact():
    m = _mlp()
    x, y = _data()
    before = [v.numpy().copy() for v in m.trainable_variables]
    with pg.GradientTape() as tape:
        loss = ops.mean(ops.square(m(x) - y))
    grads = tape.gradient(loss, m.trainable_weights)
    pg.optimizers.SGD(0.1).apply_gradients(zip(grads, m.trainable_weights))
    for b, g, v in zip(before, grads, m.trainable_variables):
        np.testing.assert_allclose(v.numpy(), b - 0.1 * g, rtol=1e-6, atol=1e-7)


def test_adam_state_carries_over_between_custom_steps_and_the_model_still_predicts_and_fits():
    m = _mlp()
    x, y = _data()
    opt = pg.optimizers.Adam(0.01)
    losses = []
    for _ in range(30):
        with pg.GradientTape() as tape:
            loss = ops.mean(ops.square(m(x, training=True) - y))
        opt.apply_gradients(zip(tape.gradient(loss, m.trainable_variables), m.trainable_variables))
        losses.append(float(loss))
    assert opt.iterations == 30 and losses[-1] < 0.7 * losses[0]
    trained = m.predict(x, verbose=0)
    np.testing.assert_allclose(float(np.mean((trained - y) ** 2)), losses[-1], rtol=0.2)
    m.compile(optimizer="sgd", loss="mse")                   # the weights move to the model's device
    np.testing.assert_allclose(m.predict(x, verbose=0), trained, rtol=1e-5, atol=1e-6)
    m.fit(x, y, epochs=1, verbose=0)


def test_apply_gradients_with_no_gradient_at_all_is_refused():
    m = _mlp()
    with pytest.raises(ValueError, match="no gradients"):
        pg.optimizers.SGD().apply_gradients([(None, v) for v in m.trainable_variables])


def test_tensor_number_conversions():
    with pg.GradientTape() as tape:
        t = ops.sum(layers.Dense(1, kernel_initializer="ones", use_bias=False)(np.ones((1, 3), np.float32)))
    assert float(t) == 3.0 and int(t) == 3 and tape is not None
    with pg.GradientTape():
        many = layers.Dense(2)(np.ones((2, 2), np.float32))
    with pytest.raises(TypeError, match="one element"):
        float(many)


def test_a_gradient_inside_another_recording_tape_is_recorded_not_silently_constant():
    # the outer tape differentiates it again (second order: tests/test_second_order.py)
    m = _mlp()
    x, _ = _data()
    with pg.GradientTape() as outer:
        with pg.GradientTape(persistent=True) as inner:
            inner.watch(x)
            out = ops.sum(m(x))
        g = inner.gradient(out, x)
        assert isinstance(g, pg.core.Tensor)
        loss = ops.sum(m(x)) + ops.sum(ops.square(g))
    with_penalty = outer.gradient(loss, m.trainable_variables)[0]
    assert with_penalty.shape == (6, 4)
    np.testing.assert_allclose(inner.gradient(out, x), np.asarray(g), rtol=1e-6)   # after the block: numbers
    with pg.GradientTape() as plain:
        loss = ops.sum(m(x))
    assert np.abs(np.asarray(with_penalty) - np.asarray(plain.gradient(loss, m.trainable_variables)[0])).max() > 1e-3


def test_mixing_two_tapes_gives_their_values_not_garbage():
    # as Keras's eager tensors: each tape's tensor is a value to the other (image_captioning's
    # batch_loss += loss over a tape per caption)
    m = _mlp()
    x, _ = _data()
    with pg.GradientTape() as a:
        ta = m(x)
    with pg.GradientTape():
        tb = m(x)
    np.testing.assert_allclose(np.asarray(ta + tb), 2 * m.predict(x, verbose=0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(ta), m.predict(x, verbose=0), rtol=1e-5, atol=1e-6)   # a still works
    assert a is not None


def test_tape_tensors_outlive_the_tape_object_and_read_from_threads():
    import gc
    import threading
    m = _mlp()
    x, _ = _data()

    def record():
        with pg.GradientTape():
            return ops.sum(m(x))
    total = record()
    gc.collect()
    got = []
    threads = [threading.Thread(target=lambda: got.append(float(total))) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(got)) == 1 and got[0] == pytest.approx(float(np.sum(m.predict(x, verbose=0))), rel=1e-5)


def test_a_tape_picks_its_threads_by_the_work_of_its_graph(monkeypatch):
    """A tape's compute runs on the count a ThreadChooser picks for its graph, as a model's
    executor does: a tiny graph (an actor-critic step on one state) on one thread even
    when two are allowed; a large one gets a chooser with its real work (multiply-adds of
    a forward pass), and the gradients are the same on any count."""
    from pyggml import autodiff
    from pyggml.models.thread_policy import SMALL_WORK, ThreadChooser
    made = []

    class Recording(ThreadChooser):
        def pick(self):
            n = super().pick()
            made.append((self.work, n))
            return n

    monkeypatch.setattr(autodiff, "THREAD_CHOOSER", [Recording])
    monkeypatch.setattr(autodiff, "_choosers", {})
    from pyggml.core import n_threads_adaptive, n_threads_is_set
    old = (pg.get_n_threads() if n_threads_is_set() else None, n_threads_adaptive())
    pg.set_n_threads(2)
    try:
        model, (x, y) = _mlp(), _data(n=1)
        grads = []
        for _ in range(3):
            with pg.GradientTape() as tape:
                loss = ops.mean((model(x) - y) ** 2)
            grads.append(tape.gradient(loss, model.trainable_variables))
        assert made and all(n == 1 for _, n in made), made
        assert len(autodiff._choosers) == 1            # one graph shape, one chooser across steps
        for g in grads[1:]:
            for a, b in zip(g, grads[0]):
                np.testing.assert_array_equal(a, b)
        made.clear()
        pg.set_seed(3)
        big = pg.Sequential([pg.Input(shape=(256,)), layers.Dense(512)])
        xb = np.random.default_rng(0).random((256, 256)).astype(np.float32)
        with pg.GradientTape() as tape:
            loss = ops.mean(big(xb) ** 2)
        tape.gradient(loss, big.trainable_variables)
        work = made[-1][0]
        assert work >= 256 * 256 * 512 > SMALL_WORK, work
    finally:
        pg.set_n_threads(old[0], adaptive=old[1])


def test_graph_work_and_node_hashes():
    from pyggml.core import Context, Graph, ops as cops
    ctx = Context(n_tensors=16, graph_size=16)
    a = ctx.new_tensor((4, 3))            # ggml [3, 4]: 4 rows of 3
    b = ctx.new_tensor((5, 3))
    p = cops.mul_mat(a, b, ctx=ctx)       # 5 x 4 outputs, each a sum of 3 products
    s = cops.add(p, p, ctx=ctx)
    g = Graph(ctx, size=16)
    g.build_forward(s)
    assert g.work() == 20 * 3 + 20
    assert g.node_hashes() == [hash(t) for t in g.nodes()]


def test_a_very_large_tape_computes_on_a_scheduler_it_does_not_keep():
    """Tapes share one scheduler; a graph beyond its size limit gets one of its own, freed
    after the compute, so one huge tape does not leave huge tables behind."""
    from pyggml import autodiff
    x = np.full((2,), 0.5, np.float32)
    with pg.GradientTape() as tape:
        tape.watch(x)
        y = ops.multiply(x, 1.0)
        for _ in range(7000):                       # 5 x 7,000 nodes: past the shared limit
            y = y + 0.001
    (g,) = tape.gradient(ops.sum(y), [x])
    np.testing.assert_allclose(g, np.ones(2), rtol=1e-6)
    assert float(ops.sum(y)) == pytest.approx(2 * 7.5, rel=1e-4)
    assert autodiff._sched[1] <= autodiff._KEEP_SCHED
    with pg.GradientTape() as tape:                 # the shared one serves small tapes after it
        tape.watch(x)
        z = ops.sum(ops.multiply(x, x))
    np.testing.assert_allclose(tape.gradient(z, x), 2 * x)


@needs_torch
@pytest.mark.parametrize("name", ["square", "exp_mean", "softmax", "matmul", "mul_add", "mean_axis", "max",
                                  "log_softmax"])
def test_pyggml_ops_on_a_watched_array_are_recorded(name):
    """``tape.watch(x)`` on an array, then Keras's ops on that array itself (no layer in
    between): each op is recorded with x as the source, and the gradient is PyTorch's.
    (Before, ops on arrays computed at once even on a tape, and the gradient was None.)"""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 4)).astype(np.float32)
    w = rng.normal(size=(4, 2)).astype(np.float32)
    ours = {"square": lambda x: ops.sum(ops.square(x)), "exp_mean": lambda x: ops.mean(ops.exp(x)),
            "softmax": lambda x: ops.sum(ops.softmax(x) * np.arange(4, dtype=np.float32)),
            "matmul": lambda x: ops.sum(ops.matmul(x, w) ** 2),
            "mul_add": lambda x: ops.sum(ops.add(ops.multiply(x, x), x)),
            "mean_axis": lambda x: ops.sum(ops.mean(x, axis=0) ** 2), "max": lambda x: ops.sum(ops.max(x, axis=1)),
            "log_softmax": lambda x: ops.sum(ops.log_softmax(x)[:, 0])}[name]
    theirs = {"square": lambda t: (t * t).sum(), "exp_mean": lambda t: t.exp().mean(),
              "softmax": lambda t: (t.softmax(-1) * torch.arange(4.0)).sum(),
              "matmul": lambda t: ((t @ torch.from_numpy(w)) ** 2).sum(), "mul_add": lambda t: (t * t + t).sum(),
              "mean_axis": lambda t: (t.mean(0) ** 2).sum(), "max": lambda t: t.max(1).values.sum(),
              "log_softmax": lambda t: t.log_softmax(-1)[:, 0].sum()}[name]
    with pg.GradientTape() as tape:
        tape.watch(x)
        y = ours(x)
    g = tape.gradient(y, x)
    t = torch.tensor(x, requires_grad=True)
    ty = theirs(t)
    ty.backward()
    assert float(y) == pytest.approx(ty.item(), rel=1e-5, abs=1e-6)
    np.testing.assert_allclose(g, t.grad.numpy(), rtol=1e-5, atol=1e-6)
    # the array itself is not changed, and ops on it outside the tape compute at once
    assert isinstance(ops.square(x), np.ndarray)
