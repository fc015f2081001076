"""The secret policy: what is refused (by pattern name) and what ATP stores on purpose."""

from __future__ import annotations

import pytest

from atomic_agents.exceptions import SecretRejectedError
from atomic_agents.memory import check_no_secrets, find_secret

# Built by concatenation so this file itself does not look like it leaks keys.
SECRETS = {
    "private-key": "-----BEGIN RSA " + "PRIVATE KEY-----\nMIIEow...",
    "aws-access-key-id": "key AKIA" + "IOSFODNN7EXAMPLE here",
    "github-token": "ghp_" + "x1Y2z3" * 6,
    "slack-token": "xoxb-" + "123456789012-abcdefghij",
    "openai-or-anthropic-key": "sk-ant-" + "api03-abcdefghijklmnopqrstuv",
    "google-api-key": "AIza" + "SyA-1234567890abcdefghijklmnopqrstu",
    "stripe-key": "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc",
    "jwt": "eyJhbGciOiJIUzI1NiJ9." + "eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "bearer-token": "Authorization: Bearer " + "abcdef0123456789abcdef0123456789",
    "url-credentials": "postgres://admin:" + "hunter2@db.internal:5432/app",
    "password-assignment": "DB_PASSWORD=" + "correct-horse-battery",
    "high-entropy-string": "token " + "Zx8Qm2Lr9Tv4Wp7Ks1Nd6Hb3Jf5Gc0Ya",
}

SAFE = [
    "Goal: g-204 | Record ID: 3f0c2a9e-8b1d-4c6e-9f7a-2b5d8e1c4a70 | Stage: verification | Owner: verifier",
    "Charter version 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 ratified",
    "Reset the password reset flow: users get an email link",
    "password: <redacted>",
    "api_key=${API_KEY} comes from the environment",
    "files changed: src/atomic_agents/memory/_sqlite_schema.py and tests/memory/test_sqlite.py",
    "commit 2f8f6841c0a9b3e1d5f7a2c4e6b8d0f1a3c5e7b9 fixed the flaky test",
    "the migration took 12,345 ms and touched 98,765 rows",
]


@pytest.mark.parametrize(("pattern", "text"), sorted(SECRETS.items()))
def test_secret_patterns_are_named_and_never_echoed(pattern: str, text: str) -> None:
    assert find_secret(text) == pattern
    with pytest.raises(SecretRejectedError) as info:
        check_no_secrets(text, None)
    assert info.value.pattern == pattern and info.value.rule == "no-secrets"
    secret_part = text.split()[-1] if " " in text else text
    assert secret_part not in str(info.value)


@pytest.mark.parametrize("text", SAFE)
def test_ids_hashes_paths_and_prose_are_not_secrets(text: str) -> None:
    assert find_secret(text) is None
    check_no_secrets(text, {"note": text})


def test_metadata_keys_that_name_a_secret_refuse_their_value() -> None:
    with pytest.raises(SecretRejectedError) as info:
        check_no_secrets("ok", {"client_secret": "abc123"})
    assert info.value.field == "metadata.client_secret" and info.value.pattern == "sensitive-key"
    check_no_secrets("ok", {"token_count": 12, "password": "<redacted>"})
