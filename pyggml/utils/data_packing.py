"""Keras's ``pack_x_y_sample_weight`` and ``unpack_x_y_sample_weight``: the tuple
forms of one batch (``x``, ``(x,)``, ``(x, y)``, ``(x, y, sample_weight)``)."""

__all__ = ["pack_x_y_sample_weight", "unpack_x_y_sample_weight"]


def pack_x_y_sample_weight(x, y=None, sample_weight=None):
    """The batch as fit takes it: ``x`` alone (or ``(x,)`` when x is itself a tuple or list,
    so that it is not read as (x, y)), ``(x, y)``, or ``(x, y, sample_weight)``."""
    if y is None:
        if sample_weight is not None:
            raise ValueError("pack_x_y_sample_weight: a sample_weight needs a y")
        return (x,) if isinstance(x, (tuple, list)) else x
    if sample_weight is None:
        return (x, y)
    return (x, y, sample_weight)


def unpack_x_y_sample_weight(data):
    """``(x, y, sample_weight)`` of a batch, None for the parts it lacks."""
    if isinstance(data, list):
        data = tuple(data)
    if not isinstance(data, tuple):
        return (data, None, None)
    if len(data) == 1:
        return (data[0], None, None)
    if len(data) == 2:
        return (data[0], data[1], None)
    if len(data) == 3:
        return (data[0], data[1], data[2])
    raise ValueError(f"a batch is x, (x,), (x, y) or (x, y, sample_weight); got a tuple of {len(data)} parts")
