# pyggml port of keras-io's examples/generative/vae.py (a convolutional variational
# autoencoder on MNIST digits, trained by a custom train_step on a GradientTape).
#
# Data: the original loads MNIST with keras.datasets.mnist.load_data(), a
# download.  This port loads scikit-learn's bundled digits drawn as 28x28 images
# in MNIST's format (offline_data.mnist_from_digits(): 1,437 train / 360 test),
# because this machine and CI reach no data host.  matplotlib is used when
# installed (offline_data.pyplot(): the file backend; without it the plot calls
# do nothing).  --quick (CI; or KERAS_IO_QUICK=1) trains 3 epochs on 512 of the
# training images instead of 30 on all of them (a check that it runs and
# learns, not a trained VAE: the mean image scores 244 on the metric below).  Everything else is the
# original's code, with pyggml where it has tensorflow and keras
# (tf.GradientTape is pg.GradientTape, tf.reduce_* and tf.exp are pyggml.ops').
# The port's own lines are the flags (offline_data.parse_flags: --quick, --seed,
# --threads), keras.utils.set_random_seed(SEED), the quick sizes, and a last line
# printing the metric tests/test_keras_io.py reads (marked "ours").
#
#     python examples/keras_io/vae.py            # the original's 30 epochs
#     python examples/keras_io/vae.py --quick

import numpy as np

import pyggml as keras
from pyggml import layers, ops

import offline_data

QUICK, SEED = offline_data.parse_flags("Variational autoencoder (keras-io) on pyggml")
keras.utils.set_random_seed(SEED)
plt = offline_data.pyplot()


class Sampling(layers.Layer):
    """Uses (z_mean, z_log_var) to sample z, the vector encoding a digit."""

    def call(self, inputs):
        z_mean, z_log_var = inputs
        batch = ops.shape(z_mean)[0]
        dim = ops.shape(z_mean)[1]
        epsilon = keras.random.normal(shape=(batch, dim))
        return z_mean + ops.exp(0.5 * z_log_var) * epsilon


latent_dim = 2

encoder_inputs = keras.Input(shape=(28, 28, 1))
x = layers.Conv2D(32, 3, activation="relu", strides=2, padding="same")(encoder_inputs)
x = layers.Conv2D(64, 3, activation="relu", strides=2, padding="same")(x)
x = layers.Flatten()(x)
x = layers.Dense(16, activation="relu")(x)
z_mean = layers.Dense(latent_dim, name="z_mean")(x)
z_log_var = layers.Dense(latent_dim, name="z_log_var")(x)
z = Sampling()([z_mean, z_log_var])
encoder = keras.Model(encoder_inputs, [z_mean, z_log_var, z], name="encoder")
encoder.summary()

latent_inputs = keras.Input(shape=(latent_dim,))
x = layers.Dense(7 * 7 * 64, activation="relu")(latent_inputs)
x = layers.Reshape((7, 7, 64))(x)
x = layers.Conv2DTranspose(64, 3, activation="relu", strides=2, padding="same")(x)
x = layers.Conv2DTranspose(32, 3, activation="relu", strides=2, padding="same")(x)
decoder_outputs = layers.Conv2DTranspose(1, 3, activation="sigmoid", padding="same")(x)
decoder = keras.Model(latent_inputs, decoder_outputs, name="decoder")
decoder.summary()


class VAE(keras.Model):
    def __init__(self, encoder, decoder, **kwargs):
        super().__init__(**kwargs)
        self.encoder = encoder
        self.decoder = decoder
        self.total_loss_tracker = keras.metrics.Mean(name="total_loss")
        self.reconstruction_loss_tracker = keras.metrics.Mean(name="reconstruction_loss")
        self.kl_loss_tracker = keras.metrics.Mean(name="kl_loss")

    @property
    def metrics(self):
        return [
            self.total_loss_tracker,
            self.reconstruction_loss_tracker,
            self.kl_loss_tracker,
        ]

    def train_step(self, data):
        with keras.GradientTape() as tape:
            z_mean, z_log_var, z = self.encoder(data)
            reconstruction = self.decoder(z)
            reconstruction_loss = ops.mean(
                ops.sum(keras.losses.binary_crossentropy(data, reconstruction), axis=(1, 2))
            )
            kl_loss = -0.5 * (1 + z_log_var - ops.square(z_mean) - ops.exp(z_log_var))
            kl_loss = ops.mean(ops.sum(kl_loss, axis=1))
            total_loss = reconstruction_loss + kl_loss
        grads = tape.gradient(total_loss, self.trainable_weights)
        self.optimizer.apply_gradients(zip(grads, self.trainable_weights))
        self.total_loss_tracker.update_state(total_loss)
        self.reconstruction_loss_tracker.update_state(reconstruction_loss)
        self.kl_loss_tracker.update_state(kl_loss)
        return {
            "loss": self.total_loss_tracker.result(),
            "reconstruction_loss": self.reconstruction_loss_tracker.result(),
            "kl_loss": self.kl_loss_tracker.result(),
        }


(x_train, y_train), (x_test, y_test) = offline_data.mnist_from_digits()
mnist_digits = x_train[:512] if QUICK else np.concatenate([x_train, x_test], axis=0)
mnist_digits = np.expand_dims(mnist_digits, -1).astype("float32") / 255

vae = VAE(encoder, decoder)
vae.compile(optimizer=keras.optimizers.Adam())
vae.fit(mnist_digits, epochs=3 if QUICK else 30, batch_size=128)


def plot_latent_space(vae, n=30, figsize=15):
    # display a n*n 2D manifold of digits
    digit_size = 28
    scale = 1.0
    figure = np.zeros((digit_size * n, digit_size * n))
    grid_x = np.linspace(-scale, scale, n)
    grid_y = np.linspace(-scale, scale, n)[::-1]
    z_samples = np.array([[xi, yi] for yi in grid_y for xi in grid_x], dtype="float32")
    decoded = vae.decoder.predict(z_samples, verbose=0)
    for k, digit in enumerate(decoded):
        i, j = divmod(k, n)
        figure[i * digit_size:(i + 1) * digit_size, j * digit_size:(j + 1) * digit_size] = digit.reshape(28, 28)
    plt.figure(figsize=(figsize, figsize))
    plt.imshow(figure, cmap="Greys_r")
    plt.show()


plot_latent_space(vae)


def plot_label_clusters(vae, data, labels):
    # display a 2D plot of the digit classes in the latent space
    z_mean, _, _ = vae.encoder.predict(data, verbose=0)
    plt.figure(figsize=(12, 10))
    plt.scatter(z_mean[:, 0], z_mean[:, 1], c=labels)
    plt.colorbar()
    plt.show()


plot_label_clusters(vae, np.expand_dims(x_train, -1).astype("float32") / 255, y_train)

# ours: the held-out images' reconstruction loss (binary cross-entropy summed over the
# pixels, the mean over images), decoded from z_mean: the number the test compares
# with the PyTorch twin's
test_images = np.expand_dims(x_test, -1).astype("float32") / 255
z_test = vae.encoder.predict(test_images, verbose=0)[0]
decoded = np.clip(vae.decoder.predict(z_test, verbose=0), 1e-7, 1 - 1e-7)
bce = -(test_images * np.log(decoded) + (1 - test_images) * np.log(1 - decoded))
print("Test reconstruction loss:", float(bce.sum(axis=(1, 2, 3)).mean()))
