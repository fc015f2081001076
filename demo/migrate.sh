#!/usr/bin/env bash
# Migration part of `make demo`: a hand-written note from before `schema_version`
# existed (legacy v0) is brought to v1 by a `_migrations/v0_to_v1.py` script
# (status, dry run, real run with its snapshot, the one-line diff); then the
# spec's own v1 -> v2 example shows the "version cliff": this package only reads
# v1, so a real v2 run validates, fails and restores its snapshot by design.
# Ends with --list-snapshots, a manual --rollback, and the audit trail.
set -euo pipefail
root="$1"
export ATOMIC_AGENTS_ROOT="$root"
run() { printf '\n$ %s\n' "$*"; "$@"; }
# Commands expected to exit 1 (a refused or rolled-back migration) still continue the demo.
run_may_fail() { printf '\n$ %s\n' "$*"; "$@" || echo "(exit $? — as intended)"; }

echo; echo "=== Schema migration: every unit moves version together, or not at all ==="
run python -m atomic_agents.migrate --status

echo; echo "# A note written by hand long ago, before the schema_version field existed:"
legacy="$root/finance/memory/feedback_flag_surprise_subscriptions.md"
cat > "$legacy" <<'EOF'
---
# written by hand in 2025, before schema_version existed
name: Flag surprise subscriptions
description: "When a new recurring charge appears: ask before it renews"
type: feedback
captured: 2025-11-02
last_seen: 2026-04-18
sources:
  - conversation_2025-11-02
confidence: medium
tags: [subscriptions, budget]
---
The operator wants a heads-up on any new recurring charge before its first renewal.
EOF
before="$(mktemp)"
cp "$legacy" "$before"
run atomic-agents migrate --status

echo; echo "# The migration script: backend-neutral, it only sees a MigratableUnit handle"
mkdir -p "$root/_migrations"
cat > "$root/_migrations/v0_to_v1.py" <<'EOF'
"""v0 -> v1: files from before the schema_version field get `schema_version: 1`."""
from atomic_agents.migration import MigratableUnit

FROM_VERSION = 0
TO_VERSION = 1


def applies_to(unit: MigratableUnit) -> bool:
    return "schema_version" not in unit.read_frontmatter()


def migrate(unit: MigratableUnit) -> dict:
    meta = unit.read_frontmatter()
    meta["schema_version"] = TO_VERSION
    unit.write_frontmatter(meta)  # a no-op on dry runs
    return {"changes": ["added schema_version: 1"]}
EOF
sed 's/^/    /' "$root/_migrations/v0_to_v1.py"

run python -m atomic_agents.migrate --to v1 --dry-run
run python -m atomic_agents.migrate --to v1
echo; echo "# The diff is one added line; comments, quoting and the body are untouched:"
diff "$before" "$legacy" || true
rm -f "$before"

echo; echo "# Next: the spec's own v1 -> v2 example (rename sources -> evidence, add provenance)"
cat > "$root/_migrations/v1_to_v2.py" <<'EOF'
"""v1 -> v2 (the spec's example): rename `sources` to `evidence`, add `provenance`."""
from atomic_agents.migration import MigratableUnit

FROM_VERSION = 1
TO_VERSION = 2


def applies_to(unit: MigratableUnit) -> bool:
    return unit.read_frontmatter().get("schema_version") == FROM_VERSION


def migrate(unit: MigratableUnit) -> dict:
    meta = unit.read_frontmatter()
    changes = ["schema_version 1 -> 2"]
    meta["schema_version"] = TO_VERSION
    if "sources" in meta:
        meta["evidence"] = meta.pop("sources")
        changes.append("renamed sources -> evidence")
    if "provenance" not in meta:
        meta["provenance"] = "v1_migrated"
        changes.append("added provenance: v1_migrated")
    unit.write_frontmatter(meta)
    return {"unit_id": unit.unit_id, "changes": changes}
EOF
echo "# Dry run: per unit, the keys added (+), removed (-), renamed (a->b) and changed (~)."
echo "# It also previews validation: this package reads schema v1 only, so v2 cannot validate yet."
run_may_fail python -m atomic_agents.migrate --to v2 --dry-run
echo; echo "# A real v2 run snapshots, applies, validates every unit, fails, and restores the snapshot:"
run_may_fail atomic-agents migrate --to v2
rm "$root/_migrations/v1_to_v2.py"

run atomic-agents migrate --list-snapshots
first="$(atomic-agents migrate --list-snapshots --json | python -c 'import json,sys; print(json.load(sys.stdin)[0]["snapshot_id"])')"
echo; echo "# Manual rollback to the first snapshot (taken before v0 -> v1): the legacy note is back"
run python -m atomic_agents.migrate --rollback "$first"
run python -m atomic_agents.migrate --status
echo; echo "# ... and forward again, so the demo vault ends current"
python -m atomic_agents.migrate --to v1 >/dev/null && echo "(migrated to v1 again)"

echo; echo "# Every run, refusal and rollback left one audit line (_migrations/migration.jsonl):"
python - "$root/_migrations/migration.jsonl" <<'EOF'
import json, sys
for line in open(sys.argv[1]):
    e = json.loads(line)
    kind = "dry run" if e["dry_run"] else ("rolled back" if e["rolled_back"] else "applied")
    err = f"  error: {e['error'][:70]}..." if e["error"] else ""
    print(f"  v{e['from_version']} -> v{e['to_version']}  {kind:<11} units touched {e['units_touched']}{err}")
EOF
echo; echo "# and _migrations/README.md keeps the human-readable history:"
grep '^- ' "$root/_migrations/README.md" | sed 's/^/  /'
