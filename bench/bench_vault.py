"""Benchmark the Atomic Agent vault against a raw durable-write floor measured in the same run.

    .venv/bin/python bench/bench_vault.py                  # 10,000 notes
    .venv/bin/python bench/bench_vault.py --notes 2000     # smaller
    .venv/bin/python bench/bench_vault.py --profile        # also cProfile the measured phases

What it measures (issue 2, "What it must show"):

* raw floor: the bytes of one rendered note written the durable way (temp file
  + write + fsync + close + rename + fsync of the directory), no package code.
  Sampled in rounds at the start, after every measured round (every ~2,000
  notes while batch-building) and at the end of the run; the median round is
  the floor (the machine is shared and fsync latency drifts). A second floor
  row, each file fsynced but the directory once, is the floor a batch can reach.
  CPU time per op is printed too: it does not move with fsync noise.
* ``Agent.new_note`` (validate + atomic note write + INDEX update, two durable
  files) on a small agent and as extra writes into the big agent, whose INDEX
  is split into sub-indexes. Target: <= 2.5x the floor.
* ``Agent.create_notes`` in batches of 1,000 (this builds the big agent) and
  of 100 (a second agent of the same size). Per note; target <= 1.3x floor.
* ``Agent.validate()`` and ``lint_agent`` over the big agent (target: the two
  together under 1 s), cold (no parse cache in ``_cache/vault/``) and warm (the
  cache the previous command left; unchanged files are not parsed again), and
  ``Agent.rebuild_index()``.

The temp directory is on the filesystem of /tmp unless ``--dir`` says otherwise;
its path and filesystem type are printed. Benchmarks are not tests: nothing is
asserted, the table says which targets are met.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime as dt
import io
import os
import platform
import pstats
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from atomic_agents.vault import Agent, Document, NoteDraft, Vault, lint_agent, render

try:  # the package writes new notes with its canonical key order; use it for identical bytes
    from atomic_agents.vault._units import order_meta
except ImportError:  # pragma: no cover - the floor only needs bytes of the same size
    def order_meta(meta):  # type: ignore[no-untyped-def]
        return meta

TODAY = dt.date(2026, 5, 6)

# --------------------------------------------------------------------------- content

_WORDS = (
    "debt avalanche order budget rent savings emergency fund index card tax return invoice "
    "client retainer quarterly review pricing model margin forecast runway hiring plan onboarding "
    "checklist deploy window release train incident postmortem oncall rotation latency budget "
    "cache policy schema migration vault layout journal prompt cost guardrail token ceiling "
    "weekly sync morning routine reading list travel booking visa renewal lease insurance claim "
    "doctor appointment gym schedule meal prep grocery order supplier contract warranty refund"
).split()
_VERBS = "prefers avoids wants decided agreed confirmed asked noted rejected chose keeps uses".split()
_TYPES = ("feedback", "decision", "user", "project", "reference")
_TYPE_WEIGHTS = (25, 20, 15, 20, 20)
_CONF = ("high", "medium", "low")


def _sentence(rng: random.Random, target: int) -> str:
    out: list[str] = []
    while sum(len(w) + 1 for w in out) < target:
        out.append(rng.choice(_WORDS) if len(out) % 4 != 2 else rng.choice(_VERBS))
    s = " ".join(out)[: target + 8].rstrip()
    return s[0].upper() + s[1:]


def make_drafts(n: int, seed: int, prefix: str) -> list[NoteDraft]:
    """``n`` realistic drafts: names ~40 chars, descriptions ~100, bodies a few hundred bytes,
    the five types mixed, some time-bounded filenames (``decision_2026_...``), some expiring."""
    rng = random.Random(seed)
    drafts = []
    for i in range(n):
        kind = rng.choices(_TYPES, _TYPE_WEIGHTS)[0]
        topic = f"{prefix}_{rng.choice(_WORDS)}_{rng.choice(_WORDS)}_{i:05d}"
        captured = TODAY - dt.timedelta(days=rng.randint(0, 400))
        last_seen = captured + dt.timedelta(days=rng.randint(0, (TODAY - captured).days))
        period = None
        expires = None
        if kind in ("decision", "project"):
            r = rng.random()
            if r < 0.35:
                period = rng.choice(("2025", "2026", "2026-q1", "2026-q2", "2026-q3"))
            if r < 0.5:
                expires = TODAY + dt.timedelta(days=rng.randint(-60, 300))
        paras = [_sentence(rng, rng.randint(80, 180)) + "." for _ in range(rng.randint(2, 4))]
        body = "\n\n".join(paras) + f"\n\n**Why:** {_sentence(rng, 60)}.\n**How to apply:** {_sentence(rng, 60)}.\n"
        drafts.append(
            NoteDraft(
                type=kind,
                topic=topic,
                name=_sentence(rng, rng.randint(32, 46)),
                description=_sentence(rng, rng.randint(85, 115)),
                sources=[f"conversation_{captured.isoformat()}"] + ([f"journal/{captured:%Y-%m}/{captured}.md"] if rng.random() < 0.3 else []),
                confidence=rng.choice(_CONF),
                body=body,
                period=period,
                captured=captured,
                last_seen=last_seen,
                pinned=rng.random() < 0.002,
                expires_at=expires,
                tags=rng.sample(_WORDS, rng.randint(0, 3)),
            )
        )
    return drafts


def note_bytes(draft: NoteDraft) -> bytes:
    """The exact bytes ``new_note`` writes for ``draft`` (a new file: canonical key order)."""
    return render(Document(meta={}, body=""), order_meta(draft.meta(TODAY)), draft.body).encode("utf-8")


# --------------------------------------------------------------------------- raw floor

def raw_durable_write(directory: str, name: str, data: bytes) -> None:
    """temp + write + fsync + close + rename + fsync(dir): the floor for one durable file."""
    tmp = os.path.join(directory, f".{name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, os.path.join(directory, name))
    dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def raw_floor_round(root: Path, tag: str, payloads: list[tuple[str, bytes]]) -> float:
    """Seconds per file for one round into a fresh directory."""
    d = root / f"raw_{tag}"
    d.mkdir()
    ds = str(d)
    t0 = time.perf_counter()
    for name, data in payloads:
        raw_durable_write(ds, name, data)
    return (time.perf_counter() - t0) / len(payloads)


def raw_batch_round(root: Path, tag: str, payloads: list[tuple[str, bytes]]) -> float:
    """Seconds per file when each file is fsynced but the directory only once (batch floor)."""
    d = root / f"rawb_{tag}"
    d.mkdir()
    ds = str(d)
    t0 = time.perf_counter()
    for name, data in payloads:
        tmp = os.path.join(ds, f".{name}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(fd, data)
        os.fsync(fd)
        os.close(fd)
        os.replace(tmp, os.path.join(ds, name))
    dfd = os.open(ds, os.O_RDONLY | os.O_DIRECTORY)
    os.fsync(dfd)
    os.close(dfd)
    return (time.perf_counter() - t0) / len(payloads)


# --------------------------------------------------------------------------- table

@dataclass
class Row:
    op: str
    n: int
    total: float  # seconds
    per_op: float  # seconds
    ratio: float | None = None
    target: str = ""
    met: bool | None = None


def fmt_table(rows: list[Row]) -> str:
    head = ("operation", "n", "total s", "per-op ms", "ops/s", "ratio to floor", "target", "met?")
    body = []
    for r in rows:
        body.append((
            r.op,
            f"{r.n:,}",
            f"{r.total:.3f}",
            f"{r.per_op * 1e3:.3f}",
            f"{1 / r.per_op:,.0f}" if r.per_op > 0 else "-",
            f"{r.ratio:.2f}x" if r.ratio is not None else "-",
            r.target or "-",
            "-" if r.met is None else ("yes" if r.met else "NO"),
        ))
    widths = [max(len(x[i]) for x in [head, *body]) for i in range(len(head))]
    left = {0, 6}

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    sep = "  ".join("-" * w for w in widths)
    return "\n".join([line(head), sep, *map(line, body)])


def fs_type(path: Path) -> str:
    best, kind = "", "?"
    try:
        with open("/proc/mounts") as fh:
            for ln in fh:
                parts = ln.split()
                if len(parts) >= 3 and str(path).startswith(parts[1]) and len(parts[1]) > len(best):
                    best, kind = parts[1], f"{parts[2]} on {parts[0]} (mount {parts[1]})"
    except OSError:
        pass
    return kind


def timed(fn: Callable[[], object]) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def profile(label: str, fn: Callable[[], object], top: int) -> None:
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    fn()
    prof.disable()
    wall = time.perf_counter() - t0
    for key in ("tottime", "cumulative"):
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).strip_dirs().sort_stats(key).print_stats(top)
        text = buf.getvalue()
        start = text.find("   ncalls")
        print(f"\n--- profile: {label} (wall {wall:.3f} s under cProfile), top {top} by {key}")
        print(text[start:].rstrip() if start >= 0 else text.rstrip())


# --------------------------------------------------------------------------- main

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--notes", type=int, default=10_000, help="notes in the big agent (default 10,000)")
    ap.add_argument("--single", type=int, default=100, help="new_note writes per round (default 100)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of single writes; median is reported (default 3)")
    ap.add_argument("--floor-rounds", type=int, default=6, help="raw floor rounds at the start and end, besides one after each measured round (default 6)")
    ap.add_argument("--reps", type=int, default=3, help="repetitions of validate / lint / rebuild; median (default 3)")
    ap.add_argument("--batches", default="1000,100", help="batch sizes for create_notes (default 1000,100; the first builds the big agent)")
    ap.add_argument("--dir", default=None, help="parent of the temp dir (default: the system temp dir, /tmp)")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir")
    ap.add_argument("--profile", action="store_true", help="after the table, cProfile each vault phase once")
    ap.add_argument("--profile-top", type=int, default=18)
    args = ap.parse_args(argv)

    batch_sizes = [int(x) for x in args.batches.split(",") if x.strip()]
    root = Path(tempfile.mkdtemp(prefix="bench_vault_", dir=args.dir))
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"bench_vault: {args.notes:,} notes; Python {platform.python_version()} ({platform.python_implementation()}); "
          f"{cores} cores (os.cpu_count()={os.cpu_count()}); {platform.platform()}")
    print(f"temp dir: {root}  [{fs_type(root)}]")
    sys.stdout.flush()

    try:
        return run(args, root, batch_sizes)
    finally:
        if args.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


def run(args: argparse.Namespace, root: Path, batch_sizes: list[int]) -> int:
    n = args.notes
    vault = Vault(root / "agents")
    big_drafts = make_drafts(n, seed=1, prefix="n")
    payloads = [(d.filename, note_bytes(d)) for d in big_drafts[: max(args.single, 50)]]
    mean_bytes = statistics.mean(len(note_bytes(d)) for d in big_drafts[:1000])
    print(f"note bytes: mean {mean_bytes:.0f} (sample of {min(n, 1000)}); "
          f"mean name {statistics.mean(len(d.name) for d in big_drafts):.0f} chars, "
          f"description {statistics.mean(len(d.description) for d in big_drafts):.0f}, "
          f"body {statistics.mean(len(d.body) for d in big_drafts):.0f} bytes; "
          f"{sum(1 for d in big_drafts if d.period)} time-bounded filenames")
    sys.stdout.flush()

    # The floor is sampled before, between and after the measured phases (the
    # machine is shared: fsync latency drifts), and the median sample is used.
    floor_samples: list[float] = []
    batch_floor_samples: list[float] = []
    tags = iter(range(10**6))

    def floor_sample() -> None:
        tag = str(next(tags))
        floor_samples.append(raw_floor_round(root, tag, payloads))
        batch_floor_samples.append(raw_batch_round(root, tag, payloads))

    cpu: dict[str, float] = {}  # CPU seconds per op, a noise-free view of the package's own cost
    for _ in range(max(1, args.floor_rounds // 2)):
        floor_sample()

    # --- single writes, small agent: a fresh agent per round
    small_samples = []
    small_cpu = []
    for r in range(args.rounds):
        agent, _ = vault.init_agent(f"small_{r}")
        drafts = make_drafts(args.single, seed=100 + r, prefix="s")
        c0, t0 = time.process_time(), time.perf_counter()
        for d in drafts:
            agent.new_note(d, today=TODAY)
        small_samples.append((time.perf_counter() - t0) / len(drafts))
        small_cpu.append((time.process_time() - c0) / len(drafts))
        floor_sample()
    cpu["small"] = statistics.median(small_cpu)

    # --- batch writes: the first batch size builds the big agent
    batch_results: list[tuple[int, float, int]] = []
    big: Agent | None = None
    for bi, size in enumerate(batch_sizes):
        agent, _ = vault.init_agent("big" if bi == 0 else f"batch_{size}")
        drafts = big_drafts if bi == 0 else make_drafts(n, seed=10 + bi, prefix="b")
        every = max(1, 2000 // size)
        wall = cpu_s = 0.0
        for k, i in enumerate(range(0, len(drafts), size)):
            chunk = drafts[i : i + size]
            c0, t0 = time.process_time(), time.perf_counter()
            agent.create_notes(chunk, today=TODAY)
            wall += time.perf_counter() - t0
            cpu_s += time.process_time() - c0
            if (k + 1) % every == 0:
                floor_sample()  # not inside the timed region
        batch_results.append((size, wall, len(drafts)))
        cpu[f"batch{size}"] = cpu_s / len(drafts)
        if bi == 0:
            big = agent
        print(f"  built {agent.name}: {len(drafts):,} notes in batches of {size:,}: {wall:.1f} s")
        sys.stdout.flush()
    assert big is not None

    # --- validate, lint, rebuild on the big agent
    val_t, lint_t, reb_t = [], [], []
    val_errors = lint_summary = rebuild_info = None
    cache_file = big.agents_root / "_cache" / "vault" / f"{big.name}.json"
    # cold: no parse cache (a fresh clone, or the cache folder deleted)
    cache_file.unlink(missing_ok=True)
    cold_val, _ = timed(lambda: big.validate(today=TODAY))
    cache_file.unlink(missing_ok=True)
    cold_lint, _ = timed(lambda: lint_agent(big, today=TODAY))
    # warm: the cache written by the previous command (unchanged files are not parsed again)
    for _ in range(args.reps):
        t, val_errors = timed(lambda: big.validate(today=TODAY))
        val_t.append(t)
        t, report = timed(lambda: lint_agent(big, today=TODAY))
        lint_t.append(t)
        lint_summary = report.to_dict()["counts"]  # type: ignore[attr-defined]
        t, rebuild_info = timed(lambda: big.rebuild_index(today=TODAY))
        reb_t.append(t)
    index_files = sorted(p.name for p in big.memory_dir.glob("INDEX*.md"))
    index_bytes = sum(p.stat().st_size for p in big.memory_dir.glob("INDEX*.md"))

    # --- single writes into the big agent (INDEX with sub-indexes)
    big_samples = []
    big_cpu = []
    for r in range(args.rounds):
        drafts = make_drafts(args.single, seed=200 + r, prefix=f"x{r}")
        c0, t0 = time.process_time(), time.perf_counter()
        for d in drafts:
            big.new_note(d, today=TODAY)
        big_samples.append((time.perf_counter() - t0) / len(drafts))
        big_cpu.append((time.process_time() - c0) / len(drafts))
        floor_sample()
    cpu["big"] = statistics.median(big_cpu)

    for _ in range(args.floor_rounds - args.floor_rounds // 2):
        floor_sample()

    # --- table
    floor = statistics.median(floor_samples)
    bfloor = statistics.median(batch_floor_samples)
    rows = [
        Row("raw durable write, one file (floor)", len(payloads) * len(floor_samples), floor * len(payloads), floor),
        Row("raw durable write, batch (dir fsync once)", len(payloads) * len(batch_floor_samples), bfloor * len(payloads),
            bfloor, bfloor / floor),
    ]
    for label, samples, notes_in in (("new_note, small agent", small_samples, f"0-{args.single} notes"),
                                     ("new_note, big agent", big_samples, f"{n:,}+ notes")):
        per = statistics.median(samples)
        ratio = per / floor
        rows.append(Row(f"{label} ({notes_in})", args.single * len(samples), per * args.single, per, ratio, "<= 2.5x", ratio <= 2.5))
    for size, total, count in batch_results:
        per = total / count
        ratio = per / floor
        rows.append(Row(f"create_notes, batches of {size:,} (per note)", count, total, per, ratio, "<= 1.3x", ratio <= 1.3))
    v, li, rb = statistics.median(val_t), statistics.median(lint_t), statistics.median(reb_t)
    rows += [
        Row(f"validate() {n:,} notes, cold (per note)", n, cold_val, cold_val / n),
        Row(f"lint_agent {n:,} notes, cold (per note)", n, cold_lint, cold_lint / n),
        Row("validate + lint, cold (per note)", n, cold_val + cold_lint, (cold_val + cold_lint) / n, None,
            "< 1 s total", cold_val + cold_lint < 1.0),
        Row(f"validate() {n:,} notes, warm cache (per note)", n, v, v / n),
        Row(f"lint_agent {n:,} notes, warm cache (per note)", n, li, li / n),
        Row("validate + lint, warm cache (per note)", n, v + li, (v + li) / n, None, "< 1 s total", v + li < 1.0),
        Row(f"rebuild_index {n:,} notes (per note)", n, rb, rb / n),
    ]
    print()
    print(fmt_table(rows))
    print()
    print(f"floor rounds (ms/op): {', '.join(f'{s * 1e3:.3f}' for s in floor_samples)} -> median {floor * 1e3:.3f}")
    print(f"single-write rounds (ms/op): small {', '.join(f'{s * 1e3:.3f}' for s in small_samples)}; "
          f"big {', '.join(f'{s * 1e3:.3f}' for s in big_samples)}")
    print(f"CPU ms per op (process time, immune to fsync noise): new_note small {cpu['small'] * 1e3:.3f}, "
          f"new_note big {cpu['big'] * 1e3:.3f}, "
          + ", ".join(f"create_notes/{size} {cpu[f'batch{size}'] * 1e3:.3f}" for size in batch_sizes))
    print(f"validate s: {', '.join(f'{t:.3f}' for t in val_t)}; lint s: {', '.join(f'{t:.3f}' for t in lint_t)}; "
          f"rebuild s: {', '.join(f'{t:.3f}' for t in reb_t)}")
    print(f"validate errors: {len(val_errors)}; lint counts: {lint_summary}; "  # type: ignore[arg-type]
          f"rebuild: {rebuild_info['entries']:,} entries, files written {rebuild_info['files_written']}")  # type: ignore[index]
    print(f"big agent INDEX files: {', '.join(index_files)} ({index_bytes:,} bytes)")
    sys.stdout.flush()

    if args.profile:
        small_agent, _ = vault.init_agent("prof_small")
        batch_agent, _ = vault.init_agent("prof_batch")
        small_drafts = make_drafts(args.single, seed=300, prefix="p")
        big_extra = make_drafts(args.single, seed=400, prefix="p")
        batch_drafts = make_drafts(batch_sizes[0], seed=500, prefix="q")

        def small_round() -> None:
            for d in small_drafts:
                small_agent.new_note(d, today=TODAY)

        def big_round() -> None:
            for d in big_extra:
                big.new_note(d, today=TODAY)

        def batch_round() -> None:
            batch_agent.create_notes(batch_drafts, today=TODAY)

        profile(f"{args.single} x new_note, small agent", small_round, args.profile_top)
        profile(f"{args.single} x new_note, big agent", big_round, args.profile_top)
        profile(f"create_notes, one batch of {batch_sizes[0]}", batch_round, args.profile_top)
        profile("validate()", lambda: big.validate(today=TODAY), args.profile_top)
        profile("lint_agent", lambda: lint_agent(big, today=TODAY), args.profile_top)
        profile("rebuild_index", lambda: big.rebuild_index(today=TODAY), args.profile_top)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
