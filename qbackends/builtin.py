"""The built-in ``pennylane`` provider, registered through qbackends' own entry point like any plugin."""

from __future__ import annotations

from collections.abc import Callable

from .backend import Backend, RuleRegistration
from .hookspecs import hookimpl

_LIGHTNING = "pennylane_lightning/{0}/{0}.toml"
# lightning.qubit's and lightning.kokkos' adjoint decomposes these itself where trainable, as PennyLane does (the
# same gradients: tests/test_decompositions.py); the GPU builds, not checked on a GPU, still get them lowered in front.
_LIGHTNING_ADJOINT_LOWERS = ("Rot", "CRot")
NATIVE_INSTALL = "`pip install ./native` in a qbackends checkout (it compiles the simulators' kernels: a C++17 compiler)"

BACKENDS = (
    Backend(
        provider="pennylane",
        simulator="lightning.gpu",
        device_name="lightning.gpu",
        distribution="pennylane-lightning-gpu",
        hardware="nvidia",
        state_copies=4.0,
        preference=50,
        min_auto_wires=18,
        mpi_module="pennylane_lightning.lightning_gpu_ops",
        extra="gpu",
        description="NVIDIA GPUs through cuQuantum (cuStateVec)",
        capabilities_file=("pennylane-lightning-gpu", _LIGHTNING.format("lightning_gpu")),
    ),
    Backend(
        provider="pennylane",
        simulator="lightning.amdgpu",
        device_name="lightning.amdgpu",
        distribution="pennylane-lightning-amdgpu",
        hardware="amd",
        state_copies=5.0,
        preference=45,
        min_auto_wires=18,
        extra="amdgpu",
        description="AMD GPUs through Kokkos on ROCm/HIP",
        capabilities_file=("pennylane-lightning-amdgpu", _LIGHTNING.format("lightning_amdgpu")),
    ),
    Backend(
        provider="pennylane",
        simulator="lightning.kokkos",
        adjoint_lowers=_LIGHTNING_ADJOINT_LOWERS,
        device_name="lightning.kokkos",
        distribution="pennylane-lightning-kokkos",
        hardware="kokkos",
        state_copies=5.0,
        preference=30,
        min_auto_wires=16,
        faster_zz="MultiRZ",
        mpi_module="pennylane_lightning.lightning_kokkos_ops",
        description="Kokkos: OpenMP on many-core CPUs, or CUDA/HIP when built for them",
        capabilities_file=("pennylane-lightning-kokkos", _LIGHTNING.format("lightning_kokkos")),
    ),
    Backend(
        provider="pennylane",
        simulator="lightning.qubit",
        adjoint_lowers=_LIGHTNING_ADJOINT_LOWERS,
        device_name="lightning.qubit",
        distribution="pennylane-lightning",
        hardware="cpu",
        state_copies=9.0,
        preference=20,
        # QAOA p=2 value+gradient on the 2-core CI machine (benchmarks/test_bench_qaoa.py): IsingZZ beats a two-wire
        # MultiRZ here (18 nodes 0.066 s vs 0.094 s); on lightning.kokkos MultiRZ wins from 20 nodes (0.36 s vs 0.42 s).
        faster_zz="IsingZZ",
        description="C++ state vector on the CPU (the laptop default)",
        capabilities_file=("pennylane-lightning", _LIGHTNING.format("lightning_qubit")),
    ),
    Backend(
        provider="pennylane",
        simulator="default.qubit",
        device_name="default.qubit",
        distribution="pennylane",
        hardware="cpu",
        state_copies=4.0,
        dense_adjoint_observables=True,
        preference=0,
        backprop=True,
        faster_zz="IsingZZ",
        description="PennyLane's Python reference simulator (backprop, any interface)",
    ),
    Backend(
        provider="qbackends",
        simulator="fused.qubit",
        device_name="qbackends.fused.qubit",
        distribution="qbackends-native",
        install=NATIVE_INSTALL,
        hardware="cpu",
        # ψ and λ, and a cost's levels: a byte for up to 255 terms (engine.level_dtype; 2.13 states measured at 22 wires
        # c128, 2.27 c64, with 2-byte levels); more terms (2-byte levels), a weighted cost's
        # diagonal, a second measurement's φ or a matrix observable take more: the device sizes such a circuit when it
        # runs it (FusedQubit.size_circuit)
        state_copies=2.0,
        table_bytes=1,
        # a rank: ψ and λ, and a cost's levels in each of the two bit layouts the exchanges alternate between
        # (a weighted cost's real diagonals take more: the device sizes that circuit when it runs it)
        rank_state_copies=2.0,
        rank_table_bytes=2 * 1,
        rank_buffer_bytes=16 << 20,  # the exchange's receiving piece (fused.distributed.EXCHANGE_PIECE_BYTES)
        shared_table_bytes=1,  # ranks of one node share ψ, λ and the levels of one layout (fused.shared)
        preference=5,
        description="fused diagonal blocks and gate layers (compiled C++); the QAOA workload's choice under auto",
        capabilities_file=("qbackends", "qbackends/fused/fused_qubit.toml"),
    ),
    Backend(
        provider="qbackends",
        simulator="batched.qubit",
        device_name="qbackends.batched.qubit",
        distribution="qbackends-native",
        install=NATIVE_INSTALL,
        hardware="cpu",
        state_copies=4.0,  # per row of the batch (measured 3.5 at 18 wires, 3.1 at 20)
        preference=5,
        description="a parameter-broadcast minibatch as one state table (compiled C++); the QNN workload's choice under auto",
        capabilities_file=("qbackends", "qbackends/batched/batched_qubit.toml"),
    ),
    Backend(
        provider="pennylane",
        simulator="lightning.tensor",
        device_name="lightning.tensor",
        distribution="pennylane-lightning-tensor",
        hardware="nvidia",
        state_copies=None,
        preference=-1,
        extra="tensor",
        description="tensor networks (MPS/TN) on NVIDIA GPUs through cuTensorNet; never chosen by auto",
        capabilities_file=("pennylane-lightning-tensor", _LIGHTNING.format("lightning_tensor")),
    ),
)


@hookimpl
def register_backends(register: Callable[[Backend], None]) -> None:
    for backend in BACKENDS:
        register(backend)


@hookimpl
def register_decompositions(register: Callable[[RuleRegistration], None]) -> None:
    from .decompositions import builtin_rules  # the plugin contract: PennyLane is imported inside this hook

    for rule in builtin_rules(BACKENDS):
        register(rule)
