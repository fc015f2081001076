"""The context's tokenizer: o200k_base from bpe-openai (offline, tiktoken's ids), the bundled WordPiece as fallback."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from atomic_agents.bridge import _tokens, context, count_tokens, tokenizer_name
from atomic_agents.vault import Agent

from .conftest import TODAY, draft

# OpenAI's published o200k_base examples (openai-cookbook, "How to count tokens with tiktoken")
PUBLISHED = {"tiktoken is great!": 6, "antidisestablishmentarianism": 6, "2 + 2 = 4": 7, "お誕生日おめでとう": 8}


@pytest.fixture
def wordpiece(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The fallback, as when bpe-openai is not installed."""
    monkeypatch.setattr(_tokens, "_bpe_module", lambda: None)
    _tokens._tokenizer.cache_clear()
    yield
    _tokens._tokenizer.cache_clear()


def test_o200k_from_the_wheel_matches_tiktokens_published_counts_and_ids() -> None:
    _tokens._tokenizer.cache_clear()
    assert tokenizer_name().startswith("o200k_base (bpe-openai")
    assert {text: count_tokens(text) for text in PUBLISHED} == PUBLISHED
    enc = _tokens._bpe_module().tokenizer_for_encoding("o200k_base")
    assert enc.encode("tiktoken is great!") == [83, 8251, 2488, 382, 2212, 0]
    assert enc.encode("hello world") == [24912, 2375]
    assert count_tokens("<|endoftext|>") > 1  # special tokens are ordinary text in a note
    assert count_tokens("") == 0


def test_the_fallback_is_the_bundled_wordpiece_and_says_so(wordpiece: None) -> None:
    assert tokenizer_name().startswith("all-MiniLM-L6-v2 WordPiece")
    assert count_tokens("Pay the highest-interest debt first.") == 8


def test_the_fallback_can_be_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATOMIC_AGENTS_TOKENIZER", "wordpiece")
    _tokens._tokenizer.cache_clear()
    try:
        assert "WordPiece" in tokenizer_name()
    finally:
        _tokens._tokenizer.cache_clear()


@pytest.mark.parametrize("fallback", [False, True])
def test_json_names_the_tokenizer_and_the_budget_holds_with_either(agent: Agent, request: pytest.FixtureRequest,
                                                                    fallback: bool) -> None:
    if fallback:
        request.getfixturevalue("wordpiece")
    agent.create_notes([draft(f"rule_{i}", body=f"Rule {i}: keep it short.\n\n- a.\n- b!\n") for i in range(6)],
                       today=TODAY)
    (agent.memory_dir / "INDEX_more.md").write_text("# More\n\n- `x` — y.\n", encoding="utf-8")
    full = context(agent, budget=100_000, today=TODAY)
    data = json.loads(full.to_json())
    assert data["tokenizer"] == tokenizer_name() and ("WordPiece" in data["tokenizer"]) == fallback
    assert data["tokens"] == count_tokens(full.text)
    for budget in range(full.tokens - 40, full.tokens + 1):
        try:
            ctx = context(agent, budget=budget, today=TODAY)
        except Exception as exc:  # noqa: BLE001 - only the always-loaded parts may refuse
            assert type(exc).__name__ == "ContextBudgetError"
            continue
        assert count_tokens(ctx.text) == ctx.tokens <= budget
        assert bool(ctx.dropped) == (budget < full.tokens)  # the whole fits its exact count, nothing less does
        assert (ctx.text == full.text) == (budget == full.tokens)


def test_counting_loads_no_python_rank_tables(tmp_path: Path) -> None:
    """Only the compiled tokenizer is loaded: bpe-openai's Python layer (0.4 s of rank decoding) stays out."""
    import subprocess
    import sys

    code = ("import sys; from atomic_agents.bridge import count_tokens, tokenizer_name; count_tokens('x'); "
            "print(tokenizer_name()); print('bpe_openai' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0].startswith("o200k_base") and out[1] == "False"


PIECES = list("ab Z.,;:!?-_/\\#*'\"()[]{}<>`~|+=%&$@^019\t\n\r") + ["é", "ß", "日", "\u0301", "２", "💡", "\u00a0", "\u2028",
                                                                    "'s", "'LL", "...", "//", "\n\n", " /", "\u0085"]


@given(st.lists(st.lists(st.sampled_from(PIECES), min_size=1, max_size=12).map("".join), min_size=1, max_size=5))
@settings(max_examples=400, deadline=None)
def test_parts_count_as_printed_add_up_unless_one_starts_with_a_slash(raw: list[str]) -> None:
    """What _count relies on: each stripped part and its blank line count the same inside the joined prompt."""
    parts = [t.strip() or "x" for t in raw]
    joined = "".join(p + "\n\n" for p in parts)
    if any(p.startswith("/") for p in parts[1:]):
        return  # counted whole (next test)
    assert count_tokens(joined) == sum(count_tokens(p + "\n\n") for p in parts)


def test_a_part_starting_with_a_slash_is_counted_whole_and_the_budget_holds(agent: Agent) -> None:
    (agent.persona_dir / "USER.md").write_text("/usr/share holds the docs...\n", encoding="utf-8")
    (agent.persona_dir / "SOUL.md").write_text("Calm: ...\n", encoding="utf-8")
    agent.create_notes([draft(f"path_{i}", body=f"//server/share/{i} is mounted at /mnt/{i}...\n") for i in range(5)],
                       today=TODAY)
    (agent.memory_dir / "INDEX_paths.md").write_text("/paths\n\n- `x` — y.\n", encoding="utf-8")
    full = context(agent, budget=100_000, today=TODAY)
    assert count_tokens(full.text) == full.tokens
    for budget in range(full.tokens - 30, full.tokens + 1):
        ctx = context(agent, budget=budget, today=TODAY)
        assert count_tokens(ctx.text) == ctx.tokens <= budget
