"""The warm path for an agent's per-invocation calls: whole-process `context` and `vault search` via the daemon vs in-process.

    .venv/bin/python bench/bench_context.py --section daemon                     # 3,000 notes, real model, 20 rounds
    .venv/bin/python bench/bench_context.py --section daemon --notes 1000 --reps 10 --embedder hashing

An agent runs ``atomic-agents context AGENT --query ...`` at every invocation (its
system prompt). Each row is a fresh ``python -m atomic_agents.cli`` process with
pipes on stdin/stdout/stderr, wall time from spawn to exit, p50 over ``--reps``;
the variants run interleaved (one of each per round, the order rotated) so load on
the shared machine hits them alike. Baselines in the same run: the same command
in-process (``ATOMIC_AGENTS_DAEMON=off``: imports, tokenizer, ONNX session, a stat
of every note), ``python -c pass`` and ``python -c "import typer"``, bytecode cached
(``PYTHONPYCACHEPREFIX``, one uncounted warm-up round). The vault has ``--notes``
notes (3 pinned) synced into the store at ``<root>/_memory/memory.db`` (the default
location, so the lines carry no ``--db``); ``context --query`` runs at a budget with
room for every sub-index and the recalled notes (recall really runs), ``context``
without a query at model.md's 4,000 tokens. Each round also checks that the daemon's
stdout, stderr and exit code equal the in-process ones. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"


def _run(cmd: list[str], env: dict[str, str]) -> tuple[float, tuple[int, bytes, bytes]]:
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    took = (time.perf_counter() - t0) * 1000
    if p.returncode != 0:
        raise SystemExit(f"{cmd[3:7]} failed ({p.returncode}): {p.stderr.decode()[-400:]}")
    return took, (p.returncode, p.stdout, p.stderr)


def run(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(prog="bench_context.py --section daemon")
    ap.add_argument("--notes", type=int, default=3_000, help="notes in the vault (default 3,000)")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--embedder", default="minilm")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(SRC))
    from bench_context import WORDS, write_notes

    from atomic_agents.bridge import context, sync
    from atomic_agents.memory import SQLiteMemoryStore, embedder_from_name
    from atomic_agents.vault import Vault

    rng = random.Random(12)
    with tempfile.TemporaryDirectory(dir="/tmp", prefix="aa-bench-") as tmp:
        runtime = Path(tmp) / "run"
        runtime.mkdir(mode=0o700)
        root = Path(tmp) / "agents"
        agent, _ = Vault(root).init_agent("bench")
        (agent.path / "model.md").write_text("# MODEL\n\n## Token budget\n- Max system prompt: 4000 tokens\n")
        write_notes(agent.memory_dir, args.notes, rng)
        agent.rebuild_index()
        t0 = time.perf_counter()
        store = SQLiteMemoryStore(root / "_memory" / "memory.db", embedder=embedder_from_name(args.embedder))
        sync(agent, store)
        store.close()
        fill = time.perf_counter() - t0
        roomy = context(agent, budget=10**9).tokens + 3000  # every sub-index and the recalled notes fit
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ATOMIC_AGENTS_", "EDEN_"))}
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # bytecode cached as for an installed package
        env.update(XDG_RUNTIME_DIR=str(runtime), ATOMIC_AGENTS_EMBEDDER=args.embedder,
                   PYTHONPYCACHEPREFIX=str(Path(tmp) / "pycache"),
                   PYTHONPATH=str(SRC) + os.pathsep + env.get("PYTHONPATH", ""))
        cold = {**env, "ATOMIC_AGENTS_DAEMON": "off"}
        cli = [sys.executable, "-m", "atomic_agents.cli", "--agents-root", str(root)]
        start = subprocess.run([*cli, "daemon", "start", "--idle-timeout", "600"], env=env, capture_output=True,
                               text=True, stdin=subprocess.DEVNULL)
        if start.returncode != 0:
            raise SystemExit(f"daemon start failed: {start.stderr}")
        queries = [" ".join(rng.choice(WORDS) for _ in range(3)) for _ in range(args.reps + 1)]
        fixed: dict[str, tuple[list[str], dict[str, str]]] = {
            "python -c pass": ([sys.executable, "-c", "pass"], env),
            'python -c "import typer"': ([sys.executable, "-c", "import typer"], env),
            "context (no query), in-process": ([*cli, "context", "bench"], cold),
            "context (no query), via daemon": ([*cli, "context", "bench"], env),
        }
        lines = {
            "context --query": lambda q: ["context", "bench", "--query", q, "--budget", str(roomy)],
            "vault search": lambda q: ["vault", "search", "bench", q],
        }
        names = [*fixed, *(f"{k}, {w}" for k in lines for w in ("in-process", "via daemon"))]
        times: dict[str, list[float]] = {k: [] for k in names}
        differ = 0
        load0 = os.getloadavg()[0]
        try:
            for rep in range(-1, args.reps):  # round -1 warms the bytecode cache (and the daemon's watch) uncounted
                q = queries[rep + 1]
                variants = dict(fixed)
                for k, make in lines.items():
                    variants[f"{k}, in-process"] = ([*cli, *make(q)], cold)
                    variants[f"{k}, via daemon"] = ([*cli, *make(q)], env)
                answers: dict[str, tuple[int, bytes, bytes]] = {}
                for name in names[rep % len(names):] + names[:rep % len(names)]:
                    cmd, e = variants[name]
                    took, answers[name] = _run(cmd, e)
                    if rep >= 0:
                        times[name].append(took)
                for k in ("context (no query)", *lines):
                    differ += answers[f"{k}, in-process"] != answers[f"{k}, via daemon"]
            status = subprocess.run([*cli, "daemon", "status", "--json"], env=env, capture_output=True, text=True,
                                    stdin=subprocess.DEVNULL).stdout.strip()
        finally:
            subprocess.run([*cli, "daemon", "stop"], env=env, capture_output=True, stdin=subprocess.DEVNULL)
        load1 = os.getloadavg()[0]

    p50 = {k: statistics.median(v) for k, v in times.items()}
    print(f"\n## context / vault search warm path: {args.notes:,} notes (3 pinned), embedder {args.embedder}, "
          f"{args.reps} interleaved rounds (synced in {fill:.0f} s; load average {load0:.1f} -> {load1:.1f} on "
          f"{os.cpu_count()} cores); answers differing between daemon and in-process: {differ}\n")
    print(f"daemon status at the end: {status}\n")
    print("| whole process, p50 (ms) | via daemon | in-process | python -c pass | python -c \"import typer\" |")
    print("|---|---|---|---|---|")
    typer_key = 'python -c "import typer"'
    base = f"{p50['python -c pass']:.0f} | {p50[typer_key]:.0f}"
    for label, key in ((f"`context --query` ({roomy:,}-token budget: recall runs)", "context --query"),
                       ("`context` (no query, 4,000 tokens)", "context (no query)"),
                       ("`vault search`", "vault search")):
        warm, coldv = p50[f"{key}, via daemon"], p50[f"{key}, in-process"]
        print(f"| {label} | {warm:.0f} | {coldv:.0f} ({coldv / warm:.1f}x) | {base} |")
