"""The UCI Sonar data (shipped, CC BY 4.0) or a user CSV of the same form, validated row by row."""

from __future__ import annotations

import math
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from ..errors import WorkloadInputError

LABELS = {"M": 1.0, "R": -1.0}  # mine -> +1, rock -> -1
SONAR_ROWS, SONAR_FEATURES = 208, 60


@dataclass(frozen=True)
class Dataset:
    """Features (rows x features, float64) and labels (+1 / -1)."""

    features: np.ndarray
    labels: np.ndarray
    source: str

    def __len__(self) -> int:
        return len(self.labels)


def sonar_text() -> str:
    """The shipped copy of the UCI Sonar data."""
    return resources.files("qbackends").joinpath("data/sonar.all-data").read_text()


def load(path: str | Path | None = None) -> Dataset:
    """The Sonar data (``path`` None) or a CSV with features then an M/R label on each line."""
    if path is None:
        data = parse(sonar_text(), "sonar.all-data (UCI, CC BY 4.0)")
        if data.features.shape != (SONAR_ROWS, SONAR_FEATURES):
            raise WorkloadInputError(
                f"The shipped Sonar data has shape {data.features.shape}, not (208, 60).", "reinstall qbackends."
            )
        return data
    from ..userfiles import read_text

    text = read_text(path, "Data file", "pass a CSV file: features then an M/R label on each line.", MAX_DATA_BYTES)
    return parse(text, str(path))


MAX_DATA_BYTES = 64 << 20


def parse(text: str, source: str) -> Dataset:
    """Parse comma-separated rows: the same number of finite features on every row, then M or R."""
    rows, labels = [], []
    width = None
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split(",")]
        if width is None:
            width = len(fields)
            if width < 2:
                raise WorkloadInputError(
                    f"{source}, line {number}: one column; expected features then a label.", "write 'f1,f2,...,M' rows."
                )
        if len(fields) != width:
            raise WorkloadInputError(
                f"{source}, line {number}: {len(fields)} columns where line 1 has {width}.",
                "give every row the same number of features.",
            )
        values = []
        for column, field in enumerate(fields[:-1], start=1):
            try:
                value = float(field)
            except ValueError:
                value = math.nan
            if not math.isfinite(value):
                raise WorkloadInputError(
                    f"{source}, line {number}, column {column}: {field!r} is not a finite number.", "fix or remove that row."
                )
            values.append(value)
        label = fields[-1]
        if label not in LABELS:
            raise WorkloadInputError(
                f"{source}, line {number}, column {width}: label {label!r} is not one of M, R.",
                "label each row M (mine) or R (rock).",
            )
        rows.append(values)
        labels.append(LABELS[label])
    if not rows:
        raise WorkloadInputError(f"{source} holds no rows.", "pass a CSV with features then an M/R label per line.")
    return Dataset(np.array(rows), np.array(labels), source)


def stratified_split(labels: np.ndarray, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Train and test row indices, each class split in the same proportion, shuffled by ``seed``."""
    rng = np.random.default_rng(seed)
    train: list[int] = []
    test: list[int] = []
    for value in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == value))
        cut = int(round(len(members) * test_fraction))
        test.extend(members[:cut])
        train.extend(members[cut:])
    return np.sort(np.array(train, dtype=np.int64)), np.sort(np.array(test, dtype=np.int64))
