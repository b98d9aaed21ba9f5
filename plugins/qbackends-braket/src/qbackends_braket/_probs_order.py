"""Probabilities measured in the device's wire order, then transposed to the order the circuit asked for."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pennylane as qml
from pennylane.measurements import ProbabilityMP


@qml.transform
def probs_in_device_order(tape: Any, *, device_wires: Any) -> tuple[Any, Any]:
    order = {w: i for i, w in enumerate(device_wires)}
    plans = []
    measurements = []
    for m in tape.measurements:
        if isinstance(m, ProbabilityMP) and m.obs is None and m.mv is None and len(m.wires) > 2:
            asked = list(m.wires)
            sorted_wires = sorted(asked, key=order.__getitem__)
            plans.append([sorted_wires.index(w) for w in asked] if sorted_wires != asked else None)
            measurements.append(qml.probs(wires=sorted_wires) if sorted_wires != asked else m)
        else:
            plans.append(None)
            measurements.append(m)
    if not any(plans):
        return (tape,), lambda results: results[0]

    def reorder(results: Any) -> Any:
        result = results[0]
        single = len(measurements) == 1
        values = [result] if single else list(result)
        for i, plan in enumerate(plans):
            if plan is not None:
                v = np.asarray(values[i])
                values[i] = v.reshape([2] * len(plan)).transpose(plan).reshape(-1)
        return values[0] if single else tuple(values)

    return (tape.copy(measurements=measurements),), reorder


@functools.cache
def _ordered_class(device_class: type) -> type:
    def preprocess_transforms(self: Any, execution_config: Any = None) -> Any:
        pipeline = device_class.preprocess_transforms(self, execution_config)
        pipeline.add_transform(probs_in_device_order, device_wires=self.wires)
        return pipeline

    return type(
        device_class.__name__,
        (device_class,),
        {"preprocess_transforms": preprocess_transforms, "__module__": device_class.__module__},
    )


def with_ordered_probs(device: Any) -> Any:
    device.__class__ = _ordered_class(type(device))
    return device


__all__ = ["probs_in_device_order", "with_ordered_probs"]
