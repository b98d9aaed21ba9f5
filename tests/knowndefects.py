"""Wrong answers and untyped refusals of other libraries' devices, found by the measurement harnesses and left to
those libraries: (backend key, case name) -> what is wrong. The harnesses mark them strict xfails, so a fixed one
fails until it is taken off this list.
"""

from __future__ import annotations

_PARAM_SHIFT = "PennyLane 0.45's param_shift (the gradient 'best' falls back to)"
_QULACS_EXACT = "pennylane-qulacs returns the exact value with shots, where default.qubit refuses the measurement"
# Wrong answers and untyped refusals of other libraries' devices, found by this harness and left to them.
KNOWN: dict[tuple[str, str], str] = {
    **{
        (backend, case): reason
        for backend in ("pennylane/lightning.qubit", "pennylane/lightning.kokkos", "qulacs/qulacs.simulator")
        for case, reason in {
            "vn-entropy": f"{_PARAM_SHIFT} refuses a von Neumann entropy with a plain ValueError",
            "mutual-info": f"{_PARAM_SHIFT} refuses a mutual information with a plain ValueError",
        }.items()
    },
    **{
        (backend, "shots-one-term-sum-and-var"): "PennyLane 0.45's sampler (measure_with_samples) drops var(X(0)) after "
        "expval(Hamiltonian([1.0], [X(0)])): one result for two measurements"
        for backend in ("pennylane/default.qubit", "pennylane/lightning.qubit", "pennylane/lightning.kokkos")
    },
    **{
        (backend, "shots-identity-and-var"): "PennyLane 0.45's sampler (measure_with_samples) drops var(Z(1)) after "
        "expval(0.5 * I()) (a Hamiltonian's identity term has no wires): one result for two measurements"
        for backend in ("pennylane/default.qubit", "pennylane/lightning.qubit", "pennylane/lightning.kokkos")
    },
    **{
        (backend, "shots-var-sum"): "lightning: TypeError 'VarianceMP(Sum) cannot be computed with samples'"
        for backend in ("pennylane/lightning.qubit", "pennylane/lightning.kokkos")
    },
    **{
        ("braket/braket.local.qubit", case): f"amazon-braket-pennylane-plugin 1.36: {reason}"
        for case, reason in {
            "var-sum": "NotImplementedError for the variance of a sum",
            "broadcast-var-sum": "NotImplementedError for the variance of a sum",
            "shots-var-sum": "RuntimeError 'Cannot split up terms in sums' for a sampled variance of a sum",
            "probs-op-hermitian": "probs(op=Hermitian) in the computational basis (off by 0.872), not the eigenbasis",
            "state-after-state-prep": "the state after StatePrep off by a global phase (0.268 in an amplitude)",
            "broadcast-expval-sum": "NotImplementedError: parameter-shift of a broadcast tape",
            "mcm-expval": "NotImplementedError for a mid-circuit measurement's expectation",
            "mcm-var": "NotImplementedError for a mid-circuit measurement's variance",
            "mcm-with-observable": "NotImplementedError for a mid-circuit measurement's expectation",
            "shots-mcm-expval": "NotImplementedError for a mid-circuit measurement's expectation",
            "shots-mcm-sample": "NotImplementedError for a mid-circuit measurement's samples",
            "shots-sample-wires": "NotImplementedError for samples of wires",
            "shots-counts-all-outcomes": "NotImplementedError for counts of wires with all_outcomes",
        }.items()
    },
    **{
        ("qulacs/qulacs.simulator", case): f"pennylane-qulacs 0.44: {reason}"
        for case, reason in {
            "var-sum": "RuntimeError 'Cannot split up terms in sums' for the variance of a sum",
            "broadcast-var-sum": "RuntimeError 'Cannot split up terms in sums' for the variance of a sum",
            "shots-var-sum": "RuntimeError 'Cannot split up terms in sums' for the variance of a sum",
            "broadcast-expval-sum": "NotImplementedError: parameter-shift of a broadcast tape",
            "mcm-expval": "KeyError 'MeasurementValue' for a mid-circuit measurement's expectation",
            "mcm-with-observable": "KeyError 'MeasurementValue' for a mid-circuit measurement's expectation",
            "shots-state": _QULACS_EXACT,
            "shots-density-matrix": _QULACS_EXACT,
            "shots-purity": _QULACS_EXACT,
            "shots-vn-entropy": _QULACS_EXACT,
            "shots-mutual-info": _QULACS_EXACT,
        }.items()
    },
}

# The interface cases measure the variance of a sum, and differentiate broadcast and sampled circuits.
INTERFACE_KNOWN = {
    **{(b, "interface-values"): KNOWN[(b, "var-sum")] for b in ("braket/braket.local.qubit", "qulacs/qulacs.simulator")},
    **{
        (b, "interface-broadcast"): KNOWN[(b, "broadcast-expval-sum")]
        for b in ("braket/braket.local.qubit", "qulacs/qulacs.simulator")
    },
    **{
        (b, "interface-broadcast"): f"{_PARAM_SHIFT} refuses a broadcast batch with a plain NotImplementedError "
        "(lightning's adjoint does not take probabilities)"
        for b in ("pennylane/lightning.qubit", "pennylane/lightning.kokkos")
    },
}
