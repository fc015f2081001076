"""The CLI an agent calls once per record: whole-process wall times against ``python -c "import typer"``.

    .venv/bin/python bench/bench_memory.py --section cli                      # this checkout
    .venv/bin/python bench/bench_memory.py --section cli --baseline-src ../main/src   # plus the code before

Every row is a fresh ``python -m atomic_agents.cli`` process (stdout to a file, as
in a pipe), rounds interleaved so load drifts hit every row alike; the median of
``--reps``. The baseline, ``python -c "import typer"``, is measured in the same
rounds. Targets (issue 8): vault commands (list, show, lint, index show) <= 2x it,
keyword ``memory search`` <= 2.5x. Also: ONNX session creation for a small call (target <= 60 ms) next to the
former settings, the store's close (the WAL checkpoint), and ``remember --jsonl``
per record next to one ``remember`` process per record.

The WAL rows (``--wal-only`` runs only them) time whole ``memory remember`` and keyword
``memory search`` processes with the WAL kept at close (this code) against the same
processes with the checkpoint at close put back (``keep_wal_on_close`` patched to do
nothing, as on Python 3.11 before). The rounds are interleaved, each variant works on
its own copy of the store. The kept WAL starts at about half of ``WAL_KEEP_BYTES``,
the average between empty and the size at which a close checkpoints it. Each process's
store open and close are also timed inside it.

The vault has one agent with 200 notes; the keyword store 10,000 memories (the
fake embedder fills it: keyword search never embeds); remember/recall use the
real model on a small store of their own.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"


def _env(src: Path, **extra: str) -> dict[str, str]:
    # Bytecode is written and used, as in an installed package: with PYTHONDONTWRITEBYTECODE a
    # checkout without __pycache__ would compile every module in every process.
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATOMIC_AGENTS_") and k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "PYTHONPATH": str(src), **extra}


def _wall(cmd: list[str], env: dict[str, str], out: Path, stdin: Path | None = None) -> tuple[float, float]:
    """(wall seconds, CPU seconds user+system of the child): CPU moves far less with the machine's load."""
    with open(out, "wb") as fh, open(stdin or os.devnull, "rb") as inp:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdin=inp, stdout=fh, stderr=subprocess.DEVNULL, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        took = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(cmd)}\n{out.read_text()[:500]}")
    return took, usage.ru_utime + usage.ru_stime


def _setup(tmp: Path, memories: int) -> tuple[Path, Path, Path]:
    sys.path.insert(0, str(SRC))
    from atomic_agents import NoteDraft, Vault
    from atomic_agents.memory import HashingEmbedder, Scope, SQLiteMemoryStore

    root = tmp / "agents"
    agent, _ = Vault(root).init_agent("finance")
    drafts = [NoteDraft(type="project", topic=f"topic_{i}", name=f"Note {i}", description=f"Project note number {i}",
                        sources=["conversation_2026-05-06"], confidence="medium") for i in range(200)]
    agent.create_notes(drafts)
    kw = tmp / "keyword.db"
    store = SQLiteMemoryStore(kw, embedder=HashingEmbedder())
    words = ["billing", "deploy", "green", "failed", "migration", "review", "charter", "handoff", "verdict", "sofa"]
    scope = Scope("builder", "alice")
    batch = [(f"Goal g{i % 50} | {words[i % 10]} {words[(i * 7) % 10]} record {i} {words[(i * 3) % 10]}", {"goal_id": f"g{i % 50}"})
             for i in range(memories)]
    for start in range(0, len(batch), 1000):
        store.remember_many(batch[start:start + 1000], scope)
    store.close()
    model_db = tmp / "model.db"
    return root, kw, model_db


