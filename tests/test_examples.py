"""The demo and every example run end to end, each in a fresh interpreter:
exit code 0 and the lines that show it did its job.  (The timeouts only guard
against a hang; nothing here measures speed.)"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
HANG_GUARD_S = 900


def run(args, tmp_path, expect_rc=0):
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)          # the installed pyggml, never the source tree
    p = subprocess.run([sys.executable, *map(str, args)], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=HANG_GUARD_S)
    assert p.returncode == expect_rc, f"exit code {p.returncode}\nstdout:\n{p.stdout[-4000:]}\nstderr:\n{p.stderr[-4000:]}"
    return p.stdout, p.stderr


def number_after(label, text):
    m = re.search(re.escape(label) + r"\s*([-+0-9.eE]+)", text)
    assert m, f"no {label!r} in the output:\n{text[-3000:]}"
    return float(m.group(1))


def test_demo_trains_saves_and_reloads(tmp_path):
    pytest.importorskip("sklearn")
    out_file = tmp_path / "digits.gguf"
    out, _ = run(["-m", "pyggml.demo", "--epochs", "2", "--seed", "1", "--out", out_file, "--backend", "cpu"],
                 tmp_path)
    assert number_after("test accuracy:", out) >= 0.9
    assert "predictions match exactly: True" in out
    assert re.search(r"backend: cpu; time: [0-9.]+ s", out)
    assert out_file.stat().st_size > 10_000     # --out keeps the file


def test_demo_help_lists_the_flags(tmp_path):
    out, _ = run(["-m", "pyggml.demo", "--help"], tmp_path)
    for flag in ("--epochs", "--backend", "--seed", "--out"):
        assert flag in out


def test_demo_without_scikit_learn_says_so(tmp_path):
    code = ("import sys; sys.modules['sklearn'] = None\n"      # makes `import sklearn` fail
            "from pyggml.demo import main\n"
            "sys.exit(main(['--epochs', '1']))")
    out, err = run(["-c", code], tmp_path, expect_rc=2)
    assert "needs scikit-learn" in err and "pip install scikit-learn" in err


def test_demo_refuses_an_unknown_backend(tmp_path):
    pytest.importorskip("sklearn")
    _, err = run(["-m", "pyggml.demo", "--epochs", "1", "--backend", "nosuchdevice"], tmp_path, expect_rc=2)
    assert "'nosuchdevice' is not available" in err and "Traceback" not in err


def test_dqn_cartpole_quick_learns_something(tmp_path):
    out, _ = run([EXAMPLES / "dqn_cartpole.py", "--quick", "--seed", "0"], tmp_path)
    assert "learned something (greedy mean return >= 60): True" in out
    assert number_after("greedy policy: mean return", out) >= 60
    first = number_after("mean return of the first 10 episodes", out)
    last = number_after(", of the last 10", out)
    assert last > 2 * first
    assert re.search(r"[0-9]+ us per env step \(pyggml", out)


def test_dqn_cartpole_environment_follows_the_physics():
    """The numpy CartPole: one Euler step by hand, and the termination rules."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("dqn_cartpole", EXAMPLES / "dqn_cartpole.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    import math
    env = mod.CartPole(seed=0)
    env.reset()
    env.state = [0.1, -0.2, 0.05, 0.3]
    s, r, term, trunc = env.step(1)
    # theta'' = (g sin - cos * (F + m l w^2 sin) / M) / (l (4/3 - m cos^2 / M)); x'' = that push - m l theta'' cos / M
    g, mc, mp, l, f, dt = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02
    th, w = 0.05, 0.3
    push = (f + mp * l * w * w * math.sin(th)) / (mc + mp)
    th_acc = (g * math.sin(th) - math.cos(th) * push) / (l * (4 / 3 - mp * math.cos(th) ** 2 / (mc + mp)))
    x_acc = push - mp * l * th_acc * math.cos(th) / (mc + mp)
    want = [0.1 + dt * -0.2, -0.2 + dt * x_acc, th + dt * w, w + dt * th_acc]
    assert s == pytest.approx(want, rel=1e-6)
    assert r == 1.0 and not term and not trunc
    env.state = [2.39, 1.0, 0.0, 0.0]
    assert env.step(1)[2] is True                        # the cart leaves the track
    env.reset()
    env.state = [0.0, 0.0, math.radians(11.99), 1.0]
    assert env.step(1)[2] is True                        # the pole passes 12 degrees
    env.reset()
    env.state = [0.0, 0.0, 0.0, 0.0]
    env.t = mod.CartPole.MAX_STEPS - 1
    _, _, term, trunc = env.step(0)
    assert (term, trunc) == (False, True)                # the step cap truncates


def test_functional_two_heads(tmp_path):
    out, _ = run([EXAMPLES / "functional_two_heads.py", "--epochs", "25"], tmp_path)
    assert "OK" in out.splitlines()[-1]
    assert number_after("held-out accuracy of the cls head:", out) > 0.8
    assert "predict returns 2 arrays: cls (500, 3), amount (500, 1)" in out


def test_custom_loop(tmp_path):
    out, _ = run([EXAMPLES / "custom_loop.py", "--epochs", "30"], tmp_path)
    assert out.splitlines()[-1] == "OK"
    assert "predictions match exactly: True" in out
    assert re.search(r"best snapshot \(epoch \d+\)", out)


def test_gguf_interop(tmp_path):
    pytest.importorskip("gguf")
    out, _ = run([EXAMPLES / "gguf_interop.py"], tmp_path)
    for line in ("general.architecture         STRING   pyggml", "pyggml.format_version        UINT32   2",
                 "all 4 weights equal model.get_weights()", "file unchanged by reading: True",
                 "loaded with load_weights: predictions match numpy", "a file without dense.bias is refused"):
        assert line in out
    assert re.search(r"dense\.weight\s+F32\s+\[4, 8\]\s+\(8, 4\)", out)


def test_dqn_torch_twin_runs(tmp_path):
    pytest.importorskip("torch")
    out, _ = run([ROOT / "tools" / "dqn_cartpole_torch.py", "--episodes", "15", "--eval-episodes", "2"],
                 tmp_path, expect_rc=1)                  # 15 episodes never solve it: exit code 1
    assert "not solved in 15 episodes" in out
    assert re.search(r"[0-9]+ us per env step \(PyTorch", out)
