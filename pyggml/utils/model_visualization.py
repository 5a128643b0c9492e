"""plot_model and model_to_dot: a picture of a model's layer graph.

The graph is read through the public model API (``model.outputs``: nodes
with ``.layer`` and ``.inputs``; ``model.layers``).  ``model_to_dot`` gives
graphviz's DOT source; ``plot_model`` renders it with graphviz's ``dot``
program when it is installed (PNG, SVG, PDF, ... by the file's extension).
Without ``dot`` it writes the DOT source next to the requested file, prints
a text rendering of the graph and says how to get the picture: a missing
tool never raises.
"""

import os
import shutil
import subprocess
import tempfile

__all__ = ["model_to_dot", "plot_model", "model_to_text"]

# graphviz output formats plot_model writes, by file extension
_FORMATS = {"png": "png", "svg": "svg", "pdf": "pdf", "jpg": "jpg", "jpeg": "jpg", "gif": "gif", "ps": "ps",
            "eps": "eps", "bmp": "bmp", "tif": "tif", "tiff": "tif", "webp": "webp"}
_SOURCE_EXTS = ("dot", "gv")
_DOT_TIMEOUT_S = 120


def _shape(s):
    if isinstance(s, (list, tuple)) and s and isinstance(s[0], (list, tuple)):
        return ", ".join(_shape(x) for x in s)
    return "(" + ", ".join("None" if d is None else str(d) for d in s) + (",)" if len(s) == 1 else ")")


def _is_model(obj):
    from pyggml.models import Model
    return isinstance(obj, Model)


class _LayerGraph:
    """The layers of a model, the edges between them, and each layer's calls."""

    def __init__(self, model):
        if not _is_model(model):
            raise TypeError(f"expected a pg.Model or pg.Sequential, got {type(model).__name__}")
        try:
            outputs = model.outputs
            from pyggml.models.summary import shown_layers
            model_layers = shown_layers(model)
        except ValueError as e:
            raise ValueError(f"the model {model.name!r} is not built yet, so it has no layer graph to draw: "
                             f"give it an input shape or call it on data first ({e})") from None
        nodes, seen = [], set()
        stack = list(outputs)
        while stack:                                    # every node the outputs depend on
            n = stack.pop()
            if id(n) in seen:
                continue
            seen.add(id(n))
            nodes.append(n)
            stack.extend(n.inputs)
        present = {id(n.layer) for n in nodes}
        ordered = [l for l in model_layers if id(l) in present]
        listed = {id(l) for l in ordered}
        extra = []                                      # a Sequential's input layer is not in model.layers
        for n in nodes:
            if id(n.layer) not in listed:
                listed.add(id(n.layer))
                extra.append(n.layer)
        self.model = model
        self.layers = extra + ordered
        self.calls = {id(l): [] for l in self.layers}  # (input nodes, output node) per node
        for n in nodes:
            self.calls[id(n.layer)].append(n)
        self.edges = []
        done = set()
        for l in self.layers:
            for n in self.calls[id(l)]:
                for i, p in enumerate(n.inputs):
                    key = (id(p), id(n))
                    if key not in done:
                        done.add(key)
                        self.edges.append((p, n, i))
        self.inputs, self.outputs = list(model.inputs), list(outputs)

    def shapes(self, layer):
        """(input shapes, output shapes, input dtypes, output dtypes) of the layer's first call."""
        calls = self.calls[id(layer)]
        if not calls:
            return None, None, None, None
        first = calls[0]
        outs = [n for n in calls if n.inputs == first.inputs or (not n.inputs and not first.inputs)]
        outs.sort(key=lambda n: n.index)
        ins = [p.shape for p in first.inputs] or [first.shape]
        in_dt = [p.dtype for p in first.inputs] or [first.dtype]
        return ins, [n.shape for n in outs], in_dt, [n.dtype for n in outs]


def _label(graph, layer, show_shapes, show_dtype, show_layer_names, show_layer_activations, show_trainable):
    cls = type(layer).__name__
    lines = [f"{layer.name} ({cls})" if show_layer_names and layer.name else cls]
    act = getattr(layer, "activation_name", getattr(layer, "activation", None))
    if show_layer_activations and isinstance(act, str):
        lines.append(f"Activation: {act}")
    ins, outs, in_dt, out_dt = graph.shapes(layer)
    if show_shapes and ins is not None:
        lines.append(f"Input shape: {_shape(ins[0]) if len(ins) == 1 else '[' + _shape(ins) + ']'}")
        lines.append(f"Output shape: {_shape(outs[0]) if len(outs) == 1 else '[' + _shape(outs) + ']'}")
    if show_dtype and in_dt is not None:
        lines.append(f"Input dtype: {in_dt[0] if len(set(in_dt)) == 1 else ', '.join(in_dt)}")
        lines.append(f"Output dtype: {out_dt[0] if len(set(out_dt)) == 1 else ', '.join(out_dt)}")
    if show_trainable:
        lines.append(f"Trainable: {'Y' if layer.trainable else 'N'}")
    return lines


