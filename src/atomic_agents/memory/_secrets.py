"""Refuse content that looks like a secret (spec: "what not to store" is enforced).

:func:`check_no_secrets` raises :class:`~atomic_agents.exceptions.SecretRejectedError`
naming the *pattern* that fired and the field it fired in; the matched text is
never put in the error (message, field path, record), a log line or a return value.
A metadata key that is itself refused, or is not plain enough to show, is named by
its position (``metadata.<key 2>``), never spelled out.

Every string is normalised first (NFKC, then invisible characters removed), so a
token split by zero-width spaces or typed in full-width letters is still a token.
The rules, in the order they are tried:

1. known formats (:data:`SECRET_PATTERNS`): private keys, cloud/SaaS token prefixes;
2. context rules: credentials in a URL (``scheme://user:pw@``, user may be empty),
   ``Authorization:`` headers and ``Basic`` credentials, ``password=``-style
   assignments (a value that reads as prose, a path or a placeholder is not one);
3. a long random-looking token (Shannon entropy), never fired by hex ids (hashes,
   UUIDs), path-shaped text (judged segment by segment) or identifier-shaped text;
4. for metadata: a sensitive key name (``password``, ``*_secret``, ``secretKey``,
   ``access-token``, ``auth``, ...) holding any value (string, number, list, object).

>>> check_no_secrets("deploy went green", {"goal_id": "g1"})
>>> check_no_secrets("token ghp_" + "a1B2" * 10, None)
Traceback (most recent call last):
...
atomic_agents.exceptions.SecretRejectedError: content: looks like a secret (github-token); secrets are never stored [no-secrets]
>>> find_secret("The secret: always run the migration dry-run first") is None
True
"""

from __future__ import annotations

import base64
import binascii
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Mapping
from typing import Any

from ..exceptions import SecretRejectedError

__all__ = ["SECRET_PATTERNS", "check_no_secrets", "find_secret", "is_sensitive_key", "normalise"]

#: (name, regex) for formats recognisable on their own. Names are what the error reports.
SECRET_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("private-key", re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")),
    ("age-secret-key", re.compile(r"\bAGE-SECRET-KEY-1[0-9A-Z]{58}\b")),
    ("aws-access-key-id", re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|APKA)[0-9A-Z]{16}\b")),
    ("github-token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})")),
    ("gitlab-token", re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}")),
    ("slack-token", re.compile(r"\bxox[abposre]-[A-Za-z0-9-]{10,}")),
    ("slack-webhook", re.compile(r"hooks\.slack\.com/services/T[A-Za-z0-9]+/B[A-Za-z0-9]+/[A-Za-z0-9]{16,}")),
    ("openai-or-anthropic-key", re.compile(r"\bsk-(?:ant-|proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}")),
    ("google-api-key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}")),
    ("stripe-key", re.compile(r"\b(?:sk|rk|pk)_(?:live|test)_[0-9A-Za-z]{16,}")),
    ("npm-token", re.compile(r"\bnpm_[A-Za-z0-9]{36}\b")),
    ("pypi-token", re.compile(r"\bpypi-AgE[A-Za-z0-9_-]{50,}")),
    ("huggingface-token", re.compile(r"\bhf_[A-Za-z0-9]{30,}\b")),
    ("twilio-key", re.compile(r"\b(?:SK|AC)[0-9a-fA-F]{32}\b")),
    ("mailchimp-key", re.compile(r"\b[0-9a-f]{32}-us[0-9]{1,2}\b")),
    ("sendgrid-key", re.compile(r"\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}")),
    ("shopify-token", re.compile(r"\bshp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}\b")),
    ("digitalocean-token", re.compile(r"\bdo[opr]_v1_[a-f0-9]{64}\b")),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
    ("bearer-token", re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/-]{20,}=*")),
)

# -- normalisation -------------------------------------------------------------------

# Default-ignorable code points that are not category Cf (fillers, variation selectors).
_IGNORABLE = frozenset(
    [0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x3164, 0xFFA0, *range(0x180B, 0x1810), *range(0xFE00, 0xFE10)]
)


def _invisible(ch: str) -> bool:
    cp = ord(ch)
    return unicodedata.category(ch) == "Cf" or cp in _IGNORABLE or 0xE0100 <= cp <= 0xE01EF


def normalise(text: str) -> str:
    """NFKC, then invisible characters (zero-width, BOM, soft hyphen, bidi marks) removed.

    >>> normalise("ghp\\u200b_ｘ") == "ghp_x"
    True
    """
    if text.isascii():
        return text  # NFKC is the identity on ASCII and no ASCII character is invisible
    folded = unicodedata.normalize("NFKC", text)
    return "".join(ch for ch in folded if not _invisible(ch))


