"""Bidirectional through the layer harness, against numpy references built from
the LSTM and GRU references of test_recurrent; its weights, config, masks."""

import numpy as np
import pytest

import pyggml as pg
from harness import LayerCase, harness_tests
from test_recurrent import gru_ref, lstm_ref

L = pg.layers

_MERGE = {
    "concat": lambda f, b: np.concatenate([f, b], axis=-1),
    "sum": lambda f, b: f + b,
    "mul": lambda f, b: f * b,
    "ave": lambda f, b: (f + b) / 2,
}


def _sub(w, prefix):
    return {k[len(prefix) + 1:]: v for k, v in w.items() if k.startswith(prefix + ".")}


def bidirectional_ref(forward_ref, return_sequences, merge="concat", backward_ref=None):
    """The forward reference on x, the backward one on x reversed in time (its
    sequence turned back), merged."""
    backward_ref = backward_ref or forward_ref

    def ref(hs, w, training):
        x = hs[0]
        f = forward_ref([x], _sub(w, "forward_layer"), training)
        b = backward_ref([x[:, ::-1]], _sub(w, "backward_layer"), training)
        if return_sequences:
            b = b[:, ::-1]
        return _MERGE[merge](f, b)
    return ref


CASES = [
    LayerCase("bidirectional_lstm", lambda: L.Bidirectional(L.LSTM(3)), [(4, 2)],
              bidirectional_ref(lstm_ref(False), False)),
    LayerCase("bidirectional_lstm_seq", lambda: L.Bidirectional(L.LSTM(2, return_sequences=True)), [(3, 2)],
              bidirectional_ref(lstm_ref(True), True)),
    LayerCase("bidirectional_gru_seq_sum",
              lambda: L.Bidirectional(L.GRU(2, return_sequences=True), merge_mode="sum"), [(4, 2)],
              bidirectional_ref(gru_ref(True), True, "sum")),
    LayerCase("bidirectional_gru_ave", lambda: L.Bidirectional(L.GRU(3), merge_mode="ave"), [(3, 2)],
              bidirectional_ref(gru_ref(False), False, "ave")),
    LayerCase("bidirectional_lstm_seq_mul",
              lambda: L.Bidirectional(L.LSTM(2, return_sequences=True), merge_mode="mul"), [(5, 1)],
              bidirectional_ref(lstm_ref(True), True, "mul")),
    LayerCase("bidirectional_backward_layer",
              lambda: L.Bidirectional(L.LSTM(3, return_sequences=True),
                                      backward_layer=L.GRU(2, return_sequences=True, go_backwards=True)),
              [(3, 2)], bidirectional_ref(lstm_ref(True), True, backward_ref=gru_ref(True))),
]

# the harness's four checks over every case (forward, gradient, config, a training step)
test_forward, test_gradient, test_config, test_training_step = harness_tests(CASES)


