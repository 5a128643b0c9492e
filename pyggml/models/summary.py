"""``model.summary()``: Keras's table of layers, output shapes and parameters."""

__all__ = ["print_summary", "print_table", "class_name", "built_without_graph"]


def _shape(s):
    if isinstance(s, list):
        return ", ".join(_shape(x) for x in s)
    return str(tuple(s))                                  # (None, 4); (None,) for one number per sample


def shown_layers(model):
    """The rows of summary and plot_model: every step of a functional model's graph, the ops on
    its symbolic tensors included (Keras's summary shows them; ``model.layers`` does not); else
    (a Sequential, a subclassed model) ``model.layers``."""
    listed = model.layers
    topo = model.__dict__.get("_topology")
    if topo is None:
        return listed
    steps = list(topo.layers)
    mine = [l for l in steps if not getattr(l, "_op_step", False)]
    return steps if len(mine) == len(listed) and all(a is b for a, b in zip(mine, listed)) else listed


def class_name(layer):
    """The class a row names: Keras's "Functional" for a model made as Model(inputs, outputs)."""
    cls = type(layer)
    if isinstance(getattr(layer, "display_class", None), str):
        return layer.display_class
    return "Functional" if (cls.__name__, cls.__module__) == ("Model", "pyggml.models.model") else cls.__name__


def _trainable_mark(layer):
    """Keras's Trainable column: Y or N for a layer with weights, - for one without."""
    if not layer.weights:
        return "-"
    return "Y" if layer.trainable else "N"


def print_table(model, rows, totals, print_fn, layers=None, show_trainable=False, line_length=None,
                 positions=None):
    """Keras's table: the model's name, a row per layer, then the parameter totals
    (``show_trainable``: a column saying whether each layer trains).  ``line_length`` (and
    ``positions``, each column's right end as a fraction of it or in characters) widen the
    columns as Keras's do; a column is never narrower than what it holds."""
    head = ("Layer (type)", "Output Shape", "Param #")
    if show_trainable and layers is not None:
        head += ("Trainable",)
        rows = [r + (_trainable_mark(l),) for r, l in zip(rows, layers)]
    rows = [head] + rows
    w = [max(len(r[i]) for r in rows) + 2 for i in range(len(head))]
    if line_length is not None:
        w = _widths_for(w, line_length, positions)
    out = [f'Model: "{model.name}"', "-" * sum(w)]
    for k, r in enumerate(rows):
        out.append("".join(c.ljust(w[i]) for i, c in enumerate(r)))
        if k == 0:
            out.append("=" * sum(w))
    out += ["=" * sum(w)] + [f"{what} params: {_count(n)}" for what, n in zip(("Total", "Trainable", "Non-trainable"),
                                                                            totals)]
    print_fn("\n".join(out))


def _widths_for(w, line_length, positions):
    from pyggml._validation import check_positive_int
    line_length = check_positive_int("line_length", line_length, 1 << 12)
    n = len(w)
    if positions is None:
        positions = [0.45, 0.80, 1.0] if n == 3 else [0.4, 0.7, 0.85, 1.0]
    if not isinstance(positions, (list, tuple)) or len(positions) != n or \
            not all(isinstance(p, (int, float)) and not isinstance(p, bool) and p > 0 for p in positions):
        raise ValueError(f"positions must be {n} positive numbers (each column's right end), got {positions!r}")
    ends = [int(p * line_length) if p <= 1 else int(p) for p in positions]
    if any(b <= a for a, b in zip([0] + ends[:-1], ends)):
        raise ValueError(f"positions must increase, got {positions!r}")
    return [max(have, end - start) for have, start, end in zip(w, [0] + ends[:-1], ends)]


def _count(n):
    """Keras's: ``31,043 (121.26 KB)``, the float32 weights' size (a text, e.g. unbuilt, as it is)."""
    if not isinstance(n, int):
        return n
    size, unit = float(4 * n), "B"
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if size < 1024 or unit == "TB":
            break
        size /= 1024
    return f"{n:,} ({size:.2f} {unit})"


def _layer_range(layers, layer_range):
    """Keras's ``layer_range=[first, last]``: the rows from the first layer whose name matches
    ``first`` (a pattern) to the last one matching ``last``."""
    import re
    if layer_range is None:
        return list(layers)
    if not isinstance(layer_range, (list, tuple)) or len(layer_range) != 2 or \
            not all(isinstance(p, str) for p in layer_range):
        raise ValueError(f"layer_range must be a list of two layer-name patterns, got {layer_range!r}")
    names = [l.name for l in layers]
    first = [i for i, n in enumerate(names) if re.match(layer_range[0], n)]
    last = [i for i, n in enumerate(names) if re.match(layer_range[1], n)]
    if not first or not last or first[0] > last[-1]:
        raise ValueError(f"layer_range {list(layer_range)} matches no range of the model's layers {names}")
    return list(layers)[first[0]:last[-1] + 1]


def built_without_graph(model):
    """A subclassed model its own build() built (``built``) before any graph was made."""
    return bool(model.__dict__.get("_subclassed")) and model.__dict__.get("_topology") is None and \
        bool(model.__dict__.get("built"))


def print_summary(model, print_fn=print, line_length=None, show_trainable=False, layer_range=None, positions=None):
    """Keras's ``summary``: ``show_trainable`` adds whether each layer trains, ``layer_range``
    (two name patterns) limits the rows, ``line_length`` and ``positions`` set the table's
    width and columns.  (``expand_nested`` shapes Keras's rich-text table; taken, not used.)"""
    if callable(line_length) and print_fn is None:        # summary(print_fn) positionally, as before
        print_fn, line_length = line_length, None
    width = {"line_length": line_length, "positions": positions}
    if print_fn is None:
        print_fn = print
    awaits = getattr(model, "_awaits_data", None)
    if built_without_graph(model):
        # a subclassed model whose own build() built its layers (no graph yet): Keras's table, its
        # layers' weights counted, no shapes
        rows = [(f"{l.name} ({class_name(l)})", "?", f"{l.count_params():,}") for l in model.layers]
        total = model.count_params()
        trainable = sum(v.size for _, v in model.named_variables() if v.trainable)
        return print_table(model, rows, [total, trainable, total - trainable], print_fn, **width)
    if awaits is not None and awaits():
        # Keras 3's table of a model that waits for its first data: its layers, no shapes yet
        from pyggml.layers.layer import snake_case
        rows = [(f"{l.name or snake_case(type(l).__name__)} ({class_name(l)})", "?", "0 (unbuilt)")
                for l in model.layers]
        return print_table(model, rows, ["0 (unbuilt)"] * 3, print_fn, **width)
    topo = model._ensure_graph()
    rows = []
    shown = _layer_range(shown_layers(model), layer_range)
    for l in shown:
        nodes = [n for n in topo.nodes if n.layer is l]
        # a fixed batch size (Keras's Input(batch_shape=...)) shows, as in Keras
        shapes = [(n.batch_size,) + tuple(n.feature_shape) for n in nodes]
        shape = _shape(shapes) if len(nodes) > 1 else (_shape(shapes[0]) if nodes else "?")
        rows.append((f"{l.name} ({class_name(l)})", shape, f"{l.count_params():,}"))
    total = model.count_params()
    trainable = sum(v.size for _, v in model.named_variables() if v.trainable)
    print_table(model, rows, [total, trainable, total - trainable], print_fn, shown, show_trainable, **width)
