"""Regularization penalties and weight constraints of a model's layers, as graph ops.

A layer's weights carry Keras's options (``Variable.regularizer``,
``Variable.constraint``, set by ``add_weight``): one term (one rule) per weight,
taken on the weight in Keras's layout (``Variable.keras_axes``).  Where several
weights are one of Keras's (LSTM's two biases are Keras's one bias, their sum),
the layer keeps the option itself and says how it applies.

A layer adds terms of its own with ``extra_penalty_terms()`` and
``extra_constraint_rules()``, lists of:

- a penalty term: ``(variables, fn)``, ``fn(*tensors)`` -> the penalty (anything
  ``regularizers.penalty_tensor`` takes);
- a constraint rule: ``(variables, fn)``, ``fn(*tensors)`` -> the new value of
  each variable (a tensor in pyggml's layout, or None to leave it).

The executors put the sum of the penalties of the trainable weights (and the
losses layers add while the graph is built: activity regularizers,
``add_loss``) into the training loss, and apply the constraint rules of the
weights an optimizer step updated, reading the updated values.
"""

import numpy as np

from pyggml import _wide, ops
from pyggml.regularizers import penalty_tensor

__all__ = ["keras_view", "from_keras_view", "layer_tree", "penalty_terms", "constraint_rules", "total_penalty",
           "constraint_updates", "current_penalties"]


def keras_view(variable, t):
    """t (the variable's value in pyggml's layout) in Keras's layout."""
    shape, axes = variable.keras_shape, variable.keras_axes
    if shape is not None:
        t = ops.reshape(t if t.is_contiguous else ops.cont(t), tuple(shape))
    return t if axes is None else ops.permute_axes(t, axes)


def from_keras_view(variable, t):
    """A value in Keras's layout back in pyggml's."""
    axes = variable.keras_axes
    if axes is not None:
        t = ops.permute_axes(t, tuple(int(i) for i in np.argsort(axes)))
    if variable.keras_shape is not None:
        t = ops.reshape(t if t.is_contiguous else ops.cont(t), tuple(variable.shape))
    return t


def layer_tree(layers):
    """Every layer of ``layers``, their sublayers and the layers of nested models, once each."""
    out, seen = [], set()
    stack = list(reversed(list(layers)))
    while stack:
        l = stack.pop()
        if id(l) in seen:
            continue
        seen.add(id(l))
        out.append(l)
        children = list(l.__dict__.get("_sublayers", {}).values())
        topo = l.__dict__.get("_topology")
        if topo is not None:
            children += list(topo.layers)
        children += list(l.__dict__.get("_stack", ()))          # a Sequential's layers, before it is built
        stack.extend(reversed(children))
    return out


def _wide_weight(v):
    return len(v.shape) > 4


def _stored(v, t):
    """A weight's tensor as it is stored (a weight of more than four dimensions: 4-D, see Variable)."""
    return _wide.reshape(t, v.store_shape) if isinstance(t, _wide.Wide) else t


def _default_penalty(v):
    reg = v.regularizer

    def fn(t):
        if getattr(reg, "layout_free", False):
            return reg(_stored(v, t))
        return reg(t if _wide_weight(v) else keras_view(v, t))
    return fn


def _default_rule(v):
    con = v.constraint

    def fn(t):
        if getattr(con, "layout_free", False):
            return con(_stored(v, t))
        if _wide_weight(v):              # the projection sees the weight in its own shape (a Wide)
            return _stored(v, con(t if isinstance(t, _wide.Wide) else _wide.wrap(t, v.shape)))
        return from_keras_view(v, con(keras_view(v, t)))
    return fn


def penalty_terms(layer):
    """[(variables, fn)] of one layer's own weights (not its sublayers')."""
    terms = [([v], _default_penalty(v)) for v in layer.__dict__.get("_variables", ()) if v.regularizer is not None]
    extra = getattr(layer, "extra_penalty_terms", None)
    return terms + (list(extra()) if extra is not None else [])


def constraint_rules(layer):
    """[(variables, fn)] of one layer's own weights (not its sublayers')."""
    rules = [([v], _default_rule(v)) for v in layer.__dict__.get("_variables", ()) if v.constraint is not None]
    extra = getattr(layer, "extra_constraint_rules", None)
    return rules + (list(extra()) if extra is not None else [])


def total_penalty(layers, trainable, added=()):
    """The sum (a 1-element tensor) of the penalties of the trainable weights of
    ``layers`` and of the losses ``added`` while the graph was built, or None."""
    terms = []
    for layer in layer_tree(layers):
        for variables, fn in penalty_terms(layer):
            if any(v in trainable for v in variables):
                who = f"the regularization penalty of {layer.name or type(layer).__name__}"
                terms.append(penalty_tensor(fn(*[v.graph_tensor() for v in variables]), who))
    terms.extend(added)
    if not terms:
        return None
    total = terms[0]
    for t in terms[1:]:
        total = ops.add(total, t)
    return total


def constraint_updates(layers, updated):
    """Ops that write each constrained weight's projected value, for the weights an
    optimizer step updated; ``updated`` maps id(Variable) to the tensor holding its
    value after the update (the update op's result, so the projection follows it)."""
    outs = []
    for layer in layer_tree(layers):
        for variables, fn in constraint_rules(layer):
            if not any(id(v) in updated for v in variables):
                continue
            values = [updated[id(v)] if id(v) in updated else v.graph_tensor() for v in variables]
            new = fn(*values)
            if len(variables) == 1 and not isinstance(new, (list, tuple)):
                new = [new]
            if len(new) != len(variables):
                raise ValueError(f"a constraint rule of {layer.name or type(layer).__name__} returned {len(new)} "
                                 f"values for {len(variables)} weights")
            for v, n in zip(variables, new):
                if n is None:
                    continue
                target = _stored(v, v.graph_tensor())
                n = ops.as_tensor(_stored(v, n))
                if tuple(n.shape) != tuple(target.shape):
                    raise ValueError(f"the constraint of weight {v.name!r} returned shape {tuple(n.shape)}, the "
                                     f"weight has {tuple(target.shape)}")
                outs.append(ops.cpy(n if n.is_contiguous else ops.cont(n), target))
    return outs


def current_penalties(layers):
    """[float]: each penalty term of the trainable weights of ``layers`` at their current values."""
    from pyggml import _eager
    terms = []
    for layer in layer_tree(layers):
        for variables, fn in penalty_terms(layer):
            if any(v.trainable for v in variables):
                terms.append((variables, fn))
    if not terms:
        return []

    def graph():
        return [penalty_tensor(fn(*[v.graph_tensor() for v in variables])) for variables, fn in terms]
    from pyggml import autodiff
    if autodiff.active_tape() is not None:
        return graph()            # recorded: tensors of the tape, whose gradients reach the weights
    return [float(np.asarray(a).reshape(-1)[0]) for a in _eager.evaluate(graph, [])]


def record_call_losses(layer, losses):
    """Keras's ``layer.losses`` after a call outside a model's graph (on arrays, or on a
    GradientTape): ``losses`` [(owner layer, value)] of this call become the ``_call_losses``
    of their layers, those of ``layer``'s tree cleared first."""
    cleared = set()
    for l in layer_tree([layer]):
        l.__dict__["_call_losses"] = []
        cleared.add(id(l))
    for owner, value in losses:
        if owner is not None:
            if id(owner) not in cleared:
                owner.__dict__["_call_losses"] = []
                cleared.add(id(owner))
            owner.__dict__["_call_losses"].append(value)
