"""Keras behaviour found missing in the sixth round (2026-12-06), each checked against numpy or
against what Keras documents."""

import json
import os

import numpy as np
import pytest

import pyggml as keras
from pyggml import layers, ops

RNG = np.random.default_rng(23)


# --- model.losses after a call on arrays -----------------------------------------------------------

class ActivityRegularization(layers.Layer):
    """Keras's guide "writing a training loop from scratch": a loss added in call."""

    def call(self, inputs):
        self.add_loss(1e-2 * ops.sum(inputs))
        return inputs


def _relu(a):
    return np.maximum(a, 0.0)


def test_a_models_call_on_arrays_keeps_the_losses_its_layers_added():
    inputs = keras.Input(shape=(6,))
    d1 = layers.Dense(5, activation="relu")
    d2 = layers.Dense(4, activation="relu", kernel_regularizer=keras.regularizers.L2(1e-3))
    x1 = d1(inputs)
    out = layers.Dense(3)(d2(ActivityRegularization()(x1)))
    model = keras.Model(inputs, out)
    k1, b1 = d1.get_weights()
    k2, _ = d2.get_weights()
    penalty = 1e-3 * np.sum(k2.astype(np.float64) ** 2)
    # before a call: the weights' penalties alone, as Keras
    np.testing.assert_allclose(model.losses, [penalty], rtol=1e-5)
    for rows in (8, 3):
        x = RNG.normal(size=(rows, 6)).astype(np.float32)
        y = model(x)
        added = 1e-2 * np.sum(_relu(x @ k1 + b1))
        np.testing.assert_allclose(model.losses, [added, penalty], rtol=1e-5)
        # the call's outputs are the forward pass's, as without the loss
        np.testing.assert_allclose(y, model.predict(x, verbose=0), rtol=1e-5, atol=1e-6)


def test_a_subclassed_models_first_call_on_arrays_gives_its_loss():
    class WithKL(keras.Model):
        def __init__(self):
            super().__init__()
            self.dense = layers.Dense(2)

        def call(self, x):
            z = self.dense(x)
            self.add_loss(0.5 * ops.mean(ops.square(z)))
            return z

    m = WithKL()
    x = RNG.normal(size=(4, 3)).astype(np.float32)
    z = np.asarray(m(x))
    assert len(m.losses) == 1
    np.testing.assert_allclose(m.losses[0], 0.5 * np.mean(z.astype(np.float64) ** 2), rtol=1e-5)
    x2 = 3 * x
    z2 = np.asarray(m(x2))
    np.testing.assert_allclose(m.losses, [0.5 * np.mean(z2.astype(np.float64) ** 2)], rtol=1e-5)


def test_a_model_without_added_losses_lists_only_its_weights_penalties():
    inputs = keras.Input(shape=(3,))
    d = layers.Dense(2, kernel_regularizer=keras.regularizers.L1(1e-2))
    model = keras.Model(inputs, d(inputs))
    model(RNG.normal(size=(5, 3)).astype(np.float32))
    np.testing.assert_allclose(model.losses, [1e-2 * np.abs(d.get_weights()[0]).sum()], rtol=1e-5)


def test_the_losses_a_model_added_train_as_in_the_guides_loop():
    # the guide's custom loop: loss_fn(y, logits) + sum(model.losses) on a GradientTape, with the
    # added loss pulling the activations down; the same loop without it leaves them larger
    def run(with_loss):
        keras.utils.set_random_seed(3)
        inputs = keras.Input(shape=(4,))
        h = layers.Dense(8, activation="relu")(inputs)
        if with_loss:
            h = ActivityRegularization()(h)
        model = keras.Model(inputs, layers.Dense(2)(h))
        opt = keras.optimizers.SGD(learning_rate=0.05)
        loss_fn = keras.losses.MeanSquaredError()
        x = RNG.normal(size=(16, 4)).astype(np.float32)
        y = np.zeros((16, 2), np.float32)
        for _ in range(30):
            with keras.GradientTape() as tape:
                loss = loss_fn(y, model(x, training=True))
                loss = loss + sum(model.losses) if model.losses else loss
            grads = tape.gradient(loss, model.trainable_weights)
            opt.apply_gradients(zip(grads, model.trainable_weights))
        return float(np.sum(_relu(x @ model.layers[1].get_weights()[0] + model.layers[1].get_weights()[1])))

    assert run(True) < 0.8 * run(False)


