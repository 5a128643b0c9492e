"""PReLU: ``max(x, 0) + alpha * min(x, 0)`` with a learned ``alpha`` (Keras's weight name)."""

from pyggml import ops
from pyggml._validation import is_int
from pyggml.layers._helpers import set_weight_options, weight_options_config
from pyggml.layers.layer import Layer
from pyggml.saving.object_registration import register_builtin

__all__ = ["PReLU"]


@register_builtin
class PReLU(Layer):
    """``alpha`` has the input's shape without the batch, with 1 on the
    ``shared_axes`` (counted from 1, as Keras): ``shared_axes=[1, 2]`` on images
    gives one slope per channel."""

    supports_masking = True

    def __init__(self, alpha_initializer="zeros", alpha_regularizer=None, alpha_constraint=None,
                 shared_axes=None, **kwargs):
        super().__init__(**kwargs)
        set_weight_options(self, alpha_regularizer=alpha_regularizer, alpha_constraint=alpha_constraint)
        from pyggml import initializers
        initializers.get(alpha_initializer)
        self.alpha_initializer = alpha_initializer
        if shared_axes is None:
            self.shared_axes = None
        else:
            axes = (shared_axes,) if is_int(shared_axes) else tuple(shared_axes)
            if not axes or any(not is_int(a) or a < 1 for a in axes) or len(set(axes)) != len(axes):
                raise ValueError(f"PReLU: shared_axes must be distinct axes counted from 1, got {shared_axes!r}")
            self.shared_axes = tuple(int(a) for a in axes)

    def compute_output_shape(self, input_shape):
        return input_shape

    def build(self, input_shape):
        shape = list(input_shape[1:])
        for a in self.shared_axes or ():
            if a > len(shape):
                raise ValueError(f"PReLU: shared axis {a} is out of range for inputs of shape {tuple(shape)}")
            shape[a - 1] = 1
        if any(d is None for d in shape):
            raise ValueError(f"PReLU: inputs of shape {tuple(input_shape[1:])} have a variable length; share "
                             f"that axis (shared_axes)")
        self.alpha = self.add_weight("alpha", tuple(shape), self.alpha_initializer,
                                     regularizer=self.alpha_regularizer, constraint=self.alpha_constraint)

    def call(self, inputs, training=None):
        x = ops.as_tensor(inputs)
        # relu(x) - alpha * relu(-x)
        return ops.sub(ops.relu(x), ops.mul(ops.relu(ops.neg(x)), self.alpha))

    def get_config(self):
        cfg = super().get_config()
        cfg["shared_axes"] = None if self.shared_axes is None else list(self.shared_axes)
        cfg.update(weight_options_config(self, ("alpha_regularizer", "alpha_constraint")))
        from pyggml.initializers import config_value
        if config_value(self.alpha_initializer) is not None:        # a name or an Initializer instance
            cfg["alpha_initializer"] = config_value(self.alpha_initializer)
        return cfg
