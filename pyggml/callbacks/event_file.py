"""TensorBoard's event files, written by hand (no tensorflow, no protobuf).

A file is a sequence of records: the data's length (8 bytes, little-endian),
the masked CRC-32C of those 8 bytes, the data, the masked CRC-32C of the data.
Each record's data is an ``Event`` protocol buffer; the first holds
``file_version = "brain.Event:2"``.  The fields written (numbers from
TensorFlow's event.proto and summary.proto):

- Event: wall_time (1, double), step (2, int64), file_version (3, string),
  summary (5, Summary)
- Summary: value (1, repeated Value)
- Summary.Value: tag (1, string), simple_value (2, float), image (4, Image), histo (5,
  HistogramProto), tensor (8, TensorProto), metadata (9, SummaryMetadata)
- Summary.Image: height (1), width (2), colorspace (3) (ints), encoded_image_string (4, a PNG)
- HistogramProto: min (1), max (2), num (3), sum (4), sum_squares (5) (doubles),
  bucket_limit (6, packed doubles), bucket (7, packed doubles)
- SummaryMetadata: plugin_data (1, PluginData: plugin_name (1), content (2));
  TensorProto: dtype (1, enum; 7 is DT_STRING), tensor_shape (2), string_val (8)
"""

import os
import socket
import struct
import threading
import time
import zlib

import numpy as np

__all__ = ["EventFileWriter", "crc32c", "masked_crc32c", "read_records"]


def _crc_table():
    poly = 0x82F63B78                      # CRC-32C (Castagnoli), reflected
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ poly if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc_table()


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in bytes(data):
        crc = _TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data):
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def record(data):
    """One record of the file format around ``data``."""
    header = struct.pack("<Q", len(data))
    return header + struct.pack("<I", masked_crc32c(header)) + data + struct.pack("<I", masked_crc32c(data))


def read_records(path):
    """The data of each record of an event file, the checksums checked (for tests and tools)."""
    out = []
    with open(path, "rb") as f:
        blob = f.read()
    pos = 0
    while pos < len(blob):
        if pos + 12 > len(blob):
            raise ValueError(f"{path}: a truncated record header at byte {pos}")
        header = blob[pos:pos + 8]
        (n,) = struct.unpack("<Q", header)
        (hcrc,) = struct.unpack("<I", blob[pos + 8:pos + 12])
        if hcrc != masked_crc32c(header):
            raise ValueError(f"{path}: a bad length checksum at byte {pos}")
        data = blob[pos + 12:pos + 12 + n]
        if len(data) != n or pos + 16 + n > len(blob):
            raise ValueError(f"{path}: a truncated record at byte {pos}")
        (dcrc,) = struct.unpack("<I", blob[pos + 12 + n:pos + 16 + n])
        if dcrc != masked_crc32c(data):
            raise ValueError(f"{path}: a bad data checksum at byte {pos}")
        out.append(data)
        pos += 16 + n
    return out


# --- protocol buffer encoding --------------------------------------------------------------------

def _varint(n):
    n &= (1 << 64) - 1                     # negative int64s as two's complement, as protobuf does
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _key(field, wire):
    return _varint((field << 3) | wire)


def _f_varint(field, n):
    return _key(field, 0) + _varint(int(n))


def _f_double(field, x):
    return _key(field, 1) + struct.pack("<d", float(x))


def _f_float(field, x):
    return _key(field, 5) + struct.pack("<f", float(x))


def _f_bytes(field, b):
    if isinstance(b, str):
        b = b.encode("utf-8")
    return _key(field, 2) + _varint(len(b)) + b


