"""Keras's return_state and initial_state on LSTM, GRU, SimpleRNN and Bidirectional:
the states against PyTorch's modules, gradients through a state handed from an
encoder to a decoder (keras-io's lstm_seq2seq pattern), masks, saving, bad calls."""

import numpy as np
import pytest

import pyggml as pg

L = pg.layers
B, T, F, U = 3, 5, 4, 6


def _arrays(seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((B, T, F)).astype(np.float32), rng.standard_normal((B, U)).astype(np.float32),
            rng.standard_normal((B, U)).astype(np.float32))


def _torch_twin(torch, kind, weights, name):
    mod = {"LSTM": torch.nn.LSTM, "GRU": torch.nn.GRU, "SimpleRNN": torch.nn.RNN}[kind](F, U, batch_first=True)
    with torch.no_grad():
        for k in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            getattr(mod, k + "_l0").copy_(torch.from_numpy(weights[f"{name}.{k}"]))
    return mod


@pytest.mark.parametrize("return_sequences", [False, True])
@pytest.mark.parametrize("kind", ["LSTM", "GRU", "SimpleRNN"])
def test_states_in_and_out_match_pytorch(kind, return_sequences):
    torch = pytest.importorskip("torch")
    x, h0, c0 = _arrays()
    n = 2 if kind == "LSTM" else 1
    inp, states = pg.Input((T, F)), [pg.Input((U,)) for _ in range(n)]
    layer = getattr(L, kind)(U, return_sequences=return_sequences, return_state=True)
    outs = layer(inp, initial_state=states)
    assert isinstance(outs, list) and len(outs) == 1 + n
    m = pg.Model([inp] + states, outs).compile(loss="mse")
    got = m.predict([x, h0, c0][:1 + n])
    t = _torch_twin(torch, kind, m.get_weights(), layer.name)
    with torch.no_grad():
        if kind == "LSTM":
            y, (hn, cn) = t(torch.from_numpy(x), (torch.from_numpy(h0)[None], torch.from_numpy(c0)[None]))
            want = [y, hn[0], cn[0]]
        else:
            y, hn = t(torch.from_numpy(x), torch.from_numpy(h0)[None])
            want = [y, hn[0]]
    if not return_sequences:
        want[0] = want[0][:, -1]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-4, atol=1e-5)
    # without initial_state the states start at zero, as before
    plain = getattr(L, kind)(U, return_state=True)
    res = plain(x)
    assert len(res) == 1 + n
    np.testing.assert_allclose(res[0], res[1], rtol=0, atol=0)     # the last output is h


def _seq2seq(units=8, feats=5, classes=5):
    enc_in, dec_in = pg.Input((None, feats)), pg.Input((None, classes))
    _, h, c = L.LSTM(units, return_state=True, name="encoder")(enc_in)
    dec_lstm = L.LSTM(units, return_sequences=True, return_state=True, name="decoder")
    dec_seq, _, _ = dec_lstm(dec_in, initial_state=[h, c])
    dense = L.Dense(classes, activation="softmax", name="head")
    model = pg.Model([enc_in, dec_in], dense(dec_seq))
    return model, (enc_in, h, c), (dec_lstm, dense)


