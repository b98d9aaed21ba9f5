"""QAOA as a hybrid job: settings, device, checkpoints and results from ``AMZN_BRAKET_*``."""

from __future__ import annotations

from ...fixes import hyperparameter
from ...hybridjob import JobEnvironment, config_from_hyperparameters, save_job_result
from .config import Config


def main() -> int:
    """Entry point for a hybrid job: everything comes from ``AMZN_BRAKET_*``, checked before PennyLane is imported."""
    env = JobEnvironment.from_env()
    config = config_from_hyperparameters(Config, env.hyperparameters)
    config.validate(hyperparameter)  # before the run's module imports PennyLane
    from .optimization import run

    result = run(
        config, env.device, checkpoint_dir=env.checkpoint_dir, resume=env.checkpoint_dir is not None, spell=hyperparameter
    )
    save_job_result(result, env)
    print(f"qaoa: expected cut {result['expected_cut']:.4f}, max cut {result['max_cut']}, on {result['device']}")
    return 0
