"""pg.utils.FeatureSpace (Keras's keras.utils.FeatureSpace): each feature kind
encoded against a numpy reference, Keras's concatenation order, crosses, the
dataset pipeline and the end-to-end model of keras-io's
structured_data_classification_with_feature_space, saving, and bad arguments."""

import numpy as np
import pytest

import pyggml as pg
from pyggml.utils import FeatureSpace

RNG = np.random.default_rng(3)


def _frame(n=40):
    return {"age": RNG.integers(20, 80, n).astype(np.int64), "sex": RNG.integers(0, 2, n),
            "chol": RNG.normal(240, 40, n), "thal": RNG.choice(["fixed", "normal", "reversible"], n),
            "ca": RNG.integers(0, 4, n)}


def _space(**kw):
    return FeatureSpace(features={
        "sex": FeatureSpace.integer_categorical(num_oov_indices=0),
        "ca": "integer_categorical",
        "thal": FeatureSpace.string_categorical(num_oov_indices=0),
        "age": FeatureSpace.float_discretized(num_bins=4),
        "chol": FeatureSpace.float_normalized(),
    }, crosses=[FeatureSpace.cross(feature_names=("thal", "ca"), crossing_dim=8)], **kw)


def test_each_kind_against_numpy_in_keras_s_order():
    data = _frame()
    fs = _space()
    fs.adapt(pg.data.Dataset.from_tensor_slices(data).batch(16))
    got = np.asarray(fs(data))
    n = len(data["age"])
    # sorted feature names, then the crosses: age, ca, chol, sex, thal, thal_X_ca
    age_bins = np.asarray(fs.preprocessors["age"](data["age"][:, None].astype(np.float32))).ravel()
    assert set(age_bins) <= {0, 1, 2, 3} and len(set(age_bins)) == 4
    age = np.eye(4)[age_bins]
    ca_vocab = fs.preprocessors["ca"].get_vocabulary()           # [OOV] first: num_oov_indices=1 by default
    ca = np.eye(len(ca_vocab))[[ca_vocab.index(v) for v in data["ca"]]]
    chol = ((data["chol"] - data["chol"].mean()) / data["chol"].std())[:, None]
    sex_vocab = fs.preprocessors["sex"].get_vocabulary()
    sex = np.eye(len(sex_vocab))[[sex_vocab.index(v) for v in data["sex"]]]
    thal_vocab = fs.preprocessors["thal"].get_vocabulary()
    assert sorted(thal_vocab) == ["fixed", "normal", "reversible"]
    thal = np.eye(3)[[thal_vocab.index(v) for v in data["thal"]]]
    cross_idx = np.asarray(pg.layers.HashedCrossing(num_bins=8)(
        [np.argmax(thal, 1)[:, None], np.argmax(ca, 1)[:, None]])).ravel()
    cross = np.eye(8)[cross_idx]
    want = np.concatenate([age, ca, chol, sex, thal, cross], axis=1)
    assert got.shape == (n, want.shape[1]) and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)

    d = _space(output_mode="dict")
    d.adapt(data)
    parts = d(data)
    assert sorted(parts) == ["age", "ca", "chol", "sex", "thal", "thal_X_ca"]
    np.testing.assert_allclose(parts["chol"], chol, rtol=1e-4, atol=1e-5)


def test_kind_names_use_the_space_s_defaults_and_rescaling_needs_no_adapt():
    fs = FeatureSpace({"x": "float", "h": "string_hashed", "r": FeatureSpace.float_rescaled(scale=2.0, offset=1.0),
                       "b": FeatureSpace.float_discretized(num_bins=3, bin_boundaries=[0.0, 1.0])},
                      hashing_dim=5)
    data = {"x": np.array([1.5, -2.0]), "h": np.array(["a", "b"]), "r": np.array([1.0, 3.0]),
            "b": np.array([-1.0, 0.5])}
    out = np.asarray(fs(data))                                  # nothing to adapt
    # b (one-hot of 3 bins), h (5 hashed bins), r, x
    np.testing.assert_array_equal(out[:, :3], [[1, 0, 0], [0, 1, 0]])
    assert out.shape == (2, 3 + 5 + 1 + 1) and np.all(out[:, 3:8].sum(1) == 1)
    np.testing.assert_allclose(out[:, 8], [3.0, 7.0])
    np.testing.assert_allclose(out[:, 9], [1.5, -2.0])


