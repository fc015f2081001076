#!/usr/bin/env bash
# `make demo`: builds a demo vault in the folder given as $1 and walks through
# each part of the product on the embedded default (no server, nothing fetched).
# Each part is its own script so it can be read (and run) on its own.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="${1:-$PWD/demo-vault}"
rm -rf "$root"
mkdir -p "$root"
export ATOMIC_AGENTS_ROOT="$root"
echo "Demo vault: $root"
for part in vault memory migrate team; do
    if [ -f "$here/$part.sh" ]; then
        bash "$here/$part.sh" "$root"
    fi
done
echo
echo "Done. The demo vault is at $root"
