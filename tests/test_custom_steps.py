"""Keras's overridable steps (train_step, test_step, predict_step, compute_loss) with
pg.GradientTape: keras-io's patterns (VAE, GAN, distillation, "customizing fit") as a
Keras user ports them, checked against pyggml's own fused fit and hand-computed values;
clone_model and Keras's loss functions, which those scripts use."""

import numpy as np
import pytest

import pyggml as pg
from pyggml import layers, ops

keras = pg


def _regression(n=64, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 5)).astype(np.float32)
    return x, (x[:, :2] * 1.5 - 0.5).astype(np.float32)


def _functional(cls=pg.Model, seed=0):
    pg.set_seed(seed)
    inp = pg.Input(shape=(5,))
    h = layers.Dense(8, activation="tanh")(inp)
    return cls(inp, layers.Dense(2)(h))


class _ViaComputeLoss(pg.Model):
    """The default train_step (a tape), through an overridden compute_loss that is Keras's."""

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        return super().compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=training)


def test_the_tape_train_step_trains_as_the_fused_fit_does():
    x, y = _regression()
    fused, custom = _functional(), _functional(_ViaComputeLoss)
    custom.set_weights(fused.get_weights())
    for m in (fused, custom):
        m.compile(optimizer=pg.optimizers.SGD(0.05), loss="mse")
    h1 = fused.fit(x, y, batch_size=16, epochs=3, shuffle=False, verbose=0)
    h2 = custom.fit(x, y, batch_size=16, epochs=3, shuffle=False, verbose=0)
    for k, w in fused.get_weights().items():
        np.testing.assert_allclose(custom.get_weights()[k], w, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(h2.history["loss"], h1.history["loss"], rtol=1e-4)
    assert h2.history["loss"][-1] < h2.history["loss"][0]


class _Keras3Style(pg.Model):
    def train_step(self, data):
        x, y = data
        with pg.GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = self.compute_loss(y=y, y_pred=y_pred)
        trainable_vars = self.trainable_variables
        self.optimizer.apply(tape.gradient(loss, trainable_vars), trainable_vars)
        for metric in self.metrics:
            if metric.name == "loss":
                metric.update_state(loss)
            else:
                metric.update_state(y, y_pred)
        return {m.name: m.result() for m in self.metrics}


def test_keras3_guide_train_step_logs_the_loss_and_compiled_metrics():
    x, y = _regression()
    m = _functional(_Keras3Style)
    m.compile(optimizer=pg.optimizers.SGD(0.05), loss="mse", metrics=["mae"])
    before = m.predict(x, verbose=0)
    h = m.fit(x, y, batch_size=64, epochs=1, verbose=0)
    # one batch: the logged loss and mae are those of the weights before the step
    assert h.history["loss"][0] == pytest.approx(float(np.mean((before - y) ** 2)), rel=1e-4)
    assert h.history["mae"][0] == pytest.approx(float(np.mean(np.abs(before - y))), rel=1e-4)
    logs = m.evaluate(x, y, verbose=0, return_dict=True)
    after = m.predict(x, verbose=0)
    assert logs["loss"] == pytest.approx(float(np.mean((after - y) ** 2)), rel=1e-4)


def _two_outputs(cls, seed=0):
    pg.set_seed(seed)
    inp = pg.Input(shape=(5,))
    h = layers.Dense(8, activation="tanh")(inp)
    return cls(inp, [layers.Dense(2, name="a")(h), layers.Dense(1, name="b")(h)])


@pytest.mark.parametrize("metrics, want", [
    (["mae"], {"a_mae": (0, "mae"), "b_mae": (1, "mae")}),
    ([["mae"], ["mse", "mae"]], {"a_mae": (0, "mae"), "b_mse": (1, "mse"), "b_mae": (1, "mae")}),
    ({"b": "mae"}, {"b_mae": (1, "mae")}),
])
def test_compiled_metrics_of_several_outputs_are_split_and_named_as_the_fused_fit_does(metrics, want):
    """A flat list measures every output, a list of lists one per output, a dict by
    output name; each log is the metric of its own output (numpy, from the weights
    before the one step) under the name the fused fit gives it."""
    x, y = _regression()
    ys = [y, y[:, :1] * 2.0]
    custom, fused = _two_outputs(_ViaComputeLoss), _two_outputs(pg.Model)
    fused.set_weights(custom.get_weights())
    for m in (custom, fused):
        m.compile(optimizer=pg.optimizers.SGD(0.01), loss=["mse", "mse"], metrics=metrics)
    before = custom.predict(x, verbose=0)
    h = custom.fit(x, ys, batch_size=64, epochs=1, verbose=0)
    hf = fused.fit(x, ys, batch_size=64, epochs=1, verbose=0)
    names = {"mae": lambda p, t: np.mean(np.abs(p - t)), "mse": lambda p, t: np.mean((p - t) ** 2)}
    assert set(h.history) == {"loss", *want}
    assert set(hf.history) - {"a_loss", "b_loss", "learning_rate"} == {"loss", *want}   # fused: more logs
    for key, (i, fn) in want.items():
        assert h.history[key][0] == pytest.approx(float(names[fn](before[i], ys[i])), rel=1e-4), key
        assert hf.history[key][0] == pytest.approx(h.history[key][0], rel=1e-4), key


class _Keras2Style(pg.Model):
    def train_step(self, data):
        x, y = data
        with pg.GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = self.compiled_loss(y, y_pred, regularization_losses=self.losses)
        gradients = tape.gradient(loss, self.trainable_variables)
        self.optimizer.apply_gradients(zip(gradients, self.trainable_variables))
        self.compiled_metrics.update_state(y, y_pred)
        return {m.name: m.result() for m in self.metrics}


def test_keras2_compiled_loss_and_metrics_and_validation():
    x, y = _regression()
    m = _functional(_Keras2Style)
    m.compile(optimizer=pg.optimizers.Adam(0.01), loss="mse", metrics=["mae"])
    h = m.fit(x, y, batch_size=16, epochs=4, verbose=0, validation_split=0.25)
    assert set(h.history) == {"loss", "mae", "val_loss", "val_mae"}
    assert h.history["loss"][-1] < h.history["loss"][0]
    assert all(v > 0 for v in h.history["loss"])


def test_vae_port_trains_with_its_own_metrics():
    class Sampling(layers.Layer):
        def call(self, inputs):
            z_mean, z_log_var = inputs
            eps = pg.random.normal(shape=(ops.shape(z_mean)[0], ops.shape(z_mean)[1]))
            return z_mean + ops.exp(0.5 * z_log_var) * eps

    pg.set_seed(0)
    inp = pg.Input(shape=(6, 6, 1))
    h = layers.Dense(8, activation="relu")(layers.Flatten()(inp))
    z_mean, z_log_var = layers.Dense(2)(h), layers.Dense(2)(h)
    encoder = pg.Model(inp, [z_mean, z_log_var, Sampling()([z_mean, z_log_var])])
    lat = pg.Input(shape=(2,))
    decoder = pg.Model(lat, layers.Reshape((6, 6, 1))(layers.Dense(36, activation="sigmoid")(lat)))

    class VAE(pg.Model):
        def __init__(self, encoder, decoder, **kwargs):
            super().__init__(**kwargs)
            self.encoder, self.decoder = encoder, decoder
            self.total_loss_tracker = keras.metrics.Mean(name="total_loss")
            self.kl_loss_tracker = keras.metrics.Mean(name="kl_loss")

        @property
        def metrics(self):
            return [self.total_loss_tracker, self.kl_loss_tracker]

        def train_step(self, data):
            with pg.GradientTape() as tape:
                z_mean, z_log_var, z = self.encoder(data)
                reconstruction = self.decoder(z)
                rec = ops.mean(ops.sum(keras.losses.binary_crossentropy(data, reconstruction), axis=(1, 2)))
                kl = ops.mean(ops.sum(-0.5 * (1 + z_log_var - ops.square(z_mean) - ops.exp(z_log_var)), axis=1))
                total = rec + kl
            grads = tape.gradient(total, self.trainable_weights)
            self.optimizer.apply_gradients(zip(grads, self.trainable_weights))
            self.total_loss_tracker.update_state(total)
            self.kl_loss_tracker.update_state(kl)
            return {"loss": self.total_loss_tracker.result(), "kl_loss": self.kl_loss_tracker.result()}

    rng = np.random.default_rng(0)
    data = (rng.random((64, 6, 6, 1)) > 0.7).astype(np.float32)
    vae = VAE(encoder, decoder)
    vae.compile(optimizer=keras.optimizers.Adam(0.01))
    before = [w.numpy().copy() for w in vae.trainable_weights]
    h = vae.fit(data, epochs=6, batch_size=16, verbose=0)
    assert set(h.history) == {"loss", "kl_loss"}
    assert h.history["loss"][-1] < h.history["loss"][0]
    assert all(not np.array_equal(b, w.numpy()) for b, w in zip(before, vae.trainable_weights))
    assert vae.decoder.predict(vae.encoder.predict(data[:3], verbose=0)[0], verbose=0).shape == (3, 6, 6, 1)


def test_gan_port_two_optimizers_each_train_their_model_only():
    pg.set_seed(0)
    disc = pg.Sequential([pg.Input(shape=(4,)), layers.Dense(8), layers.LeakyReLU(negative_slope=0.2),
                          layers.Dense(1, activation="sigmoid")])
    gen = pg.Sequential([pg.Input(shape=(3,)), layers.Dense(8, activation="relu"), layers.Dense(4)])

    class GAN(pg.Model):
        def __init__(self, discriminator, generator):
            super().__init__()
            self.discriminator, self.generator = discriminator, generator

        def compile(self, d_optimizer, g_optimizer, loss_fn):
            super().compile()
            self.d_optimizer, self.g_optimizer, self.loss_fn = d_optimizer, g_optimizer, loss_fn
            self.d_loss_metric = keras.metrics.Mean(name="d_loss")
            self.g_loss_metric = keras.metrics.Mean(name="g_loss")

        def train_step(self, real):
            n = ops.shape(real)[0]
            fake = self.generator(pg.random.normal(shape=(n, 3)))
            images = ops.concatenate([fake, real], axis=0)
            labels = ops.concatenate([ops.ones((n, 1)), ops.zeros((n, 1))], axis=0)
            with pg.GradientTape() as tape:
                d_loss = self.loss_fn(labels, self.discriminator(images))
            grads = tape.gradient(d_loss, self.discriminator.trainable_weights)
            self.d_optimizer.apply_gradients(zip(grads, self.discriminator.trainable_weights))
            with pg.GradientTape() as tape:
                g_loss = self.loss_fn(ops.zeros((n, 1)), self.discriminator(self.generator(pg.random.normal(shape=(n, 3)))))
            grads = tape.gradient(g_loss, self.generator.trainable_weights)
            self.g_optimizer.apply_gradients(zip(grads, self.generator.trainable_weights))
            self.d_loss_metric.update_state(d_loss)
            self.g_loss_metric.update_state(g_loss)
            return {"d_loss": self.d_loss_metric.result(), "g_loss": self.g_loss_metric.result()}

    gan = GAN(disc, gen)
    gan.compile(keras.optimizers.Adam(0.01), keras.optimizers.Adam(0.01), keras.losses.BinaryCrossentropy())
    assert [m.name for m in gan.metrics] == ["loss", "d_loss", "g_loss"]      # Keras 3's, the tracker first
    real = np.random.default_rng(0).normal(1.0, 0.1, size=(64, 4)).astype(np.float32)
    h = gan.fit(real, epochs=2, batch_size=16, verbose=0)
    assert set(h.history) == {"d_loss", "g_loss"}
    assert gan.d_optimizer.iterations == 8 and gan.g_optimizer.iterations == 8


def test_distiller_port_trains_the_student_and_leaves_the_teacher():
    class Distiller(pg.Model):
        def __init__(self, student, teacher):
            super().__init__()
            self.teacher, self.student = teacher, student

        def compile(self, optimizer, metrics, student_loss_fn, distillation_loss_fn, alpha=0.1, temperature=3):
            super().compile(optimizer=optimizer, metrics=metrics)
            self.student_loss_fn, self.distillation_loss_fn = student_loss_fn, distillation_loss_fn
            self.alpha, self.temperature = alpha, temperature

        def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, allow_empty=False):
            teacher_pred = self.teacher(x, training=False)
            student_loss = self.student_loss_fn(y, y_pred)
            distill = self.distillation_loss_fn(ops.softmax(teacher_pred / self.temperature, axis=1),
                                                ops.softmax(y_pred / self.temperature, axis=1))
            return self.alpha * student_loss + (1 - self.alpha) * distill * self.temperature ** 2

        def call(self, x):
            return self.student(x)

    pg.set_seed(0)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(128, 6)).astype(np.float32)
    y = x[:, :3].argmax(1)
    teacher = pg.Sequential([pg.Input(shape=(6,)), layers.Dense(16, activation="relu"), layers.Dense(3)])
    teacher.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    teacher.fit(x, y, epochs=20, verbose=0)
    student = pg.Sequential([pg.Input(shape=(6,)), layers.Dense(3)])
    teacher.trainable = False            # else the distillation loss trains it too, as in Keras
    t_before, s_before = teacher.get_weights(), student.get_weights()
    d = Distiller(student=student, teacher=teacher)
    d.compile(optimizer=keras.optimizers.Adam(0.01), metrics=[keras.metrics.SparseCategoricalAccuracy()],
              student_loss_fn=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              distillation_loss_fn=keras.losses.KLDivergence(), alpha=0.1, temperature=10)
    h = d.fit(x, y, epochs=5, verbose=0)
    assert h.history["loss"][-1] < h.history["loss"][0]
    assert "sparse_categorical_accuracy" in h.history
    for k, w in teacher.get_weights().items():
        np.testing.assert_array_equal(w, t_before[k])
    assert any(not np.array_equal(w, s_before[k]) for k, w in student.get_weights().items())
    logs = d.evaluate(x, y, verbose=0, return_dict=True)
    assert set(logs) == {"loss", "sparse_categorical_accuracy"}
    assert d.predict(x[:5], verbose=0).shape == (5, 3)


