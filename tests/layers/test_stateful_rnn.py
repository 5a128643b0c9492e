"""Keras's stateful=True recurrent layers: a sequence fed in chunks equals the whole
sequence at once (LSTM, GRU, SimpleRNN, RNN(cell), against the stateless layer and
PyTorch), reset_states, training through fit/train_on_batch against a hand-rolled
reference through initial_state, evaluate/predict, eager calls, Bidirectional, saving
(the states are not saved, as Keras) and the errors."""

import numpy as np
import pytest

import pyggml as pg

L = pg.layers
B, T, F, U = 3, 8, 4, 5
CHUNK = 2
KINDS = ["LSTM", "GRU", "SimpleRNN"]
CELLS = {"LSTM": "LSTMCell", "GRU": "GRUCell", "SimpleRNN": "SimpleRNNCell"}


def _x(seed=0, steps=T, batch=B):
    return np.random.default_rng(seed).standard_normal((batch, steps, F)).astype(np.float32)


def _recurrent(kind, cell, **kw):
    """A recurrent layer named "rec": the layer itself, or RNN(its cell)."""
    if cell:
        return L.RNN(getattr(L, CELLS[kind])(U), name="rec", **kw)
    return getattr(L, kind)(U, name="rec", **kw)


def _rec_weights(model):
    """The recurrent layer's weights by their own names (weight_ih, ...), whichever form."""
    return {k.split(".")[-1]: v for k, v in model.get_weights().items() if k.startswith("rec.")}


def _set_rec_weights(model, weights):
    names = [k for k in model.get_weights() if k.startswith("rec.")]
    model.set_weights({k: weights[k.split(".")[-1]] for k in names})


def _chunks(x):
    return [x[:, i:i + CHUNK] for i in range(0, x.shape[1], CHUNK)]


def _stateful_model(kind, cell=False, return_sequences=True, functional=False, **kw):
    layer = _recurrent(kind, cell, stateful=True, return_sequences=return_sequences, **kw)
    if functional:
        inp = pg.Input((CHUNK, F), batch_size=B)
        m = pg.Model(inp, layer(inp))
    else:
        m = pg.Sequential([pg.Input(batch_shape=(B, CHUNK, F)), layer])
    return m.compile(loss="mse"), layer


def _whole_model(kind, return_sequences=True):
    m = pg.Sequential([pg.Input((T, F)), _recurrent(kind, False, return_sequences=return_sequences)])
    return m.compile(loss="mse")


# --- chunks equal the whole sequence ------------------------------------------------------------
@pytest.mark.parametrize("functional", [False, True])
@pytest.mark.parametrize("cell", [False, True], ids=["layer", "rnn_cell"])
@pytest.mark.parametrize("kind", KINDS)
def test_chunks_equal_the_whole_sequence(kind, cell, functional):
    x = _x()
    st, layer = _stateful_model(kind, cell, functional=functional)
    whole = _whole_model(kind)
    _set_rec_weights(whole, _rec_weights(st))
    want = whole.predict(x)
    got = np.concatenate([st.predict(c, batch_size=B) for c in _chunks(x)], axis=1)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    # the states hold the last step's: h is the last output
    np.testing.assert_allclose(layer.states[0].numpy(), want[:, -1], rtol=1e-5, atol=1e-6)
    # a second pass continues from there: not the same as the first
    again = st.predict(_chunks(x)[0])
    assert np.abs(again - want[:, :CHUNK]).max() > 1e-3


@pytest.mark.parametrize("kind", KINDS)
def test_chunks_match_pytorch_on_the_whole_sequence(kind):
    torch = pytest.importorskip("torch")
    x = _x(1)
    st, layer = _stateful_model(kind, return_sequences=False)
    w = _rec_weights(st)
    mod = {"LSTM": torch.nn.LSTM, "GRU": torch.nn.GRU, "SimpleRNN": torch.nn.RNN}[kind](F, U, batch_first=True)
    mod = mod.double()
    with torch.no_grad():
        for k in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            getattr(mod, k + "_l0").copy_(torch.from_numpy(w[k].astype(np.float64)))
        y, _ = mod(torch.from_numpy(x.astype(np.float64)))
    got = [st.predict(c) for c in _chunks(x)]
    np.testing.assert_allclose(got[-1], y[:, -1].numpy(), rtol=1e-4, atol=1e-5)
    # each chunk's output is the whole sequence's at that chunk's last step
    for k, g in enumerate(got):
        np.testing.assert_allclose(g, y[:, (k + 1) * CHUNK - 1].numpy(), rtol=1e-4, atol=1e-5)