# --- augmentation of tensors a graph computes (gan_ada) ------------------------------------------

_AUGMENTERS = {
    "flip_horizontal": lambda: layers.RandomFlip("horizontal", seed=3),
    "flip_both": lambda: layers.RandomFlip(seed=6),
    "translation_bilinear_reflect": lambda: layers.RandomTranslation(0.3, 0.3, seed=3),
    "translation_nearest_constant": lambda: layers.RandomTranslation(0.3, 0.3, fill_mode="constant", fill_value=0.5,
                                                                     interpolation="nearest", seed=3),
    "rotation_constant": lambda: layers.RandomRotation(0.2, fill_mode="constant", seed=3),
    "rotation_nearest": lambda: layers.RandomRotation(0.2, fill_mode="nearest", interpolation="nearest", seed=3),
    "zoom_wrap": lambda: layers.RandomZoom(0.3, fill_mode="wrap", seed=3),
    "shear": lambda: layers.RandomShear(0.3, 0.2, seed=3),
    "translation_channels_first": lambda: layers.RandomTranslation(0.3, 0.2, seed=5, data_format="channels_first"),
    "contrast": lambda: layers.RandomContrast(0.5, value_range=(-1.5, 1.5), seed=3),
    "brightness": lambda: layers.RandomBrightness(0.3, value_range=(-1.5, 1.5), seed=3),
}


@pytest.mark.parametrize("name", sorted(_AUGMENTERS))
def test_an_augmentation_of_a_computed_tensor_is_the_host_ones_and_trains(name):
    make = _AUGMENTERS[name]
    x = RNG.normal(size=(3, 6, 7, 2)).astype(np.float32)
    g = RNG.normal(size=x.shape).astype(np.float32)
    # seeded alike, a layer draws the same transforms on the host (arrays) as in a graph
    host = np.asarray(make()(x, training=True))
    xv = keras.Variable(x)
    with keras.GradientTape() as tape:
        y = make()(xv * 1.0, training=True)          # a tensor the tape computes, not data it is fed
        loss = ops.sum(y * g)
    np.testing.assert_allclose(np.asarray(y), host, rtol=1e-5, atol=1e-5)
    assert not np.allclose(host, x)                   # (it did change the images)
    grad = np.asarray(tape.gradient(loss, [xv])[0])
    if name in ("contrast", "brightness"):
        # element-wise: g times the factor (contrast: less its share of the mean) where not clipped
        inside = (host > -1.5) & (host < 1.5)
        if name == "brightness":
            want = g * inside
        else:
            # each image's factor: the layer's first draw from its seed, uniform in [0.5, 1.5]
            c = np.random.default_rng(3).uniform(0.5, 1.5, size=3).astype(np.float32)[:, None, None, None]
            mean = x.mean(axis=(1, 2), keepdims=True)
            np.testing.assert_allclose(host, np.clip((x - mean) * c + mean, -1.5, 1.5), rtol=1e-5, atol=1e-6)
            gi = g * inside
            want = gi * c + gi.mean(axis=(1, 2), keepdims=True) * (1 - c)
        np.testing.assert_allclose(grad, want, rtol=1e-4, atol=1e-5)
        return
    # the gradient is the sampling's adjoint: <x2, d loss / dx> = <aug(x2) - aug(0), g> for any x2,
    # aug computed on the host with the same draws
    x2 = RNG.normal(size=x.shape).astype(np.float32)
    lhs = float(np.sum(x2.astype(np.float64) * grad))
    rhs = float(np.sum((np.asarray(make()(x2, training=True), np.float64) -
                        np.asarray(make()(np.zeros_like(x2), training=True))) * g))
    assert lhs == pytest.approx(rhs, rel=1e-4, abs=1e-3)


