# pyggml port of keras-io's examples/vision/autoencoder.py (a convolutional
# autoencoder trained to reconstruct, then to denoise, MNIST digits).
#
# Data: the original loads MNIST with keras.datasets.mnist.load_data(), a
# download.  This port loads scikit-learn's bundled digits drawn as 28x28 images
# in MNIST's format (offline_data.mnist_from_digits(): 1,437 train / 360 test),
# because this machine and CI reach no data host.  matplotlib is used when
# installed (offline_data.pyplot(): the file backend; without it the plot calls
# do nothing).  --quick (CI; or KERAS_IO_QUICK=1) trains 3 + 3 epochs instead
# of 50 + 100.  Everything else is the original's code, importing from pyggml
# where it imports from tensorflow.keras.
# The port's own lines are the flags (offline_data.parse_flags: --quick, --seed,
# --threads), keras.utils.set_random_seed(SEED), the quick sizes, and a last line
# printing the metric tests/test_keras_io.py reads (marked "ours").
#
#     python examples/keras_io/autoencoder.py            # the original's 50 + 100 epochs
#     python examples/keras_io/autoencoder.py --quick

import numpy as np

from pyggml.models import Model
from pyggml.layers import Conv2D, MaxPooling2D, Input, UpSampling2D

import offline_data
import pyggml

QUICK, SEED = offline_data.parse_flags("Convolutional autoencoder for image denoising (keras-io) on pyggml")
pyggml.utils.set_random_seed(SEED)
plt = offline_data.pyplot()


def preprocess(dataset):
    """
    Normalizes the supplied dataset and reshapes it into the appropriate format.
    """

    dataset = dataset.astype("float32") / 255.0
    dataset = np.reshape(dataset, (len(dataset), 28, 28, 1))
    return dataset


def noise(dataset):
    """
    Adds random noise to each image in the supplied dataset.
    """

    noise_factor = 0.4
    noisy_dataset = dataset + noise_factor * np.random.normal(
        loc=0.0, scale=1.0, size=dataset.shape
    )

    return np.clip(noisy_dataset, 0.0, 1.0)


def display(dataset1, dataset2):
    """
    Displays ten random images from each one of the supplied datasets.
    """

    n = 10

    indices = np.random.randint(len(dataset1), size=n)
    images1 = dataset1[indices, :]
    images2 = dataset2[indices, :]

    plt.figure(figsize=(20, 4))
    for i, (image1, image2) in enumerate(zip(images1, images2)):
        ax = plt.subplot(2, n, i + 1)
        plt.imshow(image1.reshape(28, 28))
        plt.gray()
        ax.get_xaxis().set_visible(False)
        ax.get_yaxis().set_visible(False)

        ax = plt.subplot(2, n, i + 1 + n)
        plt.imshow(image2.reshape(28, 28))
        plt.gray()
        ax.get_xaxis().set_visible(False)
        ax.get_yaxis().set_visible(False)

    plt.show()


# We only need images from the dataset. We will never use the target values so
# we aren't going to load them.
(train_dataset, _), (test_dataset, _) = offline_data.mnist_from_digits()

# Normalize and reshape the data
train_dataset = preprocess(train_dataset)
test_dataset = preprocess(test_dataset)

# Create a copy of the datasets with added noise
noisy_train_dataset = noise(train_dataset)
noisy_test_dataset = noise(test_dataset)

# Display the train dataset and the version with added noise
display(train_dataset, noisy_train_dataset)

input = Input(shape=(28, 28, 1))

# Encoder
x = Conv2D(32, (3, 3), activation="relu", padding="same")(input)
x = MaxPooling2D((2, 2), padding="same")(x)
x = Conv2D(32, (3, 3), activation="relu", padding="same")(x)
x = MaxPooling2D((2, 2), padding="same")(x)

# Decoder
x = Conv2D(32, (3, 3), activation="relu", padding="same")(x)
x = UpSampling2D((2, 2))(x)
x = Conv2D(32, (3, 3), activation="relu", padding="same")(x)
x = UpSampling2D((2, 2))(x)
x = Conv2D(1, (3, 3), activation="sigmoid", padding="same")(x)

# Autoencoder
autoencoder = Model(input, x)
autoencoder.compile(optimizer="adam", loss="binary_crossentropy")
autoencoder.summary()

autoencoder.fit(
    x=train_dataset,
    y=train_dataset,
    epochs=50 if not QUICK else 3,
    batch_size=128,
    shuffle=True,
    validation_data=(test_dataset, test_dataset),
)
# ours: the number the test compares with the PyTorch twin's
print("Reconstruction val_loss:", autoencoder.evaluate(test_dataset, test_dataset, verbose=0))

predictions = autoencoder.predict(test_dataset)
display(test_dataset, predictions)

autoencoder.fit(
    x=noisy_train_dataset,
    y=train_dataset,
    epochs=100 if not QUICK else 3,
    batch_size=128,
    shuffle=True,
    validation_data=(noisy_test_dataset, test_dataset),
)
# ours: the number the test compares with the PyTorch twin's
print("Denoising val_loss:", autoencoder.evaluate(noisy_test_dataset, test_dataset, verbose=0))

predictions = autoencoder.predict(noisy_test_dataset)
display(noisy_test_dataset, predictions)
