"""The files a user hands qbackends (hyperparameters, data, graphs, benchmark results): read whole as UTF-8 text,
with or without a byte-order mark, up to a size, or refused with a typed error naming the file and the fix.

The one reader of such files, so that each takes the same bytes the same way: a spreadsheet's CSV that starts
with a UTF-8 byte-order mark is the data it holds, a UTF-16 file is named as such, and a device or a pipe that
never ends is read no further than the limit.
"""

from __future__ import annotations

import codecs
import itertools
import json
import re
from pathlib import Path
from typing import Any

from .errors import WorkloadInputError

MAX_JSON_DEPTH = 64  # far beyond any file qbackends reads; deeper JSON would exhaust Python's recursion
_OTHER_ENCODINGS = (  # byte-order marks of encodings that are not UTF-8, longest first
    (codecs.BOM_UTF32_LE, "UTF-32"),
    (codecs.BOM_UTF32_BE, "UTF-32"),
    (codecs.BOM_UTF16_LE, "UTF-16"),
    (codecs.BOM_UTF16_BE, "UTF-16"),
)


def read_text(path: str | Path, what: str, fix: str, limit: int) -> str:
    """The text of the file at ``path`` (``what`` names it in errors: ``"Data file"``), at most ``limit`` bytes.

    Raises:
        WorkloadInputError: the file cannot be read, is over ``limit`` bytes, or is not UTF-8 text.
    """
    shown = repr(str(path))
    try:
        with open(path, "rb") as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise WorkloadInputError(f"{what} {shown} cannot be read: {exc.strerror or exc}.", fix) from exc
    except ValueError as exc:  # a path with a NUL byte
        raise WorkloadInputError(f"{what} {shown} cannot be read: {exc}.", fix) from None
    if len(data) > limit:
        raise WorkloadInputError(f"{what} {shown} is over {limit} bytes.", fix)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        other = next((name for bom, name in _OTHER_ENCODINGS if data.startswith(bom)), None)
        why = f"it starts with a {other} byte-order mark" if other else f"byte 0x{data[exc.start]:02x} at offset {exc.start}"
        raise WorkloadInputError(f"{what} {shown} is not UTF-8 text ({why}).", f"save it as UTF-8; {fix}") from None


def read_json(path: str | Path, what: str, fix: str, limit: int) -> Any:
    """The JSON value in the file at ``path``, nested at most ``MAX_JSON_DEPTH`` deep.

    Raises:
        WorkloadInputError: as ``read_text``, or the text is not JSON, or it is nested deeper.
    """
    text = read_text(path, what, fix, limit)
    depth = nesting(text)
    if depth > MAX_JSON_DEPTH:
        raise WorkloadInputError(
            f"{what} {str(path)!r} is nested {depth} levels deep; qbackends reads JSON of up to {MAX_JSON_DEPTH}.", fix
        )
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise WorkloadInputError(
            f"{what} {str(path)!r} is not JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}.", fix
        ) from None


def nesting(text: str) -> int:
    """The deepest nesting of JSON arrays and objects in ``text`` (brackets inside strings are not counted)."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub('""', text))
    return max(itertools.accumulate(1 if c in "[{" else -1 for c in brackets), default=0)


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
