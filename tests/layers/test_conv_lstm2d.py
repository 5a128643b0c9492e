"""ConvLSTM2D over videos (batch, time, H, W, channels): forward, gradients, configs and
training through the harness against a float64 numpy reference of the recurrence
(padding, strides, dilation, sequences, backwards), then states, keras-io's next-frame
model (ConvLSTM2D, BatchNormalization and Conv3D) and bad arguments."""

import numpy as np
import pytest

import pyggml as pg
from harness import ACTIVATIONS, LayerCase, harness_tests
from test_volumes import conv3d_np

L = pg.layers
CL = L.ConvLSTM2D


def conv2d_np(x, w, strides, dilation, padding):
    """Keras's Conv2D of x (n, H, W, c) with PyTorch's kernel w (out, c, kh, kw)."""
    return conv3d_np(x[:, None], w[:, :, None], None, (1,) + tuple(strides), padding, (1,) + tuple(dilation))[:, 0]


def conv_lstm2d_ref(filters, strides=(1, 1), dilation=(1, 1), padding="valid", return_sequences=False,
                    go_backwards=False, return_state=False, activation="tanh"):
    act, rec = ACTIVATIONS[activation], ACTIVATIONS["sigmoid"]

    def ref(hs, w, training, states=None):
        x = hs[0]
        n, t = x.shape[:2]
        zx = [conv2d_np(x[:, s], w["weight_ih"], strides, dilation, padding) + w.get("bias", 0.0) for s in range(t)]
        h = np.zeros(zx[0].shape[:3] + (filters,)) if states is None else states[0]
        c = np.zeros_like(h) if states is None else states[1]
        seq = []
        for s in (range(t - 1, -1, -1) if go_backwards else range(t)):
            z = zx[s] + conv2d_np(h, w["weight_hh"], (1, 1), (1, 1), "same")
            zi, zf, zc, zo = np.split(z, 4, axis=-1)
            c = rec(zf) * c + rec(zi) * act(zc)
            h = rec(zo) * act(c)
            seq.append(h)
        out = np.stack(seq, axis=1) if return_sequences else h
        return [out, h, c] if return_state else out
    return ref


CASES = [
    LayerCase("convlstm2d_valid", lambda: CL(2, 3), [(3, 4, 4, 2)], conv_lstm2d_ref(2)),
    LayerCase("convlstm2d_same_sequences", lambda: CL(2, (3, 2), padding="same", return_sequences=True),
              [(2, 3, 4, 2)], conv_lstm2d_ref(2, padding="same", return_sequences=True)),
    LayerCase("convlstm2d_strided_backwards", lambda: CL(3, 2, strides=(2, 1), go_backwards=True), [(3, 5, 3, 1)],
              conv_lstm2d_ref(3, strides=(2, 1), go_backwards=True)),
    LayerCase("convlstm2d_dilated_relu", lambda: CL(2, 2, dilation_rate=(1, 2), activation="relu",
                                                    return_sequences=True), [(2, 3, 4, 2)],
              conv_lstm2d_ref(2, dilation=(1, 2), activation="relu", return_sequences=True)),
]

test_forward, test_gradient, test_config, test_training_step = harness_tests(CASES)


def test_states_in_and_out_and_keras_s_kernel_layout():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 3, 4, 4, 2)).astype(np.float32)
    h0, c0 = (rng.normal(size=(2, 4, 4, 3)).astype(np.float32) for _ in range(2))
    layer = CL(3, 3, padding="same", return_state=True)
    inp, hi, ci = pg.Input((3, 4, 4, 2)), pg.Input((4, 4, 3)), pg.Input((4, 4, 3))
    outs = layer(inp, initial_state=[hi, ci])
    assert [tuple(o.shape) for o in outs] == [(None, 4, 4, 3)] * 3
    model = pg.Model([inp, hi, ci], outs)
    got = model.predict([x, h0, c0])
    w = {k: v.astype(np.float64) for k, v in layer.get_weights().items()}
    want = conv_lstm2d_ref(3, padding="same", return_state=True)([x.astype(np.float64)], w, False,
                                                                  states=[h0, c0])
    for g, e in zip(got, want):
        assert np.allclose(g, e, atol=1e-4)
    assert layer.kernel.shape == (3, 3, 2, 12) and layer.recurrent_kernel.shape == (3, 3, 3, 12)
    assert np.array_equal(layer.get_weights()[0], w["weight_ih"].astype(np.float32).transpose(2, 3, 1, 0))


def test_next_frame_prediction_trains():
    """keras-io's next-frame prediction with Conv-LSTM, shrunk: three ConvLSTM2D with
    BatchNormalization between them and a Conv3D with a sigmoid over every frame."""
    rng = np.random.default_rng(1)
    frames = np.zeros((8, 5, 8, 8, 1), np.float32)
    for i in range(8):                        # a bright square moving one pixel right per frame
        r, c = rng.integers(0, 5, size=2)
        for t in range(5):
            frames[i, t, r:r + 3, min(c + t, 7):min(c + t + 3, 8)] = 1.0
    x, y = frames[:, :4], frames[:, 1:]
    inp = pg.Input((4, 8, 8, 1))
    h = L.ConvLSTM2D(8, (5, 5), padding="same", return_sequences=True, activation="relu")(inp)
    h = L.BatchNormalization()(h)
    h = L.ConvLSTM2D(8, (3, 3), padding="same", return_sequences=True, activation="relu")(h)
    h = L.BatchNormalization()(h)
    out = L.Conv3D(1, (3, 3, 3), activation="sigmoid", padding="same")(h)
    model = pg.Model(inp, out)
    model.compile(optimizer=pg.optimizers.Adam(0.01), loss="binary_crossentropy")
    loss = model.fit(x, y, epochs=25, batch_size=4, verbose=0).history["loss"]
    assert np.mean(loss[-3:]) < 0.6 * np.mean(loss[:3]), loss
    pred = model.predict(x[:2])
    assert pred.shape == (2, 4, 8, 8, 1) and np.all((pred >= 0) & (pred <= 1))


@pytest.mark.parametrize("make, why", [
    (lambda: CL(2, 3, data_format="channels_first"), "channels_last"),
    (lambda: CL(2, 3, strides=2, dilation_rate=2), "strides"),
])
def test_bad_arguments(make, why):
    with pytest.raises(ValueError, match=why):
        make()


def test_inputs_it_cannot_take_are_refused():
    with pytest.raises(ValueError, match="time, H, W, channels"):
        CL(2, 3)(pg.Input((4, 6, 6)))
    with pytest.raises(ValueError, match="longer than the 4 cells along axis 2"):
        CL(2, 5)(pg.Input((3, 4, 4, 1)))