def test_an_augmentation_in_a_model_augments_in_fit_only_with_new_draws_each_step():
    class Probe(layers.Layer):            # the images after augmentation, as the graph saw them
        def call(self, x):
            return x

    rng = np.random.default_rng(0)
    inp = keras.Input((4,))
    h = layers.Reshape((4, 4, 1))(layers.Dense(16)(inp))
    aug = layers.RandomFlip("horizontal", seed=1)
    out = layers.Flatten()(aug(h))
    m = keras.Model(inp, out)
    x = rng.normal(size=(8, 4)).astype(np.float32)
    # inference: the identity
    plain = keras.Model(inp, layers.Flatten()(h))
    np.testing.assert_allclose(m.predict(x, verbose=0), plain.predict(x, verbose=0), rtol=1e-6)
    # training (a call with training=True): each image flipped or not, both seen over calls
    seen = set()
    base = np.asarray(plain(x)).reshape(8, 4, 4)
    for _ in range(6):
        got = np.asarray(m(x, training=True)).reshape(8, 4, 4)
        for i in range(8):
            if np.allclose(got[i], base[i]):
                seen.add("kept")
            else:
                np.testing.assert_allclose(got[i], base[i][:, ::-1], rtol=1e-6)
                seen.add("flipped")
    assert seen == {"kept", "flipped"}
    m.compile(optimizer="sgd", loss="mse")
    m.fit(x, np.zeros((8, 16), np.float32), epochs=2, batch_size=4, verbose=0)


def test_a_generator_trains_through_gan_adas_augmenter():
    class AdaptiveAugmenter(keras.Model):                 # keras-io's gan_ada, its augmenter
        def __init__(self):
            super().__init__()
            self.probability = keras.Variable(0.5)
            self.augmenter = keras.Sequential([
                layers.InputLayer(input_shape=(8, 8, 3)), layers.RandomFlip("horizontal"),
                layers.RandomTranslation(height_factor=0.125, width_factor=0.125, interpolation="nearest"),
                layers.RandomRotation(factor=0.05), layers.RandomZoom(height_factor=(-0.2, 0.0),
                                                                      width_factor=(-0.2, 0.0))])

        def call(self, images, training):
            if training:
                augmented = self.augmenter(images, training=training)
                values = keras.random.uniform(shape=(4, 1, 1, 1))
                images = ops.where(ops.less(values, self.probability), augmented, images)
            return images

    keras.utils.set_random_seed(1)
    aug = AdaptiveAugmenter()
    gen = keras.Sequential([keras.Input((4,)), layers.Dense(8 * 8 * 3), layers.Reshape((8, 8, 3))])
    opt = keras.optimizers.Adam(1e-2)
    target = np.full((4, 8, 8, 3), 0.3, np.float32)     # flips, shifts and zooms leave it as it is
    rng = np.random.default_rng(2)
    losses = []
    for _ in range(40):
        z = rng.normal(size=(4, 4)).astype(np.float32)
        with keras.GradientTape() as tape:
            loss = ops.mean(ops.square(aug(gen(z, training=True), training=True) - target))
        grads = tape.gradient(loss, gen.trainable_weights)
        assert all(gr is not None for gr in grads)
        opt.apply_gradients(zip(grads, gen.trainable_weights))
        losses.append(float(loss))
    assert losses[-1] < 0.1 * losses[0]
    assert np.asarray(aug(np.ones((4, 8, 8, 3), np.float32), training=False)).tolist() == \
        np.ones((4, 8, 8, 3)).tolist()


# --- volumes of a variable depth (conv_lstm's Input(shape=(None, *frame))) ------------------------

def _conv_lstm(frames, optimizer="sgd"):
    # keras-io's conv_lstm, smaller: frames in, the next frames out
    inp = layers.Input(shape=(frames, 6, 6, 1))
    x = layers.ConvLSTM2D(filters=3, kernel_size=(3, 3), padding="same", return_sequences=True,
                          activation="relu")(inp)
    x = layers.BatchNormalization()(x)
    x = layers.Conv3D(filters=1, kernel_size=(3, 3, 3), activation="sigmoid", padding="same")(x)
    model = keras.Model(inp, x)
    model.compile(loss=keras.losses.binary_crossentropy, optimizer=optimizer)
    return model


