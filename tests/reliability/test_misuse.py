"""Misuse of the public API never crashes: each case runs in a subprocess and
must end in a clear Python exception or a correct result."""

import json
import subprocess
import sys
import textwrap

import pytest

SETUP = textwrap.dedent("""
    import gc, json, sys, numpy as np
    import pyggml as pg
    L = pg.layers
    def model(n_in=3, n_out=2, loss="mse"):
        return pg.Sequential([L.Dense(4, activation="relu"), L.Dense(n_out)], input_shape=n_in).compile(loss=loss)
    X = np.random.default_rng(0).random((8, 3)).astype(np.float32)
    Y = np.zeros((8, 2), dtype=np.float32)
""")

# name -> code; the code either raises or finishes (then it must print nothing wrong)
CASES = {
    # inputs of the wrong kind
    "predict_wrong_width": "model().predict(np.zeros((4, 5)))",
    "predict_wrong_rank": "model().predict(np.zeros((4, 3, 2)))",     # ((4, 3, 1) fits: Keras squeezes it)
    "predict_1d": "model().predict(np.zeros(3))",
    "predict_strings": "model().predict(np.array([['a', 'b', 'c']]))",
    "predict_objects": "model().predict(np.array([[object(), 1, 2]], dtype=object))",
    "predict_complex": "model().predict(np.zeros((2, 3), dtype=complex))",
    "predict_none": "model().predict(None)",
    "predict_empty": "assert model().predict(np.zeros((0, 3))).shape == (0, 2)",
    "predict_noncontiguous": "m = model(); a = np.asfortranarray(np.random.rand(5, 3)); "
                             "np.testing.assert_array_equal(m.predict(a), m.predict(np.ascontiguousarray(a)))",
    "predict_strided": "m = model(); a = np.random.rand(10, 6)[::2, ::2]; "
                       "np.testing.assert_array_equal(m.predict(a), m.predict(a.copy()))",
    "predict_nan": "assert model().predict(np.full((2, 3), np.nan)).shape == (2, 2)",
    "predict_inf": "model().predict(np.full((2, 3), np.inf))",
    "predict_batch_zero": "model().predict(X, batch_size=0)",
    "predict_batch_negative": "model().predict(X, batch_size=-3)",
    "predict_batch_float": "model().predict(X, batch_size=2.5)",
    "fit_y_rows": "model().fit(X, Y[:5], verbose=0)",
    "fit_y_width": "model().fit(X, np.zeros((8, 7)), verbose=0)",
    "fit_nan_targets": "h = model().fit(X, np.full((8, 2), np.nan), verbose=0); assert not np.isfinite(h.history['loss'][0])",
    "fit_epochs_negative": "model().fit(X, Y, epochs=-1, verbose=0)",
    "fit_validation_split_1": "model().fit(X, Y, validation_split=1.0, verbose=0)",
    "fit_sample_weight_shape": "model().fit(X, Y, sample_weight=np.ones(3), verbose=0)",
    "fit_sample_weight_negative": "model().fit(X, Y, sample_weight=-np.ones(8), verbose=0)",
    "fit_class_weight_list": "model(loss='categorical_crossentropy').fit(X, np.eye(2)[[0,1]*4], class_weight=[1, 2], verbose=0)",
    "fit_callback_not_callback": "model().fit(X, Y, callbacks=[print], verbose=0)",
    "sparse_labels_out_of_range": "model(loss='sparse_categorical_crossentropy').fit(X, np.array([0, 5] * 4), verbose=0)",
    # (fractional labels are cast to int, as Keras casts them: tests/test_keras_io_port_gaps_4.py)
    "sparse_labels_nan": "model(loss='sparse_categorical_crossentropy').fit(X, np.array([np.nan] * 8), verbose=0)",
    # sizes
    "dense_zero": "L.Dense(0)",
    "dense_negative": "L.Dense(-4)",
    "dense_absurd": "pg.Sequential([L.Dense(2**40)], input_shape=3).compile(loss='mse')",
    "dense_huge_params": "pg.Sequential([L.Dense(2**30)], input_shape=2**12).compile(loss='mse')",
    "dense_float_units": "L.Dense(2.5)",
    "conv_kernel_too_big": "pg.Sequential([L.Conv2D(2, 9)], input_shape=(4, 4, 1)).compile(loss='mse')",
    "conv_bad_padding": "L.Conv2D(2, 3, padding='full')",
    "pool_too_big": "pg.Sequential([L.MaxPooling2D((5, 5))], input_shape=(4, 4, 1)).compile(loss='mse')",
    "input_shape_zero": "pg.Sequential([L.Dense(2)], input_shape=0)",
    "input_shape_negative": "pg.Sequential([L.Dense(2)], input_shape=(-1,))",
    "input_shape_string": "pg.Sequential([L.Dense(2)], input_shape='3')",
    "reshape_impossible": "pg.Sequential([L.Reshape((5,))], input_shape=4).compile(loss='mse')",
    "dropout_rate_above_one": "L.Dropout(1.5)",          # (1.0 drops everything, as Keras's)
    "embedding_index_out_of_range": "m = pg.Sequential([L.Embedding(5, 2), L.Flatten(), L.Dense(1)], input_shape=3).compile(loss='mse'); m.predict(np.array([[0, 1, 7]]))",
    "embedding_negative_index": "m = pg.Sequential([L.Embedding(5, 2), L.Flatten(), L.Dense(1)], input_shape=3).compile(loss='mse'); m.predict(np.array([[0, -1, 2]]))",
    "embedding_nan_index": "m = pg.Sequential([L.Embedding(5, 2), L.Flatten(), L.Dense(1)], input_shape=3).compile(loss='mse'); m.predict(np.array([[0, np.nan, 2]]))",
    # names
    "unknown_loss": "model(loss='hingee')",
    "unknown_optimizer": "pg.Sequential([L.Dense(2)], input_shape=3).compile(optimizer='rmsprob', loss='mse')",
    "unknown_metric": "pg.Sequential([L.Dense(2)], input_shape=3).compile(loss='mse', metrics=['aucc'])",
    "unknown_activation": "L.Dense(2, activation='swoosh')",
    "unknown_backend": "pg.Sequential([L.Dense(2)], input_shape=3).compile(loss='mse', backend='tpu0')",
    "missing_gpu_backend": "pg.Sequential([L.Dense(2)], input_shape=3).compile(loss='mse', backend='cuda0')",
    "unknown_layer_name": "model().get_layer('nope')",
    "set_weights_unknown": "model().set_weights({'nope': np.zeros(2)})",
    "set_weights_shape": "model().set_weights({'dense.weight': np.zeros((2, 2))})",
    "set_weights_nan": "model().set_weights({'dense.bias': np.full(4, np.nan)})",
    "lr_negative": "m = model(); m.optimizer.learning_rate = -1",
    "lr_nan": "pg.optimizers.Adam(learning_rate=float('nan'))",
    # order
    "predict_wrong_shape_before_compile": "pg.Sequential([L.Dense(2)], input_shape=3).predict(np.zeros((2, 4)))",
    "fit_before_compile": "pg.Sequential([L.Dense(2)], input_shape=3).fit(X, Y)",
    # (compile waits for the first data, as Keras's deferred build: data without features is refused)
    "compile_without_input_shape": "pg.Sequential([L.Dense(2)]).compile(loss='mse').fit(np.zeros(4), np.zeros(4))",
    "compile_empty": "pg.Sequential().compile(loss='mse')",
    "add_after_compile": "model().add(L.Dense(2))",
    "layer_in_two_models_other_shape": "d = L.Dense(2); pg.Sequential([d], input_shape=3).compile(loss='mse'); pg.Sequential([d], input_shape=4).compile(loss='mse')",
    "trainer_uncompiled": "pg.Trainer(pg.Sequential([L.Dense(2)], input_shape=3), 4)",
    "trainer_not_model": "pg.Trainer('model', 4)",
    "trainer_batch_zero": "pg.Trainer(model(), 0)",
    "trainer_logical_not_multiple": "pg.Trainer(model(), 4, nbatch_logical=6)",
    "trainer_mask_with_ce": "pg.Trainer(model(loss='categorical_crossentropy'), 4, loss_mask=1)",
    "trainer_weights_nan": "pg.Trainer(model(), 8, loss_mask=1).step(X, Y, np.full(8, np.nan))",
    "trainer_lr_negative": "pg.Trainer(model(), 8).set_lr(-0.1)",
    "update_target_tau_nan": "t = pg.Trainer(model(), 8); t.update_target(t.snapshot(), tau=float('nan'))",
    # after free
    "predict_after_free": "m = model(); m.free(); m.predict(X)",
    "fit_after_free": "m = model(); m.free(); m.fit(X, Y)",
    "save_after_free": "m = model(); m.free(); m.save('/tmp/x.gguf')",
    "double_free": "m = model(); m.free(); m.free(); print('ok')",
    "model_freed_under_trainer": "m = model(); t = pg.Trainer(m, 8); m.free(); t.step(X, Y)",
    "model_freed_under_trainer_predict": "m = model(); t = pg.Trainer(m, 8); m.free(); t.predict(X)",
    "trainer_after_free": "t = pg.Trainer(model(), 8); t.free(); t.eval(X, Y)",
    "snapshot_after_free": "t = pg.Trainer(model(), 8); s = t.snapshot(); s.free(); s.get_weights()",
    "snapshot_after_trainer_and_model_gc": "m = model(); t = pg.Trainer(m, 8); s = t.snapshot(); del t, m; gc.collect(); assert s.predict(X).shape == (8, 2)",
    "trainer_gc_before_snapshot": "m = model(); t = pg.Trainer(m, 8); s = t.snapshot(); del t; gc.collect(); s.free(); m.free()",
    "gc_every_order": "for order in range(6):\n"
                      "    m = model(); t = pg.Trainer(m, 8); s = t.snapshot(); h = t.model()\n"
                      "    objs = [m, t, s, h]; del m, t, s, h\n"
                      "    import itertools; perm = list(itertools.permutations(range(4)))[order * 4]\n"
                      "    for i in perm: objs[i] = None; gc.collect()",
    "free_every_order": "import itertools\n"
                        "for perm in itertools.permutations(range(3)):\n"
                        "    m = model(); t = pg.Trainer(m, 8); s = t.snapshot()\n"
                        "    objs = [m, t, s]\n"
                        "    for i in perm: objs[i].free()\n"
                        "    for o in objs: o.free()",
    "load_missing_file": "pg.load_model('/nonexistent/model.gguf')",
    "load_a_directory": "pg.load_model('/tmp')",
    "load_not_gguf": "open('/tmp/_pg_not.gguf', 'w').write('hello'); pg.load_model('/tmp/_pg_not.gguf')",
    "save_to_directory": "model().save('/tmp')",
    "save_bad_path_type": "model().save(12)",
    # core
    "core_tensor_after_context_free": "c = pg.core.Context(); t = c.new_tensor((2, 2)); c.free(); t.shape",
    "core_bad_shape": "pg.core.Context().new_tensor((0, 2))",
    "core_bad_dtype": "pg.core.Context().new_tensor((2,), dtype='q4_0')",
    "core_mul_mat_mismatch": "c = pg.core.Context(); pg.ops.mul_mat(c.new_tensor((2, 3)), c.new_tensor((2, 4)))",
    "core_numpy_unallocated": "c = pg.core.Context(); c.new_tensor((2,)).numpy()",
}


