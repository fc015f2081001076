#!/usr/bin/env bash
# `make demo`: builds a demo vault in the folder given as $1 and walks through
# each part of the product on the embedded default (no server, nothing fetched).
# Each part is its own script so it can be read (and run) on its own.
#
# The folder is only ever emptied when the demo made it: a run leaves the marker
# file .atomic-agents-demo in it. A missing or empty folder is used; a non-empty
# folder without the marker is refused (exit 1), so `make demo DEMO_DIR=~/notes`
# can never delete anything. `demo/run.sh --clean DIR` (make clean) removes DIR
# under the same rule.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
marker=".atomic-agents-demo"

clean=0
if [ "${1:-}" = "--clean" ]; then
    clean=1
    shift
fi
root="${1:-$PWD/demo-vault}"
if [ -z "$root" ]; then
    echo "demo: no folder given" >&2
    exit 1
fi

# Is $root ours to delete? Missing: nothing to do (0). Ours (marker): 1. Empty: 2. Else refuse.
ownership() {
    if [ ! -e "$root" ] && [ ! -L "$root" ]; then
        return 0
    fi
    if [ -L "$root" ] || [ ! -d "$root" ]; then
        echo "demo: $root exists and is not a folder; refusing to touch it" >&2
        exit 1
    fi
    if [ -f "$root/$marker" ] && [ ! -L "$root/$marker" ]; then
        return 1
    fi
    if [ -z "$(ls -A "$root")" ]; then
        return 2
    fi
    echo "demo: $root is not empty and was not made by the demo (no $marker in it); refusing to delete it." >&2
    echo "demo: pick another folder, e.g. make demo DEMO_DIR=/tmp/atomic-demo" >&2
    exit 1
}

state=0
ownership || state=$?
if [ "$clean" = 1 ]; then
    if [ "$state" = 1 ]; then
        rm -rf -- "$root"
        echo "removed demo vault $root"
    fi
    exit 0
fi
if [ "$state" = 1 ]; then
    rm -rf -- "$root"
fi
mkdir -p -- "$root"
echo "made by atomic-agents' make demo; the demo may delete this folder" > "$root/$marker"

export ATOMIC_AGENTS_ROOT="$root"
echo "Demo vault: $root"
for part in vault memory migrate team context; do
    if [ -f "$here/$part.sh" ]; then
        bash "$here/$part.sh" "$root"
    fi
done
echo
echo "Done. The demo vault is at $root"
