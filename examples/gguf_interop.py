#!/usr/bin/env python3
"""pyggml's GGUF files and the ``gguf`` package (llama.cpp's own Python reader/writer).

1. Train a small model and save it with ``model.save``.
2. Read the file with ``gguf.GGUFReader``: print every key and every tensor's
   shape, check the tensors against ``model.get_weights()``, and show that
   reading changed nothing in the file.
3. Write weights with ``gguf.GGUFWriter`` (a least-squares fit computed in
   numpy, outside pyggml) and load them into a pyggml model with
   ``model.load_weights``.  That works because ``load_weights`` needs only what
   ``save_weights`` writes: ``general.architecture = "pyggml"``, the u32
   ``pyggml.format_version`` and one f32 tensor per weight, named
   ``<layer>.<weight>`` in pyggml's (PyTorch's) layout, e.g. ``dense.weight``
   of numpy shape (units, in_features).  GGUFWriter stores a numpy array's
   shape reversed (GGUF's ne order), as pyggml does.

    pip install gguf && python examples/gguf_interop.py
"""

import hashlib
import json
import os
import sys
import tempfile

import numpy as np

import pyggml as pg

try:
    import gguf
except ImportError:
    print("This example needs the gguf package (llama.cpp's GGUF reader and writer): pip install gguf",
          file=sys.stderr)
    sys.exit(2)


def field_value(field):
    """A GGUFReader field as a Python value (str, number or list)."""
    if hasattr(field, "contents"):
        return field.contents()
    # older gguf: strings are bytes parts, scalars one-element arrays
    vt = field.types[0]
    if vt == gguf.GGUFValueType.STRING:
        return bytes(field.parts[field.data[0]]).decode("utf-8")
    if vt == gguf.GGUFValueType.ARRAY:
        return [field.parts[i].tolist() for i in field.data]
    return field.parts[field.data[0]][0].item()


def shown(value, width=70):
    s = value if isinstance(value, str) else repr(value)
    return s if len(s) <= width else s[:width - 3] + "..."


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def main():
    tmp = tempfile.TemporaryDirectory(prefix="pyggml-gguf-")
    rng = np.random.default_rng(0)

    # --- 1. a trained model, saved ---------------------------------------------------
    x = rng.normal(size=(256, 4)).astype(np.float32)
    y = np.eye(3, dtype=np.float32)[(x[:, 0] + x[:, 1] > 0).astype(int) + (x[:, 2] > 1)]
    pg.set_seed(0)
    model = pg.Sequential([pg.layers.Dense(8, activation="relu"), pg.layers.Dense(3, activation="softmax")],
                          input_shape=4, name="small_classifier")
    model.compile(optimizer="adam", loss="categorical_crossentropy", metrics=["accuracy"])
    model.fit(x, y, epochs=5, batch_size=32, verbose=0)
    path = os.path.join(tmp.name, "small_classifier.gguf")
    model.save(path)
    print(f"saved {path} ({os.path.getsize(path)} bytes)")

    # --- 2. read it with gguf's reader --------------------------------------------------
    before = sha256(path)
    reader = gguf.GGUFReader(path, "r")
    print(f"\nGGUF keys ({len(reader.fields)}):")
    for name, field in reader.fields.items():
        if name.startswith("GGUF."):       # the header, as the reader reports it
            continue
        kind = field.types[0].name if field.types else "?"
        print(f"  {name:<28} {kind:<8} {shown(field_value(field))}")
    config = json.loads(field_value(reader.fields["pyggml.config"]))
    print(f"  (pyggml.config holds {len(config['layers'])} layers: "
          f"{', '.join(l['class_name'] for l in config['layers'])})")

    weights = model.get_weights()
    print(f"\nGGUF tensors ({len(reader.tensors)}):")
    print(f"  {'name':<24} {'type':<5} {'ne (GGUF)':<12} numpy shape")
    for t in reader.tensors:
        print(f"  {t.name:<24} {t.tensor_type.name:<5} {str(list(map(int, t.shape))):<12} {t.data.shape}")
    for k, w in weights.items():
        t = next(t for t in reader.tensors if t.name == k)
        if not np.array_equal(np.asarray(t.data).reshape(w.shape), w):
            raise SystemExit(f"tensor {k} differs from model.get_weights()")
    print(f"all {len(weights)} weights equal model.get_weights(); the other tensors are Adam's moments")
    del reader
    print(f"file unchanged by reading: {sha256(path) == before}")

    # --- 3. weights written by gguf's writer, loaded into pyggml ---------------------------
    # a linear regression solved in numpy, stored as a Dense layer's weight and bias
    xr = rng.normal(size=(200, 5)).astype(np.float32)
    yr = xr @ rng.normal(size=(5, 2)).astype(np.float32) + np.array([0.5, -1.0], np.float32)
    coef, *_ = np.linalg.lstsq(np.hstack([xr, np.ones((200, 1), np.float32)]), yr, rcond=None)
    w_np, b_np = coef[:5].T.astype(np.float32), coef[5].astype(np.float32)   # (units, in), (units,)

    wpath = os.path.join(tmp.name, "from_gguf_writer.gguf")
    writer = gguf.GGUFWriter(wpath, arch="pyggml")     # sets general.architecture = "pyggml"
    writer.add_name("linear_from_numpy")
    writer.add_uint32("pyggml.format_version", 1)
    writer.add_tensor("dense.weight", np.ascontiguousarray(w_np))
    writer.add_tensor("dense.bias", b_np)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()

    linear = pg.Sequential([pg.layers.Dense(2)], input_shape=5)
    linear.compile(optimizer="sgd", loss="mse")
    linear.load_weights(wpath)
    got = linear.predict(xr)
    want = xr @ w_np.T + b_np
    print(f"\nwrote dense.weight {w_np.shape} and dense.bias {b_np.shape} with GGUFWriter; "
          f"loaded with load_weights: predictions match numpy (max |difference| "
          f"{float(np.max(np.abs(got - want))):.2e}): {bool(np.allclose(got, want, atol=1e-5))}")

    # a file without a weight the model needs is refused, naming it
    bad = os.path.join(tmp.name, "missing_bias.gguf")
    writer = gguf.GGUFWriter(bad, arch="pyggml")
    writer.add_uint32("pyggml.format_version", 1)
    writer.add_tensor("dense.weight", np.ascontiguousarray(w_np))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    try:
        linear.load_weights(bad)
        print("a file missing dense.bias was accepted (unexpected)")
        return 1
    except pg.GGMLError as e:
        print(f"a file without dense.bias is refused: {e}")
    finally:
        linear.free()
        model.free()
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
