"""Keras's layout ops written with reshapes, transposes and products (pyggml.ops):
``rearrange`` (einops's patterns) and ``fold`` (the inverse of ``unfold``: blocks summed back
into images).  Both work on arrays (at once) and on tensors in a graph, where they train
through the ops they are made of."""

import re
import sys

import numpy as np

from pyggml._validation import is_int

__all__ = ["rearrange", "fold"]

# names that are also ggml ops of pyggml.core.ops
SHARED_WITH_GGML = ()

def _k():
    """pyggml.ops (loaded before any of its ops is called): its public reshape, transpose and
    matmul take arrays and tensors of more than four dimensions too."""
    return sys.modules["pyggml.ops"]


_TOKEN = re.compile(r"\(|\)|\.\.\.|[A-Za-z_][A-Za-z0-9_]*|\S")


def _parse_side(text, side):
    """One side of a pattern as a list of axes: a name (a str; "..." for the axes an ellipsis
    stands for) or a parenthesised group (a list of names)."""
    groups, current = [], None
    for tok in _TOKEN.findall(text):
        if tok == "(":
            if current is not None:
                raise ValueError(f"rearrange: nested parentheses in the {side} side {text!r}")
            current = []
        elif tok == ")":
            if current is None:
                raise ValueError(f"rearrange: an unmatched ')' in the {side} side {text!r}")
            groups.append(current)
            current = None
        elif tok == "..." or tok[0].isalpha() or tok[0] == "_":
            (groups if current is None else current).append(tok)
        else:
            raise ValueError(f"rearrange: {tok!r} in the {side} side {text!r}: axes are names, '(...)' "
                             "groups and one '...'")
    if current is not None:
        raise ValueError(f"rearrange: an unclosed '(' in the {side} side {text!r}")
    names = [n for g in groups for n in ([g] if isinstance(g, str) else g)]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"rearrange: {dup} appear more than once in the {side} side {text!r}")
    if names.count("...") > 1:
        raise ValueError(f"rearrange: more than one '...' in the {side} side {text!r}")
    return groups


def _split(pattern):
    if not isinstance(pattern, str) or pattern.count("->") != 1:
        raise ValueError(f"rearrange: the pattern must be a string 'input axes -> output axes', got {pattern!r}")
    left, right = pattern.split("->")
    return _parse_side(left, "input"), _parse_side(right, "output")


def _lengths(groups, shape, axes_lengths):
    """Each name's length from the input's shape and the given lengths (one unknown per group)."""
    if any("..." in g for g in groups if isinstance(g, list)):
        raise ValueError("rearrange: '...' cannot be inside a group of the input side")
    if "..." in groups:
        fixed = len(groups) - 1
        if len(shape) < fixed:
            raise ValueError(f"rearrange: the input has {len(shape)} axes, the pattern at least {fixed}")
        at = groups.index("...")
        n_ell = len(shape) - fixed
        ell = [f"...{i}" for i in range(n_ell)]
        groups = groups[:at] + ell + groups[at + 1:]
    else:
        ell = []
        if len(groups) != len(shape):
            raise ValueError(f"rearrange: the pattern's input side has {len(groups)} axes, the input "
                             f"{len(shape)} (shape {tuple(shape)})")
    groups = [[g] if isinstance(g, str) else g for g in groups]
    known = dict(axes_lengths)
    for group, size in zip(groups, shape):
        unknown = [n for n in group if n not in known]
        product = int(np.prod([known[n] for n in group if n in known])) if len(unknown) < len(group) else 1
        if len(unknown) > 1:
            raise ValueError(f"rearrange: the lengths of {unknown} in ({' '.join(group)}) are unknown: give all "
                             "but one as keyword arguments")
        if unknown:
            if product == 0 or size % product:
                raise ValueError(f"rearrange: an axis of length {size} cannot split into ({' '.join(group)}) "
                                 f"with {dict((n, known[n]) for n in group if n in known)}")
            known[unknown[0]] = size // product
        elif product != size:
            raise ValueError(f"rearrange: ({' '.join(group)}) is {product} long but its axis has {size}")
    return groups, known, ell


