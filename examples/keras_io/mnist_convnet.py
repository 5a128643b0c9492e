# pyggml port of keras-io's examples/vision/mnist_convnet.py (a small convnet on MNIST).
#
# Data: the original loads MNIST (60,000 + 10,000 28x28 images) with
# keras.datasets.mnist.load_data(), a download.  This port loads scikit-learn's
# 1,797 bundled 8x8 digits drawn as 28x28 images in MNIST's format (uint8, the
# digit centred; 1,437 train / 360 test) from offline_data.py, because this
# machine and CI reach no data host.  --quick (CI; or KERAS_IO_QUICK=1) trains 8
# epochs instead of 15.  Everything else is the original's code, with
# `import pyggml as keras`.
# The port's own lines are the flags (offline_data.parse_flags: --quick, --seed,
# --threads), keras.utils.set_random_seed(SEED) and the quick sizes.
#
#     python examples/keras_io/mnist_convnet.py            # the original's 15 epochs
#     python examples/keras_io/mnist_convnet.py --quick

import numpy as np
import pyggml as keras
from pyggml import layers

import offline_data

QUICK, SEED = offline_data.parse_flags("MNIST convnet (keras-io) on pyggml")
keras.utils.set_random_seed(SEED)

# Model / data parameters
num_classes = 10
input_shape = (28, 28, 1)

# Load the data and split it between train and test sets
(x_train, y_train), (x_test, y_test) = offline_data.mnist_from_digits()

# Scale images to the [0, 1] range
x_train = x_train.astype("float32") / 255
x_test = x_test.astype("float32") / 255
# Make sure images have shape (28, 28, 1)
x_train = np.expand_dims(x_train, -1)
x_test = np.expand_dims(x_test, -1)
print("x_train shape:", x_train.shape)
print(x_train.shape[0], "train samples")
print(x_test.shape[0], "test samples")


# convert class vectors to binary class matrices
y_train = keras.utils.to_categorical(y_train, num_classes)
y_test = keras.utils.to_categorical(y_test, num_classes)

model = keras.Sequential(
    [
        keras.Input(shape=input_shape),
        layers.Conv2D(32, kernel_size=(3, 3), activation="relu"),
        layers.MaxPooling2D(pool_size=(2, 2)),
        layers.Conv2D(64, kernel_size=(3, 3), activation="relu"),
        layers.MaxPooling2D(pool_size=(2, 2)),
        layers.Flatten(),
        layers.Dropout(0.5),
        layers.Dense(num_classes, activation="softmax"),
    ]
)

model.summary()

batch_size = 128
epochs = 15 if not QUICK else 8

model.compile(loss="categorical_crossentropy", optimizer="adam", metrics=["accuracy"])

model.fit(x_train, y_train, batch_size=batch_size, epochs=epochs, validation_split=0.1)

score = model.evaluate(x_test, y_test, verbose=0)
print("Test loss:", score[0])
print("Test accuracy:", score[1])