def test_overridden_test_step_and_predict_step_are_used():
    class M(pg.Model):
        def test_step(self, data):
            x, y = data
            return {"custom": float(np.mean(self(x))) * 0 + 7.0}

        def predict_step(self, data):
            return self(data) * 2.0                 # self(x) inside predict_step: no recursion

    m = _functional(M)
    m.compile(optimizer="adam", loss="mse")
    x, y = _regression()
    assert m.evaluate(x, y, verbose=0) == 7.0
    h = m.fit(x, y, epochs=1, verbose=0, validation_data=(x, y))        # the fused fit; validation: test_step
    assert h.history["val_custom"] == [7.0]
    plain = pg.Model.__call__(m, x)
    np.testing.assert_allclose(m.predict(x, batch_size=10, verbose=0), 2.0 * plain, rtol=1e-5, atol=1e-6)


def test_custom_fit_takes_datasets_generators_callbacks_and_class_weight():
    x, y = _regression()

    class M(pg.Model):
        def train_step(self, data):
            x, y, w = pg.utils.unpack_x_y_sample_weight(data)
            self.seen.append((np.shape(x)[0], None if w is None else np.asarray(w).copy()))
            return {"n": float(np.shape(x)[0])}

    m = _functional(M)
    m.seen = []
    m.compile()
    ds = pg.data.Dataset.from_tensor_slices((x, y)).batch(20)
    h = m.fit(ds, epochs=2, verbose=0)
    assert [n for n, _ in m.seen] == [20, 20, 20, 4] * 2 and h.history["n"] == [4.0, 4.0]

    def gen():
        while True:
            yield x[:8], y[:8]
    m.seen = []
    m.fit(gen(), steps_per_epoch=3, epochs=2, verbose=0)
    assert len(m.seen) == 6

    class Stop(pg.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if batch == 1:
                self.model.stop_training = True
    m.seen = []
    m.fit(x, y, batch_size=8, epochs=3, verbose=0, callbacks=[Stop()])
    assert len(m.seen) == 2
    m.seen = []
    labels = (x[:, 0] > 0).astype(np.int64)
    m.fit(x, labels, batch_size=64, epochs=1, verbose=0, class_weight={0: 1.0, 1: 3.0}, shuffle=False)
    np.testing.assert_array_equal(m.seen[0][1], np.where(labels == 1, 3.0, 1.0))


def test_freezing_a_model_freezes_its_layers_also_as_a_layer_of_another_model():
    pg.set_seed(0)
    base = pg.Sequential([pg.Input(shape=(5,)), layers.Dense(4, activation="relu")])
    base.trainable = False
    assert base.trainable_variables == [] and all(not l.trainable for l in base.layers)
    inp = pg.Input(shape=(5,))
    top = pg.Model(inp, layers.Dense(2)(base(inp)))
    top.compile(optimizer=pg.optimizers.SGD(0.1), loss="mse")
    frozen = base.get_weights()
    x, y = _regression()
    top.fit(x, y, epochs=2, verbose=0)
    for k, w in base.get_weights().items():
        np.testing.assert_array_equal(w, frozen[k])
    assert len(top.trainable_weights) == 2
    base.trainable = True
    assert len(base.trainable_variables) == 2


def test_a_model_with_no_graph_and_no_train_step_says_what_is_missing(tmp_path):
    class Holder(pg.Model):
        def __init__(self):
            super().__init__()
            self.inner = _functional()

    h = Holder()
    assert h.count_params() == 66 and list(h.get_weights()) == [f"inner.{n}" for n in h.inner.get_weights()]
    lines = []
    h.summary(print_fn=lines.append)
    assert "Total params: 66" in lines[0] and h.layers == [h.inner]
    h.save_weights(str(tmp_path / "h.gguf"))
    h2 = Holder()
    h2.load_weights(str(tmp_path / "h.gguf"))
    for k, w in h.get_weights().items():
        np.testing.assert_array_equal(h2.get_weights()[k], w)
    h.compile(optimizer="adam")
    x, y = _regression()
    with pytest.raises(TypeError, match="override train_step"):
        h.fit(x, y, epochs=1, verbose=0)


# --- clone_model and the loss functions --------------------------------------------------------
def test_clone_model_new_weights_same_architecture_and_shared_layers():
    m = _functional()
    c = pg.models.clone_model(m)
    assert [type(l).__name__ for l in c.layers] == [type(l).__name__ for l in m.layers]
    assert c.count_params() == m.count_params()
    x, _ = _regression()
    assert not np.allclose(c.predict(x, verbose=0), m.predict(x, verbose=0))
    shared = pg.models.clone_model(m, clone_function=lambda layer: layer)
    np.testing.assert_allclose(shared.predict(x, verbose=0), m.predict(x, verbose=0), rtol=1e-6)
    s = pg.Sequential([pg.Input(shape=(5,)), layers.Dense(3)])
    assert pg.models.clone_model(s).count_params() == 18
    with pytest.raises(TypeError, match="subclassed"):
        pg.models.clone_model(_ViaComputeLoss())


@pytest.mark.parametrize("name", ["binary_crossentropy", "mse", "mean_absolute_error", "kl_divergence",
                                  "categorical_crossentropy", "huber", "log_cosh", "poisson", "hinge"])
def test_loss_functions_are_per_sample_on_arrays_and_on_the_tape(name):
    rng = np.random.default_rng(0)
    yt = rng.random((4, 3)).astype(np.float32)
    yp = (rng.random((4, 3)) * 0.8 + 0.1).astype(np.float32)
    fn = getattr(pg.losses, name)
    got = fn(yt, yp)
    assert got.shape == (4,)
    assert pg.losses.get(name) is fn   # Keras's get: the function for its name
    cls = pg.losses._as_loss(fn)      # what compile trains with: its class
    np.testing.assert_allclose(np.mean(got), cls(yt, yp), rtol=1e-5)
    v = pg.Variable("p", (4, 3))
    v.assign(yp)
    with pg.GradientTape() as tape:
        on_tape = fn(yt, v.graph_tensor())
    np.testing.assert_allclose(np.asarray(on_tape).reshape(-1), got, rtol=1e-5, atol=1e-7)
    assert tape.gradient(ops.sum(on_tape), v).shape == (4, 3)


def test_binary_crossentropy_function_matches_pytorch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    yt = (rng.random((5, 4)) > 0.5).astype(np.float32)
    yp = (rng.random((5, 4)) * 0.9 + 0.05).astype(np.float32)
    want = torch.nn.functional.binary_cross_entropy(torch.tensor(yp), torch.tensor(yt), reduction="none").mean(-1)
    np.testing.assert_allclose(pg.losses.binary_crossentropy(yt, yp), want.numpy(), rtol=1e-5)
    with pytest.raises(TypeError, match="unexpected"):
        pg.losses.mse(yt, yp, nonsense=1)


def test_custom_fit_refuses_bad_data_and_bad_step_results_clearly():
    class M(pg.Model):
        def train_step(self, data):
            return 5

    m = M()
    m.compile()
    x = np.ones((4, 3), np.float32)
    with pytest.raises(TypeError, match="must return a dict"):
        m.fit(x, epochs=1, verbose=0)
    with pytest.raises(ValueError, match="y has 3 rows, x has 4"):
        m.fit(x, np.ones(3), epochs=1, verbose=0)
    with pytest.raises(ValueError, match="no data"):
        m.fit(None, epochs=1, verbose=0)
    with pytest.raises(TypeError, match="batch axis"):
        m.fit("text", epochs=1, verbose=0)


# --- keras-io guides: "writing a training loop from scratch", "making new layers and models" ------
def test_training_loop_from_scratch_guide():
    pg.set_seed(0)
    inputs = pg.Input(shape=(20,))
    x = layers.Dense(32, activation="relu")(inputs)
    model = pg.Model(inputs, layers.Dense(4)(x))
    optimizer = keras.optimizers.Adam(learning_rate=1e-2)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    acc = keras.metrics.SparseCategoricalAccuracy()
    rng = np.random.default_rng(0)
    xs = rng.normal(size=(256, 20)).astype(np.float32)
    ys = xs[:, :4].argmax(1)
    train = pg.data.Dataset.from_tensor_slices((xs, ys)).shuffle(buffer_size=256).batch(32)
    for epoch in range(8):
        for step, (xb, yb) in enumerate(train):
            with pg.GradientTape() as tape:
                logits = model(xb, training=True)
                loss_value = loss_fn(yb, logits)
            grads = tape.gradient(loss_value, model.trainable_weights)
            optimizer.apply_gradients(zip(grads, model.trainable_weights))
            acc.update_state(yb, logits)
        last = float(acc.result())
        acc.reset_state()
    assert last > 0.8
    assert float(loss_value) == pytest.approx(float(loss_fn(yb, model(xb))), abs=0.5)


def test_subclassing_guide_layers_state_and_vae_with_add_loss():
    class ComputeSum(layers.Layer):
        def __init__(self, input_dim):
            super().__init__()
            self.total = self.add_weight(initializer="zeros", shape=(input_dim,), trainable=False)

        def call(self, inputs):
            self.total.assign_add(ops.sum(inputs, axis=0))
            return self.total

    s = ComputeSum(2)
    np.testing.assert_array_equal(s(np.ones((2, 2))), [2.0, 2.0])
    np.testing.assert_array_equal(s(np.ones((2, 2))), [4.0, 4.0])
    np.testing.assert_array_equal(s.total.numpy(), [4.0, 4.0])
    v = s.total
    v.assign_sub(np.ones(2))
    assert (v + 1).tolist() == [4.0, 4.0] and v.value.tolist() == [3.0, 3.0]

    class Sampling(layers.Layer):
        def call(self, inputs):
            z_mean, z_log_var = inputs
            return z_mean + ops.exp(0.5 * z_log_var) * pg.random.normal(shape=ops.shape(z_mean))

    class Encoder(layers.Layer):
        def __init__(self, latent_dim=4, **kwargs):
            super().__init__(**kwargs)
            self.proj, self.mean, self.log_var = layers.Dense(16, activation="relu"), layers.Dense(latent_dim), \
                layers.Dense(latent_dim)
            self.sampling = Sampling()

        def call(self, inputs):
            h = self.proj(inputs)
            z_mean, z_log_var = self.mean(h), self.log_var(h)
            return z_mean, z_log_var, self.sampling((z_mean, z_log_var))      # a tuple of inputs

    class VAE(pg.Model):
        def __init__(self, dim):
            super().__init__()
            self.encoder, self.decoder = Encoder(), layers.Dense(dim, activation="sigmoid")

        def call(self, inputs):
            z_mean, z_log_var, z = self.encoder(inputs)
            self.add_loss(-0.5 * ops.mean(z_log_var - ops.square(z_mean) - ops.exp(z_log_var) + 1))
            return self.decoder(z)

    pg.set_seed(0)
    data = np.random.default_rng(0).random((128, 12)).astype(np.float32)
    vae = VAE(12)
    vae.compile(keras.optimizers.Adam(1e-2), loss=keras.losses.MeanSquaredError())
    h = vae.fit(data, data, epochs=3, batch_size=32, verbose=0)
    assert h.history["loss"][-1] < h.history["loss"][0]
    # the same model in a custom loop: the add_loss term is on the tape
    vae2, mse, mean = VAE(12), keras.losses.MeanSquaredError(), keras.metrics.Mean()
    opt = keras.optimizers.Adam(1e-2)
    for _ in range(3):
        for xb in pg.data.Dataset.from_tensor_slices(data).batch(32):
            with pg.GradientTape() as tape:
                loss = mse(xb, vae2(xb))
                loss += sum(vae2.losses)
            grads = tape.gradient(loss, vae2.trainable_weights)
            opt.apply_gradients(zip(grads, vae2.trainable_weights))
            mean(loss)                          # Keras's metric(value): update, then the result
    assert mean.result() > 0 and opt.iterations == 12


def test_backup_and_restore_resumes_a_custom_step_model(tmp_path):
    class Holder(pg.Model):
        def __init__(self):
            super().__init__()
            self.inner = _functional()

        def train_step(self, data):
            x, y = data
            with pg.GradientTape() as tape:
                loss = ops.mean(ops.square(self.inner(x) - y))
            grads = tape.gradient(loss, self.trainable_weights)
            self.optimizer.apply_gradients(zip(grads, self.trainable_weights))
            return {"loss": loss}

    class Crash(pg.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            if epoch == 1:
                raise KeyboardInterrupt("the power went out")

    x, y = _regression()
    m = Holder()
    m.compile(optimizer=pg.optimizers.SGD(0.05))
    with pytest.raises(KeyboardInterrupt):
        m.fit(x, y, epochs=4, verbose=0, callbacks=[pg.callbacks.BackupAndRestore(str(tmp_path)), Crash()])
    saved = m.get_weights()
    again = Holder()
    again.compile(optimizer=pg.optimizers.SGD(0.05))
    seen = []

    class Epochs(pg.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            if not seen:
                seen.append(dict(self.model.get_weights()))
            seen.append(epoch)
    h = again.fit(x, y, epochs=4, verbose=0, callbacks=[pg.callbacks.BackupAndRestore(str(tmp_path)), Epochs()])
    assert h.epoch == [2, 3] and seen[1:] == [2, 3]
    for k, w in saved.items():                       # resumed from the backup of epoch 1's end
        np.testing.assert_array_equal(seen[0][k], w)