def rearrange(tensor, pattern, **axes_lengths):
    """Keras's ``ops.rearrange`` (einops's): ``"b h w c -> b c h w"`` reorders axes, ``"(b h)"``
    merges them, ``"(h1 h)"`` on the input side splits one (give all but one length as keywords:
    ``h1=2``), and ``...`` stands for the axes the pattern does not name.  A reshape, a transpose
    and a reshape, in a graph too."""
    for k, v in axes_lengths.items():
        if not is_int(v) or v < 1:
            raise ValueError(f"rearrange: the length {k}={v!r} must be a positive int")
    left, right = _split(pattern)
    shape = tuple(int(d) for d in np.shape(tensor)) if not hasattr(tensor, "shape") else \
        tuple(int(d) for d in tensor.shape)
    left, known, ell = _lengths(left, shape, axes_lengths)
    if not ell and any("..." in ([g] if isinstance(g, str) else g) for g in right) and "..." not in _split(pattern)[0]:
        raise ValueError(f"rearrange: {pattern!r} has '...' on the output side only")
    # "..." on the output side: the ellipsis's axes kept apart, or merged inside a group
    out_groups = []
    for g in right:
        if g == "...":
            out_groups.extend([e] for e in ell)
        elif isinstance(g, str):
            out_groups.append([g])
        else:
            out_groups.append([m for n in g for m in (ell if n == "..." else [n])])
    right = out_groups
    in_names = [n for g in left for n in g]
    out_names = [n for g in right for n in g]
    extra, missing = sorted(set(out_names) - set(in_names)), sorted(set(in_names) - set(out_names))
    if extra or missing:
        raise ValueError(f"rearrange: {pattern!r} names {extra or missing} on one side only (rearrange "
                         "neither adds nor drops axes)")
    unused = sorted(set(axes_lengths) - set(in_names))
    if unused:
        raise ValueError(f"rearrange: lengths given for {unused}, which the input side does not name")
    x = tensor
    split_shape = tuple(known[n] for n in in_names)
    if split_shape != shape:
        x = _k().reshape(x, split_shape)
    order = tuple(in_names.index(n) for n in out_names)
    if order != tuple(range(len(order))):
        x = _k().transpose(x, order)
    out_shape = tuple(int(np.prod([known[n] for n in g])) for g in right)
    if out_shape != split_shape or len(out_shape) != len(split_shape):
        x = _k().reshape(x, out_shape)
    return x


def _pair(v, what, name, low):
    t = (v, v) if is_int(v) else tuple(v) if isinstance(v, (list, tuple)) else None
    if t is None or len(t) != 2 or not all(is_int(e) and e >= low for e in t):
        raise ValueError(f"{what}: {name} must be an int >= {low} or 2 of them, got {v!r}")
    return tuple(int(e) for e in t)


def _placement(out, blocks, k, d, s, p):
    """The constant (k * blocks, out) matrix that puts the block entry at kernel offset i and
    block j onto position j * s + i * d - p (entries that land in the padding are dropped)."""
    m = np.zeros((k * blocks, out), dtype=np.float32)
    for i in range(k):
        pos = np.arange(blocks) * s + i * d - p
        ok = (pos >= 0) & (pos < out)
        m[i * blocks + np.arange(blocks)[ok], pos[ok]] = 1.0
    return m


def fold(x, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """Keras's (and PyTorch's) ``fold``: columns (N, C * kh * kw, L) of sliding blocks summed
    back into images (N, C, H, W), ``output_size`` (H, W), the inverse layout of ``unfold``
    (overlapping entries add up).  Two products with constant placement matrices, in a graph
    too."""
    what = "fold"
    (h, w) = _pair(output_size, what, "output_size", 1)
    (kh, kw) = _pair(kernel_size, what, "kernel_size", 1)
    (dh, dw) = _pair(dilation, what, "dilation", 1)
    (sh, sw) = _pair(stride, what, "stride", 1)
    (ph, pw) = _pair(padding, what, "padding", 0)
    shape = tuple(int(v) for v in (x.shape if hasattr(x, "shape") else np.shape(x)))
    if len(shape) not in (2, 3):
        raise ValueError(f"{what}: the input must be (N, C * kh * kw, L) or (C * kh * kw, L), got shape {shape}")
    unbatched = len(shape) == 2
    if unbatched:
        x = _k().expand_dims(x, 0)
        shape = (1,) + shape
    n, ckk, blocks = shape
    span_h, span_w = (kh - 1) * dh + 1, (kw - 1) * dw + 1
    oh, ow = (h + 2 * ph - span_h) // sh + 1, (w + 2 * pw - span_w) // sw + 1
    if h + 2 * ph < span_h or w + 2 * pw < span_w:
        raise ValueError(f"{what}: the padded output {(h + 2 * ph, w + 2 * pw)} is smaller than the (dilated) "
                         f"kernel {(span_h, span_w)}")
    if ckk % (kh * kw):
        raise ValueError(f"{what}: the input's axis 1 ({ckk}) must be channels x {kh} x {kw}")
    if blocks != oh * ow:
        raise ValueError(f"{what}: {blocks} blocks given, but an output of {(h, w)} with kernel {(kh, kw)}, "
                         f"dilation {(dh, dw)}, padding {(ph, pw)} and stride {(sh, sw)} has {oh} x {ow} = "
                         f"{oh * ow}")
    c = ckk // (kh * kw)
    if n * c * kh * max(oh * kw * ow, w * oh) > (1 << 31) - 1 or max(kw * ow * w, kh * oh * h) > 1 << 28:
        raise ValueError(f"{what}: {shape} into {(h, w)} is too large")
    # rows (n c i oh, j ow) -> columns placed along W, then (n c, W, i oh) placed along H
    y = _k().reshape(x, (n * c * kh, kw, oh, ow))
    y = _k().reshape(_k().transpose(y, (0, 2, 1, 3)), (n * c * kh * oh, kw * ow))
    y = _k().matmul(y, _placement(w, ow, kw, dw, sw, pw))                      # (n c kh oh, W)
    y = _k().transpose(_k().reshape(y, (n * c, kh * oh, w)), (0, 2, 1))      # (n c, W, kh oh)
    y = _k().matmul(y, _placement(h, oh, kh, dh, sh, ph))                      # (n c, W, H)
    y = _k().reshape(_k().transpose(y, (0, 2, 1)), (n, c, h, w))
    return _k().squeeze(y, 0) if unbatched else y
