"""A fast path for the plain frontmatter almost every note has.

PyYAML builds Python objects in Python, which costs ~0.3 ms per note: too slow
to validate or lint 10,000 notes in under a second. Notes are flat mappings
of plain scalars and short lists, so this module reads and writes exactly
that subset directly, resolving plain scalars with PyYAML's own implicit
resolver table (so ``yes``, ``1e3`` or ``2026-05-06`` mean what they mean to
YAML). Anything outside the subset returns ``None`` and the caller falls back
to PyYAML, which stays the reference: a property test checks both agree.

PyYAML itself is not imported here (it costs a CLI command ~10 ms): the
implicit resolver table is a copy of ``yaml.resolver.Resolver``'s, and
``tests/vault/test_fastyaml.py`` checks the copy equals PyYAML's, pattern for
pattern, and the character classes below against their spelled-out originals
for every code point.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

__all__ = ["emit_key", "fast_load"]

_STR = "tag:yaml.org,2002:str"
# yaml.resolver.Resolver's implicit resolvers (PyYAML 3.x to 6.x), in its order: (tag, pattern, flags, first chars).
_RESOLVERS: tuple[tuple[str, str, int, str], ...] = (
    ("bool", r'''^(?:yes|Yes|YES|no|No|NO
                    |true|True|TRUE|false|False|FALSE
                    |on|On|ON|off|Off|OFF)$''', re.X, "yYnNtTfFoO"),
    ("float", r'''^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?
                    |\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?
                    |[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*
                    |[-+]?\.(?:inf|Inf|INF)
                    |\.(?:nan|NaN|NAN))$''', re.X, "-+0123456789."),
    ("int", r'''^(?:[-+]?0b[0-1_]+
                    |[-+]?0[0-7_]+
                    |[-+]?(?:0|[1-9][0-9_]*)
                    |[-+]?0x[0-9a-fA-F_]+
                    |[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$''', re.X, "-+0123456789"),
    ("merge", r'^(?:<<)$', 0, "<"),
    ("null", r'''^(?: ~
                    |null|Null|NULL
                    | )$''', re.X, "~nN\0"),  # "\0": PyYAML's empty first character ""
    ("timestamp", r'''^(?:[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]
                    |[0-9][0-9][0-9][0-9] -[0-9][0-9]? -[0-9][0-9]?
                     (?:[Tt]|[ \t]+)[0-9][0-9]?
                     :[0-9][0-9] :[0-9][0-9] (?:\.[0-9]*)?
                     (?:[ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?)$''', re.X, "0123456789"),
    ("value", r'^(?:=)$', 0, "="),
    ("yaml", r'^(?:!|&|\*)$', 0, "!&*"),
)


def _table() -> dict[str, list[tuple[str, re.Pattern[str]]]]:
    table: dict[str, list[tuple[str, re.Pattern[str]]]] = {}
    for name, pattern, flags, first in _RESOLVERS:
        rx = re.compile(pattern, flags)
        for c in first:
            table.setdefault("" if c == "\0" else c, []).append(("tag:yaml.org,2002:" + name, rx))
    return table


_TABLE = _table()
_KEY = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*):(?:[ \t]+(.*?))?[ \t]*$")
_ITEM = re.compile(r"^[ \t]*-(?:[ \t]+(.*?))?[ \t]*$")
_INT = re.compile(r"^-?(?:0|[1-9][0-9]*)$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_KEY_SUSPECT = frozenset(_TABLE)  # first characters for which YAML has an implicit type
_BOOL = {"true": True, "yes": True, "on": True, "false": False, "no": False, "off": False}
_INDICATORS = frozenset("-?:,[]{}#&*!|>'\"%@`")
# Plain text we emit unquoted: no ':' or '#', no control or YAML line-break characters. Spelled
# as the complement of [\x20-\x7e\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]: the same set
# (tested per code point), compiled in 0.3 ms instead of 2-6 ms.
_PLAIN_BAD = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")
_PLAIN_NEVER = frozenset(":#\u2028\u2029\ufeff")
_FLOW_UNSAFE = frozenset(",[]{}")
# Outside YAML's printable set, or a line break Python and YAML split differently: full loader.
# The complement of [\x09\x0a\x0d\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]
# spelled out (tested per code point): the negated class took 4-8 ms to compile in every process.
_UNUSUAL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff\ufeff\ufffe\uffff]")


def _resolve(s: str) -> str:
    for tag, rx in _TABLE.get(s[:1], ()):
        if rx.match(s):
            return tag
    return _STR


class _Fallback(Exception):
    pass


def _scalar(s: str) -> Any:
    if not s:
        return None
    c = s[0]
    if c == "'":
        if len(s) < 2 or s[-1] != "'":
            raise _Fallback
        inner = s[1:-1]
        if "'" in inner.replace("''", ""):
            raise _Fallback
        return inner.replace("''", "'")
    if c == '"':
        inner = s[1:-1]
        if len(s) < 2 or s[-1] != '"' or '"' in inner or "\\" in inner:
            raise _Fallback
        return inner
    if c in _INDICATORS or ":" in s or " #" in s or "\t" in s:
        raise _Fallback
    tag = _resolve(s)
    if tag == _STR:
        return s
    if tag.endswith(":null"):
        return None
    if tag.endswith(":bool"):
        return _BOOL[s.lower()]
    if tag.endswith(":int") and _INT.match(s) and len(s) <= 18:
        return int(s)  # longer ones (past int64, past Python's 4,300-digit limit) are PyYAML's to judge
    if tag.endswith(":timestamp") and _DATE.match(s):
        try:
            return dt.date.fromisoformat(s)
        except ValueError:
            return s  # an impossible date stays a string for the validator (as _Loader does)
    raise _Fallback


_CACHE: dict[str, Any] = {}
_CACHE_MAX = 8192
_IMMUTABLE = (str, int, bool, dt.date, type(None))


def _cached_scalar(s: str) -> Any:
    """``_scalar`` with a small cache: type, confidence, dates and flags repeat across notes."""
    try:
        return _CACHE[s]
    except KeyError:
        pass
    v = _scalar(s)
    if len(s) <= 40 and isinstance(v, _IMMUTABLE) and len(_CACHE) < _CACHE_MAX:
        _CACHE[s] = v
    return v


_KEYS: dict[str, bool] = {}


def _plain_key(key: str) -> bool:
    """False for a key YAML reads as a bool, null or number (``on:``, ``null:``); cached, keys repeat."""
    ok = _KEYS.get(key)
    if ok is None:
        ok = key[0] not in _KEY_SUSPECT or _resolve(key) == _STR
        if len(_KEYS) < _CACHE_MAX:
            _KEYS[key] = ok
    return ok


def _value(rest: str) -> Any:
    if rest.startswith("["):
        if not rest.endswith("]") or "[" in rest[1:] or "{" in rest or "'" in rest or '"' in rest:
            raise _Fallback
        inner = rest[1:-1].strip()
        if not inner:
            return []
        items = [p.strip() for p in inner.split(",")]
        if any(not p for p in items):
            raise _Fallback
        return [_cached_scalar(p) for p in items]
    return _cached_scalar(rest)


def fast_load(text: str) -> dict[str, Any] | None:
    """Load a flat frontmatter mapping, or ``None`` if it needs the full YAML loader."""
    if _UNUSUAL.search(text) or "\t" in text or "\r" in text.replace("\r\n", ""):
        return None
    meta: dict[str, Any] = {}
    key: str | None = None
    items: list[Any] | None = None
    item_indent = -1
    open_key = False
    try:
        for line in text.split("\n"):
            line = line[:-1] if line.endswith("\r") else line
            if not line.strip() or line.startswith("#"):
                continue
            first = line[0]
            if first in " \t-":
                m = _ITEM.match(line)
                if m is None or key is None or (items is None and not open_key):
                    return None  # a continuation line, or an item with no key to belong to
                indent = len(line) - len(line.lstrip(" "))
                if items is None:
                    items = meta[key] = []
                    item_indent = indent
                elif indent != item_indent:
                    return None  # items indented differently: a continuation or an error, PyYAML decides
                items.append(_cached_scalar(m.group(1) or ""))
                continue
            head, sep, tail = line.partition(": ")
            if sep and head.isidentifier() and head.isascii():
                key, rest = head, tail.strip(" ")  # the common "key: value" line, without a regex
            else:
                m = _KEY.match(line)
                if m is None:
                    return None
                key, rest = m.group(1), m.group(2)
            if key in meta or not _plain_key(key):
                return None  # duplicate keys, or a key YAML reads as a bool/null/number (on:, null:): PyYAML decides
            items = None
            open_key = not rest  # only "key:" with nothing after it may take "- item" lines
            meta[key] = _value(rest) if rest else None
    except _Fallback:
        return None
    return meta


def _plain(s: str) -> bool:
    return (
        bool(s)
        and s[0] not in _INDICATORS
        and s == s.strip()
        and _PLAIN_BAD.search(s) is None
        and not (_PLAIN_NEVER & set(s))
        and _resolve(s) == _STR
    )


def _emit(v: Any) -> str | None:
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if type(v) is int:
        return str(v)
    if type(v) is dt.date:
        return v.isoformat()
    if type(v) is str and _plain(v):
        return v
    return None


def emit_key(key: str, value: Any, *, flow: bool = False) -> str | None:
    """``key: value`` as YAML text, or ``None`` if the value needs the full dumper."""
    if not _plain(key) or not _KEY.match(key + ":"):
        return None
    if type(value) is list:
        if not value:
            return f"{key}: []\n"
        out = [_emit(v) for v in value]
        if any(o is None for o in out):
            return None
        if flow and all(type(v) is str and not (_FLOW_UNSAFE & set(v)) for v in value):
            return f"{key}: [{', '.join(out)}]\n"  # type: ignore[arg-type]
        return f"{key}:\n" + "".join(f"  - {o}\n" for o in out)
    s = _emit(value)
    return None if s is None else f"{key}: {s}\n"