def _session_rows(reps: int) -> list[tuple[str, str, str, str]]:
    """ONNX session creation in this process: the former settings vs the small-call session, interleaved."""
    sys.path.insert(0, str(SRC))
    import onnxruntime as ort

    from atomic_agents.memory import MiniLMEmbedder

    emb = MiniLMEmbedder()
    model = emb.locate()
    emb._load()  # file cache warm, hash verified

    def former() -> object:
        o = ort.SessionOptions()
        o.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        o.log_severity_level = 3
        o.add_session_config_entry("session.intra_op.allow_spinning", "0")
        return ort.InferenceSession(str(model), sess_options=o, providers=["CPUExecutionProvider"])

    def quick() -> object:
        return emb._new_session(model, bulk=False)

    kept: list[object] = []  # every fold's weights, read in place by its sessions

    def bulk() -> object:  # from the folded model, the fold included (as a process's first big call)
        kept.append(emb._folded)
        emb._folded = None
        return emb._new_session(model, bulk=True)

    def bulk_file() -> object:  # the bulk session built from the file, as before the fold
        o = emb._options(bulk=True)
        return ort.InferenceSession(str(model), sess_options=o, providers=["CPUExecutionProvider"])

    def folded() -> object:  # the file read, the fold and the session, as a process's 6th small call builds it
        kept.append(emb._folded)
        emb._folded = None
        return emb._new_folded_session(bulk=False)

    sessions: dict[str, object] = {}
    names = ("former", "quick", "bulk", "bulk_file", "folded")
    res: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in names}
    for _ in range(reps):
        for name, fn in (("former", former), ("quick", quick), ("bulk", bulk), ("bulk_file", bulk_file), ("folded", folded)):
            w, c = time.perf_counter(), time.process_time()
            sessions[name] = fn()
            res[name][0].append(time.perf_counter() - w)
            res[name][1].append(time.process_time() - c)
    med = {k: (1000 * statistics.median(w), 1000 * statistics.median(c)) for k, (w, c) in res.items()}
    # One query's embedding on each session, interleaved (the folded one gives the quick one's bits).
    runs: dict[str, list[float]] = {"quick": [], "folded": [], "former": []}
    for i in range(10 * reps):
        for name in (("quick", "folded", "former") if i % 2 else ("former", "folded", "quick")):
            t0 = time.perf_counter()
            emb._run([f"when did Maya go hiking near the lake, time {i}?"], sessions[name], keep=False)
            runs[name].append(1000 * (time.perf_counter() - t0))
    q50 = {k: statistics.median(v) for k, v in runs.items()}
    return [
        ("ONNX session for a small call: wall / CPU ms", f"{med['quick'][0]:.0f} / {med['quick'][1]:.0f}",
         f"{med['former'][0]:.0f} / {med['former'][1]:.0f} former settings (ALL, default threads)", "<= 60 ms"),
        ("ONNX session for 16+ texts (built on first need, from the folded model): wall / CPU ms",
         f"{med['bulk'][0]:.0f} / {med['bulk'][1]:.0f}",
         f"{med['bulk_file'][0]:.0f} / {med['bulk_file'][1]:.0f} from the file (before the fold)", ""),
        ("folded session (built at a process's 6th small call: file read, fold, session): wall / CPU ms",
         f"{med['folded'][0]:.0f} / {med['folded'][1]:.0f}", "", ""),
        ("one query's embedding, p50 ms: folded session (6th small call on)", f"{q50['folded']:.1f}",
         f"{q50['quick']:.1f} quick session (1st call); {q50['former']:.1f} former settings", "same vector as quick"),
    ]


def _close_rows(tmp: Path, reps: int) -> list[tuple[str, str, str, str]]:
    from atomic_agents.memory import HashingEmbedder, Scope, SQLiteMemoryStore

    path = tmp / "close.db"
    out: dict[bool, list[float]] = {True: [], False: []}
    for i in range(reps):
        for durable in (True, False):
            store = SQLiteMemoryStore(path, embedder=HashingEmbedder(), durable=durable)
            store.remember(f"close bench {i}", None, Scope("a", "u"))
            t0 = time.perf_counter()
            store.close()
            out[durable].append(time.perf_counter() - t0)
    note = "WAL kept: no checkpoint (NO_CKPT_ON_CLOSE)" if Path(f"{path}-wal").exists() else "checkpointed at close"
    return [("store close after one write, durability full / normal (ms)",
             f"{1000 * statistics.median(out[True]):.1f} / {1000 * statistics.median(out[False]):.1f}", note, "")]


