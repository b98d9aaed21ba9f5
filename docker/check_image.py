"""Run at image build: the simulators a job image carries are installed, and those that must run here run.

    python check_image.py --arch x86-64-v3,x86-64-v4 --installed lightning.gpu --runs fused.qubit batched.qubit

Prints ``qbackends list``, then one line per check; exits 1 with a line naming each check that failed.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys


def circuit_value(device_string: str) -> float:
    """<Z0 Z1> + <Z2> of a small entangling circuit on ``device_string``."""
    import pennylane as qml

    import qbackends

    @qml.qnode(qbackends.get_device(device_string, wires=3))
    def circuit(x):
        qml.Hadamard(0)
        qml.CNOT([0, 1])
        qml.RX(x, 2)
        qml.IsingZZ(0.5, [1, 2])
        qml.RY(0.2, 0)
        return qml.expval(qml.Z(0) @ qml.Z(1) + qml.Z(2))

    return float(circuit(0.3))


def kernel_builds(qbackends_native) -> list[str]:
    """Every build of the kernels is in the package, and each this CPU runs computes an expectation as numpy does
    (the one a job loads is checked through the simulators below; another level's only runs on a CPU that has it)."""
    import importlib
    import importlib.util

    import numpy as np

    failures, several = [], len(qbackends_native.BUILDS) > 1
    rng = np.random.default_rng(1)
    psi = rng.normal(size=1 << 16) + 1j * rng.normal(size=1 << 16)
    diagonal = rng.normal(size=1 << 16)
    for arch in qbackends_native.BUILDS:
        name = f"qbackends_native._kernels_{arch.replace('-', '_')}" if several else "qbackends_native._kernels"
        if importlib.util.find_spec(name) is None:
            failures.append(f"qbackends-native has no build for {arch} ({name})")
        elif not qbackends_native._cpu.runs(arch) and several:
            print(f"check: the {arch} kernels are installed (this CPU does not run them)")
        else:
            value = importlib.import_module(name).fused.expval(psi, diagonal)
            if not math.isclose(value, float(np.sum(np.abs(psi) ** 2 * diagonal)), rel_tol=1e-12, abs_tol=1e-9):
                failures.append(f"the {arch} kernels compute {value!r} for an expectation numpy takes as another")
            else:
                print(f"check: the {arch} kernels run here")
    return failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--arch", required=True, help="the instruction set(s) qbackends-native must be built for (QBACKENDS_ARCH)"
    )
    parser.add_argument("--installed", nargs="*", default=[], metavar="SIMULATOR", help="installed, whether or not it runs here")
    parser.add_argument("--runs", nargs="*", default=[], metavar="SIMULATOR", help="installed and runs a circuit right here")
    args = parser.parse_args()

    subprocess.run(["qbackends", "list"], check=True)
    listed = {r["device"].rsplit("/", 1)[-1]: r for r in json.loads(subprocess.check_output(["qbackends", "list", "--json"]))}
    failures = []
    import qbackends_native

    built = ",".join(qbackends_native.BUILDS)
    print(
        f"check: qbackends-native built for {built}; here it runs {qbackends_native.ARCH} ({qbackends_native.VECTOR_ISA} vectors)"
    )
    if built != args.arch:
        failures.append(f"qbackends-native is built for {built}, not {args.arch}")
    failures += kernel_builds(qbackends_native)
    for name in [*args.installed, *args.runs]:
        record = listed.get(name)
        if record is None or record["version"] is None:
            failures.append(f"{name} is not installed ({record['reason'] if record else 'not registered'})")
        else:
            print(f"check: {name} {record['version']} installed")
    expected = circuit_value("local:pennylane/default.qubit")
    for name in [*args.runs, "auto"]:
        device = "auto" if name == "auto" else listed.get(name, {}).get("device", name)
        try:
            value = circuit_value(device)
        except Exception as exc:  # the check reports every backend, not the first failure only
            failures.append(f"{name} does not run a circuit here: {type(exc).__name__}: {exc}")
            continue
        if not math.isclose(value, expected, abs_tol=1e-9):
            failures.append(f"{name} computes {value!r}, default.qubit {expected!r}")
        else:
            print(f"check: {name} runs here: {value:.12f}")
    for failure in failures:
        print(f"check failed: {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