def test_keras_io_pipeline_and_end_to_end_model(tmp_path):
    data = _frame(80)
    labels = (data["chol"] > 240).astype(np.int64)
    train_ds = pg.data.Dataset.from_tensor_slices((data, labels)).shuffle(buffer_size=80).batch(16)
    fs = _space()
    fs.adapt(train_ds.map(lambda x, _: x))
    preprocessed = train_ds.map(lambda x, y: (fs(x), y)).prefetch(pg.data.AUTOTUNE)
    dict_inputs = fs.get_inputs()
    encoded_features = fs.get_encoded_features()
    x = pg.layers.Dense(8, activation="relu")(encoded_features)
    predictions = pg.layers.Dense(1, activation="sigmoid")(x)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")                  # meant as a model input: no warning, as Keras
        training_model = pg.Model(inputs=encoded_features, outputs=predictions)
    training_model.compile(optimizer="adam", loss="binary_crossentropy", metrics=["accuracy"])
    inference_model = pg.Model(inputs=dict_inputs, outputs=predictions)
    history = training_model.fit(preprocessed, epochs=8, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0]

    sample = {"age": 60, "sex": 1, "chol": 233.0, "thal": "fixed", "ca": 0}
    input_dict = {name: pg.ops.convert_to_tensor([value]) for name, value in sample.items()}
    got = inference_model.predict(input_dict, verbose=0)
    want = training_model.predict(fs(input_dict), verbose=0)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    batch = {k: v[:5] for k, v in data.items()}
    np.testing.assert_allclose(inference_model.predict(batch, verbose=0),
                               training_model.predict(fs(batch), verbose=0), rtol=1e-5)
    path = str(tmp_path / "inference.gguf")
    inference_model.compile(loss="binary_crossentropy")
    inference_model.save(path)
    back = pg.load_model(path)
    np.testing.assert_allclose(back.predict(batch, verbose=0), inference_model.predict(batch, verbose=0), rtol=1e-6)
    back.free()
    training_model.free()
    inference_model.free()


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="unknown feature kind"):
        FeatureSpace({"a": "categorical"})
    with pytest.raises(ValueError, match="not a feature"):
        FeatureSpace({"a": "integer_categorical"}, crosses=[("a", "b")])
    with pytest.raises(ValueError, match="takes categorical features"):
        FeatureSpace({"a": "integer_categorical", "b": "float_normalized"}, crosses=[("a", "b")])
    with pytest.raises(ValueError, match="output_mode"):
        FeatureSpace({"a": "float"}, output_mode="stack")
    with pytest.raises(ValueError, match="output_mode"):
        FeatureSpace.integer_categorical(output_mode="multi_hot")
    with pytest.raises(ValueError, match="positive int"):
        FeatureSpace.float_discretized(num_bins=0)
    with pytest.raises(ValueError, match="two or more"):
        FeatureSpace.cross(("a",), 8)
    fs = _space()
    data = _frame(10)
    with pytest.raises(ValueError, match="adapt"):
        fs(data)
    with pytest.raises(ValueError, match="features alone"):
        fs.adapt(pg.data.Dataset.from_tensor_slices((data, np.zeros(10))).batch(5))
    fs.adapt(data)
    with pytest.raises(ValueError, match="missing"):
        fs({k: v for k, v in data.items() if k != "sex"})
    with pytest.raises(TypeError, match="takes strings"):
        fs(dict(data, thal=np.arange(10)))
    with pytest.raises(TypeError, match="takes numbers"):
        fs(dict(data, chol=np.array(["x"] * 10)))
    with pytest.raises(ValueError, match="whole numbers"):
        fs(dict(data, sex=np.full(10, 0.5)))
    with pytest.raises(ValueError, match="different numbers of rows"):
        fs(dict(data, sex=data["sex"][:3]))
