"""``ckptjob.job:train`` runs ``steps`` circuits, one per angle of the input channel, and resumes from its checkpoint;
``ckptjob.job:fail`` raises; ``ckptjob.job:hold`` waits to be stopped."""

import os
import time
from pathlib import Path

import pennylane as qml
from braket.jobs import load_job_checkpoint, save_job_checkpoint, save_job_result
from braket.jobs.metrics import log_metric


def train(steps: int, scale: float = 1.0):
    angles = [float(a) for a in Path(os.environ["AMZN_BRAKET_INPUT_DIR"], "input", "angles.txt").read_text().split()]
    try:
        state = load_job_checkpoint()
    except FileNotFoundError:
        state = {"step": 0, "costs": []}
    resumed_from = state["step"]
    device = qml.device(os.environ["AMZN_BRAKET_DEVICE_ARN"].split("/")[-1], wires=2)

    @qml.qnode(device)
    def cost(x):
        qml.RX(x, 0)
        qml.CNOT([0, 1])
        return qml.expval(qml.Z(1))

    for step in range(state["step"], steps):
        value = float(cost(scale * angles[step % len(angles)]))
        state = {"step": step + 1, "costs": [*state["costs"], value]}
        log_metric(metric_name="Cost", value=value, iteration_number=step)
        save_job_checkpoint(state)
    save_job_result({"costs": state["costs"], "resumed_from": resumed_from, "device": device.name})


def fail():
    raise ValueError("no angle for step 7 in the input channel")


def hold():
    Path(os.environ["AMZN_BRAKET_JOB_RESULTS_DIR"], "holding").write_text("")
    time.sleep(600)
