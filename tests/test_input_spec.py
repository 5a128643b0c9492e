"""Keras's ``InputSpec``: a layer that sets ``self.input_spec`` has each call checked
against it (symbolic, on arrays, in a graph, on a tape), with Keras's messages."""

import numpy as np
import pytest

import pyggml as pg
from pyggml import layers


class _Scale(pg.Layer):
    """Multiplies by a weight per feature; its spec is set in build, as Keras's Dense does."""

    def build(self, input_shape):
        self.w = self.add_weight(shape=(input_shape[-1],), initializer="ones", name="w")
        self.input_spec = pg.InputSpec(min_ndim=2, axes={-1: input_shape[-1]})

    def call(self, x):
        return x * self.w


class _Flat(pg.Layer):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.input_spec = pg.InputSpec(ndim=2)

    def call(self, x):
        return x * 2.0


def test_the_names_are_keras_s():
    assert pg.InputSpec is layers.InputSpec
    s = pg.InputSpec(shape=(None, 3))
    assert s.ndim == 2 and s.shape == (None, 3)
    assert pg.InputSpec.from_config(s.get_config()).shape == (None, 3)
    assert "ndim=2" in repr(pg.InputSpec(ndim=2))


def test_ndim_is_checked_on_symbolic_inputs_and_arrays():
    with pytest.raises(ValueError, match=r"Input 0 of layer 'flat'.*expected ndim=2, found ndim=3"):
        _Flat(name="flat")(pg.Input(shape=(4, 5)))
    out = _Flat()(pg.Input(shape=(4,)))
    assert out.shape == (None, 4)
    np.testing.assert_array_equal(_Flat()(np.ones((2, 3))), np.full((2, 3), 2.0, np.float32))
    with pytest.raises(ValueError, match="expected ndim=2, found ndim=1"):
        _Flat()(np.ones(3))


def test_axes_set_in_build_check_later_calls_in_every_mode():
    layer = _Scale(name="scale")
    model = pg.Sequential([layer], input_shape=4)
    model.compile(loss="mse")
    np.testing.assert_allclose(model.predict(np.ones((2, 4)), verbose=0), np.ones((2, 4)))
    with pytest.raises(ValueError, match=r"layer 'scale'.*expected axis -1 of the input shape to have value 4"):
        layer(np.ones((2, 5)))
    with pytest.raises(ValueError, match="expected axis -1"):
        layer(pg.Input(shape=(6,)))
    with pytest.raises(ValueError, match="expected axis -1"):
        with pg.GradientTape():
            layer(np.ones((1, 7), np.float32))
    with pytest.raises(ValueError, match="expected min_ndim=2, found ndim=1"):
        layer(np.ones(4))


def test_shape_dtype_and_several_inputs():
    class Pair(pg.Layer):
        def __init__(self):
            super().__init__(name="pair")
            self.input_spec = [pg.InputSpec(shape=(None, 3)), pg.InputSpec(dtype="float32", ndim=2)]

        def call(self, inputs):
            a, b = inputs
            return a + b

    pair = Pair()
    got = pair([np.ones((2, 3)), np.ones((2, 3), np.float64)])       # float arrays compute as float32
    np.testing.assert_array_equal(got, np.full((2, 3), 2.0, np.float32))
    with pytest.raises(ValueError, match=r"expected shape=\(None, 3\), found shape=\(2, 4\)"):
        pair([np.ones((2, 4)), np.ones((2, 4))])
    with pytest.raises(ValueError, match="expected dtype=float32, found dtype=int32"):
        pair([np.ones((2, 3)), np.ones((2, 3), np.int64)])
    with pytest.raises(ValueError, match="Layer 'pair' expects 2 input"):
        pair(np.ones((2, 3)))


def test_a_spec_of_the_wrong_kind_or_with_bad_arguments_is_refused():
    for bad in (dict(ndim=-1), dict(ndim=2.0), dict(shape=(None, "a")), dict(shape=(2, 3), ndim=3),
                dict(ndim=2, axes={5: 3}), dict(axes={"x": 3})):
        with pytest.raises(ValueError):
            pg.InputSpec(**bad)

    class Wrong(pg.Layer):
        def call(self, x):
            return x

    w = Wrong()
    w.input_spec = "ndim=2"
    with pytest.raises(TypeError, match="input_spec must be an InputSpec"):
        w(np.ones((2, 2)))
