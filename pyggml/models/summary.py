"""``model.summary()``: Keras's table of layers, output shapes and parameters."""

__all__ = ["print_summary"]


def _shape(s):
    if isinstance(s, list):
        return ", ".join(_shape(x) for x in s)
    return str(tuple(s))                                  # (None, 4); (None,) for one number per sample


def _print_table(model, rows, totals, print_fn):
    """Keras's table: the model's name, a row per layer, then the parameter totals."""
    rows = [("Layer (type)", "Output Shape", "Param #")] + rows
    w = [max(len(r[i]) for r in rows) + 2 for i in range(3)]
    out = [f'Model: "{model.name}"', "-" * sum(w)]
    for k, r in enumerate(rows):
        out.append("".join(c.ljust(w[i]) for i, c in enumerate(r)))
        if k == 0:
            out.append("=" * sum(w))
    out += ["=" * sum(w)] + [f"{what} params: {n}" for what, n in zip(("Total", "Trainable", "Non-trainable"), totals)]
    print_fn("\n".join(out))


def print_summary(model, print_fn=print):
    awaits = getattr(model, "_awaits_data", None)
    if awaits is not None and awaits():
        # Keras 3's table of a model that waits for its first data: its layers, no shapes yet
        from pyggml.layers.layer import snake_case
        rows = [(f"{l.name or snake_case(type(l).__name__)} ({type(l).__name__})", "?", "0 (unbuilt)")
                for l in model.layers]
        return _print_table(model, rows, ["0 (unbuilt)"] * 3, print_fn)
    topo = model._ensure_graph()
    rows = []
    for l in model.layers:
        nodes = [n for n in topo.nodes if n.layer is l]
        # a fixed batch size (Keras's Input(batch_shape=...)) shows, as in Keras
        shapes = [(n.batch_size,) + tuple(n.feature_shape) for n in nodes]
        shape = _shape(shapes) if len(nodes) > 1 else (_shape(shapes[0]) if nodes else "?")
        rows.append((f"{l.name} ({type(l).__name__})", shape, str(l.count_params())))
    total = model.count_params()
    trainable = sum(v.size for _, v in model.named_variables() if v.trainable)
    _print_table(model, rows, [total, trainable, total - trainable], print_fn)
