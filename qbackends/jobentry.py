"""``python -m qbackends.jobentry module[:function]``: a hybrid job's entry point, with a clear word
when the module or function does not exist and one line for a typed qbackends error."""

from __future__ import annotations

import importlib
import runpy
import sys

from .errors import QBackendsError, WorkloadInputError, report, show_decisions


def _missing(exc: ModuleNotFoundError, module: str) -> bool:
    """True when the entry point's own module (or a package above it) is what was not found."""
    return exc.name is not None and (module == exc.name or module.startswith(exc.name + "."))


def run(entry_point: str) -> int:
    module, _, function = entry_point.partition(":")
    sys.argv = [module]
    show_decisions()
    try:
        if not function:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
            return 0
        target = importlib.import_module(module)
        if not callable(getattr(target, function, None)):
            raise WorkloadInputError(f"entry point {entry_point!r}: module {module!r} has no function {function!r}.")
        result = getattr(target, function)()
        return result if isinstance(result, int) else 0
    except ModuleNotFoundError as exc:
        if not _missing(exc, module):
            raise
        return report(
            WorkloadInputError(
                f"entry point {entry_point!r}: no module named {exc.name!r} here.",
                "run `qbackends job run` from the folder that holds the module, or install its package.",
            )
        )
    except QBackendsError as exc:
        return report(exc)


if __name__ == "__main__":
    raise SystemExit(run(sys.argv[1]))
