"""The dressed quantum neural network on Sonar, trained on one process or many (torch.distributed).

Model: Linear(features, nwires) -> (sigmoid(x) - 0.5)·2π -> TorchLayer(AngleEmbedding; two blocks of
Rot on every wire and CRot at ranges 1 and 3; a final Rot on wire 0; <Z0>; adjoint) -> Linear(1, 1).
Loss: margin ranking against 0 with the ±1 labels (a hinge on y·output); Adam and StepLR.

Data parallelism: DistributedDataParallel over DistributedSampler shards, all-reduced with gloo (the
model's tensors live on the host, even with lightning.gpu); only rank 0 prints, checkpoints and writes results. By default the global
batch stays fixed (each of N workers takes batch/N); ``scale_lr`` keeps the per-worker batch and
multiplies the learning rate by N instead.
"""

from __future__ import annotations

from .checkpoint import FILE as CHECKPOINT_FILE
from .launch import launch, main, one_class_warning, worker
from .model import RANGES, build_model, calibration_step, quantum_layer
from .training import PHASES, RESULTS_FILE, Config, Context, evaluate, init_distributed, train

__all__ = [
    "CHECKPOINT_FILE",
    "PHASES",
    "RANGES",
    "RESULTS_FILE",
    "Config",
    "Context",
    "build_model",
    "calibration_step",
    "evaluate",
    "init_distributed",
    "launch",
    "main",
    "one_class_warning",
    "quantum_layer",
    "train",
    "worker",
]
