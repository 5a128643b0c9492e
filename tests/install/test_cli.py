"""The `pyggml` command (also `python -m pyggml`): its commands, its help, and
a command whose module is not installed."""

import os
import shutil
import subprocess
import sys
import sysconfig

import pytest

from pyggml import cli


def _script():
    exe = os.path.join(sysconfig.get_path("scripts"), "pyggml")
    return exe if os.path.isfile(exe) else shutil.which("pyggml")


def test_info_prints_the_build_and_the_devices(capsys):
    assert cli.main(["info"]) == 0
    out = capsys.readouterr().out
    assert "cpu variant:" in out and "devices:" in out and "\n  cpu:" in out


def test_help_lists_every_command(capsys):
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    for name in cli.COMMANDS:
        assert name in out


def test_no_command_or_an_unknown_one_is_a_usage_error(capsys):
    assert cli.main([]) == 2
    assert cli.main(["frobnicate"]) == 2
    assert "unknown command 'frobnicate'" in capsys.readouterr().err


def test_a_command_whose_module_is_missing_says_so(capsys, monkeypatch):
    monkeypatch.setitem(cli.COMMANDS, "absent", ("pyggml._no_such_module:cli_main", "a command not built"))
    assert cli.main(["absent", "--x"]) == 1
    err = capsys.readouterr().err
    assert "has no pyggml._no_such_module module" in err and "'absent'" in err


def test_arguments_reach_the_command(monkeypatch):
    seen = []
    mod = type(sys)("pyggml._cli_test_target")
    mod.run = lambda argv: seen.append(argv) or 7
    monkeypatch.setitem(sys.modules, mod.__name__, mod)
    monkeypatch.setitem(cli.COMMANDS, "t", (mod.__name__ + ":run", "test"))
    assert cli.main(["t", "--a", "1"]) == 7
    assert seen == [["--a", "1"]]


def test_the_installed_script_and_python_m_run_demo_help(tmp_path):
    script = _script()
    if script is None:
        pytest.skip("the pyggml script is not installed next to this interpreter")
    for cmd in ([script, "demo", "--help"], [sys.executable, "-m", "pyggml", "demo", "--help"]):
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=120)
        assert r.returncode == 0, r.stderr
        assert "--epochs" in r.stdout
    r = subprocess.run([script, "--version"], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert r.returncode == 0 and r.stdout.startswith("pyggml ")