# argv[1] is "kept" or "checkpoint", argv[2] a file the store's open and close times (ms) are
# appended to; the rest is the command line. Both variants import the same modules before the CLI.
_WAL_WRAP = """
import atexit, sys, time
mode, log = sys.argv.pop(1), sys.argv.pop(1)
import atomic_agents.memory._sqlite_wal as w
from atomic_agents.memory import _sqlite
if mode == "checkpoint":
    w.keep_wal_on_close = lambda conn, path, keep=True: False
spans = dict.fromkeys(("open", "close", "open_cpu", "close_cpu"), 0.0)
def timed(name, fn):
    def run(*a, **k):
        t, c = time.perf_counter(), time.process_time()
        fn(*a, **k)
        spans[name] += 1000 * (time.perf_counter() - t)
        spans[name + "_cpu"] += 1000 * (time.process_time() - c)
    return run
_sqlite.SQLiteMemoryStore.__init__ = timed("open", _sqlite.SQLiteMemoryStore.__init__)
_sqlite.SQLiteMemoryStore.close = timed("close", _sqlite.SQLiteMemoryStore.close)
atexit.register(lambda: open(log, "a").write(" ".join(f"{spans[k]:.3f}" for k in ("open", "close", "open_cpu", "close_cpu"))))
from atomic_agents.cli import main
main()
"""


def _loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return f"{os.getloadavg()[0]:.2f}"


