"""``keras.applications.resnet_v2``: ResNet50V2, ResNet101V2 and ResNet152V2 (He et al.,
"Identity Mappings in Deep Residual Networks", 2016): the pre-activation residual
blocks (batch normalization and ReLU before each convolution), with Keras's layer
names (``conv2_block1_preact_bn``, ..., ``conv5_block3_out``, ``post_bn``, ``post_relu``).

Their inputs are preprocessed with ``preprocess_input`` ("tf": pixels to [-1, 1])."""

from pyggml.applications import imagenet_utils
from pyggml.applications._base import add_arguments_doc, arguments_doc
from pyggml.applications.resnet import build_resnet, stack_residual_blocks_v2

__all__ = ["ResNet50V2", "ResNet101V2", "ResNet152V2", "preprocess_input", "decode_predictions"]


def _v2_stages(blocks):
    def stack_fn(x):
        x = stack_residual_blocks_v2(x, 64, blocks[0], name="conv2")
        x = stack_residual_blocks_v2(x, 128, blocks[1], name="conv3")
        x = stack_residual_blocks_v2(x, 256, blocks[2], name="conv4")
        return stack_residual_blocks_v2(x, 512, blocks[3], stride1=1, name="conv5")
    return stack_fn


def ResNet50V2(include_top=True, weights="imagenet", input_tensor=None, input_shape=None, pooling=None,
               classes=1000, classifier_activation="softmax", name="resnet50v2"):
    """ResNet50V2: stages of 3, 4, 6 and 3 pre-activation blocks (25.6M parameters with the top)."""
    return build_resnet(_v2_stages((3, 4, 6, 3)), True, True, include_top, weights, input_tensor, input_shape,
                        pooling, classes, classifier_activation, name)


def ResNet101V2(include_top=True, weights="imagenet", input_tensor=None, input_shape=None, pooling=None,
                classes=1000, classifier_activation="softmax", name="resnet101v2"):
    """ResNet101V2: stages of 3, 4, 23 and 3 pre-activation blocks (44.7M parameters with the top)."""
    return build_resnet(_v2_stages((3, 4, 23, 3)), True, True, include_top, weights, input_tensor, input_shape,
                        pooling, classes, classifier_activation, name)


def ResNet152V2(include_top=True, weights="imagenet", input_tensor=None, input_shape=None, pooling=None,
                classes=1000, classifier_activation="softmax", name="resnet152v2"):
    """ResNet152V2: stages of 3, 8, 36 and 3 pre-activation blocks (60.4M parameters with the top)."""
    return build_resnet(_v2_stages((3, 8, 36, 3)), True, True, include_top, weights, input_tensor, input_shape,
                        pooling, classes, classifier_activation, name)


add_arguments_doc((ResNet50V2, ResNet101V2, ResNet152V2), arguments_doc(224, 32))


preprocess_input = imagenet_utils.family_preprocess_input("tf", "ResNetV2")
decode_predictions = imagenet_utils.decode_predictions
