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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", required=True, help="the instruction set(s) qbackends-native must be built for (QBACKENDS_ARCH)")
    parser.add_argument("--installed", nargs="*", default=[], metavar="SIMULATOR", help="installed, whether or not it runs here")
    parser.add_argument("--runs", nargs="*", default=[], metavar="SIMULATOR", help="installed and runs a circuit right here")
    args = parser.parse_args()

    subprocess.run(["qbackends", "list"], check=True)
    listed = {r["device"].rsplit("/", 1)[-1]: r for r in json.loads(subprocess.check_output(["qbackends", "list", "--json"]))}
    failures = []
    import qbackends_native

    built = ",".join(qbackends_native.BUILDS)
    print(f"check: qbackends-native built for {built}; here it runs {qbackends_native.ARCH} ({qbackends_native.VECTOR_ISA} vectors)")
    if built != args.arch:
        failures.append(f"qbackends-native is built for {built}, not {args.arch}")
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
