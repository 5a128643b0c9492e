"""pg.tree, pg.config, Keras's serialization names, get_file, Progbar, the data-packing
helpers and audio_dataset_from_directory."""

import collections
import logging

import numpy as np
import pytest

import pyggml as pg

tree = pg.tree


# ---------------------------------------------------------------- pg.tree

Point = collections.namedtuple("Point", ["x", "y"])


def test_tree_flatten_orders_dicts_by_key_and_keeps_none_as_leaf():
    s = {"b": [1, (2, 3)], "a": None, "c": Point(4, {"z": 5, "y": 6})}
    assert tree.flatten(s) == [None, 1, 2, 3, 4, 6, 5]
    assert tree.flatten(7) == [7]
    assert tree.flatten("text") == ["text"]
    assert tree.flatten([]) == []
    od = collections.OrderedDict([("z", 1), ("a", 2)])
    assert tree.flatten(od) == [1, 2]            # an OrderedDict keeps its own order


def test_tree_pack_sequence_as_rebuilds_types_and_insertion_order():
    s = {"b": [1, (2, 3)], "a": None, "c": Point(4, 5)}
    out = tree.pack_sequence_as(s, list(range(10, 16)))
    assert out == {"b": [11, (12, 13)], "a": 10, "c": Point(14, 15)}
    assert list(out) == ["b", "a", "c"] and isinstance(out["c"], Point)
    assert tree.unflatten_as(s, list(range(6))) == tree.pack_sequence_as(s, list(range(6)))
    with pytest.raises(ValueError, match="6 leaves"):
        tree.pack_sequence_as(s, [1, 2])
    with pytest.raises(TypeError, match="flat_sequence"):
        tree.pack_sequence_as(s, 3)


def test_tree_flatten_with_path_and_is_nested():
    s = {"a": [1, {"k": 2}], "b": (3,)}
    assert tree.flatten_with_path(s) == [(("a", 0), 1), (("a", 1, "k"), 2), (("b", 0), 3)]
    assert tree.is_nested([]) and tree.is_nested({}) and tree.is_nested(Point(1, 2))
    assert not tree.is_nested("ab") and not tree.is_nested(None) and not tree.is_nested(np.zeros(3))


def test_tree_map_structure_and_assert_same_structure():
    a = {"x": [1, 2], "y": (3,)}
    b = {"y": (30,), "x": [10, 20]}
    assert tree.map_structure(lambda u, v: u + v, a, b) == {"x": [11, 22], "y": (33,)}
    with pytest.raises(ValueError, match="differ"):
        tree.assert_same_structure([1, 2], [1, 2, 3])
    with pytest.raises(ValueError, match="list and tuple"):
        tree.assert_same_structure([1, 2], (1, 2))
    tree.assert_same_structure([1, 2], (1, 2), check_types=False)
    with pytest.raises(ValueError, match="keys"):
        tree.assert_same_structure({"a": 1}, {"b": 1})
    with pytest.raises(ValueError, match="nested"):
        tree.assert_same_structure([1], [[1]])
    with pytest.raises(ValueError):
        tree.map_structure(lambda u, v: u, [1, 2], [1])
    with pytest.raises(TypeError):
        tree.map_structure(3, [1])


def test_tree_map_structure_up_to_hands_deeper_parts_whole():
    shallow = {"a": None, "b": [None, None]}
    deep = {"a": [1, 2, 3], "b": [(4, 5), {"q": 6}]}
    out = tree.map_structure_up_to(shallow, lambda v: len(tree.flatten(v)), deep)
    assert out == {"a": 3, "b": [2, 1]}
    with pytest.raises(ValueError, match="2 elements"):
        tree.map_structure_up_to([None, None], lambda v: v, [1, 2, 3])
    with pytest.raises(ValueError, match="leaf"):
        tree.map_structure_up_to([None, [None]], lambda v: v, [1, 2])


