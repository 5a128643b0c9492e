"""ActivityRegularization: the identity, adding an L1/L2 penalty of its input to the loss."""

from pyggml.layers.layer import Layer
from pyggml.regularizers import L1L2
from pyggml.saving.object_registration import register_builtin

__all__ = ["ActivityRegularization"]


@register_builtin
class ActivityRegularization(Layer):
    """``ActivityRegularization(l1=0.0, l2=0.0)``: passes its input on unchanged and adds
    ``l1 * sum(|x|) + l2 * sum(x**2)``, divided by the batch size (Keras 3's activity
    regularizers), to the training loss; ``layer.losses`` after a call on arrays holds it."""

    supports_masking = True

    def __init__(self, l1=0.0, l2=0.0, **kwargs):
        if "activity_regularizer" in kwargs:
            raise TypeError("ActivityRegularization: the penalty is given by l1 and l2, not activity_regularizer")
        reg = L1L2(l1=l1, l2=l2)
        super().__init__(activity_regularizer=reg, **kwargs)
        self.l1, self.l2 = reg.l1, reg.l2

    def compute_output_shape(self, input_shape):
        return input_shape

    def call(self, inputs):
        return inputs

    def get_config(self):
        c = super().get_config()
        c.pop("activity_regularizer", None)
        c.update(l1=self.l1, l2=self.l2)
        return c
