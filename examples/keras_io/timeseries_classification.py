# pyggml port of keras-io's examples/timeseries/timeseries_classification_from_scratch.py
# (a fully convolutional network on the FordA engine-noise series).
#
# Data: the original reads FordA_TRAIN.tsv / FordA_TEST.tsv (3,601 + 1,320 series
# of 500 readings, labels -1/1) from a URL.  This port makes series of the same
# shapes and types with offline_data.forda_like() (random background, and short
# bursts of a fast or a slow oscillation telling the class), because this
# machine and CI reach no data host.  matplotlib is used when installed
# (offline_data.pyplot(): the file backend; without it the plot calls do
# nothing).  --quick (CI; or KERAS_IO_QUICK=1) makes 1,200 + 600 series of 64
# readings and trains 15 epochs instead of 500.  Everything else is the
# original's code, with `import pyggml as keras` (the checkpoint keeps the
# original's name, best_model.keras; it holds a GGUF file).
# The port's own lines are the flags (offline_data.parse_flags: --quick, --seed,
# --threads), keras.utils.set_random_seed(SEED) and the quick sizes.
#
#     python examples/keras_io/timeseries_classification.py          # 500 epochs (early stopping)
#     python examples/keras_io/timeseries_classification.py --quick

import pyggml as keras
import numpy as np
from sklearn.metrics import accuracy_score

import offline_data

QUICK, SEED = offline_data.parse_flags("Timeseries classification from scratch (keras-io) on pyggml")
keras.utils.set_random_seed(SEED)
plt = offline_data.pyplot()

if QUICK:
    (x_train, y_train), (x_test, y_test) = offline_data.forda_like(n_train=1200, n_test=600, length=64)
else:
    (x_train, y_train), (x_test, y_test) = offline_data.forda_like()

classes = np.unique(np.concatenate((y_train, y_test), axis=0))

plt.figure()
for c in classes:
    c_x_train = x_train[y_train == c]
    plt.plot(c_x_train[0], label="class " + str(c))
plt.legend(loc="best")
plt.show()
plt.close()

x_train = x_train.reshape((x_train.shape[0], x_train.shape[1], 1))
x_test = x_test.reshape((x_test.shape[0], x_test.shape[1], 1))

num_classes = len(np.unique(y_train))

idx = np.random.permutation(len(x_train))
x_train = x_train[idx]
y_train = y_train[idx]

y_train[y_train == -1] = 0
y_test[y_test == -1] = 0


def make_model(input_shape):
    input_layer = keras.layers.Input(input_shape)

    conv1 = keras.layers.Conv1D(filters=64, kernel_size=3, padding="same")(input_layer)
    conv1 = keras.layers.BatchNormalization()(conv1)
    conv1 = keras.layers.ReLU()(conv1)

    conv2 = keras.layers.Conv1D(filters=64, kernel_size=3, padding="same")(conv1)
    conv2 = keras.layers.BatchNormalization()(conv2)
    conv2 = keras.layers.ReLU()(conv2)

    conv3 = keras.layers.Conv1D(filters=64, kernel_size=3, padding="same")(conv2)
    conv3 = keras.layers.BatchNormalization()(conv3)
    conv3 = keras.layers.ReLU()(conv3)

    gap = keras.layers.GlobalAveragePooling1D()(conv3)

    output_layer = keras.layers.Dense(num_classes, activation="softmax")(gap)

    return keras.models.Model(inputs=input_layer, outputs=output_layer)


model = make_model(input_shape=x_train.shape[1:])
keras.utils.plot_model(model, show_shapes=True)

epochs = 500 if not QUICK else 15
batch_size = 32

callbacks = [
    keras.callbacks.ModelCheckpoint(
        "best_model.keras", save_best_only=True, monitor="val_loss"
    ),
    keras.callbacks.ReduceLROnPlateau(
        monitor="val_loss", factor=0.5, patience=20, min_lr=0.0001
    ),
    keras.callbacks.EarlyStopping(monitor="val_loss", patience=50, verbose=1),
]
model.compile(
    optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"]
)
history = model.fit(
    x_train,
    y_train,
    batch_size=batch_size,
    epochs=epochs,
    callbacks=callbacks,
    validation_split=0.2,
    verbose=1,
)

model = keras.models.load_model("best_model.keras")

y_pred = model.predict(x_test).argmax(axis=1)

print("Test accuracy", accuracy_score(y_pred, y_test))

metric = "accuracy"
plt.figure()
plt.plot(history.history[metric])
plt.plot(history.history["val_" + metric])
plt.title("model " + metric)
plt.ylabel(metric, fontsize="large")
plt.xlabel("epoch", fontsize="large")
plt.legend(["train", "val"], loc="best")
plt.show()
plt.close()
