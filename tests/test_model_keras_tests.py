"""Gaps found by porting Keras 3.15.1's model tests (models/functional_test.py, sequential_test.py,
cloning_test.py, model_test.py): dict inputs matched by their keys (nested dicts too), the
Sequential's checks and deferred build, a functional subclass's config, clone_model's
call_function / recursive / compile, and pickling.  The expected behaviour was checked on real
Keras 3.15.1 (torch backend); numbers are checked against numpy on the models' own weights."""

import os
import pickle

import numpy as np
import pytest

import pyggml as pg

L = pg.layers
RNG = np.random.default_rng(0)


def _dense(layer, x):
    w, b = layer.get_weights()              # Keras's layout: kernel (in, out), bias
    return x @ w + b


def _two_input_model():
    a, b = pg.Input(shape=(3,), name="a"), pg.Input(shape=(4,), name="b")
    da, db, top = L.Dense(5), L.Dense(5), L.Dense(4)
    out = top(L.Concatenate()([da(a), db(b)]))
    return pg.Model({"c": a, "d": b}, out), (da, db, top)


def _two_input_reference(layers, c, d):
    da, db, top = layers
    return _dense(top, np.concatenate([_dense(da, c), _dense(db, d)], axis=-1))


def test_dict_inputs_matched_by_the_dicts_keys():
    # Keras: Model({"c": a, "d": b}, o) takes {"c": ..., "d": ...} (the structure's keys), not the Input names
    m, layers = _two_input_model()
    x = {"c": RNG.random((6, 3), dtype=np.float32), "d": RNG.random((6, 4), dtype=np.float32)}
    ref = _two_input_reference(layers, x["c"], x["d"])
    np.testing.assert_allclose(m.predict(x, verbose=0), ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(m(x)), ref, rtol=1e-5, atol=1e-5)
    assert m.compute_output_shape([(None, 3), (None, 4)]) == (None, 4)
    with pytest.raises(ValueError, match="lacks 'd'"):
        m.predict({"c": x["c"]}, verbose=0)
    # called on a dict of Inputs with those keys, nested in another model
    ia, ib = pg.Input((3,)), pg.Input((4,))
    outer = pg.Model([ia, ib], m({"c": ia, "d": ib}))
    np.testing.assert_allclose(outer.predict([x["c"], x["d"]], verbose=0), ref, rtol=1e-5, atol=1e-5)
    # the keys survive get_config/from_config and save/load
    twin = pg.Model.from_config(m.get_config())
    twin.set_weights(m.get_weights())
    np.testing.assert_allclose(twin.predict(x, verbose=0), ref, rtol=1e-5, atol=1e-5)


def test_dict_inputs_by_key_train(tmp_path):
    m, layers = _two_input_model()
    m.compile(optimizer="sgd", loss="mse")
    x = {"c": RNG.random((16, 3), dtype=np.float32), "d": RNG.random((16, 4), dtype=np.float32)}
    y = RNG.random((16, 4), dtype=np.float32)
    losses = m.fit(x, y, epochs=4, batch_size=16, verbose=0).history["loss"]
    assert losses[-1] < losses[0]
    path = str(tmp_path / "m.gguf")
    m.save(path)
    back = pg.models.load_model(path)
    np.testing.assert_allclose(back.predict(x, verbose=0), _two_input_reference(layers, x["c"], x["d"]),
                               rtol=1e-5, atol=1e-5)


def _nested_model():
    i1, i2, i3 = pg.Input((1,)), pg.Input((2,)), pg.Input((3,))
    d1, d2, d3 = L.Dense(1), L.Dense(2), L.Dense(3)
    m = pg.Model({"1": i1, "others": {"2": i2, "3": i3}}, {"1": d1(i1), "others": {"2": d2(i2), "3": d3(i3)}})
    return m, (d1, d2, d3)