def test_tree_traverse_top_down_bottom_up_and_map_to_none():
    s = [1, [2, 3], {"a": 4}]
    # top down: replacing a node stops the descent into it
    out = tree.traverse(lambda n: "LIST" if isinstance(n, list) and len(n) == 2 else None, s)
    assert out == [1, "LIST", {"a": 4}]
    seen = []
    tree.traverse(lambda n: seen.append(n), s, top_down=False)
    assert seen[0] == 1 and seen[-1] == s            # children before their parent
    out = tree.traverse(lambda n: n * 10 if isinstance(n, int) else None, s, top_down=False)
    assert out == [10, [20, 30], {"a": 40}]
    out = tree.traverse(lambda n: tree.MAP_TO_NONE if n == 2 else None, s)
    assert out == [1, [None, 3], {"a": 4}]


def test_tree_lists_to_tuples_and_map_shape_structure():
    assert tree.lists_to_tuples({"a": [1, [2]], "b": (3, [4])}) == {"a": (1, (2,)), "b": (3, (4,))}
    shapes = {"x": (None, 3), "y": [(2, 2), (5,)]}
    assert tree.map_shape_structure(lambda s: len(s), shapes) == {"x": 2, "y": [2, 1]}


# ---------------------------------------------------------------- pg.config

def test_config_shares_backend_state():
    old = pg.config.epsilon()
    try:
        pg.config.set_epsilon(1e-5)
        assert pg.backend.epsilon() == 1e-5
        pg.backend.set_epsilon(1e-3)
        assert pg.config.epsilon() == 1e-3
    finally:
        pg.backend.set_epsilon(old)
    try:
        pg.config.set_image_data_format("channels_first")
        assert pg.backend.image_data_format() == "channels_first"
    finally:
        pg.config.set_image_data_format("channels_last")
    assert pg.config.floatx() == "float32" and pg.config.backend() == "pyggml"
    pg.config.set_floatx("float32")
    with pytest.raises(ValueError, match="float32"):
        pg.config.set_floatx("float16")
    with pytest.raises(ValueError):
        pg.config.set_epsilon(-1)
    with pytest.raises(ValueError, match="channels"):
        pg.config.set_image_data_format("nhwc")
    pg.config.set_backend("pyggml")
    with pytest.raises(ValueError, match="jax"):
        pg.config.set_backend("jax")
    assert pg.config.dtype_policy() == "float32"
    with pytest.raises(ValueError, match="mixed_float16"):
        pg.config.set_dtype_policy("mixed_float16")


def test_config_flags_toggle():
    assert pg.config.is_interactive_logging_enabled()
    pg.config.disable_interactive_logging()
    try:
        assert not pg.config.is_interactive_logging_enabled()
    finally:
        pg.config.enable_interactive_logging()
    assert pg.config.is_interactive_logging_enabled()
    assert pg.config.is_traceback_filtering_enabled()
    pg.config.disable_traceback_filtering()
    assert not pg.config.is_traceback_filtering_enabled()
    pg.config.enable_traceback_filtering()
    assert pg.config.in_safe_mode()


# ---------------------------------------------------------------- serialization names

def test_serialization_names_are_shared_between_utils_and_saving():
    for name in ("register_keras_serializable", "serialize_keras_object", "deserialize_keras_object",
                 "custom_object_scope", "get_custom_objects", "get_registered_name", "get_registered_object"):
        assert getattr(pg.utils, name) is getattr(pg.saving, name), name


