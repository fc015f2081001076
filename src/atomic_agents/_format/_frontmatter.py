"""YAML frontmatter: read anything, write back with the smallest diff.

Files come from many hands (python-frontmatter, Obsidian, editors), so reading
is lenient about fences and line endings, and writing changes only what must
change: a key whose value is unchanged keeps its exact original lines (order,
quoting, comments); a changed key is re-rendered in place; a removed key's
lines go; a new key is appended. The body after the closing fence is kept
byte-for-byte. This is what lets a migration's diff show only the keys it
changed (spec: Schema migration, MUST 3) and hand edits survive every write.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._text import read_text
from ..exceptions import FrontmatterParseError

__all__ = ["Document", "dump_meta", "load_yaml", "parse", "read", "render", "render_document"]


def load_yaml(text: str, *, path: str | Path | None = None, first_line: int = 1) -> Any:
    """The one YAML chokepoint: frontmatter (and ``--set`` values) become Python values here.

    The fast path (:mod:`._fastyaml`) takes flat plain mappings; everything else
    goes through PyYAML's safe C loader (:func:`._pyyaml.load_full`, imported only
    then), after one check of the event stream (only when the text has a ``&``,
    ``*`` or ``!``): anchors and aliases are refused (an alias bomb of 500 bytes
    expands to gigabytes downstream), and so is any tag but the plain scalar
    types, ``!!seq`` and ``!!map``. A value that does not construct (``!!int abc``,
    a 5,000-digit integer, ``!!timestamp foo``) and a key that is not a string
    (``&a : x`` reads as a ``None`` key) are refused too. Every refusal is a
    :class:`FrontmatterParseError` naming ``path`` and the line (``first_line`` is
    the file line of the text's first line).
    """
    from ._fastyaml import fast_load  # a note read from the parse cache needs neither parser

    meta = fast_load(text)
    if meta is not None:
        return meta
    from ._pyyaml import load_full

    return load_full(text, path=path, first_line=first_line)


_FLOW_LIST_KEYS = frozenset({"tags"})


@dataclass
class Document:
    """A parsed markdown file: ``meta`` (frontmatter) and ``body`` (everything after it)."""

    meta: dict[str, Any]
    body: str
    fm_text: str | None = None  # raw YAML between the fences, for minimal-diff writes
    newline: str = "\n"
    opener: str = "---"
    closer: str = "---"
    path: Path | None = field(default=None, compare=False)
    lazy: bool = field(default=False, compare=False)  # meta from the parse cache; body not read yet

    @property
    def has_frontmatter(self) -> bool:
        return self.fm_text is not None


_FENCE = re.compile(r"^(---|\.\.\.)[ \t]*$")


def parse(text: str, *, path: str | Path | None = None) -> Document:
    """Split ``text`` into frontmatter and body; raise :class:`FrontmatterParseError` with the line."""
    if text.startswith("\ufeff"):
        text = text[1:]
    first_end = text.find("\n")
    # The file's line ending is its first line's (the frontmatter opener's), never the body's.
    newline = "\r\n" if first_end > 0 and text[first_end - 1] == "\r" else "\n"
    first = text if first_end < 0 else text[:first_end]
    if first.rstrip("\r").rstrip() != "---":
        return Document(meta={}, body=text, newline=newline, path=Path(path) if path else None)
    pos = first_end + 1
    start = pos
    closer_line = None
    while pos <= len(text):
        end = text.find("\n", pos)
        line = text[pos:] if end < 0 else text[pos:end]
        if _FENCE.match(line.rstrip("\r")):
            closer_line = line.rstrip("\r").strip()
            fm_text = text[start:pos]
            body = "" if end < 0 else text[end + 1 :]
            break
        if end < 0:
            break
        pos = end + 1
    if closer_line is None:
        raise FrontmatterParseError("frontmatter opened with --- is never closed", path=path, line=1)
    meta = load_yaml(fm_text, path=path, first_line=2)
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise FrontmatterParseError("frontmatter is not a mapping of keys to values", path=path, line=2)
    return Document(
        meta=meta,
        body=body,
        fm_text=fm_text,
        newline=newline,
        closer=closer_line,
        path=Path(path) if path else None,
    )


def read(path: str | Path) -> Document:
    """Read and parse a markdown file (not UTF-8: :class:`~atomic_agents.exceptions.EncodingError`)."""
    p = Path(path)
    return parse(read_text(p), path=p)


def _dump_key(key: str, value: Any) -> str:
    from ._fastyaml import emit_key

    flow = key in _FLOW_LIST_KEYS
    fast = emit_key(key, value, flow=flow)
    if fast is not None:
        return fast
    from ._pyyaml import dump_key

    return dump_key(key, value, flow=flow)


def dump_meta(meta: dict[str, Any]) -> str:
    """Render a whole mapping as YAML in the given key order."""
    return "".join(_dump_key(str(k), v) for k, v in meta.items())


_KEY_LINE = re.compile(r"""^(?:"(?P<dq>[^"\\]*)"|'(?P<sq>[^']*)'|(?P<plain>[^\s#\-?:,\[\]{}&*!|>'"%@`][^:#]*?))[ \t]*:(?:[ \t]|$)""")


def _blocks(fm_text: str) -> list[tuple[str | None, str]] | None:
    """Cut frontmatter text into (key, lines) blocks; None if the layout is too exotic.

    Blank lines and comments before a key belong to that key's block; any at the
    end belong to a trailing block with key ``None``.
    """
    blocks: list[tuple[str | None, str]] = []
    pending: list[str] = []
    current_key: str | None = None
    current: list[str] = []
    for line in fm_text.splitlines(keepends=True):
        bare = line.rstrip("\r\n")
        stripped = bare.strip()
        if not bare or not bare[0].isspace() and not bare.startswith("-") and not stripped.startswith("#"):
            if not bare:
                pending.append(line)
                continue
            m = _KEY_LINE.match(bare)
            if m is None:
                return None
            if current_key is not None:
                blocks.append((current_key, "".join(current)))
            key = m.group("dq") if m.group("dq") is not None else m.group("sq")
            current_key = key if key is not None else m.group("plain").strip()
            current = pending + [line]
            pending = []
        elif stripped.startswith("#") and not bare[0].isspace():
            pending.append(line)
        else:
            if current_key is None:
                return None
            current.extend(pending)
            pending = []
            current.append(line)
    if current_key is not None:
        blocks.append((current_key, "".join(current)))
    if pending:
        blocks.append((None, "".join(pending)))
    return blocks


def _same(a: Any, b: Any) -> bool:
    # bool == int in Python (True == 1); a changed type must re-render.
    return type(a) is type(b) and a == b if not isinstance(a, (dict, list)) else a == b


def render(doc: Document, meta: dict[str, Any], body: str | None = None) -> str:
    """Render ``meta`` + ``body`` as a file, keeping every untouched line of ``doc``.

    ``doc`` is what is on disk now (or an empty :class:`Document` for a new file).
    """
    return render_document(doc, meta, body)[0]


def render_document(doc: Document, meta: dict[str, Any], body: str | None = None) -> tuple[str, Document]:
    """Like :func:`render`, also returning the :class:`Document` the text parses to.

    Saves re-reading a file just written: ``meta`` is what was validated and
    the text was rendered from it.
    """
    nl = doc.newline
    new_body = doc.body if body is None else body
    fm = _render_fm(doc, meta)
    if nl != "\n":
        fm = fm.replace("\r\n", "\n").replace("\n", nl)
    text = f"{doc.opener}{nl}{fm}{doc.closer}{nl}{new_body}"
    new_doc = Document(meta=dict(meta), body=new_body, fm_text=fm, newline=nl, opener=doc.opener,
                       closer=doc.closer, path=doc.path)
    return text, new_doc


def _render_fm(doc: Document, meta: dict[str, Any]) -> str:
    if doc.fm_text is None or not doc.fm_text.strip():
        return dump_meta(meta)
    blocks = _blocks(doc.fm_text)
    keys = [k for k, _ in blocks] if blocks is not None else None
    if blocks is None or keys is None or set(k for k in keys if k is not None) != set(map(str, doc.meta)) or len(
        [k for k in keys if k is not None]
    ) != len(doc.meta):
        return dump_meta(meta)
    old = {str(k): v for k, v in doc.meta.items()}
    out: list[str] = []
    for key, text in blocks:
        if key is None:
            continue
        if key not in meta:
            continue
        if _same(old[key], meta[key]):
            out.append(text if text.endswith("\n") else text + "\n")
        else:
            lead = "".join(l for l in text.splitlines(keepends=True)[: _lead_count(text)])
            out.append(lead + _dump_key(key, meta[key]))
    for key, value in meta.items():
        if str(key) not in old:
            out.append(_dump_key(str(key), value))
    trailing = [t for k, t in blocks if k is None]
    out.extend(trailing)
    return "".join(out)


def _lead_count(text: str) -> int:
    """Number of leading blank/comment lines in a block (kept when its key re-renders)."""
    n = 0
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            n += 1
        else:
            break
    return n