def test_nested_dict_inputs(tmp_path):
    # Keras's functional_test: inputs {"1": i1, "others": {"2": i2, "3": i3}}
    m, (d1, d2, d3) = _nested_model()
    x = {"1": RNG.random((2, 1), dtype=np.float32),
         "others": {"2": RNG.random((2, 2), dtype=np.float32), "3": RNG.random((2, 3), dtype=np.float32)}}
    out = m.predict(x, verbose=0)
    assert out["others"]["3"].shape == (2, 3)
    np.testing.assert_allclose(out["1"], _dense(d1, x["1"]), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out["others"]["2"], _dense(d2, x["others"]["2"]), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out["others"]["3"], _dense(d3, x["others"]["3"]), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(m(x)["others"]["3"], out["others"]["3"], rtol=1e-5, atol=1e-5)
    twin = pg.Model.from_config(m.get_config())
    twin.set_weights(m.get_weights())
    np.testing.assert_allclose(twin.predict(x, verbose=0)["others"]["2"], out["others"]["2"], rtol=1e-5, atol=1e-5)
    path = str(tmp_path / "n.gguf")
    m.save(path)
    back = pg.models.load_model(path)
    np.testing.assert_allclose(back.predict(x, verbose=0)["others"]["3"], out["others"]["3"], rtol=1e-5, atol=1e-5)


def test_sequential_without_inputs_has_no_inputs_attribute():
    # Keras: hasattr(Sequential(), "inputs") is False (AttributeError)
    assert not hasattr(pg.Sequential(), "inputs")
    assert not hasattr(pg.Sequential(), "outputs")
    assert not hasattr(pg.Sequential([L.Dense(4)]), "inputs")
    assert len(pg.Sequential([pg.Input((2,)), L.Dense(4)]).inputs) == 1


def test_sequential_refuses_a_second_input_and_a_conflicting_build():
    s = pg.Sequential()
    s.add(pg.Input(shape=(2,)))
    with pytest.raises(ValueError):
        s.add(pg.Input(shape=(5,)))
    assert s.input_shape == (None, 2)
    s = pg.Sequential([pg.Input(shape=(2,)), L.Dense(2)])
    with pytest.raises(ValueError):
        s.build((3, 4))
    s.build((None, 2))                                  # its own shape: fine
    assert s.output_shape == (None, 2)


def test_deferred_sequential_output_shape_and_config():
    d = pg.Sequential([L.Dense(4), L.Dense(8)])
    assert d.compute_output_shape((1, 2)) == (1, 8)     # Keras 3.15.1: (1, 8), nothing built
    assert not d.built
    back = pg.Sequential.from_config(d.get_config())
    assert [type(l).__name__ for l in back.layers] == ["Dense", "Dense"]
    assert [l.units for l in back.layers] == [4, 8]
    x = RNG.random((3, 2), dtype=np.float32)
    y = back.predict(x, verbose=0)                      # built by its first data
    l1, l2 = back.layers
    np.testing.assert_allclose(y, _dense(l2, _dense(l1, x)), rtol=1e-5, atol=1e-5)
    built = pg.Sequential([pg.Input((2,)), L.Dense(8)])
    assert built.compute_output_shape((1, 2)) == (1, 8)


class CustomModel(pg.Model):
    def __init__(self, *args, param=1, **kwargs):
        super().__init__(*args, **kwargs)
        self.param = param

    def get_config(self):
        return super().get_config() | {"param": self.param}


def test_functional_subclass_from_config_gets_its_own_keys():
    i = L.Input((3,))
    m = CustomModel(inputs=i, outputs=L.Dense(5)(i), param=3)
    back = CustomModel.from_config(m.get_config())
    assert isinstance(back, CustomModel) and back.param == 3      # Keras 3.15.1: 3
    back.set_weights(m.get_weights())
    x = RNG.random((2, 3), dtype=np.float32)
    np.testing.assert_allclose(back.predict(x, verbose=0), m.predict(x, verbose=0), rtol=1e-6, atol=1e-6)


def test_clone_model_dict_outputs_with_an_op_result():
    x, y = L.Input((3,)), L.Input((3,))
    z1 = x + y
    z2 = L.Dense(5)(z1)
    m = pg.Model(dict(x=x, y=y), dict(z1=z1, z2=z2))
    c = pg.models.clone_model(m)
    data = {"x": RNG.random((2, 3), dtype=np.float32), "y": RNG.random((2, 3), dtype=np.float32)}
    out = c.predict(data, verbose=0)
    assert sorted(out) == ["z1", "z2"] and out["z2"].shape == (2, 5)
    np.testing.assert_allclose(out["z1"], data["x"] + data["y"], rtol=1e-6)


def test_clone_model_call_function_and_recursive():
    def add_dropout(layer, *args, **kwargs):
        out = layer(*args, **kwargs)
        return L.Dropout(0.5)(out) if isinstance(layer, L.Dense) else out
    x = pg.Input((3,))
    m = pg.Model(x, L.Dense(2)(L.Dense(4)(x)))
    c = pg.models.clone_model(m, call_function=add_dropout)
    # Keras 3.15.1: ['InputLayer', 'Dense', 'Dropout', 'Dense', 'Dropout']
    assert [type(l).__name__ for l in c.layers] == ["InputLayer", "Dense", "Dropout", "Dense", "Dropout"]
    c.set_weights(m.get_weights())
    data = RNG.random((4, 3), dtype=np.float32)
    np.testing.assert_allclose(c.predict(data, verbose=0), m.predict(data, verbose=0), rtol=1e-5, atol=1e-6)
    same = pg.models.clone_model(m, clone_function=lambda l: l, call_function=lambda l, *a, **k: l(*a, **k))
    assert len(same.layers) == 3 and same.layers[1] is m.layers[1]
    with pytest.raises(ValueError):
        pg.models.clone_model(pg.Sequential([pg.Input((3,)), L.Dense(2)]), call_function=add_dropout)
    inner = pg.Sequential([pg.Input((3,)), L.Dense(2)])
    x = pg.Input((3,))
    outer = pg.Model(x, inner(x))
    deep = pg.models.clone_model(outer, clone_function=lambda l: l.__class__.from_config(l.get_config()),
                                 recursive=True)
    assert type(deep.layers[1]).__name__ == "Sequential" and deep.layers[1] is not inner
    shared = pg.models.clone_model(outer, clone_function=lambda l: l)
    assert shared.layers[1] is inner


def test_clone_model_deferred_sequential_and_compiled():
    c = pg.models.clone_model(pg.Sequential([L.Dense(2), L.Dense(2)]))
    assert len(c.layers) == 2 and not c.built
    # Keras 3.15.1: the clone of a compiled model is compiled (compile_from_config)
    m = pg.Sequential([pg.Input((3,)), L.Dense(2)])
    m.compile(optimizer="sgd", loss="mse")
    assert pg.models.clone_model(m).compiled
    x = pg.Input((3,))
    f = pg.Model(x, L.Dense(2)(x))
    f.compile(optimizer="sgd", loss="mse")
    cf = pg.models.clone_model(f, clone_function=lambda l: l.__class__.from_config(l.get_config()))
    assert cf.compiled and type(cf.optimizer).__name__ == "SGD"
    assert not pg.models.clone_model(pg.Model(x, L.Dense(2)(x))).compiled


@pytest.mark.parametrize("kind", ["sequential", "functional"])
@pytest.mark.parametrize("compiled", [False, True])
def test_pickle_model(kind, compiled):
    if kind == "sequential":
        m = pg.Sequential([pg.Input((3,)), L.Dense(4, activation="relu"), L.Dense(2)])
    else:
        a = pg.Input((3,))
        m = pg.Model(a, L.Dense(2)(L.Dense(4, activation="relu")(a)))
    x = RNG.random((5, 3), dtype=np.float32)
    if compiled:
        m.compile(optimizer="sgd", loss="mse")
        m.fit(x, RNG.random((5, 2), dtype=np.float32), epochs=2, verbose=0)
    r = pickle.loads(pickle.dumps(m))
    assert type(r) is type(m) and r.compiled == compiled
    np.testing.assert_array_equal(r.predict(x, verbose=0), m.predict(x, verbose=0))
    if compiled:
        assert type(r.optimizer).__name__ == "SGD"
        r.fit(x, RNG.random((5, 2), dtype=np.float32), epochs=1, verbose=0)


@pytest.mark.parametrize("compiled", [False, True])
def test_pickle_an_unbuilt_sequential(compiled):
    # Keras pickles a Sequential that waits for its first data: its layers, unbuilt (and the
    # compile it was given); it saved nothing before (no input shape)
    m = pg.Sequential([L.Dense(4, activation="relu"), L.Dropout(0.1)], name="waits")
    if compiled:
        m.compile(optimizer=pg.optimizers.Adam(0.01), loss="mse", metrics=["mae"])
    r = pickle.loads(pickle.dumps(m))
    assert type(r) is pg.Sequential and r.name == "waits" and not r.built
    assert [type(l).__name__ for l in r.layers] == ["Dense", "Dropout"]
    if compiled:
        history = r.fit(RNG.random((4, 3), dtype=np.float32), RNG.random((4, 4), dtype=np.float32), verbose=0)
        assert "mae" in history.history and r.optimizer.learning_rate == pytest.approx(0.01)
    else:
        assert r.predict(RNG.random((2, 5), dtype=np.float32), verbose=0).shape == (2, 4)


def test_pickle_model_with_dict_inputs():
    m, layers = _two_input_model()
    x = {"c": RNG.random((2, 3), dtype=np.float32), "d": RNG.random((2, 4), dtype=np.float32)}
    r = pickle.loads(pickle.dumps(m))
    np.testing.assert_array_equal(r.predict(x, verbose=0), m.predict(x, verbose=0))
    assert not os.path.exists(os.path.join(os.getcwd(), "model.gguf"))


def test_model_output_is_the_structure_given():
    # Keras: model.output is the outputs as given (needs the model.py change of this fix: Model.output)
    x, y = L.Input((3,)), L.Input((3,))
    z1 = x + y
    m = pg.Model(dict(x=x, y=y), dict(z1=z1, z2=L.Dense(5)(z1)))
    assert sorted(pg.models.clone_model(m).output) == ["z1", "z2"]
    assert not isinstance(pg.Model(x, L.Dense(2)(x)).output, list)


def test_inputs_with_a_trailing_axis_of_one_more_or_less_fit_the_input_as_keras():
    for shape, data, out in (((3,), np.ones((2, 3, 1)), (2, 3)), ((3, 1), np.ones((2, 3)), (2, 3, 3)),
                             ((None,), np.ones((2, 5, 1)), (2, 5))):
        i = pg.Input(shape=shape)
        m = pg.Model(i, pg.layers.Dense(3)(i) if shape != (None,) else pg.layers.RepeatVector(1)(i))
        got = m.predict(data, verbose=0)
        assert got.shape == (out if shape != (None,) else (2, 1, 5))
    i = pg.Input(shape=(3,))
    m = pg.Model(i, pg.layers.Dense(1)(i))
    with pytest.raises(ValueError, match="must have shape"):
        m.predict(np.ones((2, 3, 2)), verbose=0)


def test_sequential_with_an_input_is_built_as_made():
    # Keras builds a Sequential that starts with an Input as it is made: built, its layers
    # built, their weights there; one without an Input waits for its first data
    m = pg.Sequential([pg.Input((3,)), pg.layers.Dense(2), pg.layers.Dense(1)])
    assert m.built and all(l.built for l in m.layers)
    assert [tuple(w.shape) for w in m.layers[0].get_weights()] == [(3, 2), (2,)]
    waiting = pg.Sequential([pg.layers.Dense(2)])
    assert not waiting.built and not waiting.layers[0].built
    waiting(np.ones((4, 3), np.float32))
    assert waiting.built and waiting.layers[0].built
    # a layer that cannot take the input: not built, and fit says why
    bad = pg.Sequential([pg.Input((3,)), pg.layers.Conv2D(2, 3)])
    assert not bad.built
    with pytest.raises(ValueError):
        bad.compile("sgd", "mse")
        bad.fit(np.ones((2, 3), np.float32), np.ones((2, 2), np.float32), verbose=0)


def test_sequential_built_from_data_takes_other_lengths_and_sizes():
    # Keras's Sequential built on its first data runs its layers on whatever comes next: a
    # recurrent model trained on 5 steps predicts on 9, goes on training on 7; a CNN trained on
    # 8x8 images predicts on 12x10 ones.  The weights and the optimizer state carry on.
    rng = np.random.default_rng(0)
    m = pg.Sequential([pg.layers.LSTM(2)])
    m.compile("adam", "mse")
    m.fit(rng.normal(size=(8, 5, 3)).astype(np.float32), np.ones((8, 2), np.float32), epochs=2, verbose=0)
    weights, steps = m.get_weights(), int(m.optimizer.iterations)
    long_x = rng.normal(size=(2, 9, 3)).astype(np.float32)
    got = m.predict(long_x, verbose=0)
    assert all(np.array_equal(weights[k], v) for k, v in m.get_weights().items())
    i = pg.Input((9, 3))
    twin = pg.Model(i, pg.layers.LSTM(2)(i))
    twin.layers[1].set_weights(m.layers[0].get_weights())
    np.testing.assert_allclose(got, twin.predict(long_x, verbose=0), rtol=1e-5, atol=1e-6)
    m.fit(rng.normal(size=(8, 7, 3)).astype(np.float32), np.ones((8, 2), np.float32), verbose=0)
    assert int(m.optimizer.iterations) == steps + 1
    assert m.predict(long_x[:, :4], verbose=0).shape == (2, 2)

    cnn = pg.Sequential([pg.layers.Conv2D(2, 3), pg.layers.GlobalAveragePooling2D(), pg.layers.Dense(1)])
    cnn.compile("sgd", "mse")
    cnn.fit(np.ones((4, 8, 8, 1), np.float32), np.ones((4, 1), np.float32), verbose=0)
    big = rng.normal(size=(2, 12, 10, 1)).astype(np.float32)
    i = pg.Input((12, 10, 1))
    same = pg.Model(i, pg.layers.Dense(1)(pg.layers.GlobalAveragePooling2D()(pg.layers.Conv2D(2, 3)(i))))
    for mine, theirs in zip(same.layers[1:], cnn.layers):
        mine.set_weights(theirs.get_weights())
    np.testing.assert_allclose(cnn.predict(big, verbose=0), same.predict(big, verbose=0), rtol=1e-5, atol=1e-6)


def test_sequential_refuses_a_shape_its_layers_cannot_take():
    m = pg.Sequential([pg.layers.Flatten(), pg.layers.Dense(1)])
    m.compile("sgd", "mse")
    m.fit(np.ones((4, 8, 8), np.float32), np.ones((4, 1), np.float32), verbose=0)
    with pytest.raises(ValueError, match=r"must have shape \(n, 8, 8\), got \(2, 9, 8\)"):
        m.predict(np.ones((2, 9, 8), np.float32), verbose=0)
    assert m.input_shape == (None, 8, 8)                 # unchanged, and it still works
    assert m.predict(np.ones((2, 8, 8), np.float32), verbose=0).shape == (2, 1)


def test_a_model_on_nested_dict_inputs_is_called_inside_other_models(tmp_path):
    # Keras: a model made on {"x": {"a": ..., "b": ...}, "c": ...} is called with such a dict of
    # symbolic inputs inside a functional model, and of tensors in a subclassed model's call
    a, b, c = pg.Input((2,), name="a"), pg.Input((3,), name="b"), pg.Input((1,), name="c")
    inner = pg.Model({"x": {"a": a, "b": b}, "c": c}, pg.layers.Dense(1)(pg.layers.Concatenate()([a, b, c])))
    rng = np.random.default_rng(0)
    x = [rng.normal(size=(4, n)).astype(np.float32) for n in (2, 3, 1)]
    want = inner.predict({"x": {"a": x[0], "b": x[1]}, "c": x[2]}, verbose=0)
    # (the weights read by hand: the inputs reach the Dense in the model's order)
    kernel, bias = inner.layers[-1].get_weights()
    np.testing.assert_allclose(want, np.concatenate(x, axis=1) @ kernel + bias, rtol=1e-5, atol=1e-6)

    a2, b2, c2 = pg.Input((2,)), pg.Input((3,)), pg.Input((1,))
    outer = pg.Model([a2, b2, c2], inner({"c": c2, "x": {"b": b2, "a": a2}}))    # keys in any order
    np.testing.assert_allclose(outer.predict(x, verbose=0), want, rtol=1e-6)
    outer.save(str(tmp_path / "outer.gguf"))
    back = pg.models.load_model(str(tmp_path / "outer.gguf"))
    np.testing.assert_allclose(back.predict(x, verbose=0), want, rtol=1e-6)

    class Holder(pg.Model):
        def __init__(self):
            super().__init__()
            self.inner = inner

        def call(self, xs):
            return self.inner({"x": {"a": xs[0], "b": xs[1]}, "c": xs[2]})
    np.testing.assert_allclose(Holder().predict(x, verbose=0), want, rtol=1e-6)


def test_a_graph_too_large_for_any_context_says_what_to_do(monkeypatch):
    # a recurrent layer over very many steps unrolls past the largest graph: the error names the
    # limit and the way out, not the context's internals (here the largest graph is made small)
    from pyggml.models import executors
    monkeypatch.setattr(executors, "_SCALES", (1,))
    i = pg.Input((None, 3))
    m = pg.Model(i, pg.layers.LSTM(2)(i))
    assert m.predict(np.ones((1, 5, 3), np.float32), verbose=0).shape == (1, 2)
    with pytest.raises(pg.ContextFullError, match="shorter sequences"):
        m.predict(np.ones((1, 3000, 3), np.float32), verbose=0)


def test_sequential_with_an_input_takes_other_lengths_as_keras_s():
    # Keras's Sequential runs its layers past its Input's shape (a functional model refuses)
    rng = np.random.default_rng(1)
    m = pg.Sequential([pg.Input((5, 3)), pg.layers.LSTM(2)])
    x = rng.normal(size=(2, 9, 3)).astype(np.float32)
    i = pg.Input((9, 3))
    twin = pg.Model(i, pg.layers.LSTM(2)(i))
    twin.layers[1].set_weights(m.layers[0].get_weights())
    np.testing.assert_allclose(m.predict(x, verbose=0), twin.predict(x, verbose=0), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="must have shape"):
        twin.predict(x[:, :5], verbose=0)


def test_model_input_is_the_structure_given_and_clones_keep_it():
    # Keras: model.input is the inputs as given (a dict here), model.inputs a list; a clone
    # (and a model from its config) keeps the dict
    x, y = pg.Input((3,), name="x"), pg.Input((3,), name="y")
    z = L.Dense(5)(x + y)
    m = pg.Model({"x": x, "y": y}, {"z1": x + y, "z2": z})
    assert isinstance(m.input, dict) and m.input["x"] is x and m.input["y"] is y
    assert isinstance(m.inputs, list) and len(m.inputs) == 2
    for twin in (pg.models.clone_model(m), pg.Model.from_config(m.get_config())):
        assert isinstance(twin.input, dict) and sorted(twin.input) == ["x", "y"]
        out = twin({"x": np.ones((2, 3), np.float32), "y": np.zeros((2, 3), np.float32)})
        assert sorted(out) == ["z1", "z2"]
        np.testing.assert_array_equal(np.asarray(out["z1"]), np.ones((2, 3)))
    nested = pg.Model({"p": {"a": x}, "b": y}, x + y)
    assert isinstance(nested.input["p"], dict) and nested.input["p"]["a"] is x


def test_outputs_given_as_a_tuple_come_back_a_tuple():
    # Keras: Model(i, (a, b)) gives tuples from predict, a call on arrays, model.output, a call
    # on symbolic inputs, and after from_config or save/load (pyggml gave lists)
    i = pg.Input((3,))
    x = L.Dense(5)(i)
    m = pg.Model(i, (L.Dense(4)(x), L.Dense(5)(x)))
    data = np.ones((2, 3), np.float32)
    assert type(m.output) is tuple and type(m.predict(data, verbose=0)) is tuple and type(m(data)) is tuple
    assert type(pg.Model.from_config(m.get_config())(data)) is tuple
    j = pg.Input((3,))
    outer = pg.Model(j, m(j))
    assert type(m(j)) is tuple and type(outer.predict(data, verbose=0)) is tuple
    a, b = outer.predict(data, verbose=0)
    np.testing.assert_allclose(a, m.predict(data, verbose=0)[0], rtol=1e-6)
    m.compile("sgd", ["mse", "mse"])
    m.fit(data, (np.ones((2, 4)), np.ones((2, 5))), verbose=0)
    assert type(pg.Model(i, [L.Dense(2)(x), L.Dense(2)(x)]).predict(data, verbose=0)) is list    # a list stays a list


def test_sequential_on_other_shapes_in_fit_evaluate_and_generators():
    # a per-step tagger: its outputs (and targets) follow the input's length; Keras trains and
    # evaluates on a new length at once, from arrays and from a generator whose batches change
    rng = np.random.default_rng(2)
    m = pg.Sequential([pg.Input((10, 1)), L.Conv1D(2, 3, padding="same"), L.Dense(3, activation="softmax")])
    m.compile("adam", "sparse_categorical_crossentropy")
    m.fit(rng.random((8, 10, 1), dtype=np.float32), rng.integers(0, 3, (8, 10)), verbose=0)
    x20, y20 = rng.random((8, 20, 1), dtype=np.float32), rng.integers(0, 3, (8, 20))
    assert np.isfinite(m.fit(x20, y20, verbose=0).history["loss"][0])
    assert np.isfinite(m.evaluate(x20, y20, verbose=0))

    def batches():
        for n in (10, 10, 30, 30):
            yield rng.random((4, n, 1), dtype=np.float32), rng.integers(0, 3, (4, n))
    assert np.isfinite(m.fit(batches(), epochs=1, verbose=0).history["loss"][0])
    # augmentation first (a host layer in training): fit on larger images too
    aug = pg.Sequential([pg.Input((8, 8, 1)), L.RandomFlip("horizontal"), L.Conv2D(2, 3),
                         L.GlobalAveragePooling2D(), L.Dense(1)])
    aug.compile("adam", "mse")
    assert np.isfinite(aug.fit(rng.random((4, 16, 16, 1), dtype=np.float32), np.ones((4, 1)),
                               verbose=0).history["loss"][0])


def test_a_refused_shape_leaves_the_layers_outputs_as_they_were():
    # the feature-extractor pattern after refused data: the layers' outputs are still the graph's
    m = pg.Sequential([pg.Input((4, 4, 1)), L.Conv2D(2, 3), L.Flatten(), L.Dense(1)])
    conv = m.layers[0]
    assert m.predict(np.ones((3, 4, 4, 1), np.float32), verbose=0).shape == (3, 1)
    before = (conv.output.shape, conv.input.shape, conv.output_shape)
    with pytest.raises(ValueError, match="must have shape"):
        m.predict(np.ones((3, 6, 6, 1), np.float32), verbose=0)
    assert (conv.output.shape, conv.input.shape, conv.output_shape) == before
    features = pg.Model(m.inputs, conv.output)
    assert features.predict(np.ones((3, 4, 4, 1), np.float32), verbose=0).shape == (3, 2, 2, 2)


def test_pickling_an_unbuilt_sequential_of_built_layers_keeps_their_weights_or_refuses():
    # a layer built (and set) on its own in a Sequential still waiting for data: its weights must
    # not be lost in the pickle; without an input shape the model cannot be saved, so it refuses
    d = L.Dense(2)
    d.build((None, 3))
    d.set_weights([np.full((3, 2), 7.0, np.float32), np.full((2,), 5.0, np.float32)])
    m = pg.Sequential([d])
    with pytest.raises(ValueError, match="input shape"):
        pickle.dumps(m)
    m.build((None, 3))
    r = pickle.loads(pickle.dumps(m))
    np.testing.assert_array_equal(r.predict(np.ones((1, 3), np.float32), verbose=0), [[26.0, 26.0]])


def test_copying_an_unbuilt_sequential_and_popping_every_layer():
    import copy
    # copy.deepcopy / copy.copy / clone() of a Sequential still waiting for data: an unbuilt
    # copy with a compile of its own (it raised for want of an input shape)
    m = pg.Sequential([L.Dense(2)])
    m.compile(pg.optimizers.Adam(0.01), "mse")
    for twin in (copy.deepcopy(m), copy.copy(m), m.clone()):
        assert not twin.built and len(twin.layers) == 1 and twin.layers[0] is not m.layers[0]
        twin.fit(np.ones((2, 3), np.float32), np.ones((2, 2), np.float32), verbose=0)
        assert twin.optimizer is not m.optimizer and twin.optimizer.learning_rate == pytest.approx(0.01)
    assert not m.built                                  # the original untouched
    # Keras: popping every layer leaves the model unbuilt
    s = pg.Sequential([pg.Input((3,)), L.Dense(2)])
    assert s.built
    s.pop()
    assert not s.built and s.layers == []
