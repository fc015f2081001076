"""Each eden tool called with the argument shapes eden-memory documents (fixtures in our own words), legacy aliases too.

Where eden leaves an answer open, the server answers what `atomic-agents memory ...` prints for the
same call; a few tests run the CLI on the same store and compare.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from atomic_agents.cli import main

from ._client import McpClient

S = {"agent_id": "builder", "user_id": "alice", "org_id": "acme", "workspace_id": "acme/web"}


def _cli(workdir: Path, capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    os.environ["ATOMIC_AGENTS_EMBEDDER"] = "hashing"
    try:
        with pytest.raises(SystemExit) as done:
            main(["memory", *args, "--db", str(workdir / "memory.db")])
    finally:
        del os.environ["ATOMIC_AGENTS_EMBEDDER"]
    assert done.value.code in (0, None)
    return json.loads(capsys.readouterr().out)


def test_remember_recall_search_with_documented_shapes(server: McpClient) -> None:
    out = server.ok("eden_remember", {**S, "content": "Goal: g-204 | Stage: action | webhook retries added to billing",
                                      "metadata": {"goal_id": "g-204", "stage": "action"}, "ttl_ms": None})
    assert set(out) == {"id", "status"} and out["status"] == "remembered"
    for tool, query in (("eden_recall", "webhook retries billing"), ("eden_search", "webhook zanzibar"),
                        ("eden_search_semantic", "webhook retries")):
        res = server.ok(tool, {**S, "query": query, "limit": 5, **({"filters": {"goal_id": "g-204"}} if tool.endswith("semantic") else {})})
        assert [set(r) for r in res["results"]][:1] == [{"id", "content", "metadata", "score"}], tool
        assert res["results"][0]["id"] == out["id"] and 0 <= res["results"][0]["score"] <= 1
        assert res["results"][0]["metadata"]["goal_id"] == "g-204"
    assert server.ok("eden_search_semantic", {**S, "query": "webhook", "filters": {"goal_id": "other"}}) == {"results": []}
    other = {**S, "user_id": "bob"}  # more scope, narrower results: nothing crosses scopes
    assert server.ok("eden_search", {**other, "query": "webhook"}) == {"results": []}


def test_legacy_aliases_are_accepted(server: McpClient) -> None:
    legacy = {"observer_id": "researcher", "observed_id": "carol", "org_id": "acme", "workspace_id": "acme/web"}
    out = server.ok("eden_remember", {**legacy, "fact": "carol prefers the avalanche debt order"})
    hits = server.ok("eden_recall", {**legacy, "topic": "avalanche debt order", "top_k": 1})["results"]
    assert [h["id"] for h in hits] == [out["id"]]
    hits = server.ok("eden_search", {**legacy, "keywords": "avalanche", "top_k": 3})["results"]
    assert [h["id"] for h in hits] == [out["id"]]
    same = server.ok("eden_search", {"agent_id": "researcher", "user_id": "carol", "org_id": "acme",
                                     "workspace_id": "acme/web", "query": "avalanche", "limit": 3})
    assert [h["id"] for h in same["results"]] == [out["id"]]


def test_scope_defaults_come_from_the_server_environment(server: McpClient) -> None:
    out = server.ok("eden_remember", {"agent_id": "builder", "user_id": "alice", "content": "default scope memory about kiwis"})
    # the server runs with EDEN_ORG_ID=acme, EDEN_WORKSPACE_ID=acme/web
    hits = server.ok("eden_search", {**S, "query": "kiwis"})["results"]
    assert [h["id"] for h in hits] == [out["id"]]


def test_edit_forget_and_answers_match_the_cli(server: McpClient, workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mid = server.ok("eden_remember", {**S, "content": "scratch note about pears"})["id"]
    edited = server.ok("eden_edit", {"id": mid, "content": "scratch note about pears, edited", "metadata": {"kind": "scratch"},
                                     "ttl_ms": 600_000})
    assert edited["content"].endswith("edited") and edited["metadata"]["kind"] == "scratch" and edited["expires_at"]
    assert _cli(workdir, capsys, "get", mid) == edited  # the same JSON as the CLI prints
    never = server.ok("eden_edit", {"id": mid, "ttl_ms": None})  # explicit null: never expire
    assert never["expires_at"] is None and never["content"] == edited["content"]
    assert server.ok("eden_forget", {"id": mid}) == {"id": mid, "status": "forgotten"}
    gone = server.error("eden_forget", {"id": mid})
    assert gone["error"] == "NotFoundError"
    assert server.ok("eden_search", {**S, "query": "pears"}) == {"results": []}


def test_forget_expired_health_vacuum(server: McpClient, workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    server.ok("eden_remember", {**S, "agent_id": "shortlived", "content": "expires at once", "ttl_ms": 1})
    time.sleep(0.05)
    assert server.ok("eden_forget_expired", {"agent_id": "shortlived"}) == {"status": "ok", "removed": 1}
    assert server.ok("eden_forget_expired", {}) == {"status": "ok", "removed": 0}
    health = server.ok("eden_health")
    assert health["status"] == "ok" and health["total"] >= 1 and health["version"]
    assert set(health) == set(_cli(workdir, capsys, "health"))
    vac = server.ok("eden_vacuum")
    assert vac["status"] == "ok" and set(vac) == set(_cli(workdir, capsys, "vacuum"))


def test_prune_is_a_dry_run_unless_confirmed_and_not_dry(server: McpClient, workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for n in range(3):
        server.ok("eden_remember", {**S, "agent_id": "pruner", "content": f"disposable draft {n}"})
    scope = {"agent_id": "pruner", "keywords": "disposable"}
    dry = server.ok("eden_prune", scope)
    assert (dry["matched"], dry["removed"], dry["dry_run"], len(dry["sample_ids"])) == (3, 0, True, 3)
    assert dry == _cli(workdir, capsys, "prune", "--agent-id", "pruner", "--keywords", "disposable")
    assert server.ok("eden_prune", {**scope, "confirm": True})["dry_run"] is True  # dry_run defaults to true
    assert server.ok("eden_prune", {**scope, "dry_run": False})["dry_run"] is True  # no confirm
    done = server.ok("eden_prune", {**scope, "confirm": True, "dry_run": False})
    assert (done["matched"], done["removed"], done["dry_run"]) == (3, 3, False)
    assert server.ok("eden_search", {**S, "agent_id": "pruner", "query": "disposable"}) == {"results": []}
