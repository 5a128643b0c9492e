"""Keras's mixed-precision names: a script that sets a mixed policy runs, computes in
float32 (said once, as a warning) and gives float32's numbers; other policies are refused."""

import warnings

import numpy as np
import pytest

import pyggml as pg
from pyggml import mixed_precision


@pytest.fixture(autouse=True)
def _restore_policy():
    yield
    mixed_precision.set_global_policy("float32")
    mixed_precision._STATE["warned"] = False


def _fit_predict(seed=0):
    rng = np.random.default_rng(0)
    x = rng.random((32, 4)).astype(np.float32)
    y = rng.random((32, 2)).astype(np.float32)
    pg.set_seed(seed)
    m = pg.Sequential([pg.Input(shape=(4,)), pg.layers.Dense(8, activation="relu"),
                       pg.layers.Dense(2, dtype="float32")])           # keras-io keeps the head float32
    m.compile(optimizer=pg.optimizers.SGD(0.05), loss="mse")
    m.fit(x, y, epochs=2, batch_size=8, verbose=0, shuffle=False)
    return m.predict(x, verbose=0)


def test_a_mixed_policy_runs_as_float32_and_says_so_once():
    plain = _fit_predict()
    with pytest.warns(UserWarning, match="computes in float32"):
        mixed_precision.set_global_policy("mixed_float16")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pg.config.set_dtype_policy("mixed_bfloat16")        # said once only
    policy = mixed_precision.global_policy()
    assert policy == "mixed_bfloat16" and policy.name == "mixed_bfloat16"
    assert (policy.compute_dtype, policy.variable_dtype) == ("float32", "float32")
    assert pg.config.dtype_policy() == policy
    np.testing.assert_array_equal(_fit_predict(), plain)
    mixed_precision.set_global_policy(mixed_precision.Policy("float32"))
    assert pg.config.dtype_policy() == "float32"


def test_policies_that_store_variables_in_other_types_are_refused():
    for name in ("float16", "bfloat16", "float64", "mixed_int8"):
        with pytest.raises(ValueError, match="float32"):
            mixed_precision.set_global_policy(name)
        with pytest.raises(ValueError):
            mixed_precision.Policy(name)
    with pytest.raises(TypeError):
        mixed_precision.set_global_policy(16)
    assert pg.layers.Dense(2, dtype="mixed_float16").units == 2      # a layer's mixed policy: float32 too
    with pytest.raises(ValueError, match="float32"):
        pg.layers.Dense(2, dtype="float16")
    assert mixed_precision.global_policy() == "float32"


def test_loss_scale_optimizer_is_the_optimizer_itself():
    opt = pg.optimizers.Adam(1e-3)
    assert mixed_precision.LossScaleOptimizer(opt) is opt
    assert opt.scale_loss(2.5) == 2.5
    with pytest.raises(TypeError, match="optimizer"):
        mixed_precision.LossScaleOptimizer("adam")
    assert repr(mixed_precision.DTypePolicy("mixed_float16")) == '<DTypePolicy "mixed_float16">'
