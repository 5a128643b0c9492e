# pyggml port of keras-io's examples/structured_data/structured_data_classification_from_scratch.py
# (heart disease prediction from a CSV: numerical and categorical features,
# preprocessing layers, dict inputs, a custom classifier layer).
#
# Data: the original reads the Cleveland heart disease CSV (303 rows, 13 features
# and the target) from a URL with pandas.  This port builds a table with the same
# columns, types and value ranges (offline_data.heart_like(): the target drawn
# from a logistic model of the features) because this machine and CI reach no
# data host.  --quick (CI; or KERAS_IO_QUICK=1) makes 1,500 rows instead of 303
# (the validation accuracy of 61 rows moves by 1.6 points a row) and trains 15
# epochs instead of 50.
#
# Beyond the loading, the original builds its input pipeline with TensorFlow's
# tf.data (from_tensor_slices, map, shuffle, batch), which is TensorFlow's and
# not Keras's: here the same steps run on dicts of numpy arrays (marked "tf.data:"
# below), and fit takes the arrays with batch_size=32.  Everything else is the
# original's code, with `import pyggml as keras` and `from pyggml import layers`.
# The port's own lines are the flags (offline_data.parse_flags: --quick, --seed,
# --threads), keras.utils.set_random_seed(SEED), the quick sizes, and a last line
# printing the metric tests/test_keras_io.py reads (marked "ours").
#
# As in Keras, the model's inputs are the dict that create_model_inputs() returns,
# whose numeric entries are the Normalization layers' outputs: Keras (and pyggml,
# with a warning) puts new Inputs in their place, so the numeric features enter
# the model unnormalised, as they do in the original.
#
#     python examples/keras_io/structured_data_classification.py          # 303 rows, 50 epochs
#     python examples/keras_io/structured_data_classification.py --quick

import numpy as np
import pandas as pd
import pyggml as keras
from pyggml import layers

import offline_data

QUICK, SEED = offline_data.parse_flags("Structured data classification from scratch (keras-io) on pyggml")
keras.utils.set_random_seed(SEED)

dataframe = pd.DataFrame(offline_data.heart_like(n=1500 if QUICK else 303))

dataframe.shape

dataframe.head()

val_dataframe = dataframe.sample(frac=0.2, random_state=1337)
train_dataframe = dataframe.drop(val_dataframe.index)

print(
    f"Using {len(train_dataframe)} samples for training "
    f"and {len(val_dataframe)} for validation"
)


COLUMN_NAMES = [
    "age",
    "sex",
    "cp",
    "trestbps",
    "chol",
    "fbs",
    "restecg",
    "thalach",
    "exang",
    "oldpeak",
    "slope",
    "ca",
    "thal",
    "target",
]
# Target feature name.
TARGET_FEATURE_NAME = "target"
# Numeric feature names.
NUMERIC_FEATURE_NAMES = ["age", "trestbps", "thalach", "oldpeak", "slope", "chol"]
# Categorical features and their vocabulary lists.
# Note that we add 'v=' as a prefix to all categorical feature values to make
# sure that they are treated as strings.

CATEGORICAL_FEATURES_WITH_VOCABULARY = {
    feature_name: sorted(
        [
            # Integer categorcal must be int and string must be str
            value if dataframe[feature_name].dtype == "int64" else str(value)
            for value in list(dataframe[feature_name].unique())
        ]
    )
    for feature_name in COLUMN_NAMES
    if feature_name not in list(NUMERIC_FEATURE_NAMES + [TARGET_FEATURE_NAME])
}
# All features names.
FEATURE_NAMES = NUMERIC_FEATURE_NAMES + list(
    CATEGORICAL_FEATURES_WITH_VOCABULARY.keys()
)


def encode_categorical(features, target):
    for feature_name in features:
        if feature_name in CATEGORICAL_FEATURES_WITH_VOCABULARY:
            lookup_class = (
                layers.StringLookup
                if features[feature_name].dtype == object  # tf.data: tf.string there
                else layers.IntegerLookup
            )
            vocabulary = CATEGORICAL_FEATURES_WITH_VOCABULARY[feature_name]
            # Create a lookup to convert a string values to an integer indices.
            # Since we are not using a mask token nor expecting any out of vocabulary
            # (oov) token, we set mask_token to None and  num_oov_indices to 0.
            index = lookup_class(
                vocabulary=vocabulary,
                mask_token=None,
                num_oov_indices=0,
                output_mode="binary",
            )
            # Convert the string input values into integer indices.
            # tf.data: map() calls it on one row's value at a time; here on every row, a row each
            value_index = index(features[feature_name][:, None])
            features[feature_name] = value_index

        else:
            pass

    # Change features from OrderedDict to Dict to match Inputs as they are Dict.
    return dict(features), target