# -- shapes: placeholders, paths, identifiers ----------------------------------------

# Values that announce they are not a secret.
_PLACEHOLDER = re.compile(
    r"(?ix)^(?: <[^>]*>? | \$\{?[\w.:-]+\}? | %[\w.-]+% | \{\{.*\}\} | \[\w+\] | \*+ | x{3,} | \.{3} | …"
    r" | \[?redacted\]? | \(?redacted\)? | hidden | masked | removed | omitted | elided | rotated | revoked"
    r" | none | null | nil | undefined | empty | unset | n/?a | tbd | todo | changeme | change[_-]?me"
    r" | true | false | yes | no | on | off | required | optional | enabled | disabled | provided | set"
    r" | str | string | bool | boolean | int | integer | bytes | text | any | object | secretstr)$"
)
# Literal words a documentation URL uses in place of a password.
_URL_PLACEHOLDER = re.compile(r"(?i)^(?:pass(?:word)?|passwd|pwd|secret|pw|token)$")
_PATH_START = re.compile(r"^(?:/|~|\.{1,2}/|[A-Za-z]:[\\/]|\\\\)")
_HEX = re.compile(r"^[0-9a-fA-F-]+$")  # hashes, git SHAs, UUIDs: ids ATP stores on purpose
_DIGEST = re.compile(r"^(?:sha1|sha224|sha256|sha384|sha512|md5)[-_]", re.IGNORECASE)
_PART = re.compile(r"[A-Z]{2,}(?![a-z])|[A-Z]?[a-z]+|[A-Z]|[0-9]+")
_CONSONANTS5 = re.compile(r"[^aeiouyAEIOUY]{5}")
_VOWELS = frozenset("aeiouyAEIOUY")


def _path_shaped(value: str) -> bool:
    """``/abs``, ``~/x``, ``./x``, ``C:\\x``, or ``a/b`` whose segments all read as names."""
    if _PATH_START.match(value):
        return True
    segments = [s for s in re.split(r"[/\\]", value) if s]
    return len(segments) >= 2 and all(len(s) <= 8 or _single_case(s) or _identifier_shaped(s) for s in segments)


def _wordlike(part: str) -> bool:
    """A letters-only run that reads like a word: 3+ letters, a vowel, no 5 consonants in a row."""
    body = part[1:] if part[0].isupper() and part[1:].islower() else part
    return len(part) >= 3 and any(c in _VOWELS for c in part) and not _CONSONANTS5.search(body)


def _identifier_shaped(token: str) -> bool:
    """Words joined by case, digits or ``_-./`` (``JohnSmith2Projects``, ``test_v2_null``).

    Split into runs (``John``, ``Smith``, ``2``, ...): an identifier is mostly
    word-like runs of 3+ letters on average with few digit groups; a random
    token is short runs flipping case every char or two. (Random 32-char base62:
    about 1 in 7,000 passes as an identifier; 40 chars: about 1 in 60,000.)
    """
    parts = _PART.findall(token)
    words = [p for p in parts if p.isalpha()]
    if not words:
        return False
    letters = sum(len(p) for p in words)
    wordlike = sum(len(p) for p in words if _wordlike(p))
    singles = sum(1 for p in words if len(p) == 1)
    digit_groups = len(parts) - len(words)
    return wordlike >= 0.75 * letters and letters >= 3.0 * len(words) and singles <= 3 and digit_groups <= 4


def _single_case(segment: str) -> bool:
    return not (any(c.isupper() for c in segment) and any(c.islower() for c in segment))


# -- the entropy rule ----------------------------------------------------------------

_TOKEN = re.compile(r"[A-Za-z0-9+/_-]{32,}={0,2}")  # "=" only as base64 padding: "cwd=x/y" is two tokens
_MIN_TOKEN = 32
_MIN_ENTROPY = 4.0  # bits/char; random base62 at 32 chars: 99% of keys are above 4.08


def _entropy(s: str) -> float:
    counts = Counter(s)
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


# Dates and times inside names ("2026-08-12T143000_pre_v2_migration") are not randomness.
_DATETIME = re.compile(r"\d{4}-?\d{2}-?\d{2}(?:[T_-]?\d{2}:?\d{2}(?::?\d{2})?(?:\.\d+)?Z?)?")


