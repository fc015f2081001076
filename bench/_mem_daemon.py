"""The warm path: whole-process `memory remember` / `recall` through `atomic-agents daemon` vs cold in-process.

    .venv/bin/python bench/bench_memory.py --section daemon                  # 10,000 memories, 30 reps
    .venv/bin/python bench/bench_memory.py --section daemon --size 2000 --reps 15

Each row is a fresh ``python -m atomic_agents.cli`` process with pipes on stdin/stdout/
stderr (as an agent's script runs it), wall time from spawn to exit, p50 over
``--reps``. The variants run interleaved (one of each per round, the order rotated),
so load on the shared machine hits them alike. Baselines in the same run: ``python -c
pass`` (the interpreter's floor), ``python -c "import typer"`` (any typer CLI's floor),
all with bytecode cached (``PYTHONPYCACHEPREFIX`` in the run's temp folder, one
uncounted warm-up round) as for an installed package,
and the same command in-process (``ATOMIC_AGENTS_DAEMON=off``: imports, model load,
store open, as without a daemon). The store is SQLite with the real local model,
filled through the store's own batch write path. Target: warm remember and recall
<= 60 ms p50. Benchmarks are not tests: nothing is asserted.
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
SCOPE = ["--agent-id", "builder", "--user-id", "alice", "--org-id", "acme", "--workspace-id", "acme/web"]


def _texts(n: int, seed: int = 7) -> list[str]:
    sys.path.insert(0, str(HERE))
    from bench_memory import EXTRA, OUTCOMES, ROLES, STAGES, THINGS, VERBS

    rnd = random.Random(seed)
    return [f"Goal: g{i % 500} | Stage: {rnd.choice(STAGES)} | {rnd.choice(ROLES)} {rnd.choice(VERBS)} the "
            f"{rnd.choice(THINGS)} {rnd.choice(OUTCOMES)}. {rnd.choice(EXTRA)}" for i in range(n)]


def _wall(cmd: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    took = (time.perf_counter() - t0) * 1000
    if p.returncode != 0:
        raise SystemExit(f"{cmd[3:6]} failed ({p.returncode}): {p.stderr.decode()[-400:]}")
    return took


def run(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(prog="bench_memory.py --section daemon")
    ap.add_argument("--size", type=int, default=10_000, help="memories in the store (default 10,000)")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--embedder", default="minilm")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(SRC))
    from atomic_agents.memory import Scope, SQLiteMemoryStore, embedder_from_name

    with tempfile.TemporaryDirectory(dir="/tmp", prefix="aa-bench-") as tmp:
        runtime = Path(tmp) / "run"
        runtime.mkdir(mode=0o700)
        db = Path(tmp) / "memory.db"
        t0 = time.perf_counter()
        store = SQLiteMemoryStore(db, embedder=embedder_from_name(args.embedder))
        store.remember_many([(t, {"goal_id": f"g{i % 500}"}) for i, t in enumerate(_texts(args.size))],
                            Scope("builder", "alice", org_id="acme", workspace_id="acme/web"))
        store.close()
        fill = time.perf_counter() - t0
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ATOMIC_AGENTS_", "EDEN_"))}
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # bytecode cached as for an installed package (not in the checkout)
        env.update(XDG_RUNTIME_DIR=str(runtime), ATOMIC_AGENTS_EMBEDDER=args.embedder,
                   PYTHONPYCACHEPREFIX=str(Path(tmp) / "pycache"),
                   PYTHONPATH=str(SRC) + os.pathsep + env.get("PYTHONPATH", ""))
        cold = {**env, "ATOMIC_AGENTS_DAEMON": "off"}
        cli = [sys.executable, "-m", "atomic_agents.cli", "memory", "--db", str(db)]
        start = subprocess.run([sys.executable, "-m", "atomic_agents.cli", "daemon", "start", "--db", str(db),
                                "--idle-timeout", "600"], env=env, capture_output=True, text=True)
        if start.returncode != 0:
            raise SystemExit(f"daemon start failed: {start.stderr}")
        words = ["billing deploy", "checkout API rollback", "flaky tests", "latency doubled", "nightly ETL"]
        variants: dict[str, tuple[list[str], dict[str, str]] | None] = {
            "python -c pass": ([sys.executable, "-c", "pass"], env),
            'python -c "import typer"': ([sys.executable, "-c", "import typer"], env),
            "remember, in-process (cold)": ([*cli, "remember", *SCOPE, "bench note cold"], cold),
            "remember, via daemon (warm)": ([*cli, "remember", *SCOPE, "bench note warm"], env),
            "recall, in-process (cold)": None,
            "recall, via daemon (warm)": None,
            "keyword search, in-process (cold)": None,
            "keyword search, via daemon (warm)": None,
        }
        times: dict[str, list[float]] = {k: [] for k in variants}
        names = list(variants)
        load0 = os.getloadavg()[0]
        try:
            for rep in range(-1, args.reps):  # round -1 warms the bytecode cache and is not counted
                q = words[rep % len(words)]
                variants["recall, in-process (cold)"] = ([*cli, "recall", *SCOPE, q], cold)
                variants["recall, via daemon (warm)"] = ([*cli, "recall", *SCOPE, q], env)
                variants["keyword search, in-process (cold)"] = ([*cli, "search", *SCOPE, q], cold)
                variants["keyword search, via daemon (warm)"] = ([*cli, "search", *SCOPE, q], env)
                order = names[rep % len(names):] + names[:rep % len(names)]
                for name in order:
                    cmd, e = variants[name]  # type: ignore[misc]
                    took = _wall(cmd, e)
                    if rep >= 0:
                        times[name].append(took)
            status = subprocess.run([sys.executable, "-m", "atomic_agents.cli", "daemon", "status", "--db", str(db),
                                     "--json"], env=env, capture_output=True, text=True).stdout.strip()
        finally:
            subprocess.run([sys.executable, "-m", "atomic_agents.cli", "daemon", "stop", "--db", str(db)], env=env,
                           capture_output=True)
        load1 = os.getloadavg()[0]

    p50 = {k: statistics.median(v) for k, v in times.items()}
    print(f"\n## warm path: {args.size:,} memories, embedder {args.embedder}, {args.reps} interleaved rounds "
          f"(store filled in {fill:.0f} s; load average {load0:.1f} -> {load1:.1f} on {os.cpu_count()} cores)\n")
    print(f"daemon status at the end: {status}\n")
    print("| whole process, p50 (ms) | via daemon | in-process (cold) | python -c pass | python -c \"import typer\" | target |")
    print("|---|---|---|---|---|---|")
    typer_key = 'python -c "import typer"'
    base = f"{p50['python -c pass']:.0f} | {p50[typer_key]:.0f}"
    for label, key, target in (("memory remember", "remember", "<= 60 ms"), ("memory recall", "recall", "<= 60 ms"),
                               ("memory search (keyword)", "keyword search", "-")):
        warm, coldv = p50[f"{key}, via daemon (warm)"], p50[f"{key}, in-process (cold)"]
        print(f"| {label} | {warm:.0f} | {coldv:.0f} ({coldv / warm:.1f}x) | {base} | {target} |")
