"""AugMix (Keras's layer): in training, each image goes through ``num_chains``
chains of up to ``chain_depth`` augmentations (each step picks one of the
augmentations or none, at random), the chains are mixed with weights drawn
from a Dirichlet(``alpha``) distribution, and the mix is blended with the
original image by a Beta(``alpha``, ``alpha``) draw ``w``: ``w * image + (1 - w) *
mix``, clipped to ``value_range``.  The augmentations: shear, translation,
rotation, posterization, solarization, auto-contrast, equalization, and with
``all_ops`` also brightness, colour degeneration, contrast and sharpness, all
at the strength ``factor``.  The identity in inference.

Keras 3 draws one set of chains and weights for the whole batch; here every
image draws its own (as in the AugMix paper)."""

import numpy as np

from pyggml._validation import check_bool, check_int, check_number
from pyggml.layers.preprocessing._augment_policies import (ALL_OPS, GEOMETRIC_AND_TONE_OPS, apply_per_image,
                                                          check_policy_args, check_policy_images, policy_ops)
from pyggml.layers.preprocessing._color_base import ColorChannels
from pyggml.layers.preprocessing.image_layer import RandomImageLayer
from pyggml.saving.object_registration import register_builtin

__all__ = ["AugMix"]


@register_builtin
class AugMix(ColorChannels, RandomImageLayer):
    """``AugMix(value_range=(0, 255), num_chains=3, chain_depth=3, factor=0.3, alpha=1.0, all_ops=True,
    interpolation="bilinear", seed=None, data_format=None)``."""

    def __init__(self, value_range=(0, 255), num_chains=3, chain_depth=3, factor=0.3, alpha=1.0, all_ops=True,
                 interpolation="bilinear", seed=None, data_format=None, **kwargs):
        super().__init__(seed=seed, data_format=data_format, **kwargs)
        self.value_range, self.factor = check_policy_args("AugMix", value_range, factor, interpolation)
        self.num_chains = check_int("AugMix: num_chains", num_chains, 1, 64)
        self.chain_depth = check_int("AugMix: chain_depth", chain_depth, 0, 64)
        self.alpha = check_number("AugMix: alpha", alpha, low=0.0, low_open=True)
        self.all_ops = check_bool("AugMix: all_ops", all_ops)
        self.interpolation = interpolation
        names = ALL_OPS if self.all_ops else GEOMETRIC_AND_TONE_OPS
        self._ops = list(policy_ops(self, names, self.factor, self.value_range, interpolation).values())

    def augment(self, images):
        check_policy_images(images, "AugMix")
        rng = self.rng()
        n = len(images)
        weights = rng.dirichlet([self.alpha] * self.num_chains, size=n)                        # (n, chains)
        # a tiny alpha can underflow every gamma draw of a row: such a row mixes the chains equally
        weights = np.where(np.isfinite(weights).all(axis=1, keepdims=True), weights, 1.0 / self.num_chains)
        weights = weights.astype(np.float32)
        keep = rng.beta(self.alpha, self.alpha, size=n).astype(np.float32)[:, None, None, None]
        mix = np.zeros_like(images)
        for c in range(self.num_chains):
            chain = images
            for _ in range(self.chain_depth):
                # one of the ops or, with index len(ops), none
                choice = rng.integers(0, len(self._ops) + 1, size=n)
                chain = apply_per_image(chain, self._ops, np.where(choice == len(self._ops), -1, choice))
            mix += weights[:, c, None, None, None] * chain
        out = keep * images + (1.0 - keep) * mix
        return np.clip(out, self.value_range[0], self.value_range[1]).astype(np.float32)

    def get_config(self):
        cfg = super().get_config()
        cfg.update(value_range=list(self.value_range), num_chains=self.num_chains, chain_depth=self.chain_depth,
                   factor=list(self.factor), alpha=self.alpha, all_ops=self.all_ops,
                   interpolation=self.interpolation)
        return cfg
