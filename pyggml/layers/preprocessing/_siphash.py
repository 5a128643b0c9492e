"""SipHash-2-4 (Aumasson and Bernstein, 2012), the 64-bit keyed hash TensorFlow's
``to_hash_bucket_strong`` uses, so that ``Hashing(salt=...)`` puts a value in the
same bin as Keras.  Written from the paper's specification; checked against the
paper's test vector and Keras's documented bins in the tests."""

__all__ = ["siphash24"]

_M = (1 << 64) - 1


def _rotl(v, s):
    return ((v << s) | (v >> (64 - s))) & _M


def _rounds(v0, v1, v2, v3, n):
    for _ in range(n):
        v0 = (v0 + v1) & _M
        v1 = _rotl(v1, 13) ^ v0
        v0 = _rotl(v0, 32)
        v2 = (v2 + v3) & _M
        v3 = _rotl(v3, 16) ^ v2
        v0 = (v0 + v3) & _M
        v3 = _rotl(v3, 21) ^ v0
        v2 = (v2 + v1) & _M
        v1 = _rotl(v1, 17) ^ v2
        v2 = _rotl(v2, 32)
    return v0, v1, v2, v3


def siphash24(k0, k1, data):
    """The 64-bit SipHash-2-4 of ``data`` (bytes, or a str as UTF-8) under the key
    (k0, k1): the key's two little-endian 64-bit halves."""
    m = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    v0 = k0 ^ 0x736F6D6570736575
    v1 = k1 ^ 0x646F72616E646F6D
    v2 = k0 ^ 0x6C7967656E657261
    v3 = k1 ^ 0x7465646279746573
    n = len(m)
    full = n - n % 8
    for i in range(0, full, 8):
        w = int.from_bytes(m[i:i + 8], "little")
        v3 ^= w
        v0, v1, v2, v3 = _rounds(v0, v1, v2, v3, 2)
        v0 ^= w
    # the last block: the remaining bytes, the length's low byte at the top
    w = int.from_bytes(m[full:], "little") | ((n & 0xFF) << 56)
    v3 ^= w
    v0, v1, v2, v3 = _rounds(v0, v1, v2, v3, 2)
    v0 ^= w
    v2 ^= 0xFF
    v0, v1, v2, v3 = _rounds(v0, v1, v2, v3, 4)
    return v0 ^ v1 ^ v2 ^ v3