def test_a_model_on_any_number_of_frames_computes_as_one_built_for_that_number():
    var = _conv_lstm(None)
    assert var.output_shape == (None, None, 6, 6, 1)
    w = var.get_weights()
    for frames in (2, 4, 7):
        fixed = _conv_lstm(frames)
        fixed.set_weights(w)
        x = RNG.random((3, frames, 6, 6, 1)).astype(np.float32)
        np.testing.assert_array_equal(var.predict(x, verbose=0), fixed.predict(x, verbose=0))
        assert var.evaluate(x, x, verbose=0) == fixed.evaluate(x, x, verbose=0)
    # training: the same steps
    x = RNG.random((4, 5, 6, 6, 1)).astype(np.float32)
    fixed = _conv_lstm(5, keras.optimizers.SGD(0.1))
    var = _conv_lstm(None, keras.optimizers.SGD(0.1))
    var.set_weights(w)
    fixed.set_weights(w)
    for m in (var, fixed):
        m.fit(x, x, batch_size=2, epochs=2, verbose=0, shuffle=False)
    after = fixed.get_weights()
    assert any(not np.array_equal(after[k], w[k]) for k in w)
    for k, v in var.get_weights().items():
        np.testing.assert_array_equal(v, after[k])
    # the example's loop: predict the next frame from a growing clip
    frames = x[0, :3]
    for _ in range(3):
        nxt = var.predict(frames[None], verbose=0)[0, -1:]
        frames = np.concatenate([frames, nxt])
    assert frames.shape == (6, 6, 6, 1)


def test_layers_that_change_a_variable_depth_compute_as_with_a_fixed_one():
    def build(depth):
        inp = layers.Input(shape=(depth, 6, 6, 2))
        x = layers.Conv3D(3, 3, activation="relu")(inp)            # depth - 2
        x = layers.MaxPooling3D(pool_size=(1, 2, 2))(x)
        x = layers.TimeDistributed(layers.Flatten())(x)
        return keras.Model(inp, layers.Dense(2)(layers.LSTM(4)(x)))

    var = build(None)
    assert [tuple(l.output.shape) for l in var.layers[1:4]] == \
        [(None, None, 4, 4, 3), (None, None, 2, 2, 3), (None, None, 12)]
    for depth in (4, 7):
        fixed = build(depth)
        fixed.set_weights(var.get_weights())
        x = RNG.random((3, depth, 6, 6, 2)).astype(np.float32)
        np.testing.assert_array_equal(var.predict(x, verbose=0), fixed.predict(x, verbose=0))
    inp = layers.Input(shape=(None, 4, 4, 1))
    mean = keras.Model(inp, layers.Lambda(lambda t: ops.mean(t, axis=1))(inp))
    x = RNG.random((2, 5, 4, 4, 1)).astype(np.float32)
    assert mean.output_shape == (None, 4, 4, 1)
    np.testing.assert_allclose(mean.predict(x, verbose=0), x.mean(axis=1), rtol=1e-5, atol=1e-6)


# --- a loss of y_pred broadcast against y_true ---------------------------------------------------

@pytest.mark.parametrize("name", ["mse", "mae", "huber"])
def test_a_loss_broadcasts_y_pred_against_y_true_as_pytorch_expands_it(name):
    torch = pytest.importorskip("torch")
    fn = {"mse": torch.nn.functional.mse_loss, "mae": torch.nn.functional.l1_loss,
          "huber": torch.nn.functional.huber_loss}[name]
    loss = {"mse": keras.losses.MeanSquaredError(), "mae": keras.losses.MeanAbsoluteError(),
            "huber": keras.losses.Huber()}[name]
    yt = RNG.random((4, 16, 3)).astype(np.float32)          # a window of targets
    yp = RNG.random((4, 1, 3)).astype(np.float32)           # one forecast step
    v = keras.Variable(yp)
    with keras.GradientTape() as tape:
        got = loss(yt, v * 1.0)
    grad = np.asarray(tape.gradient(got, [v])[0])
    tp = torch.tensor(yp, requires_grad=True)
    want = fn(tp.expand(4, 16, 3), torch.tensor(yt))
    want.backward()
    assert float(got) == pytest.approx(want.item(), rel=1e-5)
    np.testing.assert_allclose(grad, tp.grad.numpy(), rtol=1e-4, atol=1e-7)
    with pytest.raises(ValueError, match="does not fit"):
        loss(yt, RNG.random((4, 2, 3)).astype(np.float32))