def test_weights_are_named_per_direction_and_the_copies_run_both_ways():
    lstm = L.LSTM(4, return_sequences=True, name="enc")
    bi = L.Bidirectional(lstm)
    m = pg.Sequential([bi], input_shape=(5, 3)).compile(loss="mse", seed=0)
    names = list(m.get_weights())
    assert names == [f"{bi.name}.{d}_layer.{w}" for d in ("forward", "backward")
                     for w in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
    assert not bi.forward_layer.go_backwards and bi.backward_layer.go_backwards
    assert bi.forward_layer.name == "forward_enc" and bi.backward_layer.name == "backward_enc"
    assert bi.forward_layer is not lstm and bi.backward_layer is not lstm
    assert m.count_params() == 2 * 4 * 4 * (3 + 4 + 2)
    assert m.predict(np.zeros((2, 5, 3), dtype=np.float32)).shape == (2, 5, 8)
    m.free()


def test_merge_mode_none_gives_both_outputs():
    rng = np.random.default_rng(0)
    inp = pg.Input((4, 2))
    bi = L.Bidirectional(L.GRU(3, return_sequences=True), merge_mode=None)
    outs = bi(inp)
    assert isinstance(outs, list) and len(outs) == 2
    assert [o.shape for o in outs] == [(None, 4, 3), (None, 4, 3)]
    m = pg.Model(inp, outs).compile(loss="mse", seed=0)
    x = rng.normal(size=(3, 4, 2)).astype(np.float32)
    f, b = m.predict(x)
    w = {k.split(".", 1)[1]: v.astype(np.float64) for k, v in m.get_weights().items()}
    np.testing.assert_allclose(f, gru_ref(True)([x.astype(np.float64)], _sub(w, "forward_layer"), False),
                               rtol=1e-4, atol=1e-5)
    want_b = gru_ref(True)([x[:, ::-1].astype(np.float64)], _sub(w, "backward_layer"), False)[:, ::-1]
    np.testing.assert_allclose(b, want_b, rtol=1e-4, atol=1e-5)
    m.free()


@pg.saving.register_serializable(package="tests")
class MaskedIdentity(pg.layers.Layer):
    """A stand-in recurrent layer that takes a padding mask: x * mask, its steps
    reversed when going backwards (as a recurrent layer's sequence would be)."""

    def __init__(self, return_sequences=True, go_backwards=False, **kwargs):
        super().__init__(**kwargs)
        self.return_sequences, self.go_backwards = return_sequences, go_backwards

    def compute_output_shape(self, input_shape):
        return input_shape

    def call(self, inputs, training=None, mask=None):
        y = inputs
        if mask is not None:
            n, steps, _ = inputs.shape
            y = pg.ops.mul(pg.ops.cont(inputs), pg.ops.reshape(mask, (n, steps, 1)))
        if self.go_backwards:
            from pyggml.layers.recurrent.bidirectional import reverse_steps
            y = reverse_steps(y)
        return y

    def get_config(self):
        c = super().get_config()
        c.update(return_sequences=self.return_sequences, go_backwards=self.go_backwards)
        return c


MASK = np.array([[1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]], dtype=np.float32)


class _WithMask(pg.layers.Layer):
    def __init__(self, mask=True, **kwargs):
        super().__init__(**kwargs)
        self.use_mask = mask
        self.bi = L.Bidirectional(MaskedIdentity(), merge_mode="sum")

    def call(self, inputs, training=None):
        if not self.use_mask:
            return self.bi(inputs)
        # (the MASK rows cycled to the batch: the stand-in batch of shape tracing too)
        return self.bi(inputs, mask=pg.ops.constant(np.resize(MASK, (inputs.shape[0],) + MASK.shape[1:])))


@pytest.mark.parametrize("use_mask", [True, False])
def test_a_mask_reaches_wrapped_layers_that_take_one(use_mask):
    x = np.random.default_rng(2).normal(size=(3, 4, 2)).astype(np.float32)
    m = pg.Sequential([L.Dense(2, name="d"), _WithMask(use_mask)], input_shape=(4, 2)).compile(loss="mse")
    w = m.get_weights()
    h = x @ w["d.weight"].T + w["d.bias"]
    want = 2 * h * (MASK[:, :, None] if use_mask else 1.0)
    np.testing.assert_allclose(m.predict(x, batch_size=3), want, rtol=1e-5, atol=1e-6)
    m.free()


def test_config_round_trip_keeps_the_wrapped_layer():
    bi = L.Bidirectional(L.GRU(3, return_sequences=True, name="g"), merge_mode="ave")
    cfg = bi.get_config()
    assert cfg["layer"]["class_name"] == "GRU" and cfg["layer"]["config"]["units"] == 3
    again = L.Bidirectional.from_config(cfg)
    assert again.get_config() == cfg
    assert again.merge_mode == "ave" and again.backward_layer.go_backwards


@pytest.mark.parametrize("make, match", [
    (lambda: L.Bidirectional(L.Dense(3)), "go_backwards"),
    (lambda: L.Bidirectional(L.LSTM(3), merge_mode="max"), "merge_mode"),
    (lambda: L.Bidirectional("lstm"), "layer"),
    (lambda: L.Bidirectional(L.LSTM(3), backward_layer=L.LSTM(3)), "backward_layer"),
    (lambda: L.Bidirectional(L.LSTM(3), backward_layer=L.LSTM(3, go_backwards=True, return_sequences=True)),
     "return_sequences"),
])
def test_bad_arguments_are_refused(make, match):
    with pytest.raises((TypeError, ValueError), match=match):
        make()


def test_bad_input_shapes_are_refused():
    with pytest.raises(ValueError, match=r"\(steps, features\)"):
        pg.Sequential([L.Bidirectional(L.LSTM(3))], input_shape=(4,)).compile(loss="mse")


def test_imdb_style_model_learns():
    # Embedding -> Bidirectional(LSTM, sequences) -> Bidirectional(LSTM) -> Dense, as the keras-io example
    rng = np.random.default_rng(0)
    x = rng.integers(1, 20, size=(96, 6)).astype(np.int32)
    y = (np.isin(x, [3, 4, 5]).sum(axis=1) > 1).astype(np.float32)[:, None]
    pg.set_seed(0)
    m = pg.Sequential([L.Embedding(20, 8), L.Bidirectional(L.LSTM(8, return_sequences=True)),
                       L.Bidirectional(L.LSTM(8)), L.Dense(1, activation="sigmoid")], input_shape=(6,))
    m.compile(optimizer=pg.optimizers.Adam(learning_rate=0.02), loss="binary_crossentropy", metrics=["accuracy"])
    h = m.fit(x, y, epochs=25, batch_size=32, verbose=0)
    assert h.history["loss"][-1] < 0.5 * h.history["loss"][0]
    m.free()


# --- with Embedding(mask_zero=True): the padding mask reaches both directions --------------

def _embedded(m, x):
    w = m.get_weights()
    emb = [k for k in w if k.endswith(".weight") and w[k].shape[0] == VOCAB][0]
    return w[emb].astype(np.float64)[x]


VOCAB = 12


def _padded_tokens(rng, lengths, steps):
    x = np.zeros((len(lengths), steps), dtype=np.int32)
    for i, n in enumerate(lengths):
        x[i, :n] = rng.integers(1, VOCAB, size=n)
    return x


@pytest.mark.parametrize("merge", ["concat", "sum"])
def test_masked_sequences_run_over_their_real_steps_only(merge):
    # post-padded sequences: the forward layer keeps its state through the padding, the
    # backward one starts at the last real step; as Keras, the result is that of the real steps
    rng = np.random.default_rng(3)
    lengths, steps = [5, 2, 3, 1], 5
    x = _padded_tokens(rng, lengths, steps)
    bi = L.Bidirectional(L.LSTM(3), merge_mode=merge)
    m = pg.Sequential([L.Embedding(VOCAB, 4, mask_zero=True), bi], input_shape=(steps,)).compile(loss="mse")
    got = m.predict(x)
    w = {k.split(".", 1)[1]: v.astype(np.float64) for k, v in m.get_weights().items() if k.startswith(bi.name)}
    e = _embedded(m, x)
    ref = bidirectional_ref(lstm_ref(False), False, merge)
    for i, n in enumerate(lengths):
        np.testing.assert_allclose(got[i], ref([e[i:i + 1, :n]], w, False)[0], rtol=1e-4, atol=1e-5)
    m.free()


def test_masked_sequence_outputs_keep_the_mask_for_the_next_layer():
    # Embedding(mask_zero) -> Bidirectional(GRU, sequences) -> GlobalAveragePooling1D: the
    # average is over each row's real steps, of the outputs of its real steps
    rng = np.random.default_rng(4)
    lengths, steps = [4, 1, 2], 4
    x = _padded_tokens(rng, lengths, steps)
    bi = L.Bidirectional(L.GRU(2, return_sequences=True))
    m = pg.Sequential([L.Embedding(VOCAB, 3, mask_zero=True), bi, L.GlobalAveragePooling1D()],
                      input_shape=(steps,))
    m.compile(optimizer=pg.optimizers.Adam(learning_rate=0.05), loss="mse", seed=0)
    got = m.predict(x)
    w = {k.split(".", 1)[1]: v.astype(np.float64) for k, v in m.get_weights().items() if k.startswith(bi.name)}
    e = _embedded(m, x)
    ref = bidirectional_ref(gru_ref(True), True)
    for i, n in enumerate(lengths):
        np.testing.assert_allclose(got[i], ref([e[i:i + 1, :n]], w, False)[0].mean(axis=0), rtol=1e-4, atol=1e-5)
    # and it trains on those rows
    y = rng.normal(size=got.shape).astype(np.float32)
    h = m.fit(x, y, epochs=15, batch_size=3, verbose=0)
    assert h.history["loss"][-1] < 0.5 * h.history["loss"][0]
    m.free()
