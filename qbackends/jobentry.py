"""``python -m qbackends.jobentry module[:function]``: a hybrid job's entry point, run as Braket runs it.

``module:function`` is imported and called, with the hyperparameters of ``AMZN_BRAKET_HP_FILE`` as keyword
arguments when they bind to its signature (converted by its annotations; unannotated ones stay strings), and
with none when they do not; a bare ``module`` runs as ``__main__``. A module or function that does not exist,
and a typed qbackends error, end with one line and exit 2. Where ``QBACKENDS_FAILURE_FILE`` names a file (the
job container's ``/opt/ml/output/failure``), the error's ``Type: message`` line is added to it, as Braket's
container does.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import inspect
import json
import os
import runpy
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .errors import QBackendsError, WorkloadInputError, report
from .fixes import hyperparameter

FAILURE_FILE = "QBACKENDS_FAILURE_FILE"


def _missing(exc: ModuleNotFoundError, module: str) -> bool:
    """True when the entry point's own module (or a package above it) is what was not found."""
    return exc.name is not None and (module == exc.name or module.startswith(exc.name + "."))


def module_spec(module: str, folder: str | None = None) -> Any:
    """``module``'s spec as the job's Python finds it (``folder`` first, for a top-level name), None where it finds
    none. Finding a top-level module runs none of its code. ``__main__`` is never one: in the job's Python it is
    this module."""
    if module == "__main__":
        return None
    try:
        return (folder is not None and importlib.machinery.PathFinder.find_spec(module, [folder])) or importlib.util.find_spec(
            module
        )
    except ValueError:  # loaded already without a spec
        return None


def unrunnable(entry_point: str, module: str, spec: Any) -> WorkloadInputError | None:
    """Why ``module`` (found as ``spec``; None: not found) cannot run as the entry point: no such module, one with no
    Python code (built in, or an extension), or a package without a ``__main__`` module (runpy says each with a
    plain ImportError); None where it can."""
    if spec is None:
        return WorkloadInputError(
            f"entry point {entry_point!r}: no module named {module!r} here.",
            "run `qbackends job run` from the folder that holds the module, or install its package.",
        )
    if spec.origin == "built-in" or isinstance(spec.loader, importlib.machinery.ExtensionFileLoader):
        return WorkloadInputError(
            f"entry point {entry_point!r}: module {module!r} is compiled, with no Python code to run.",
            "pass the job's own script (job.py) or module (package.module[:function]).",
        )
    folders = spec.submodule_search_locations
    if folders is not None and importlib.machinery.PathFinder.find_spec("__main__", list(folders)) is None:
        return WorkloadInputError(
            f"entry point {entry_point!r} is a package with no __main__ module to run.",
            f"name a module in it ({module}.job), or a function ({module}.job:main), or add {module}/__main__.py.",
        )
    return None


def bind_hyperparameters(function: Callable[..., Any], hyperparameters: Mapping[str, Any]) -> dict[str, Any]:
    """Keyword arguments for ``function`` from a job's hyperparameters, by Braket's rule: all of them when they bind to
    its signature, each converted by its parameter's annotation (``int``, ``float``, ``bool``, ``str`` or another
    callable; none: the string as given), and none at all when they do not bind.

    Raises:
        WorkloadInputError: a value its annotation cannot convert, naming the parameter and the type.
    """
    from .hybridjob import _KIND_WORDS, _convert

    try:
        signature = inspect.signature(function, eval_str=True)
    except (NameError, TypeError, ValueError):  # an annotation that does not resolve, or a builtin
        signature = inspect.signature(function)
    try:
        signature.bind(**hyperparameters)
    except TypeError:
        return {}
    kinds = {int: "int", float: "float", bool: "bool", str: "str"}
    arguments: dict[str, Any] = {}
    for name, value in hyperparameters.items():
        parameter = signature.parameters.get(name)
        annotation = parameter.annotation if parameter is not None else inspect.Parameter.empty
        text = value if isinstance(value, str) else json.dumps(value)
        if annotation is inspect.Parameter.empty or not callable(annotation):
            arguments[name] = text
        elif annotation in kinds:
            kind = kinds[annotation]
            try:
                arguments[name] = _convert(kind, text)
            except ValueError:
                raise WorkloadInputError(
                    f"Hyperparameter {name}={text!r} is not {_KIND_WORDS[kind]}, as {function.__qualname__}() declares it ({kind}).",
                    hyperparameter(name, _KIND_WORDS[kind]) + ".",
                ) from None
        else:
            arguments[name] = annotation(text)
    return arguments


def _hyperparameters() -> dict[str, Any]:
    from .hybridjob import HP_FILE, read_hyperparameters

    path = os.environ.get(HP_FILE)
    return read_hyperparameters(Path(path)) if path and Path(path).is_file() else {}


def record_failure(exc: BaseException, path: str | os.PathLike[str] | None = None) -> None:
    """Add ``Type: message`` (one line) to the failure file ``path``, by default the one ``QBACKENDS_FAILURE_FILE``
    names; nothing where there is none."""
    path = path or os.environ.get(FAILURE_FILE)
    if not path:
        return
    text = exc.one_line() if isinstance(exc, QBackendsError) else " ".join(str(exc).split())
    line = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as failure:
            failure.write(line + "\n")
    except OSError as err:
        print(f"qbackends: the failure file {str(path)!r} cannot be written: {err.strerror or err}.", file=sys.stderr)


def run(entry_point: str) -> int:
    module, _, function = entry_point.partition(":")
    sys.argv = [module]
    try:
        if not function:
            if problem := unrunnable(entry_point, module, module_spec(module)):
                raise problem  # (runpy says it with a plain ImportError)
            runpy.run_module(module, run_name="__main__", alter_sys=True)
            return 0
        target = importlib.import_module(module)
        if not callable(getattr(target, function, None)):
            raise WorkloadInputError(f"entry point {entry_point!r}: module {module!r} has no function {function!r}.")
        call = getattr(target, function)
        result = call(**bind_hyperparameters(call, _hyperparameters()))
        return result if isinstance(result, int) and not isinstance(result, bool) else 0
    except ModuleNotFoundError as exc:
        if not _missing(exc, module):
            record_failure(exc)
            raise
        error = WorkloadInputError(
            f"entry point {entry_point!r}: no module named {exc.name!r} here.",
            "run `qbackends job run` from the folder that holds the module, or install its package.",
        )
        record_failure(error)
        return report(error)
    except QBackendsError as exc:
        record_failure(exc)
        return report(exc)
    except Exception as exc:
        record_failure(exc)
        raise


if __name__ == "__main__":
    from .scoped import log_lines_shown

    with log_lines_shown():  # the job's own process: auto's decisions are part of its output
        raise SystemExit(run(sys.argv[1]))
