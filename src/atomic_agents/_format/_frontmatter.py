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

import yaml

from .._text import read_text
from ..exceptions import FrontmatterParseError
from ._fastyaml import emit_key, fast_load

__all__ = ["Document", "dump_meta", "load_yaml", "parse", "read", "render", "render_document"]

_Base: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_Base):
    """Safe loader that keeps an impossible date (2026-02-30) as its string.

    PyYAML raises on such a value, which would lose the whole file; as a
    string it reaches the validator, which names the field.
    """


def _timestamp(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
    try:
        return yaml.SafeLoader.construct_yaml_timestamp(loader, node)  # type: ignore[arg-type]
    except (ValueError, OverflowError):
        return loader.construct_scalar(node)  # type: ignore[arg-type]


_Loader.add_constructor("tag:yaml.org,2002:timestamp", _timestamp)


class _Checker(yaml.constructor.SafeConstructor):
    """Constructs one scalar node at a time, to find the line of a value that does not construct."""


_Checker.add_constructor("tag:yaml.org,2002:timestamp", _timestamp)

_Y = "tag:yaml.org,2002:"
# Explicit tags a note may carry: the plain scalar types and the two collections. No !!binary
# (bytes), !!set, !!omap, !!pairs, !!merge, local tags or python tags.
_ALLOWED_TAGS = frozenset(_Y + t for t in ("str", "int", "float", "bool", "null", "timestamp", "seq", "map"))
# Characters without which there is no anchor, alias or tag; most frontmatter has none.
_SUSPECT = re.compile(r"[&*!]")
_CONSTRUCT_ERRORS = (ValueError, TypeError, KeyError, AttributeError, OverflowError, IndexError, RecursionError)


def _short_tag(tag: str) -> str:
    return "!!" + tag[len(_Y):] if tag.startswith(_Y) else tag


def load_yaml(text: str, *, path: str | Path | None = None, first_line: int = 1) -> Any:
    """The one YAML chokepoint: frontmatter (and ``--set`` values) become Python values here.

    The fast path (:mod:`._fastyaml`) takes flat plain mappings; everything else
    goes through PyYAML's safe C loader, after one check of the event stream
    (only when the text has a ``&``, ``*`` or ``!``): anchors and aliases are
    refused (an alias bomb of 500 bytes expands to gigabytes downstream), and so is
    any tag but the plain scalar types, ``!!seq`` and ``!!map``. A value that does
    not construct (``!!int abc``, a 5,000-digit integer, ``!!timestamp foo``) and
    a key that is not a string (``&a : x`` reads as a ``None`` key) are refused too.
    Every refusal is a :class:`FrontmatterParseError` naming ``path`` and the line
    (``first_line`` is the file line of the text's first line).
    """
    def fail(message: str, line0: int | None) -> FrontmatterParseError:
        return FrontmatterParseError(message, path=path, line=None if line0 is None else line0 + first_line)

    try:
        meta = fast_load(text)
        if meta is not None:
            return meta
        if not text.strip():
            return None
        if _SUSPECT.search(text):
            _check_events(text, fail)
        try:
            value = yaml.load(text, Loader=_Loader)
        except _CONSTRUCT_ERRORS as exc:
            raise fail(f"frontmatter value does not parse: {_reason(exc)}", _culprit_line(text)) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise fail(f"frontmatter does not parse: {exc.problem or 'invalid YAML'}",
                   mark.line if mark is not None else None) from None
    except yaml.YAMLError as exc:
        raise fail(f"frontmatter does not parse: {exc}", None) from None
    except RecursionError:
        raise fail("frontmatter is nested too deeply", None) from None
    if isinstance(value, dict):
        for key in value:
            if not isinstance(key, str):
                raise fail(f"frontmatter key {key!r} is not a string (quote it)", _key_line(text, key))
    return value


def _reason(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    if "int_max_str_digits" in str(exc) or "integer string conversion" in str(exc):
        return "an integer with more than 4300 digits"
    if isinstance(exc, (ValueError, OverflowError)) and not isinstance(exc, UnicodeError):
        text = str(exc).split(";")[0].strip()
        return text[:120] if text else "out of range"
    return "not a value of that type"


def _check_events(text: str, fail: Any) -> None:
    checker = _Checker()
    for ev in yaml.parse(text, Loader=_Loader):
        line0 = ev.start_mark.line if ev.start_mark is not None else None
        if isinstance(ev, yaml.AliasEvent):
            raise fail(f"YAML alias *{ev.anchor} is not allowed in frontmatter (write the value out)", line0)
        anchor = getattr(ev, "anchor", None)
        if anchor is not None:
            raise fail(f"YAML anchor &{anchor} is not allowed in frontmatter", line0)
        tag = getattr(ev, "tag", None)
        if tag is None or tag == "!":
            continue
        if tag not in _ALLOWED_TAGS:
            raise fail(f"YAML tag {_short_tag(tag)} is not allowed in frontmatter (plain values only)", line0)
        if isinstance(ev, yaml.ScalarEvent) and tag != _Y + "str":
            node = yaml.ScalarNode(tag, ev.value, None, None, ev.style)  # marks unused: the line is line0
            try:
                checker.construct_object(node)
            except (yaml.YAMLError, *_CONSTRUCT_ERRORS) as exc:
                raise fail(f"{_short_tag(tag)} {ev.value[:40]!r} is not a valid value: {_reason(exc)}", line0) from None


def _culprit_line(text: str) -> int | None:
    """Line (0-based) of the first scalar that does not construct; None if none is found."""
    checker = _Checker()
    try:
        stack = [yaml.compose(text, Loader=_Loader)]
    except (yaml.YAMLError, RecursionError):
        return None
    while stack:
        node = stack.pop()
        if node is None:
            continue
        if isinstance(node, yaml.ScalarNode):
            try:
                checker.construct_object(node)
            except (yaml.YAMLError, *_CONSTRUCT_ERRORS):
                return int(node.start_mark.line)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(reversed(node.value))
        elif isinstance(node, yaml.MappingNode):
            for k, v in reversed(node.value):
                stack.extend((v, k))
    return None


def _key_line(text: str, key: object) -> int | None:
    try:
        node = yaml.compose(text, Loader=_Loader)
    except (yaml.YAMLError, RecursionError):
        return None
    if isinstance(node, yaml.MappingNode):
        for k, _ in node.value:
            if k.tag != _Y + "str":
                return int(k.start_mark.line)
    return None


class _Dumper(yaml.SafeDumper):
    """Dumper that indents block sequences under their key (``sources:\\n  - x``)."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:  # noqa: D102
        super().increase_indent(flow, False)


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
    fast = emit_key(key, value, flow=key in _FLOW_LIST_KEYS)
    if fast is not None:
        return fast
    if key in _FLOW_LIST_KEYS and isinstance(value, list) and all(
        isinstance(v, (str, int, float, bool)) for v in value
    ):
        inner = yaml.dump(value, Dumper=_Dumper, default_flow_style=True, allow_unicode=True, width=10**9).strip()
        head = yaml.dump({key: None}, Dumper=_Dumper, allow_unicode=True, width=10**9).rstrip("\n")
        return head[: -len("null")] + inner + "\n"
    if isinstance(value, list) and not value:
        head = yaml.dump({key: None}, Dumper=_Dumper, allow_unicode=True, width=10**9).rstrip("\n")
        return head[: -len("null")] + "[]\n"
    return yaml.dump(
        {key: value},
        Dumper=_Dumper,
        default_flow_style=False,
        sort_keys=False,
        allow_unicode=True,
        width=10**9,
    )


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

