"""Gaps found by running Keras 3's own docstring examples (its ``>>>`` lines) against pyggml,
and by this round's keras-io ports; each test checks the behaviour against numpy (or a
formula) and Keras's documented value."""

import math

import numpy as np
import pytest

import pyggml as pg
from pyggml import layers, ops


# --- ops.rearrange (einops's patterns) -------------------------------------------------------
X6 = np.random.default_rng(0).random((4, 6, 8, 3)).astype(np.float32)
REARRANGE_CASES = [
    ("b h w c -> b c h w", {}, X6.transpose(0, 3, 1, 2)),
    ("b h w c -> (b h) w c", {}, X6.reshape(24, 8, 3)),
    ("b h w c -> h (b w) c", {}, X6.transpose(1, 0, 2, 3).reshape(6, 32, 3)),
    ("b h w c -> b (c h w)", {}, X6.transpose(0, 3, 1, 2).reshape(4, -1)),
    ("b (h1 h) (w1 w) c -> (b h1 w1) h w c", dict(h1=2, w1=2),
     X6.reshape(4, 2, 3, 2, 4, 3).transpose(0, 1, 3, 2, 4, 5).reshape(16, 3, 4, 3)),
    ("b (h h1) (w w1) c -> b h w (c h1 w1)", dict(h1=2, w1=2),
     X6.reshape(4, 3, 2, 4, 2, 3).transpose(0, 1, 3, 5, 2, 4).reshape(4, 3, 4, 12)),
    ("b ... c -> b c ...", {}, X6.transpose(0, 3, 1, 2)),
    ("b ... c -> b (...) c", {}, X6.reshape(4, 48, 3)),
    ("b h w c -> b h w c ()", {}, X6[..., None]),
]


@pytest.mark.parametrize("pattern,lengths,want", REARRANGE_CASES, ids=[c[0] for c in REARRANGE_CASES])
def test_rearrange_matches_numpys_reshape_and_transpose(pattern, lengths, want):
    got = np.asarray(ops.rearrange(X6, pattern, **lengths))
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("pattern,match", [
    ("b h w -> b h w", "3 axes, the input 4"),
    ("b h w c -> b h w", "one side only"),
    ("b h w c", "input axes -> output axes"),
    ("b (h w) w c -> b h w c", "more than once"),
    ("b (h1 h) w c -> b h w c h1", "are unknown"),
    ("b (h1 h) w c -> b h w c h1", "are unknown"),
])
def test_rearrange_refuses_bad_patterns_by_name(pattern, match):
    with pytest.raises(ValueError, match=match):
        ops.rearrange(X6, pattern)


def test_rearrange_in_a_model_trains_through_a_six_dimensional_step():
    pg.set_seed(1)
    inp = pg.Input((6, 8, 3))
    h = layers.Lambda(lambda t: ops.rearrange(t, "b (h1 h) (w1 w) c -> b h w (c h1 w1)", h1=2, w1=2))(inp)
    m = pg.Model(inp, layers.Dense(1)(layers.Flatten()(h)))
    m.compile("adam", "mse")
    # the model's input to Flatten is rearrange's output: the Dense sees numpy's layout
    want_h = X6.reshape(4, 2, 3, 2, 4, 3).transpose(0, 2, 4, 5, 1, 3).reshape(4, -1)
    w = m.layers[-1].get_weights()
    np.testing.assert_allclose(m.predict(X6, verbose=0), want_h @ w[0] + w[1], rtol=1e-5, atol=1e-5)
    y = want_h[:, :1] * 2.0
    first = m.evaluate(X6, y, verbose=0)
    m.fit(X6, y, epochs=30, batch_size=4, verbose=0)
    assert m.evaluate(X6, y, verbose=0) < 0.5 * first


# --- ops.fold -------------------------------------------------------------------------------
def _naive_fold(cols, out, k, d, p, s):
    n, ckk, _ = cols.shape
    (kh, kw), (dh, dw), (ph, pw), (sh, sw) = k, d, p, s
    c = ckk // (kh * kw)
    oh = (out[0] + 2 * ph - (kh - 1) * dh - 1) // sh + 1
    ow = (out[1] + 2 * pw - (kw - 1) * dw - 1) // sw + 1
    y = np.zeros((n, c, out[0] + 2 * ph, out[1] + 2 * pw))
    blocks = cols.reshape(n, c, kh, kw, oh, ow)
    for i in range(kh):
        for j in range(kw):
            for a in range(oh):
                for b in range(ow):
                    y[:, :, a * sh + i * dh, b * sw + j * dw] += blocks[:, :, i, j, a, b]
    return y[:, :, ph:ph + out[0], pw:pw + out[1]]


FOLD_CASES = [((2, 6, 7), (2, 3), (1, 1), (0, 0), (1, 1)), ((3, 9, 8), (3, 3), (2, 2), (1, 1), (2, 2)),
              ((1, 5, 5), (2, 2), (1, 2), (1, 0), (2, 1))]


@pytest.mark.parametrize("chw,k,d,p,s", FOLD_CASES)
def test_fold_sums_the_blocks_back_as_a_loop_does(chw, k, d, p, s):
    c, h, w = chw
    oh = (h + 2 * p[0] - (k[0] - 1) * d[0] - 1) // s[0] + 1
    ow = (w + 2 * p[1] - (k[1] - 1) * d[1] - 1) // s[1] + 1
    cols = np.random.default_rng(2).random((2, c * k[0] * k[1], oh * ow)).astype(np.float32)
    got = np.asarray(ops.fold(cols, (h, w), k, dilation=d, padding=p, stride=s))
    np.testing.assert_allclose(got, _naive_fold(cols, (h, w), k, d, p, s), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.asarray(ops.fold(cols[0], (h, w), k, dilation=d, padding=p, stride=s)),
                               got[0], rtol=1e-6, atol=1e-6)


def test_fold_undoes_unfold_of_non_overlapping_blocks_and_its_gradient_is_unfold():
    x = np.random.default_rng(3).random((1, 2, 4, 4)).astype(np.float32)
    cols = np.asarray(ops.unfold(x, 2, stride=2))
    np.testing.assert_array_equal(np.asarray(ops.fold(cols, (4, 4), 2, stride=2)), x)
    # fold is linear: the gradient of sum(fold(v) * g) is unfold(g)
    g = np.random.default_rng(4).random((1, 2, 5, 5)).astype(np.float32)
    v = pg.Variable(np.zeros((1, 2 * 9, 9), np.float32))
    with pg.GradientTape() as tape:
        loss = ops.sum(ops.fold(v, (5, 5), 3, padding=1, stride=2) * g)
    np.testing.assert_allclose(np.asarray(tape.gradient(loss, v)),
                               np.asarray(ops.unfold(g, 3, padding=1, stride=2)), rtol=1e-6, atol=1e-6)


def test_fold_refuses_a_block_count_that_does_not_fit():
    with pytest.raises(ValueError, match="blocks given"):
        ops.fold(np.zeros((1, 4, 5), np.float32), (4, 4), 2, stride=2)


# --- ops.i0 ---------------------------------------------------------------------------------
I0_X = np.array([-10, -4, -3.75, -1, 0, 0.5, 2, 3.7, 3.8, 6, 20, 80], np.float32)


def test_i0_on_arrays_is_numpys_and_in_a_graph_within_float32():
    np.testing.assert_allclose(np.asarray(ops.i0(I0_X)), np.i0(I0_X.astype(np.float64)), rtol=2e-7)
    assert ops.i0(np.array([1, 2])).dtype == np.float32
    inp = pg.Input((len(I0_X),))
    m = pg.Model(inp, layers.Lambda(ops.i0)(inp))
    np.testing.assert_allclose(m.predict(I0_X[None], verbose=0)[0], np.i0(I0_X.astype(np.float64)), rtol=1e-6)


def test_i0_gradient_is_i1():
    v = pg.Variable(I0_X)
    with pg.GradientTape() as tape:
        loss = ops.sum(ops.i0(v))
    x = I0_X.astype(np.float64)
    h = 1e-6 * np.maximum(1.0, np.abs(x))
    want = (np.i0(x + h) - np.i0(x - h)) / (2 * h)            # i1(x)
    np.testing.assert_allclose(np.asarray(tape.gradient(loss, v)), want, rtol=2e-6, atol=1e-7)


# --- CategoricalGeneralizedCrossEntropy ------------------------------------------------------
def test_generalized_cross_entropy_is_one_minus_p_to_the_q_over_q():
    y_true = np.array([0, 1, 0, 1])
    y_pred = np.array([[0.7, 0.3], [0.2, 0.8], [0.6, 0.4], [0.4, 0.6]], np.float32)
    p = y_pred[np.arange(4), y_true].astype(np.float64)
    loss = pg.losses.CategoricalGeneralizedCrossEntropy()
    assert float(loss(y_true, y_pred)) == pytest.approx(np.mean((1 - p ** 0.5) / 0.5), rel=1e-6)
    np.testing.assert_allclose(np.asarray(pg.losses.categorical_generalized_cross_entropy(y_true, y_pred, q=0.3)),
                               (1 - p ** 0.3) / 0.3, rtol=1e-6)
    with pytest.raises(ValueError, match="q must be in"):
        pg.losses.CategoricalGeneralizedCrossEntropy(q=1.0)


def test_generalized_cross_entropy_trains_evaluates_and_saves(tmp_path):
    pg.set_seed(0)
    m = pg.Sequential([pg.Input((4,)), layers.Dense(3, activation="softmax")])
    m.compile("adam", pg.losses.CategoricalGeneralizedCrossEntropy(q=0.7))
    rng = np.random.default_rng(5)
    x = rng.random((64, 4)).astype(np.float32)
    y = rng.integers(0, 3, 64)
    first = m.evaluate(x, y, verbose=0)
    m.fit(x, y, epochs=20, verbose=0)
    pr = m.predict(x, verbose=0)
    p = pr[np.arange(64), y].astype(np.float64)
    assert m.evaluate(x, y, verbose=0) == pytest.approx(np.mean((1 - p ** 0.7) / 0.7), rel=1e-5)
    assert m.evaluate(x, y, verbose=0) < first
    m.save(tmp_path / "g.gguf")
    assert pg.load_model(tmp_path / "g.gguf").loss.get_config()["q"] == 0.7


# --- eager results: Keras's 0-d tensors and 32-bit dtypes ----------------------------------------
def test_full_reductions_give_zero_d_arrays_answering_numpy():
    a = ops.reshape(ops.arange(25), (5, 5))
    for r, want in [(ops.all(ops.convert_to_tensor([True, False])), False), (ops.amax(ops.convert_to_tensor([1, 6])), 6),
                    (ops.trace(a), 60), (ops.einsum("ii", a), 60), (ops.average(ops.arange(1, 5)), 2.5)]:
        assert r.shape == () and r.numpy() == want
    assert ops.trace(a).dtype == np.int32 and ops.average(ops.arange(1, 5)).dtype == np.float32


def test_keras_default_dtypes_on_python_values_and_integer_reductions():
    assert ops.array([1, 2, 3]).dtype == np.int32 and ops.array([1.0, 2.0]).dtype == np.float32
    assert ops.arccos(ops.convert_to_tensor([1, -1])).dtype == np.float32
    assert (ops.array([1, 2, 2, 3], dtype="uint8") / 2).dtype == np.float32
    np.testing.assert_array_equal(ops.arange(3.0), np.array([0.0, 1.0, 2.0], np.float32))
    assert ops.arange(0.5, 2.0).dtype == np.float32 and ops.arange(3).dtype == np.int32
    a = np.arange(25, dtype=np.int32).reshape(5, 5)
    assert ops.sum(a, axis=1).dtype == np.int32 and int(ops.sum(a)) == 300
    assert ops.einsum("ij,j", a, np.arange(5, dtype=np.int32)).dtype == np.int32
    assert ops.max(np.array([1, 3, 2], np.uint8)).dtype == np.uint8
    # a float64 array given keeps float64 (Keras keeps a numpy array's dtype)
    assert ops.sqrt(np.array([4.0])).dtype in (np.float32, np.float64)
    assert ops.cast(np.array([1, 2]), "int32").dtype == np.int32


def test_bincount_takes_minlength_from_an_integer_max():
    x = ops.array([1, 2, 2, 3], dtype="uint8")
    np.testing.assert_array_equal(ops.bincount(x, minlength=ops.max(x).numpy() + 3), [0, 1, 2, 1, 0, 0])


def test_einsum_sublist_form_is_numpys():
    a = np.arange(25, dtype=np.int32).reshape(5, 5)
    b = np.arange(5, dtype=np.int32)
    assert int(ops.einsum(a, [0, 0])) == 60
    np.testing.assert_array_equal(ops.einsum(a, [0, 0], [0]), np.einsum(a, [0, 0], [0]))
    np.testing.assert_array_equal(ops.einsum(a, [0, 1], b, [1]), np.einsum(a, [0, 1], b, [1]))


def test_view_with_a_dtype_reads_the_bytes_and_the_ggml_form_still_views():
    np.testing.assert_array_equal(ops.view(np.array([1, 2, 3], np.int32), "float32"),
                                  np.array([1, 2, 3], np.int32).view(np.float32))
    assert ops.view(np.zeros(4, np.int32), dtype="int8").shape == (16,)
    ctx = pg.core.Context(1 << 20)
    t = ctx.new_tensor((4, 6))
    assert tuple(ops.view(t, (2, 6)).shape) == (2, 6)
    ctx.free()


def test_psnr_is_a_scalar():
    r = ops.psnr(np.zeros((2, 4, 4, 1), np.float32), np.full((2, 4, 4, 1), 0.1, np.float32), 1.0)
    assert r.shape == () and float(r) == pytest.approx(20.0, rel=1e-5)


def test_string_arrays_print_as_numpys():
    r = layers.StringLookup(vocabulary=["a", "b", "c", "d"], invert=True)(np.array([[1, 3, 4], [4, 0, 2]]))
    assert "OpsArray('" not in repr(r) and str(r) == str(np.array([["a", "c", "d"], ["d", "[UNK]", "b"]]))


# --- metrics ----------------------------------------------------------------------------------
def _precision(**kw):
    return pg.metrics.Precision(**kw)