def _random_looking(token: str) -> bool:
    tok = _DATETIME.sub("-", token).strip("=-_")
    if len(tok) < _MIN_TOKEN or _HEX.match(tok) or _DIGEST.match(tok):
        return False
    classes = any(c.isupper() for c in tok) + any(c.islower() for c in tok) + any(c.isdigit() for c in tok)
    return classes == 3 and _entropy(tok) >= _MIN_ENTROPY and not _identifier_shaped(tok)


def _high_entropy(text: str) -> bool:
    for m in _TOKEN.finditer(text):
        tok = m.group(0)
        pieces = [tok]
        if "/" in tok:
            before = text[m.start() - 1] if m.start() else ""
            segments = tok.split("/")
            plain = sum(len(s) for s in segments if s and (_single_case(s) or _identifier_shaped(s)))
            # A path is judged segment by segment ("/Users/JohnSmith2/..." is not one token);
            # a base64 blob that merely contains "/" (mostly random segments) is judged whole.
            if tok.startswith("/") or before in ("~", ".", ":") or 2 * plain >= len(tok) - tok.count("/"):
                pieces = segments
        if any(_random_looking(p) for p in pieces):
            return True
    return False


# -- context rules -------------------------------------------------------------------

# The look-behind starts a scheme only where a run of scheme characters starts (linear time).
_URL_CREDENTIALS = re.compile(r"(?i)(?<![a-z0-9+.-])[a-z][a-z0-9+.-]*://(?P<user>[^/\s:@]*):(?P<value>[^/\s@]+)@")
_BASIC = re.compile(r"(?i)\bbasic\s+(?P<value>[A-Za-z0-9+/]{6,}={0,2})(?![A-Za-z0-9+/=])")
_AUTH_HEADER = re.compile(
    r"(?i)\b(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?"
    r"(?:(?P<scheme>basic|bearer|digest|token|api-?key|key|hmac|negotiate|ntlm|sso-key|aws4-hmac-sha256)\s+)?"
    r"(?P<value>[A-Za-z0-9+/=._~-]{8,})"
)
# Keys whose value is a password: even a plain word ("password: swordfish") is one.
_PASSWORD_WORDS = r"(?:password|passwd|passphrase)"
_SECRET_WORDS = (
    r"(?:(?P<pwd>pwd)|secret|token|api[_-]?key|apikey|access[_-]?key|secret[_-]?key|private[_-]?key|signing[_-]?key|"
    r"encryption[_-]?key|master[_-]?key|account[_-]?key|client[_-]?secret|auth[_-]?token|access[_-]?token|"
    r"refresh[_-]?token|session[_-]?token|id[_-]?token|credentials?)"
)
_ASSIGNMENT = re.compile(
    # No prefix group: "DB_PASSWORD" matches at "PASSWORD" ("_" is not alphanumeric), and a
    # run like "x_y-x_y-..." cannot make every start rescan the rest of the text.
    rf"(?i)(?<![A-Za-z0-9])(?:(?P<pw>{_PASSWORD_WORDS})|{_SECRET_WORDS})(?![A-Za-z0-9])[\"'`]?[ \t]*"
    r"(?P<sep>:=|=>|=(?!=)|:(?!:))[ \t]*"
    r"(?P<value>\"[^\"\n]{0,200}\"|'[^'\n]{0,200}'|`[^`\n]{0,200}`|[^\s,;]+)"
)
# A code expression, not a literal: getpass(), os.environ["X"], config.secret_key, self.token.
_CODE = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*[(\[]|^(?:self|cls|os|env|config|settings|process|ENV)\.")
# password=password, secret = db_secret: a variable passed on, not a literal.
_NAMES_A_SECRET = re.compile(r"(?i)pass(?:word|wd|phrase)|secret|token|api_?key|credential")
_ANNOTATION = re.compile(r"[ \t]*(?:\||=(?!=))")  # "password: HiddenText | None = None"
_PLAIN_WORD = re.compile(r"[A-Za-z]+(?:['’-][A-Za-z]+)*")
_NUMBER = re.compile(r"[0-9][0-9.,_]*")
_STRONG_SYMBOLS = frozenset("!@#$%^&*+=?~|<>")
_CONTINUES = re.compile(r"[ \t]+[A-Za-z(\[]")  # another word follows on the same line: prose


def _decodes_to_user_pass(value: str) -> bool:
    try:
        raw = base64.b64decode(value + "=" * (-len(value) % 4), validate=True)
        text = raw.decode("utf-8")
    except (binascii.Error, ValueError):
        return False
    return ":" in text and text.isprintable() and len(text) >= 3


def _strong(value: str) -> bool:
    """Looks like a password whatever follows it: 8+ chars with a letter, a digit and a symbol.

    (``Python3.11`` or ``ES2026`` are words of prose; ``Tr0ub4dor&3`` is not.)
    """
    return (
        len(value) >= 8
        and any(c.isalpha() for c in value)
        and any(c.isdigit() for c in value)
        and any(c in _STRONG_SYMBOLS for c in value)
    )


def _assigned_secret(m: re.Match[str], text: str) -> bool:
    """Is the value of ``key: value`` / ``key=value`` a credential rather than prose?"""
    raw = m.group("value")
    quoted = raw[0] in "\"'`"
    value = raw[1:-1] if quoted and len(raw) >= 2 and raw[-1] == raw[0] else raw.strip("\"'`")
    if not quoted:
        value = value.strip(".,;:!?)]}").lstrip("([{")
    is_password = m.group("pw") is not None
    if (
        len(value) < 4
        or _PLACEHOLDER.match(value)
        or _path_shaped(value)
        or (m.group("pwd") is not None and "/" in value)  # "pwd: AliLi0/build": a working directory
        or (quoted and any(c.isspace() for c in value))
        or not any(c.isalnum() for c in value)
        or (not quoted and (_CODE.match(raw) or _NAMES_A_SECRET.search(value) or raw[0] in "(["))
    ):
        return False
    if _NUMBER.fullmatch(value):
        return is_password  # a numeric password (PIN), but not "max_token=4096"
    if m.group("sep") != ":" or quoted:
        return True  # assignment syntax: KEY=value, "key": "value"
    # "key: value" in running text: a heading or a sentence as often as a credential.
    if _ANNOTATION.match(text, m.end()):
        return False  # a type annotation in code
    continues = bool(_CONTINUES.match(text, m.end()))
    if _PLAIN_WORD.fullmatch(value):
        return is_password and not continues  # "password: swordfish", not "The secret: always run ..."
    if continues:
        return _strong(value)
    has_letter = any(c.isalpha() for c in value)
    return _strong(value) or (has_letter and any(c.isdigit() for c in value)) or is_password


def _context_secret(text: str) -> str | None:
    for m in _URL_CREDENTIALS.finditer(text):
        value = m.group("value")
        if not (_PLACEHOLDER.match(value) or _URL_PLACEHOLDER.match(value)):
            return "url-credentials"
    for m in _AUTH_HEADER.finditer(text):
        value = m.group("value")
        if _PLACEHOLDER.match(value):
            continue
        scheme = (m.group("scheme") or "").lower()
        if scheme == "basic" and _decodes_to_user_pass(value):
            return "basic-auth"
        shaped = any(c.isdigit() for c in value) or any(c in "+/=" for c in value) or not _single_case(value)
        if shaped and any(c.isalpha() for c in value) and (scheme or len(value) >= 16):
            return "authorization-header"
    for m in _BASIC.finditer(text):
        if _decodes_to_user_pass(m.group("value")):
            return "basic-auth"
    for m in _ASSIGNMENT.finditer(text):
        if _assigned_secret(m, text):
            return "password-assignment"
    return None


def find_secret(text: str) -> str | None:
    """The name of the first secret rule ``text`` matches, or ``None``.

    >>> find_secret("redis://:" + "s3cr3tpw@cache:6379/0")
    'url-credentials'
    >>> find_secret("pwd: ~/build/out") is None
    True
    """
    norm = normalise(text)
    for name, rx in SECRET_PATTERNS:
        if rx.search(norm):
            return name
    found = _context_secret(norm)
    if found:
        return found
    if _high_entropy(norm):
        return "high-entropy-string"
    return None


# -- metadata keys -------------------------------------------------------------------

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SENSITIVE_EXACT = frozenset(
    {
        "password", "passwd", "passphrase", "pwd", "secret", "secrets", "token", "auth", "authorization",
        "credential", "credentials", "api_key", "apikey", "access_key", "secret_key", "private_key",
        "client_secret", "access_token", "auth_token", "refresh_token", "id_token", "session_token",
        "bearer", "bearer_token", "cookie", "session_cookie", "set_cookie", "signing_key", "encryption_key",
    }
)  # fmt: skip
_SENSITIVE_SUFFIX = (
    "_password", "_passwd", "_passphrase", "_secret", "_token", "_api_key", "_apikey", "_access_key",
    "_secret_key", "_private_key", "_signing_key", "_encryption_key", "_credential", "_credentials", "_auth",
)  # fmt: skip


def _key_words(key: str) -> str:
    """``secretKey``, ``access-token``, ``X-Api-Key`` -> ``secret_key``, ``access_token``, ``x_api_key``."""
    k = _CAMEL.sub("_", normalise(key).strip())
    return re.sub(r"[^a-z0-9]+", "_", k.lower()).strip("_")


def is_sensitive_key(key: str) -> bool:
    """Does this metadata key name a secret (``password``, ``db_password``, ``secretKey``, ``auth``)?

    >>> [is_sensitive_key(k) for k in ("secretKey", "access-token", "token_count", "goal_id")]
    [True, True, False, False]
    """
    k = _key_words(key)
    return k in _SENSITIVE_EXACT or k.endswith(_SENSITIVE_SUFFIX)


def _holds_value(value: Any, *, password: bool = False, inner: bool = False) -> bool:
    """Whether a value under a sensitive key carries something.

    Strings (not placeholders, empty or absolute paths), non-empty lists and objects do;
    null and booleans do not. A bare number does only under a password key (a PIN):
    ``{"lease_token": 7}`` is a fencing counter, ``{"password": 1234}`` is a password.
    """
    if value is None or isinstance(value, bool):
        return False
    if isinstance(value, str):
        v = normalise(value).strip()
        return bool(v) and not _PLACEHOLDER.match(v) and not _PATH_START.match(v)  # {"pwd": "/srv/app"}
    if isinstance(value, Mapping):
        return any(_holds_value(v, inner=True) for v in value.values()) or any(_holds_value(str(k)) for k in value)
    if isinstance(value, (list, tuple)):
        return any(_holds_value(v, inner=True) for v in value)
    return password or inner  # numbers


_PASSWORD_KEY = re.compile(r"(?:^|_)(?:password|passwd|passphrase)$")


def _working_dir(key: str, value: Any) -> bool:
    """``{"pwd": "build/out"}``: the shell's working directory, not a password."""
    return _key_words(key) == "pwd" and isinstance(value, str) and ("/" in value or "\\" in value)


_SHOWABLE_KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_ .:/@-]{0,63}")
_LONG_RUN = re.compile(r"[A-Za-z0-9]{12,}")


def _showable_key(key: str) -> bool:
    """Plain enough to print in an error path: short, ASCII, no long random-looking run."""
    if not _SHOWABLE_KEY.fullmatch(key):
        return False
    return all(
        _single_case(run) or _identifier_shaped(run) or _HEX.match(run) for run in _LONG_RUN.findall(key)
    )


# -- the check -----------------------------------------------------------------------

_SCOPE_FIELDS = ("agent_id", "user_id", "org_id", "workspace_id")


def check_no_secrets(
    content: str | None,
    metadata: Mapping[str, Any] | None,
    *,
    record: str | None = None,
    scope: object | None = None,
) -> None:
    """Raise :class:`SecretRejectedError` if content, metadata or a scope id looks like a secret.

    ``scope`` is anything with ``agent_id``/``user_id``/``org_id``/``workspace_id``
    (a :class:`Scope` or a :class:`Memory`). The error's field is a path such as
    ``metadata.db.password`` or ``metadata.<key 2>`` (a key is never spelled out
    unless it is plain); the offending text is never part of it.
    """
    if content is not None:
        found = find_secret(content)
        if found:
            raise SecretRejectedError(found, field="content", record=record)
    if metadata:
        _check_metadata(metadata, record)
    if scope is not None:
        for name in _SCOPE_FIELDS:
            value = getattr(scope, name, None)
            if isinstance(value, str):
                found = find_secret(value)
                if found:
                    raise SecretRejectedError(found, field=name, record=record)


def _check_metadata(metadata: Mapping[str, Any], record: str | None) -> None:
    # Iterative, depth first, in document order: deep nesting cannot overflow the stack.
    stack: list[tuple[str, Any]] = [("metadata", metadata)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, str):
            found = find_secret(value)
            if found:
                raise SecretRejectedError(found, field=path, record=record)
        elif isinstance(value, Mapping):
            children: list[tuple[str, Any]] = []
            for i, (k, v) in enumerate(value.items(), 1):
                key = str(k)
                found = find_secret(key)
                if found:
                    raise SecretRejectedError(found, field=f"{path}.<key {i}>", record=record)
                sub = f"{path}.{key}" if _showable_key(key) else f"{path}.<key {i}>"
                password = bool(_PASSWORD_KEY.search(_key_words(key)))
                if is_sensitive_key(key) and _holds_value(v, password=password) and not _working_dir(key, v):
                    raise SecretRejectedError("sensitive-key", field=sub, record=record)
                children.append((sub, v))
            stack.extend(reversed(children))
        elif isinstance(value, (list, tuple)):
            stack.extend(reversed([(f"{path}[{i}]", v) for i, v in enumerate(value)]))
