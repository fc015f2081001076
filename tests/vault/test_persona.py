"""Item 7: init scaffolds the spec skeletons; tools.md and model.md parse into typed objects."""

from __future__ import annotations

import pytest

from atomic_agents.exceptions import ValidationError
from atomic_agents.vault import Agent, Vault, lint_agent, parse_model_md, parse_tools_md


def test_init_scaffolds_skeletons_and_folders(vault: Vault) -> None:
    agent, created = vault.init_agent("finance", title="Finance Coach")
    for folder in ("persona", "memory", "wiki", "journal", "log", "raw"):
        assert (agent.path / folder).is_dir()
    assert set(created) >= {"persona/IDENTITY.md", "persona/SOUL.md", "persona/USER.md", "tools.md", "model.md", "memory/INDEX.md"}
    ident = (agent.persona_dir / "IDENTITY.md").read_text()
    assert ident.startswith("# IDENTITY — Finance Coach\n")
    for heading in ("## Who I am", "## Mission", "## Scope", "## Operating doctrine", "## Autonomy ladder", "## What I'm NOT"):
        assert heading in ident
    assert "## Evolution discipline" in (agent.persona_dir / "SOUL.md").read_text()
    assert (agent.persona_dir / "USER.md").read_text().startswith("# USER — the operator")
    assert agent.title == "Finance Coach"
    assert lint_agent(agent).errors == []


def test_init_is_idempotent_and_never_overwrites(vault: Vault) -> None:
    agent, _ = vault.init_agent("finance")
    (agent.persona_dir / "SOUL.md").write_text("# SOUL — mine\n")
    _, created = vault.init_agent("finance")
    assert created == []
    assert (agent.persona_dir / "SOUL.md").read_text() == "# SOUL — mine\n"


TOOLS = """# TOOLS — Finance Coach

## Read paths
- finance/
- shared/market_data/

## Write paths (own folder ONLY)
- finance/memory/
- journal/

## External APIs
- plaid: read-only balances
- `alpha_vantage`: quotes

## Hard NOs
- Never move money
- Never email the operator's employer
"""


def test_tools_md_parses() -> None:
    cfg = parse_tools_md(TOOLS, agent_name="finance")
    assert cfg.read_paths == ["finance/", "shared/market_data/"]
    assert cfg.write_paths == ["finance/memory/", "journal/"]
    assert cfg.external_apis == {"plaid": "read-only balances", "alpha_vantage": "quotes"}
    assert cfg.hard_nos == ["Never move money", "Never email the operator's employer"]


@pytest.mark.parametrize("path", ["../other_agent/", "/etc/", "~/notes/", "finance/../../x", "other/memory/../../../x"])
def test_tools_md_write_path_outside_agent_is_an_error(path: str) -> None:
    text = TOOLS.replace("- journal/\n", f"- journal/\n- {path}\n")
    with pytest.raises(ValidationError) as err:
        parse_tools_md(text, agent_name="finance", path="finance/tools.md")
    assert (err.value.field, err.value.rule) == ("Write paths", "own-folder-only")


def test_lint_reports_bad_tools_md(vault: Vault) -> None:
    agent, _ = vault.init_agent("finance")
    (agent.path / "tools.md").write_text(TOOLS.replace("- journal/\n", "- ../ops/\n"))
    report = lint_agent(agent)
    assert [(i.path, i.rule) for i in report.errors] == [("finance/tools.md", "own-folder-only")]


MODEL = """# MODEL — Finance Coach

## Default model
claude-sonnet-4-5 (best reasoning per dollar for budgeting)

## Fallback
claude-haiku-4-5 — when the default is rate-limited

## Token budget
- Max system prompt: 8,000 tokens
- Max output per turn: 2k tokens
- Daily token cap: 500000

## Prompt caching
Enabled for persona + INDEX (5 minute TTL)

## Cost guardrail
Stop and ask above $5/day
"""


def test_model_md_parses() -> None:
    cfg = parse_model_md(MODEL)
    assert (cfg.default_model, cfg.fallback_model) == ("claude-sonnet-4-5", "claude-haiku-4-5")
    assert "reasoning" in cfg.default_reason and "rate-limited" in cfg.fallback_when
    assert (cfg.max_system_prompt_tokens, cfg.max_output_tokens, cfg.daily_token_cap) == (8000, 2000, 500000)
    assert cfg.prompt_caching is True and cfg.cost_guardrail_usd == 5.0


def test_model_md_skeleton_parses_to_blanks(agent: Agent) -> None:
    cfg = parse_model_md((agent.path / "model.md").read_text())
    assert cfg.default_model is None and cfg.max_output_tokens is None and cfg.cost_guardrail_usd is None


def test_model_md_bad_token_count_names_field() -> None:
    with pytest.raises(ValidationError) as err:
        parse_model_md(MODEL.replace("2k tokens", "lots"))
    assert err.value.field == "Max output per turn"
