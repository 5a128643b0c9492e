"""The keras-io ports in examples/keras_io/ run end to end in their quick form
(``--quick``: fewer rows and epochs, as each file's header says), each reaches
a meaningful value of the metric its example reports, and lands within 2
points (or the stated tolerance) of its PyTorch twin in tools/keras_io_twins/,
trained on the same data with the same architecture and optimizer settings.

A port and its twin run at once, in fresh interpreters of one CPU thread each
(two cores in CI); the results are shared by the threshold and parity tests.
The parity tests skip without PyTorch.  (The timeouts only guard against a
hang; nothing here measures speed.)

The twins do not touch pyggml, so their outputs are kept and reused, by their
twin script, data code, arguments and versions of Python, numpy, scikit-learn,
pandas, scipy and PyTorch: recorded ones in tests/keras_io_twin_outputs/
(PyTorch's outputs on the project's machine; ``PYGGML_TEST_TWIN_RECORD=1``
records them again), and with ``PYGGML_TEST_TWIN_CACHE`` set to a folder, the
outputs of the twins this run trained (a change of twin, data or version) for a
later run (``.ci/run`` tests the wheel, then the README's source build).  The
ports always run.

The threshold test and the parity test of a port share one run of it, also
when pytest-xdist gives them to different workers: the first to need it runs
it under a lock in the workers' common temporary folder, the other reads the
outputs it left there (a port's run is about half of this file's time)."""

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

try:
    import fcntl
except ImportError:                      # not on Windows: each worker runs the ports it needs
    fcntl = None

ROOT = Path(__file__).resolve().parent.parent
PORTS_DIR = ROOT / "examples" / "keras_io"
TWINS_DIR = ROOT / "tools" / "keras_io_twins"
RECORDED_DIR = ROOT / "tests" / "keras_io_twin_outputs"
HANG_GUARD_S = 600


@dataclass
class Port:
    label: str                   # the line the example's metric follows ("Test accuracy:")
    threshold: float             # the quick run must reach it (at least; at most when lower_is_better)
    tolerance: float = 0.02      # |port - twin|: 2 points of accuracy unless said
    lower_is_better: bool = False
    needs: tuple = ()            # modules the example imports besides pyggml and numpy
    args: tuple = ()
    seeds: tuple = ()            # several runs (--seed each): the metric is how many print the label


PORTS = {
    "mnist_convnet": Port("Test accuracy:", 0.92, needs=("sklearn",)),
    "timeseries_classification": Port("Test accuracy", 0.92, needs=("sklearn", "scipy")),
    "text_classification_with_transformer": Port("Validation accuracy:", 0.93),
    "bidirectional_lstm_imdb": Port("Validation accuracy:", 0.9),
    # today's example takes the Normalization layers' outputs as model inputs: Keras (and pyggml)
    # puts new Inputs there, the numbers enter unnormalised and the model predicts the majority
    # class (69% of the validation rows here), as the keras-io page's own run does (its 77%)
    "structured_data_classification": Port("Validation accuracy:", 0.66, needs=("pandas",)),
    "structured_data_classification_2020": Port("Validation accuracy:", 0.83, needs=("pandas",)),
    # binary cross-entropy of the denoised test images: the mean training image scores 0.311,
    # the clean images themselves 0.156
    "autoencoder": Port("Denoising val_loss:", 0.26, tolerance=0.01, lower_is_better=True, needs=("sklearn",)),
    "addition_rnn": Port("Validation accuracy:", 0.42),
    # solved: a running reward over 195 within the quick run's episodes. Whether one seed
    # solves in a budget is close to a coin flip for the twin as for the port (seeds 4-9 at
    # 250 episodes: PyTorch 2 of 6, pyggml 3 of 6), and float rounding moves a run from one
    # side to the other: four seeds each; the port solves at least two, and at most one
    # fewer than the twin, within 400 episodes
    # a custom train_step on a GradientTape: the quick run is 12 Adam steps, enough to leave the
    # untrained 543 (a sigmoid's 0.5 everywhere) but not to settle: over seeds 1337, 1 and 2 the
    # port scored 498-508 and the twin 469-501 (their inits and noise differ), so the twin is
    # within 45; the unit tests (test_custom_steps.py) hold the tape's step to the fused fit's
    "vae": Port("Test reconstruction loss:", 530, tolerance=45, lower_is_better=True, needs=("sklearn",)),
    # (the budget was 300 episodes: on 2026-12-05's machine seeds 1 and 2 solved at 310 and 306, so
    # the port counted 2 against the twin's 4; over seeds 1337 and 1-7 it solved all eight by 310)
    "actor_critic_cartpole": Port("Solved at episode", 2, tolerance=1, args=("--episodes", "400"),
                                  seeds=(1337, 1, 2, 3)),
}


