"""The one place files and input lines are decoded: strict UTF-8, or a typed error naming the place.

Every reader of vault files (notes, wiki pages, INDEX, journal, tools.md,
model.md, JSONL logs), every migration read and ``memory import`` decode
through here, so a Latin-1 byte anywhere is an
:class:`~atomic_agents.exceptions.EncodingError` with the path, the line and
the byte offset, never a ``UnicodeDecodeError`` traceback. Whole-vault
commands catch it per file (it is a ``FrontmatterParseError``) and go on.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator

from .exceptions import EncodingError

__all__ = ["decode", "decode_lines", "read_text"]


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


def decode_lines(
    lines: Iterable[bytes | str], *, path: str | os.PathLike[str] | None = None
) -> Iterator[tuple[int, str | EncodingError]]:
    """``(line number, text)`` for each line; a line that is not UTF-8 yields its :class:`EncodingError`.

    For JSONL: a bad line is reported by file and line and the caller decides
    whether to go on (``log query``) or refuse the whole file (``memory import``).
    Text lines (an already-decoding stream such as stdin) pass through; a
    decoding failure of the stream itself is reported at the line it hit.
    """
    where = os.fspath(path) if path is not None else None
    it = iter(lines)
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
        if isinstance(raw, str):
            yield n, raw
            continue
        try:
            yield n, raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield n, EncodingError(path=where, line=n, offset=exc.start)
