"""Benchmark the CLI end to end at 10,000 notes: `vault list` and `vault lint`, as a user runs them.

    .venv/bin/python bench/bench_cli.py                              # this checkout only
    .venv/bin/python bench/bench_cli.py --baseline-src /path/to/other/src   # plus another checkout's CLI

Each row is a fresh ``python -m atomic_agents.cli`` process with stdout sent to a
file (as in a pipe: no terminal), median of ``--reps``. The vault is built once
with the notes of bench_vault.py (realistic sizes, the five types mixed, many
stale or expired, so lint prints thousands of lines). Baselines measured in the
same run: a Python process that only reads every note file (the I/O floor of
any whole-vault command), and, with ``--baseline-src``, the same commands from
another checkout (e.g. the code before a change), on the same vault.

"cold" = the parse cache in ``<root>/_cache/`` deleted before each run; "warm" =
the cache the previous run left. Benchmarks are not tests: nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"
sys.path.insert(0, str(SRC))
sys.path.insert(0, str(HERE))

from bench_vault import TODAY, make_drafts  # noqa: E402

from atomic_agents.vault import Vault  # noqa: E402

READ_ALL = "import os,sys\nd=sys.argv[1]\nfor n in sorted(os.listdir(d)):\n    open(os.path.join(d,n),'rb').read()\n"


def timed_run(cmd: list[str], src: Path, out: Path, before: object = None) -> tuple[float, int, int]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    with open(out, "wb") as fh:
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, stdout=fh, stderr=subprocess.DEVNULL, env=env)
        t = time.perf_counter() - t0
    return t, proc.returncode, sum(1 for _ in open(out, "rb"))


def measure(label: str, args: list[str], src: Path, root: Path, reps: int, cold: bool, tmp: Path) -> tuple[str, float, int]:
    times, lines = [], 0
    for _ in range(reps):
        if cold:
            shutil.rmtree(root / "_cache", ignore_errors=True)
        t, _, lines = timed_run([sys.executable, "-m", "atomic_agents.cli", *args], src, tmp / "out.txt")
        times.append(t)
    return label, statistics.median(times), lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--notes", type=int, default=10_000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--baseline-src", type=Path, help="another checkout's src/ to time the same commands with")
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="bench_cli_"))
    try:
        root = tmp / "agents"
        agent, _ = Vault(root).init_agent("big")
        drafts = make_drafts(args.notes, seed=7, prefix="n")
        for i in range(0, len(drafts), 1000):
            agent.create_notes(drafts[i:i + 1000], today=TODAY)
        print(f"vault: {args.notes:,} notes in {root}; load average {os.getloadavg()[0]:.1f}")
        r = ["--agents-root", str(root)]
        cases = [
            ("vault list big, cold", ["vault", "list", "big", *r], True),
            ("vault list big, warm", ["vault", "list", "big", *r], False),
            ("vault list big --json, warm", ["vault", "list", "big", "--json", *r], False),
            ("vault lint big, cold", ["vault", "lint", "big", *r], True),
            ("vault lint big, warm", ["vault", "lint", "big", *r], False),
            ("vault list --help", ["vault", "list", "--help"], False),
        ]
        srcs = [("this checkout", SRC)] + ([("baseline", args.baseline_src.resolve())] if args.baseline_src else [])
        floor = []
        for _ in range(args.reps):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", READ_ALL, str(agent.memory_dir)], check=True)
            floor.append(time.perf_counter() - t0)
        rows: list[tuple[str, str, float, int]] = [("floor", "python reads every note file", statistics.median(floor), 0)]
        for label, cmd, cold in cases:
            for name, src in srcs:
                lab, t, lines = measure(label, cmd, src, root, args.reps, cold, tmp)
                rows.append((name, lab, t, lines))
        print(f"\n| code | command | seconds (median of {args.reps}) | lines out |\n|---|---|---|---|")
        for name, lab, t, lines in rows:
            print(f"| {name} | {lab} | {t:.2f} | {lines:,} |")
        print(f"\nload average at the end {os.getloadavg()[0]:.1f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