def test_stacked_cells_keep_every_cells_states():
    x = _x(2)
    cells = [L.LSTMCell(U), L.GRUCell(3)]
    layer = L.RNN(cells, stateful=True, return_sequences=True, name="rec")
    st = pg.Sequential([pg.Input((CHUNK, F), batch_size=B), layer]).compile(loss="mse")
    whole = pg.Sequential([pg.Input((T, F)), L.RNN([L.LSTMCell(U), L.GRUCell(3)], return_sequences=True,
                                                  name="rec")]).compile(loss="mse")
    whole.set_weights({k: v for k, v in st.get_weights().items()})
    got = np.concatenate([st.predict(c) for c in _chunks(x)], axis=1)
    np.testing.assert_allclose(got, whole.predict(x), rtol=1e-5, atol=1e-6)
    assert [tuple(s.shape) for s in layer.states] == [(B, U), (B, U), (B, 3)]


def test_padding_mask_keeps_the_state_of_padded_steps():
    x = _x(3)
    x[:, 5:] = 0.0
    st = pg.Sequential([pg.Input(batch_shape=(B, CHUNK, F)), L.Masking(0.0),
                        L.LSTM(U, stateful=True, name="rec")]).compile(loss="mse")
    whole = pg.Sequential([pg.Input((T, F)), L.Masking(0.0), L.LSTM(U, name="rec")]).compile(loss="mse")
    _set_rec_weights(whole, _rec_weights(st))
    got = [st.predict(c) for c in _chunks(x)]
    np.testing.assert_allclose(got[-1], whole.predict(x), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[-1], got[-2], rtol=0, atol=0)          # steps 6 and 7 are padding


# --- states and reset_states ------------------------------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
def test_reset_states_restarts(kind):
    x = _x(4)
    st, layer = _stateful_model(kind)
    first = st.predict(_chunks(x)[0])
    st.predict(_chunks(x)[1])
    assert np.abs(layer.states[0].numpy()).max() > 0
    layer.reset_states()
    for s in layer.states:
        np.testing.assert_array_equal(s.numpy(), np.zeros((B, U), np.float32))
    np.testing.assert_allclose(st.predict(_chunks(x)[0]), first, rtol=0, atol=0)
    st.reset_states()                                              # the model's form
    np.testing.assert_allclose(st.predict(_chunks(x)[0]), first, rtol=0, atol=0)


@pytest.mark.parametrize("kind", KINDS)
def test_reset_states_to_given_values_equals_initial_state(kind):
    x = _x(5)[:, :CHUNK]
    st, layer = _stateful_model(kind)
    n = 2 if kind == "LSTM" else 1
    rng = np.random.default_rng(9)
    values = [rng.standard_normal((B, U)).astype(np.float32) for _ in range(n)]
    layer.reset_states(values)
    for s, v in zip(layer.states, values):
        np.testing.assert_array_equal(s.numpy(), v)
    got = st.predict(x)
    inp, states = pg.Input((CHUNK, F)), [pg.Input((U,)) for _ in range(n)]
    ref_layer = _recurrent(kind, False, return_sequences=True)
    ref = pg.Model([inp] + states, ref_layer(inp, initial_state=states)).compile(loss="mse")
    _set_rec_weights(ref, _rec_weights(st))
    np.testing.assert_allclose(got, ref.predict([x] + values), rtol=1e-5, atol=1e-6)