@pytest.mark.parametrize("kw,y_true,y_pred,want", [
    # Keras's docstring values; top_k's ties go to the first (TensorFlow's and JAX's top_k)
    (dict(top_k=2), [0, 0, 1, 1], [1, 1, 1, 1], 0.0),
    (dict(top_k=4), [0, 0, 1, 1], [1, 1, 1, 1], 0.5),
    (dict(class_id=1), [[0, 1], [0, 1], [1, 0]], [[0.2, 0.8], [0.6, 0.4], [0.1, 0.9]], 0.5),
])
def test_precision_top_k_and_class_id(kw, y_true, y_pred, want):
    m = _precision(**kw)
    m.update_state(y_true, y_pred)
    assert float(m.result()) == pytest.approx(want)


def test_precision_and_recall_at_several_thresholds():
    y_true, y_pred = [0, 1, 1, 1], [0.2, 0.4, 0.8, 0.9]
    m = pg.metrics.Precision(thresholds=[0.3, 0.7])
    m.update_state([0, 1, 0, 1], [0.4, 0.5, 0.9, 0.8])
    np.testing.assert_allclose(m.result(), [2 / 4, 1 / 2])
    r = pg.metrics.Recall(thresholds=[0.3, 0.5, 0.85])
    r.update_state(y_true, y_pred)
    np.testing.assert_allclose(r.result(), [1.0, 2 / 3, 1 / 3], rtol=1e-6)
    tp = pg.metrics.TruePositives(thresholds=[0.3, 0.85])
    tp.update_state(y_true, y_pred)
    np.testing.assert_array_equal(tp.result(), [3, 1])


def test_recall_top_k_counts_each_rows_k_largest():
    r = pg.metrics.Recall(top_k=1)
    r.update_state([[0, 1, 1], [1, 0, 0]], [[0.1, 0.7, 0.2], [0.3, 0.5, 0.2]])
    assert float(r.result()) == pytest.approx(1 / 3)       # only row 0's class 1 is a top-1 hit


def test_precision_with_several_thresholds_in_fit_logs_and_saved_config(tmp_path):
    m = pg.Sequential([pg.Input((4,)), layers.Dense(3, activation="softmax")])
    m.compile("adam", "categorical_crossentropy",
              metrics=[pg.metrics.Precision(top_k=1, name="p1"), pg.metrics.Recall(class_id=2, name="r2"),
                       pg.metrics.Precision(thresholds=[0.2, 0.5], name="pl")])
    rng = np.random.default_rng(6)
    x = rng.random((32, 4)).astype(np.float32)
    y = np.eye(3, dtype=np.float32)[rng.integers(0, 3, 32)]
    h = m.fit(x, y, epochs=1, verbose=0)
    assert np.shape(h.history["pl"][0]) == (2,) and isinstance(h.history["p1"][0], float)
    m.save(tmp_path / "p.gguf")
    cfg = pg.load_model(tmp_path / "p.gguf").get_compile_config()
    assert "p1" in str(cfg) and "top_k" in str(cfg)


