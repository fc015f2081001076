"""The tool list is a contract (agents' prompts name these tools and fields): names, parameters, hints pinned."""

from __future__ import annotations

from typing import Any

from ._client import McpClient

SCOPE = {"agent_id", "user_id", "org_id", "workspace_id"}
IDENT = SCOPE
# name -> (properties, required, (readOnly, destructive, idempotent))
CONTRACT: dict[str, tuple[set[str], set[str], tuple[bool, bool, bool]]] = {
    "eden_remember": (SCOPE | {"content", "metadata", "ttl_ms"}, {"agent_id", "user_id", "content"}, (False, False, False)),
    "eden_recall": (SCOPE | {"query", "limit"}, {"agent_id", "user_id", "query"}, (True, False, True)),
    "eden_search": (SCOPE | {"query", "limit"}, {"agent_id", "user_id", "query"}, (True, False, True)),
    "eden_search_semantic": (SCOPE | {"query", "limit", "filters"}, {"agent_id", "user_id", "query"}, (True, False, True)),
    "eden_edit": ({"id", "content", "metadata", "ttl_ms"}, {"id"}, (False, False, True)),
    "eden_forget": ({"id"}, {"id"}, (False, True, True)),
    "eden_forget_expired": (SCOPE, set(), (False, True, True)),
    "eden_health": (set(), set(), (True, False, True)),
    "eden_vacuum": (set(), set(), (False, False, True)),
    "eden_prune": (SCOPE | {"keywords", "expired_only", "dry_run", "confirm", "hard"}, set(), (False, True, False)),
    "atp_start": (IDENT | {"request", "requester", "constraints", "package_type", "full", "goal_id"}, {"request"}, (False, False, False)),
    "atp_record": (IDENT | {"goal_id", "kind", "data", "token"}, {"kind", "goal_id", "data"}, (False, False, False)),
    "atp_chain": (IDENT | {"goal_id", "as_of"}, {"goal_id"}, (True, False, True)),
    "atp_status": (IDENT | {"goal_id", "role", "as_of"}, set(), (True, False, True)),
    "atp_continue": (IDENT | {"goal_id", "token"}, {"goal_id"}, (False, False, True)),
    "atp_handoff": (IDENT | {"goal_id", "to_role", "reason", "from_role", "success_criteria", "deadline",
                             "escalation_trigger", "token"}, {"goal_id", "to_role", "reason"}, (False, False, False)),
    "atp_escalate": (IDENT | {"goal_id", "reason", "question", "recommended_default", "risk_of_waiting", "consulted_roles",
                              "promote_to_full", "level", "token"},
                     {"goal_id", "reason", "question", "recommended_default", "risk_of_waiting"}, (False, False, False)),
    "atp_approve": (IDENT | {"goal_id", "approved_by", "token"}, {"goal_id", "approved_by"}, (False, False, False)),
    "atp_ratify_charter": (IDENT | {"path", "rater", "deferrals"}, set(), (False, False, False)),
    "atp_claim": (IDENT | {"goal_id", "role", "ttl_ms"}, {"goal_id", "role"}, (False, False, False)),
    "atp_release": (IDENT | {"goal_id", "token"}, {"goal_id", "token"}, (False, False, True)),
    "atp_ready": (IDENT | {"role"}, set(), (True, False, True)),
    "vault_write_note": ({"agent", "type", "topic", "name", "description", "sources", "confidence", "body", "period", "year",
                          "pinned", "expires_at", "supersedes", "tags", "related"},
                         {"agent", "type", "topic", "name", "description", "sources"}, (False, False, False)),
    "vault_read_note": ({"agent", "file", "wiki"}, {"agent", "file"}, (True, False, True)),
    "vault_list_notes": ({"agent", "type", "pinned", "all", "wiki"}, set(), (True, False, True)),
    "vault_read_index": ({"agent", "wiki"}, {"agent"}, (True, False, True)),
    "vault_lint": ({"agent", "stale_days"}, set(), (True, False, True)),
}


def _hints(tool: Any) -> tuple[bool, bool, bool]:
    a = tool.annotations
    return (a.read_only_hint, a.destructive_hint, a.idempotent_hint)


def test_every_tool_is_pinned_by_name_parameters_and_hints(server: McpClient) -> None:
    tools = server.list_tools()
    assert [t.name for t in tools] == list(CONTRACT)
    for t in tools:
        props, required, hints = CONTRACT[t.name]
        assert t.input_schema["type"] == "object", t.name
        assert set(t.input_schema["properties"]) == props, t.name
        assert set(t.input_schema.get("required", [])) == required, t.name
        assert _hints(t) == hints, t.name
        assert t.annotations.open_world_hint is False
        assert t.description and len(t.description) <= 160, t.name  # short: the list is paid for in tokens


#: Destructive tools without a confirmation argument: eden-memory's own signatures, which ATP's prompts call
#: as they are (spec: eden-memory-interface.md). Each is a soft delete: of the one record the call names by id,
#: or of memories whose TTL passed (already hidden from every read). Any other destructive tool needs `confirm`.
EDEN_SOFT_DELETES = {"eden_forget", "eden_forget_expired"}


def test_destructive_tools_need_an_explicit_confirmation(server: McpClient) -> None:
    tools = server.list_tools()
    destructive = {t.name for t in tools if t.annotations.destructive_hint}
    assert destructive == EDEN_SOFT_DELETES | {"eden_prune"}
    for t in tools:
        if t.name in destructive - EDEN_SOFT_DELETES:
            assert t.input_schema["properties"].get("confirm", {}).get("type") == "boolean", t.name
            assert "confirm" not in t.input_schema.get("required", []), t.name  # absent = not confirmed: a dry run
    prune = next(t for t in tools if t.name == "eden_prune")
    assert {"confirm", "dry_run"} <= set(prune.input_schema["properties"])


def test_the_handshake_names_the_server_and_the_legacy_aliases(server: McpClient) -> None:
    init = server.init_result
    assert init.server_info.name == "atomic-agents"
    assert init.capabilities.tools is not None and init.capabilities.resources is not None
    assert all(alias in init.instructions for alias in ("observer_id", "observed_id", "fact", "topic", "top_k"))
