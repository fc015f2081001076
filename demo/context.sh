#!/usr/bin/env bash
# Bridge part of `make demo`: mirror the demo agent's notes into the memory store, search
# them, and print the context (system prompt) the agent runs with, within its token budget.
set -euo pipefail
root="$1"
export ATOMIC_AGENTS_ROOT="$root"
run() { printf '\n$ %s\n' "$*"; "$@"; }

echo; echo "=== Bridge: notes recallable from the store, and the agent's context ==="
run atomic-agents vault sync finance
run atomic-agents vault sync finance   # nothing changed: nothing parsed, nothing embedded
run atomic-agents vault search finance "which debt should I pay off first?" --limit 3
run atomic-agents context finance --query "how should I pay down my debts?" --budget 600