def test_cosine_similarity_metric_over_axis_one():
    m = pg.metrics.CosineSimilarity(axis=1)
    m.update_state([[0.0, 1.0], [1.0, 1.0]], [[1.0, 0.0], [1.0, 1.0]])
    assert float(m.result()) == pytest.approx(0.5, abs=1e-6)
    m.reset_state()
    m.update_state([[0.0, 1.0], [1.0, 1.0]], [[1.0, 0.0], [1.0, 1.0]], sample_weight=[0.3, 0.7])
    assert float(m.result()) == pytest.approx(0.7, abs=1e-6)
    c = pg.metrics.CosineSimilarity(axis=0)
    c.update_state([[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [1.0, 0.0]])
    assert float(c.result()) == pytest.approx((1 / math.sqrt(2) + 0.0) / 2, abs=1e-6)


def test_metric_result_is_a_float32_scalar():
    m = pg.metrics.Precision()
    m.update_state([0, 1, 1, 1], [1, 0, 1, 1])
    r = m.result()
    assert r.dtype == np.float32 and r.shape == () and r.numpy() == np.float32(2 / 3)


# --- layers, models ----------------------------------------------------------------------------
def test_an_inputs_fixed_batch_size_shows_in_symbolic_shapes():
    inputs = layers.Input(shape=(10, 16, 16, 3), batch_size=32)
    assert inputs.shape == (32, 10, 16, 16, 3)
    assert layers.TimeDistributed(layers.Conv2D(4, 3))(inputs).shape == (32, 10, 14, 14, 4)
    assert layers.Dense(3)(pg.Input(batch_shape=(32, 10, 4))).shape == (32, 10, 3)
    assert pg.Input((4,)).shape == (None, 4)


@pytest.mark.parametrize("make", [layers.RMSNormalization, layers.UnitNormalization, layers.Masking,
                                  lambda: layers.GroupNormalization(groups=2),
                                  lambda: layers.EinsumDense("abcd,de->abce", output_shape=(20, 30, 4))])
def test_build_takes_a_shape_given_as_a_list(make):
    layer = make()
    layer.build([5, 20, 30, 10])
    assert layer.built
    out = layer(np.ones((5, 20, 30, 10), np.float32))
    assert out.shape[:3] == (5, 20, 30)


def test_models_not_given_a_name_are_numbered_and_named_again_inside_a_model():
    pg.backend.clear_session()
    a = pg.Sequential([pg.Input((4,)), layers.Dense(3)])
    b = pg.Sequential([pg.Input((3,)), layers.Dense(2)])
    assert (a.name, b.name) == ("sequential", "sequential_1")
    inp = pg.Input((4,))
    outer = pg.Model(inp, b(a(inp)))
    # within a model, its models are numbered in order, so weight names do not depend on the process
    assert list(outer.get_weights()) == ["sequential.dense.weight", "sequential.dense.bias",
                                         "sequential_1.dense.weight", "sequential_1.dense.bias"]
    assert pg.Sequential(name="mine").name == "mine"


def test_sequential_with_unknown_spatial_sizes_loads_back(tmp_path):
    m = pg.Sequential([layers.InputLayer((None, None, 4)), layers.Conv2D(2, 3, padding="same")])
    x = np.random.default_rng(7).random((1, 6, 6, 4)).astype(np.float32)
    m.save(tmp_path / "s.keras")
    r = pg.load_model(tmp_path / "s.keras")
    assert r.input_shape == (None, None, None, 4)
    np.testing.assert_array_equal(r.predict(x, verbose=0), m.predict(x, verbose=0))
    assert r.predict(np.ones((2, 9, 7, 4), np.float32), verbose=0).shape == (2, 9, 7, 2)


def test_arrays_missing_a_unit_axis_are_expanded_inside_a_tape():
    a, b = layers.Input((1,)), layers.Input((1,))
    m = pg.Model([a, b], layers.Dense(1)(layers.Concatenate()([a, b])))
    x = [np.arange(5, dtype=np.float32), np.ones(5, np.float32)]
    with pg.GradientTape() as tape:
        y = m(x)
        loss = ops.mean(y)
    grads = tape.gradient(loss, m.trainable_variables)
    assert tuple(y.shape) == (5, 1)
    np.testing.assert_allclose(np.asarray(y), m.predict(x, verbose=0), rtol=1e-6)
    assert all(g is not None for g in grads)


def test_initializer_given_as_an_array():
    a = np.arange(12, dtype=np.float32).reshape(4, 3)
    init = pg.initializers.get(ops.ones((2, 3)))
    np.testing.assert_array_equal(init((2, 3)), np.ones((2, 3)))
    d = layers.Dense(3, kernel_initializer=a)
    pg.Sequential([pg.Input((4,)), d]).compile("adam", "mse")
    np.testing.assert_array_equal(d.get_weights()[0], a)
    with pytest.raises(ValueError, match=r"shape \(4, 3\) cannot make a weight of shape \(5, 3\)"):
        m = pg.Sequential([pg.Input((5,)), layers.Dense(3, kernel_initializer=a)])
        m.compile("adam", "mse")


def test_category_encoding_count_weights():
    layer = layers.CategoryEncoding(num_tokens=4, output_mode="count")
    w = np.array([[0.1, 0.2], [0.1, 0.1], [0.2, 0.3], [0.4, 0.2]], np.float32)
    got = np.asarray(layer([[0, 1], [0, 0], [1, 2], [3, 1]], count_weights=w))
    np.testing.assert_allclose(got, [[0.1, 0.2, 0, 0], [0.2, 0, 0, 0], [0, 0.2, 0.3, 0], [0, 0.2, 0, 0.4]], rtol=1e-6)
    with pytest.raises(ValueError, match="output_mode='count'"):
        layers.CategoryEncoding(num_tokens=4, output_mode="multi_hot")([[0, 1]], count_weights=[[1.0, 1.0]])


def test_integer_lookup_oov_methods():
    vocab, oov = [10, 20, 30], np.array([100, 300, 700, 1100, 1700, 2000])
    floor = layers.IntegerLookup(vocabulary=vocab, num_oov_indices=4, oov_method="floormod")
    farm = layers.IntegerLookup(vocabulary=vocab, num_oov_indices=4, oov_method="farmhash")
    np.testing.assert_array_equal(floor(oov), [0, 0, 0, 0, 0, 0])
    np.testing.assert_array_equal(farm(oov), [3, 3, 2, 2, 0, 1])         # Keras's docstring (TensorFlow's hash)
    np.testing.assert_array_equal(farm(np.array([20])), [5])
    salted = layers.IntegerLookup(vocabulary=vocab, num_oov_indices=4, oov_method="farmhash", salt=7)
    assert salted.get_config()["salt"] == [7, 7] and set(np.asarray(salted(oov)).tolist()) <= {0, 1, 2, 3}
    with pytest.raises(ValueError, match="salt is only used"):
        layers.IntegerLookup(vocabulary=vocab, salt=7)


def test_one_target_for_several_outputs_feeds_the_first_outputs_metrics():
    class M(pg.Model):
        def __init__(self):
            inp = layers.Input((4,))
            super().__init__(inputs=inp, outputs=[layers.Dense(1, activation="sigmoid")(inp),
                                                  layers.Dense(1, activation="sigmoid")(inp)])
            self.bce = pg.losses.BinaryCrossentropy()

        def compute_loss(self, x, y_true, y_pred, sample_weight=None, training=False):
            return sum(self.bce(y_true, p) for p in y_pred)

    m = M()
    m.compile(optimizer="adam", metrics=[pg.metrics.MeanAbsoluteError(name="mae") for _ in m.outputs])
    x = np.random.default_rng(8).random((16, 4)).astype(np.float32)
    y = (x[:, :1] > 0.5).astype(np.float32)
    h = m.fit(x, y, epochs=1, verbose=0)
    assert sorted(k for k in h.history if "mae" in k) == ["dense_mae"]
    assert h.history["dense_mae"][0] == pytest.approx(np.abs(m.predict(x, verbose=0)[0] - y).mean(), rel=0.05)


def test_a_list_of_metrics_one_per_output_pairs_them_as_keras_3():
    inp = layers.Input((4,))
    m = pg.Model(inp, [layers.Dense(1, name="a")(inp), layers.Dense(1, name="b")(inp)])
    m.compile("adam", ["mse", "mse"], metrics=["mae", "mse"])
    x = np.random.default_rng(9).random((16, 4)).astype(np.float32)
    y = np.random.default_rng(10).random((16, 1)).astype(np.float32)
    h = m.fit(x, [y, y], epochs=1, verbose=0)
    assert {"a_mae", "b_mse"} <= set(h.history) and not {"a_mse", "b_mae"} & set(h.history)


def test_gelu_tanh_form_is_float32_exact():
    x = np.linspace(-6, 6, 2001).astype(np.float32)
    xd = x.astype(np.float64)
    tanh_form = 0.5 * xd * (1 + np.tanh(math.sqrt(2 / math.pi) * (xd + 0.044715 * xd ** 3)))
    got = np.asarray(ops.gelu(x, approximate=True))
    # ggml's float16 table was off by up to 1.9e-3; float32 arithmetic is within a few ulps
    np.testing.assert_allclose(got, tanh_form, rtol=1e-6, atol=1e-6)
    inp = pg.Input((len(x),))
    m = pg.Model(inp, layers.Activation(lambda t: pg.activations.gelu(t, approximate=True))(inp))
    np.testing.assert_allclose(m.predict(x[None], verbose=0)[0], tanh_form, rtol=1e-6, atol=1e-6)


# --- ops.image: extract_patches_3d, sobel_edges, ssim, scale_and_translate -------------------------
IMG = np.random.default_rng(11).random((2, 9, 7, 3)).astype(np.float32)


def _graph(fn, x):
    inp = pg.Input(x.shape[1:])
    return pg.Model(inp, layers.Lambda(fn)(inp)).predict(x, verbose=0)


def test_sobel_edges_are_zero_padded_sobel_correlations():
    from scipy import ndimage
    ky = np.array([[-1, -2, -1], [0, 0, 0], [1, 2, 1]], np.float64)
    want = np.stack([np.stack([np.stack([ndimage.correlate(IMG[b, :, :, c].astype(np.float64), k, mode="constant")
                                         for c in range(3)], -1) for b in range(2)]) for k in (ky, ky.T)], -1)
    np.testing.assert_allclose(np.asarray(ops.image.sobel_edges(IMG)), want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(_graph(ops.image.sobel_edges, IMG), want, rtol=1e-5, atol=1e-5)
    cf = np.asarray(ops.image.sobel_edges(IMG.transpose(0, 3, 1, 2), data_format="channels_first"))
    np.testing.assert_allclose(cf, want.transpose(0, 3, 1, 2, 4), rtol=1e-6, atol=1e-6)


def _ssim_loop(a, b, size, sigma, max_val, k1=0.01, k2=0.03):
    x = np.arange(size) - (size - 1) / 2
    g = np.exp(-x ** 2 / (2 * sigma ** 2))
    w = np.outer(g, g) / g.sum() ** 2
    h, wd = a.shape[:2]
    vals = []
    for c in range(a.shape[2]):
        for i in range(h - size + 1):
            for j in range(wd - size + 1):
                pa, pb = a[i:i + size, j:j + size, c], b[i:i + size, j:j + size, c]
                m1, m2 = (w * pa).sum(), (w * pb).sum()
                v1, v2, cv = (w * pa * pa).sum() - m1 ** 2, (w * pb * pb).sum() - m2 ** 2, (w * pa * pb).sum() - m1 * m2
                c1, c2 = (k1 * max_val) ** 2, (k2 * max_val) ** 2
                vals.append((2 * m1 * m2 + c1) * (2 * cv + c2) / ((m1 ** 2 + m2 ** 2 + c1) * (v1 + v2 + c2)))
    return np.mean(np.reshape(vals, (a.shape[2], -1)).mean(axis=1))


def test_ssim_against_a_loop_in_a_graph_and_its_gradient():
    other = IMG[::-1] * 0.7 + 0.1
    want = [_ssim_loop(IMG[i].astype(np.float64), other[i].astype(np.float64), 5, 1.5, 1.0) for i in range(2)]
    np.testing.assert_allclose(np.asarray(ops.image.ssim(IMG, other, filter_size=5)), want, rtol=1e-5)
    assert float(ops.image.ssim(IMG[0], IMG[0], filter_size=5)) == pytest.approx(1.0, abs=1e-6)
    assert ops.image.ssim(IMG[0], other[0], filter_size=5).shape == ()
    np.testing.assert_allclose(_graph(lambda t: ops.image.ssim(t, t * 0.5, filter_size=5), IMG),
                               ops.image.ssim(IMG, IMG * 0.5, filter_size=5), rtol=1e-5)
    v = pg.Variable(IMG)
    with pg.GradientTape() as tape:
        loss = ops.sum(ops.image.ssim(v, other, filter_size=3))
    g = np.asarray(tape.gradient(loss, v))
    i, eps = (0, 4, 3, 1), 1e-3
    hi, lo = IMG.copy(), IMG.copy()
    hi[i] += eps
    lo[i] -= eps
    fd = (np.sum(ops.image.ssim(hi, other, filter_size=3)) - np.sum(ops.image.ssim(lo, other, filter_size=3))) / (2 * eps)
    assert g[i] == pytest.approx(fd, rel=1e-2, abs=1e-4)
    with pytest.raises(ValueError, match="odd int"):
        ops.image.ssim(IMG, IMG, filter_size=4)


def test_scale_and_translate_upsampling_is_a_half_pixel_resize_and_keras_docstrings_grid():
    up = np.asarray(ops.image.scale_and_translate(IMG, (2, 18, 14, 3), [2.0, 2.0], [0.0, 0.0], (1, 2), "linear"))
    np.testing.assert_allclose(up, np.asarray(ops.image.resize(IMG, (18, 14), "bilinear")), rtol=1e-5, atol=1e-6)
    grid = np.arange(9, dtype=np.float32).reshape(3, 3)
    scale = np.array([2.0, 2.0], np.float32)                          # Keras's docstring example
    got = np.asarray(ops.image.scale_and_translate(grid, (5, 5), scale, -(scale / 2.0 - 0.5), (0, 1), "linear"))
    np.testing.assert_allclose(got[0], [0.0, 0.5, 1.0, 1.5, 2.0], atol=1e-6)
    np.testing.assert_allclose(got[:, 0], [0.0, 1.5, 3.0, 4.5, 6.0], atol=1e-6)
    for method in ("cubic", "lanczos3"):
        fn = lambda t, m=method: ops.image.scale_and_translate(t, (2, 4, 12, 3), [0.5, 1.7], [0.3, -1.2], (1, 2), m)
        np.testing.assert_allclose(_graph(fn, IMG), np.asarray(fn(IMG)), rtol=1e-5, atol=1e-6)


def _patches_3d_loop(v, size, strides):
    n, d, h, w, c = v.shape
    out = []
    for z in range(0, d - size[0] + 1, strides[0]):
        for y in range(0, h - size[1] + 1, strides[1]):
            for x in range(0, w - size[2] + 1, strides[2]):
                out.append(v[:, z:z + size[0], y:y + size[1], x:x + size[2], :].reshape(n, -1))
    od = (d - size[0]) // strides[0] + 1
    oh = (h - size[1]) // strides[1] + 1
    return np.stack(out, 1).reshape(n, od, oh, -1, np.prod(size) * c)


def test_extract_patches_3d_gathers_each_windows_voxels():
    vol = np.random.default_rng(12).random((2, 5, 6, 7, 2)).astype(np.float32)
    want = _patches_3d_loop(vol, (2, 3, 2), (1, 2, 3))
    np.testing.assert_array_equal(np.asarray(ops.image.extract_patches_3d(vol, (2, 3, 2), strides=(1, 2, 3))), want)
    np.testing.assert_array_equal(np.asarray(ops.image.extract_patches(vol, (2, 3, 2), strides=(1, 2, 3))), want)
    np.testing.assert_array_equal(_graph(lambda t: ops.image.extract_patches_3d(t, (2, 3, 2), strides=(1, 2, 3)), vol),
                                  want)
    same = np.asarray(ops.image.extract_patches_3d(vol, 3, strides=1, padding="same"))
    assert same.shape == (2, 5, 6, 7, 54)
    np.testing.assert_array_equal(same[:, 1:-1, 1:-1, 1:-1], _patches_3d_loop(vol, (3, 3, 3), (1, 1, 1)))


# --- initializers.STFT, ScheduleFreeAdamW, MultiOptimizer ------------------------------------------
@pytest.mark.parametrize("side", ["real", "imag"])
@pytest.mark.parametrize("window,scaling,periodic", [("hann", "density", False), ("hamming", "spectrum", True),
                                                     (None, None, False), ("blackman", "density", True)])
def test_stft_initializer_is_the_windowed_fourier_kernel(side, window, scaling, periodic):
    scipy_signal = pytest.importorskip("scipy.signal")
    t, bins = 16, 9
    n = 2 * (bins - 1)
    phase = -2 * np.pi * np.arange(t)[:, None] * np.arange(bins)[None, :] / n
    want = np.cos(phase) if side == "real" else np.sin(phase)
    if window is not None:
        w = scipy_signal.get_window(window, t, fftbins=periodic)
        s = np.sqrt((w * w).sum()) if scaling == "density" else np.abs(w).sum() if scaling == "spectrum" else 1.0
        want = want * w[:, None] / s
    got = np.asarray(pg.initializers.STFTInitializer(side, window, scaling, periodic)(shape=(t, 1, bins)))
    np.testing.assert_allclose(got[:, 0, :], want, rtol=1e-5, atol=1e-6)
    assert pg.initializers.get("stft").get_config()["side"] == "real"


def _sf_reference(x, y, w, b, steps, lr, b1=0.9, b2=0.999, eps=1e-8, warm=0, wd=None):
    ys, zs, vs = [w.copy(), b.copy()], [w.copy(), b.copy()], [np.zeros_like(w), np.zeros_like(b)]
    for t in range(1, steps + 1):
        d = 2 * (x @ ys[0] + ys[1] - y) / len(x)
        grads = [x.T @ d, d.sum(0)]
        rate = lr * (min(t / warm, 1.0) if warm else 1.0)
        for i, g in enumerate(grads):
            y_ = ys[i] - (ys[i] * wd * rate if wd else 0.0)
            vs[i] = b2 * vs[i] + (1 - b2) * g ** 2
            z = zs[i] - rate * g / (np.sqrt(vs[i] / (1 - b2 ** t)) + eps)
            avg = (1 - 1 / t) * (y_ - (1 - b1) * zs[i]) / b1 + z / t
            ys[i], zs[i] = (1 - b1) * z + b1 * avg, z
    return ys


@pytest.mark.parametrize("kw", [{}, {"learning_rate": 0.05, "warmup_steps": 3}, {"learning_rate": 0.05, "weight_decay": 0.1}])
def test_schedule_free_adamw_follows_kerass_update(kw, tmp_path):
    rng = np.random.default_rng(13)
    x, y = rng.random((16, 3)).astype(np.float32), rng.random((16, 1)).astype(np.float32)
    m = pg.Sequential([pg.Input((3,)), layers.Dense(1)])
    m.compile(pg.optimizers.ScheduleFreeAdamW(**kw), "mse")
    w0, b0 = (np.asarray(a, np.float64) for a in m.layers[0].get_weights())
    m.fit(x, y, epochs=6, batch_size=16, shuffle=False, verbose=0)
    want = _sf_reference(x.astype(np.float64), y.astype(np.float64), w0, b0, 6, kw.get("learning_rate", 0.0025),
                         warm=kw.get("warmup_steps", 0), wd=kw.get("weight_decay"))
    for got, ref in zip(m.layers[0].get_weights(), want):
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)
    m.save(tmp_path / "sf.gguf")
    r = pg.load_model(tmp_path / "sf.gguf")
    for mm in (m, r):
        mm.fit(x, y, epochs=2, batch_size=8, shuffle=False, verbose=0)
    for a, b in zip(m.get_weights().values(), r.get_weights().values()):
        np.testing.assert_array_equal(a, b)                 # its slots (z included) saved and resumed


def _two_part_model():
    pg.set_seed(1)
    inp = pg.Input((3,))
    h = layers.Dense(4, activation="relu", name="encoder_dense")(inp)
    return pg.Model(inp, layers.Dense(1, name="head")(h))


def test_multi_optimizer_steps_each_weight_with_its_own_optimizer(tmp_path):
    rng = np.random.default_rng(14)
    x, y = rng.random((32, 3)).astype(np.float32), rng.random((32, 1)).astype(np.float32)
    m = _two_part_model()
    omap = pg.optimizers.OptimizerMap(pg.optimizers.SGD(0.1), {"encoder_dense/.*": pg.optimizers.Adam(0.01)})
    m.compile(pg.optimizers.MultiOptimizer(omap), "mse")
    w = {k: v.astype(np.float64) for k, v in m.get_weights().items()}
    m.fit(x, y, epochs=3, batch_size=32, shuffle=False, verbose=0)
    w1, b1, w2, b2 = w["encoder_dense.weight"], w["encoder_dense.bias"], w["head.weight"], w["head.bias"]
    mom, vel = [0.0, 0.0], [0.0, 0.0]
    xd, yd = x.astype(np.float64), y.astype(np.float64)
    for t in range(1, 4):                              # Adam on the encoder, SGD on the head (PyTorch layout)
        h = xd @ w1.T + b1
        a = np.maximum(h, 0)
        d = 2 * (a @ w2.T + b2 - yd) / len(xd)
        dh = (d @ w2) * (h > 0)
        gw2, gb2, gw1, gb1 = d.T @ a, d.sum(0), dh.T @ xd, dh.sum(0)
        w2, b2 = w2 - 0.1 * gw2, b2 - 0.1 * gb2
        new = []
        for i, (p, g) in enumerate(((w1, gw1), (b1, gb1))):
            mom[i] = 0.9 * mom[i] + 0.1 * g
            vel[i] = 0.999 * vel[i] + 0.001 * g * g
            new.append(p - 0.01 * (mom[i] / (1 - 0.9 ** t)) / (np.sqrt(vel[i] / (1 - 0.999 ** t)) + 1e-8))
        w1, b1 = new
    got = m.get_weights()
    for k, ref in (("encoder_dense.weight", w1), ("encoder_dense.bias", b1), ("head.weight", w2), ("head.bias", b2)):
        np.testing.assert_allclose(got[k], ref, rtol=1e-5, atol=1e-6)
    assert [int(o.iterations) for o in m.optimizer.optimizers] == [3, 3]
    m.save(tmp_path / "mo.gguf")
    r = pg.load_model(tmp_path / "mo.gguf")
    assert [type(o).__name__ for o in r.optimizer.optimizers] == ["Adam", "SGD"]
    for mm in (m, r):
        mm.fit(x, y, epochs=1, batch_size=32, shuffle=False, verbose=0)
    for a, b in zip(m.get_weights().values(), r.get_weights().values()):
        np.testing.assert_array_equal(a, b)


def test_optimizer_map_lookup_and_a_function_map():
    adam, sgd, rms = pg.optimizers.Adam(), pg.optimizers.SGD(), pg.optimizers.RMSprop()
    omap = pg.optimizers.OptimizerMap(default_optimizer=rms)
    omap["encoder/layer_0/dense"] = adam
    omap["encoder/.*"] = sgd
    omap["decoder"] = adam
    assert omap["decoder"] is adam and omap["encoder/layer_0/dense"] is adam
    assert omap["encoder/layer_0/attention/query"] is sgd and omap["decoder/layer_0/dense"] is rms
    with pytest.raises(ValueError, match="already mapped"):
        omap["decoder"] = sgd
    with pytest.raises(ValueError, match="not supported inside"):
        pg.optimizers.OptimizerMap(pg.optimizers.Adam(global_clipnorm=1.0))
    m = _two_part_model()
    m.compile(pg.optimizers.MultiOptimizer(lambda v: pg.optimizers.Adam() if "encoder" in v.path else
                                           pg.optimizers.SGD()), "mse")
    rng = np.random.default_rng(15)
    x, y = rng.random((32, 3)).astype(np.float32), rng.random((32, 1)).astype(np.float32)
    before = m.get_weights()
    m.fit(x, y, epochs=1, verbose=0)
    assert all(not np.array_equal(before[k], v) for k, v in m.get_weights().items())


# --- ops.jvp, backend.result_type of complex dtypes -----------------------------------------------
def test_jvp_is_the_directional_derivative():
    x = np.array([[0.3, -0.2], [1.1, 0.5]], np.float32)
    t = np.array([[1.0, 0.5], [-0.3, 2.0]], np.float32)
    w = np.array([[0.5, -1.0], [2.0, 0.3]], np.float32)
    y, jt = ops.jvp(lambda a: ops.tanh(ops.matmul(a, w)) * 2.0, (x,), (t,))
    xd, td, wd = (v.astype(np.float64) for v in (x, t, w))
    np.testing.assert_allclose(y, np.tanh(xd @ wd) * 2, rtol=1e-6)
    np.testing.assert_allclose(jt, 2 * (1 - np.tanh(xd @ wd) ** 2) * (td @ wd), rtol=1e-5, atol=1e-6)
    (o1, o2), (j1, j2) = ops.jvp(lambda a, b: (ops.sin(a) * b, ops.exp(a)), (x, t), (t, x))
    np.testing.assert_allclose(j1, np.cos(xd) * td * td + np.sin(xd) * xd, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(j2, np.exp(xd) * td, rtol=1e-5)
    y, jt, aux = ops.jvp(lambda a: (ops.square(a), {"k": 1}), (x,), (t,), has_aux=True)
    np.testing.assert_allclose(jt, 2 * xd * td, rtol=1e-6)
    assert aux == {"k": 1}
    v, d = ops.jvp(ops.sin, (0.1,), (0.2,))                  # Keras's docstring: 0.09983342, 0.19900084
    assert float(v) == pytest.approx(0.09983342, rel=1e-6) and float(d) == pytest.approx(0.19900084, rel=1e-6)
    with pytest.raises(ValueError, match="tangent must have its primal's shape"):
        ops.jvp(ops.sin, (x,), (t[0],))


def test_result_type_with_a_complex_dtype_is_complex64():
    rt = pg.backend.result_type
    assert rt("complex64", int) == rt("complex64", "int32") == rt("complex64", float) == "complex64"
    assert rt("float32", complex) == rt("complex128", "float64") == "complex64"      # as Keras 3.15 gives


# --- this round's keras-io ports ------------------------------------------------------------------
def test_categorical_in_a_graph_draws_each_step_by_the_softmax():
    inp = pg.Input((3,))
    m = pg.Model(inp, layers.Lambda(lambda l: pg.random.categorical(l, 5))(inp))
    p = np.array([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]], np.float32)
    draws = np.concatenate([m.predict(np.log(p), verbose=0) for _ in range(300)], axis=1)
    assert draws.dtype == np.int32 and draws.shape == (2, 1500)
    freq = np.stack([np.bincount(d, minlength=3) / d.size for d in draws])
    np.testing.assert_allclose(freq, p, atol=0.04)           # 1500 draws a row: 4 standard errors


def test_shapes_that_numpy_would_not_broadcast_are_refused():
    class Mul(layers.Layer):
        def call(self, a, b):
            return a * b

    a, b = pg.Input((4, 8)), pg.Input((12, 8))
    with pytest.raises(ValueError, match="do not broadcast") as e:
        Mul()(a, b)                          # ggml would tile 4 over 12; numpy and Keras refuse
    assert "stand-in batch" not in str(e.value.__notes__ if hasattr(e.value, "__notes__") else "")
    v = pg.Variable(np.ones((2, 4, 8), np.float32))
    with pytest.raises(ValueError, match="do not broadcast"):
        with pg.GradientTape():
            v * np.ones((2, 12, 8), np.float32)
    c = pg.Input((1, 8))
    assert Mul()(a, c).shape == (None, 4, 8)                  # a 1 still broadcasts


def test_model_metrics_after_compile_and_fit_are_kerass_two():
    s = pg.Sequential([pg.Input((8,)), layers.Dense(10, activation="softmax")])
    s.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    x = np.random.default_rng(16).random((32, 8)).astype(np.float32)
    y = np.random.default_rng(17).integers(0, 10, 32)
    h = s.fit(x, y, epochs=1, verbose=0)
    assert [m.name for m in s.metrics] == ["loss", "compile_metrics"]
    assert float(s.metrics[0].result()) == pytest.approx(h.history["loss"][0], rel=1e-6)
    assert s.metrics[1].result()["accuracy"] == pytest.approx(h.history["accuracy"][0], rel=1e-6)


def test_scalar_variables_convert_to_numbers_and_refuse_a_truth_value():
    assert float(pg.Variable(1e-5)) == pytest.approx(1e-5) and int(pg.Variable(3.0)) == 3
    with pytest.raises(TypeError, match="no truth value"):
        bool(pg.Variable(False, trainable=False))
    with pytest.raises(TypeError, match="one value"):
        float(pg.Variable(np.ones(3, np.float32)))


def test_a_learning_rate_function_of_no_arguments_is_called_each_step():
    lr = pg.Variable(0.01, trainable=False)
    opt = pg.optimizers.SGD(learning_rate=lambda: lr)
    assert opt.learning_rate == pytest.approx(0.01)
    lr.assign(1e-3)
    assert opt.learning_rate == pytest.approx(1e-3)
    assert pg.optimizers.SGD(learning_rate=lambda step: 0.1 / (1 + step)).learning_rate == pytest.approx(0.1)


def test_model_inputs_as_a_list_holding_a_list_and_outputs_as_a_dict_holding_a_list(tmp_path):
    a, b = pg.Input((3,)), pg.Input((3,))
    m = pg.Model(inputs=[[a, b]], outputs=layers.Add()([a, b]))
    x = [np.ones((2, 3), np.float32), np.full((2, 3), 2.0, np.float32)]
    np.testing.assert_array_equal(m.predict(x, verbose=0), np.full((2, 3), 3.0))
    inp = pg.Input((4,))
    d1, d2, d3 = layers.Dense(2)(inp), layers.Dense(3)(inp), layers.Dense(1)(inp)
    nested = pg.Model(inp, {"pred_logits": d1, "pred_boxes": d2, "aux": [{"pred_logits": d3}]})
    xs = np.random.default_rng(18).random((5, 4)).astype(np.float32)
    out = nested.predict(xs, verbose=0)
    assert set(out) == {"pred_logits", "pred_boxes", "aux"} and out["aux"][0]["pred_logits"].shape == (5, 1)
    eager = nested(xs)
    np.testing.assert_allclose(np.asarray(eager["aux"][0]["pred_logits"]), out["aux"][0]["pred_logits"], rtol=1e-6)
    nested.save(tmp_path / "n.keras")
    back = pg.load_model(tmp_path / "n.keras").predict(xs, verbose=0)
    np.testing.assert_array_equal(back["aux"][0]["pred_logits"], out["aux"][0]["pred_logits"])


def _mlp(n_in, n_out):
    i = pg.Input((n_in,))
    return pg.Model(i, layers.Dense(n_out)(i))


class _GAN(pg.Model):
    """keras-io's GAN form: two models held, stepped by its own train_step, no call."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.generator, self.discriminator = _mlp(2, 4), _mlp(4, 1)

    def compile(self, d_opt, **kw):
        super().compile(**kw)
        self.d_opt = d_opt

    def train_step(self, real):
        with pg.GradientTape() as tape:
            fake = self.generator(pg.random.normal((4, 2)), training=True)
            loss = ops.mean(self.discriminator(fake)) - ops.mean(self.discriminator(real))
        g = tape.gradient(loss, self.discriminator.trainable_weights)
        self.d_opt.apply_gradients(zip(g, self.discriminator.trainable_weights))
        return {"d_loss": loss}


def test_a_model_without_call_holding_models_saves_and_loads(tmp_path):
    m = _GAN()
    m.compile(pg.optimizers.Adam())
    m.fit(np.random.default_rng(19).random((8, 4)).astype(np.float32), epochs=1, batch_size=4, verbose=0)
    m.save(tmp_path / "gan.keras")
    r = pg.load_model(tmp_path / "gan.keras", custom_objects={"_GAN": _GAN}, compile=False)
    for part in ("generator", "discriminator"):
        for a, b in zip(getattr(m, part).get_weights().values(), getattr(r, part).get_weights().values()):
            np.testing.assert_array_equal(a, b)
    with pytest.raises(NotImplementedError, match="defines no call"):
        m(np.ones((2, 2), np.float32))


class _Held(pg.Model):
    def __init__(self, aug, head, **kwargs):
        super().__init__(**kwargs)
        self.aug, self.head = aug, head

    def get_config(self):
        c = super().get_config()
        c.update({"aug": self.aug, "head": self.head})
        return c

    def call(self, x):
        return self.head(self.aug(x))


def test_a_get_config_returning_layers_saves_them_serialized(tmp_path):
    m = _Held(pg.Sequential([layers.Rescaling(0.5)]), layers.Dense(2))
    m.compile("adam", "mse")
    x = np.random.default_rng(20).random((8, 3)).astype(np.float32)
    m.fit(x, np.zeros((8, 2), np.float32), epochs=1, verbose=0)
    m.save(tmp_path / "h.keras")
    r = pg.load_model(tmp_path / "h.keras", custom_objects={"_Held": _Held})
    assert isinstance(r.aug, pg.Sequential)
    np.testing.assert_array_equal(r.predict(x, verbose=0), m.predict(x, verbose=0))


def test_rejection_resample_gives_class_element_pairs_in_the_target_proportions():
    rng = np.random.default_rng(21)
    x = rng.random((4000, 3)).astype(np.float32)
    y = (rng.random(4000) < 0.1).astype(np.int32)
    ds = pg.data.Dataset.from_tensor_slices((x, y))
    pairs = list(ds.rejection_resample(lambda a, b: b, target_dist=[0.5, 0.5], initial_dist=[0.9, 0.1], seed=1))
    classes = np.array([int(c) for c, _ in pairs])
    assert all(int(c) == int(e[1]) for c, e in pairs[:50])             # (class, the element as it was)
    assert abs(classes.mean() - 0.5) < 0.05 and 700 < len(classes) < 1000   # ~ 2 x 400 positives kept
    kept = ds.rejection_resample(lambda a, b: b, target_dist=[0.8, 0.2], seed=2).map(lambda c, e: e)
    ys = np.concatenate([b for _, b in kept.batch(256)])
    assert abs(ys.mean() - 0.2) < 0.03                                   # the classes estimated as it goes
    with pytest.raises(ValueError, match="summing to more than 0"):
        ds.rejection_resample(lambda a, b: b, target_dist=[0.0, 0.0])


def test_scatter_with_indices_computed_in_the_graph_sums_into_place():
    x = np.random.default_rng(22).random((4, 6)).astype(np.float32)
    with pg.GradientTape():
        _, idx = ops.top_k(pg.Variable(x), k=3)                     # (4, 3), computed in the graph
        upd = ops.ones_like(ops.cast(ops.reshape(idx, (-1,)), "float32"))
        got = np.asarray(ops.scatter(ops.reshape(idx, (-1, 1)), upd, (6,)))
    want = np.zeros(6)
    np.add.at(want, np.argsort(-x, axis=1, kind="stable")[:, :3].reshape(-1), 1.0)
    np.testing.assert_array_equal(got.reshape(-1), want)             # duplicates sum: 12 in all
    # two index columns into a (3, 4, 2) shape, values of (2,), the gradient reaching the values
    v = pg.Variable(np.arange(10, dtype=np.float32).reshape(5, 2))
    idx_src = pg.Variable(np.array([[0, 1], [2, 3], [0, 1], [1, 0], [2, 2]], np.float32), trainable=False)
    with pg.GradientTape() as tape:
        out = ops.scatter(ops.cast(ops.round(idx_src * 1.0), "int32"), v, (3, 4, 2))
        loss = ops.sum(out * np.arange(24, dtype=np.float32).reshape(3, 4, 2))
    ref = np.zeros((3, 4, 2), np.float32)
    np.add.at(ref, (np.array([0, 2, 0, 1, 2]), np.array([1, 3, 1, 0, 2])), np.arange(10).reshape(5, 2))
    np.testing.assert_array_equal(np.asarray(out), ref)
    w = np.arange(24, dtype=np.float32).reshape(3, 4, 2)
    np.testing.assert_array_equal(np.asarray(tape.gradient(loss, v)),
                                  w[np.array([0, 2, 0, 1, 2]), np.array([1, 3, 1, 0, 2])])


# --- Keras's own unit tests: recurrent layers ------------------------------------------------------
C = pg.initializers.Constant


def test_simple_rnn_and_lstm_biases_are_kerass_single_bias():
    seq = np.arange(24).reshape((2, 3, 4)).astype(np.float32)
    rnn = layers.SimpleRNN(4, kernel_initializer=C(0.01), recurrent_initializer=C(0.02), bias_initializer=C(0.03))
    out = np.asarray(rnn(seq))
    np.testing.assert_allclose(rnn.get_weights()[2], [0.03] * 4, rtol=1e-6)
    np.testing.assert_allclose(out[:, 0], [0.405432, 0.73605347], rtol=1e-5)       # Keras 3.15's values
    seq = np.arange(72).reshape((3, 6, 4)).astype(np.float32)
    for ufb, want, bias in ((True, [0.6288687, 0.86899155, 0.9460773], [0.03, 1.0, 0.03, 0.03]),
                            (False, [0.57019705, 0.8661914, 0.9459622], [0.03, 0.03, 0.03, 0.03])):
        lstm = layers.LSTM(3, kernel_initializer=C(0.01), recurrent_initializer=C(0.02), bias_initializer=C(0.03),
                           unit_forget_bias=ufb)
        out = np.asarray(lstm(seq))
        np.testing.assert_allclose(lstm.get_weights()[2][::3], bias, rtol=1e-6)
        np.testing.assert_allclose(out[:, 0], want, rtol=1e-5)


def test_conv_lstm_takes_its_bias_initializer_beside_the_unit_forget_bias():
    layer = layers.ConvLSTM1D(2, 2, kernel_initializer=C(0.01), recurrent_initializer=C(0.02),
                              bias_initializer=C(0.03))
    layer(np.ones((1, 2, 4, 3), np.float32))
    np.testing.assert_allclose(layer.get_weights()[2], [0.03, 0.03, 1, 1, 0.03, 0.03, 0.03, 0.03], rtol=1e-6)


def test_recurrent_configs_keep_initializer_objects_and_bidirectional_uses_them():
    gru = layers.GRU(2, kernel_initializer=C(0.01), recurrent_initializer=pg.initializers.RandomNormal(stddev=0.5))
    cfg = gru.get_config()
    assert cfg["kernel_initializer"]["class_name"] == "Constant"
    assert cfg["recurrent_initializer"]["config"]["stddev"] == 0.5
    assert layers.GRU.from_config(cfg).get_config()["kernel_initializer"] == cfg["kernel_initializer"]
    seq = np.arange(24).reshape((2, 4, 3)).astype(np.float32)
    bi = layers.Bidirectional(layers.GRU(2, kernel_initializer=C(0.01), recurrent_initializer=C(0.02),
                                         bias_initializer=C(0.03)))
    np.testing.assert_allclose(np.asarray(bi(seq)), [[0.23482965, 0.23482965, 0.13172927, 0.13172927],
                                                     [0.45384797, 0.45384797, 0.39794952, 0.39794952]], rtol=1e-5)


def test_global_3d_pooling_pools_the_right_axes_in_either_data_format():
    x = np.arange(48, dtype=np.float32).reshape(2, 2, 2, 2, 3)
    np.testing.assert_allclose(layers.GlobalAveragePooling3D()(x), x.mean(axis=(1, 2, 3)), rtol=1e-6)
    np.testing.assert_allclose(layers.GlobalAveragePooling3D(data_format="channels_first")(x),
                               x.mean(axis=(2, 3, 4)), rtol=1e-6)
    np.testing.assert_allclose(layers.GlobalMaxPooling3D(data_format="channels_first")(x), x.max(axis=(2, 3, 4)))


def test_a_number_or_a_same_rank_sample_weight_weighs_every_loss():
    yt = np.array([[1, 9, 2], [-5, -2, 6]], np.float32)
    yp = np.array([[4, 8, 12], [8, 1, 3]], np.float32)
    assert float(pg.losses.MeanSquaredError()(yt, yp, sample_weight=2.3)) == pytest.approx(113.85, rel=1e-6)
    assert float(pg.losses.MeanAbsoluteError()(yt, yp, sample_weight=2.3)) == pytest.approx(12.65, rel=1e-6)
    p = np.clip(yp / 13, 0.01, 1)
    for loss, t in ((pg.losses.CategoricalCrossentropy(), np.clip(yt / 10, 0, 1)),
                    (pg.losses.SparseCategoricalCrossentropy(), np.array([0, 2])), (pg.losses.Hinge(), yt)):
        assert float(loss(t, p, sample_weight=2.3)) == pytest.approx(2.3 * float(loss(t, p)), rel=1e-5)
    y3, p3 = yt[..., None], yp[..., None]
    w = np.array([[1.2, 3.4, 5.6], [7.8, 9.0, 1.2]], np.float32)
    for loss in (pg.losses.MeanSquaredError(), pg.losses.Huber(), pg.losses.LogCosh()):
        assert float(loss(y3, p3, sample_weight=w[..., None])) == pytest.approx(float(loss(y3, p3, sample_weight=w)),
                                                                              rel=1e-6)
    manual = ((((yt - yp) ** 2) * w).sum() / w.size)
    assert float(pg.losses.MeanSquaredError()(y3, p3, sample_weight=w[..., None])) == pytest.approx(manual, rel=1e-6)


def test_nadam_single_step_is_kerass_golden():
    opt = pg.optimizers.Nadam(learning_rate=0.5)
    v = pg.Variable([1.0, 2.0, 3.0, 4.0])
    opt.apply_gradients(zip([np.array([1.0, 6.0, 7.0, 2.0], np.float32)], [v]))
    np.testing.assert_allclose(v.numpy(), [0.4686, 1.4686, 2.4686, 3.4686], atol=1e-4)   # Keras's nadam_test


def test_merge_layers_take_masks_as_keras():
    masking = layers.Masking()
    a = masking(np.array([[[0, 0], [-1, -2], [0, 0], [-3, -4]]], np.float32))
    b = np.array([[[0, 0], [0, 0], [-1, -2], [-3, -4]]], np.float32)
    np.testing.assert_array_equal(layers.Maximum()([a, b]), [[[0, 0], [0, 0], [-1, -2], [-3, -4]]])
    c = masking(np.array([[[0, 0], [1, 2], [0, 0], [3, 4]]], np.float32))
    d = np.array([[[0, 0], [0, 0], [1, 2], [3, 4]]], np.float32)
    np.testing.assert_array_equal(layers.Multiply()([c, d]), [[[0, 0], [0, 0], [1, 2], [9, 16]]])
    np.testing.assert_array_equal(layers.Minimum()([c, d]), [[[0, 0], [0, 0], [1, 2], [3, 4]]])
    out = layers.Add()([c, masking(d)])
    np.testing.assert_array_equal(out._keras_mask, [[False, True, True, True]])      # the masks ORed
    i1, i2 = pg.Input((4, 2)), pg.Input((4, 2))
    h = layers.Maximum()([layers.Masking()(i1), layers.Masking()(i2)])
    m = pg.Model([i1, i2], layers.GlobalAveragePooling1D()(h))
    np.testing.assert_allclose(m.predict([np.asarray(a), b], verbose=0), [[-5 / 3, -8 / 3]], rtol=1e-6)
    j1, j2 = pg.Input((3, 1)), pg.Input((2, 1))
    cat = layers.Concatenate(axis=1)([layers.Masking()(j1), j2])          # the steps' masks joined
    m2 = pg.Model([j1, j2], layers.GlobalAveragePooling1D()(cat))
    got = m2.predict([np.array([[[0.0], [1.0], [2.0]]], np.float32), np.array([[[1.0], [2.0]]], np.float32)],
                     verbose=0)
    np.testing.assert_allclose(got, [[(1 + 2 + 1 + 2) / 4]], rtol=1e-6)


def test_callbacks_take_kerass_other_hooks_and_raise_on_nan():
    seen = []
    cb = pg.callbacks.LambdaCallback(on_batch_end=lambda b, logs: seen.append(b))
    m = pg.Sequential([pg.Input((2,)), layers.Dense(1)])
    m.compile("sgd", "mse")
    m.fit(np.ones((8, 2), np.float32), np.ones((8, 1), np.float32), batch_size=4, epochs=1, verbose=0, callbacks=[cb])
    assert seen == [0, 1]
    with pytest.raises(TypeError, match="not a callback hook"):
        pg.callbacks.LambdaCallback(on_everything=print)
    with pytest.raises(RuntimeError, match="TerminateOnNaN"):
        m.fit(np.full((4, 2), np.nan, np.float32), np.ones((4, 1), np.float32), verbose=0,
              callbacks=[pg.callbacks.TerminateOnNaN(raise_error=True)])


def test_recurrent_layers_take_kerass_other_arguments():
    seq = np.array([[[1.0], [2.0], [0.0]]], np.float32)
    masked = layers.Masking()(seq)
    for make in (lambda: layers.SimpleRNN(2, return_sequences=True, zero_output_for_mask=True),
                 lambda: layers.LSTM(2, return_sequences=True, zero_output_for_mask=True, implementation=1,
                                     use_cudnn=False)):
        out = np.asarray(make()(masked))
        np.testing.assert_array_equal(out[0, 2], [0.0, 0.0])          # the masked step's output is zeros
    cfg = layers.GRU(3, implementation=2).get_config()
    assert layers.GRU.from_config(dict(cfg, implementation=0)).units == 3


def test_fit_truncates_float_indices_for_an_embedding():
    m = pg.Sequential([pg.Input((5,)), layers.Embedding(10, 3), layers.GlobalAveragePooling1D(), layers.Dense(1)])
    m.compile("sgd", "mse")
    x = np.random.default_rng(23).uniform(1, 10, (8, 5))
    assert np.isfinite(m.fit(x, np.ones((8, 1)), verbose=0).history["loss"][0])
    np.testing.assert_allclose(m.predict(x, verbose=0), m.predict(x.astype(np.int64), verbose=0), rtol=1e-6)


def test_lora_weights_files_load_into_plain_models_and_back(tmp_path):
    rng = np.random.default_rng(24)
    x, y = rng.random((64, 8)).astype(np.float32), rng.random((64, 16)).astype(np.float32)
    layer = layers.Dense(16)
    layer.build((None, 8))
    layer.enable_lora(4)
    model = pg.Sequential([pg.Input((8,)), layer])
    model.compile(optimizer="sgd", loss="mse")
    model.fit(x, y, verbose=0)
    model.save_weights(tmp_path / "lora.weights.h5")
    plain = pg.Sequential([pg.Input((8,)), layers.Dense(16)])
    plain.load_weights(tmp_path / "lora.weights.h5")                # the merged weight, as Keras's file
    np.testing.assert_allclose(plain.predict(x, verbose=0), model.predict(x, verbose=0), rtol=1e-5, atol=1e-5)
    twin = pg.Sequential([pg.Input((8,)), layers.Dense(16, lora_rank=4)])
    twin.load_weights(tmp_path / "lora.weights.h5")                 # a LoRA model takes base and factors exactly
    for k, v in model.get_weights().items():
        np.testing.assert_array_equal(twin.get_weights()[k], v)
    twin2 = pg.Sequential([pg.Input((8,)), layers.Dense(16, lora_rank=4)])
    twin2.load_weights(tmp_path / "lora.weights.h5", skip_mismatch=True)   # the same (the update once)
    for k, v in model.get_weights().items():
        np.testing.assert_array_equal(twin2.get_weights()[k], v)
    plain.save_weights(tmp_path / "plain.weights.h5")
    model.load_weights(tmp_path / "plain.weights.h5")               # a plain file into a LoRA model: no update
    np.testing.assert_allclose(model.predict(x, verbose=0), plain.predict(x, verbose=0), rtol=1e-5, atol=1e-5)


def test_reversible_embedding_reverse_reads_the_quantized_and_lora_table():
    layer = layers.ReversibleEmbedding(10, 16, tie_weights=True)
    layer(np.zeros((1, 3), np.int32))
    x = np.random.default_rng(25).uniform(size=(4, 16)).astype(np.float32)
    y_float = np.asarray(layer(x, reverse=True))
    layer.quantize("int8")
    assert np.abs(np.asarray(layer(x, reverse=True)) - y_float).max() < 0.01 * np.abs(y_float).max()
    other = layers.ReversibleEmbedding(10, 16, tie_weights=True)
    other(np.zeros((1, 3), np.int32))
    other.enable_lora(2)
    a, b = (np.asarray(f.numpy()) for f in other._lora_factors())
    other._lora_factors()[1].assign(np.ones_like(b))
    merged = other.embeddings.numpy() + other._lora_scale * (a @ np.ones_like(b))
    np.testing.assert_allclose(np.asarray(other(x, reverse=True)), x @ merged.T, rtol=1e-5, atol=1e-5)


def test_mha_on_four_dimensional_inputs_returns_its_scores():
    x = np.random.default_rng(26).normal(size=(2, 3, 8, 4)).astype(np.float32)
    mha = layers.MultiHeadAttention(num_heads=2, key_dim=4, attention_axes=2)
    out, scores = mha(x, x, return_attention_scores=True)
    assert np.shape(out) == (2, 3, 8, 4) and np.shape(scores) == (2, 3, 2, 8, 8)
    np.testing.assert_allclose(np.asarray(scores).sum(axis=-1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(out), np.asarray(mha(x, x)), rtol=1e-5, atol=1e-6)


def test_metric_sample_weights_broadcast_as_kerass():
    y_pred = np.array([(0.9, 0.2, 0.8, 0.1), (0.2, 0.9, 0.7, 0.6), (0.1, 0.2, 0.4, 0.3), (0, 1, 0.7, 0.3)])
    y_true = np.array([(0, 1, 1, 0), (1, 0, 0, 0), (0, 0, 0, 0), (1, 1, 1, 1)])
    tn = pg.metrics.TrueNegatives(thresholds=[0.15, 0.5, 0.85])
    np.testing.assert_array_equal(tn(y_true, y_pred, sample_weight=((0.0, 2.0, 3.0, 5.0),)), [5, 15, 23])
    tp = pg.metrics.TruePositives(thresholds=[0.15, 0.5, 0.85])
    np.testing.assert_array_equal(tp(y_true, y_pred, sample_weight=37.0), [222, 111, 37])
    acc = pg.metrics.Accuracy()
    acc.update_state(np.array([[1, 2], [3, 4]]), np.array([[0, 2], [3, 4]]), sample_weight=np.array([[1, 0], [0, 1]]))
    assert float(acc.result()) == pytest.approx(0.5)
    mean = pg.metrics.Mean()
    mean.update_state(np.array([[1, 2], [3, 4]], np.float32), sample_weight=np.array([[1.0], [0.0]]))
    assert float(mean.result()) == pytest.approx(1.5)


def test_loss_reductions_and_a_masked_outputs_mask():
    yt = np.array([[1, 9, 2], [-5, -2, 6]], np.float32)
    yp = np.array([[4, 8, 12], [8, 1, 3]], np.float32)
    w = np.array([[1.2], [3.4]], np.float32)
    per = ((yt - yp) ** 2).mean(axis=1)
    got = pg.losses.MeanSquaredError(reduction="mean_with_sample_weight")(yt, yp, sample_weight=w)
    assert float(got) == pytest.approx(float((per * w[:, 0]).sum() / w.sum()), rel=1e-6)
    assert pg.losses.MeanSquaredError(reduction="mean").reduction == "sum_over_batch_size"
    x = np.array([[[1.0], [0.0], [2.0]]], np.float32)                # step 1 is padding
    masked = layers.Masking(mask_value=0.0)(x)
    assert float(pg.losses.MeanSquaredError()(np.zeros((1, 3, 1), np.float32), masked)) == pytest.approx(2.5)


def test_binary_crossentropy_metric_clips_as_the_loss():
    yt = np.array([1, 0, 1, 0]).reshape([2, 2])
    yp = np.array([1, 1, 1, 0], np.float32).reshape([2, 2])
    assert float(pg.metrics.BinaryCrossentropy()(yt, yp)) == pytest.approx(float(pg.losses.BinaryCrossentropy()(yt, yp)),
                                                                           rel=1e-6)


def test_time_distributed_hands_each_steps_mask_to_its_layer_and_checks_it():
    class MaskedDense(layers.Wrapper):
        def __init__(self, units, **kw):
            super().__init__(layers.Dense(units, kernel_initializer=C(0.01), use_bias=False), **kw)
            self.supports_masking = True

        def call(self, inputs, training=False, mask=None):
            out = self.layer.call(inputs)
            return out if mask is None else ops.transpose(ops.transpose(out) * ops.cast(mask, inputs.dtype))

    seq = np.arange(24).reshape((3, 2, 4)).astype(np.float32)
    mask = np.array([[False, True], [True, False], [True, True]])
    got = np.asarray(layers.TimeDistributed(MaskedDense(1))(seq, mask=mask))[..., 0]
    np.testing.assert_allclose(got, [[0, 0.22], [0.38, 0], [0.7, 0.86]], rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="mask has shape"):
        layers.TimeDistributed(layers.Dense(5))(np.zeros((4, 5, 3), np.float32), mask=np.ones((4, 6), bool))


def test_layer_arguments_keras_users_pass():
    table = np.arange(12, dtype=np.float32).reshape(3, 4)
    emb = layers.Embedding(3, 4, weights=[table])
    np.testing.assert_array_equal(emb.embeddings.numpy(), table)
    np.testing.assert_array_equal(np.asarray(emb(np.array([[2, 0]]))), table[[[2, 0]]])
    e2 = layers.Embedding(3, 4)
    e2.build()
    assert e2.built
    x = np.arange(5, dtype=np.float32)[None]
    got = np.asarray(layers.LayerNormalization(rms_scaling=True)(x))
    np.testing.assert_allclose(got, x / np.sqrt(x.var() + 1e-3), rtol=1e-5)
    assert layers.InputLayer(shape=(2, 3), batch_size=4).batch_shape == (4, 2, 3)
    assert pg.optimizers.get(None) is None and pg.metrics.get(None) is None
    assert isinstance(pg.optimizers.get({"class_name": "Adam", "config": {"learning_rate": 0.5}}), pg.optimizers.Adam)


def test_early_stopping_tracks_the_best_epoch_whatever_the_baseline_and_restores_it_at_the_end():
    m = pg.Sequential([pg.Input((1,)), layers.Dense(1, kernel_initializer="zeros")])
    m.compile("sgd", "mse")
    es = pg.callbacks.EarlyStopping(patience=2, baseline=0.5, restore_best_weights=True)
    es.set_model(m)
    es.on_train_begin()
    for epoch, loss in enumerate([0.9, 0.8, 0.7, 0.71, 0.72]):       # none beats the baseline
        m.layers[0].set_weights([np.full((1, 1), float(epoch), np.float32), np.zeros(1, np.float32)])
        es.on_epoch_end(epoch, {"val_loss": loss})
        if m.stop_training:
            break
    es.on_train_end()
    assert es.best_epoch == 2 and float(m.layers[0].get_weights()[0][0, 0]) == 2.0     # epoch 2's weights


def test_gradient_accumulation_counts_updates_and_equals_the_mean_gradient():
    o1 = pg.optimizers.Adam(weight_decay=0.05)
    o3 = pg.optimizers.Adam(weight_decay=0.05, gradient_accumulation_steps=3)
    v1, v3 = pg.Variable([[0.9], [0.5]]), pg.Variable([[0.9], [0.5]])
    r = np.random.RandomState(0)
    for _ in range(8):
        g3 = r.random_sample([3, 2, 1]).astype(np.float32)
        o1.apply_gradients([(g3.mean(0), v1)])
        for b in range(3):
            o3.apply_gradients([(g3[b], v3)])
    np.testing.assert_allclose(v3.numpy(), v1.numpy(), rtol=1e-6)
    assert int(o3.iterations) == 8


def test_small_metric_and_mask_attributes():
    m = pg.metrics.SparseCategoricalCrossentropy(ignore_class=0)
    m.update_state(np.array([1, 0, 2]), np.array([[0.05, 0.95, 0], [0.1, 0.8, 0.1], [0.2, 0.3, 0.5]]))
    # Keras 3.15 without weights: the ignored row's loss is 0 and it stays in the count (0.248148)
    assert float(m.result()) == pytest.approx(np.sum([-np.log(0.95), -np.log(0.5)]) / 3, rel=1e-6)
    w = pg.metrics.SparseCategoricalCrossentropy(ignore_class=0)    # with weights: over the weights kept
    w.update_state(np.array([1, 0, 2]), np.array([[0.05, 0.95, 0], [0.1, 0.8, 0.1], [0.2, 0.3, 0.5]]),
                   sample_weight=np.array([1.0, 1.0, 3.0]))
    assert float(w.result()) == pytest.approx((-np.log(0.95) - 3 * np.log(0.5)) / 4, rel=1e-6)
    assert pg.metrics.Mean().dtype == "float32" and pg.metrics.Precision().true_positives.tolist() == [0.0]
    x = layers.Masking()(np.array([[[0.0], [1.0]]], np.float32))
    np.testing.assert_array_equal(layers.Rescaling(2.0)(x)._keras_mask, [[False, True]])
    assert layers.Normalization(mean=0.0, variance=1.0).supports_masking


def test_rate_callbacks_set_each_inner_optimizer_of_a_multi_optimizer():
    m = _two_part_model()
    a, s = pg.optimizers.Adam(0.01), pg.optimizers.SGD(0.1)
    m.compile(pg.optimizers.MultiOptimizer(pg.optimizers.OptimizerMap(s, {"encoder_dense/.*": a})), "mse")
    x, y = np.ones((8, 3), np.float32), np.ones((8, 1), np.float32)
    m.fit(x, y, epochs=2, verbose=0, callbacks=[pg.callbacks.LearningRateScheduler(lambda e, lr: lr * 0.5)])
    assert a.learning_rate == pytest.approx(0.0025) and s.learning_rate == pytest.approx(0.025)


def test_auc_options_match_kerass_values():
    y_true = np.array([[0, 0], [1, 1], [1, 1], [1, 0]])
    y_pred = np.array([[0.0, 0.4], [0.5, 0.7], [0.3, 0.2], [0.9, 0.3]], np.float32)
    for kw, want in ((dict(multi_label=True), 0.75), (dict(num_thresholds=2, thresholds=[0.5]), 0.70),
                     (dict(summation_method="majoring"), 0.80), (dict(curve="PRGAIN"), 0.2824074),
                     (dict(multi_label=True, label_weights=[0.75, 0.25]), 0.875)):       # Keras 3.15's
        assert float(pg.metrics.AUC(**kw)(y_true, y_pred)) == pytest.approx(want, rel=1e-5), kw
    yp, yt = np.array([0, 0.5, 0.3, 0.9], np.float32), np.array([0, 0, 1, 1])
    assert float(pg.metrics.AUC(num_thresholds=3, curve="PR")(yt, yp, sample_weight=[1, 2, 3, 4])) == \
        pytest.approx(0.916613, rel=1e-5)                       # Davis & Goadrich's interpolation
    assert float(pg.metrics.AUC(num_thresholds=3, curve="ROC")(yt, yp, sample_weight=[1, 2, 3, 4])) == \
        pytest.approx(0.785714, rel=1e-5)
    cfg = pg.metrics.AUC(thresholds=[0.3, 0.6], curve="PR", multi_label=True).get_config()
    assert pg.metrics.AUC.from_config(cfg).get_config() == cfg


def test_losses_over_another_axis():
    yt = np.array([[1, 0, 0], [0, 1, 0]], np.float32).T                 # classes on axis 0
    yp = np.array([[0.7, 0.2, 0.1], [0.2, 0.6, 0.2]], np.float32).T
    want = np.mean([-np.log(0.7), -np.log(0.6)])
    assert float(pg.losses.CategoricalCrossentropy(axis=0)(yt, yp)) == pytest.approx(want, rel=1e-6)
    assert float(pg.losses.SparseCategoricalCrossentropy(axis=0)(np.array([[0, 1]]), yp)) == pytest.approx(want,
                                                                                                          rel=1e-6)
    cos = [np.dot(a, b) / np.linalg.norm(a) / np.linalg.norm(b) for a, b in zip(yt.T, yp.T)]
    assert float(pg.losses.CosineSimilarity(axis=0)(yt, yp)) == pytest.approx(-np.mean(cos), rel=1e-6)
    seg = np.random.default_rng(27).random((2, 3, 4, 4)).astype(np.float32)            # (b, classes, h, w)
    lab = np.random.default_rng(28).integers(0, 3, (2, 4, 4))
    first = pg.losses.SparseCategoricalCrossentropy(axis=1, from_logits=True)(lab, seg)
    last = pg.losses.SparseCategoricalCrossentropy(from_logits=True)(lab, seg.transpose(0, 2, 3, 1))
    assert float(first) == pytest.approx(float(last), rel=1e-6)


def test_preprocessing_statistics_and_scales_as_keras_places_them():
    norm = layers.Normalization(axis=(1, 2), mean=np.zeros((10, 13), np.float32),
                                variance=np.full((10, 13), 4.0, np.float32))
    np.testing.assert_allclose(np.asarray(norm(np.ones((2, 10, 13, 3), np.float32))), 0.5, rtol=1e-6)
    pg.config.set_image_data_format("channels_first")
    try:
        y = layers.Rescaling(scale=[1 / 255, 1.5 / 255, 2 / 255], offset=0.5)(np.full((2, 3, 2, 2), 255.0, np.float32))
    finally:
        pg.config.set_image_data_format("channels_last")
    np.testing.assert_allclose(np.asarray(y)[0, :, 0, 0], [1.5, 2.0, 2.5], rtol=1e-6)


def test_losses_get_as_keras_and_binary_crossentropy_shapes():
    # Keras 3's losses.get: a function name or short alias gives the per-sample function, a class
    # name an instance; compile takes any of them
    y = np.array([[0.0, 1.0], [1.0, 1.0]], np.float32)
    p = np.array([[0.5, 0.5], [0.0, 2.0]], np.float32)
    for name in ("mse", "MSE", "mean_squared_error"):
        fn = pg.losses.get(name)
        assert callable(fn) and not isinstance(fn, pg.losses.Loss)
        np.testing.assert_allclose(fn(y, p), [0.25, 1.0], rtol=1e-6)   # per sample, as Keras's
    assert pg.losses.get("MAE") is pg.losses.mean_absolute_error
    assert pg.losses.get("BCE") is pg.losses.binary_crossentropy
    assert isinstance(pg.losses.get("MeanSquaredError"), pg.losses.MeanSquaredError)
    assert isinstance(pg.losses.get(pg.losses.Huber), pg.losses.Huber)
    assert pg.losses.get(pg.losses.poisson) is pg.losses.poisson
    assert isinstance(pg.losses.get({"class": "MeanAbsoluteError", "config": {}}), pg.losses.MeanAbsoluteError)
    # Keras's serialized form
    keras_form = {"module": "keras.losses", "class_name": "Huber", "registered_name": None,
                  "config": {"name": "huber_loss", "reduction": "sum", "delta": 2.0}}
    h = pg.losses.get(keras_form)
    assert isinstance(h, pg.losses.Huber) and h.delta == 2.0 and h.reduction == "sum"
    assert pg.losses.get(pg.losses.serialize(h)).get_config() == h.get_config()
    with pytest.raises(ValueError, match="unknown loss"):
        pg.losses.get("crossentropy")
    x = np.random.default_rng(0).normal(size=(16, 3)).astype(np.float32)
    for loss in ("MSE", pg.losses.get("mse")):
        m = pg.Sequential([pg.Input((3,)), pg.layers.Dense(2)])
        m.compile("sgd", loss=loss)
        h = m.fit(x, x[:, :2], epochs=3, verbose=0).history["loss"]
        assert h[-1] < h[0]
    # binary cross-entropy wants one probability per label (Keras's "must have the same shape")
    bce = pg.losses.BinaryCrossentropy()
    with pytest.raises(ValueError, match="same shape"):
        bce(np.zeros((4, 1)), np.full((4, 3), 0.5))
    with pytest.raises(ValueError, match="same shape"):
        bce(np.zeros((4, 3)), np.full((3, 4), 0.5))
    # a trailing axis of 1 on either side is fine, as Keras's
    assert bce(np.zeros((4,)), np.full((4, 1), 0.5)) == pytest.approx(np.log(2), rel=1e-6)
    assert bce(np.zeros((4, 1)), np.full((4,), 0.5)) == pytest.approx(np.log(2), rel=1e-6)


def test_batch_normalization_leaves_masked_steps_out_of_its_batch_statistics():
    # Keras 3's masked moments: padded steps count for nothing in the batch's mean and variance,
    # so neither in the training output nor in the moving statistics. Expected values: real Keras
    # 3.15 (torch backend) on the same embedding table
    E = np.random.default_rng(0).normal(size=(10, 3)).astype(np.float32)
    tok = np.array([[3, 5, 0, 0], [2, 7, 9, 0]])

    def model():
        inp = pg.Input((4,), dtype="int32")
        e = pg.layers.Embedding(10, 3, mask_zero=True)
        bn = pg.layers.BatchNormalization(momentum=0.5)
        out = pg.layers.GlobalAveragePooling1D()(bn(e(inp)))
        m = pg.Model(inp, out)
        e.set_weights([E])
        return m, bn

    m, bn = model()
    got = m(tok, training=True)
    np.testing.assert_allclose(got, [[-0.82936, -0.51417, -0.14570], [0.55291, 0.34278, 0.09713]], atol=2e-5)
    np.testing.assert_allclose(bn.moving_mean.numpy(), [-0.0249, -0.13434, -0.0407], atol=2e-5)
    np.testing.assert_allclose(bn.moving_variance.numpy(), [1.15423, 0.68727, 0.57359], atol=2e-5)
    # the same through fit (one more update of the moving mean)
    m.compile("sgd", "mse")
    m.fit(tok, np.zeros((2, 3)), epochs=1, verbose=0)
    np.testing.assert_allclose(bn.moving_mean.numpy(), [-0.0373, -0.2015, -0.0611], atol=2e-4)
    # numpy: the statistics of the real steps only
    m2, bn2 = model()
    m2(tok, training=True)
    real = E[tok[tok != 0]]
    np.testing.assert_allclose(bn2.moving_mean.numpy(), 0.5 * real.mean(0), atol=1e-5)
    np.testing.assert_allclose(bn2.moving_variance.numpy(), 0.5 + 0.5 * real.var(0), atol=1e-5)
    # in inference the mask changes nothing: the moving statistics normalise every step
    x = E[tok]
    b = pg.layers.BatchNormalization()
    np.testing.assert_allclose(b(x, mask=tok != 0), b(x), atol=1e-6)
    with pytest.raises(ValueError, match="mask"):
        b(x, mask=np.ones((2, 4, 3), bool), training=True)


def test_a_masked_prediction_weighs_the_loss_as_keras_and_loss_functions_pickle():
    import pickle
    # Keras's apply_mask: padded steps weigh 0, the mean is over the real ones. Expected values:
    # real Keras 3.15 on the same arrays with the same mask
    yt = np.array([1.0, 0.0, 1.0, 0.0], np.float32).reshape(2, 2, 1)

    class Masked(np.ndarray):
        pass
    yp = np.array([0.1, 0.2, 0.3, 0.4], np.float32).reshape(2, 2, 1).view(Masked)
    yp._keras_mask = np.array([[True, False], [True, True]])
    mse = pg.losses.MeanSquaredError()
    assert float(mse(yt, yp)) == pytest.approx(0.48666665, rel=1e-6)
    sw = np.array([[0.4, 0.3], [0.2, 0.1]], np.float32)
    assert float(mse(yt, yp, sample_weight=sw)) == pytest.approx(0.146, rel=1e-6)
    # one weight per sample weighs its real steps (Keras's own fails to broadcast here)
    want = (0.81 * 0.5 + (0.49 + 0.16) * 2.0) / 3
    assert float(mse(yt, yp, sample_weight=np.array([0.5, 2.0]))) == pytest.approx(want, rel=1e-6)
    # sum: the padded steps drop out, nothing rescaled
    assert float(pg.losses.MeanSquaredError(reduction="sum")(yt, yp)) == pytest.approx(0.81 + 0.49 + 0.16, rel=1e-6)
    yp._keras_mask = np.zeros((2, 2), bool)             # everything masked: 0, as Keras's
    assert float(mse(yt, yp)) == 0.0
    # a bad reduction says what is allowed (Keras's "Invalid value for argument")
    with pytest.raises(ValueError, match="Invalid value for argument `reduction`"):
        pg.losses.MeanSquaredError(reduction="abc")
    # Keras's loss functions pickle by name; losses.get(None) is None
    assert pickle.loads(pickle.dumps(pg.losses.get("mse"))) is pg.losses.mean_squared_error
    assert pg.losses.get(None) is None
    # categorical cross-entropy wants one-hot labels shaped as the predictions
    with pytest.raises(ValueError, match="same shape"):
        pg.losses.CategoricalCrossentropy()(np.array([[0], [1], [2]]), np.full((3, 3), 1 / 3))
    assert float(pg.losses.SparseCategoricalCrossentropy()(np.array([[0], [1], [2]]), np.full((3, 3), 1 / 3))) == \
        pytest.approx(np.log(3), rel=1e-6)


def test_accuracies_weigh_each_entry_as_keras():
    # Keras's AccuracyTest / BinaryAccuracyTest: weights of the predictions' shape weigh each
    # entry, and a weight row broadcasts over the samples
    yt, yp = np.array([[1, 2], [3, 4]]), np.array([[0, 2], [3, 4]])
    acc = pg.metrics.Accuracy()
    acc.update_state(yt, yp, sample_weight=np.array([[1, 0], [0, 1]]))
    assert acc.result() == pytest.approx(0.5)
    acc = pg.metrics.Accuracy()
    acc.update_state(yt, yp, sample_weight=np.array([[1, 0]]))
    assert acc.result() == pytest.approx(0.5)
    bt, bp = np.array([[1, 1], [0, 0]]), np.array([[0.98, 1], [0, 0.6]])
    b = pg.metrics.BinaryAccuracy()
    b.update_state(bt, bp, sample_weight=np.array([[1, 0], [0, 1]]))
    assert b.result() == pytest.approx(0.5)          # was 0.75: the weights were averaged per sample
    b = pg.metrics.BinaryAccuracy()
    b.update_state(bt, bp, sample_weight=np.array([[1, 0]]))
    assert b.result() == pytest.approx(1.0)
    b = pg.metrics.BinaryAccuracy()
    b.update_state(bt, bp, sample_weight=np.array([1.0, 3.0]))   # one per sample: 1 * 1 + 3 * 0.5
    assert b.result() == pytest.approx(2.5 / 4)


def test_fbeta_takes_a_number_as_weight_and_checks_its_arguments_as_keras():
    # Keras's FBetaScoreTest.test_fbeta_scalar_weight
    m = pg.metrics.FBetaScore(threshold=0.5)
    m.update_state(np.array([[1, 1], [1, 0]]), np.array([[0.2, 0.6], [0.2, 0.6]], np.float32), sample_weight=0.5)
    np.testing.assert_allclose(m.result(), [0.0, 2 / 3], atol=1e-6)
    for kwargs in (dict(beta=0.0), dict(beta=-1.0), dict(beta=None), dict(beta="1.0"), dict(threshold=0.0),
                   dict(threshold=-0.1), dict(threshold=1.1), dict(threshold="0.5")):
        with pytest.raises(ValueError, match="Invalid `(beta|threshold)` argument value"):
            pg.metrics.FBetaScore(**kwargs)
    assert pg.metrics.FBetaScore(threshold=1.0).threshold == 1.0


def test_dropout_of_rate_one_drops_everything_and_upsampling_takes_cubic_kernels():
    x = np.arange(1, 13, dtype=np.float32).reshape(3, 4)
    d = layers.Dropout(1.0)                      # Keras's: rate in [0, 1]
    np.testing.assert_array_equal(d(x, training=True), np.zeros_like(x))
    np.testing.assert_array_equal(d(x), x)
    np.testing.assert_array_equal(layers.Dropout(1.0, noise_shape=(None, 1))(x, training=True), np.zeros_like(x))
    np.testing.assert_array_equal(pg.random.dropout(x, 1.0), np.zeros_like(x))
    img = np.random.default_rng(0).normal(size=(2, 3, 4, 2)).astype(np.float32)
    np.testing.assert_array_equal(layers.SpatialDropout2D(1.0)(img, training=True), np.zeros_like(img))
    with pytest.raises(ValueError):
        layers.Dropout(1.5)
    # in a training graph: the layer after it sees zeros, and the step stays finite
    m = pg.Sequential([pg.Input((4,)), layers.Dropout(1.0), layers.Dense(1)])
    m.compile("sgd", "mse")
    h = m.fit(x, np.ones((3, 1)), epochs=2, verbose=0).history["loss"]
    assert np.all(np.isfinite(h))
    assert h[0] == pytest.approx(1.0, rel=1e-5)   # the output is the bias, 0 at first: (1 - 0)^2
    # UpSampling2D's bicubic and Lanczos kernels: ops.image.resize's, on arrays and in a graph
    for interp in ("bicubic", "lanczos3", "lanczos5"):
        up = layers.UpSampling2D((2, 3), interpolation=interp)
        want = np.asarray(pg.ops.image.resize(img, (6, 12), interpolation=interp))
        np.testing.assert_allclose(up(img), want, rtol=1e-5, atol=1e-6)
        first = layers.UpSampling2D((2, 3), interpolation=interp, data_format="channels_first")
        np.testing.assert_allclose(first(img.transpose(0, 3, 1, 2)), want.transpose(0, 3, 1, 2), rtol=1e-5,
                                   atol=1e-6)
        assert layers.UpSampling2D.from_config(up.get_config()).interpolation == interp
    inp = pg.Input((3, 4, 2))
    m = pg.Model(inp, layers.Conv2D(1, 1)(layers.UpSampling2D(2, interpolation="bicubic")(inp)))
    m.compile("adam", "mse")
    h = m.fit(img, np.zeros((2, 6, 8, 1), np.float32), epochs=5, verbose=0).history["loss"]
    assert h[-1] < h[0]
    with pytest.raises(ValueError, match="interpolation"):
        layers.UpSampling2D(interpolation="area")       # Keras's UpSampling2D refuses it too


def test_circle_mean_with_sample_weight_leaves_samples_without_a_loss_out():
    # Keras's CircleTest.test_mean_with_sample_weight_reduction (values: real Keras 3.15)
    yt = np.array([1, 1, 2, 2, 3])
    yp = np.array([[0.70014004, -0.42008403, 0.14002801, 0.56011203],
                   [0.17609018, 0.70436073, -0.52827054, 0.44022545],
                   [-0.34050261, 0.25537696, -0.68100522, 0.59587957],
                   [0.32163376, -0.75047877, 0.53605627, -0.21442251],
                   [0.51261459, -0.34174306, 0.17087153, 0.76892189]])
    c = pg.losses.Circle(gamma=80.0, margin=0.4, reduction="mean_with_sample_weight")
    assert float(c(yt, yp)) == pytest.approx(188.38832, rel=1e-5)
    assert float(c(yt, yp, sample_weight=np.array([2.0, 2.0, 1.0, 1.0, 0.5]))) == pytest.approx(163.27946, rel=1e-5)
    assert float(pg.losses.Circle(reduction="sum")(yt, yp)) == pytest.approx(753.5533, rel=1e-5)


def test_softmax_layer_takes_a_mask_and_several_axes_as_keras():
    # expected values: real Keras 3.15 (torch backend)
    x = np.array([[1., 2, 5, 1], [3, 1, 2, 4], [0.5, -1, 2, 0]], np.float32)
    sm = layers.Softmax()
    np.testing.assert_allclose(sm(x, mask=np.array([[1, 1, 0, 0], [1, 1, 1, 1], [0, 0, 0, 0]], bool)),
                               [[0.268941, 0.731059, 0, 0], [0.236883, 0.032059, 0.087144, 0.643914], [0, 0, 0, 0]],
                               atol=1e-6)
    want = [[0.017668, 0.0, 0.964663, 0.017668], [0.244728, 0.0, 0.090031, 0.665241], [0.164252, 0.0, 0.736125, 0.099624]]
    np.testing.assert_allclose(sm(x, mask=np.array([[1, 0, 1, 1]], bool)), want, atol=1e-6)
    np.testing.assert_allclose(sm(x, mask=np.array([0.9, 0.2, 0.7, 1.0], np.float32)), want, atol=1e-6)  # > 0.5
    np.testing.assert_allclose(layers.Softmax(axis=(0, 1))(x),
                               [[0.0106, 0.028814, 0.578754, 0.0106], [0.078326, 0.0106, 0.028814, 0.212912],
                                [0.006429, 0.001435, 0.028814, 0.0039]], atol=1e-6)
    np.testing.assert_allclose(layers.Softmax(axis=0)(x, mask=np.array([[1], [0], [1]], bool)),
                               [[0.622459, 0.952574, 0.952574, 0.731059], [0, 0, 0, 0],
                                [0.377541, 0.047426, 0.047426, 0.268941]], atol=1e-6)
    y = np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 10
    row = [[0.063724, 0.070426, 0.077833, 0], [0.095065, 0.105063, 0.116113, 0], [0.14182, 0.156736, 0.17322, 0]]
    np.testing.assert_allclose(layers.Softmax(axis=(1, 2))(y, mask=np.array([[1, 1, 1, 0]], bool)), [row, row],
                               atol=1e-6)
    for bad in (np.ones((2, 3, 4), bool), np.ones((3, 3), bool)):
        with pytest.raises(ValueError, match="broadcastable"):
            sm(x, mask=bad)
    with pytest.raises(ValueError, match="axis"):
        layers.Softmax(axis="last")
    assert layers.Softmax.from_config(layers.Softmax(axis=(1, 2)).get_config()).axis == (1, 2)
    # in a model: a mask input, and training through the masked softmax
    xi, mi = pg.Input((4,)), pg.Input((4,))
    m = pg.Model([xi, mi], layers.Softmax()(layers.Dense(4)(xi), mask=mi))
    m.compile("adam", "mse")
    feed = [np.random.default_rng(0).normal(size=(8, 4)).astype(np.float32),
            np.tile(np.array([[1, 1, 0, 1]], np.float32), (8, 1))]
    out = m.predict(feed, verbose=0)
    assert np.all(out[:, 2] == 0) and np.allclose(out.sum(-1), 1, atol=1e-6)
    h = m.fit(feed, np.tile([[0.5, 0.5, 0.0, 0.0]], (8, 1)), epochs=20, verbose=0).history["loss"]
    assert h[-1] < h[0]


def test_merge_masks_as_keras_on_arrays_and_their_checks():
    x1 = np.array([[[0., 0], [1, 1], [0, 0], [2, 2]]], np.float32)
    x2 = np.ones((1, 4, 2), np.float32)
    y = layers.Concatenate(axis=1)([layers.Masking()(x1), x2])      # was: ops.constant outside a graph
    assert y.shape == (1, 8, 2)
    np.testing.assert_array_equal(y._keras_mask, [[0, 1, 0, 1, 1, 1, 1, 1]])
    # Keras 3.15: no mask when an input has none; Concatenate along the features counts such an
    # input as all real
    assert getattr(layers.Add()([layers.Masking()(x1), x2]), "_keras_mask", None) is None
    np.testing.assert_array_equal(layers.Concatenate(axis=2)([layers.Masking()(x1), x2])._keras_mask, [[1, 1, 1, 1]])
    m = np.array([[1, 0, 1, 0]], bool)
    for cls in (layers.Add, layers.Subtract, layers.Multiply, layers.Average, layers.Maximum, layers.Minimum):
        np.testing.assert_array_equal(cls().compute_mask([x1, x2], [m, ~m]), [[1, 1, 1, 1]])
        assert cls().compute_mask([x1, x2], [m, None]) is None
        assert cls().compute_mask([x1, x2], [None, None]) is None
        with pytest.raises(ValueError, match="should be a list"):
            cls().compute_mask([x1, x2], m)
        with pytest.raises(ValueError, match="same length"):
            cls().compute_mask([x1, x2], [m])
        with pytest.raises(ValueError, match="inputs should be a list"):
            cls().compute_mask(x1, [m, m])
    assert layers.Dot(axes=-1).compute_mask([x1, x2], [m, m]) is None
    with pytest.raises(ValueError, match="should be a list"):
        layers.Concatenate().compute_mask([x1, x2], m)


def test_relu_layers_refuse_none_or_negative_settings_as_keras():
    for make in (lambda: layers.ReLU(threshold=-10), lambda: layers.ReLU(threshold=None),
                 lambda: layers.ReLU(negative_slope=None), lambda: layers.ReLU(negative_slope=-1),
                 lambda: layers.LeakyReLU(negative_slope=None)):
        with pytest.raises(ValueError, match="cannot be None or a negative value"):
            make()


def test_masked_sequence_losses_and_a_cross_entropy_over_another_axis_as_keras():
    # values: real Keras 3.15 (torch backend) on the same arrays
    rng = np.random.default_rng(0)
    x = rng.random((2, 3, 4)).astype(np.float32)
    x[0, 2] = 0
    x[1, 1:] = 0
    y = rng.random((2, 3, 4)).astype(np.float32)
    w = np.array([[1., 2, 3], [4, 5, 6]])
    xm = layers.Masking()(x)
    assert float(pg.losses.MeanSquaredError()(y, xm)) == pytest.approx(0.2509245, rel=1e-5)
    assert float(pg.losses.MeanSquaredError()(y, xm, sample_weight=w)) == pytest.approx(0.5046364, rel=1e-5)
    assert float(pg.losses.MeanSquaredError()(y, x, sample_weight=w)) == pytest.approx(0.8996825, rel=1e-5)
    assert float(pg.losses.BinaryCrossentropy()(np.round(y), xm)) == pytest.approx(1.3348368, rel=1e-5)
    assert float(pg.losses.MeanAbsoluteError()(y, xm, sample_weight=w[..., None])) == pytest.approx(0.8447357,
                                                                                                     rel=1e-5)
    # BinaryCrossentropy(axis=1): the mean over that axis, as Keras's
    p = rng.random((2, 3, 4)).astype(np.float32)
    t = (rng.random((2, 3, 4)) > .5).astype(np.float32)
    want = -(t * np.log(p) + (1 - t) * np.log(1 - p)).mean(1)
    out = np.asarray(pg.losses.BinaryCrossentropy(axis=1, reduction="none")(t, p))
    np.testing.assert_allclose(out, want, rtol=1e-5)
    assert float(pg.losses.BinaryCrossentropy(axis=1, reduction="sum")(t, p)) == pytest.approx(want.sum(), rel=1e-5)
    assert float(pg.losses.BinaryCrossentropy(axis=1)(t, p)) == pytest.approx(want.mean(), rel=1e-5)


def test_mha_joint_4d_scores_take_the_value_axes():
    rng = np.random.default_rng(0)
    q = rng.random((1, 2, 3, 4)).astype(np.float32)
    mha = layers.MultiHeadAttention(2, 2)
    for v in (rng.random((1, 3, 2, 4)).astype(np.float32), rng.random((1, 2, 5, 4)).astype(np.float32)):
        out, s = mha(q, v, return_attention_scores=True)
        assert s.shape == (1, 2, 2, 3) + v.shape[1:3]          # Keras's (batch, heads, a, n, a', m)
        # the same numbers as attention over the flattened steps (a twin with the same weights)
        flat = layers.MultiHeadAttention(2, 2)
        flat(q.reshape(1, 6, 4), v.reshape(1, -1, 4))
        flat.set_weights(mha.get_weights())
        out3, s3 = flat(q.reshape(1, 6, 4), v.reshape(1, -1, 4), return_attention_scores=True)
        np.testing.assert_allclose(np.asarray(s).reshape(s3.shape), s3, rtol=1e-6)
        np.testing.assert_allclose(np.asarray(out).reshape(out3.shape), out3, rtol=1e-6)


def test_schedule_free_weight_decay_takes_the_full_rate_during_warmup():
    # Keras's _apply_weight_decay multiplies by the learning rate without the warmup factor
    opt = pg.optimizers.ScheduleFreeAdamW(learning_rate=0.1, weight_decay=0.5, warmup_steps=4)
    v = pg.Variable(np.array([1.0, -2.0, 3.0], np.float32))
    y = np.array([1.0, -2.0, 3.0])
    z, s = y.copy(), np.zeros(3)
    for i in range(3):
        g = np.array([0.5, 0.1 * (i + 1), -0.3])
        t, lrw = i + 1, 0.1 * min((i + 1) / 4, 1)
        opt.apply_gradients([(g.astype(np.float32), v)])
        y = y - y * 0.5 * 0.1
        s = .999 * s + .001 * g * g
        z0, z = z, z - lrw * g / (np.sqrt(s / (1 - .999 ** t)) + 1e-8)
        x = (1 - 1 / t) * (y - .1 * z0) / .9 + z / t
        y = .1 * z + .9 * x
    np.testing.assert_allclose(np.asarray(v), y, rtol=1e-5)


def test_a_rate_set_on_a_multi_optimizer_reaches_its_optimizers_even_those_to_come():
    sgd = pg.optimizers.SGD(learning_rate=1.0)
    m = pg.Sequential([pg.Input((2,)), layers.Dense(1, use_bias=False, kernel_initializer="zeros")])
    m.compile(optimizer=pg.optimizers.MultiOptimizer(lambda v: sgd), loss="mse")
    m.fit(np.ones((1, 2), np.float32), np.ones((1, 1), np.float32), epochs=1, batch_size=1, verbose=0,
          callbacks=[pg.callbacks.LearningRateScheduler(lambda epoch: 0.0)])
    np.testing.assert_array_equal(m.get_weights()["dense.weight"], [[0.0, 0.0]])   # trained at rate 0
    assert sgd.learning_rate == 0.0
    mo = pg.optimizers.MultiOptimizer(pg.optimizers.OptimizerMap(pg.optimizers.SGD(0.1)))
    mo.learning_rate = 0.5
    assert mo.learning_rate == pytest.approx(0.5) and all(o.learning_rate == pytest.approx(0.5) for o in mo.optimizers)


def test_dropout_noise_shape_of_a_string_is_refused_as_such():
    with pytest.raises(ValueError, match="tuple of ints or None, got 'Invalid'"):
        layers.Dropout(0.5, noise_shape="Invalid")


@pytest.mark.parametrize("cls,shape", [(layers.Conv1D, (2, 7, 3)), (layers.Conv2D, (2, 6, 6, 3)),
                                       (layers.Conv3D, (2, 4, 4, 4, 3))])
def test_convolutions_take_lora_as_keras(cls, shape, tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=shape).astype(np.float32)
    conv = cls(4, 2, padding="same")
    conv.build((None,) + shape[1:])
    conv.enable_lora(2, lora_alpha=4)
    assert [w.name for w in conv.weights][2:] == ["lora_kernel_a", "lora_kernel_b"]
    assert len(conv.trainable_weights) == 3                      # the kernel frozen
    ws = conv.get_weights()
    ws[2] = rng.normal(size=ws[2].shape).astype(np.float32)      # (*kernel, in, rank)
    ws[3] = rng.normal(size=ws[3].shape).astype(np.float32)      # (rank, filters)
    conv.set_weights(ws)
    merged = ws[0] + 2.0 * (ws[2].reshape(-1, 2) @ ws[3]).reshape(ws[0].shape)
    np.testing.assert_allclose(conv.merged_kernel(), merged, rtol=1e-5, atol=1e-5)
    plain = cls(4, 2, padding="same")
    plain.build((None,) + shape[1:])
    plain.set_weights([merged, ws[1]])
    np.testing.assert_allclose(conv(x), plain(x), rtol=1e-4, atol=1e-4)
    # lora_rank= builds it; fit trains the factors only; the file resumes exactly
    m = pg.Sequential([pg.Input(shape[1:]), cls(4, 2, lora_rank=2), layers.GlobalAveragePooling1D()
                       if len(shape) == 3 else layers.Flatten()])
    m.compile("adam", "mse")
    k0 = m.layers[0].get_weights()[0].copy()
    y = np.zeros((2,) + m.output_shape[1:], np.float32)
    m.fit(x, y, epochs=2, verbose=0)
    np.testing.assert_array_equal(m.layers[0].get_weights()[0], k0)
    assert np.abs(m.layers[0].get_weights()[3]).max() > 0       # B moved from zeros
    assert m.layers[0].get_config()["lora_rank"] == 2
    m.save(tmp_path / "c.gguf")
    again = pg.models.load_model(tmp_path / "c.gguf")
    np.testing.assert_allclose(again.predict(x, verbose=0), m.predict(x, verbose=0), rtol=1e-6, atol=1e-6)


def test_conv2d_lora_output_matches_keras():
    # values: real Keras 3.15 (torch backend), the same kernel, bias and factors
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 6, 6, 3)).astype(np.float32)
    conv = layers.Conv2D(4, 3, padding="same")
    conv.build((None, 6, 6, 3))
    k, b = rng.normal(size=(3, 3, 3, 4)).astype(np.float32), rng.normal(size=(4,)).astype(np.float32)
    conv.set_weights([k, b])
    conv.enable_lora(2, lora_alpha=4)
    conv.set_weights([k, b, rng.normal(size=(3, 3, 3, 2)).astype(np.float32),
                      rng.normal(size=(2, 4)).astype(np.float32)])
    np.testing.assert_allclose(np.asarray(conv(x))[0, 0, :2],
                               [[-1.8165, -1.2717, -3.2118, -5.195], [2.4603, -5.4868, -6.4412, 0.1963]], atol=1e-3)


def test_concatenate_compute_mask_checks_its_lists():
    x = np.ones((1, 4, 2), np.float32)
    m = np.ones((1, 4), bool)
    with pytest.raises(ValueError, match="inputs should be a list"):
        layers.Concatenate().compute_mask(x, [m, m])
    with pytest.raises(ValueError, match="inputs should be a list"):
        layers.Concatenate().compute_mask([x, x], [m])


def test_focal_losses_over_another_axis_and_a_wrapped_function_with_weight_rows_as_keras():
    # values: real Keras 3.15 (torch backend) on the same arrays
    rng = np.random.default_rng(0)
    p = rng.random((2, 3, 4)).astype(np.float32)
    p /= p.sum(1, keepdims=True)
    t = np.eye(3, dtype=np.float32)[rng.integers(0, 3, (2, 4))].transpose(0, 2, 1)
    cf = pg.losses.CategoricalFocalCrossentropy(axis=1, label_smoothing=0.1)
    assert float(cf(t, p)) == pytest.approx(0.10002, abs=2e-5)
    np.testing.assert_allclose(pg.losses.CategoricalFocalCrossentropy(axis=1, label_smoothing=0.1,
                                                                      reduction="none")(t, p),
                               [[0.12847, 0.0744, 0.04946, 0.05761], [0.06798, 0.2874, 0.08795, 0.04692]], atol=2e-5)
    bf = pg.losses.BinaryFocalCrossentropy(axis=1, gamma=1.5, reduction="none")
    np.testing.assert_allclose(bf(t, p), [[0.27416, 0.17945, 0.105, 0.00006], [0.16194, 0.76755, 0.20344, 0.10266]],
                               atol=2e-5)
    assert pg.losses.CategoricalFocalCrossentropy.from_config(cf.get_config()).axis == 1
    # Keras's MetricWrapperTest.test_weighted_broadcast: an element-wise function, a weight row
    m = pg.metrics.MeanMetricWrapper(fn=lambda a, b: (a - b) ** 2, name="mse")
    m.update_state(np.array([[0, 1, 0, 1, 0], [0, 0, 1, 1, 1], [1, 1, 1, 1, 0], [0, 0, 0, 0, 1]], np.float32),
                   np.array([[0, 0, 1, 1, 0], [1, 1, 1, 1, 1], [0, 1, 0, 1, 0], [1, 1, 1, 1, 1]], np.float32),
                   sample_weight=np.array([[1.0, 0.0, 0.5, 0.0, 1.0]]))
    assert m.result() == pytest.approx(0.45)


def test_losses_over_an_axis_and_their_reduction_hold_in_fit_and_evaluate():
    # values: real Keras 3.15 (torch backend), evaluate on a model that passes its input through
    rng = np.random.default_rng(0)
    yt = (rng.random((4, 3, 5)) > 0.5).astype(np.float32)
    yp = rng.uniform(0.05, 0.95, (4, 3, 5)).astype(np.float32)
    ytc = np.eye(3, dtype=np.float32)[rng.integers(0, 3, (4, 5))].transpose(0, 2, 1)
    i = pg.Input((3, 5))
    m = pg.Model(i, layers.Activation("linear")(i))
    L = pg.losses
    for loss, y, want in [(L.BinaryFocalCrossentropy(axis=1), yt, 0.4416),
                          (L.BinaryFocalCrossentropy(axis=1, reduction="sum"), yt, 8.8328),
                          (L.CategoricalFocalCrossentropy(axis=1, label_smoothing=0.1), ytc, 0.1775),
                          (L.CategoricalCrossentropy(axis=1), ytc, 1.2503),      # was 3.2: moved twice
                          (L.CategoricalCrossentropy(axis=1, from_logits=True), ytc, 1.1245),
                          (L.BinaryCrossentropy(axis=1), yt, 0.8115), (L.MeanSquaredError(), yt, 0.2839)]:
        m.compile("sgd", loss)
        assert float(m.evaluate(yp, y, verbose=0)) == pytest.approx(want, abs=2e-4)
        assert float(loss(y, yp)) == pytest.approx(want, abs=2e-4)
    # reduction="sum" in compile: the batch's sum (was the mean)
    x = rng.normal(size=(6, 4)).astype(np.float32)
    mse_sum = L.MeanSquaredError(reduction="sum")
    m = pg.Sequential([pg.Input((4,)), layers.Dense(2)])
    m.compile("sgd", mse_sum)
    y = rng.normal(size=(6, 2)).astype(np.float32)
    got = float(m.evaluate(x, y, batch_size=6, verbose=0))
    assert got == pytest.approx(float(mse_sum(y, m.predict(x, verbose=0))), rel=1e-5)
    assert got == pytest.approx(((m.predict(x, verbose=0) - y) ** 2).mean(-1).sum(), rel=1e-5)
    # CategoricalCrossentropy's smoothing over axis=: the labels' last axis, as Keras's
    p = ytc * 0.8 + 0.1
    k = L.CategoricalCrossentropy(axis=1, label_smoothing=0.3)
    t = ytc * 0.7 + 0.3 / ytc.shape[-1]
    want = -(t * np.log(p / p.sum(1, keepdims=True))).sum(1).mean()
    assert float(k(ytc, p)) == pytest.approx(want, rel=1e-5)


def test_concatenate_joins_masks_along_an_inner_axis_and_sequential_build_takes_a_batch_size():
    a, b = pg.Input((3, 2), dtype="int32"), pg.Input((3, 4), dtype="int32")
    ea = layers.Embedding(10, 5, mask_zero=True)(a)
    eb = layers.Embedding(10, 5, mask_zero=True)(b)
    m = pg.Model([a, b], layers.Reshape((3, 30))(layers.Concatenate(axis=2)([ea, eb])))
    out = m.predict([np.array([[[1, 0], [2, 3], [0, 0]]]), np.array([[[1, 0, 0, 0], [0, 0, 0, 0], [4, 0, 0, 0]]])],
                    verbose=0)
    assert out.shape == (1, 3, 30)
    s = pg.Sequential([layers.Dense(2)])
    s.build((4, 3))                                     # Keras's: four rows of three features
    assert s.input_shape[1:] == (3,) and s.predict(np.ones((4, 3)), verbose=0).shape == (4, 2)
