"""Races a hostile probe found: a second thread changing a model (quantizing it, compiling it
again) while the first trains it.  Each runs in its own interpreter: the bug was a SIGSEGV."""

from _subproc import run_py


def test_quantize_while_another_thread_trains_is_serialized():
    """model.quantize while train_on_batch runs in another thread read the weights as the step's
    buffers went (SIGSEGV in 3 runs of 3): quantize now waits for the model's lock."""
    r = run_py("""
        from pyggml import layers as L
        X = np.random.rand(64, 16).astype('f4'); Y = np.random.rand(64, 4).astype('f4')
        m = pg.Sequential([L.Dense(64, activation='relu'), L.Dense(4)], input_shape=16).compile(loss='mse')
        errs = []
        def loop():
            try:
                for i in range(150):
                    m.train_on_batch(X[:8], Y[:8])
            except Exception as e:
                errs.append(f"{type(e).__name__}: {e}")
        t = threading.Thread(target=loop); t.start()
        time.sleep(0.05)
        m.quantize('int8')
        t.join()
        assert not errs, errs
        assert all(l.quantization_mode == 'int8' for l in m.layers)
        out = m.predict(X, verbose=0)
        assert out.shape == (64, 4) and np.all(np.isfinite(out))
        print("ok")
    """)
    assert "ok" in r.stdout


def test_a_tape_loop_while_another_thread_compiles_raises_or_runs():
    """A GradientTape loop reading the model's weights while another thread compiled the model
    again read a freed buffer (SIGSEGV in 2 runs of 3): the reads and the store's release now
    take one lock, so each step either runs or raises a clear error."""
    for _ in range(2):
        r = run_py("""
            from pyggml import layers as L
            X = np.random.rand(64, 16).astype('f4'); Y = np.random.rand(64, 4).astype('f4')
            m = pg.Sequential([L.Dense(64, activation='relu'), L.Dense(4)], input_shape=16).compile(loss='mse')
            opt = pg.optimizers.Adam()
            errs = []
            def loop():
                for i in range(120):
                    try:
                        with pg.GradientTape() as tape:
                            loss = ops.mean((m(X[:8]) - Y[:8]) ** 2)
                        g = tape.gradient(loss, m.trainable_weights)
                        opt.apply_gradients(zip(g, m.trainable_weights))
                    except (ValueError, FreedError, RuntimeError) as e:
                        errs.append(type(e).__name__)
            t = threading.Thread(target=loop); t.start()
            for i in range(8):
                time.sleep(0.03); m.compile(loss='mse', optimizer='sgd')
            t.join()
            out = m.predict(X, verbose=0)
            assert np.all(np.isfinite(out))
            print("ok", len(errs))
        """)
        assert "ok" in r.stdout
