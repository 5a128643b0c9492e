"""keras-io's text, timeseries and generative examples, ported as a Keras user
would (``import pyggml as keras``; the data replaced by small offline arrays of
the same shapes): each test runs one script's model-building and training code
as written there, for a couple of steps, and checks what the script relies on.
The library pieces these scripts needed have their own checks here too."""

import os
import re
import string

import numpy as np
import pytest

import pyggml as keras
from pyggml import layers, ops

RNG = np.random.default_rng(11)


# --- library pieces the scripts call ----------------------------------------------------------------

def test_activations_compute_at_once_on_arrays():
    """text_generation_with_miniature_gpt samples with keras.activations.softmax(ops.expand_dims(logits, 0))."""
    z = RNG.normal(size=(2, 5))
    e = np.exp(z - z.max(-1, keepdims=True))
    np.testing.assert_allclose(keras.activations.softmax(z), e / e.sum(-1, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(keras.activations.softmax(z, axis=0),
                               np.exp(z) / np.exp(z).sum(0, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(keras.activations.relu(z), np.maximum(z, 0), rtol=1e-6)
    np.testing.assert_allclose(keras.activations.sigmoid(z), 1 / (1 + np.exp(-z)), rtol=1e-5)
    assert keras.activations.get("softmax") is keras.activations.softmax      # names still resolve
    with pytest.raises(TypeError, match="real numbers"):
        keras.activations.softmax(np.array(["a"]))


def test_a_text_layer_takes_a_datasets_string_batch():
    """``raw_ds.map(lambda x, y: (vectorize_layer(ops.expand_dims(x, -1)), y))``."""
    texts = np.array(["the cat sat", "a dog ran far", "the dog"])
    vec = layers.TextVectorization(output_mode="int", output_sequence_length=4)
    vec.adapt(texts)
    ds = keras.data.Dataset.from_tensor_slices((texts, np.array([0, 1, 1]))).batch(2)
    mapped = ds.map(lambda x, y: (vec(ops.expand_dims(x, -1)), y))
    got = np.concatenate([np.asarray(x) for x, _ in mapped])
    np.testing.assert_array_equal(got, vec(texts[:, None]))
    assert got.shape == (3, 4) and got[0, 0] == vec.get_vocabulary().index("the")


def test_one_target_goes_to_the_only_output_with_a_loss():
    inp = keras.Input((4,))
    h = layers.Dense(3)(inp)
    out = layers.Dense(2)(h)
    model = keras.Model(inp, [out, h])
    model.compile("adam", loss=["mse", None])
    x, y = RNG.normal(size=(8, 4)), RNG.normal(size=(8, 2))
    first = model.evaluate(x, y, verbose=0)
    pred = model.predict(x, verbose=0)[0]
    np.testing.assert_allclose(np.ravel(first)[0], np.mean((pred - y) ** 2), rtol=1e-4)
    model.fit(x, y, epochs=2, batch_size=4, verbose=0)
    with pytest.raises(ValueError, match="2 outputs"):
        keras.Model(inp, [out, h]).compile("adam", loss=["mse", "mse"]).fit(x, y, verbose=0)
    model.free()


# --- text_generation_with_miniature_gpt ---------------------------------------------------------------

class TransformerBlock(layers.Layer):
    def __init__(self, embed_dim, num_heads, ff_dim, rate=0.1):
        super().__init__()
        self.att = layers.MultiHeadAttention(num_heads, embed_dim)
        self.ffn = keras.Sequential([layers.Dense(ff_dim, activation="relu"), layers.Dense(embed_dim)])
        self.layernorm1 = layers.LayerNormalization(epsilon=1e-6)
        self.layernorm2 = layers.LayerNormalization(epsilon=1e-6)
        self.dropout1 = layers.Dropout(rate)
        self.dropout2 = layers.Dropout(rate)

    def call(self, inputs):
        attention_output = self.att(inputs, inputs, use_causal_mask=True)
        attention_output = self.dropout1(attention_output)
        out1 = self.layernorm1(inputs + attention_output)
        ffn_output = self.ffn(out1)
        ffn_output = self.dropout2(ffn_output)
        return self.layernorm2(out1 + ffn_output)


class TokenAndPositionEmbedding(layers.Layer):
    def __init__(self, maxlen, vocab_size, embed_dim):
        super().__init__()
        self.token_emb = layers.Embedding(input_dim=vocab_size, output_dim=embed_dim)
        self.pos_emb = layers.Embedding(input_dim=maxlen, output_dim=embed_dim)

    def call(self, x):
        maxlen = ops.shape(x)[-1]
        positions = ops.arange(0, maxlen, 1)
        positions = self.pos_emb(positions)
        x = self.token_emb(x)
        return x + positions


def test_miniature_gpt_trains_on_a_vectorized_text_dataset_and_samples():
    vocab_size, maxlen, embed_dim = 20, 12, 16
    words = "this movie is great bad the a film was i loved hated it and plot actor story".split()
    lines = [" ".join(RNG.choice(words, RNG.integers(5, 20))) + "." for _ in range(64)]
    text_ds = keras.data.Dataset.from_tensor_slices(np.array(lines)).shuffle(buffer_size=64).batch(16)

    def custom_standardization(input_string):
        lowercased = np.char.lower(input_string)
        stripped_html = np.char.replace(lowercased, "<br />", " ")
        return np.vectorize(lambda s: re.sub(f"([{string.punctuation}])", r" \1", s))(stripped_html)

    vectorize_layer = layers.TextVectorization(standardize=custom_standardization, max_tokens=vocab_size - 1,
                                               output_mode="int", output_sequence_length=maxlen + 1)
    vectorize_layer.adapt(text_ds)
    vocab = vectorize_layer.get_vocabulary()

    def prepare_lm_inputs_labels(text):
        text = ops.expand_dims(text, -1)
        tokenized_sentences = vectorize_layer(text)
        return tokenized_sentences[:, :-1], tokenized_sentences[:, 1:]

    text_ds = text_ds.map(prepare_lm_inputs_labels).prefetch(keras.data.AUTOTUNE)

    inputs = layers.Input(shape=(maxlen,), dtype="int32")
    x = TokenAndPositionEmbedding(maxlen, vocab_size, embed_dim)(inputs)
    x = TransformerBlock(embed_dim, 2, 16)(x)
    outputs = layers.Dense(vocab_size)(x)
    model = keras.Model(inputs=inputs, outputs=[outputs, x])
    model.compile("adam", loss=[keras.losses.SparseCategoricalCrossentropy(from_logits=True), None])
    history = model.fit(text_ds, verbose=0, epochs=3)
    assert history.history["loss"][-1] < history.history["loss"][0]

    # the TextGenerator callback's sampling step
    start = [vocab.index("this"), vocab.index("movie")]
    y, _ = model.predict(np.array([start + [0] * (maxlen - len(start))]), verbose=0)
    logits, indices = ops.top_k(y[0][len(start) - 1], k=5, sorted=True)
    preds = np.asarray(keras.activations.softmax(ops.expand_dims(logits, 0))[0]).astype("float32")
    assert indices.shape == (5,) and abs(preds.sum() - 1) < 1e-5 and np.all(np.diff(preds) <= 1e-7)
    token = np.random.default_rng(0).choice(np.asarray(indices).astype("int32"), p=preds / preds.sum())
    assert 0 <= token < vocab_size

    # causality: changing a later token leaves the earlier positions' logits as they were
    seq = RNG.integers(2, vocab_size, size=(1, maxlen))
    later = seq.copy()
    later[0, 7:] = (later[0, 7:] + 1) % vocab_size
    a, b = model.predict(seq, verbose=0)[0], model.predict(later, verbose=0)[0]
    np.testing.assert_allclose(a[0, :7], b[0, :7], rtol=1e-5, atol=1e-6)
    assert np.abs(a[0, 7:] - b[0, 7:]).max() > 1e-4
    model.free()


# --- lstm_seq2seq ---------------------------------------------------------------------------------------

def test_lstm_seq2seq_trains_saves_and_decodes_with_rebuilt_models(tmp_path):
    num_encoder_tokens, num_decoder_tokens, latent_dim = 6, 7, 8
    enc = np.eye(num_encoder_tokens, dtype="float32")[RNG.integers(0, num_encoder_tokens, (32, 5))]
    dec = np.eye(num_decoder_tokens, dtype="float32")[RNG.integers(0, num_decoder_tokens, (32, 4))]
    target = np.roll(dec, -1, axis=1)

    encoder_inputs = keras.Input(shape=(None, num_encoder_tokens))
    encoder = layers.LSTM(latent_dim, return_state=True)
    encoder_outputs, state_h, state_c = encoder(encoder_inputs)
    decoder_inputs = keras.Input(shape=(None, num_decoder_tokens))
    decoder_lstm = layers.LSTM(latent_dim, return_sequences=True, return_state=True)
    decoder_outputs, _, _ = decoder_lstm(decoder_inputs, initial_state=[state_h, state_c])
    decoder_outputs = layers.Dense(num_decoder_tokens, activation="softmax")(decoder_outputs)
    model = keras.Model([encoder_inputs, decoder_inputs], decoder_outputs)
    model.compile(optimizer="rmsprop", loss="categorical_crossentropy", metrics=["accuracy"])
    model.fit([enc, dec], target, batch_size=16, epochs=2, validation_split=0.2, verbose=0)
    path = str(tmp_path / "s2s_model.keras")
    model.save(path)
    full = model.predict([enc[:1], dec[:1]], verbose=0)
    model = keras.models.load_model(path)

    encoder_inputs = model.input[0]
    encoder_outputs, state_h_enc, state_c_enc = model.layers[2].output
    encoder_model = keras.Model(encoder_inputs, [state_h_enc, state_c_enc])
    decoder_inputs = model.input[1]
    decoder_state_input_h = keras.Input(shape=(latent_dim,))
    decoder_state_input_c = keras.Input(shape=(latent_dim,))
    decoder_lstm = model.layers[3]
    decoder_outputs, state_h_dec, state_c_dec = decoder_lstm(
        decoder_inputs, initial_state=[decoder_state_input_h, decoder_state_input_c])
    decoder_outputs = model.layers[4](decoder_outputs)
    decoder_model = keras.Model([decoder_inputs, decoder_state_input_h, decoder_state_input_c],
                                [decoder_outputs, state_h_dec, state_c_dec])
    # step by step through the decoder from the encoder's states = the trained model's outputs
    states_value = encoder_model.predict(enc[:1], verbose=0)
    for t in range(dec.shape[1]):
        output_tokens, h, c = decoder_model.predict([dec[:1, t:t + 1]] + states_value, verbose=0)
        np.testing.assert_allclose(output_tokens[0, -1], full[0, t], rtol=1e-4, atol=1e-6)
        states_value = [h, c]
    model.free()


# --- timeseries_anomaly_detection, timeseries_weather_forecasting --------------------------------------

def test_timeseries_anomaly_detection_autoencoder():
    x_train = np.sin(np.linspace(0, 40, 48 * 64)).reshape(64, 48, 1) + RNG.normal(0, 0.05, (64, 48, 1))
    model = keras.Sequential([
        layers.Input(shape=(x_train.shape[1], x_train.shape[2])),
        layers.Conv1D(filters=8, kernel_size=7, padding="same", strides=2, activation="relu"),
        layers.Dropout(rate=0.2),
        layers.Conv1D(filters=4, kernel_size=7, padding="same", strides=2, activation="relu"),
        layers.Conv1DTranspose(filters=4, kernel_size=7, padding="same", strides=2, activation="relu"),
        layers.Dropout(rate=0.2),
        layers.Conv1DTranspose(filters=8, kernel_size=7, padding="same", strides=2, activation="relu"),
        layers.Conv1DTranspose(filters=1, kernel_size=7, padding="same"),
    ])
    model.compile(optimizer=keras.optimizers.Adam(learning_rate=0.01), loss="mse")
    history = model.fit(x_train, x_train, epochs=4, batch_size=16, validation_split=0.1, verbose=0,
                        callbacks=[keras.callbacks.EarlyStopping(monitor="val_loss", patience=5, mode="min")])
    assert history.history["val_loss"][-1] < history.history["val_loss"][0]
    x_train_pred = model.predict(x_train, verbose=0)
    assert x_train_pred.shape == x_train.shape
    train_mae_loss = np.mean(np.abs(x_train_pred - x_train), axis=1)
    assert train_mae_loss.shape == (64, 1)
    model.free()


def test_timeseries_weather_forecasting(tmp_path):
    features = RNG.normal(size=(400, 7))
    past, future, step, batch_size = 60, 6, 6, 32
    start = past + future
    x_train, y_train = features[:300], features[start:start + 300][:, [1]]
    sequence_length = int(past / step)
    dataset_train = keras.preprocessing.timeseries_dataset_from_array(
        x_train, y_train, sequence_length=sequence_length, sampling_rate=step, batch_size=batch_size)
    for batch in dataset_train.take(1):
        inputs, targets = batch
    assert inputs.numpy().shape == (batch_size, sequence_length, 7) and targets.numpy().shape == (batch_size, 1)
    inputs = layers.Input(shape=(inputs.shape[1], inputs.shape[2]))
    outputs = layers.Dense(1)(layers.LSTM(8)(inputs))
    model = keras.Model(inputs=inputs, outputs=outputs)
    model.compile(optimizer=keras.optimizers.Adam(learning_rate=0.001), loss="mse")
    path_checkpoint = str(tmp_path / "model_checkpoint.h5")
    history = model.fit(dataset_train, epochs=2, validation_data=dataset_train, verbose=0, callbacks=[
        keras.callbacks.EarlyStopping(monitor="val_loss", min_delta=0, patience=5),
        keras.callbacks.ModelCheckpoint(monitor="val_loss", filepath=path_checkpoint, verbose=0,
                                        save_weights_only=True, save_best_only=True)])
    assert len(history.history["val_loss"]) == 2 and os.path.exists(path_checkpoint)
    for x, y in dataset_train.take(1):
        assert model.predict(x, verbose=0)[0].shape == (1,) and x[0][:, 1].numpy().shape == (sequence_length,)
    model.free()


# --- text_classification_from_scratch ------------------------------------------------------------------

def test_text_classification_from_scratch(tmp_path):
    good, bad = ["great", "superb", "loved"], ["awful", "boring", "hated"]
    filler = ["the", "movie", "was", "a", "film", "and", "plot"]
    for split in ("train", "test"):
        for lab, words in (("pos", good), ("neg", bad)):
            os.makedirs(tmp_path / split / lab)
            for k in range(20):
                toks = list(RNG.choice(filler, 12)) + list(RNG.choice(words, 3))
                (tmp_path / split / lab / f"{k}_7.txt").write_text(" ".join(toks[:7]) + "<br /><br />" +
                                                                    " ".join(toks[7:]) + ".")
    raw_train_ds = keras.utils.text_dataset_from_directory(
        str(tmp_path / "train"), batch_size=8, validation_split=0.2, subset="training", seed=1337,
        class_names=["pos", "neg"])
    raw_test_ds = keras.utils.text_dataset_from_directory(str(tmp_path / "test"), batch_size=8)

    def custom_standardization(input_data):
        lowercase = np.char.lower(input_data)
        stripped_html = np.char.replace(lowercase, "<br />", " ")
        return np.vectorize(lambda s: re.sub(f"[{re.escape(string.punctuation)}]", "", s))(stripped_html)

    vectorize_layer = layers.TextVectorization(standardize=custom_standardization, max_tokens=200,
                                               output_mode="int", output_sequence_length=30)
    vectorize_layer.adapt(raw_train_ds.map(lambda x, y: x))
    assert "<br" not in " ".join(vectorize_layer.get_vocabulary())

    def vectorize_text(text, label):
        text = ops.expand_dims(text, -1)
        return vectorize_layer(text), label

    train_ds = raw_train_ds.map(vectorize_text).cache().prefetch(buffer_size=10)
    test_ds = raw_test_ds.map(vectorize_text).cache().prefetch(buffer_size=10)
    inputs = keras.Input(shape=(None,), dtype="int64")
    x = layers.Embedding(200, 8)(inputs)
    x = layers.Dropout(0.5)(x)
    x = layers.Conv1D(8, 7, padding="valid", activation="relu", strides=3)(x)
    x = layers.GlobalMaxPooling1D()(x)
    predictions = layers.Dense(1, activation="sigmoid", name="predictions")(x)
    model = keras.Model(inputs, predictions)
    model.compile(loss="binary_crossentropy", optimizer="adam", metrics=["accuracy"])
    model.fit(train_ds, epochs=2, verbose=0)
    loss, acc = model.evaluate(test_ds, verbose=0)

    inputs = keras.Input(shape=(1,), dtype="string")
    end_to_end_model = keras.Model(inputs, model(vectorize_layer(inputs)))
    end_to_end_model.compile(loss="binary_crossentropy", optimizer="adam", metrics=["accuracy"])
    loss2, acc2 = end_to_end_model.evaluate(raw_test_ds, verbose=0)
    np.testing.assert_allclose([loss2, acc2], [loss, acc], rtol=1e-5)
    model.free()
    end_to_end_model.free()


# --- timeseries_classification_transformer -------------------------------------------------------------

def test_timeseries_classification_transformer():
    def transformer_encoder(inputs, head_size, num_heads, ff_dim, dropout=0):
        x = layers.MultiHeadAttention(key_dim=head_size, num_heads=num_heads, dropout=dropout)(inputs, inputs)
        x = layers.Dropout(dropout)(x)
        x = layers.LayerNormalization(epsilon=1e-6)(x)
        res = x + inputs
        x = layers.Conv1D(filters=ff_dim, kernel_size=1, activation="relu")(res)
        x = layers.Dropout(dropout)(x)
        x = layers.Conv1D(filters=inputs.shape[-1], kernel_size=1)(x)
        x = layers.LayerNormalization(epsilon=1e-6)(x)
        return x + res

    inputs = keras.Input(shape=(20, 1))
    x = transformer_encoder(inputs, 8, 2, 4, 0.25)
    x = layers.GlobalAveragePooling1D(data_format="channels_last")(x)
    x = layers.Dropout(0.4)(layers.Dense(8, activation="relu")(x))
    model = keras.Model(inputs, layers.Dense(2, activation="softmax")(x))
    model.compile(loss="sparse_categorical_crossentropy", optimizer=keras.optimizers.Adam(learning_rate=1e-3),
                  metrics=["sparse_categorical_accuracy"])
    x_train, y_train = RNG.normal(size=(32, 20, 1)), RNG.integers(0, 2, 32)
    model.fit(x_train, y_train, validation_split=0.2, epochs=2, batch_size=8, verbose=0,
              callbacks=[keras.callbacks.EarlyStopping(patience=10, restore_best_weights=True)])
    loss, acc = model.evaluate(x_train, y_train, verbose=0)
    assert np.isfinite(loss) and 0 <= acc <= 1
    model.free()


# --- pretrained_word_embeddings -------------------------------------------------------------------------

def test_pretrained_word_embeddings_frozen_matrix_and_end_to_end_strings():
    topics = {"comp.graphics": "graphics render pixel image modeling", "sci.space": "orbit nasa launch moon"}
    common = "the a of and to is in it".split()
    samples, labels = [], []
    for ci, kw in enumerate(topics.values()):
        for _ in range(24):
            samples.append(" ".join(RNG.choice(common + kw.split(), 30)))
            labels.append(ci)
    vectorizer = layers.TextVectorization(max_tokens=20000, output_sequence_length=40)
    vectorizer.adapt(keras.data.Dataset.from_tensor_slices(samples).batch(16))
    voc = vectorizer.get_vocabulary()
    word_index = dict(zip(voc, range(len(voc))))
    output = vectorizer([["the moon of the pixel"]])
    assert list(output.numpy()[0, :5]) == [word_index[w] for w in ["the", "moon", "of", "the", "pixel"]]
    num_tokens, embedding_dim = len(voc) + 2, 16
    embedding_matrix = RNG.normal(size=(num_tokens, embedding_dim))
    embedding_layer = layers.Embedding(num_tokens, embedding_dim, trainable=False)
    embedding_layer.build((1,))
    embedding_layer.set_weights([embedding_matrix])

    int_sequences_input = keras.Input(shape=(None,), dtype="int32")
    x = layers.Conv1D(8, 5, activation="relu")(embedding_layer(int_sequences_input))
    x = layers.MaxPooling1D(5)(x)
    x = layers.GlobalMaxPooling1D()(x)
    preds = layers.Dense(len(topics), activation="softmax")(x)
    model = keras.Model(int_sequences_input, preds)
    x_train = vectorizer(np.array([[s] for s in samples])).numpy()
    model.compile(loss="sparse_categorical_crossentropy", optimizer="rmsprop", metrics=["acc"])
    model.fit(x_train, np.array(labels), batch_size=16, epochs=2, verbose=0)
    np.testing.assert_allclose(model.get_weights()["embedding.weight"], embedding_matrix, rtol=1e-6)   # frozen

    string_input = keras.Input(shape=(1,), dtype="string")
    end_to_end_model = keras.Model(string_input, model(vectorizer(string_input)))
    probabilities = end_to_end_model(keras.ops.convert_to_tensor([["a moon launch and an orbit"]]))
    np.testing.assert_allclose(probabilities, model.predict(vectorizer([["a moon launch and an orbit"]]),
                                                            verbose=0), rtol=1e-5)
    model.free()


def test_set_weights_takes_keras_s_list_in_keras_s_layouts():
    dense = layers.Dense(3)
    dense.build((None, 2))
    kernel, bias = RNG.normal(size=(2, 3)), RNG.normal(size=3)          # Keras's kernel is (in, units)
    dense.set_weights([kernel, bias])
    np.testing.assert_allclose(dense.get_weights()["weight"], kernel.T, rtol=1e-6)
    x = RNG.normal(size=(4, 2))
    np.testing.assert_allclose(dense(x), x @ kernel + bias, rtol=1e-5)
    with pytest.raises(ValueError, match=r"\(2, 3\) \(Keras's layout\)"):
        dense.set_weights([kernel.T, bias])                              # a list is Keras's layout only
    conv = layers.Conv1D(4, 3)
    conv.build((None, 7, 2))
    k = RNG.normal(size=(3, 2, 4))                                       # Keras: (width, in, filters)
    conv.set_weights([k, np.zeros(4)])
    xs = RNG.normal(size=(1, 7, 2))
    want = np.stack([np.einsum("wc,wcf->f", xs[0, i:i + 3], k) for i in range(5)])[None]
    np.testing.assert_allclose(conv(xs), want, rtol=1e-4, atol=1e-6)
    with pytest.raises(ValueError, match="list of 1 arrays; the layer has 2 weights"):
        dense.set_weights([kernel])
    with pytest.raises(ValueError, match=r"weight 'weight' takes an array of shape \(2, 3\)"):
        dense.set_weights([np.zeros((5, 5)), bias])
    with pytest.raises(TypeError, match="array of numbers"):
        dense.set_weights([np.array([["a"] * 3] * 2), bias])


def test_a_layer_built_by_hand_keeps_its_weights_when_called():
    dense = layers.Dense(2)
    dense.build((None, 3))
    w = {"weight": RNG.normal(size=(2, 3)), "bias": np.ones(2)}
    dense.set_weights(w)
    inp = keras.Input((3,))
    model = keras.Model(inp, dense(inp)).compile(loss="mse")
    x = RNG.normal(size=(2, 3))
    np.testing.assert_allclose(model.predict(x, verbose=0), x @ w["weight"].T + 1, rtol=1e-5)
    model.free()


def causal_attention_mask(batch_size, n_dest, n_src, dtype):
    """The miniature GPT's mask function, with ops calls for ``arange(n)[:, None]`` and ``>=``
    (graph tensors take neither yet)."""
    i = ops.expand_dims(ops.arange(n_dest), -1)
    j = ops.arange(n_src)
    m = ops.greater_equal(i, ops.add(ops.subtract(j, n_src), n_dest))
    mask = ops.cast(m, dtype)
    mask = ops.reshape(mask, [1, n_dest, n_src])
    mult = ops.concatenate([ops.expand_dims(batch_size, -1), ops.convert_to_tensor([1, 1])], 0)
    return ops.tile(mask, mult)


class MaskedTransformerBlock(TransformerBlock):
    def call(self, inputs):
        input_shape = ops.shape(inputs)
        causal_mask = causal_attention_mask(input_shape[0], input_shape[1], input_shape[1], "bool")
        attention_output = self.att(inputs, inputs, attention_mask=causal_mask)
        out1 = self.layernorm1(inputs + self.dropout1(attention_output))
        return self.layernorm2(out1 + self.dropout2(self.ffn(out1)))


def test_miniature_gpt_s_own_causal_mask_function_matches_use_causal_mask():
    inputs = layers.Input(shape=(6,), dtype="int32")
    x = TokenAndPositionEmbedding(6, 10, 8)(inputs)
    a = MaskedTransformerBlock(8, 2, 8)(x)
    b = TransformerBlock(8, 2, 8)(x)
    model = keras.Model(inputs, [layers.Dense(10)(a), b])
    model.compile("adam", loss=[keras.losses.SparseCategoricalCrossentropy(from_logits=True), None])
    w = model.get_weights()
    # the second block gets the first one's weights: the two masks must give the same outputs
    names = sorted(n for n in w if n.startswith("masked_transformer_block."))
    w.update({n.replace("masked_transformer_block.", "transformer_block."): w[n] for n in names})
    model.set_weights(w)
    seq = RNG.integers(0, 10, size=(5, 6))
    _, plain = model.predict(seq, verbose=0)
    inner = keras.Model(inputs, a)
    np.testing.assert_allclose(inner.predict(seq, verbose=0), plain, rtol=1e-5, atol=1e-6)
    model.fit(seq, seq, epochs=1, batch_size=2, verbose=0)
    model.free()


# --- neural_machine_translation_with_transformer ---------------------------------------------------------

class Pair(layers.Layer):
    """call() with two positional inputs and the first one's mask (Keras 3's calling form)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def call(self, inputs, other, mask=None):
        return inputs * ops.expand_dims(ops.cast(mask, "float32"), -1) + other


def test_two_positional_inputs_and_the_mask_reach_call_when_the_model_is_built():
    tokens = keras.Input((5,), dtype="int32")
    other = keras.Input((5, 3))
    emb = layers.Embedding(7, 3, mask_zero=True)
    out = Pair()(emb(tokens), other)
    assert out.shape == (None, 5, 3)
    model = keras.Model([tokens, other], out)
    model.compile(loss="mse")
    t = np.array([[1, 2, 0, 0, 3], [4, 0, 5, 6, 0]])
    o = RNG.normal(size=(2, 5, 3))
    table = model.get_weights()["embedding.weight"]
    want = table[t] * (t != 0)[..., None] + o
    np.testing.assert_allclose(model.predict([t, o], verbose=0), want, rtol=1e-5, atol=1e-6)
    with pytest.raises(TypeError):
        Pair()(emb(tokens), other, other)            # call takes two inputs


class PositionalEmbedding(layers.Layer):
    def __init__(self, sequence_length, vocab_size, embed_dim, **kwargs):
        super().__init__(**kwargs)
        self.token_embeddings = layers.Embedding(input_dim=vocab_size, output_dim=embed_dim)
        self.position_embeddings = layers.Embedding(input_dim=sequence_length, output_dim=embed_dim)

    def call(self, inputs):
        length = ops.shape(inputs)[-1]
        positions = ops.arange(0, length, 1)
        return self.token_embeddings(inputs) + self.position_embeddings(positions)

    def compute_mask(self, inputs, mask=None):
        return ops.not_equal(inputs, 0)


class TransformerEncoder(layers.Layer):
    def __init__(self, embed_dim, dense_dim, num_heads, **kwargs):
        super().__init__(**kwargs)
        self.attention = layers.MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim)
        self.dense_proj = keras.Sequential([layers.Dense(dense_dim, activation="relu"), layers.Dense(embed_dim)])
        self.layernorm_1 = layers.LayerNormalization()
        self.layernorm_2 = layers.LayerNormalization()
        self.supports_masking = True

    def call(self, inputs, mask=None):
        if mask is not None:
            padding_mask = ops.cast(ops.expand_dims(mask, 1), dtype="int32")      # mask[:, None, :]
        attention_output = self.attention(query=inputs, value=inputs, key=inputs, attention_mask=padding_mask)
        proj_input = self.layernorm_1(inputs + attention_output)
        return self.layernorm_2(proj_input + self.dense_proj(proj_input))


class TransformerDecoder(layers.Layer):
    def __init__(self, embed_dim, latent_dim, num_heads, **kwargs):
        super().__init__(**kwargs)
        self.attention_1 = layers.MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim)
        self.attention_2 = layers.MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim)
        self.dense_proj = keras.Sequential([layers.Dense(latent_dim, activation="relu"), layers.Dense(embed_dim)])
        self.layernorm_1 = layers.LayerNormalization()
        self.layernorm_2 = layers.LayerNormalization()
        self.layernorm_3 = layers.LayerNormalization()
        self.supports_masking = True

    def call(self, inputs, encoder_outputs, mask=None):
        causal_mask = self.get_causal_attention_mask(inputs)
        if mask is not None:
            padding_mask = ops.cast(ops.expand_dims(mask, 1), dtype="int32")
            padding_mask = ops.minimum(padding_mask, causal_mask)
        attention_output_1 = self.attention_1(query=inputs, value=inputs, key=inputs, attention_mask=causal_mask)
        out_1 = self.layernorm_1(inputs + attention_output_1)
        attention_output_2 = self.attention_2(query=out_1, value=encoder_outputs, key=encoder_outputs,
                                              attention_mask=padding_mask)
        out_2 = self.layernorm_2(out_1 + attention_output_2)
        return self.layernorm_3(out_2 + self.dense_proj(out_2))

    def get_causal_attention_mask(self, inputs):
        input_shape = ops.shape(inputs)
        batch_size, sequence_length = input_shape[0], input_shape[1]
        i = ops.expand_dims(ops.arange(sequence_length), -1)                      # [:, None]
        j = ops.arange(sequence_length)
        mask = ops.cast(ops.greater_equal(i, j), dtype="int32")                  # i >= j
        mask = ops.reshape(mask, (1, input_shape[1], input_shape[1]))
        mult = ops.concatenate([ops.expand_dims(batch_size, -1), ops.convert_to_tensor([1, 1])], axis=0)
        return ops.tile(mask, mult)


def test_neural_machine_translation_transformer_with_variable_lengths():
    sequence_length, vocab_size, embed_dim = 8, 30, 8
    encoder_inputs = keras.Input(shape=(None,), dtype="int64", name="encoder_inputs")
    x = PositionalEmbedding(sequence_length, vocab_size, embed_dim)(encoder_inputs)
    encoder_outputs = TransformerEncoder(embed_dim, 16, 2)(x)
    decoder_inputs = keras.Input(shape=(None,), dtype="int64", name="decoder_inputs")
    encoded_seq_inputs = keras.Input(shape=(None, embed_dim), name="decoder_state_inputs")
    x = PositionalEmbedding(sequence_length, vocab_size, embed_dim)(decoder_inputs)
    x = TransformerDecoder(embed_dim, 16, 2)(x, encoded_seq_inputs)
    x = layers.Dropout(0.5)(x)
    decoder_outputs = layers.Dense(vocab_size, activation="softmax")(x)
    decoder = keras.Model([decoder_inputs, encoded_seq_inputs], decoder_outputs)
    transformer = keras.Model([encoder_inputs, decoder_inputs], decoder([decoder_inputs, encoder_outputs]),
                              name="transformer")
    transformer.compile("rmsprop", loss="sparse_categorical_crossentropy", metrics=["accuracy"])

    eng = RNG.integers(1, vocab_size, (24, sequence_length))
    eng[:, 6:] = 0
    spa = RNG.integers(1, vocab_size, (24, sequence_length + 1))
    spa[:, 7:] = 0
    ds = keras.data.Dataset.from_tensor_slices((eng, spa)).batch(8).map(
        lambda e, s: ({"encoder_inputs": e, "decoder_inputs": s[:, :-1]}, s[:, 1:]))
    history = transformer.fit(ds, epochs=2, verbose=0)
    assert np.all(np.isfinite(history.history["loss"]))

    # decoding as the script does: the model called on arrays (of another length too: None steps)
    pred = np.asarray(transformer([eng[:1, :6], spa[:1, :6]]))
    assert pred.shape == (1, 6, vocab_size)
    np.testing.assert_allclose(pred.sum(-1), 1.0, rtol=1e-5)
    # causal: later target tokens leave earlier predictions alone
    a = np.asarray(transformer([eng[:2], spa[:2, :-1]]))
    later = spa[:2, :-1].copy()
    later[:, 4:] = (later[:, 4:] % (vocab_size - 1)) + 1
    b = np.asarray(transformer([eng[:2], later]))
    np.testing.assert_allclose(a[:, :4], b[:, :4], rtol=1e-5, atol=1e-6)
    assert np.abs(a[:, 4:] - b[:, 4:]).max() > 1e-5
    transformer.free()


# --- generative/pixelcnn.py: a masked convolution that assigns its own kernel in call -------------

class PixelConvLayer(layers.Layer):
    def __init__(self, mask_type, **kwargs):
        super().__init__()
        self.mask_type = mask_type
        self.conv = layers.Conv2D(**kwargs)

    def build(self, input_shape):
        # Build the conv2d layer to initialize kernel variables
        self.conv.build(input_shape)
        # Use the initialized kernel to create the mask
        kernel_shape = ops.shape(self.conv.kernel)
        self.mask = np.zeros(shape=kernel_shape)
        self.mask[: kernel_shape[0] // 2, ...] = 1.0
        self.mask[kernel_shape[0] // 2, : kernel_shape[1] // 2, ...] = 1.0
        if self.mask_type == "B":
            self.mask[kernel_shape[0] // 2, kernel_shape[1] // 2, ...] = 1.0

    def call(self, inputs):
        self.conv.kernel.assign(self.conv.kernel * self.mask)
        return self.conv(inputs)


class PixelResidualBlock(layers.Layer):
    def __init__(self, filters, **kwargs):
        super().__init__(**kwargs)
        self.conv1 = layers.Conv2D(filters=filters, kernel_size=1, activation="relu")
        self.pixel_conv = PixelConvLayer(mask_type="B", filters=filters // 2, kernel_size=3, activation="relu",
                                         padding="same")
        self.conv2 = layers.Conv2D(filters=filters, kernel_size=1, activation="relu")

    def call(self, inputs):
        x = self.conv1(inputs)
        x = self.pixel_conv(x)
        x = self.conv2(x)
        return layers.add([inputs, x])


def test_pixelcnn_masks_its_kernels_trains_and_samples_causally():
    input_shape = (7, 7, 1)
    inputs = keras.Input(shape=input_shape, batch_size=16)
    x = PixelConvLayer(mask_type="A", filters=16, kernel_size=7, activation="relu", padding="same")(inputs)
    for _ in range(2):
        x = PixelResidualBlock(filters=16)(x)
    for _ in range(2):
        x = PixelConvLayer(mask_type="B", filters=16, kernel_size=1, strides=1, activation="relu",
                           padding="valid")(x)
    out = layers.Conv2D(filters=1, kernel_size=1, strides=1, activation="sigmoid", padding="valid")(x)
    pixel_cnn = keras.Model(inputs, out)
    pixel_cnn.compile(optimizer=keras.optimizers.Adam(learning_rate=0.0005), loss="binary_crossentropy")
    data = (RNG.random((64, 7, 7, 1)) > 0.5).astype(np.float32)
    pixel_cnn.fit(x=data, y=data, batch_size=16, epochs=2, validation_split=0.25, verbose=0)

    # the kernel holds its masked values (the assign in call is a state update of the weight)
    k = pixel_cnn.layers[1].conv.kernel.numpy()
    assert k.shape == (7, 7, 1, 16)
    assert np.all(k[3, 3:] == 0) and np.all(k[4:] == 0) and np.any(k[:3] != 0) and np.any(k[3, :3] != 0)
    # causal: an output pixel does not depend on its own input pixel or any later one
    base = pixel_cnn.predict(data[:16], verbose=0)
    changed = data[:16].copy()
    changed[:, 3, 4] = 1.0 - changed[:, 3, 4]
    moved = pixel_cnn.predict(changed, verbose=0)
    flat_base, flat_moved = base.reshape(16, -1), moved.reshape(16, -1)
    at = 3 * 7 + 4
    np.testing.assert_array_equal(flat_moved[:, :at + 1], flat_base[:, :at + 1])
    assert np.any(flat_moved[:, at + 1:] != flat_base[:, at + 1:])

    # the example's sampling loop, over the first rows
    batch = 16
    pixels = np.zeros(shape=(batch,) + (pixel_cnn.input_shape)[1:])
    assert pixel_cnn.input_shape == (16, 7, 7, 1) and pixel_cnn.output_shape == (16, 7, 7, 1)
    rows, cols, channels = pixels.shape[1:]
    for row in range(2):
        for col in range(cols):
            for channel in range(channels):
                probs = pixel_cnn.predict(pixels, verbose=0)[:, row, col, channel]
                pixels[:, row, col, channel] = ops.ceil(probs - RNG.uniform(0, 1, size=probs.shape))
    assert set(np.unique(pixels[:, :2])) <= {0.0, 1.0} and np.all(pixels[:, 2:] == 0)
