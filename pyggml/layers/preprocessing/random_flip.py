"""RandomFlip (Keras's layer): in training, each image flipped with probability
1/2: left-right ("horizontal"), top-bottom ("vertical"), or, with
"horizontal_and_vertical" (the default), both at once on the same draw, as
Keras 3 does.  The identity in inference."""

from pyggml.layers.preprocessing.image_layer import RandomImageLayer
from pyggml.saving.object_registration import register_builtin

__all__ = ["RandomFlip"]

MODES = ("horizontal", "vertical", "horizontal_and_vertical")


@register_builtin
class RandomFlip(RandomImageLayer):
    """``RandomFlip(mode="horizontal_and_vertical", seed=None, data_format=None)``."""

    def __init__(self, mode="horizontal_and_vertical", seed=None, data_format=None, **kwargs):
        super().__init__(seed=seed, data_format=data_format, **kwargs)
        if mode not in MODES:
            raise ValueError(f"RandomFlip: mode must be one of {MODES}, got {mode!r}")
        self.mode = mode

    def augment(self, images):
        flip = self.rng().uniform(size=len(images)) <= 0.5
        out = images.copy()
        if self.mode != "vertical":
            out[flip] = out[flip][:, :, ::-1]
        if self.mode != "horizontal":
            out[flip] = out[flip][:, ::-1]
        return out

    def graph_augment(self, images):
        from pyggml.layers.preprocessing import _augment_graph

        def plan(n, h, w):
            flips = self.rng().uniform(size=n) <= 0.5
            rows = _augment_graph.flip_plan(n, h, w, flips, self.mode != "vertical", self.mode != "horizontal")
            return rows, None, None
        return _augment_graph.resample(self, images, plan, 1, False, False)

    def get_config(self):
        cfg = super().get_config()
        cfg["mode"] = self.mode
        return cfg