def test_serialize_round_trip_of_builtins():
    s = pg.saving
    d = pg.layers.Dense(3, activation="relu", name="dd")
    c = s.serialize_keras_object(d)
    assert c["module"] == "keras.layers" and c["class_name"] == "Dense" and c["registered_name"] is None
    import json
    c = json.loads(json.dumps(c))
    d2 = s.deserialize_keras_object(c)
    assert isinstance(d2, pg.layers.Dense) and d2.get_config() == d.get_config()
    c = s.serialize_keras_object(pg.layers.Conv2D(2, (3, 3)))
    assert s.deserialize_keras_object(json.loads(json.dumps(c))).get_config()["kernel_size"] == (3, 3)
    loss = s.deserialize_keras_object(s.serialize_keras_object(pg.losses.MeanAbsoluteError()))
    assert isinstance(loss, pg.losses.MeanAbsoluteError)
    opt = s.deserialize_keras_object(s.serialize_keras_object(pg.optimizers.Adam(0.01)))
    assert isinstance(opt, pg.optimizers.Adam) and opt.learning_rate == pytest.approx(0.01)
    fn = s.serialize_keras_object(pg.activations.relu)
    assert fn == {"module": "keras.activations", "class_name": "function", "config": "relu",
                  "registered_name": None}
    assert s.deserialize_keras_object(fn) is pg.activations.relu
    value = {"a": (1, 2), "b": np.arange(3.0), "c": b"\x00\xff", "d": [None, "s", 2.5]}
    back = s.deserialize_keras_object(json.loads(json.dumps(s.serialize_keras_object(value))))
    assert back["a"] == (1, 2) and back["c"] == b"\x00\xff" and back["d"] == [None, "s", 2.5]
    np.testing.assert_array_equal(back["b"], np.arange(3.0))


@pg.saving.register_keras_serializable(package="utilsx_test")
class _Scaler:
    def __init__(self, factor=2.0):
        self.factor = factor

    def get_config(self):
        return {"factor": self.factor}

    @classmethod
    def from_config(cls, config):
        return cls(**config)


def test_serialize_user_registered_class_and_custom_objects():
    s = pg.saving
    c = s.serialize_keras_object(_Scaler(3.0))
    assert c["registered_name"] == "utilsx_test>_Scaler" and c["module"] == __name__
    assert s.deserialize_keras_object(c).factor == 3.0
    assert s.get_registered_name(_Scaler) == "utilsx_test>_Scaler"
    assert s.get_registered_object("utilsx_test>_Scaler") is _Scaler
    assert s.get_custom_objects()["utilsx_test>_Scaler"] is _Scaler

    class Unregistered(_Scaler):
        pass
    c = s.serialize_keras_object(Unregistered(5.0))
    with pytest.raises(ValueError, match="Unregistered"):
        s.deserialize_keras_object(c)
    assert s.deserialize_keras_object(c, custom_objects={"Unregistered": Unregistered}).factor == 5.0
    with s.custom_object_scope({"Unregistered": Unregistered}):
        assert s.get_registered_object("Unregistered") is Unregistered
        assert s.deserialize_keras_object(c).factor == 5.0
    assert s.get_registered_object("Unregistered") is None
    s.get_custom_objects()["Unregistered"] = Unregistered
    try:
        assert s.deserialize_keras_object(c).factor == 5.0
    finally:
        del s.get_custom_objects()["Unregistered"]
    assert s.get_registered_object("x", module_objects={"x": len}) is len


def test_deserialize_refuses_lambdas_and_bad_input():
    s = pg.saving
    c = s.serialize_keras_object(lambda x: x + 1)
    assert c["class_name"] == "__lambda__"
    with pytest.raises(ValueError, match="lambda"):
        s.deserialize_keras_object(c)
    with pytest.raises(ValueError, match="lambda"):
        s.deserialize_keras_object(c, safe_mode=False)
    with pytest.raises(TypeError, match="get_config"):
        s.serialize_keras_object(object())
    with pytest.raises(TypeError, match="class"):
        s.serialize_keras_object(pg.layers.Dense)
    with pytest.raises(TypeError, match="custom_objects"):
        s.deserialize_keras_object({"class_name": "Dense", "config": {}}, custom_objects=[1])
    with pytest.raises(TypeError):
        s.get_registered_object(3)
