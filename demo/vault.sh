#!/usr/bin/env bash
# Vault part of `make demo`: scaffold an agent, write a note of each type and a
# wiki page, supersede one, show the INDEX, lint, promote a journal item, query logs.
set -euo pipefail
root="$1"
export ATOMIC_AGENTS_ROOT="$root"
run() { printf '\n$ %s\n' "$*"; "$@"; }

echo; echo "=== Vault: an agent is a folder of plain files ==="
run atomic-agents vault init finance --title "Finance Coach"

run atomic-agents vault new finance --type feedback --topic debt_priority_order \
    --name "Debt payoff order" --description "When paying down debt: avalanche (highest APR first) unless motivation is low" \
    --source conversation_2026-05-06 --confidence high --pinned \
    --body "The operator prefers the avalanche method; fall back to snowball only when they say they are losing motivation."
atomic-agents vault new finance --type user --topic risk_tolerance --name "Risk tolerance" \
    --description "Operator is moderately risk-averse; no leveraged products" --source conversation_2026-05-06 --confidence high \
    --body "Stated twice: no margin, no options." >/dev/null
atomic-agents vault new finance --type project --topic consulting_launch --period 2026 --name "2026 consulting launch" \
    --description "Side consulting business launching in April 2026; needs an emergency fund first" \
    --source conversation_2026-04-01 --confidence medium --expires-at 2026-12-31 >/dev/null
atomic-agents vault new finance --type reference --topic budget_spreadsheet --name "Budget spreadsheet" \
    --description "Where the monthly budget lives and how its tabs are named" --source observation --confidence medium >/dev/null
atomic-agents vault new finance --type decision --topic income_target --period 2026-q3 --name "Q3 2026 income target" \
    --description "Target 9k/month take-home for Q3 2026" --source conversation_2026-06-30 --confidence high \
    --expires-at 2026-09-30 >/dev/null
atomic-agents vault new finance --type decision --topic income_target_revised --period 2026-q3 \
    --name "Q3 2026 income target (revised)" --description "Revised to 8k/month after the July contract slipped" \
    --source conversation_2026-07-15 --confidence high --expires-at 2026-09-30 >/dev/null
atomic-agents vault new finance --type wiki --topic debt_payoff_methods --name "Debt payoff methods" \
    --description "Avalanche vs snowball: maths, psychology, when each wins" --source raw/2026-04-22_cpa_meeting.md \
    --confidence high --related feedback_debt_priority_order.md --body "# Debt payoff methods" >/dev/null
echo "(wrote a user, project, reference and two decision notes, and a wiki page)"

run atomic-agents vault supersede finance decision_2026-q3_income_target.md decision_2026-q3_income_target_revised.md
run atomic-agents vault list finance
run atomic-agents vault index show finance

echo; echo "=== Journal: episodic notes, promoted into memory ==="
run atomic-agents vault journal add finance --happened "Operator said surprise bank fees make them furious" \
    --decision "Flag any account with monthly fees" --question "Is the emergency fund target 3 or 6 months?"
run atomic-agents vault journal promote finance --item 1 --type feedback --topic flag_surprise_fees \
    --name "Flag surprise fees" --description "Always call out accounts or products with surprise or monthly fees" --confidence high
run atomic-agents vault journal show finance

echo; echo "=== Run logs (JSONL) ==="
atomic-agents vault log add finance --ts 2026-05-06T07:00:00+00:00 --trigger cron --model claude-sonnet-4-5 \
    --input-tokens 5200 --output-tokens 640 --status ok --summary "Morning budget check" --cost-usd 0.025 >/dev/null
atomic-agents vault log add finance --ts 2026-05-06T12:30:00+00:00 --trigger skill --model claude-haiku-4-5 \
    --input-tokens 900 --output-tokens 120 --status error --summary "Bank sync" --error "timeout" --cost-usd 0.001 >/dev/null
atomic-agents vault log add finance --entry '{"ts": "2026-05-07T07:00:00+00:00", "trigger": "cron", "model": "claude-sonnet-4-5", "input_tokens": 5100, "output_tokens": 610, "status": "ok", "summary": "Morning budget check", "cost_usd": 0.024, "cache_hit": true}' >/dev/null
run atomic-agents vault log query finance --since 2026-05-06 --until 2026-05-07

echo; echo "=== Lint and validate ==="
run atomic-agents vault lint finance || true
run atomic-agents vault validate finance
echo; echo "A refused write names the file, the field and the rule, and changes nothing:"
run atomic-agents vault new finance --type feedback --topic bad_date --name "Bad" --description "x" \
    --source observation --expires-at 2026-02-30 || true
echo; echo "A value outside a fixed set is a usage error (exit 2) that lists the choices:"
run atomic-agents vault new finance --type feedback --topic bad_confidence --name "Bad" --description "x" \
    --source observation --confidence sure || true