def encode_numerical_feature(feature, name, dataset):
    # Create a Normalization layer for our feature
    normalizer = layers.Normalization()
    # Prepare a Dataset that only yields our feature
    feature_ds = dataset[0][name]  # tf.data: dataset.map(lambda x, y: x[name])
    feature_ds = np.expand_dims(feature_ds, -1)  # tf.data: feature_ds.map(lambda x: tf.expand_dims(x, -1))
    # Learn the statistics of the data
    normalizer.adapt(feature_ds)
    # Normalize the input feature
    encoded_feature = normalizer(feature)
    return encoded_feature


def dataframe_to_dataset(dataframe):
    dataframe = dataframe.copy()
    labels = dataframe.pop("target")
    # tf.data: tf.data.Dataset.from_tensor_slices((dict(dataframe), labels)).map(encode_categorical)
    ds = encode_categorical({k: v.to_numpy() for k, v in dataframe.items()}, labels.to_numpy())
    # tf.data: ds.shuffle(buffer_size=len(dataframe))
    order = np.random.permutation(len(dataframe))
    ds = ({k: v[order] for k, v in ds[0].items()}, ds[1][order])
    return ds


train_ds = dataframe_to_dataset(train_dataframe)
val_ds = dataframe_to_dataset(val_dataframe)

for name in ("age", "thal"):  # tf.data: for x, y in train_ds.take(1): print(x, y)
    print("Input:", name, train_ds[0][name][0])
print("Target:", train_ds[1][0])

# tf.data: train_ds = train_ds.batch(32); val_ds = val_ds.batch(32) (fit's batch_size=32 below)


def create_model_inputs():
    inputs = {}

    # This a helper function for creating categorical features
    def create_input_helper(feature_name):
        num_categories = len(CATEGORICAL_FEATURES_WITH_VOCABULARY[feature_name])
        inputs[feature_name] = layers.Input(
            name=feature_name, shape=(num_categories,), dtype="int64"
        )
        return inputs

    for feature_name in FEATURE_NAMES:
        if feature_name in CATEGORICAL_FEATURES_WITH_VOCABULARY:
            # Categorical features
            create_input_helper(feature_name)
        else:
            # Make them float32, they are Real numbers
            feature_input = layers.Input(name=feature_name, shape=(1,), dtype="float32")
            # Process the Inputs here
            inputs[feature_name] = encode_numerical_feature(
                feature_input, feature_name, train_ds
            )
    return inputs


# This Layer defines the logic of the Model to perform the classification
class Classifier(keras.layers.Layer):

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.dense_1 = layers.Dense(32, activation="relu")
        self.dropout = layers.Dropout(0.5)
        self.dense_2 = layers.Dense(1, activation="sigmoid")

    def call(self, inputs):
        all_features = layers.concatenate(list(inputs.values()))
        x = self.dense_1(all_features)
        x = self.dropout(x)
        output = self.dense_2(x)
        return output

    # Surpress build warnings
    def build(self, input_shape):
        self.built = True


# Create the Classifier model
def create_model():
    all_inputs = create_model_inputs()
    output = Classifier()(all_inputs)
    model = keras.Model(all_inputs, output)
    return model


model = create_model()
model.compile("adam", "binary_crossentropy", metrics=["accuracy"])

# `rankdir='LR'` is to make the graph horizontal.
keras.utils.plot_model(model, show_shapes=True, rankdir="LR")

model.fit(train_ds[0], train_ds[1], batch_size=32, epochs=50 if not QUICK else 15, validation_data=val_ds)

# (ours: the number the test compares with the PyTorch twin's)
print("Validation accuracy:", model.evaluate(val_ds[0], val_ds[1], verbose=0)[1])

sample = {
    "age": 60,
    "sex": 1,
    "cp": 1,
    "trestbps": 145,
    "chol": 233,
    "fbs": 1,
    "restecg": 2,
    "thalach": 150,
    "exang": 0,
    "oldpeak": 2.3,
    "slope": 3,
    "ca": 0,
    "thal": "fixed",
}


# Given the category (in the sample above - key) and the category value (in the sample above - value),
# we return its one-hot encoding
def get_cat_encoding(cat, cat_value):
    # Create a list of zeros with the same length as categories
    encoding = [0] * len(cat)
    # Find the index of category_value in categories and set the corresponding position to 1
    if cat_value in cat:
        encoding[cat.index(cat_value)] = 1
    return encoding


for name, value in sample.items():
    if name in CATEGORICAL_FEATURES_WITH_VOCABULARY:
        sample.update(
            {
                name: get_cat_encoding(
                    CATEGORICAL_FEATURES_WITH_VOCABULARY[name], sample[name]
                )
            }
        )
# Convert inputs to tensors
input_dict = {name: np.asarray([value]) for name, value in sample.items()}  # tf.convert_to_tensor there
predictions = model.predict(input_dict)

print(
    f"This particular patient had a {100 * predictions[0][0]:.1f} "
    "percent probability of having a heart disease, "
    "as evaluated by our model."
)
