"""``pg.applications``: Keras's ``keras.applications`` image classification models, built
from pyggml's layers with Keras's architectures, arguments and layer names.

- ``ResNet50``, ``ResNet101``, ``ResNet152`` (``resnet``, ``resnet50``)
- ``ResNet50V2``, ``ResNet101V2``, ``ResNet152V2`` (``resnet_v2``)
- ``MobileNetV2`` (``mobilenet_v2``)
- ``VGG16``, ``VGG19`` (``vgg16``, ``vgg19``)
- ``EfficientNetB0`` ... ``EfficientNetB7`` (``efficientnet``)
- ``DenseNet121``, ``DenseNet169``, ``DenseNet201`` (``densenet``)
- ``Xception`` (``xception``)
- ``InceptionV3`` (``inception_v3``)
- ``ConvNeXtTiny``, ``ConvNeXtSmall``, ``ConvNeXtBase``, ``ConvNeXtLarge``, ``ConvNeXtXLarge`` (``convnext``)
- ``MobileNet`` (``mobilenet``)
- ``MobileNetV3Small``, ``MobileNetV3Large`` (``mobilenet_v3``)
- ``EfficientNetV2B0`` ... ``EfficientNetV2B3``, ``EfficientNetV2S``, ``EfficientNetV2M``, ``EfficientNetV2L``
  (``efficientnet_v2``)
- ``InceptionResNetV2`` (``inception_resnet_v2``)
- ``NASNetMobile``, ``NASNetLarge`` (``nasnet``)
- ``RegNetX002`` ... ``RegNetX320``, ``RegNetY002`` ... ``RegNetY320`` (``regnet``, tf.keras's: Keras 3 has none)

Each module has the family's ``preprocess_input`` and ``decode_predictions``;
``imagenet_utils`` has both with every preprocessing mode.

pyggml ships no pretrained weights: ``weights=None`` builds randomly initialized
models (to train from scratch), ``weights=<path>`` loads a pyggml weights file
(``model.save_weights``), and Keras's default ``weights="imagenet"`` raises a
ValueError that says so.  Building a model only makes its layer graph: it is quick,
and ``count_params()`` or ``get_layer(...).output.shape`` compute nothing.
"""

from pyggml.applications import (densenet, efficientnet, imagenet_utils, inception_v3, mobilenet_v2, resnet, resnet50,
                                 resnet_v2, vgg16, vgg19, xception)
from pyggml.applications.densenet import DenseNet121, DenseNet169, DenseNet201
from pyggml.applications.efficientnet import (EfficientNetB0, EfficientNetB1, EfficientNetB2, EfficientNetB3,
                                              EfficientNetB4, EfficientNetB5, EfficientNetB6, EfficientNetB7)
from pyggml.applications.inception_v3 import InceptionV3
from pyggml.applications.mobilenet_v2 import MobileNetV2
from pyggml.applications.resnet import ResNet50, ResNet101, ResNet152
from pyggml.applications.resnet_v2 import ResNet50V2, ResNet101V2, ResNet152V2
from pyggml.applications.vgg16 import VGG16
from pyggml.applications.vgg19 import VGG19
from pyggml.applications.xception import Xception
from pyggml.applications import (convnext, efficientnet_v2, inception_resnet_v2, mobilenet, mobilenet_v3, nasnet,
                                 regnet)
from pyggml.applications.convnext import (ConvNeXtBase, ConvNeXtLarge, ConvNeXtSmall, ConvNeXtTiny,
                                          ConvNeXtXLarge)
from pyggml.applications.efficientnet_v2 import (EfficientNetV2B0, EfficientNetV2B1, EfficientNetV2B2,
                                                 EfficientNetV2B3, EfficientNetV2L, EfficientNetV2M,
                                                 EfficientNetV2S)
from pyggml.applications.inception_resnet_v2 import InceptionResNetV2
from pyggml.applications.mobilenet import MobileNet
from pyggml.applications.mobilenet_v3 import MobileNetV3Large, MobileNetV3Small
from pyggml.applications.nasnet import NASNetLarge, NASNetMobile
from pyggml.applications.regnet import (RegNetX002, RegNetX004, RegNetX006, RegNetX008, RegNetX016, RegNetX032,
                                        RegNetX040, RegNetX064, RegNetX080, RegNetX120, RegNetX160, RegNetX320,
                                        RegNetY002, RegNetY004, RegNetY006, RegNetY008, RegNetY016, RegNetY032,
                                        RegNetY040, RegNetY064, RegNetY080, RegNetY120, RegNetY160, RegNetY320)

__all__ = ["densenet", "efficientnet", "imagenet_utils", "inception_v3", "mobilenet_v2", "resnet", "resnet50",
           "resnet_v2", "vgg16", "vgg19", "xception", "DenseNet121", "DenseNet169", "DenseNet201", "EfficientNetB0",
           "EfficientNetB1", "EfficientNetB2", "EfficientNetB3", "EfficientNetB4", "EfficientNetB5",
           "EfficientNetB6", "EfficientNetB7", "InceptionV3", "MobileNetV2", "ResNet50", "ResNet101", "ResNet152",
           "ResNet50V2", "ResNet101V2", "ResNet152V2", "VGG16", "VGG19", "Xception", "convnext", "efficientnet_v2",
           "inception_resnet_v2", "mobilenet", "mobilenet_v3", "nasnet", "regnet", "ConvNeXtTiny", "ConvNeXtSmall",
           "ConvNeXtBase", "ConvNeXtLarge", "ConvNeXtXLarge", "MobileNet", "MobileNetV3Small", "MobileNetV3Large",
           "EfficientNetV2B0", "EfficientNetV2B1", "EfficientNetV2B2", "EfficientNetV2B3", "EfficientNetV2S",
           "EfficientNetV2M", "EfficientNetV2L", "InceptionResNetV2", "NASNetMobile", "NASNetLarge", "RegNetX002",
           "RegNetX004", "RegNetX006", "RegNetX008", "RegNetX016", "RegNetX032", "RegNetX040", "RegNetX064",
           "RegNetX080", "RegNetX120", "RegNetX160", "RegNetX320", "RegNetY002", "RegNetY004", "RegNetY006",
           "RegNetY008", "RegNetY016", "RegNetY032", "RegNetY040", "RegNetY064", "RegNetY080", "RegNetY120",
           "RegNetY160", "RegNetY320"]
