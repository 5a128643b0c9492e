"""The Trainer (a training context stepped by hand) and Snapshots."""

from pyggml.training.trainer import Snapshot, Trainer

__all__ = ["Trainer", "Snapshot"]
