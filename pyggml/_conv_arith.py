"""The padding and size arithmetic of convolutions and pooling, shared by the layers
(pyggml.layers.convolutional) and Keras's functions (pyggml._ops_nn): plain ints, no
graph, so either side imports it without importing the other."""

__all__ = ["same_pads", "valid_size", "transpose_pads", "transpose_out_size"]


def same_pads(size, k, s):
    """(output size, pad before, pad after) of padding="same"."""
    out = -(-size // s)
    total = max((out - 1) * s + k - size, 0)
    return out, total // 2, total - total // 2


def valid_size(size, k, s):
    return (size - k) // s + 1


def transpose_pads(k, s, padding, output_padding):
    """(before, after) padding of the zero-inserted input of a transposed convolution (the
    equivalent stride-1 convolution with the flipped kernel of span k), Keras 3's rule."""
    if padding == "valid":
        op = max(k, s) - k if output_padding is None else output_padding
        return k - 1, k - 1 + op
    pad_len = s + k - 2 if output_padding is None else k + k % 2 - 2 + output_padding
    before = min(pad_len // 2 + pad_len % 2, k - 1)
    return before, pad_len - before


def transpose_out_size(size, k, s, padding, output_padding):
    """Keras's output length of a transposed convolution (None stays None)."""
    if size is None:
        return None
    before, after = transpose_pads(k, s, padding, output_padding)
    return (size - 1) * s + 1 + before + after - k + 1