def _histogram(values, buckets=30):
    v = np.asarray(values, dtype=np.float64).ravel()
    v = v[np.isfinite(v)]
    if v.size == 0:
        lo = hi = 0.0
        limits, counts = [0.0], [0.0]
    else:
        lo, hi = float(v.min()), float(v.max())
        if lo == hi:
            limits, counts = [hi], [float(v.size)]
        else:
            counts, edges = np.histogram(v, bins=buckets, range=(lo, hi))
            limits, counts = edges[1:].tolist(), counts.astype(np.float64).tolist()
    packed_limits = b"".join(struct.pack("<d", x) for x in limits)
    packed_counts = b"".join(struct.pack("<d", x) for x in counts)
    return (_f_double(1, lo) + _f_double(2, hi) + _f_double(3, v.size) + _f_double(4, v.sum() if v.size else 0.0)
            + _f_double(5, float((v * v).sum()) if v.size else 0.0) + _f_bytes(6, packed_limits)
            + _f_bytes(7, packed_counts))


def scalar_value(tag, value):
    return _f_bytes(1, tag) + _f_float(2, value)


def histogram_value(tag, values):
    return _f_bytes(1, tag) + _f_bytes(5, _histogram(values))


def png(image):
    """A PNG file of an (height, width, channels) uint8 array, channels 1 (gray), 3 (RGB) or 4 (RGBA)."""
    image = np.ascontiguousarray(image, dtype=np.uint8)
    h, w, c = image.shape
    color = {1: 0, 3: 2, 4: 6}[c]

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    rows = b"".join(b"\x00" + image[r].tobytes() for r in range(h))       # filter type 0 on every row
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, color, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def image_value(tag, image):
    """An image summary of an (height, width, channels) uint8 array."""
    h, w, c = np.shape(image)
    img = _f_varint(1, h) + _f_varint(2, w) + _f_varint(3, c) + _f_bytes(4, png(image))
    return _f_bytes(1, tag) + _f_bytes(4, img)


def text_value(tag, text, plugin_name, content=b""):
    """A string tensor with a plugin's metadata (the Keras model config under "graph_keras_model")."""
    shape = b""                                            # a scalar: no dims
    tensor = _f_varint(1, 7) + _f_bytes(2, shape) + _f_bytes(8, text)
    plugin = _f_bytes(1, plugin_name) + (_f_bytes(2, content) if content else b"")
    metadata = _f_bytes(1, plugin)
    return _f_bytes(1, tag) + _f_bytes(8, tensor) + _f_bytes(9, metadata)


def event(step=None, summary_values=(), file_version=None, wall_time=None):
    data = _f_double(1, time.time() if wall_time is None else wall_time)
    if step is not None:
        data += _f_varint(2, step)
    if file_version is not None:
        data += _f_bytes(3, file_version)
    if summary_values:
        data += _f_bytes(5, b"".join(_f_bytes(1, v) for v in summary_values))
    return data


class EventFileWriter:
    """Appends events to ``events.out.tfevents.<time>.<host>.<pid>.<n>`` in ``logdir``
    (made if needed); each write is flushed, so TensorBoard sees it at once."""

    _count = [0]
    _lock = threading.Lock()

    def __init__(self, logdir):
        os.makedirs(logdir, exist_ok=True)
        with EventFileWriter._lock:
            EventFileWriter._count[0] += 1
            n = EventFileWriter._count[0]
        name = f"events.out.tfevents.{int(time.time())}.{socket.gethostname()}.{os.getpid()}.{n}.v2"
        self.path = os.path.join(logdir, name)
        self._file = open(self.path, "wb")
        self._write(event(file_version="brain.Event:2", step=0))

    def _write(self, data):
        if self._file is None:
            raise ValueError(f"the event file {self.path} is closed")
        self._file.write(record(data))
        self._file.flush()

    def add_values(self, step, values):
        """One event at ``step`` holding these Summary.Value encodings."""
        self._write(event(step=int(step), summary_values=list(values)))

    def scalar(self, tag, value, step):
        self.add_values(step, [scalar_value(tag, value)])

    def close(self):
        if self._file is not None:
            self._file.close()
            self._file = None