def run_cases(cases):
    script = SETUP + textwrap.dedent("""
        import traceback
        cases = json.loads(sys.argv[1])
        for name, code in cases.items():
            print("CASE", name, flush=True)
            try:
                exec(code, dict(globals()))
                print("RESULT", name, "ok", flush=True)
            except (pg.GGMLError, ValueError, TypeError, KeyError, RuntimeError, OSError, MemoryError, AssertionError) as e:
                kind = "assert" if isinstance(e, AssertionError) else "raised"
                print("RESULT", name, kind, type(e).__name__, str(e).replace(chr(10), ' ')[:200], flush=True)
    """)
    r = subprocess.run([sys.executable, "-c", script, json.dumps(cases)], capture_output=True, text=True,
                       timeout=600)
    return r


def test_misuse_never_crashes():
    r = run_cases(CASES)
    last = [l for l in r.stdout.splitlines() if l.startswith("CASE")]
    assert r.returncode == 0, f"crashed in {last[-1] if last else '?'} (rc {r.returncode}):\n{r.stderr[-3000:]}"
    results = {l.split()[1]: l.split(None, 3)[2:] for l in r.stdout.splitlines() if l.startswith("RESULT")}
    assert set(results) == set(CASES)
    failures = {k: v for k, v in results.items() if v[0] == "assert"}
    assert not failures, failures
    # cases that must be refused (not silently accepted)
    must_raise = [k for k in CASES if k not in {
        "predict_empty", "predict_noncontiguous", "predict_strided", "predict_nan", "predict_inf",
        "fit_nan_targets", "double_free", "snapshot_after_trainer_and_model_gc", "trainer_gc_before_snapshot",
        "gc_every_order", "free_every_order"}]
    accepted = [k for k in must_raise if results[k][0] != "raised"]
    assert not accepted, f"accepted without an error: {accepted}"
    # the messages say what was expected
    for k in ("predict_after_free", "fit_after_free", "trainer_after_free", "model_freed_under_trainer"):
        assert "freed" in results[k][1] + " ".join(results[k][1:]), results[k]
    assert "released" in " ".join(results["snapshot_after_free"])
    assert "-Dcuda=enabled" in " ".join(results["missing_gpu_backend"])
