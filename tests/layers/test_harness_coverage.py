"""Every layer of pyggml.layers goes through the harness, in every model kind
it supports, and the harness itself catches wrong layers."""

import numpy as np
import pytest

import pyggml as pg
import harness
from harness import LayerCase

import test_attention
import test_attention_extras
import test_audio_layers
import test_bidirectional
import test_conv_extras
import test_conv_lstm1d
import test_conv_lstm2d
import test_conv_transpose
import test_convolutional
import test_core_extras
import test_core_layers
import test_embedding
import test_extrema
import test_fused_paths
import test_geometric_augmentation
import test_grouped_query_attention
import test_mha_masks
import test_normalization
import test_pooling
import test_prelu
import test_preprocessing
import test_recurrent
import test_rnn_cells
import test_spectral_normalization
import test_time_distributed
import test_up_sampling
import test_volumes

ALL_CASES = (test_core_layers.CASES + test_convolutional.CASES + test_normalization.CASES +
             test_embedding.CASES + test_recurrent.CASES + test_attention.CASES + test_preprocessing.CASES +
             test_pooling.CASES + test_conv_transpose.CASES + test_up_sampling.CASES + test_bidirectional.CASES +
             test_time_distributed.CASES + test_prelu.CASES + test_extrema.CASES + test_fused_paths.CASES +
             test_rnn_cells.CASES + test_conv_extras.CASES + test_attention_extras.CASES + test_core_extras.CASES +
             test_mha_masks.CASES + test_grouped_query_attention.CASES + test_conv_lstm1d.CASES +
             test_spectral_normalization.CASES + test_geometric_augmentation.CASES + test_audio_layers.CASES +
             test_volumes.CASES + test_conv_lstm2d.CASES)

# HostLayers run in numpy before the graph: they have no tensors and no gradient for the harness to
# check; tests/layers/test_preprocessing.py tests them (host_call, eager calls, configs, adapt, models)
HOST_LAYERS = {n for n in pg.layers.__all__ if isinstance(getattr(pg.layers, n), type)
               and issubclass(getattr(pg.layers, n), pg.layers.HostLayer)}


def test_every_public_layer_has_cases_in_both_model_kinds():
    # by class name: Keras's aliases (GlobalAvgPool2D) are the classes they name
    layer_classes = {getattr(pg.layers, n).__name__ for n in pg.layers.__all__
                     if isinstance(getattr(pg.layers, n), type) and issubclass(getattr(pg.layers, n), pg.layers.Layer)
                     and n not in ("Layer", "InputLayer") and n not in HOST_LAYERS}
    assert {"Dense", "LSTM", "GRU", "MultiHeadAttention", "Conv2D", "Add"} <= layer_classes
    assert {"HostLayer", "StringLookup", "IntegerLookup", "Discretization"} <= HOST_LAYERS
    kinds = {}
    for c in ALL_CASES:
        # a case may cover classes that only run inside its layer (a cell inside RNN): extra["covers"]
        for name in (c.cls_name,) + tuple(c.extra.get("covers", ())):
            kinds.setdefault(name, set()).update(c.kinds())
    missing = layer_classes - set(kinds)
    assert not missing, f"layers without a harness case: {sorted(missing)}"
    multi_input = {"Add", "Concatenate", "Subtract", "Multiply", "Average", "Maximum", "Minimum", "Dot"}
    for name, ks in kinds.items():
        assert "functional" in ks
        if name not in multi_input:
            assert "sequential" in ks, f"{name} is never tested in a Sequential"


def test_case_ids_are_unique():
    ids = [c.id for c in ALL_CASES]
    assert len(ids) == len(set(ids))


class _Scaled(pg.layers.Layer):
    """A layer that is 1% off its documented identity (harness self-test)."""

    def call(self, x):
        return pg.ops.scale(x, 1.01)


def _identity(hs, w, training):
    return hs[0]


@pytest.mark.parametrize("check", [harness.check_forward, harness.check_gradient])
def test_harness_catches_a_wrong_layer(check):
    case = LayerCase("scaled", _Scaled, [(3,)], _identity)
    with pytest.raises(AssertionError):
        check(case, "functional")


def test_harness_catches_a_wrong_gradient_reference():
    # the forward pass agrees with the reference at inference only; in training
    # mode the reference differs, so the gradient and training loss must disagree
    def ref(hs, w, training):
        return hs[0] * (1.05 if training else 1.0)
    case = LayerCase("train_only_wrong", lambda: pg.layers.Activation("linear"), [(3,)], ref)
    harness.check_forward(case, "functional")
    with pytest.raises(AssertionError):
        harness.check_gradient(case, "functional")


def test_numeric_gradients_are_exact_for_a_quadratic():
    w = {"a": np.array([1.0, -2.0, 3.0])}
    g = harness.numeric_grads(lambda v: float(np.sum(v["a"] ** 2)), w, ["a"])
    np.testing.assert_allclose(g["a"], 2 * w["a"], rtol=1e-8)
