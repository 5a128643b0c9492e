"""ConvLSTM1D: forward, gradients, configs and training through the harness against a
float64 numpy reference of the recurrence (padding, strides, dilation, data
formats, sequences, backwards); states in and out, padding masks, stateful,
dropout, Keras's weight layouts and bad arguments."""

import numpy as np
import pytest

import pyggml as pg
from harness import ACTIVATIONS, LayerCase, harness_tests

CL = pg.layers.ConvLSTM1D


def conv1d_np(x, w, stride, dilation, padding):
    """x (n, steps, channels) convolved with w (out, channels, k): (n, out_steps, out)."""
    n, steps, c = x.shape
    k = w.shape[2]
    span = (k - 1) * dilation + 1
    if padding == "same":
        out = -(-steps // stride)
        total = max((out - 1) * stride + span - steps, 0)
        x = np.pad(x, ((0, 0), (total // 2, total - total // 2), (0, 0)))
    else:
        out = (steps - span) // stride + 1
    y = np.zeros((n, out, w.shape[0]))
    for j in range(out):
        for i in range(k):
            y[:, j] += x[:, j * stride + i * dilation] @ w[:, :, i].T
    return y


def conv_lstm_ref(filters, stride=1, dilation=1, padding="valid", activation="tanh", recurrent_activation="sigmoid",
                  return_sequences=False, go_backwards=False, channels_first=False, return_state=False):
    act, rec = ACTIVATIONS[activation], ACTIVATIONS[recurrent_activation]

    def ref(hs, w, training, mask=None, states=None):
        x = hs[0]
        if channels_first:
            x = x.transpose(0, 1, 3, 2)
        n, t = x.shape[:2]
        zx = [conv1d_np(x[:, s], w["weight_ih"], stride, dilation, padding) + w.get("bias", 0.0) for s in range(t)]
        o = zx[0].shape[1]
        h = np.zeros((n, o, filters)) if states is None else states[0]
        c = np.zeros((n, o, filters)) if states is None else states[1]
        seq = []
        for s in (range(t - 1, -1, -1) if go_backwards else range(t)):
            z = zx[s] + conv1d_np(h, w["weight_hh"], 1, 1, "same")
            zi, zf, zc, zo = np.split(z, 4, axis=-1)
            c2 = rec(zf) * c + rec(zi) * act(zc)
            h2 = rec(zo) * act(c2)
            if mask is not None:
                m = mask[:, s][:, None, None]
                h2, c2 = m * h2 + (1 - m) * h, m * c2 + (1 - m) * c
            h, c = h2, c2
            seq.append(h)
        out = np.stack(seq, axis=1) if return_sequences else h
        if channels_first:
            out = np.swapaxes(out, -1, -2)
            h, c = np.swapaxes(h, -1, -2), np.swapaxes(c, -1, -2)
        return [out, h, c] if return_state else out
    return ref


def bidirectional_ref(filters, **kw):
    """Bidirectional(ConvLSTM1D(..., return_sequences=True)), merge "concat": the backward
    layer's sequence turned back to forward time, joined on the last axis."""
    fw, bw = conv_lstm_ref(filters, return_sequences=True, **kw), \
        conv_lstm_ref(filters, return_sequences=True, go_backwards=True, **kw)

    def ref(hs, w, training):
        part = {p: {k.split(".", 1)[1]: a for k, a in w.items() if k.startswith(p + ".")}
                for p in ("forward_layer", "backward_layer")}
        return np.concatenate([fw(hs, part["forward_layer"], training),
                               bw(hs, part["backward_layer"], training)[:, ::-1]], axis=-1)
    return ref


CASES = [
    LayerCase("convlstm1d_valid", lambda: CL(2, 3), [(3, 5, 2)], conv_lstm_ref(2)),
    LayerCase("convlstm1d_same_even_kernel_sequences_backwards",
              lambda: CL(2, 2, padding="same", return_sequences=True, go_backwards=True), [(3, 4, 2)],
              conv_lstm_ref(2, padding="same", return_sequences=True, go_backwards=True)),
    LayerCase("convlstm1d_strided_relu_channels_first_no_bias",
              lambda: CL(2, 3, strides=2, padding="same", activation="relu", data_format="channels_first",
                         use_bias=False, return_sequences=True), [(2, 2, 5)],
              conv_lstm_ref(2, stride=2, padding="same", activation="relu", channels_first=True,
                            return_sequences=True)),
    LayerCase("convlstm1d_dilated", lambda: CL(3, 2, dilation_rate=2), [(2, 5, 1)], conv_lstm_ref(3, dilation=2)),
    LayerCase("convlstm1d_bidirectional_concat",
              lambda: pg.layers.Bidirectional(CL(2, 2, padding="same", return_sequences=True)), [(3, 3, 2)],
              bidirectional_ref(2, padding="same")),
]

test_forward, test_gradient, test_config, test_training_step = harness_tests(CASES)


def _weights(model, rng, scale=0.5):
    w = {k: rng.normal(scale=scale, size=a.shape).astype(np.float32) for k, a in model.get_weights().items()}
    model.set_weights(w)
    return {k.split(".", 1)[1]: v.astype(np.float64) for k, v in w.items()}


def test_return_state_and_initial_state_train_both():
    rng = np.random.default_rng(0)
    x_in = pg.Input((3, 6, 2))
    h_in, c_in = pg.Input((4, 2)), pg.Input((4, 2))
    out, h, c = CL(2, 3, return_state=True)(x_in, initial_state=[h_in, c_in])
    assert out.shape == (None, 4, 2) and h.shape == (None, 4, 2) and c.shape == (None, 4, 2)
    model = pg.Model([x_in, h_in, c_in], [out, c]).compile(loss="mse")
    w = _weights(model, rng)
    x = rng.normal(size=(2, 3, 6, 2))
    h0, c0 = rng.normal(size=(2, 4, 2)), rng.normal(size=(2, 4, 2))
    got_out, got_c = model.predict([x, h0, c0], verbose=0)
    want_out, _, want_c = conv_lstm_ref(2, return_state=True)([x], w, False, states=[h0, c0])
    np.testing.assert_allclose(got_out, want_out, rtol=2e-4, atol=2e-5)
    np.testing.assert_allclose(got_c, want_c, rtol=2e-4, atol=2e-5)
    model.fit([x, h0, c0], [want_out, want_c], epochs=1, verbose=0)
    model.free()


def test_padding_mask_keeps_the_state_of_masked_times():
    rng = np.random.default_rng(1)
    inp = pg.Input((4, 5, 2))
    h = pg.layers.Masking(0.0)(inp)
    model = pg.Model(inp, CL(2, 3, padding="same")(h)).compile(loss="mse")
    w = _weights(model, rng)
    x = rng.normal(size=(3, 4, 5, 2))
    x[0, 2:] = 0.0
    x[1, 1] = 0.0
    mask = np.any(x != 0, axis=(2, 3)).astype(np.float64)
    got = model.predict(x, verbose=0)
    np.testing.assert_allclose(got, conv_lstm_ref(2, padding="same")([x], w, False, mask=mask), rtol=2e-4, atol=2e-5)
    assert np.abs(got - conv_lstm_ref(2, padding="same")([x], w, False)).max() > 1e-3


def test_stateful_carries_states_between_batches():
    rng = np.random.default_rng(2)
    layer = CL(2, 3, stateful=True)
    model = pg.Sequential([pg.Input((2, 5, 1), batch_size=2), layer]).compile(loss="mse")
    w = _weights(model, rng)
    x1, x2 = rng.normal(size=(2, 2, 5, 1)), rng.normal(size=(2, 2, 5, 1))
    model.predict(x1, batch_size=2, verbose=0)
    got = model.predict(x2, batch_size=2, verbose=0)
    _, h, c = conv_lstm_ref(2, return_state=True)([x1], w, False)
    np.testing.assert_allclose(got, conv_lstm_ref(2)([x2], w, False, states=[h, c]), rtol=2e-4, atol=2e-5)
    layer.reset_states()
    np.testing.assert_allclose(model.predict(x2, batch_size=2, verbose=0), conv_lstm_ref(2)([x2], w, False),
                               rtol=2e-4, atol=2e-5)
    layer.reset_states([h, c])                      # Keras's shapes (batch, out_steps, filters)
    np.testing.assert_allclose(model.predict(x2, batch_size=2, verbose=0),
                               conv_lstm_ref(2)([x2], w, False, states=[h, c]), rtol=2e-4, atol=2e-5)
    model.free()


def test_dropout_only_while_training_and_trains():
    rng = np.random.default_rng(3)
    layer = CL(2, 3, dropout=0.3, recurrent_dropout=0.3)
    x = rng.normal(size=(2, 3, 5, 2)).astype(np.float32)
    a = layer(x)
    np.testing.assert_array_equal(a, layer(x))
    assert not np.allclose(layer(x, training=True), a)
    model = pg.Sequential([pg.Input((3, 5, 2)), CL(2, 3, dropout=0.3, recurrent_dropout=0.2)]).compile(loss="mse")
    h = model.fit(x, np.zeros((2, 3, 2)), epochs=2, verbose=0)
    assert np.all(np.isfinite(h.history["loss"]))
    model.free()


def test_keras_weights_shapes_and_unit_forget_bias():
    layer = CL(3, 2)
    layer(np.zeros((1, 2, 4, 5), np.float32))
    w = layer.get_weights()
    assert w["weight_ih"].shape == (12, 5, 2) and w["weight_hh"].shape == (12, 3, 2) and w["bias"].shape == (12,)
    assert [w[i].shape for i in range(3)] == [(2, 5, 12), (2, 3, 12), (12,)]
    np.testing.assert_array_equal(w[0][1, :, 4], w["weight_ih"][4, :, 1])
    np.testing.assert_array_equal(w["bias"], [0] * 3 + [1] * 3 + [0] * 6)
    assert not CL(3, 2, unit_forget_bias=False).get_config()["unit_forget_bias"]
    cfg = layer.get_config()
    assert cfg["filters"] == 3 and cfg["kernel_size"] == (2,) and cfg["padding"] == "valid"
    assert cfg["data_format"] == "channels_last" and cfg["recurrent_initializer"] == "orthogonal"
    assert CL.kind() == "conv_lstm1d"


def test_bad_arguments():
    with pytest.raises(ValueError, match="filters"):
        CL(0, 3)
    with pytest.raises(ValueError, match="padding"):
        CL(2, 3, padding="causal")
    with pytest.raises(ValueError, match="dilation_rate"):
        CL(2, 3, strides=2, dilation_rate=2)
    with pytest.raises(ValueError, match="data_format"):
        CL(2, 3, data_format="channels_middle")
    with pytest.raises(ValueError, match="dropout"):
        CL(2, 3, dropout=1.5)
    with pytest.raises(ValueError, match=r"\(time, steps, channels\)"):
        CL(2, 3)(np.zeros((2, 3, 4), np.float32))
    with pytest.raises(ValueError, match="longer than"):
        CL(2, 5)(np.zeros((2, 3, 4, 1), np.float32))
    with pytest.raises(ValueError, match="initial state"):
        CL(2, 3)(pg.Input((3, 5, 2)), initial_state=[pg.Input((5, 2)), pg.Input((5, 2))])


def test_regularizers_and_constraints_see_keras_weights():
    layer = CL(2, 3, kernel_regularizer=pg.regularizers.L2(0.1), recurrent_regularizer=pg.regularizers.L1(0.2),
               bias_regularizer=pg.regularizers.L2(0.3), recurrent_constraint="non_neg")
    model = pg.Sequential([pg.Input((2, 5, 2)), layer]).compile(optimizer=pg.optimizers.SGD(0.5), loss="mse")
    w = {k.split(".", 1)[1]: v.astype(np.float64) for k, v in model.get_weights().items()}
    want = 0.1 * np.sum(w["weight_ih"] ** 2) + 0.2 * np.sum(np.abs(w["weight_hh"])) + 0.3 * np.sum(w["bias"] ** 2)
    np.testing.assert_allclose(sum(layer.losses), want, rtol=1e-5)
    rng = np.random.default_rng(7)
    model.fit(rng.normal(size=(4, 2, 5, 2)), rng.normal(size=(4, 3, 2)), epochs=1, verbose=0)
    assert model.get_weights()["conv_lstm1d.weight_hh"].min() >= 0.0
    model.free()