def test_an_encoder_trains_through_the_state_it_hands_the_decoder():
    """keras-io's lstm_seq2seq: one SGD step of the training model equals PyTorch's (the
    encoder's weights get their gradient only through the decoder's initial state), and the
    inference models built from the same layers predict as the training model does."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    n, te, td, feats, classes, units = 4, 6, 5, 5, 5, 8
    xe = rng.standard_normal((n, te, feats)).astype(np.float32)
    xd = np.eye(classes, dtype=np.float32)[rng.integers(0, classes, (n, td))]
    y = np.eye(classes, dtype=np.float32)[rng.integers(0, classes, (n, td))]
    model, (enc_in, h, c), (dec_lstm, dense) = _seq2seq(units, feats, classes)
    model.compile(optimizer=pg.optimizers.SGD(learning_rate=0.5), loss="categorical_crossentropy", seed=0)
    w0 = model.get_weights()

    enc = torch.nn.LSTM(feats, units, batch_first=True)
    dec = torch.nn.LSTM(classes, units, batch_first=True)
    head = torch.nn.Linear(units, classes)
    with torch.no_grad():
        for mod, name in ((enc, "encoder"), (dec, "decoder")):
            for k in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
                getattr(mod, k + "_l0").copy_(torch.from_numpy(w0[f"{name}.{k}"]))
        head.weight.copy_(torch.from_numpy(w0["head.weight"]))
        head.bias.copy_(torch.from_numpy(w0["head.bias"]))
    params = list(enc.parameters()) + list(dec.parameters()) + list(head.parameters())
    opt = torch.optim.SGD(params, lr=0.5)
    _, (th, tc) = enc(torch.from_numpy(xe))
    out, _ = dec(torch.from_numpy(xd), (th, tc))
    loss = torch.nn.functional.cross_entropy(head(out).reshape(-1, classes),
                                             torch.from_numpy(y.argmax(-1)).reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()

    h1 = model.fit([xe, xd], y, batch_size=n, epochs=1, shuffle=False, verbose=0)
    np.testing.assert_allclose(h1.history["loss"][0], loss.item(), rtol=1e-5)
    w1 = model.get_weights()
    assert not np.allclose(w1["encoder.weight_ih"], w0["encoder.weight_ih"])
    for mod, name in ((enc, "encoder"), (dec, "decoder")):
        for k in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            np.testing.assert_allclose(w1[f"{name}.{k}"], getattr(mod, k + "_l0").detach().numpy(),
                                       rtol=1e-4, atol=1e-6, err_msg=f"{name}.{k}")

    # inference: the encoder's states, then the decoder one call at a time, sharing the layers
    encoder_model = pg.Model(enc_in, [h, c])
    sh, sc = pg.Input((units,)), pg.Input((units,))
    d_in = pg.Input((None, classes))
    seq, h2, c2 = dec_lstm(d_in, initial_state=[sh, sc])
    decoder_model = pg.Model([d_in, sh, sc], [dense(seq), h2, c2])
    for m in (encoder_model, decoder_model):
        m.compile(loss="mse")
    states = encoder_model.predict(xe)
    full = model.predict([xe, xd])
    step_by_step = []
    for t in range(td):
        p, hh, cc = decoder_model.predict([xd[:, t:t + 1]] + states)
        states = [hh, cc]
        step_by_step.append(p[:, 0])
    np.testing.assert_allclose(np.stack(step_by_step, 1), full, rtol=1e-4, atol=1e-5)
    for m in (model, encoder_model, decoder_model):
        m.free()


def test_a_model_with_states_saves_and_loads(tmp_path):
    model, _, _ = _seq2seq()
    model.compile(loss="categorical_crossentropy")
    rng = np.random.default_rng(2)
    xe, xd = rng.standard_normal((2, 4, 5)).astype(np.float32), rng.standard_normal((2, 3, 5)).astype(np.float32)
    path = str(tmp_path / "s2s.gguf")
    model.save(path)
    back = pg.load_model(path)
    np.testing.assert_array_equal(back.predict([xe, xd]), model.predict([xe, xd]))
    assert back.get_layer("decoder").return_state is True
    model.free()
    back.free()


def test_a_padded_step_keeps_the_state_it_was_handed():
    """mask_zero padding at the end: the final states equal those of the unpadded rows."""
    rng = np.random.default_rng(3)
    tok = rng.integers(1, 20, (2, 6)).astype(np.int32)
    padded = tok.copy()
    padded[:, 4:] = 0
    inp, sh, sc = pg.Input((None,), dtype="int32"), pg.Input((U,)), pg.Input((U,))
    e = L.Embedding(20, F, mask_zero=True)(inp)
    outs = L.LSTM(U, return_sequences=True, return_state=True)(e, initial_state=[sh, sc])
    m = pg.Model([inp, sh, sc], outs).compile(loss="mse")
    h0, c0 = rng.standard_normal((2, U)).astype(np.float32), rng.standard_normal((2, U)).astype(np.float32)
    _, hp, cp = m.predict([padded, h0, c0])
    _, ht, ct = m.predict([tok[:, :4], h0, c0])
    np.testing.assert_allclose(hp, ht, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(cp, ct, rtol=1e-5, atol=1e-6)
    m.free()


@pytest.mark.parametrize("merge_mode", ["concat", None])
def test_bidirectional_returns_and_takes_both_layers_states(merge_mode):
    x, h0, c0 = _arrays(4)
    inp = pg.Input((T, F))
    bi = L.Bidirectional(L.LSTM(U, return_state=True), merge_mode=merge_mode)
    outs = bi(inp)
    assert len(outs) == (2 if merge_mode is None else 1) + 4
    m = pg.Model(inp, outs).compile(loss="mse")
    got = m.predict(x)
    fh, bh = got[-4], got[-2]
    if merge_mode == "concat":
        np.testing.assert_allclose(got[0], np.concatenate([fh, bh], -1), rtol=0, atol=0)
    else:
        np.testing.assert_allclose(got[0], fh, rtol=0, atol=0)
        np.testing.assert_allclose(got[1], bh, rtol=0, atol=0)
    # initial_state: the forward layer's (h, c), then the backward one's
    states = [pg.Input((U,)) for _ in range(4)]
    res = L.Bidirectional(L.LSTM(U, return_state=True), merge_mode=merge_mode)(inp, initial_state=states)
    m2 = pg.Model([inp] + states, res).compile(loss="mse")
    zeros = [np.zeros((B, U), np.float32)] * 4
    m2.set_weights({k.replace(bi.name, m2.layers[-1].name): v for k, v in m.get_weights().items()})
    np.testing.assert_allclose(m2.predict([x] + zeros)[0], got[0], rtol=1e-5, atol=1e-6)
    other = m2.predict([x, h0, c0, h0, c0])[0]
    assert not np.allclose(other, got[0])
    for mm in (m, m2):
        mm.free()


def test_eager_calls_and_bad_states():
    x, h0, c0 = _arrays(5)
    out, h, c = L.LSTM(U, return_state=True)(x, initial_state=[h0, c0])
    assert out.shape == h.shape == c.shape == (B, U)
    with pytest.raises(ValueError, match="2 initial states"):
        L.LSTM(U)(x, initial_state=[h0])
    with pytest.raises(ValueError, match="initial state must have shape"):
        L.GRU(U)(x, initial_state=[np.zeros((B, U + 1), np.float32)])
    with pytest.raises(TypeError, match="one input"):
        L.GRU(U)([x, x], initial_state=[h0])
    assert L.LSTM(U, return_state=True, unroll=True).get_config()["return_state"] is True
    # a layer built on x alone takes initial states later, as Keras
    gru = L.GRU(U, return_state=True)
    zero_start = gru(x)
    np.testing.assert_allclose(gru(x, initial_state=[np.zeros((B, U), np.float32)])[1], zero_start[1],
                               rtol=1e-6, atol=1e-7)
    assert not np.allclose(gru(x, initial_state=[h0])[1], zero_start[1])


def test_keras_io_seq2seq_script_runs_as_written(tmp_path):
    """keras-io's lstm_seq2seq with the import changed: train, save as .keras, load, and rebuild
    the inference models from model.input, model.layers[i].output and the loaded layers; decoding
    one step from the encoder's states gives the training model's first step."""
    import pyggml as keras
    latent_dim, n_enc, n_dec = 16, 7, 9
    encoder_inputs = keras.Input(shape=(None, n_enc))
    encoder_outputs, state_h, state_c = keras.layers.LSTM(latent_dim, return_state=True)(encoder_inputs)
    decoder_inputs = keras.Input(shape=(None, n_dec))
    decoder_lstm = keras.layers.LSTM(latent_dim, return_sequences=True, return_state=True)
    decoder_outputs, _, _ = decoder_lstm(decoder_inputs, initial_state=[state_h, state_c])
    decoder_outputs = keras.layers.Dense(n_dec, activation="softmax")(decoder_outputs)
    model = keras.Model([encoder_inputs, decoder_inputs], decoder_outputs)
    model.compile(optimizer="rmsprop", loss="categorical_crossentropy", metrics=["accuracy"])
    rng = np.random.default_rng(6)
    ei = np.eye(n_enc, dtype=np.float32)[rng.integers(0, n_enc, (32, 10))]
    di = np.eye(n_dec, dtype=np.float32)[rng.integers(0, n_dec, (32, 8))]
    dt = np.concatenate([di[:, 1:], np.zeros_like(di[:, :1])], 1)
    model.fit([ei, di], dt, batch_size=16, epochs=2, validation_split=0.25, verbose=0)
    model.save(str(tmp_path / "s2s_model.keras"))
    model = keras.models.load_model(str(tmp_path / "s2s_model.keras"))

    encoder_inputs = model.input[0]
    encoder_outputs, state_h_enc, state_c_enc = model.layers[2].output
    encoder_model = keras.Model(encoder_inputs, [state_h_enc, state_c_enc])
    decoder_inputs = model.input[1]
    decoder_states_inputs = [keras.Input(shape=(latent_dim,)), keras.Input(shape=(latent_dim,))]
    decoder_outputs, state_h_dec, state_c_dec = model.layers[3](decoder_inputs, initial_state=decoder_states_inputs)
    decoder_outputs = model.layers[4](decoder_outputs)
    decoder_model = keras.Model([decoder_inputs] + decoder_states_inputs,
                                [decoder_outputs, state_h_dec, state_c_dec])
    states_value = encoder_model.predict(ei[:2], verbose=0)
    out, h, c = decoder_model.predict([di[:2, :1]] + states_value, verbose=0)
    assert out.shape == (2, 1, n_dec) and h.shape == c.shape == (2, latent_dim)
    np.testing.assert_allclose(out[:, 0], model.predict([ei[:2], di[:2]])[:, 0], rtol=1e-4, atol=1e-6)
    for m in (model, encoder_model, decoder_model):
        m.free()
