"""``pg.tree``: Keras's ``keras.tree``, functions over nested structures.

A structure is a leaf, or a container of structures: a list, a tuple, a
namedtuple, a deque, or a mapping (dict, OrderedDict, defaultdict, ...).  Everything else is a leaf,
``None`` and strings included (Keras's rules).  Flattening visits a dict's items in
sorted key order and an OrderedDict's in its own order; rebuilding gives back the
same container types.

- ``is_nested``, ``flatten``, ``flatten_with_path``, ``unflatten_as`` /
  ``pack_sequence_as``, ``map_structure``, ``map_structure_up_to``,
  ``map_shape_structure``, ``assert_same_structure``, ``assert_same_paths``, ``traverse`` (with
  ``MAP_TO_NONE``), ``lists_to_tuples``.
"""

import collections
import collections.abc
import warnings

__all__ = ["is_nested", "flatten", "flatten_with_path", "unflatten_as", "pack_sequence_as", "map_structure",
           "map_structure_up_to", "map_shape_structure", "assert_same_structure", "assert_same_paths", "traverse",
           "lists_to_tuples", "MAP_TO_NONE"]


class _MapToNone:
    """The value ``traverse``'s function returns to put ``None`` in place of a node."""

    def __repr__(self):
        return "MAP_TO_NONE"


MAP_TO_NONE = _MapToNone()


def _is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def is_nested(structure):
    """Whether ``structure`` is a container (list, tuple, namedtuple, deque or mapping), not a leaf."""
    return isinstance(structure, (list, tuple, collections.deque, collections.abc.Mapping))


def _keys(mapping):
    if isinstance(mapping, collections.OrderedDict):
        return list(mapping.keys())
    try:
        return sorted(mapping.keys())
    except TypeError as e:
        raise TypeError(f"the keys of a dict in a structure must be sortable, got {list(mapping.keys())!r}") from e


def _children(node):
    """(keys, values) of a container, in flattening order."""
    if isinstance(node, collections.abc.Mapping):
        keys = _keys(node)
        return keys, [node[k] for k in keys]
    return list(range(len(node))), list(node)


def _rebuild(node, values):
    """A container like ``node`` holding ``values`` (in flattening order)."""
    if isinstance(node, collections.abc.Mapping):
        keys = _keys(node)
        items = dict(zip(keys, values))
        if isinstance(node, collections.defaultdict):
            out = collections.defaultdict(node.default_factory)
            for k in node:                      # the original insertion order
                out[k] = items[k]
            return out
        ordered = [(k, items[k]) for k in node]
        try:
            return type(node)(ordered)
        except TypeError:
            return dict(ordered)
    if _is_namedtuple(node):
        return type(node)(*values)
    if isinstance(node, tuple):
        return tuple(values) if type(node) is tuple else type(node)(values)
    return list(values) if type(node) is list else type(node)(values)


def flatten(structure):
    """The leaves of ``structure``, in order, as a list (a leaf alone gives ``[leaf]``)."""
    out = []
    stack = [structure]
    while stack:
        node = stack.pop()
        if is_nested(node):
            stack.extend(reversed(_children(node)[1]))
        else:
            out.append(node)
    return out


def flatten_with_path(structure):
    """``[(path, leaf), ...]``: each leaf with the tuple of keys and indices that reach it."""
    out = []

    def walk(node, path):
        if is_nested(node):
            for k, v in zip(*_children(node)):
                walk(v, path + (k,))
        else:
            out.append((path, node))
    walk(structure, ())
    return out


def pack_sequence_as(structure, flat_sequence):
    """The leaves of ``flat_sequence`` put into the shape of ``structure``."""
    if not isinstance(flat_sequence, (list, tuple)) and not is_nested(flat_sequence):
        raise TypeError(f"pack_sequence_as: flat_sequence must be a list or tuple, got {type(flat_sequence).__name__}")
    flat = list(flat_sequence)
    n = len(flatten(structure))
    if len(flat) != n:
        raise ValueError(f"pack_sequence_as: the structure has {n} leaves but flat_sequence has {len(flat)} "
                         f"elements (structure: {structure!r})")
    it = iter(flat)

    def make(node):
        if is_nested(node):
            return _rebuild(node, [make(v) for v in _children(node)[1]])
        return next(it)
    return make(structure)


def unflatten_as(structure, flat_sequence):
    """``pack_sequence_as(structure, flat_sequence)``."""
    return pack_sequence_as(structure, flat_sequence)


def _same(a, b, path, check_types=True):
    where = "".join(f"[{k!r}]" for k in path) or "the top level"
    if is_nested(a) != is_nested(b):
        raise ValueError(f"the structures differ at {where}: {type(a).__name__} and {type(b).__name__} "
                         f"(one is nested, the other a leaf)")
    if not is_nested(a):
        return
    a_map, b_map = isinstance(a, collections.abc.Mapping), isinstance(b, collections.abc.Mapping)
    if a_map != b_map or (check_types and not a_map and type(a) is not type(b)):
        raise ValueError(f"the structures differ at {where}: {type(a).__name__} and {type(b).__name__}")
    ka, va = _children(a)
    kb, vb = _children(b)
    if a_map and set(ka) != set(kb):
        raise ValueError(f"the structures differ at {where}: dict keys {sorted(map(repr, ka))} and "
                         f"{sorted(map(repr, kb))}")
    if len(va) != len(vb):
        raise ValueError(f"the structures differ at {where}: {len(va)} and {len(vb)} elements")
    for k, x in zip(ka, va):
        _same(x, b[k] if a_map else vb[k], path + (k,), check_types)