# --- data_format="channels_first" (eeg_bci_ssvepformer sets it for the whole script) --------------

def test_channels_first_convolutions_and_pooling_compute_as_pytorchs():
    torch = pytest.importorskip("torch")
    f = torch.nn.functional
    x1 = RNG.normal(size=(2, 3, 10)).astype(np.float32)               # (batch, channels, steps)
    c1 = layers.Conv1D(4, 3, padding="same", data_format="channels_first", activation="relu")
    y1 = np.asarray(c1(x1))
    k1, b1 = c1.get_weights()                                          # Keras's kernel (k, in, out)
    want1 = torch.relu(f.conv1d(torch.tensor(x1), torch.tensor(k1).permute(2, 1, 0), torch.tensor(b1), padding=1))
    np.testing.assert_allclose(y1, want1.numpy(), rtol=1e-5, atol=1e-5)
    x2 = RNG.normal(size=(2, 3, 8, 6)).astype(np.float32)             # (batch, channels, h, w)
    c2 = layers.Conv2D(5, 3, strides=2, data_format="channels_first")
    y2 = np.asarray(c2(x2))
    k2, b2 = c2.get_weights()
    want2 = f.conv2d(torch.tensor(x2), torch.tensor(k2).permute(3, 2, 0, 1), torch.tensor(b2), stride=2)
    np.testing.assert_allclose(y2, want2.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(layers.MaxPooling2D(data_format="channels_first")(x2)),
                               f.max_pool2d(torch.tensor(x2), 2).numpy(), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(layers.AveragePooling1D(2, data_format="channels_first")(x1)),
                               f.avg_pool1d(torch.tensor(x1), 2).numpy(), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(layers.GlobalAveragePooling2D(data_format="channels_first")(x2)),
                               x2.mean(axis=(2, 3)), rtol=1e-5, atol=1e-6)
    # (volumes: test_channels_first_3d.py)


def test_a_script_that_sets_channels_first_trains_saves_and_loads(tmp_path):
    keras.backend.set_image_data_format("channels_first")
    try:
        inp = keras.Input((3, 10))                                     # 3 electrodes, 10 samples
        x = layers.Conv1D(4, 3, padding="same")(inp)
        x = layers.MaxPooling1D()(x)
        model = keras.Model(inp, layers.Dense(2)(layers.Flatten()(x)))
    finally:
        keras.backend.set_image_data_format("channels_last")
    assert [tuple(l.output.shape) for l in model.layers[1:3]] == [(None, 4, 10), (None, 4, 5)]
    assert model.layers[1].get_config()["data_format"] == "channels_first"
    x = RNG.normal(size=(8, 3, 10)).astype(np.float32)
    # a twin built channels-last on the transposed data, with the same weights, computes the same
    # (Flatten takes the global format too, and flattens channels-first in channels-last order)
    inp2 = keras.Input((10, 3))
    h = layers.MaxPooling1D()(layers.Conv1D(4, 3, padding="same")(inp2))
    twin = keras.Model(inp2, layers.Dense(2)(layers.Flatten()(h)))
    twin.set_weights(model.get_weights())
    np.testing.assert_allclose(model.predict(x, verbose=0), twin.predict(x.transpose(0, 2, 1), verbose=0),
                               rtol=1e-5, atol=1e-6)
    model.compile(optimizer="adam", loss="mse")
    model.fit(x, np.zeros((8, 2), np.float32), epochs=2, verbose=0)
    path = str(tmp_path / "cf.keras")
    model.save(path)
    back = keras.saving.load_model(path)
    np.testing.assert_array_equal(back.predict(x, verbose=0), model.predict(x, verbose=0))


