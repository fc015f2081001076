"""The secret policy: every secret of the corpus refused by name and never echoed; prose kept."""

from __future__ import annotations

import json
import random
import string
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from atomic_agents.exceptions import SecretRejectedError
from atomic_agents.memory import InMemoryMemoryStore, Scope, check_no_secrets, find_secret
from atomic_agents.memory._secrets import normalise

from ._helpers import CountingEmbedder
from .secret_corpus import ORDINARY, SECRETS


def _secret_part(text: str) -> str:
    """The part of a corpus entry that is the secret itself (what must never be printed)."""
    return max(normalise(text).split(), key=len)


def test_the_corpus_is_big_enough() -> None:
    assert len(SECRETS) >= 60 and len(ORDINARY) >= 60
    assert len({t for _, t in SECRETS}) == len(SECRETS) and len(set(ORDINARY)) == len(ORDINARY)


@pytest.mark.parametrize(("pattern", "text"), SECRETS, ids=[f"{i}-{p}" for i, (p, _) in enumerate(SECRETS)])
def test_every_corpus_secret_is_refused_by_name(pattern: str, text: str) -> None:
    assert find_secret(text) == pattern
    with pytest.raises(SecretRejectedError) as info:
        check_no_secrets(text, None)
    assert info.value.pattern == pattern and info.value.rule == "no-secrets" and info.value.field == "content"


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_sentences_and_paths_are_not_secrets(text: str) -> None:
    assert find_secret(text) is None
    check_no_secrets(text, {"note": text, "path": text}, scope=Scope("builder", text[:500]))


def _channels(exc: SecretRejectedError) -> str:
    return "\n".join([str(exc), repr(exc), json.dumps(exc.to_dict()), exc.field or "", exc.message])


@pytest.mark.parametrize(("pattern", "text"), SECRETS, ids=[f"{i}-{p}" for i, (p, _) in enumerate(SECRETS)])
@pytest.mark.parametrize("position", ["content", "value", "nested-value", "key", "nested-key", "list", "agent_id", "workspace_id"])
def test_a_refused_secret_is_never_echoed_in_any_position(pattern: str, text: str, position: str) -> None:
    secret = _secret_part(text)
    content: str | None = "an ordinary note"
    meta: dict[str, Any] = {"goal_id": "g1"}
    scope = Scope("builder", "alice", org_id="acme", workspace_id="acme/web")
    if position == "content":
        content = text
    elif position == "value":
        meta["note"] = text
    elif position == "nested-value":
        meta["deep"] = {"deeper": {"note": text}}
    elif position == "key":
        meta[text] = "x"
    elif position == "nested-key":
        meta["deep"] = {text: {"a": 1}}
    elif position == "list":
        meta["items"] = ["a", {"b": text}]
    else:
        fields = {"agent_id": "builder", "user_id": "alice", "org_id": "acme", "workspace_id": "acme/web", position: text}
        scope = Scope(**fields)
    with pytest.raises(SecretRejectedError) as info:
        check_no_secrets(content, meta, scope=scope)
    printed = _channels(info.value)
    assert secret not in printed and normalise(secret) not in printed
    assert info.value.pattern == pattern


def test_a_key_that_is_a_secret_is_named_by_position() -> None:
    token = "ghp_" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7c"
    with pytest.raises(SecretRejectedError) as info:
        check_no_secrets("ok", {"goal_id": "g1", "deep": {"x": 1, token: "v"}})
    assert info.value.field == "metadata.deep.<key 2>" and info.value.pattern == "github-token"
    # a key that passed but is not plain enough to print is also named by position
    with pytest.raises(SecretRejectedError) as info2:
        check_no_secrets("ok", {"Zq8xW3vR7tY2uI9o": {"password": "hunter2"}})
    assert info2.value.field == "metadata.<key 1>.password" and info2.value.pattern == "sensitive-key"


@pytest.mark.parametrize(
    "key",
    ["password", "db_password", "DB_PASSWORD", "client_secret", "webhook_secret", "secretKey", "SecretKey", "access-token",
     "accessToken", "auth", "basic_auth", "api_key", "X-Api-Key", "apiKey", "aws_secret_access_key", "private_key",
     "refresh_token", "credentials", "github_token", "passphrase", "pass\u200bword", "ｐａｓｓｗｏｒｄ"],
)  # fmt: skip
@pytest.mark.parametrize("value", ["hunter2", "x", ["a", "b"], {"user": "ci", "pass": "p"}, [{"k": 1}], [1234]])
def test_sensitive_key_names_refuse_any_value_type(key: str, value: Any) -> None:
    with pytest.raises(SecretRejectedError) as info:
        check_no_secrets("ok", {"outer": {key: value}})
    assert info.value.pattern == "sensitive-key" and info.value.field is not None
    assert info.value.field.startswith("metadata.outer.")
    if isinstance(value, str) and len(value) > 1:
        assert value not in _channels(info.value)