def _missing(port):
    return [m for m in port.needs if importlib.util.find_spec(m) is None]


def _start(script, args, cwd):
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)          # the installed pyggml, never the source tree
    env["PYTHONWARNINGS"] = "default"
    return subprocess.Popen([sys.executable, str(script), "--quick", "--threads", "1", *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(proc, what):
    try:
        out, err = proc.communicate(timeout=HANG_GUARD_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"{what} did not finish in {HANG_GUARD_S} s")
    assert proc.returncode == 0, f"{what}: exit code {proc.returncode}\nstdout:\n{out[-3000:]}\nstderr:\n{err[-3000:]}"
    return out, err


def _twin_key(name, args):
    """What a twin's output depends on: its code, the data code, its arguments, the versions."""
    h = hashlib.sha256()
    for f in (TWINS_DIR / f"{name}_torch.py", TWINS_DIR / "common.py", PORTS_DIR / "offline_data.py"):
        h.update(f.read_bytes())
    versions = [sys.version]
    for dist in ("numpy", "scikit-learn", "torch", "pandas", "scipy"):
        try:
            versions.append(f"{dist} {importlib.metadata.version(dist)}")
        except importlib.metadata.PackageNotFoundError:
            versions.append(f"{dist} absent")
    h.update(json.dumps([list(args), versions]).encode())
    return f"{name}-{h.hexdigest()[:24]}"


def _twin_cached(name, args):
    key = _twin_key(name, args)
    recorded = RECORDED_DIR / f"{key}.json"
    if os.environ.get("PYGGML_TEST_TWIN_RECORD", "") not in ("", "0"):
        return None, recorded                  # trained again, and recorded
    if recorded.is_file():
        out = json.loads(recorded.read_text())
        return (out["stdout"], out["stderr"]), None
    folder = os.environ.get("PYGGML_TEST_TWIN_CACHE", "")
    if not folder:
        return None, None
    path = Path(folder) / f"{key}.json"
    if path.is_file():
        out = json.loads(path.read_text())
        return (out["stdout"], out["stderr"]), path
    return None, path


def _store_json(path, obj):
    """Write obj to path whole or not at all (a reader in another worker sees the old state or
    the new one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(obj))
    os.replace(tmp, path)


def _twin_store(path, result):
    if path is not None:
        _store_json(path, {"stdout": result[0], "stderr": result[1]})


def _metric(label, text, what):
    m = re.search(re.escape(label) + r"\s*([-+0-9.eE]+)", text)
    assert m, f"{what}: no {label!r} in the output:\n{text[-3000:]}"
    return float(m.group(1).rstrip("!."))


_RESULTS = {}


def _shared_folder(tmp_path_factory):
    """The temporary folder every worker of this pytest run sees (xdist's workers each get a
    folder inside it), or this run's own one without xdist."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def results(name, tmp_path_factory):
    """{"port": (stdout, stderr), "twin": (stdout, stderr) or None}, run once per port and
    pytest run: the first worker to ask runs it, a later one (or one waiting on the lock)
    reads what it left."""
    if name not in _RESULTS:
        port = PORTS[name]
        missing = _missing(port)
        if missing:
            pytest.skip(f"{name} needs {', '.join(missing)}")
        shared = _shared_folder(tmp_path_factory)
        done = shared / f"keras_io-{name}.json"
        with open(shared / f"keras_io-{name}.lock", "w") as lock:
            if fcntl is not None:
                fcntl.flock(lock, fcntl.LOCK_EX)       # released when the file closes
            if done.is_file():
                _RESULTS[name] = {k: v if v is None else tuple(v) for k, v in json.loads(done.read_text()).items()}
            else:
                _RESULTS[name] = _run(name, port, tmp_path_factory)
                _store_json(done, _RESULTS[name])
    return _RESULTS[name]


def _run(name, port, tmp_path_factory):
    """Run a port and its twin (or read the twin's cached output); a port that fails fails the
    test here, and leaves nothing for another worker to read."""
    cwd = tmp_path_factory.mktemp(name)
    runs = [port.args + ("--seed", str(s)) for s in port.seeds] or [port.args]
    procs = {"port": [_start(PORTS_DIR / f"{name}.py", a, cwd) for a in runs]}
    twins = []                       # per run: (cached output or None, cache path or None)
    if importlib.util.find_spec("torch") is not None:
        twins = [_twin_cached(name, a) for a in runs]
        procs["twin"] = [out or _start(TWINS_DIR / f"{name}_torch.py", a, cwd) for a, (out, _) in zip(runs, twins)]
    res = {k: [p if isinstance(p, tuple) else _finish(p, f"{name} ({k})") for p in ps] for k, ps in procs.items()}
    for (out, path), result in zip(twins, res.get("twin", [])):
        if out is None:
            _twin_store(path, result)
    for k, outs in res.items():
        if port.seeds:
            # the number of seeds whose output has the label, as the output of one run
            n = sum(port.label in out for out, _ in outs)
            res[k] = (f"{port.label} {n}\n" + "".join(out for out, _ in outs), "".join(err for _, err in outs))
        else:
            res[k] = outs[0]
    res.setdefault("twin", None)
    return res


def test_every_port_has_a_twin_and_a_documented_header():
    ports = sorted(p.stem for p in PORTS_DIR.glob("*.py") if p.stem != "offline_data")
    assert ports == sorted(PORTS)
    for name in ports:
        assert (TWINS_DIR / f"{name}_torch.py").is_file(), f"{name} has no PyTorch twin"
        head = (PORTS_DIR / f"{name}.py").read_text().split("\n\n")[0]
        assert "keras-io's examples/" in head and "Data:" in head and "--quick" in head, \
            f"{name}'s header must say which example it ports, what changed where the data loads, and --quick"


@pytest.mark.parametrize("name", sorted(PORTS))
def test_port_reaches_its_example_s_metric(name, tmp_path_factory):
    port = PORTS[name]
    out, err = results(name, tmp_path_factory)["port"]
    value = _metric(port.label, out, name)
    if port.lower_is_better:
        assert value <= port.threshold, f"{name}: {port.label} {value} (want at most {port.threshold})"
    else:
        assert value >= port.threshold, f"{name}: {port.label} {value} (want at least {port.threshold})"
    if name == "structured_data_classification":
        # the Keras behaviour the example relies on, said aloud
        assert "a new Input takes its place" in err


@pytest.mark.parametrize("name", sorted(PORTS))
def test_port_matches_its_pytorch_twin(name, tmp_path_factory):
    pytest.importorskip("torch")
    port = PORTS[name]
    res = results(name, tmp_path_factory)
    ours = _metric(port.label, res["port"][0], name)
    theirs = _metric(port.label, res["twin"][0], f"{name}'s twin")
    if port.seeds:                       # runs that reach the label: at most `tolerance` fewer than the twin's
        assert ours >= theirs - port.tolerance, \
            f"{name}: {ours:.0f} of {len(port.seeds)} seeds with pyggml, {theirs:.0f} with PyTorch"
    else:
        assert abs(ours - theirs) <= port.tolerance, \
            f"{name}: {port.label} {ours:.4f} with pyggml, {theirs:.4f} with PyTorch (tolerance {port.tolerance})"


def test_twin_cache_keeps_and_returns_one_output_per_script_and_arguments(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "RECORDED_DIR", tmp_path / "recorded")
    monkeypatch.delenv("PYGGML_TEST_TWIN_RECORD", raising=False)
    monkeypatch.setenv("PYGGML_TEST_TWIN_CACHE", str(tmp_path / "twins"))
    out, path = _twin_cached("mnist_convnet", ("--seed", "1"))
    assert out is None and path.parent == tmp_path / "twins"
    _twin_store(path, ("Test accuracy: 0.95\n", "a warning\n"))
    assert _twin_cached("mnist_convnet", ("--seed", "1"))[0] == ("Test accuracy: 0.95\n", "a warning\n")
    # another seed, another twin: not the same output
    assert _twin_cached("mnist_convnet", ("--seed", "2"))[0] is None
    assert _twin_cached("autoencoder", ("--seed", "1"))[0] is None
    assert [p.name for p in (tmp_path / "twins").iterdir()] == [path.name]      # no temporary left
    monkeypatch.delenv("PYGGML_TEST_TWIN_CACHE")
    assert _twin_cached("mnist_convnet", ("--seed", "1")) == (None, None)
    # recording trains the twin again into the recorded outputs, which come first from then on
    monkeypatch.setenv("PYGGML_TEST_TWIN_CACHE", str(tmp_path / "twins"))
    monkeypatch.setenv("PYGGML_TEST_TWIN_RECORD", "1")
    out, recorded = _twin_cached("mnist_convnet", ("--seed", "1"))
    assert out is None and recorded.parent == tmp_path / "recorded"
    _twin_store(recorded, ("Test accuracy: 0.97\n", ""))
    monkeypatch.delenv("PYGGML_TEST_TWIN_RECORD")
    assert _twin_cached("mnist_convnet", ("--seed", "1")) == (("Test accuracy: 0.97\n", ""), None)


def test_the_recorded_twin_outputs_are_pytorch_s_and_cover_every_port():
    # one recorded output per port and run (each seed of actor_critic's), each with its metric
    names = sorted(p.name.rsplit("-", 1)[0] for p in RECORDED_DIR.glob("*.json"))
    want = sorted(n for n, port in PORTS.items() for _ in (port.seeds or [None]))
    assert names == want
    for p in RECORDED_DIR.glob("*.json"):
        name = p.name.rsplit("-", 1)[0]
        out = json.loads(p.read_text())["stdout"]
        assert PORTS[name].label in out or name == "actor_critic_cartpole", (p.name, out[-500:])


def test_a_ports_outputs_are_read_back_by_another_worker(tmp_path_factory, monkeypatch):
    # what one worker left in the shared folder is what another gets, without running anything
    monkeypatch.setitem(PORTS, "left_by_another_worker", Port("Score:", 0.5))
    monkeypatch.delitem(_RESULTS, "left_by_another_worker", raising=False)
    stored = {"port": ["Score: 0.75\n", ""], "twin": None}
    _store_json(_shared_folder(tmp_path_factory) / "keras_io-left_by_another_worker.json", stored)
    monkeypatch.setattr(sys.modules[__name__], "_run", lambda *a: pytest.fail("ran the port again"))
    got = results("left_by_another_worker", tmp_path_factory)
    assert got == {"port": ("Score: 0.75\n", ""), "twin": None}
    assert _metric("Score:", got["port"][0], "stored") == 0.75
