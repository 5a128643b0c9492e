"""Keras's ``keras.datasets``: the small datasets keras-io's examples start from, downloaded
once into Keras's own cache (``~/.keras/datasets``, or ``$KERAS_HOME``), each file checked
against its hash, then returned as Keras returns them (``(x_train, y_train), (x_test, y_test)``
of numpy arrays)."""

from pyggml.datasets import (boston_housing, california_housing, cifar10, cifar100, fashion_mnist, imdb, mnist,
                             reuters)

__all__ = ["mnist", "fashion_mnist", "cifar10", "cifar100", "imdb", "reuters", "boston_housing",
           "california_housing"]
