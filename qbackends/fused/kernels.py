"""The fused simulator's kernels: compiled C++ in ``qbackends_native`` (built when it is installed), and
the constants of their tiling. How the kernels work: ``native/src/fused.hpp`` and ``docs/fused.md``.

The state is split as k = (hi, lo) with ``lo`` the ``L`` low bits. Diagonal blocks are applied as products
of phase tables, or inside the sweeps of the product layers around them by level (an unweighted cut) or
by angle (a weighted cut's kept diagonal). Product layers: single-qubit gates on distinct wires, tile by
tile in split real/imaginary buffers.
"""

from __future__ import annotations

from qbackends_native import fused as _native

DIAG_LOW_BITS = 11  # diagonal blocks: low-bit tables of 2^L entries
LOW_BITS = 11  # product states: runs of 2048 amplitudes
SPECTATORS = 3  # the first pass of a product layer: ungated bits at the bottom of its tiles
TILE_BITS = 15  # ... and the tile of every pass: 2^15 amplitudes; the adjoint holds four split buffers, 1 MiB (L2)
MAX_TILE_BITS = 19  # above 24 wires tiles grow (engine.tiling_for) rather than a layer take a third pass over the state
MIN_RUN_BITS = 6  # later passes gather runs of at least 64 amplitudes (and hold the spectators)
ADJOINT_RUN_BITS = {16: 4}  # ... or c128 runs of 16 where that keeps an adjoint sweep's tiles to ADJOINT_TILES_BYTES
ADJOINT_TILES_BYTES = 1 << 22  # φ's and λ's split tiles in an adjoint sweep: 4 MiB (their high gates sweep L2-sized blocks)
STREAM_BYTES = _native.STREAM_BYTES  # states of 64 MiB and more are stored past the caches (16 MiB ones ran slower so)
STREAM_ALIGN = _native.STREAM_ALIGN  # bytes: a streaming store writes whole, aligned vectors
NO_DIAGONAL, DIAGONAL_AT_OUTPUT, DIAGONAL_AT_INPUT = 0, 1, 2

diag_phase_tables = _native.diag_phase_tables
diag_adjoint_tables = _native.diag_adjoint_tables
diag_values = _native.diag_values
diag_levels = _native.diag_levels
phase_by_level = _native.phase_by_level
diag_adjoint_levels = _native.diag_adjoint_levels
product_state = _native.product_state
layer_adjoint = _native.layer_adjoint
layer_apply = _native.layer_apply
layers_with_diagonal = _native.layers_with_diagonal
layer_adjoint_lambda = _native.layer_adjoint_lambda
cnot = _native.cnot
ground_state = _native.ground_state
expval_and_lambda = _native.expval_and_lambda
expval = _native.expval
expval_by_level = _native.expval_by_level
streams = _native.streams
scatter = _native.scatter
copy = _native.copy
huge_buffer = _native.huge_buffer
threads = _native.threads
set_num_threads = _native.set_num_threads
set_team = _native.set_team
