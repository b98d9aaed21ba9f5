"""What the simulators read as a plain number: never trainable, taken as it is without dispatching on its interface."""

from __future__ import annotations

import numpy as np

NUMBERS = (int, float, complex, np.number)
