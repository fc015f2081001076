"""The one place files and input lines are decoded: strict UTF-8, or a typed error naming the place.

Every reader of vault files (notes, wiki pages, INDEX, journal, tools.md,
model.md, JSONL logs), every migration read and ``memory import`` decode
through here, so a Latin-1 byte anywhere is an
:class:`~atomic_agents.exceptions.EncodingError` with the path, the line and
the byte offset, never a ``UnicodeDecodeError`` traceback. Whole-vault
commands catch it per file (it is a ``FrontmatterParseError``) and go on.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from typing import IO, Any

from .exceptions import EncodingError, NotFoundError, ValidationError

__all__ = ["decode", "decode_lines", "json_reason", "open_input", "parse_json", "read_text"]


def decode(data: bytes, *, path: str | os.PathLike[str] | None = None, first_line: int = 1) -> str:
    """``data`` as UTF-8 (a leading BOM is kept for the caller); raise :class:`EncodingError` with line and offset."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = first_line + data.count(b"\n", 0, exc.start)
        raise EncodingError(path=os.fspath(path) if path is not None else None, line=line, offset=exc.start) from None


def read_text(path: str | os.PathLike[str], *, universal_newlines: bool = False) -> str:
    """The file's text. ``universal_newlines`` turns CRLF and CR into LF (as ``Path.read_text`` does).

    Without it line endings are kept exactly (``open(..., newline="")``), which
    the smallest-diff frontmatter writer needs.
    """
    with open(path, "rb") as fh:
        data = fh.read()
    text = decode(data, path=path)
    if universal_newlines and "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


#: The longest input line :func:`decode_lines` reads from a file or stream (bytes, or characters
#: of a text stream): far past any record (content and metadata are capped well below), short
#: of taking the machine's memory on a file without newlines.
MAX_LINE_BYTES = 64 * 1024 * 1024


def _bounded(fh: Any, limit: int) -> Iterator[bytes | str | None]:
    """The lines of ``fh``, each read at most ``limit + 1`` long; ``None`` for a longer one (then skipped to its end)."""
    while True:
        raw = fh.readline(limit + 1)
        if not raw:
            return
        if len(raw) <= limit or raw[-1:] in (b"\n", "\n"):
            yield raw
            continue
        yield None
        while raw and raw[-1:] not in (b"\n", "\n"):  # the rest of that line, in pieces of the same bound
            raw = fh.readline(limit + 1)


def open_input(path: str | os.PathLike[str]) -> IO[bytes]:
    """``path`` opened for reading bytes (JSONL input, an import); a missing or unreadable file is a typed error naming it."""
    try:
        return open(path, "rb")  # noqa: SIM115 - the caller closes it
    except FileNotFoundError:
        raise NotFoundError(f"no such file: {os.fspath(path)}", path=os.fspath(path)) from None
    except OSError as exc:
        raise ValidationError(f"cannot read the file ({exc.strerror})", path=os.fspath(path), rule="io") from None


def decode_lines(
    lines: Iterable[bytes | str], *, path: str | os.PathLike[str] | None = None, max_line: int | None = None
) -> Iterator[tuple[int, str | EncodingError]]:
    """``(line number, text)`` for each line; a line that is not UTF-8 yields its :class:`EncodingError`.

    For JSONL: a bad line is reported by file and line and the caller decides
    whether to go on (``log query``) or refuse the whole file (``memory import``).
    Text lines (an already-decoding stream such as stdin) pass through; a
    decoding failure of the stream itself is reported at the line it hit.
    From a file or stream (anything with ``readline``) a line longer than ``max_line``
    (default :data:`MAX_LINE_BYTES`) is not read into memory: it yields an
    :class:`EncodingError` (rule ``max-size``) and reading goes on at the next line.
    """
    where = os.fspath(path) if path is not None else None
    limit = MAX_LINE_BYTES if max_line is None else max_line
    it = iter(_bounded(lines, limit) if hasattr(lines, "readline") else lines)
    n = 0
    while True:
        n += 1
        try:
            raw = next(it)
        except StopIteration:
            return
        except UnicodeDecodeError as exc:
            yield n, EncodingError(path=where, line=n, offset=exc.start)
            return  # a text stream that failed to decode cannot be resumed reliably
        if raw is None:
            yield n, EncodingError(path=where, line=n, max_line=limit)
            continue
        if isinstance(raw, str):
            yield n, raw
            continue
        try:
            yield n, raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield n, EncodingError(path=where, line=n, offset=exc.start)


def json_reason(exc: BaseException) -> str:
    """One short line for why ``json.loads`` refused a text."""
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at line {exc.lineno} column {exc.colno}"
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    if "integer string conversion" in str(exc):
        return "an integer with more than 4300 digits"
    return str(exc).split(";")[0][:120] or type(exc).__name__


def parse_json(
    text: str | bytes,
    *,
    field: str | None = None,
    path: str | os.PathLike[str] | None = None,
    record: str | None = None,
    prefix: str = "",
    rule: str = "json",
) -> Any:
    """``json.loads`` for user input: any refusal (syntax, nesting past the recursion limit,
    a 5,000-digit integer, bytes that are not UTF-8) is a ValidationError naming where."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ValidationError(f"{prefix}not valid JSON ({json_reason(exc)})", field=field,
                              path=os.fspath(path) if path is not None else None, record=record, rule=rule) from None