def _wal_rows(tmp: Path, kw: Path, reps: int, with_model: bool, n_mem: int) -> None:
    """Whole processes with the WAL kept at close against the checkpoint at close, interleaved."""
    import shutil

    from atomic_agents.memory import HashingEmbedder, Scope, SQLiteMemoryStore
    from atomic_agents.memory._sqlite_wal import WAL_KEEP_BYTES

    py = sys.executable
    dbs = {}
    for mode in ("kept", "checkpoint"):
        dbs[mode] = tmp / f"wal-{mode}.db"
        for suffix in ("", "-wal", "-shm"):
            if Path(f"{kw}{suffix}").exists():
                shutil.copy(f"{kw}{suffix}", f"{dbs[mode]}{suffix}")
    store = SQLiteMemoryStore(dbs["kept"], embedder=HashingEmbedder())
    n = 0
    wal = Path(f"{dbs['kept']}-wal")
    while not wal.exists() or wal.stat().st_size < WAL_KEEP_BYTES // 2:
        store.remember_many([(f"prefill {n} {i} billing deploy record", None) for i in range(50)], Scope("builder", "alice"))
        n += 1
    store.close()
    start_wal = wal.stat().st_size
    scope = ["--agent-id", "builder", "--user-id", "alice"]
    cases: list[tuple[str, list[str], str]] = [
        ("memory remember (hashing embedder)", ["memory", "remember", *scope, "deploy {n} went green", "--embedder",
                                                 "hashing-fake-256", "--db", "{db}"], "kw"),
        (f"memory search (keyword, {n_mem:,} memories)", ["memory", "search", *scope, "billing deploy", "--db", "{db}"], "kw"),
    ]
    if with_model:
        for mode in ("kept", "checkpoint"):
            dbs[f"model-{mode}"] = tmp / f"wal-model-{mode}.db"
        cases.append(("memory remember (real model)", ["memory", "remember", *scope, "deploy {n} went green", "--db", "{db}"],
                      "model"))
    out = tmp / "wal-out.txt"
    times: dict[tuple[str, str], list[float]] = {}
    cpu: dict[tuple[str, str], list[float]] = {}
    spans: dict[tuple[str, str], list[tuple[float, ...]]] = {}
    log = tmp / "wal-spans.txt"
    load_before = _loadavg()
    runs = 0
    for _ in range(reps):
        for label, argv, kind in cases:
            for mode in ("kept", "checkpoint"):
                db = dbs[mode] if kind == "kw" else dbs[f"model-{mode}"]
                runs += 1
                cmd = [py, "-c", _WAL_WRAP, mode, str(log),
                       *[a.replace("{n}", str(runs)).replace("{db}", str(db)) for a in argv]]
                log.write_text("")
                w, c = _wall(cmd, _env(SRC), out)
                times.setdefault((label, mode), []).append(w)
                cpu.setdefault((label, mode), []).append(c)
                spans.setdefault((label, mode), []).append(tuple(map(float, log.read_text().split())))
    end_wal = wal.stat().st_size if wal.exists() else 0
    print(f"\n## Whole process, WAL kept at close vs checkpoint at close: median of {reps} interleaved rounds "
          f"(/proc/loadavg {load_before} before, {_loadavg()} after; {os.cpu_count()} cores)\n")
    print(f"Kept WAL: {start_wal / 2**20:.2f} MiB at the start, {end_wal / 2**20:.2f} MiB at the end; the checkpoint "
          f"variant starts every process with no WAL.\n")
    print("| command | WAL kept: wall (min) / CPU ms | checkpoint at close (same run): wall (min) / CPU ms "
          "| saved wall ms, median (min) |")
    print("|---|---|---|---|")
    for label, _argv, _kind in cases:
        k, c = (statistics.median(times[(label, m)]) for m in ("kept", "checkpoint"))
        kmin, cmin = (min(times[(label, m)]) for m in ("kept", "checkpoint"))
        kc, cc = (statistics.median(cpu[(label, m)]) for m in ("kept", "checkpoint"))
        print(f"| {label} | {1000 * k:.1f} ({1000 * kmin:.1f}) / {1000 * kc:.1f} | {1000 * c:.1f} ({1000 * cmin:.1f}) / "
              f"{1000 * cc:.1f} | {1000 * (c - k):.1f} ({1000 * (cmin - kmin):.1f}) |", flush=True)
    # The part of each process that differs, timed inside it: less exposed to the machine's load. CPU time
    # leaves out waiting for a core (the load) and for the disk (the checkpoint's fsyncs).
    print("\n| inside the process, median ms, wall (CPU) | open: WAL kept | open: checkpoint variant | close: WAL kept "
          "| close: checkpoint variant | close saves, wall (CPU) | open costs, wall (CPU) |")
    print("|---|---|---|---|---|---|---|")
    for label, _argv, _kind in cases:
        k = [statistics.median(x[i] for x in spans[(label, "kept")]) for i in range(4)]
        c = [statistics.median(x[i] for x in spans[(label, "checkpoint")]) for i in range(4)]
        print(f"| {label} | {k[0]:.2f} ({k[2]:.2f}) | {c[0]:.2f} ({c[2]:.2f}) | {k[1]:.2f} ({k[3]:.2f}) "
              f"| {c[1]:.2f} ({c[3]:.2f}) | {c[1] - k[1]:.2f} ({c[3] - k[3]:.2f}) | {k[0] - c[0]:.2f} ({k[2] - c[2]:.2f}) |",
              flush=True)
    # The close that does checkpoint: once the kept WAL passes WAL_KEEP_BYTES (about once in 20 remember
    # processes), against a close that keeps a WAL half that size; in this process, interleaved.
    closes: dict[bool, list[float]] = {True: [], False: []}
    for i in range(max(3, reps // 2)):
        for big in (True, False):
            path = tmp / f"close-{big}-{i}.db"
            st = SQLiteMemoryStore(path, embedder=HashingEmbedder())
            target = WAL_KEEP_BYTES + 64 * 1024 if big else WAL_KEEP_BYTES // 2
            j = 0
            while not Path(f"{path}-wal").exists() or Path(f"{path}-wal").stat().st_size < target:
                st.remember(f"close row {j} billing deploy " + "word " * 40, None, Scope("a", "u"))  # one commit each
                j += 1
            t0 = time.perf_counter()
            st.close()
            closes[big].append(time.perf_counter() - t0)
    print(f"\n| store close (in process, median ms) | WAL at half of {WAL_KEEP_BYTES >> 10} KiB: kept "
          f"| WAL past {WAL_KEEP_BYTES >> 10} KiB: checkpointed (one close in ~20 remember processes) |")
    print("|---|---|---|")
    print(f"| one write per open, then close | {1000 * statistics.median(closes[False]):.2f} "
          f"| {1000 * statistics.median(closes[True]):.2f} |")


def run(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(prog="bench_memory.py --section cli", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--memories", type=int, default=10_000)
    ap.add_argument("--batch", type=int, default=100, help="records in the remember --jsonl row")
    ap.add_argument("--baseline-src", type=Path, help="another checkout's src/ (e.g. the code before) for the same commands")
    ap.add_argument("--no-model", action="store_true", help="skip the rows that load the real model")
    ap.add_argument("--wal-only", action="store_true", help="only the WAL-kept vs checkpoint-at-close rows")
    args = ap.parse_args(argv)
    py = sys.executable
    with tempfile.TemporaryDirectory(prefix="bench_mem_cli_") as tmp_s:
        tmp = Path(tmp_s)
        root, kw, model_db = _setup(tmp, args.memories)
        if args.wal_only:
            _wal_rows(tmp, kw, args.reps, not args.no_model, args.memories)
            return
        batch_file = tmp / "batch.jsonl"
        batch_file.write_text("".join(json.dumps({"content": f"Goal g{i} | deploy record {i} went green"}) + "\n"
                                      for i in range(args.batch)))
        r = ["--agents-root", str(root)]
        scope = ["--agent-id", "builder", "--user-id", "alice"]
        cli = [py, "-m", "atomic_agents.cli"]
        cases: list[tuple[str, list[str], dict[str, str], str, float | None]] = [
            ("baseline: python -c 'import typer'", [py, "-c", "import typer"], {}, "", None),
            ("atomic-agents --help", [*cli, "--help"], {}, "", None),
            ("vault list finance", [*cli, "vault", "list", "finance", *r], {}, "vault", 2.0),
            ("vault list finance --json", [*cli, "vault", "list", "finance", "--json", *r], {}, "vault", 2.0),
            ("vault show finance project_topic_7.md", [*cli, "vault", "show", "finance", "project_topic_7.md", *r], {}, "vault", 2.0),
            ("vault lint finance", [*cli, "vault", "lint", "finance", *r], {}, "vault", 2.0),
            ("vault index show finance", [*cli, "vault", "index", "show", "finance", *r], {}, "vault", 2.0),
            (f"memory search (keyword, {args.memories:,} memories)",
             [*cli, "memory", "search", *scope, "billing deploy", "--db", str(kw)], {}, "kw", 2.5),
            ("memory list --filter goal_id=g1", [*cli, "memory", "list", *scope, "--filter", "goal_id=g1", "--db", str(kw)], {}, "kw", None),
        ]
        if not args.no_model:
            cases += [
                ("memory remember (real model, new text)", [*cli, "memory", "remember", *scope, "deploy {n} went green", "--db", str(model_db)], {}, "model", None),
                ("memory recall (real model)", [*cli, "memory", "recall", *scope, "did the deploy work", "--db", str(model_db)], {}, "model", None),
                (f"memory remember --jsonl, {args.batch} records (per record)",
                 [*cli, "memory", "remember", *scope, "--jsonl", "-", "--db", str(model_db)], {}, "batch", None),
            ]
        srcs = [("", SRC)] + ([(" [baseline src]", args.baseline_src.resolve())] if args.baseline_src else [])
        times: dict[str, list[float]] = {}
        cpu: dict[str, list[float]] = {}
        out = tmp / "out.txt"
        runs = 0
        _wall(cases[0][1], _env(SRC), out)  # warm the interpreter's file cache
        for _suffix, src in srcs:  # write each checkout's bytecode once
            _wall([py, "-c", "import atomic_agents.cli._app as a, atomic_agents.memory._sqlite, atomic_agents.vault; a.app"],
                  _env(src), out)
        for _ in range(args.reps):
            for label, cmd, extra, kind, _t in cases:
                for suffix, src in srcs:
                    if kind == "batch" and suffix:
                        continue  # the code before has no --jsonl
                    key = label + suffix
                    if suffix and kind == "" and label.startswith("baseline"):
                        continue
                    stdin = batch_file if kind == "batch" else None
                    runs += 1  # "{n}": a text never stored before (equal content would reuse its vector)
                    t, c = _wall([a.replace("{n}", str(runs)) for a in cmd], _env(src, **extra), out, stdin)
                    per = args.batch if kind == "batch" else 1
                    times.setdefault(key, []).append(t / per)
                    cpu.setdefault(key, []).append(c / per)
        base, base_cpu = statistics.median(times[cases[0][0]]), statistics.median(cpu[cases[0][0]])
        print(f"\n## CLI whole-process wall, median of {args.reps} interleaved rounds "
              f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)\n")
        print("| command | wall ms | x import typer (wall) | CPU ms | x import typer (CPU) | target |")
        print("|---|---|---|---|---|---|")
        for label, _cmd, _e, kind, target in cases:
            for suffix, _src in srcs:
                key = label + suffix
                if key not in times:
                    continue
                med, med_cpu = statistics.median(times[key]), statistics.median(cpu[key])
                tgt = f"<= {target:g}x" if target and not suffix else ""
                print(f"| {key} | {1000 * med:.0f} | {med / base:.2f} | {1000 * med_cpu:.0f} | {med_cpu / base_cpu:.2f} | {tgt} |",
                      flush=True)
        if not args.no_model:
            print("\n| metric | atomic-agents | baseline (same run) | target |")
            print("|---|---|---|---|")
            for row in _session_rows(max(3, args.reps // 2)) + _close_rows(tmp, args.reps * 3):
                print("| " + " | ".join(row) + " |", flush=True)
        _wal_rows(tmp, kw, args.reps, not args.no_model, args.memories)


if __name__ == "__main__":
    run(sys.argv[1:])
