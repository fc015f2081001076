"""A record's ``content``: the identity line, a readable summary, the typed fields.

Search tools look at content, not metadata (notes), so the content carries the
goal id, record id, stage, owner and kind in words a keyword search finds. What
must never reach the store is checked here too: secrets (the store's own
policy, asked first so the error names the record's field) and raw command
output (shell transcripts, stack traces, terminal colour codes), which the spec
lists under "what not to store".
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..exceptions import SecretRejectedError, ValidationError
from ..memory import check_no_secrets

__all__ = ["check_clean", "render_content"]

_RAW_OUTPUT: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("a Python traceback", re.compile(r"Traceback \(most recent call last\):|^\s*File \"[^\"]+\", line \d+", re.M)),
    ("a stack trace", re.compile(r"(?:^\s+at [\w$.<>/]+[(:][^\n]*\n){2,}", re.M)),
    # one JavaScript frame is enough: "    at Object.<anonymous> (src/x.test.js:12:5)"
    ("a stack trace", re.compile(r"^\s+at [^\n]*\((?:[^()\n]*[/\\])?[^()\n]+:\d+:\d+\)\s*$", re.M)),
    ("a test runner's output", re.compile(
        r"^=+ (?:test session starts|FAILURES|ERRORS|short test summary info)|^=+ .*\b\d+ (?:passed|failed|errors?)\b.* =+$"
        r"|^collected \d+ items?\b|^(?:PASS|FAIL) +\S+\.(?:test|spec)\.[jt]sx?$|^Tests: +\d+ (?:failed|passed)",
        re.M,
    )),
    # an npm/yarn script banner: "> app@1.0.0 test" or "> npm test" followed by what it printed
    ("a pasted shell transcript", re.compile(r"^> (?:[\w@./-]+@\d[\w.-]* \w+|(?:npm|yarn|pnpm) \w+)[^\n]*\n(?:[^\n]*\S[^\n]*\n?){1,}", re.M)),
    ("a Go panic", re.compile(r"^goroutine \d+ \[[a-z ]+\]:", re.M)),
    ("terminal colour codes", re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")),
    # A prompt line followed by at least two lines of what it printed.
    (
        "a pasted shell transcript",
        re.compile(r"^(?:[\w.-]+@[\w.-]+[^\n$#]*[$#]|\$|PS [A-Za-z]:\\[^>\n]*>) [^\n]+\n(?:(?![\w.-]+@|\$ )[^\n]*\S[^\n]*\n?){2,}", re.M),
    ),
)


def _strings(value: Any, path: str) -> list[tuple[str, str]]:
    if isinstance(value, str):
        return [(path, value)]
    if isinstance(value, Mapping):
        return [x for k, v in value.items() for x in _strings(v, f"{path}.{k}" if path else str(k))]
    if isinstance(value, (list, tuple)):
        return [x for i, v in enumerate(value) for x in _strings(v, f"{path}[{i}]")]
    return []


def check_clean(fields: Mapping[str, Any], known: frozenset[str], *, record: str | None = None) -> None:
    """Refuse secrets and raw command output in any field, naming the field (never the value).

    The field named is the top-level one, and only if it is a field of the kind
    (``known``): a key the caller made up may itself be the secret.
    """
    for key, value in fields.items():
        name = key if key in known else "data"
        try:
            check_no_secrets(None, {key: value}, record=record)
        except SecretRejectedError as exc:
            raise SecretRejectedError(exc.pattern, field=name, record=record) from None
    for path, text in _strings(fields, ""):
        for what, rx in _RAW_OUTPUT:
            if rx.search(text):
                top = path.split(".", 1)[0].split("[", 1)[0]
                raise ValidationError(
                    f"looks like raw command output ({what}); write a summary and keep the output in a file",
                    field=path if top in known and top != "extra" else (top if top in known else "data"),
                    rule="raw-output",
                    record=record,
                )


def identity_line(goal_id: str, record_id: str, stage: str, owner: str) -> str:
    return f"Goal: {goal_id} | Record ID: {record_id} | Stage: {stage} | Owner: {owner}"


def _one_line(value: Any) -> str:
    if isinstance(value, list):
        return "; ".join(_one_line(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k}={_one_line(v)}" for k, v in value.items())
    return " ".join(str(value).split())


def render_content(
    goal_id: str, record_id: str, stage: str, owner: str, headline: str, fields: Mapping[str, Any]
) -> str:
    """Identity line, summary line, then ``field: value`` lines (lists joined with ``; ``)."""
    lines = [identity_line(goal_id, record_id, stage, owner), _one_line(headline)]
    lines += [f"{k}: {_one_line(v)}" for k, v in fields.items()]
    return "\n".join(lines)