def _quote(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _check_rankdir(rankdir):
    if rankdir not in ("TB", "LR", "BT", "RL"):
        raise ValueError(f"rankdir must be 'TB', 'LR', 'BT' or 'RL', got {rankdir!r}")


def _dot_body(model, opts, prefix, lines, indent):
    """Write the model's boxes and edges; returns (entry, exit) functions that give,
    for an edge into input i of the model / out of output j, the DOT node id."""
    graph = _LayerGraph(model)
    ids = {}
    inner = {}                      # id(layer) -> (entry, exit) of an expanded nested model
    for k, layer in enumerate(graph.layers):
        nid = f"{prefix}{k}"
        ids[id(layer)] = nid
        if opts["expand_nested"] and _is_model(layer):
            lines.append(f"{indent}subgraph cluster_{nid} {{")
            lines.append(f"{indent}  label={_quote(f'{layer.name} ({type(layer).__name__})')};")
            lines.append(f"{indent}  style=dashed;")
            inner[id(layer)] = _dot_body(layer, opts, nid + "_", lines, indent + "  ")
            lines.append(f"{indent}}}")
            continue
        label = "\n".join(_label(graph, layer, opts["show_shapes"], opts["show_dtype"], opts["show_layer_names"],
                                 opts["show_layer_activations"], opts["show_trainable"]))
        lines.append(f"{indent}{nid} [label={_quote(label)}];")

    def src_of(node):
        if id(node.layer) in inner:
            return inner[id(node.layer)][1](node.index)
        return ids[id(node.layer)]

    def dst_of(node, i):
        if id(node.layer) in inner:
            return inner[id(node.layer)][0](i)
        return ids[id(node.layer)]

    written = set()
    for p, n, i in graph.edges:
        edge = (src_of(p), dst_of(n, i))
        if edge not in written:
            written.add(edge)
            lines.append(f"{indent}{edge[0]} -> {edge[1]};")

    def entry(i):
        return ids[id(graph.inputs[min(i, len(graph.inputs) - 1)].layer)]

    def exit_(j):
        return src_of(graph.outputs[min(j, len(graph.outputs) - 1)])
    return entry, exit_


def model_to_dot(model, show_shapes=False, show_dtype=False, show_layer_names=True, rankdir="TB",
                 expand_nested=False, dpi=200, subgraph=False, show_layer_activations=False,
                 show_trainable=False, **kwargs):
    """The DOT source (a str, for graphviz) of the model's layer graph: one box per
    layer (its name and class; with ``show_shapes`` its input and output shapes),
    an arrow per connection.  ``expand_nested`` draws nested models' layers in a
    dashed cluster.  ``rankdir``: "TB" (top to bottom) or "LR" (left to right)."""
    _check_rankdir(rankdir)
    if not isinstance(dpi, (int, float)) or isinstance(dpi, bool) or not 1 <= dpi <= 2400:
        raise ValueError(f"dpi must be a number in [1, 2400], got {dpi!r}")
    opts = dict(show_shapes=bool(show_shapes), show_dtype=bool(show_dtype), show_layer_names=bool(show_layer_names),
                expand_nested=bool(expand_nested), show_layer_activations=bool(show_layer_activations),
                show_trainable=bool(show_trainable))
    lines = []
    head = "subgraph" if subgraph else "digraph"
    name = model.name if _is_model(model) else "model"
    lines.append(f"{head} {_quote(name)} {{")
    lines.append(f"  graph [rankdir={rankdir}, dpi={dpi:g}, concentrate=true];")
    lines.append('  node [shape=box, style=rounded, fontname="Helvetica"];')
    _dot_body(model, opts, "L", lines, "  ")
    lines.append("}")
    return "\n".join(lines) + "\n"


def model_to_text(model, show_shapes=True, show_layer_names=True):
    """A plain-text rendering of the layer graph: one line per layer, with what feeds it."""
    graph = _LayerGraph(model)
    rows = []
    for layer in graph.layers:
        lab = f"{layer.name} ({type(layer).__name__})" if show_layer_names else type(layer).__name__
        ins, outs, _, _ = graph.shapes(layer)
        shape = ""
        if show_shapes and outs is not None:
            shape = _shape(outs[0]) if len(outs) == 1 else "[" + _shape(outs) + "]"
        feeds = []
        for n in graph.calls[id(layer)]:
            for p in n.inputs:
                if p.layer.name not in feeds:
                    feeds.append(p.layer.name)
        rows.append((lab, shape, ", ".join(feeds)))
    w0 = max(len("Layer (type)"), *(len(r[0]) for r in rows)) + 2
    w1 = max(len("Output shape"), *(len(r[1]) for r in rows)) + 2
    out = [f'Model: "{model.name}"', "Layer (type)".ljust(w0) + ("Output shape".ljust(w1) if show_shapes else "")
           + "Inputs from"]
    out.append("-" * (len(out[1]) + 8))
    for lab, shape, feeds in rows:
        out.append(lab.ljust(w0) + (shape.ljust(w1) if show_shapes else "") + (feeds or "-"))
    return "\n".join(out)


def _write_atomic(path, data):
    """Write bytes to path through a temporary file in the same folder (a crash leaves
    the old file or the new one, never half of one)."""
    folder = os.path.dirname(os.path.abspath(path))
    try:
        mode = os.stat(path).st_mode & 0o777          # replacing a file keeps its permissions
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask                         # a new file gets the usual ones (mkstemp's are 0600)
    fd, tmp = tempfile.mkstemp(prefix=".plot-", dir=folder)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _find_dot():
    return shutil.which("dot")


def plot_model(model, to_file="model.png", show_shapes=False, show_dtype=False, show_layer_names=True,
               rankdir="TB", expand_nested=False, dpi=200, show_layer_activations=False, show_trainable=False,
               **kwargs):
    """Draw the model's layer graph into ``to_file`` (Keras's ``plot_model``).

    The format follows the extension: .png (also without one), .svg, .pdf,
    .jpg, ...; .dot or .gv write the DOT source itself.  Rendering needs
    graphviz's ``dot`` program; without it (or if it fails) the DOT source is
    written to ``<to_file without extension>.dot``, a text rendering of the
    graph is printed, and a message says how to get the picture: no exception.
    Returns an IPython image inside a notebook (PNG/JPEG written), else None."""
    to_file = os.fspath(to_file)
    if not isinstance(to_file, str) or not to_file:
        raise TypeError(f"to_file must be a file path, got {to_file!r}")
    stem, ext = os.path.splitext(to_file)
    ext = ext[1:].lower() if ext else "png"
    if ext not in _FORMATS and ext not in _SOURCE_EXTS:
        raise ValueError(f"plot_model: cannot tell the format of {to_file!r}; use one of "
                         f"{', '.join('.' + e for e in sorted(set(_FORMATS) | set(_SOURCE_EXTS)))}")
    source = model_to_dot(model, show_shapes=show_shapes, show_dtype=show_dtype, show_layer_names=show_layer_names,
                          rankdir=rankdir, expand_nested=expand_nested, dpi=dpi,
                          show_layer_activations=show_layer_activations, show_trainable=show_trainable)
    if ext in _SOURCE_EXTS:
        _write_atomic(to_file, source.encode("utf-8"))
        return None
    dot = _find_dot()
    problem = None
    if dot is None:
        problem = "graphviz's `dot` program was not found"
    else:
        try:
            run = subprocess.run([dot, f"-T{_FORMATS[ext]}"], input=source.encode("utf-8"), capture_output=True,
                                 timeout=_DOT_TIMEOUT_S, check=False)
            if run.returncode == 0 and run.stdout:
                _write_atomic(to_file, run.stdout)
                return _notebook_image(to_file, ext)
            problem = (f"graphviz's `dot` failed (exit status {run.returncode}): "
                       f"{run.stderr.decode('utf-8', 'replace').strip()[:500]}")
        except (OSError, subprocess.SubprocessError) as e:
            problem = f"graphviz's `dot` could not run: {e}"
    dot_path = stem + ".dot"
    _write_atomic(dot_path, source.encode("utf-8"))
    print(model_to_text(model, show_shapes=True, show_layer_names=show_layer_names))
    print(f"plot_model: {problem}, so {to_file!r} was not drawn. The graph's DOT source is in {dot_path!r}: "
          f"install graphviz (e.g. `apt install graphviz`) and run `dot -T{_FORMATS[ext]} {dot_path} -o {to_file}`, "
          f"or call plot_model again.")
    return None


def _notebook_image(path, ext):
    if ext not in ("png", "jpg", "jpeg"):
        return None
    try:
        from IPython import get_ipython
        from IPython.display import Image
    except ImportError:
        return None
    if get_ipython() is None:
        return None
    return Image(filename=path)
