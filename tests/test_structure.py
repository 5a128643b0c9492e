"""The package's shape, held by reading its source: no import cycle anywhere in
pyggml, no module reading a private attribute of a class that another package
of pyggml defines, and Model's module within its size."""

import ast
import os

import pytest

import pyggml

ROOT = os.path.dirname(pyggml.__file__)


def _modules():
    """{dotted module name: (path, is_package)} of every .py file of pyggml."""
    out = {}
    for dirpath, dirnames, files in os.walk(ROOT):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for f in files:
            if not f.endswith(".py"):
                continue
            rel = os.path.relpath(os.path.join(dirpath, f), os.path.dirname(ROOT))[:-3].split(os.sep)
            is_pkg = rel[-1] == "__init__"
            name = ".".join(rel[:-1] if is_pkg else rel)
            out[name] = (os.path.join(dirpath, f), is_pkg)
    return out


MODULES = _modules()


def _package_of(name):
    """The package a module belongs to: pyggml.<sub> for subpackages, 'pyggml' for top-level modules."""
    parts = name.split(".")
    if len(parts) >= 2 and parts[1] in MODULES and MODULES[".".join(parts[:2])][1]:
        return ".".join(parts[:2])
    return "pyggml"


def _imports(name):
    path, is_pkg = MODULES[name]
    tree = ast.parse(open(path).read())
    base = name if is_pkg else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("pyggml"):
                    out.add(a.name)
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level:
                mod = ".".join(base.split(".")[:len(base.split(".")) - node.level + 1] + ([mod] if mod else []))
            if not mod.startswith("pyggml"):
                continue
            for a in node.names:
                sub = f"{mod}.{a.name}"
                out.add(sub if sub in MODULES else mod)
    return {m for m in out if m in MODULES and m != name}


def test_no_import_cycle():
    graph = {m: _imports(m) for m in MODULES}
    # Tarjan's strongly connected components, iteratively
    index, low, on, stack, cycles, counter = {}, {}, set(), [], [], [0]
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    cycles.append(sorted(comp))
    assert not cycles, f"import cycles: {cycles}"


def _private_definitions():
    """{package: set of private attribute names its classes define}."""
    defs = {}
    for name, (path, _) in MODULES.items():
        tree = ast.parse(open(path).read())
        names = defs.setdefault(_package_of(name), set())
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            for node in ast.walk(cls):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _private(node.name):
                    names.add(node.name)
                elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and _private(node.attr):
                    names.add(node.attr)
                elif isinstance(node, ast.Assign):
                    for t in node.targets:
                        if isinstance(t, ast.Name) and _private(t.id):
                            names.add(t.id)
    return defs


def _private(n):
    return n.startswith("_") and not n.startswith("__")


def test_no_module_reads_another_packages_private_attributes():
    defs = _private_definitions()
    bad = []
    for name, (path, _) in MODULES.items():
        pkg = _package_of(name)
        tree = ast.parse(open(path).read())
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute) or not _private(node.attr):
                continue
            obj = node.value
            if isinstance(obj, ast.Name) and obj.id in ("self", "cls"):
                continue
            if isinstance(obj, ast.Call) and isinstance(obj.func, ast.Name) and obj.func.id == "super":
                continue
            owners = {p for p, names in defs.items() if node.attr in names}
            if owners and pkg not in owners:
                bad.append(f"{name}:{node.lineno} reads .{node.attr} (defined in {sorted(owners)})")
    assert not bad, "private attributes read across packages:\n" + "\n".join(bad)


def test_model_module_stays_small():
    path = MODULES["pyggml.models.model"][0]
    n = sum(1 for _ in open(path))
    assert n <= 500, f"pyggml/models/model.py has {n} lines"


def test_every_source_module_is_installed():
    """pyggml/meson.build lists the top-level modules one by one: a module added to the source
    but not to that list is missing from the wheel and from `pip install .`."""
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "pyggml")
    if not os.path.isfile(os.path.join(src, "meson.build")):
        pytest.skip("no source tree beside the tests")
    missing = []
    for dirpath, dirnames, files in os.walk(src):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for f in files:
            if f.endswith(".py"):
                rel = os.path.relpath(os.path.join(dirpath, f), src)
                if not os.path.isfile(os.path.join(ROOT, rel)):
                    missing.append(rel)
    assert missing == [], f"source modules the installed package lacks (pyggml/meson.build?): {missing}"