def assert_same_structure(a, b, check_types=None):
    """Raise a ValueError saying where, unless ``a`` and ``b`` have the same nesting: the same
    container types (a list is not a tuple, two namedtuple classes differ; dict, OrderedDict and
    defaultdict match when their keys do), the same lengths; the leaves may differ.
    ``check_types`` is deprecated in Keras and has no effect (a DeprecationWarning); use
    ``assert_same_paths`` for the looser check."""
    if check_types is not None:
        warnings.warn("assert_same_structure: check_types is deprecated and has no effect; "
                      "assert_same_paths is the looser check", DeprecationWarning, stacklevel=2)
    _same(a, b, (), True)


def assert_same_paths(a, b):
    """Raise a ValueError naming the paths that differ, unless ``a`` and ``b`` have the same
    paths to their leaves (container types are not compared: a list matches a tuple)."""
    pa = [p for p, _ in flatten_with_path(a)]
    pb = [p for p, _ in flatten_with_path(b)]
    if set(pa) != set(pb):
        only_a = sorted(set(pa) - set(pb), key=repr)
        only_b = sorted(set(pb) - set(pa), key=repr)
        raise ValueError(f"the structures have different paths: only in the first {only_a}, "
                         f"only in the second {only_b}")


def map_structure(func, *structures, none_is_leaf=True):
    """``func`` applied to the leaves of the structures in lockstep, in a structure like the first.
    ``none_is_leaf=False``: a None is an empty container, kept as None and not given to func."""
    if not callable(func):
        raise TypeError(f"map_structure: func must be callable, got {func!r}")
    if not structures:
        raise TypeError("map_structure needs at least one structure")
    for s in structures[1:]:
        assert_same_structure(structures[0], s)
    flats = [flatten(s) for s in structures]
    results = [None if not none_is_leaf and xs[0] is None else func(*xs) for xs in zip(*flats)]
    return pack_sequence_as(structures[0], results)


def map_structure_up_to(shallow_structure, func, *structures):
    """Like ``map_structure``, but only down to the leaves of ``shallow_structure``: what the
    structures hold below those is handed to ``func`` whole."""
    if not callable(func):
        raise TypeError(f"map_structure_up_to: func must be callable, got {func!r}")
    if not structures:
        raise TypeError("map_structure_up_to needs at least one structure")

    def cut(shallow, node, path):
        if not is_nested(shallow):
            return [node]
        where = "".join(f"[{k!r}]" for k in path) or "the top level"
        if not is_nested(node):
            raise ValueError(f"map_structure_up_to: the structure is a leaf at {where} where the shallow "
                             f"structure has a {type(shallow).__name__}")
        ks, vs = _children(shallow)
        if isinstance(shallow, collections.abc.Mapping):
            if not isinstance(node, collections.abc.Mapping):
                raise ValueError(f"map_structure_up_to: a {type(node).__name__} at {where} where the shallow "
                                 f"structure has a dict")
            missing = [k for k in ks if k not in node]
            if missing:
                raise ValueError(f"map_structure_up_to: keys {missing} missing at {where}")
            sub = [node[k] for k in ks]
        else:
            if isinstance(node, collections.abc.Mapping) or len(node) != len(vs):
                raise ValueError(f"map_structure_up_to: at {where} the shallow structure has {len(vs)} elements, "
                                 f"the structure {type(node).__name__} of "
                                 f"{len(node) if is_nested(node) else 1}")
            sub = list(node)
        out = []
        for k, s, n in zip(ks, vs, sub):
            out += cut(s, n, path + (k,))
        return out
    flats = [cut(shallow_structure, s, ()) for s in structures]
    return pack_sequence_as(shallow_structure, [func(*xs) for xs in zip(*flats)])


def _is_shape(x):
    return isinstance(x, (list, tuple)) and not _is_namedtuple(x) and all(
        v is None or (isinstance(v, int) and not isinstance(v, bool)) for v in x)


def map_shape_structure(func, structure):
    """``map_structure`` that treats shapes (tuples or lists of ints and None) as leaves."""
    def walk(node):
        if _is_shape(node) or not is_nested(node):
            return func(node)
        return _rebuild(node, [walk(v) for v in _children(node)[1]])
    return walk(structure)


def traverse(func, structure, top_down=True):
    """Apply ``func`` to every node (containers and leaves).

    Top down: a node for which ``func`` returns something other than None is replaced
    by that value and not entered; None leaves it in place and goes into its children.
    Bottom up: the children are done first, then ``func`` gets the node rebuilt from
    them; None keeps that node.  Return ``MAP_TO_NONE`` to put None in a node's place."""
    if not callable(func):
        raise TypeError(f"traverse: func must be callable, got {func!r}")

    def result(value, keep):
        if value is MAP_TO_NONE:
            return None
        return keep if value is None else value

    def down(node):
        got = func(node)
        if got is not None:
            return None if got is MAP_TO_NONE else got
        if is_nested(node):
            return _rebuild(node, [down(v) for v in _children(node)[1]])
        return node

    def up(node):
        if is_nested(node):
            node = _rebuild(node, [up(v) for v in _children(node)[1]])
        return result(func(node), node)
    return down(structure) if top_down else up(structure)


def lists_to_tuples(structure):
    """The same structure with every list turned into a tuple."""
    def convert(node):
        if not is_nested(node):
            return node
        values = [convert(v) for v in _children(node)[1]]
        if isinstance(node, list):
            return tuple(values)
        return _rebuild(node, values)
    return convert(structure)
