"""pyggml's command line: ``pyggml <command> [args]`` (also ``python -m pyggml``).

Each command is one entry of ``COMMANDS``: its name, the function that runs it
as ``"module:function"`` (imported only when the command runs, and called with
the remaining arguments as a list; its return value is the exit status) and a
line of help.
"""

from __future__ import annotations

import importlib
import sys

COMMANDS = {
    "demo": ("pyggml.demo:main",
             "train a small CNN on scikit-learn's digits, save it as GGUF and load it back"),
    "info": ("pyggml.cli:info",
             "show this build (versions, CPU variant, GPU backends) and the usable devices"),
    "rpc-server": ("pyggml.rpc:cli_main",
                   "serve this machine's devices to other pyggml processes (ggml's RPC backend)"),
}


def _usage() -> str:
    width = max(len(c) for c in COMMANDS)
    lines = ["usage: pyggml <command> [arguments]   (pyggml <command> --help for a command's own)",
             "", "commands:"]
    lines += [f"  {name:<{width}}  {help_}" for name, (_, help_) in COMMANDS.items()]
    lines += ["", "  --version  print pyggml's version"]
    return "\n".join(lines)


def info(argv: list[str] | None = None) -> int:
    """`pyggml info`: pyggml.show_config() (what the build holds and what the
    import loaded) and the devices with their memory."""
    import argparse

    argparse.ArgumentParser(prog="pyggml info", description=info.__doc__.splitlines()[0]).parse_args(argv)
    import pyggml

    pyggml.show_config()
    from pyggml.core import devices

    print("devices:")
    for d in devices():
        mem = f", {d['memory_free'] / 2**30:.1f} of {d['memory_total'] / 2**30:.1f} GiB free" \
            if d["memory_total"] else ""
        print(f"  {d['name']}: {d['description']} ({d['type']}{mem})")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(_usage(), file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    if argv[0] in ("-V", "--version"):
        from pyggml import _config

        print(f"pyggml {_config.version}")
        return 0
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"pyggml: unknown command {name!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    target = COMMANDS[name][0]
    module_name, func_name = target.split(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name != module_name:
            raise
        print(f"pyggml {name}: this installation of pyggml has no {module_name} module, so the "
              f"{name!r} command is not available (it needs a newer pyggml, or a build with it)",
              file=sys.stderr)
        return 1
    func = getattr(module, func_name, None)
    if func is None:
        print(f"pyggml {name}: {module_name} has no function {func_name}(); this pyggml is inconsistent",
              file=sys.stderr)
        return 1
    rc = func(rest)
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
