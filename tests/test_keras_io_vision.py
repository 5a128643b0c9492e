"""keras-io's vision examples as a Keras user ports them (``import pyggml as keras``): each
test runs an example's own model-building and training code, shrunk to small sizes, on
random data of the example's shapes for a step or two, and checks what can be checked
against numpy: image_classification_from_scratch (a directory of JPEGs, augmentation
mapped over the dataset, a small Xception, logits and ``ops.sigmoid`` on the prediction),
image_classification_with_vision_transformer (Patches with ``ops.image.extract_patches``,
a PatchEncoder, Normalization + Resizing + augmentation in front), mlp_image_classification
(MLP-Mixer, FNet with ``ops.fft2``, gMLP), and siamese_contrastive (a Lambda distance with
``keras.backend.epsilon()`` and a contrastive loss function)."""

import os

import numpy as np
import pytest

import pyggml as keras
from pyggml import layers, ops

RNG = np.random.default_rng(5)


# --- image_classification_from_scratch ---------------------------------------------------------------

def _pet_images(root, per_class=12):
    Image = pytest.importorskip("PIL.Image")
    for k, cls in enumerate(("Cat", "Dog")):
        d = os.path.join(root, "PetImages", cls)
        os.makedirs(d)
        for i in range(per_class):
            a = RNG.integers(0, 256, (30, 34, 3)).astype(np.uint8)
            a[..., 0] = np.clip(a[..., 0].astype(int) + 90 * k, 0, 255)
            Image.fromarray(a).save(os.path.join(d, f"{i}.jpg"), "JPEG")
    return os.path.join(root, "PetImages")


def test_image_classification_from_scratch(tmp_path):
    from pyggml import data as tf_data
    pets = _pet_images(str(tmp_path))
    image_size = (20, 20)
    train_ds, val_ds = keras.utils.image_dataset_from_directory(
        pets, validation_split=0.2, subset="both", seed=1337, image_size=image_size, batch_size=8)

    data_augmentation_layers = [layers.RandomFlip("horizontal"), layers.RandomRotation(0.1)]

    def data_augmentation(images):
        for layer in data_augmentation_layers:
            images = layer(images)
        return images

    # the example's eager look at augmented batches: the layers take the dataset's batches
    for images, _ in train_ds.take(1):
        augmented = data_augmentation(images)
        assert np.asarray(augmented).shape == np.asarray(images).shape
        np.testing.assert_array_equal(layers.RandomFlip("horizontal")(images, training=False), images)
    train_ds = train_ds.map(lambda img, label: (data_augmentation(img), label),
                            num_parallel_calls=tf_data.AUTOTUNE).prefetch(tf_data.AUTOTUNE)
    val_ds = val_ds.prefetch(tf_data.AUTOTUNE)

    def make_model(input_shape, num_classes):
        inputs = keras.Input(shape=input_shape)
        x = layers.Rescaling(1.0 / 255)(inputs)
        x = layers.Conv2D(16, 3, strides=2, padding="same")(x)
        x = layers.BatchNormalization()(x)
        x = layers.Activation("relu")(x)
        previous_block_activation = x
        for size in [16, 32]:
            x = layers.Activation("relu")(x)
            x = layers.SeparableConv2D(size, 3, padding="same")(x)
            x = layers.BatchNormalization()(x)
            x = layers.MaxPooling2D(3, strides=2, padding="same")(x)
            residual = layers.Conv2D(size, 1, strides=2, padding="same")(previous_block_activation)
            x = layers.add([x, residual])
            previous_block_activation = x
        x = layers.GlobalAveragePooling2D()(x)
        units = 1 if num_classes == 2 else num_classes
        x = layers.Dropout(0.25)(x)
        outputs = layers.Dense(units, activation=None)(x)
        return keras.Model(inputs, outputs)

    model = make_model(input_shape=image_size + (3,), num_classes=2)
    model.compile(optimizer=keras.optimizers.Adam(3e-4), loss=keras.losses.BinaryCrossentropy(from_logits=True),
                  metrics=[keras.metrics.BinaryAccuracy(name="acc")])
    ckpt = str(tmp_path / "save_at_{epoch}.keras")
    history = model.fit(train_ds, epochs=1, callbacks=[keras.callbacks.ModelCheckpoint(ckpt)],
                        validation_data=val_ds, verbose=0)
    assert set(history.history) >= {"loss", "acc", "val_loss", "val_acc"}
    assert np.isfinite(history.history["loss"][0])

    img = keras.utils.load_img(os.path.join(pets, "Cat", "3.jpg"), target_size=image_size)
    img_array = keras.utils.img_to_array(img)
    img_array = keras.ops.expand_dims(img_array, 0)
    predictions = model.predict(img_array, verbose=0)
    score = float(keras.ops.sigmoid(predictions[0][0]))
    assert abs(score - 1 / (1 + np.exp(-float(predictions[0][0])))) < 1e-6
    saved = keras.load_model(str(tmp_path / "save_at_1.keras"))
    np.testing.assert_allclose(saved.predict(img_array, verbose=0), predictions, rtol=1e-6)


# --- image_classification_with_vision_transformer ----------------------------------------------------

class Patches(layers.Layer):
    def __init__(self, patch_size):
        super().__init__()
        self.patch_size = patch_size

    def call(self, images):
        input_shape = ops.shape(images)
        batch_size, height, width, channels = input_shape[0], input_shape[1], input_shape[2], input_shape[3]
        num_patches_h = height // self.patch_size
        num_patches_w = width // self.patch_size
        patches = keras.ops.image.extract_patches(images, size=self.patch_size)
        return ops.reshape(patches, (batch_size, num_patches_h * num_patches_w,
                                     self.patch_size * self.patch_size * channels))

    def get_config(self):
        config = super().get_config()
        config.update({"patch_size": self.patch_size})
        return config


class PatchEncoder(layers.Layer):
    def __init__(self, num_patches, projection_dim):
        super().__init__()
        self.num_patches = num_patches
        self.projection = layers.Dense(units=projection_dim)
        self.position_embedding = layers.Embedding(input_dim=num_patches, output_dim=projection_dim)

    def call(self, patch):
        positions = ops.expand_dims(ops.arange(start=0, stop=self.num_patches, step=1), axis=0)
        return self.projection(patch) + self.position_embedding(positions)


def _mlp(x, hidden_units, dropout_rate):
    for units in hidden_units:
        x = layers.Dense(units, activation=keras.activations.gelu)(x)
        x = layers.Dropout(dropout_rate)(x)
    return x


