"""The dressed quantum neural network on Sonar, trained on one process or many (torch.distributed).

Model: Linear(features, nwires) -> (sigmoid(x) - 0.5)·2π -> TorchLayer(AngleEmbedding; two blocks of
Rot on every wire and CRot at ranges 1 and 3; a final Rot on wire 0; <Z0>; adjoint) -> Linear(1, 1).
Loss: margin ranking against 0 with the ±1 labels (a hinge on y·output); Adam and StepLR.

Data parallelism: DistributedDataParallel over DistributedSampler shards, all-reduced with gloo (the
model's tensors live on the host, even with lightning.gpu); only rank 0 prints, checkpoints and writes results. By default the global
batch stays fixed (each of N workers takes batch/N); ``scale_lr`` keeps the per-worker batch and
multiplies the learning rate by N instead.

Modules: ``config`` (the settings), ``model``, ``training`` (a process's run), ``launch`` (the workers and the
hybrid-job entry point) and ``checkpoint``.
"""

from __future__ import annotations

from .. import lazy_names

# launch.py is light (no torch or PennyLane), and imported with the package ``launch`` names its function, not the module.
from .launch import launch as launch
from .launch import main as main
from .launch import one_class_warning as one_class_warning
from .launch import worker as worker

# Each public name: (module, name there), imported when first used (``lazy_names``): ``config`` needs no torch or PennyLane.
_WHERE = {
    "CHECKPOINT_FILE": ("checkpoint", "FILE"),
    "RESULTS_FILE": ("config", "RESULTS_FILE"),
    "Config": ("config", "Config"),
    "RANGES": ("model", "RANGES"),
    "build_model": ("model", "build_model"),
    "calibration_step": ("model", "calibration_step"),
    "quantum_layer": ("model", "quantum_layer"),
    "PHASES": ("training", "PHASES"),
    "Context": ("training", "Context"),
    "evaluate": ("training", "evaluate"),
    "init_distributed": ("training", "init_distributed"),
    "train": ("training", "train"),
}

__all__ = sorted([*_WHERE, "launch", "main", "one_class_warning", "worker"])
__getattr__, __dir__ = lazy_names(__name__, _WHERE)
