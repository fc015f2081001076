"""Refuse content that looks like a secret (spec: "what not to store" is enforced).

:func:`check_no_secrets` raises :class:`~atomic_agents.exceptions.SecretRejectedError`
naming the *pattern* that fired and the field it fired in; the matched text is
never put in the error, a log line or a return value.

>>> check_no_secrets("deploy went green", {"goal_id": "g1"})
>>> check_no_secrets("token ghp_" + "a1B2" * 10, None)
Traceback (most recent call last):
...
atomic_agents.exceptions.SecretRejectedError: content: looks like a secret (github-token); secrets are never stored [no-secrets]
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

from ..exceptions import SecretRejectedError

__all__ = ["SECRET_PATTERNS", "check_no_secrets", "find_secret"]

#: (name, regex). Names are what the error reports; order is most specific first.
SECRET_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("private-key", re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")),
    ("aws-access-key-id", re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA)[0-9A-Z]{16}\b")),
    ("github-token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})")),
    ("gitlab-token", re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}")),
    ("slack-token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}")),
    ("openai-or-anthropic-key", re.compile(r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}")),
    ("google-api-key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}")),
    ("stripe-key", re.compile(r"\b[sr]k_(?:live|test)_[0-9A-Za-z]{16,}")),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
    ("bearer-token", re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/-]{20,}=*")),
    ("url-credentials", re.compile(r"\b[a-z][a-z0-9+.-]*://[^/\s:@]+:[^/\s@]+@")),
    (
        "password-assignment",
        re.compile(
            r"(?i)(?<![a-z0-9])(?:password|passwd|passphrase|pwd|secret|secret[_-]?key|api[_-]?key|apikey|"
            r"access[_-]?token|auth[_-]?token|refresh[_-]?token|client[_-]?secret|private[_-]?key|"
            r"aws_secret_access_key)\b[\"']?\s*[:=]\s*[\"']?(?P<value>[^\s\"',;]{4,})"
        ),
    ),
)

# Metadata keys whose string value is itself the secret ({"password": "..."}).
_SENSITIVE_KEY = re.compile(
    r"(?i)^(?:password|passwd|passphrase|pwd|secret|secret_key|api_key|apikey|access_token|"
    r"auth_token|refresh_token|client_secret|private_key|token|credentials?)$"
)
# Values that announce they are not a secret.
_PLACEHOLDER = re.compile(r"(?i)^(?:<[^>]*>?|\$\{?\w+\}?|\*+|x{3,}|redacted|none|null|changeme|\.\.\.|\[redacted\])$")
_TOKEN = re.compile(r"[A-Za-z0-9+/=_-]{32,}")
_HEXISH = re.compile(r"^[0-9a-fA-F-]+$")  # hashes, git SHAs, UUIDs: ids ATP stores on purpose


def _entropy(s: str) -> float:
    counts = Counter(s)
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


def _high_entropy(text: str) -> bool:
    for m in _TOKEN.finditer(text):
        tok = m.group(0).strip("=")
        if len(tok) < 32 or _HEXISH.match(tok):
            continue
        has_classes = any(c.isupper() for c in tok) + any(c.islower() for c in tok) + any(c.isdigit() for c in tok)
        if has_classes == 3 and _entropy(tok) >= 4.3:
            return True
    return False


def find_secret(text: str) -> str | None:
    """The name of the first secret pattern ``text`` matches, or ``None``."""
    for name, rx in SECRET_PATTERNS:
        for m in rx.finditer(text):
            value = m.groupdict().get("value")
            if value is not None and _PLACEHOLDER.match(value):
                continue
            return name
    if _high_entropy(text):
        return "high-entropy-string"
    return None


def _walk(value: Any, path: str) -> Iterator[tuple[str, str, str | None]]:
    """Yield (field path, string, key it sits under) for every string in a JSON value."""
    if isinstance(value, str):
        yield path, value, path.rsplit(".", 1)[-1]
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield path + "." + str(k), str(k), None
            yield from _walk(v, f"{path}.{k}")
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _walk(v, f"{path}[{i}]")


def check_no_secrets(content: str | None, metadata: Mapping[str, Any] | None, *, record: str | None = None) -> None:
    """Raise :class:`SecretRejectedError` if content or any metadata string looks like a secret."""
    if content is not None:
        found = find_secret(content)
        if found:
            raise SecretRejectedError(found, field="content", record=record)
    for path, text, key in _walk(metadata or {}, "metadata"):
        found = find_secret(text)
        if not found and key is not None and _SENSITIVE_KEY.match(key) and text and not _PLACEHOLDER.match(text):
            found = "sensitive-key"
        if found:
            raise SecretRejectedError(found, field=path, record=record)