def test_vision_transformer(tmp_path):
    x_train = RNG.integers(0, 256, (48, 16, 16, 3)).astype("uint8")
    y_train = RNG.integers(0, 10, (48, 1))
    image_size, patch_size, projection_dim = 12, 4, 16
    num_patches = (image_size // patch_size) ** 2
    data_augmentation = keras.Sequential(
        [layers.Normalization(), layers.Resizing(image_size, image_size), layers.RandomFlip("horizontal"),
         layers.RandomRotation(factor=0.02), layers.RandomZoom(height_factor=0.2, width_factor=0.2)],
        name="data_augmentation")
    data_augmentation.layers[0].adapt(x_train)

    # the example's look at one image's patches, eagerly
    image = x_train[3]
    resized_image = ops.image.resize(ops.convert_to_tensor([image]), size=(image_size, image_size))
    patches = Patches(patch_size)(resized_image)
    assert patches.shape == (1, num_patches, patch_size * patch_size * 3)
    for i, patch in enumerate(patches[0]):
        patch_img = ops.reshape(patch, (patch_size, patch_size, 3))
        r, c = divmod(i, image_size // patch_size)
        np.testing.assert_allclose(ops.convert_to_numpy(patch_img),
                                   resized_image[0, r * 4:r * 4 + 4, c * 4:c * 4 + 4], rtol=1e-6)

    inputs = keras.Input(shape=(16, 16, 3))
    augmented = data_augmentation(inputs)
    encoded = PatchEncoder(num_patches, projection_dim)(Patches(patch_size)(augmented))
    x1 = layers.LayerNormalization(epsilon=1e-6)(encoded)
    attention_output = layers.MultiHeadAttention(num_heads=2, key_dim=projection_dim, dropout=0.1)(x1, x1)
    x2 = layers.Add()([attention_output, encoded])
    x3 = _mlp(layers.LayerNormalization(epsilon=1e-6)(x2), [projection_dim * 2, projection_dim], 0.1)
    encoded = layers.Add()([x3, x2])
    representation = layers.Dropout(0.5)(layers.Flatten()(layers.LayerNormalization(epsilon=1e-6)(encoded)))
    logits = layers.Dense(10)(_mlp(representation, [32], 0.5))
    model = keras.Model(inputs=inputs, outputs=logits)
    model.compile(optimizer=keras.optimizers.AdamW(learning_rate=0.001, weight_decay=0.0001),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy"),
                           keras.metrics.SparseTopKCategoricalAccuracy(5, name="top-5-accuracy")])
    checkpoint_filepath = str(tmp_path / "checkpoint.weights.h5")
    checkpoint_callback = keras.callbacks.ModelCheckpoint(checkpoint_filepath, monitor="val_accuracy",
                                                          save_best_only=True, save_weights_only=True)
    history = model.fit(x=x_train, y=y_train, batch_size=16, epochs=2, validation_split=0.25,
                        callbacks=[checkpoint_callback], verbose=0)
    assert np.all(np.isfinite(history.history["loss"]))
    model.load_weights(checkpoint_filepath)
    _, accuracy, top_5_accuracy = model.evaluate(x_train[:16], y_train[:16], verbose=0)
    assert 0 <= accuracy <= top_5_accuracy <= 1


def test_normalization_runs_on_the_host_before_resizing_and_survives_save_load(tmp_path):
    x = RNG.uniform(0, 255, (10, 6, 8, 3)).astype(np.float32)
    prep = keras.Sequential([layers.Normalization(), layers.Resizing(4, 4), layers.RandomFlip("horizontal")])
    prep.layers[0].adapt(x)
    inputs = keras.Input(shape=(6, 8, 3))
    outputs = layers.Dense(2)(layers.Flatten()(prep(inputs)))
    model = keras.Model(inputs, outputs)
    model.compile(optimizer="adam", loss="mse")
    mean, var = x.mean(axis=(0, 1, 2), dtype=np.float64), x.var(axis=(0, 1, 2), dtype=np.float64)
    normed = (x - mean) / np.sqrt(var)
    w = model.get_weights()
    dense = [k for k in w if k.endswith(".weight")][0]
    want = ref_resize(normed, 4, 4).reshape(10, -1) @ w[dense].T.astype(np.float64) + w[dense[:-6] + "bias"]
    got = model.predict(x, verbose=0)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    # the eager call of the preprocessing model, in inference, gives the same normalised, resized images
    np.testing.assert_allclose(prep(x, training=False), ref_resize(normed, 4, 4), rtol=1e-4, atol=1e-4)
    model.fit(x, RNG.normal(size=(10, 2)), epochs=1, batch_size=5, verbose=0)
    got = model.predict(x, verbose=0)
    for path in (tmp_path / "m.gguf", tmp_path / "m.keras"):
        model.save(str(path))
        back = keras.load_model(str(path))
        np.testing.assert_allclose(back.predict(x, verbose=0), got, rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match="do not fit"):
        prep.layers[0].host_apply(np.zeros((2, 6, 8, 4)))


def ref_resize(a, h, w):
    def axis(n_in, n_out):
        m = np.zeros((n_out, n_in))
        for j in range(n_out):
            src = min(max((j + 0.5) * n_in / n_out - 0.5, 0.0), n_in - 1)
            lo = int(np.floor(src))
            m[j, lo] += 1 - (src - lo)
            m[j, min(lo + 1, n_in - 1)] += src - lo
        return m
    return np.einsum("ih,nhwc,jw->nijc", axis(a.shape[1], h), a, axis(a.shape[2], w))


# --- mlp_image_classification: MLP-Mixer, FNet, gMLP -------------------------------------------------

class MixerPatches(layers.Layer):
    def __init__(self, patch_size, **kwargs):
        super().__init__(**kwargs)
        self.patch_size = patch_size

    def call(self, x):
        patches = keras.ops.image.extract_patches(x, self.patch_size)
        batch_size = keras.ops.shape(patches)[0]
        num_patches = keras.ops.shape(patches)[1] * keras.ops.shape(patches)[2]
        patch_dim = keras.ops.shape(patches)[3]
        return keras.ops.reshape(patches, (batch_size, num_patches, patch_dim))


class PositionEmbedding(layers.Layer):
    def __init__(self, sequence_length, initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        self.sequence_length = int(sequence_length)
        self.initializer = keras.initializers.get(initializer)

    def get_config(self):
        config = super().get_config()
        config.update({"sequence_length": self.sequence_length,
                       "initializer": keras.initializers.serialize(self.initializer)})
        return config

    def build(self, input_shape):
        self.position_embeddings = self.add_weight(name="embeddings", shape=[self.sequence_length, input_shape[-1]],
                                                   initializer=self.initializer, trainable=True)
        super().build(input_shape)

    def call(self, inputs, start_index=0):
        shape = keras.ops.shape(inputs)
        position_embeddings = keras.ops.convert_to_tensor(self.position_embeddings)
        position_embeddings = keras.ops.slice(position_embeddings, (start_index, 0), (shape[-2], shape[-1]))
        return keras.ops.broadcast_to(position_embeddings, shape)

    def compute_output_shape(self, input_shape):
        return input_shape


class MLPMixerLayer(layers.Layer):
    def __init__(self, num_patches, hidden_units, dropout_rate, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.mlp1 = keras.Sequential([layers.Dense(units=num_patches, activation="gelu"),
                                      layers.Dense(units=num_patches), layers.Dropout(rate=dropout_rate)])
        self.mlp2 = keras.Sequential([layers.Dense(units=num_patches, activation="gelu"),
                                      layers.Dense(units=hidden_units), layers.Dropout(rate=dropout_rate)])
        self.normalize = layers.LayerNormalization(epsilon=1e-6)

    def call(self, inputs):
        x = self.normalize(inputs)
        mlp1_outputs = keras.ops.transpose(self.mlp1(keras.ops.transpose(x, axes=(0, 2, 1))), axes=(0, 2, 1))
        x = mlp1_outputs + inputs
        return x + self.mlp2(self.normalize(x))


class FNetLayer(layers.Layer):
    def __init__(self, embedding_dim, dropout_rate, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.ffn = keras.Sequential([layers.Dense(units=embedding_dim, activation="gelu"),
                                     layers.Dropout(rate=dropout_rate), layers.Dense(units=embedding_dim)])
        self.normalize1 = layers.LayerNormalization(epsilon=1e-6)
        self.normalize2 = layers.LayerNormalization(epsilon=1e-6)

    def call(self, inputs):
        x = keras.ops.fft2((inputs, keras.ops.zeros_like(inputs)))[0]
        x = self.normalize1(x + inputs)
        return self.normalize2(x + self.ffn(x))


class gMLPLayer(layers.Layer):
    def __init__(self, num_patches, embedding_dim, dropout_rate, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.channel_projection1 = keras.Sequential([layers.Dense(units=embedding_dim * 2, activation="gelu"),
                                                     layers.Dropout(rate=dropout_rate)])
        self.channel_projection2 = layers.Dense(units=embedding_dim)
        self.spatial_projection = layers.Dense(units=num_patches, bias_initializer="Ones")
        self.normalize1 = layers.LayerNormalization(epsilon=1e-6)
        self.normalize2 = layers.LayerNormalization(epsilon=1e-6)

    def spatial_gating_unit(self, x):
        u, v = keras.ops.split(x, indices_or_sections=2, axis=2)
        v = self.normalize2(v)
        v_projected = self.spatial_projection(keras.ops.transpose(v, axes=(0, 2, 1)))
        return u * keras.ops.transpose(v_projected, axes=(0, 2, 1))

    def call(self, inputs):
        x = self.normalize1(inputs)
        return x + self.channel_projection2(self.spatial_gating_unit(self.channel_projection1(x)))


@pytest.mark.parametrize("kind", ["mixer", "fnet", "gmlp"])
def test_mlp_image_classification(kind):
    x_train = RNG.integers(0, 256, (32, 16, 16, 3)).astype("uint8")
    y_train = RNG.integers(0, 10, (32, 1))
    image_size, patch_size, embedding_dim, num_blocks = 16, 4, 12, 2
    num_patches = (image_size // patch_size) ** 2
    data_augmentation = keras.Sequential([layers.Normalization(), layers.Resizing(image_size, image_size),
                                          layers.RandomFlip("horizontal"),
                                          layers.RandomZoom(height_factor=0.2, width_factor=0.2)])
    data_augmentation.layers[0].adapt(x_train)
    blocks = keras.Sequential({
        "mixer": lambda: [MLPMixerLayer(num_patches, embedding_dim, 0.2) for _ in range(num_blocks)],
        "fnet": lambda: [FNetLayer(embedding_dim, 0.2) for _ in range(num_blocks)],
        "gmlp": lambda: [gMLPLayer(num_patches, embedding_dim, 0.2) for _ in range(num_blocks)]}[kind]())
    inputs = layers.Input(shape=(16, 16, 3))
    x = layers.Dense(units=embedding_dim)(MixerPatches(patch_size)(data_augmentation(inputs)))
    if kind == "fnet":
        x = x + PositionEmbedding(sequence_length=num_patches)(x)
    x = blocks(x)
    representation = layers.Dropout(rate=0.2)(layers.GlobalAveragePooling1D()(x))
    model = keras.Model(inputs=inputs, outputs=layers.Dense(10)(representation))
    model.compile(optimizer=keras.optimizers.AdamW(learning_rate=0.003, weight_decay=0.0001),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=[keras.metrics.SparseCategoricalAccuracy(name="acc"),
                           keras.metrics.SparseTopKCategoricalAccuracy(5, name="top5-acc")])
    reduce_lr = keras.callbacks.ReduceLROnPlateau(monitor="val_loss", factor=0.5, patience=5)
    early_stopping = keras.callbacks.EarlyStopping(monitor="val_loss", patience=10, restore_best_weights=True)
    history = model.fit(x=x_train, y=y_train, batch_size=8, epochs=2, validation_split=0.25,
                        callbacks=[early_stopping, reduce_lr], verbose=0)
    assert np.all(np.isfinite(history.history["loss"]))
    _, accuracy, top_5_accuracy = model.evaluate(x_train, y_train, verbose=0)
    assert 0 <= accuracy <= top_5_accuracy <= 1


def test_fnet_fourier_mixing_matches_numpy():
    x = RNG.normal(size=(3, 5, 4)).astype(np.float32)
    inputs = keras.Input((5, 4))
    out = layers.Lambda(lambda t: keras.ops.fft2((t, keras.ops.zeros_like(t)))[0])(inputs)
    model = keras.Model(inputs, out)
    np.testing.assert_allclose(model.predict(x, verbose=0), np.fft.fft2(x.astype(np.float64)).real, rtol=1e-5,
                               atol=1e-5)


# --- siamese_contrastive ---------------------------------------------------------------------------

def euclidean_distance(vects):
    x, y = vects
    sum_square = ops.sum(ops.square(x - y), axis=1, keepdims=True)
    return ops.sqrt(ops.maximum(sum_square, keras.backend.epsilon()))


def loss(margin=1):
    def contrastive_loss(y_true, y_pred):
        square_pred = ops.square(y_pred)
        margin_square = ops.square(ops.maximum(margin - (y_pred), 0))
        return ops.mean((1 - y_true) * square_pred + (y_true) * margin_square)
    return contrastive_loss


def test_siamese_contrastive():
    n = 40
    x1 = RNG.uniform(0, 255, (n, 28, 28)).astype("float32")      # (n, 28, 28) into Input((28, 28, 1)), as Keras
    x2 = RNG.uniform(0, 255, (n, 28, 28)).astype("float32")
    labels = RNG.integers(0, 2, n).astype("float32")

    input = keras.layers.Input((28, 28, 1))
    x = keras.layers.BatchNormalization()(input)
    x = keras.layers.Conv2D(4, (5, 5), activation="tanh")(x)
    x = keras.layers.AveragePooling2D(pool_size=(2, 2))(x)
    x = keras.layers.Conv2D(16, (5, 5), activation="tanh")(x)
    x = keras.layers.AveragePooling2D(pool_size=(2, 2))(x)
    x = keras.layers.Flatten()(x)
    x = keras.layers.BatchNormalization()(x)
    x = keras.layers.Dense(10, activation="tanh")(x)
    embedding_network = keras.Model(input, x)

    input_1 = keras.layers.Input((28, 28, 1))
    input_2 = keras.layers.Input((28, 28, 1))
    tower_1 = embedding_network(input_1)
    tower_2 = embedding_network(input_2)
    merge_layer = keras.layers.Lambda(euclidean_distance, output_shape=(1,))([tower_1, tower_2])
    normal_layer = keras.layers.BatchNormalization()(merge_layer)
    output_layer = keras.layers.Dense(1, activation="sigmoid")(normal_layer)
    siamese = keras.Model(inputs=[input_1, input_2], outputs=output_layer)
    siamese.compile(loss=loss(margin=1), optimizer="RMSprop", metrics=["accuracy"])
    history = siamese.fit([x1, x2], labels, validation_data=([x1[:8], x2[:8]], labels[:8]), batch_size=16,
                          epochs=2, verbose=0)
    assert np.all(np.isfinite(history.history["loss"]))
    results = siamese.evaluate([x1, x2], labels, batch_size=n, verbose=0)
    p = siamese.predict([x1, x2], verbose=0).astype(np.float64)
    assert p.shape == (n, 1)
    y = labels[:, None]
    want = np.mean((1 - y) * p ** 2 + y * np.maximum(1 - p, 0) ** 2)
    assert abs(results[0] - want) < 1e-5
    assert abs(results[1] - np.mean((p > 0.5) == (y > 0.5))) < 1e-6
    # the embedding tower's distance, eagerly: the Lambda's function on arrays
    e1, e2 = embedding_network.predict(x1[:4], verbose=0), embedding_network.predict(x2[:4], verbose=0)
    d = euclidean_distance((e1, e2))
    np.testing.assert_allclose(d, np.sqrt(np.maximum(((e1 - e2) ** 2).sum(1, keepdims=True), 1e-7)), rtol=1e-5)


# --- convmixer ------------------------------------------------------------------------------------

def test_convmixer():
    from pyggml import data as tf_data
    x_train = RNG.integers(0, 256, (40, 16, 16, 3)).astype("uint8")
    y_train = RNG.integers(0, 10, (40, 1)).astype("uint8")
    augmentation_layers = [keras.layers.RandomCrop(16, 16), keras.layers.RandomFlip("horizontal")]

    def augment_images(images):
        for layer in augmentation_layers:
            images = layer(images, training=True)
        return images

    train_dataset = (tf_data.Dataset.from_tensor_slices((x_train, y_train)).shuffle(80).batch(16)
                     .map(lambda x, y: (augment_images(x), y), num_parallel_calls=tf_data.AUTOTUNE)
                     .prefetch(tf_data.AUTOTUNE))

    def activation_block(x):
        x = layers.Activation("gelu")(x)
        return layers.BatchNormalization()(x)

    inputs = keras.Input((16, 16, 3))
    x = layers.Rescaling(scale=1.0 / 255)(inputs)
    x = activation_block(layers.Conv2D(8, kernel_size=2, strides=2)(x))
    for _ in range(2):
        x0 = x
        x = layers.DepthwiseConv2D(kernel_size=5, padding="same")(x)
        x = layers.Add()([activation_block(x), x0])
        x = activation_block(layers.Conv2D(8, kernel_size=1)(x))
    x = layers.GlobalAvgPool2D()(x)
    model = keras.Model(inputs, layers.Dense(10, activation="softmax")(x))
    model.compile(optimizer=keras.optimizers.AdamW(learning_rate=0.001, weight_decay=0.0001),
                  loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    history = model.fit(train_dataset, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])

    # the example's look at the weights: Keras's list by position, Keras's layouts
    patch_embeddings = model.layers[2].get_weights()[0]
    assert patch_embeddings.shape == (2, 2, 3, 8)
    np.testing.assert_array_equal(patch_embeddings, model.layers[2].get_weights()["weight"].transpose(2, 3, 1, 0))
    found = [i for i, layer in enumerate(model.layers) if isinstance(layer, layers.DepthwiseConv2D)
             and layer.get_config()["kernel_size"] == (5, 5)]
    assert len(found) == 2
    kernel = model.layers[found[0]].get_weights()[0]
    assert kernel.shape == (5, 5, 8, 1)
    assert np.expand_dims(kernel.squeeze(), axis=2).shape == (5, 5, 1, 8)


def test_layer_weights_as_keras_lists():
    assert layers.GlobalAvgPool2D is layers.GlobalAveragePooling2D and layers.MaxPool2D is layers.MaxPooling2D
    assert layers.Convolution2D is layers.Conv2D and layers.AvgPool1D is layers.AveragePooling1D
    dense = layers.Dense(3)
    model = keras.Sequential([keras.Input((4,)), dense])
    model.compile(optimizer="sgd", loss="mse")
    kernel, bias = RNG.normal(size=(4, 3)), RNG.normal(size=3)
    dense.set_weights([kernel, bias])                       # Keras's (in, units) kernel
    np.testing.assert_allclose(dense.get_weights()["weight"], kernel.T, rtol=1e-6)
    np.testing.assert_allclose(dense.get_weights()[0], kernel, rtol=1e-6)
    np.testing.assert_allclose(dense.get_weights()[-1], bias, rtol=1e-6)
    assert [w.shape for w in dense.get_weights()[:]] == [(4, 3), (3,)]
    x = RNG.normal(size=(5, 4)).astype(np.float32)
    np.testing.assert_allclose(model.predict(x, verbose=0), x @ kernel + bias, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="2 weights"):
        dense.set_weights([kernel])
    with pytest.raises(ValueError, match=r"\(4, 3\)"):
        dense.set_weights([kernel.T, bias])
    with pytest.raises(IndexError, match="2 weights"):
        dense.get_weights()[2]


# --- oxford_pets_image_segmentation ------------------------------------------------------------------

def test_oxford_pets_image_segmentation(tmp_path):
    from pyggml import data as tf_data
    from pyggml.utils import load_img
    Image = pytest.importorskip("PIL.Image")
    input_dir, target_dir = tmp_path / "images", tmp_path / "trimaps"
    input_dir.mkdir()
    target_dir.mkdir()
    for i in range(8):
        a = RNG.integers(0, 256, (20, 24, 3)).astype(np.uint8)
        Image.fromarray(a).save(str(input_dir / f"p{i}.jpg"))
        Image.fromarray((1 + (a[..., 0] > 128) + (a[..., 1] > 200)).astype(np.uint8)).save(str(target_dir / f"p{i}.png"))
    input_img_paths = sorted(str(input_dir / f) for f in os.listdir(input_dir))
    target_img_paths = sorted(str(target_dir / f) for f in os.listdir(target_dir))
    img_size, num_classes = (16, 16), 3

    def load_img_masks(input_img_path, target_img_path):
        input_img = keras.utils.img_to_array(load_img(input_img_path, target_size=img_size))
        target_img = keras.utils.img_to_array(load_img(target_img_path, target_size=img_size, color_mode="grayscale",
                                                       interpolation="nearest"), dtype="uint8")
        target_img -= 1
        return input_img, target_img

    dataset = tf_data.Dataset.from_tensor_slices((input_img_paths, target_img_paths))
    dataset = dataset.map(load_img_masks, num_parallel_calls=tf_data.AUTOTUNE).batch(4)

    inputs = keras.Input(shape=img_size + (3,))
    x = layers.Activation("relu")(layers.BatchNormalization()(layers.Conv2D(8, 3, strides=2, padding="same")(inputs)))
    previous_block_activation = x
    x = layers.SeparableConv2D(16, 3, padding="same")(layers.Activation("relu")(x))
    x = layers.MaxPooling2D(3, strides=2, padding="same")(layers.BatchNormalization()(x))
    x = layers.add([x, layers.Conv2D(16, 1, strides=2, padding="same")(previous_block_activation)])
    previous_block_activation = x
    for filters in [16, 8]:
        x = layers.Conv2DTranspose(filters, 3, padding="same")(layers.Activation("relu")(x))
        x = layers.UpSampling2D(2)(layers.BatchNormalization()(x))
        residual = layers.Conv2D(filters, 1, padding="same")(layers.UpSampling2D(2)(previous_block_activation))
        x = layers.add([x, residual])
        previous_block_activation = x
    outputs = layers.Conv2D(num_classes, 3, activation="softmax", padding="same")(x)
    model = keras.Model(inputs, outputs)
    model.compile(optimizer=keras.optimizers.Adam(1e-4), loss="sparse_categorical_crossentropy")
    ckpt = str(tmp_path / "oxford_segmentation.keras")
    model.fit(dataset, epochs=2, validation_data=dataset,
              callbacks=[keras.callbacks.ModelCheckpoint(ckpt, save_best_only=True)], verbose=0)
    val_preds = model.predict(dataset, verbose=0)
    assert val_preds.shape == (8, 16, 16, 3)
    # the per-pixel sparse cross-entropy, against numpy
    xs, ys = zip(*[load_img_masks(a, b) for a, b in zip(input_img_paths, target_img_paths)])
    xs, ys = np.stack(xs), np.stack(ys)
    assert ys.shape == (8, 16, 16, 1) and set(np.unique(ys)) <= {0, 1, 2}
    # (on pixels scaled to [0, 1]: the example's 0-255 pixels can saturate the softmax, where the
    # loss, computed from the logits as TensorFlow's Keras does, and -log(p) of a rounded p differ)
    xs = xs / 255.0
    p = model.predict(xs, verbose=0).astype(np.float64)
    picked = np.take_along_axis(p, ys.astype(int), axis=-1)
    assert picked.min() > 1e-5
    want = -np.mean(np.log(picked))
    assert abs(model.evaluate(xs, ys, batch_size=8, verbose=0) - want) < 1e-4 * max(1.0, want)
    mask = np.expand_dims(np.argmax(val_preds[0], axis=-1), axis=-1)
    assert keras.utils.array_to_img(mask).size == (16, 16)
    assert os.path.exists(ckpt)


# --- attention_mil_classification ---------------------------------------------------------------------

class MILAttentionLayer(layers.Layer):
    def __init__(self, weight_params_dim, kernel_initializer="glorot_uniform", kernel_regularizer=None,
                 use_gated=False, **kwargs):
        super().__init__(**kwargs)
        self.weight_params_dim = weight_params_dim
        self.use_gated = use_gated
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)

    def build(self, input_shape):
        input_dim = input_shape[0][1]
        self.v_weight_params = self.add_weight(shape=(input_dim, self.weight_params_dim),
                                               initializer=self.kernel_initializer, name="v",
                                               regularizer=self.kernel_regularizer, trainable=True)
        self.w_weight_params = self.add_weight(shape=(self.weight_params_dim, 1), initializer=self.kernel_initializer,
                                               name="w", regularizer=self.kernel_regularizer, trainable=True)
        self.u_weight_params = self.add_weight(shape=(input_dim, self.weight_params_dim),
                                               initializer=self.kernel_initializer, name="u",
                                               regularizer=self.kernel_regularizer, trainable=True)

    def call(self, inputs):
        instances = ops.stack([self.compute_attention_scores(instance) for instance in inputs])
        alpha = ops.softmax(instances, axis=0)
        return [alpha[i] for i in range(alpha.shape[0])]

    def compute_attention_scores(self, instance):
        original_instance = instance
        instance = ops.tanh(ops.tensordot(instance, self.v_weight_params, axes=1))
        instance = instance * ops.sigmoid(ops.tensordot(original_instance, self.u_weight_params, axes=1))
        return ops.tensordot(instance, self.w_weight_params, axes=1)


def test_attention_mil_classification():
    bag_size, n = 3, 12
    data = [RNG.uniform(0, 1, (n, 8, 8)) for _ in range(bag_size)]
    labels = RNG.integers(0, 2, (n, 1))
    inputs, embeddings = [], []
    shared_dense_layer_1 = layers.Dense(16, activation="relu")
    shared_dense_layer_2 = layers.Dense(8, activation="relu")
    for _ in range(bag_size):
        inp = layers.Input((8, 8))
        embeddings.append(shared_dense_layer_2(shared_dense_layer_1(layers.Flatten()(inp))))
        inputs.append(inp)
    alpha = MILAttentionLayer(weight_params_dim=6, kernel_regularizer=keras.regularizers.L2(0.01), use_gated=True,
                              name="alpha")(embeddings)
    multiply_layers = [layers.multiply([alpha[i], embeddings[i]]) for i in range(len(alpha))]
    output = layers.Dense(2, activation="softmax")(layers.concatenate(multiply_layers, axis=1))
    model = keras.Model(inputs, output)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    negative, positive = int((labels == 0).sum()), int((labels == 1).sum())
    model.fit(data, labels, validation_data=(data, labels), epochs=1, batch_size=1, verbose=0,
              class_weight={0: n / 2 / max(negative, 1), 1: n / 2 / max(positive, 1)})
    intermediate_model = keras.Model(model.input, model.get_layer("alpha").output)
    attention_weights = np.squeeze(np.swapaxes(intermediate_model.predict(data, verbose=0), 1, 0))
    assert attention_weights.shape == (n, bag_size)
    np.testing.assert_allclose(attention_weights.sum(axis=1), 1.0, rtol=1e-5)
    # the attention scores against numpy, from the layer's weights (Keras's layouts by position)
    w = model.get_layer("alpha").get_weights()
    v, wv, u = w[0].astype(np.float64), w[1].astype(np.float64), w[2].astype(np.float64)
    emb = keras.Model(inputs, embeddings).predict(data, verbose=0)
    scores = np.stack([(np.tanh(e @ v) * (1 / (1 + np.exp(-(e @ u))))) @ wv for e in emb])[..., 0]
    want = np.exp(scores - scores.max(0)) / np.exp(scores - scores.max(0)).sum(0)
    np.testing.assert_allclose(attention_weights, want.T, rtol=1e-4, atol=1e-5)


# --- pointnet ---------------------------------------------------------------------------------------

class OrthogonalRegularizer(keras.regularizers.Regularizer):
    def __init__(self, num_features, l2reg=0.001, plain_numpy_eye=False):
        self.num_features = num_features
        self.l2reg = l2reg
        # keras.ops.eye computes at once, outside any graph: its array becomes a constant of the
        # graph `xxt - self.eye` is in (a plain numpy array cannot: see the test below)
        self.eye = np.eye(num_features) if plain_numpy_eye else keras.ops.eye(num_features)

    def __call__(self, x):
        x = keras.ops.reshape(x, (-1, self.num_features, self.num_features))
        xxt = keras.ops.tensordot(x, x, axes=(2, 2))
        xxt = keras.ops.reshape(xxt, (-1, self.num_features, self.num_features))
        return keras.ops.sum(self.l2reg * keras.ops.square(xxt - self.eye))


def _pointnet(num_points, plain_numpy_eye=False):
    def conv_bn(x, filters):
        x = layers.Conv1D(filters, kernel_size=1, padding="valid")(x)
        return layers.Activation("relu")(layers.BatchNormalization(momentum=0.0)(x))

    def dense_bn(x, filters):
        return layers.Activation("relu")(layers.BatchNormalization(momentum=0.0)(layers.Dense(filters)(x)))

    def tnet(inputs, num_features):
        bias = keras.initializers.Constant(np.eye(num_features).flatten())
        reg = OrthogonalRegularizer(num_features, plain_numpy_eye=plain_numpy_eye)
        x = conv_bn(conv_bn(inputs, 8), 16)
        x = dense_bn(layers.GlobalMaxPooling1D()(x), 8)
        x = layers.Dense(num_features * num_features, kernel_initializer="zeros", bias_initializer=bias,
                         activity_regularizer=reg)(x)
        feat_T = layers.Reshape((num_features, num_features))(x)
        return layers.Dot(axes=(2, 1))([inputs, feat_T])

    inputs = keras.Input(shape=(num_points, 3))
    x = tnet(inputs, 3)
    x = conv_bn(x, 8)
    x = tnet(x, 8)
    x = layers.GlobalMaxPooling1D()(conv_bn(x, 16))
    x = layers.Dropout(0.3)(dense_bn(x, 8))
    return keras.Model(inputs=inputs, outputs=layers.Dense(4, activation="softmax")(x), name="pointnet")


def test_pointnet():
    from pyggml import data as tf_data
    points = RNG.normal(size=(24, 32, 3)).astype("float32")
    labels = RNG.integers(0, 4, 24)

    def augment(p, label):
        p = p + np.random.uniform(-0.005, 0.005, p.shape)
        return np.random.permutation(p), label

    dataset = tf_data.Dataset.from_tensor_slices((points, labels)).shuffle(24).map(augment)
    train_dataset, validation_dataset = dataset.take(16).batch(8), dataset.skip(16).batch(8)
    model = _pointnet(32)
    model.compile(loss="sparse_categorical_crossentropy", optimizer=keras.optimizers.Adam(learning_rate=0.001),
                  metrics=["sparse_categorical_accuracy"])
    # before training the T-nets are the identity (zero kernel, the identity as bias): the
    # first Dot gives the points back, and the orthogonality penalty is zero
    tnet_out = keras.Model(model.inputs, model.get_layer("dot").output)
    np.testing.assert_allclose(tnet_out.predict(points[:4], verbose=0), points[:4], rtol=1e-6, atol=1e-6)
    history = model.fit(train_dataset, epochs=2, validation_data=validation_dataset, verbose=0)
    assert np.all(np.isfinite(history.history["loss"]))
    batch_points, batch_labels = list(validation_dataset.take(1))[0]
    preds = keras.ops.argmax(model.predict(batch_points, verbose=0), -1)
    assert preds.shape == (8,) and set(np.asarray(preds).tolist()) <= {0, 1, 2, 3}


def test_the_orthogonal_penalty_matches_numpy():
    reg = OrthogonalRegularizer(3, l2reg=0.01)
    assert isinstance(reg.eye, np.ndarray)
    a = RNG.normal(size=(4, 9)).astype(np.float32)
    inputs = keras.Input((9,))
    layer = layers.Dense(9, kernel_initializer="identity", activity_regularizer=reg)
    model = keras.Model(inputs, layer(inputs))
    model.compile(optimizer="sgd", loss="mse")
    x = a.reshape(4, 3, 3).astype(np.float64)
    xxt = np.tensordot(x, x, axes=(2, 2)).reshape(-1, 3, 3)
    penalty = np.sum(0.01 * (xxt - np.eye(3)) ** 2)
    # the loss: the mean squared error against zeros plus the penalty (over the batch, as Keras)
    want = np.mean(a.astype(np.float64) ** 2) + penalty / 4
    assert abs(model.evaluate(a, np.zeros((4, 9)), batch_size=4, verbose=0) - want) < 1e-4 * want


def test_a_graph_tensor_minus_a_plain_numpy_array_trains():
    # `xxt - self.eye` with a plain numpy eye (Keras converts it): a constant of the graph
    pg_model = _pointnet(16, plain_numpy_eye=True)
    pg_model.compile(loss="sparse_categorical_crossentropy", optimizer="adam")
    hist = pg_model.fit(RNG.normal(size=(4, 16, 3)), np.arange(4), epochs=2, verbose=0).history["loss"]
    assert np.all(np.isfinite(hist))


# --- learnable_resizer: Resizing after graph layers runs in the graph ------------------------------

def test_resizing_after_graph_layers_runs_in_the_graph_and_trains(tmp_path):
    x = RNG.normal(size=(4, 6, 8, 2)).astype(np.float32)
    inputs = keras.Input((6, 8, 2))
    conv = layers.Conv2D(2, 1, use_bias=False)
    out = layers.Flatten()(layers.Resizing(3, 5, name="resize")(conv(inputs)))
    model = keras.Model(inputs, out)
    model.compile(optimizer="sgd", loss="mse")
    model.set_weights({"conv2d.weight": np.eye(2, dtype=np.float32).reshape(2, 2, 1, 1)})
    np.testing.assert_allclose(model.predict(x, verbose=0), ref_resize(x, 3, 5).reshape(4, -1), rtol=1e-5,
                               atol=1e-5)
    # the gradient reaches the convolution through the resize: numpy's, by the chain rule
    y = RNG.normal(size=(4, 30)).astype(np.float32)
    (g,) = model.gradients(x, y).values()
    r = ref_resize(x, 3, 5)                              # (4, 3, 5, 2): the resized inputs
    d = 2 * (r.reshape(4, -1) - y) / y.size              # d loss / d output
    want = np.einsum("nijc,nijo->oc", r, d.reshape(4, 3, 5, 2)).reshape(2, 2, 1, 1)
    np.testing.assert_allclose(g, want, rtol=1e-4, atol=1e-6)
    path = tmp_path / "m.keras"
    model.save(str(path))
    np.testing.assert_allclose(keras.load_model(str(path)).predict(x, verbose=0), model.predict(x, verbose=0),
                               rtol=1e-6)


def test_learnable_resizer():
    def get_learnable_resizer(filters=8, target=(6, 6)):
        inputs = layers.Input(shape=[None, None, 3])
        naive_resize = layers.Resizing(*target, interpolation="bilinear")(inputs)
        x = layers.LeakyReLU(0.2)(layers.Conv2D(filters=filters, kernel_size=7, strides=1, padding="same")(inputs))
        x = layers.BatchNormalization()(layers.LeakyReLU(0.2)(layers.Conv2D(filters, 1, padding="same")(x)))
        bottleneck = layers.Resizing(*target, interpolation="bilinear")(x)
        x = layers.BatchNormalization()(layers.Conv2D(filters, 3, padding="same", use_bias=False)(bottleneck))
        x = layers.Add()([bottleneck, x])
        x = layers.Conv2D(filters=3, kernel_size=7, strides=1, padding="same")(x)
        return keras.Model(inputs, layers.Add()([naive_resize, x]), name="learnable_resizer")

    learnable_resizer = get_learnable_resizer()
    backbone = keras.Sequential([layers.Conv2D(4, 3, activation="relu"), layers.GlobalAveragePooling2D(),
                                 layers.Dense(2)])
    inputs = layers.Input((12, 12, 3))
    outputs = backbone(learnable_resizer(layers.Rescaling(scale=1.0 / 255)(inputs)))
    model = keras.Model(inputs, outputs)
    model.compile(loss=keras.losses.CategoricalCrossentropy(label_smoothing=0.1), optimizer="sgd",
                  metrics=["accuracy"])
    x = RNG.uniform(0, 255, (8, 12, 12, 3)).astype("float32")
    y = keras.utils.to_categorical(RNG.integers(0, 2, 8), 2)
    history = model.fit(x, y, epochs=2, batch_size=4, verbose=0)
    assert np.all(np.isfinite(history.history["loss"]))
    assert learnable_resizer.predict(x[:2] / 255, verbose=0).shape == (2, 6, 6, 3)


# --- eanet (Keras 3): keras.ops on a functional model's tensors ---------------------------------------

class PatchExtract(layers.Layer):
    def __init__(self, patch_size, **kwargs):
        super().__init__(**kwargs)
        self.patch_size = patch_size

    def call(self, x):
        B, C = ops.shape(x)[0], ops.shape(x)[-1]
        x = ops.image.extract_patches(x, self.patch_size)
        return ops.reshape(x, (B, -1, self.patch_size * self.patch_size * C))

    def get_config(self):                 # (the example has none; its model is not saved)
        return {**super().get_config(), "patch_size": self.patch_size}


class PatchEmbedding(layers.Layer):
    def __init__(self, num_patch, embed_dim, **kwargs):
        super().__init__(**kwargs)
        self.num_patch = num_patch
        self.proj = layers.Dense(embed_dim)
        self.pos_embed = layers.Embedding(input_dim=num_patch, output_dim=embed_dim)

    def call(self, patch):
        pos = ops.arange(start=0, stop=self.num_patch, step=1)
        return self.proj(patch) + self.pos_embed(pos)

    def get_config(self):
        return {**super().get_config(), "num_patch": self.num_patch, "embed_dim": self.proj.units}


def external_attention(x, dim, num_heads, dim_coefficient=4, attention_dropout=0, projection_dropout=0):
    _, num_patch, channel = x.shape
    num_heads = num_heads * dim_coefficient
    x = layers.Dense(dim * dim_coefficient)(x)
    x = ops.reshape(x, (-1, num_patch, num_heads, dim * dim_coefficient // num_heads))
    x = ops.transpose(x, axes=[0, 2, 1, 3])
    attn = layers.Dense(dim // dim_coefficient)(x)
    attn = layers.Softmax(axis=2)(attn)
    attn = layers.Lambda(lambda attn: ops.divide(attn, ops.convert_to_tensor(1e-9) +
                                                 ops.sum(attn, axis=-1, keepdims=True)))(attn)
    attn = layers.Dropout(attention_dropout)(attn)
    x = layers.Dense(dim * dim_coefficient // num_heads)(attn)
    x = ops.transpose(x, axes=[0, 2, 1, 3])
    x = ops.reshape(x, [-1, num_patch, dim * dim_coefficient])
    x = layers.Dense(dim)(x)
    return layers.Dropout(projection_dropout)(x)


def test_eanet_keras_ops_on_symbolic_tensors():
    x_train = RNG.integers(0, 256, (24, 8, 8, 3)).astype("float32")
    y_train = keras.utils.to_categorical(RNG.integers(0, 5, 24), 5)
    data_augmentation = keras.Sequential([layers.Normalization(), layers.RandomFlip("horizontal"),
                                          layers.RandomRotation(factor=0.1), layers.RandomContrast(factor=0.1),
                                          layers.RandomZoom(height_factor=0.2, width_factor=0.2)])
    data_augmentation.layers[0].adapt(x_train)
    inputs = layers.Input(shape=(8, 8, 3))
    x = PatchEmbedding(16, 8)(PatchExtract(2)(data_augmentation(inputs)))
    residual_1 = x
    x = external_attention(layers.LayerNormalization(epsilon=1e-5)(x), 8, 2, 4, 0.2, 0.2)
    x = layers.add([x, residual_1])
    x = layers.GlobalAvgPool1D()(x)
    model = keras.Model(inputs=inputs, outputs=layers.Dense(5, activation="softmax")(x))
    model.compile(loss=keras.losses.CategoricalCrossentropy(label_smoothing=0.1),
                  optimizer=keras.optimizers.AdamW(learning_rate=0.001, weight_decay=0.0001),
                  metrics=[keras.metrics.CategoricalAccuracy(name="accuracy"),
                           keras.metrics.TopKCategoricalAccuracy(5, name="top-5-accuracy")])
    history = model.fit(x_train, y_train, batch_size=8, epochs=2, validation_split=0.25, verbose=0)
    assert np.all(np.isfinite(history.history["loss"]))
    loss, accuracy, top_5_accuracy = model.evaluate(x_train, y_train, verbose=0)
    assert top_5_accuracy == 1.0 and 0 <= accuracy <= 1
    # (its Lambda holds an unnamed function, which a saved model does not keep: the op layers'
    # save/load is checked below)


def test_ops_and_arithmetic_on_symbolic_tensors_match_numpy(tmp_path):
    inp = keras.Input((4, 6))
    x = layers.Dense(8)(inp)
    y = ops.transpose(ops.reshape(x, (-1, 4, 2, 4)), axes=[0, 2, 1, 3])
    y = -(ops.sum(y, axis=-1, keepdims=True) / 2.0 + 1.0) * 3
    y = 1.0 - ops.sqrt(ops.square(y)) + ops.maximum(y, 0.5)
    a, b = ops.split(x, 2, axis=-1)                      # several outputs: a tuple of nodes
    z = ops.concatenate([b, a], axis=-1) * np.arange(8, dtype=np.float32)
    model = keras.Model(inp, [y, z])
    model.compile(optimizer="sgd", loss="mse")
    xx = RNG.normal(size=(3, 4, 6)).astype(np.float32)
    w = model.get_weights()
    h = xx.astype(np.float64) @ w["dense.weight"].T + w["dense.bias"]
    t = -(h.reshape(3, 4, 2, 4).transpose(0, 2, 1, 3).sum(-1, keepdims=True) / 2 + 1) * 3
    got_y, got_z = model.predict(xx, verbose=0)
    np.testing.assert_allclose(got_y, 1 - np.abs(t) + np.maximum(t, 0.5), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got_z, np.concatenate([h[..., 4:], h[..., :4]], -1) * np.arange(8), rtol=1e-5,
                               atol=1e-5)
    model.save(str(tmp_path / "m.gguf"))
    back = keras.load_model(str(tmp_path / "m.gguf"))
    for g, want in zip(back.predict(xx, verbose=0), (got_y, got_z)):
        np.testing.assert_allclose(g, want, rtol=1e-6)
    with pytest.raises(TypeError, match="cannot go with symbolic tensors"):
        ops.add(x, object())
    with pytest.raises(ValueError, match="not a function of pyggml.ops"):
        from pyggml.layers.core.symbolic_op import SymbolicOp
        SymbolicOp("no_such_op")


def test_resizing_on_the_inputs_stays_on_the_host_for_images_of_any_size():
    inp = keras.Input((None, None, 3))
    out = layers.Dense(2)(layers.Flatten()(layers.Rescaling(1 / 255.0)(layers.Resizing(4, 4)(inp))))
    model = keras.Model(inp, out)
    model.compile(optimizer="adam", loss="mse")
    w = model.get_weights()
    for shape in ((2, 9, 7, 3), (3, 4, 11, 3)):
        x = RNG.uniform(0, 255, shape).astype(np.float32)
        want = (ref_resize(x, 4, 4) / 255).reshape(len(x), -1) @ w["dense.weight"].T.astype(np.float64) + \
            w["dense.bias"]
        np.testing.assert_allclose(model.predict(x, verbose=0), want, rtol=1e-4, atol=1e-5)
    model.fit(RNG.uniform(0, 255, (4, 6, 6, 3)), np.zeros((4, 2)), epochs=1, verbose=0)
