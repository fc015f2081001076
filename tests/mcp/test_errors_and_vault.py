"""User mistakes are tool errors with clear messages, the server keeps serving, a refused secret is never echoed;
vault tools and read-only resources."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ._client import McpClient

S = {"agent_id": "builder", "user_id": "alice"}
SECRET = "ghp_" + "x1Y2z3" * 6  # built by concatenation so this file does not look like a leak
NOTE = {"agent": "finance", "type": "feedback", "topic": "debt_priority_order", "name": "Debt payoff order",
        "description": "Avalanche first unless motivation is low", "sources": ["conversation_2026-05-06"], "confidence": "high",
        "body": "Pay the highest rate first."}


@pytest.mark.parametrize(("tool", "args", "field"), [
    ("eden_remember", {"user_id": "alice", "content": "x"}, "agent_id"),                 # missing agent_id
    ("eden_recall", {**S, "query": "x", "limit": "five"}, "limit"),                      # wrong type
    ("eden_recall", {**S, "query": "x", "limit": True}, "limit"),                        # a bool is not a limit
    ("eden_recall", {**S, "query": "x", "limit": 0}, None),                              # out of range
    ("eden_remember", {**S, "content": "x", "metadata": ["not", "an", "object"]}, "metadata"),
    ("eden_edit", {"id": "00000000-0000-0000-0000-000000000000", "content": "y"}, None),  # unknown id
    ("vault_read_note", {"agent": "finance", "file": "../../etc/passwd"}, None),
    ("vault_read_note", {"agent": "nobody", "file": "x.md"}, None),
])
def test_mistakes_are_tool_errors_and_the_server_keeps_serving(server: McpClient, tool: str, args: dict[str, object], field: str | None) -> None:
    err = server.error(tool, args)
    assert err["error"] in ("ValidationError", "NotFoundError", "UnsafeNameError", "UnsafePathError") and err["message"]
    if field:
        assert err["field"] == field and field in err["message"]
    assert server.ok("eden_health")["status"] == "ok"


def test_unknown_tool_is_an_error(server: McpClient) -> None:
    assert server.error("eden_teleport", {})["error"] == "NotFoundError"


@pytest.mark.parametrize("where", ["content", "metadata", "scope", "limit", "atp", "filters"])
def test_a_refused_secret_is_never_echoed(server: McpClient, where: str) -> None:
    args: dict[str, object] = {**S, "content": "deploy notes"}
    tool = "eden_remember"
    if where == "content":
        args["content"] = f"the token is {SECRET} keep it"
    elif where == "metadata":
        args["metadata"] = {"token": SECRET}
    elif where == "scope":
        args["agent_id"] = SECRET
    elif where == "limit":  # a wrong type whose value is a secret
        tool, args = "eden_recall", {**S, "query": "x", "limit": SECRET}
    elif where == "filters":
        tool, args = "eden_search_semantic", {**S, "query": "x", "filters": {SECRET: SECRET}}
    else:
        tool = "atp_start"
        args = {"request": f"rotate {SECRET}", "agent_id": "dispatcher"}
    r = server.call(tool, args)
    assert r.is_error or where == "filters"  # a filter is only compared, never stored: no refusal, no echo either
    assert SECRET not in r.text and SECRET[4:20] not in r.text
    assert SECRET not in server.stderr()
    assert server.ok("eden_search", {**S, "query": "token"}) is not None


def test_vault_tools_write_read_list_index_lint(server: McpClient, workdir: Path) -> None:
    note = server.ok("vault_write_note", NOTE)
    assert note["file"] == "feedback_debt_priority_order.md" and note["meta"]["confidence"] == "high"
    assert server.ok("vault_read_note", {"agent": "finance", "file": "feedback_debt_priority_order"})["body"] == "Pay the highest rate first.\n"
    listed = server.ok("vault_list_notes", {"agent": "finance"})
    assert [n["file"] for n in listed["notes"]] == ["feedback_debt_priority_order.md"]
    assert server.ok("vault_list_notes", {})["agents"] == ["finance"]
    idx = server.ok("vault_read_index", {"agent": "finance"})
    assert [e["title"] for e in idx["entries"]] == ["Debt payoff order"] and "INDEX.md" in idx["files"]
    report = server.ok("vault_lint", {"agent": "finance"})["reports"][0]
    assert report["counts"]["error"] == 0
    wiki = server.ok("vault_write_note", {**NOTE, "type": "wiki", "topic": "tax_strategy", "year": 2026})
    assert wiki["unit_type"] == "wiki"
    # Each write was mirrored into the server's store at once (the agent's scope, user "vault").
    found = server.ok("eden_search", {"agent_id": "finance", "user_id": "vault", "query": "avalanche motivation", "limit": 5})
    paths = {r["metadata"]["path"] for r in found["results"]}
    assert {"memory/feedback_debt_priority_order.md", "wiki/tax_strategy_2026.md"} <= paths
    # lint compares the files with that mirror: a hand edit shows, by path
    edited = workdir / "agents/finance/memory/feedback_debt_priority_order.md"
    edited.write_text(edited.read_text() + "\nEdited by hand.\n")
    issues = server.ok("vault_lint", {"agent": "finance"})["reports"][0]["issues"]
    assert [(i["path"], i["rule"]) for i in issues if i["rule"].startswith("mirror-")] == [
        ("finance/memory/feedback_debt_priority_order.md", "mirror-stale")]


def test_an_invalid_note_is_refused_and_nothing_is_written(server: McpClient, workdir: Path) -> None:
    before = sorted(p.name for p in (workdir / "agents/finance/memory").iterdir())
    for bad in ({**NOTE, "topic": "bad_confidence", "confidence": "certain"}, {**NOTE, "topic": "Not Snake"},
                {**NOTE, "topic": "no_type", "type": "opinion"}, {**NOTE, "topic": "dup", "sources": "one"}):
        err = server.error("vault_write_note", bad)
        assert err["error"].endswith("Error") and err["message"]
    assert sorted(p.name for p in (workdir / "agents/finance/memory").iterdir()) == before


def test_resources_are_each_agents_index_and_persona_read_only(server: McpClient, workdir: Path) -> None:
    uris = {str(r.uri) for r in server.list_resources()}
    assert uris == {"vault://finance/INDEX.md", "vault://finance/persona/IDENTITY.md", "vault://finance/persona/SOUL.md",
                    "vault://finance/persona/USER.md"}
    text = server.read_resource("vault://finance/persona/IDENTITY.md").contents[0].text
    assert text == (workdir / "agents/finance/persona/IDENTITY.md").read_text(encoding="utf-8")
    outside = workdir / "outside.md"
    outside.write_text("private\n", encoding="utf-8")
    soul = workdir / "agents/finance/persona/SOUL.md"
    soul.unlink()
    os.symlink(outside, soul)
    for uri in ("vault://finance/persona/SOUL.md", "vault://finance/tools.md", "vault://../INDEX.md", "vault://nobody/INDEX.md"):
        with pytest.raises(Exception) as refused:
            server.read_resource(uri)
        assert "private" not in str(refused.value)
    assert server.ok("eden_health")["status"] == "ok"