def test_a_bare_number_is_a_secret_only_under_a_password_key() -> None:
    check_no_secrets("ok", {"lease_token": 7, "token": 3, "auth": 0})  # fencing tokens, counters
    for key in ("password", "db_password", "passphrase", "adminPassword"):
        with pytest.raises(SecretRejectedError):
            check_no_secrets("ok", {key: 1234})


@pytest.mark.parametrize(
    "meta",
    [
        {"token_count": 12, "max_tokens": 4096, "password_min_length": 12, "secret_santa": "Bob", "primary_key": "id"},
        {"password": "<redacted>", "secret": "${DB_SECRET}", "api_key": "", "token": None, "auth": False},
        {"password": "***", "client_secret": "[REDACTED]", "credentials": [], "auth": {}},
        {"pwd": "/home/alice/build", "cwd": "~/src"},
    ],
)
def test_keys_that_only_mention_a_secret_and_empty_values_pass(meta: dict[str, Any]) -> None:
    check_no_secrets("ok", meta)


def test_scope_ids_are_checked_on_remember() -> None:
    store = InMemoryMemoryStore(embedder=CountingEmbedder())
    token = "npm_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    with pytest.raises(SecretRejectedError) as info:
        store.remember("note", None, Scope("builder", token))
    assert info.value.field == "user_id" and token not in str(info.value)
    assert store.health().total == 0


# -- property tests: random tokens refused, paths and identifiers kept ------------------------

_WORDS = ["Projects", "Atomic", "Agents", "Vault", "Client", "Workspace", "Alpha", "Build", "Release", "Data",
          "Notes", "Backup", "Migration", "Memory", "Store", "Documents", "Library", "Support", "Staging"]  # fmt: skip
_NAMES = ["John", "Jane", "Ali", "Mei", "Olu", "Smith", "Doe", "Khan", "Li", "Okafor"]
_B62 = string.ascii_letters + string.digits


@settings(max_examples=500, deadline=None)
@given(
    user=st.lists(st.sampled_from(_NAMES), min_size=1, max_size=3).map("".join),
    digits=st.integers(0, 9999),
    dirs=st.lists(
        st.tuples(st.lists(st.sampled_from(_WORDS), min_size=1, max_size=5), st.integers(0, 2030)), min_size=1, max_size=6
    ),
    rand=st.text(_B62, min_size=6, max_size=12),
    style=st.sampled_from(["home", "mktemp", "macos", "relative", "windows"]),
)
def test_paths_with_mixed_case_and_digits_are_never_secrets(
    user: str, digits: int, dirs: list[tuple[list[str], int]], rand: str, style: str
) -> None:
    tail = "/".join("".join(ws) + str(n) for ws, n in dirs)
    path = {
        "home": f"/Users/{user}{digits}/{tail}",
        "mktemp": f"/tmp/tmp.{rand}/{tail}",
        "macos": f"/var/folders/x7/{rand.lower()}{digits:04d}_{rand.lower()}0000gn/T/tmp.{rand}/{tail}",
        "relative": f"{user}{digits}/{tail}",
        "windows": f"C:\\Users\\{user}{digits}\\" + tail.replace("/", "\\"),
    }[style]
    for text in (path, f"mirror root is {path}", f"pwd: {path}", f"cwd={path}", f"--root={path}"):
        assert find_secret(text) is None, text
    check_no_secrets("ok", {"root": path, "vault_path": path, "pwd": path})


def test_identifiers_are_not_secrets() -> None:
    rng = random.Random(7)
    for _ in range(2000):
        parts = [rng.choice(_WORDS) for _ in range(rng.randint(4, 8))]
        sep = rng.choice(["", "_", "-"])
        ident = sep.join(parts) + str(rng.randint(0, 99)) + rng.choice(["", "V2", "Handler", "_test"])
        assert find_secret(f"renamed to {ident}") is None, ident


def test_random_tokens_are_refused() -> None:
    rng = random.Random(11)
    missed = sum(
        find_secret("key " + "".join(rng.choice(_B62) for _ in range(40))) is None for _ in range(2000)
    )
    assert missed <= 10  # measured: about 0.15% of random 40-char base62 strings pass as identifiers
