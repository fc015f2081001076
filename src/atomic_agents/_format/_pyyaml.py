"""Frontmatter through PyYAML: what the fast path (:mod:`._fastyaml`) declines, and the dumper.

Imported only when a text needs it (anchors, tags, quoting, nesting, a value the
fast path does not write): most notes never load PyYAML. The checks and typed
errors are described at :func:`._frontmatter.load_yaml`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from ..exceptions import FrontmatterParseError

__all__ = ["dump_key", "load_full"]

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


def load_full(text: str, *, path: str | Path | None = None, first_line: int = 1) -> Any:
    """What :func:`._frontmatter.load_yaml` does with a text the fast path declines (see there)."""
    def fail(message: str, line0: int | None) -> FrontmatterParseError:
        return FrontmatterParseError(message, path=path, line=None if line0 is None else line0 + first_line)

    try:
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


def dump_key(key: str, value: Any, *, flow: bool = False) -> str:
    """``key: value`` through PyYAML's safe dumper (``flow``: a list of scalars on one line)."""
    if flow and isinstance(value, list) and all(isinstance(v, (str, int, float, bool)) for v in value):
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