def test_states_are_not_weights():
    st, layer = _stateful_model("LSTM")
    assert [tuple(s.shape) for s in layer.states] == [(B, U), (B, U)]
    assert all(not s.trainable for s in layer.states)
    names = list(st.get_weights())
    assert not any("state" in n for n in names)
    assert st.count_params() == 4 * U * (F + U) + 8 * U
    assert len(layer.weights) == 4
    assert L.LSTM(U).states is None                      # not stateful: none
    L.LSTM(U).reset_states()                             # and nothing to reset


def test_states_known_before_the_first_batch_from_the_input():
    layer = L.GRU(U, stateful=True)
    pg.Model(*(lambda i: (i, layer(i)))(pg.Input((CHUNK, F), batch_size=4)))
    assert [tuple(s.shape) for s in layer.states] == [(4, U)]
    # batch_input_shape on the first layer of a Sequential (Keras 2's form)
    first = L.SimpleRNN(U, stateful=True, batch_input_shape=(2, CHUNK, F))
    m = pg.Sequential([first]).compile(loss="mse")
    assert first.get_config()["batch_input_shape"] == (2, CHUNK, F)
    m.predict(_x(0, CHUNK, 2))
    assert tuple(first.states[0].shape) == (2, U)


def test_summary_shows_the_fixed_batch_size():
    st, _ = _stateful_model("LSTM")
    lines = []
    st.summary(print_fn=lines.append)
    assert f"({B}, {CHUNK}, {U})" in lines[0]


def test_without_a_declared_batch_the_first_batch_fixes_it():
    layer = L.LSTM(U, stateful=True)
    m = pg.Sequential([pg.Input((CHUNK, F)), layer]).compile(loss="mse")
    assert layer.states is None
    m.predict(_x(0, CHUNK, 2))
    assert tuple(layer.states[0].shape) == (2, U)
    with pytest.raises(ValueError, match="exactly 2 rows"):
        m.predict(_x(0, CHUNK, 3))


# --- training ----------------------------------------------------------------------------------------
def _train_pair(kind, lr=0.1):
    """A stateful model and its hand-rolled twin: the stateless layer through initial_state,
    with a twin computing the final states (return_state)."""
    n = 2 if kind == "LSTM" else 1
    st = pg.Sequential([pg.Input(batch_shape=(B, CHUNK, F)), _recurrent(kind, False, stateful=True),
                        L.Dense(1, name="head")]).compile(optimizer=pg.optimizers.SGD(lr), loss="mse")
    inp, states = pg.Input((CHUNK, F)), [pg.Input((U,)) for _ in range(n)]
    h = _recurrent(kind, False)(inp, initial_state=states)
    ref = pg.Model([inp] + states, L.Dense(1, name="head")(h))
    ref.compile(optimizer=pg.optimizers.SGD(lr), loss="mse")
    ref.set_weights(st.get_weights())
    inp2, states2 = pg.Input((CHUNK, F)), [pg.Input((U,)) for _ in range(n)]
    outs = _recurrent(kind, False, return_state=True)(inp2, initial_state=states2)
    stepper = pg.Model([inp2] + states2, outs[1:]).compile(loss="mse")
    return st, ref, stepper, n