def test_a_model_called_on_a_list_of_numbers_takes_them_as_one_array():
    class NodeClassifier(keras.Model):                   # gnn_citations: gnn_model([1, 10, 100])
        def __init__(self):
            super().__init__()
            self.table = RNG.random((50, 8)).astype(np.float32)
            self.dense = layers.Dense(3)

        def call(self, idx):
            return self.dense(ops.take(self.table, idx, axis=0))

    m = NodeClassifier()
    got = np.asarray(m([1, 10, 20]))
    k, b = m.dense.get_weights()
    np.testing.assert_allclose(got, m.table[[1, 10, 20]] @ k + b, rtol=1e-5, atol=1e-6)


def test_a_stateful_layers_states_start_another_layer_as_in_the_rnn_guide():
    p = RNG.random((4, 5, 6)).astype(np.float32)
    lstm = layers.LSTM(3, stateful=True)
    lstm(p)
    lstm(p)
    states = lstm.states                                  # Variables, as Keras's
    new = layers.LSTM(3)
    got = np.asarray(new(p, initial_state=states))
    want = np.asarray(new(p, initial_state=[s.numpy() for s in states]))
    np.testing.assert_array_equal(got, want)
    assert not np.allclose(got, np.asarray(new(p)), atol=1e-4)      # (the states did start it)


# --- a volume a custom call makes with a pyggml layer, then uses ------------------------------------

def test_a_volume_a_custom_call_makes_reaches_its_ops_5d():
    class SumGroups(layers.Layer):
        def __init__(self, **kw):
            super().__init__(**kw)
            self.to5d = layers.Reshape((4, 4, 9, 3))          # (B, 4, 4, 27) -> (B, 4, 4, 9, 3)

        def call(self, x):
            v = self.to5d(x) * 2.0
            return ops.sum(v, axis=3)                          # Keras: (B, 4, 4, 3)

    class Scaled(SumGroups):
        def call(self, x):
            return self.to5d(x) * 2.0                          # a volume out: (B, 4, 4, 9, 3)

    x = RNG.random((2, 4, 4, 27)).astype(np.float32)
    want = 2 * x.reshape(2, 4, 4, 9, 3)
    np.testing.assert_allclose(np.asarray(SumGroups()(x)), want.sum(3), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(Scaled()(x)), want, rtol=1e-6)
    inp = keras.Input((4, 4, 27))
    m = keras.Model(inp, SumGroups()(inp))
    assert m.output_shape == (None, 4, 4, 3)
    np.testing.assert_allclose(m.predict(x, verbose=0), want.sum(3), rtol=1e-5)
    m2 = keras.Model(inp, Scaled()(inp))
    assert m2.output_shape == (None, 4, 4, 9, 3)
    np.testing.assert_allclose(m2.predict(x, verbose=0), want, rtol=1e-6)
    # it trains: a Dense before it learns to make the target
    d = layers.Dense(27)
    m3 = keras.Model(inp, SumGroups()(d(inp)))
    m3.compile(optimizer=keras.optimizers.Adam(0.05), loss="mse")
    h = m3.fit(x, want.sum(3), epochs=60, verbose=0)
    assert h.history["loss"][-1] < 0.05 * h.history["loss"][0]


def test_a_layer_holding_a_lookup_takes_strings_when_called_on_arrays():
    class Lookup(layers.Layer):
        def __init__(self, vocab, **kw):
            super().__init__(**kw)
            self.lookup = layers.StringLookup(vocabulary=vocab, mask_token=None, num_oov_indices=0)
            self.emb = layers.Embedding(len(vocab), 4)

        def call(self, inputs):
            return self.emb(self.lookup(inputs))

    layer = Lookup(["a", "b", "c"])
    got = np.asarray(layer(np.array(["a", "c", "b"])))
    np.testing.assert_array_equal(got, layer.emb.get_weights()[0][[0, 2, 1]])
    # strings straight into numbers are refused, never computed as zeros
    with pytest.raises(TypeError, match="lookup layer first"):
        layers.Dense(3)(np.array([["a", "b"]]))


