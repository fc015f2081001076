#!/usr/bin/env bash
# The ATP ledger: a full-mode goal through every stage with a red verdict and rework,
# a lite goal to closure, and a blocked goal; then the status table and one chain.
# Each role writes under its own agent id, as separate agents would.
set -euo pipefail
root="$1"
export EDEN_ORG_ID="${EDEN_ORG_ID:-demo-org}" EDEN_WORKSPACE_ID="${EDEN_WORKSPACE_ID:-demo/workspace}"
team() { atomic-agents team "$@"; }
as() { local who="$1"; shift; atomic-agents team "$@" --agent-id "$who"; }
json_field() { python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }
terms='"success_criteria": "p95 checkout latency under 300 ms", "deadline": "2026-12-20T17:00:00Z", "escalation_trigger": "latency regresses twice"'

echo
echo "== ATP ledger: a full-mode goal, red verdict, rework, closure"
full=$(as dispatcher start "Cut checkout latency below 300 ms" --full --package-type research --json | json_field '["goal_id"]')
as dispatcher record dispatch_instruction --goal "$full" --data "{\"target_role\": \"researcher\", $terms}"
as router continue "$full"
as researcher record context_summary --goal "$full" --data '{"question": "where does checkout spend its time?", "sources": ["traces of 1,000 checkouts"], "options": ["cache the tax lookup", "batch the inventory calls"], "recommended_next_step": "dispatch to builder: cache the tax lookup"}'
as dispatcher record dispatch_instruction --goal "$full" --data "{\"target_role\": \"builder\", $terms}"
as builder record action_record --goal "$full" --data '{"summary": "cached the tax lookup for 60 s", "files_changed": ["checkout/tax.py"], "rollback_steps": "revert the cache commit"}'
as verifier record verdict --goal "$full" --data '{"status": "red", "evidence": "p95 is 340 ms under load", "scope_verified": "checkout latency"}'
as router continue "$full"
as dispatcher record dispatch_instruction --goal "$full" --data "{\"target_role\": \"builder\", $terms}"
as builder record action_record --goal "$full" --data '{"summary": "batched the inventory calls too", "files_changed": ["checkout/inventory.py"], "rollback_steps": "revert the batching commit"}'
as verifier record verdict --goal "$full" --data '{"status": "green", "evidence": "p95 is 240 ms under load", "scope_verified": "checkout latency"}'
as router continue "$full"
as archivist record archival_record --goal "$full" --data '{"outcome": "p95 from 410 to 240 ms", "conventions": ["profile with traces before caching"]}'

echo
echo "== a lite goal to closure"
lite=$(as dispatcher start "Fix the broken footer link" --json | json_field '["goal_id"]')
as dispatcher record plan_record --goal "$lite" --data "{\"plan\": \"point the footer at /legal\", $terms}"
as builder record action_record --goal "$lite" --data '{"summary": "footer now links to /legal", "rollback_steps": "revert the commit"}'
as verifier record verdict --goal "$lite" --data '{"status": "green", "evidence": "link returns 200", "scope_verified": "footer link"}'
as archivist record archival_record --goal "$lite" --data '{"outcome": "footer link fixed"}'

echo
echo "== a blocked goal"
blocked=$(as dispatcher start "Rotate the payment provider key" --json | json_field '["goal_id"]')
as dispatcher record plan_record --goal "$blocked" --data "{\"plan\": \"rotate the key in the vault\", $terms}"
as builder record action_record --goal "$blocked" --data '{"summary": "prepared the rotation", "rollback_steps": "keep the old key"}'
as verifier record verdict --goal "$blocked" --data '{"status": "blocked", "evidence": "the provider sandbox is down", "scope_verified": "none", "unblock_condition": "provider sandbox back up"}'
as router continue "$blocked"

echo
echo "== refused: the builder may not verify its own work"
as builder record verdict --goal "$lite" --data '{"status": "green", "evidence": "looks fine", "scope_verified": "all"}' || true

echo
echo "== status"
team status
echo
echo "== the full goal's chain"
team show "$full"
echo
team show "$full" --graph | head -8
echo "    ..."