@pytest.mark.parametrize("kind", KINDS)
def test_train_on_batch_equals_a_hand_rolled_reference(kind):
    x = _x(6)
    y = np.random.default_rng(7).standard_normal((B, T // CHUNK, 1)).astype(np.float32)
    st, ref, stepper, n = _train_pair(kind)
    states = [np.zeros((B, U), np.float32) for _ in range(n)]
    for k, c in enumerate(_chunks(x)):
        _set_rec_weights(stepper, _rec_weights(ref))
        nxt = stepper.predict([c] + states)
        nxt = nxt if isinstance(nxt, list) else [nxt]
        want = ref.train_on_batch([c] + states, y[:, k])
        got = st.train_on_batch(c, y[:, k])
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        states = nxt
    for name, w in ref.get_weights().items():
        np.testing.assert_allclose(st.get_weights()[name], w, rtol=1e-4, atol=1e-6, err_msg=name)
    np.testing.assert_allclose(st.get_layer("rec").states[0].numpy(), states[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_fit_without_shuffle_is_train_on_batch_chunk_after_chunk(kind):
    x = _x(8)
    y = np.random.default_rng(9).standard_normal((B, T // CHUNK, 1)).astype(np.float32)
    # Keras's layout for stateful fit: batch k holds chunk k of every sequence
    xs = np.concatenate(_chunks(x), axis=0)
    ys = np.concatenate([y[:, k] for k in range(T // CHUNK)], axis=0)
    a, _, _, _ = _train_pair(kind)
    b, _, _, _ = _train_pair(kind)
    b.set_weights(a.get_weights())
    hist = a.fit(xs, ys, batch_size=B, shuffle=False, epochs=1, verbose=0)
    losses = [b.train_on_batch(c, y[:, k]) for k, c in enumerate(_chunks(x))]
    np.testing.assert_allclose(hist.history["loss"][0], np.mean(losses), rtol=1e-5)
    for name, w in b.get_weights().items():
        np.testing.assert_allclose(a.get_weights()[name], w, rtol=1e-4, atol=1e-6, err_msg=name)


def test_fit_trains_a_task_that_needs_the_carried_state():
    # the target of each chunk is the first value of the whole sequence: only the state knows it
    rng = np.random.default_rng(10)
    batch, chunks = 8, 4
    seqs = rng.choice([-1.0, 1.0], size=(batch, chunks * CHUNK, 1)).astype(np.float32)
    xs = np.concatenate([seqs[:, i:i + CHUNK] for i in range(0, chunks * CHUNK, CHUNK)], axis=0)
    ys = np.tile(seqs[:, 0], (chunks, 1))
    pg.set_seed(1)
    m = pg.Sequential([pg.Input(batch_shape=(batch, CHUNK, 1)), L.LSTM(16, stateful=True),
                       L.Dense(1)]).compile(optimizer=pg.optimizers.Adam(0.02), loss="mse")

    class Reset(pg.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.model.reset_states()
    hist = m.fit(xs, ys, batch_size=batch, shuffle=False, epochs=60, verbose=0, callbacks=[Reset()])
    assert hist.history["loss"][-1] < 0.1 * hist.history["loss"][0]
    m.reset_states()
    pred = np.concatenate([m.predict(xs[k * batch:(k + 1) * batch], batch_size=batch) for k in range(chunks)])
    assert np.mean((pred - ys) ** 2) < 0.1


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_evaluate_and_predict_on_batch_carry_the_state(kind):
    x = _x(11)
    y = np.random.default_rng(12).standard_normal((B, T, U)).astype(np.float32)
    st, _ = _stateful_model(kind)
    whole = _whole_model(kind)
    _set_rec_weights(whole, _rec_weights(st))
    want = whole.predict(x)
    for k, c in enumerate(_chunks(x)):
        sl = slice(k * CHUNK, (k + 1) * CHUNK)
        loss = st.evaluate(c, y[:, sl], batch_size=B, verbose=0)
        np.testing.assert_allclose(loss, np.mean((want[:, sl] - y[:, sl]) ** 2), rtol=1e-5)
    st.reset_states()
    got = np.concatenate([st.predict_on_batch(c) for c in _chunks(x)], axis=1)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    st.reset_states()
    got = np.concatenate([st(c) for c in _chunks(x)], axis=1)                # the model called on arrays
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_trainer_steps_carry_the_state():
    st, ref, stepper, n = _train_pair("GRU")
    x = _x(13)
    y = np.zeros((B, 1), np.float32)
    tr = pg.Trainer(st, batch_size=B)
    states = [np.zeros((B, U), np.float32)]
    for c in _chunks(x):
        _set_rec_weights(stepper, _rec_weights(ref))
        nxt = stepper.predict([c] + states)
        nxt = nxt if isinstance(nxt, list) else [nxt]
        np.testing.assert_allclose(tr.step(c, y), ref.train_on_batch([c] + states, y), rtol=1e-5, atol=1e-6)
        states = nxt
    tr.free()


# --- eager calls and Bidirectional --------------------------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
def test_eager_calls_continue_from_the_states(kind):
    x = _x(14)
    layer = getattr(L, kind)(U, stateful=True, return_sequences=True)
    got = np.concatenate([layer(c) for c in _chunks(x)], axis=1)
    plain = getattr(L, kind)(U, return_sequences=True)
    plain(x)
    plain.set_weights(layer.get_weights())
    np.testing.assert_allclose(got, plain(x), rtol=1e-5, atol=1e-6)
    layer.reset_states()
    np.testing.assert_allclose(layer(_chunks(x)[0]), got[:, :CHUNK], rtol=0, atol=0)
    with pytest.raises(ValueError, match=f"batch size {B}"):
        layer(x[:2, :CHUNK])


def test_bidirectional_of_stateful_layers():
    x = _x(15)
    bi = L.Bidirectional(L.LSTM(U, stateful=True), name="bi")
    assert bi.stateful
    inp = pg.Input(batch_shape=(B, CHUNK, F))
    m = pg.Model(inp, bi(inp)).compile(loss="mse")
    assert [tuple(s.shape) for s in bi.states] == [(B, U)] * 4
    # the hand-rolled twin: each direction starts from the last chunk's final states
    inp2, states = pg.Input((CHUNK, F)), [pg.Input((U,)) for _ in range(4)]
    twin = L.Bidirectional(L.LSTM(U, return_state=True), name="bi")
    ref = pg.Model([inp2] + states, twin(inp2, initial_state=states)).compile(loss="mse")
    ref.set_weights(m.get_weights())
    s = [np.zeros((B, U), np.float32)] * 4
    for c in _chunks(x):
        out, *s = ref.predict([c] + s)
        np.testing.assert_allclose(m.predict(c), out, rtol=1e-5, atol=1e-6)
    for a, b in zip(bi.states, s):
        np.testing.assert_allclose(a.numpy(), b, rtol=1e-5, atol=1e-6)
    m.reset_states()
    assert all(np.abs(a.numpy()).max() == 0 for a in bi.states)
    bi.reset_states(s)
    np.testing.assert_allclose(bi.states[3].numpy(), s[3])
    with pytest.raises(ValueError, match="4 states"):
        bi.reset_states(s[:2])
    with pytest.raises(ValueError, match="same stateful"):
        L.Bidirectional(L.GRU(U, stateful=True), backward_layer=L.GRU(U, go_backwards=True))
    # a backward layer of its own, stateful too
    own = L.Bidirectional(L.GRU(U, stateful=True), backward_layer=L.GRU(U, go_backwards=True, stateful=True))
    inp = pg.Input(batch_shape=(B, CHUNK, F))
    m2 = pg.Model(inp, own(inp)).compile(loss="mse")
    first = m2.predict(_chunks(x)[0])
    assert np.abs(m2.predict(_chunks(x)[0]) - first).max() > 1e-4
    m2.reset_states()
    np.testing.assert_allclose(m2.predict(_chunks(x)[0]), first, rtol=0, atol=0)


# --- saving ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("ext", [".gguf", ".keras"])
def test_save_and_load_keep_the_setting_not_the_states(tmp_path, ext):
    x = _x(16)
    st, layer = _stateful_model("LSTM")
    fresh = st.predict(_chunks(x)[0])
    st.predict(_chunks(x)[1])                      # the states move on
    path = str(tmp_path / f"m{ext}")
    st.save(path)
    back = pg.load_model(path)
    rec = back.get_layer("rec")
    assert rec.stateful and rec.get_config()["stateful"] is True
    assert rec.expected_batch_size == B
    # as Keras: the states are not in the file; the loaded model starts from zeros
    np.testing.assert_allclose(back.predict(_chunks(x)[0]), fresh, rtol=1e-6, atol=1e-7)
    assert not any("state" in k for k in back.get_weights())
    with pytest.raises(ValueError, match=f"exactly {B} rows"):
        back.predict(x[:1, :CHUNK])


def test_config_round_trips():
    for layer in (L.LSTM(U, stateful=True), L.GRU(U, stateful=True), L.SimpleRNN(U, stateful=True),
                  L.RNN(L.LSTMCell(U), stateful=True), L.Bidirectional(L.GRU(U, stateful=True))):
        cfg = layer.get_config()
        again = type(layer).from_config(cfg)
        assert again.stateful and again.get_config() == cfg
    assert L.LSTM(U).get_config()["stateful"] is False
    inp = pg.Input((CHUNK, F), batch_size=B)
    m = pg.Model(inp, L.LSTM(U, stateful=True)(inp))
    again = pg.Model.from_config(m.get_config())
    assert again.layers[0].get_config()["batch_shape"] == (B, CHUNK, F)
    assert again.layers[1].expected_batch_size == B
    seq = pg.Sequential([pg.Input(batch_shape=(B, CHUNK, F)), L.GRU(U, stateful=True)])
    assert pg.Sequential.from_config(seq.get_config()).get_config() == seq.get_config()


# --- errors ---------------------------------------------------------------------------------------------
def test_a_wrong_batch_size_names_the_expected_one():
    st, layer = _stateful_model("LSTM")
    x = _x(17, steps=CHUNK, batch=2 * B)
    with pytest.raises(ValueError, match=f"batch size {B}.*exactly {B} rows"):
        st.predict(x[:2])
    with pytest.raises(ValueError, match=f"exactly {B} rows"):
        st.predict(x)                                 # one batch of 6 (the default batch size is 32)
    with pytest.raises(ValueError, match=f"exactly {B} rows"):
        st.predict(x[:B + 1], batch_size=B)           # a short last batch is refused, not padded
    with pytest.raises(ValueError, match=f"exactly {B} rows"):
        st.fit(x, np.zeros((2 * B, CHUNK, U), np.float32), verbose=0)
    with pytest.raises(ValueError, match=f"exactly {B} rows"):
        st.evaluate(x[:1], np.zeros((1, CHUNK, U), np.float32), verbose=0)
    with pytest.raises(ValueError, match=f"exactly {B} rows"):
        st.train_on_batch(x[:2], np.zeros((2, CHUNK, U), np.float32))
    # the model still works with the right batch size
    assert st.predict(x[:B]).shape == (B, CHUNK, U)
    st.fit(x, np.zeros((2 * B, CHUNK, U), np.float32), batch_size=B, shuffle=False, verbose=0)


def test_bad_arguments():
    with pytest.raises(TypeError, match="stateful"):
        L.LSTM(U, stateful="yes")
    with pytest.raises(TypeError, match="stateful"):
        L.RNN(L.GRUCell(U), stateful=2)
    with pytest.raises(ValueError, match="batch_size"):
        pg.Input((CHUNK, F), batch_size=0)
    with pytest.raises(ValueError, match="disagree"):
        pg.Input((CHUNK, F), batch_shape=(B, CHUNK, F + 1))
    with pytest.raises(ValueError, match="disagree"):
        pg.Input(batch_shape=(B, CHUNK, F), batch_size=B + 1)
    with pytest.raises(ValueError, match="batch size"):
        L.LSTM(U, batch_input_shape=(0, CHUNK, F))
    st, layer = _stateful_model("LSTM")
    with pytest.raises(ValueError, match="2 states"):
        layer.reset_states([np.zeros((B, U))])
    with pytest.raises(ValueError, match=rf"\({B}, {U}\)"):
        layer.reset_states([np.zeros((B + 1, U)), np.zeros((B + 1, U))])
    with pytest.raises(TypeError, match="numbers"):
        layer.reset_states([np.array([["a"] * U] * B), np.zeros((B, U))])
    with pytest.raises(ValueError, match="not stateful"):
        L.GRU(U).reset_states([np.zeros((B, U))])
    # a stateful layer made for one batch size cannot join a model of another
    shared = L.GRU(U, stateful=True)
    pg.Model(*(lambda i: (i, shared(i)))(pg.Input((CHUNK, F), batch_size=2)))
    with pytest.raises(ValueError, match="batch size 5"):
        shared(pg.Input((CHUNK, F), batch_size=5))