# --- Keras 3's saving hooks (the serialization and saving guide) ------------------------------------

@keras.saving.register_keras_serializable(package="gaps_5")
class _WithOwnVariable(layers.Dense):
    def __init__(self, units, **kwargs):
        super().__init__(units, **kwargs)
        self.my_variable = keras.Variable(RNG.random((units,)), name="my_variable", dtype="float32")
        self.extras = None

    def save_own_variables(self, store):
        super().save_own_variables(store)
        store["variables"] = self.my_variable.numpy()
        store["exact"] = np.array([1 / 3, 2 ** 60 + 1], dtype=np.float64)
        store["big"] = np.array([2 ** 62 + 3, -7], dtype=np.int64)
        store["words"] = np.array(["alpha", "beta"])

    def load_own_variables(self, store):
        self.my_variable.assign(store["variables"])
        for i, v in enumerate(self.weights):
            v.assign(store[f"{i}"])
        self.extras = {k: store[k] for k in ("exact", "big", "words")}

    def call(self, inputs):
        return super().call(inputs) + self.my_variable


@keras.saving.register_keras_serializable(package="gaps_5")
class _Vocabulary(layers.Layer):
    def __init__(self, vocabulary=None, **kwargs):
        super().__init__(**kwargs)
        self.vocabulary = vocabulary

    def save_assets(self, dir_path):
        os.makedirs(os.path.join(dir_path, "sub"))
        with open(os.path.join(dir_path, "sub", "vocabulary.txt"), "w") as f:
            f.write("\n".join(self.vocabulary))

    def load_assets(self, dir_path):
        with open(os.path.join(dir_path, "sub", "vocabulary.txt")) as f:
            self.vocabulary = f.read().split("\n")

    def call(self, x):
        return x


def test_a_layers_own_variables_and_assets_are_saved_and_given_back(tmp_path):
    model = keras.Sequential([keras.Input((10,)), _WithOwnVariable(2), _Vocabulary(["a", "b", "c"])])
    x = RNG.random((8, 10)).astype(np.float32)
    want = model.predict(x, verbose=0)
    path = str(tmp_path / "own.keras")
    model.save(path)
    back = keras.saving.load_model(path)
    np.testing.assert_array_equal(back.predict(x, verbose=0), want)
    own, vocab = back.layers
    np.testing.assert_array_equal(own.my_variable.numpy(), model.layers[0].my_variable.numpy())
    # every dtype comes back exactly
    assert own.extras["exact"].dtype == np.float64
    assert own.extras["exact"].tolist() == np.array([1 / 3, 2 ** 60 + 1], np.float64).tolist()
    assert own.extras["big"].dtype == np.int64 and own.extras["big"].tolist() == [2 ** 62 + 3, -7]
    assert own.extras["words"].tolist() == ["alpha", "beta"]
    assert vocab.vocabulary == ["a", "b", "c"]
    # save_weights / load_weights ask the hooks too
    other = keras.Sequential([keras.Input((10,)), _WithOwnVariable(2), _Vocabulary(["x"])])
    wpath = str(tmp_path / "own.weights.h5")
    model.save_weights(wpath)
    other.load_weights(wpath)
    np.testing.assert_array_equal(other.predict(x, verbose=0), want)
    assert other.layers[0].extras["big"].tolist() == [2 ** 62 + 3, -7]


