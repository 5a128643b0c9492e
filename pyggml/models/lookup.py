"""``model.get_layer(name=None, index=None)``: a layer by its position, by its name, or (a
subclassed model's) by the attribute that holds it."""

from pyggml._validation import is_int

__all__ = ["get_layer"]


def get_layer(model, name=None, index=None):
    layers = model.layers
    if (name is None) == (index is None):
        raise ValueError("give exactly one of name and index")
    if index is not None:
        if not is_int(index):
            raise TypeError("index must be an int")
        if not -len(layers) <= index < len(layers):
            raise ValueError(f"index {index} out of range for {len(layers)} layers")
        return layers[index]
    for layer in layers:
        if layer.name == name:
            return layer
    held = model.__dict__.get("_sublayers", {})
    for path, layer in held.items():                # ("layer_list_0" for layer_list[0])
        if name in (path, path.replace(".", "_")):
            return layer
    raise ValueError(f"no layer named {name!r}; layers: {[layer.name for layer in layers]}")