def test_saved_layer_state_that_does_not_fit_is_refused_clearly():
    from pyggml.errors import GGUFError
    from pyggml.saving import own_state
    model = keras.Sequential([keras.Input((10,)), _WithOwnVariable(2), _Vocabulary(["a"])])

    def read(name):
        return np.zeros(4, np.int32)

    bad = [
        {"1": {"class": "Dense", "variables": {}}},                                 # another class there
        {"9": {"class": "_WithOwnVariable"}},                                       # no such layer
        {"2": {"class": "_Vocabulary", "assets": {"../escape.txt": "eA=="}}},      # leaves the folder
        {"2": {"class": "_Vocabulary", "assets": {"/etc/x": "eA=="}}},
        {"2": {"class": "_Vocabulary", "assets": {"v.txt": "not base64!"}}},
        {"1": {"class": "_WithOwnVariable", "variables": {"0": {"tensor": "t", "dtype": "O", "shape": [2]}}}},
        {"1": {"class": "_WithOwnVariable", "variables": {"0": {"tensor": "t", "dtype": "<f8", "shape": [9]}}}},
    ]
    for manifest in bad:
        with pytest.raises(GGUFError):
            own_state.restore(model, json.dumps(manifest), read, "hostile.gguf")
    with pytest.raises(GGUFError, match="not JSON"):
        own_state.restore(model, "{", read, "hostile.gguf")


@keras.saving.register_keras_serializable(package="gaps_5")
class _CustomBuild(layers.Layer):
    """The saving guide's LayerWithCustomBuild: a build with an argument of its own."""

    def __init__(self, units=32, **kwargs):
        super().__init__(**kwargs)
        self.units = units

    def call(self, inputs):
        return ops.matmul(inputs, self.w) + self.b

    def get_config(self):
        return dict(units=self.units, **super().get_config())

    def build(self, input_shape, layer_init):
        super().build(input_shape)
        self._input_shape = input_shape
        self.w = self.add_weight(shape=(input_shape[-1], self.units), initializer=layer_init, trainable=True)
        self.b = self.add_weight(shape=(self.units,), initializer=layer_init, trainable=True)
        self.layer_init = layer_init

    def get_build_config(self):
        return {"layer_init": self.layer_init, "input_shape": self._input_shape}

    def build_from_config(self, config):
        self.build(config["input_shape"], config["layer_init"])


@pytest.mark.parametrize("kind", ["sequential", "functional"])
def test_a_layer_whose_build_takes_more_than_the_shape_loads_by_its_build_config(kind, tmp_path):
    layer = _CustomBuild(units=4)
    layer.build(input_shape=(8,), layer_init="random_normal")
    if kind == "sequential":
        model = keras.Sequential([layer, layers.Dense(1, activation="sigmoid")])
    else:
        inp = keras.Input((8,))
        model = keras.Model(inp, layers.Dense(1, activation="sigmoid")(layer(inp)))
    x = RNG.normal(size=(16, 8)).astype(np.float32)
    model.compile(optimizer="adam", loss="mse")
    model.fit(x, RNG.normal(size=(16, 1)).astype(np.float32), verbose=0)
    path = str(tmp_path / "custom_build.keras")
    model.save(path)
    back = keras.saving.load_model(path)
    np.testing.assert_array_equal(back.predict(x, verbose=0), model.predict(x, verbose=0))
    assert [l for l in back.layers if isinstance(l, _CustomBuild)][0].layer_init == "random_normal"


@pytest.mark.parametrize("make, shape", [
    (lambda fmt: layers.Conv2DTranspose(4, 3, strides=2, padding="same", data_format=fmt), (2, 3, 5, 4)),
    (lambda fmt: layers.Conv1DTranspose(2, 3, data_format=fmt), (2, 3, 6)),
    (lambda fmt: layers.UpSampling2D(2, interpolation="bilinear", data_format=fmt), (2, 3, 5, 4)),
    (lambda fmt: layers.Conv2D(3, 2, padding="same", data_format=fmt), (2, 3, 5, 4)),
])
def test_a_channels_first_layer_is_its_channels_last_twin_on_transposed_data(make, shape):
    x = RNG.normal(size=shape).astype(np.float32)
    first, last = make("channels_first"), make("channels_last")
    to_last = (0,) + tuple(range(2, len(shape))) + (1,)
    y = np.asarray(first(x))
    last(x.transpose(to_last))
    last.set_weights(first.get_weights())
    want = np.asarray(last(x.transpose(to_last)))
    np.testing.assert_array_equal(y.transpose(to_last), want)
    assert first.get_config()["data_format"] == "channels_first"
    assert first.compute_output_shape((None,) + shape[1:]) == (None,) + y.shape[1:]
