"""Compile the hand-written recall evaluation set into ``bench/data/recall_eval/*.jsonl``.

    .venv/bin/python bench/_recall_eval_build.py          # writes corpus.jsonl, queries.jsonl; prints counts

The set is written by hand in ``bench/data/recall_eval/source/*.txt`` (read in
name order), in a small line format:

    # a comment
    @conv dialogue=maya-leo session=3 date=2026-03-14   context for the lines below
    M cat: Maya: I finally adopted ...                   a memory with a label
    D: Leo: Nice, ...                                    a memory without a label (distractor, neighbour)
    Q para cat: Which animal ...                         a query; labels of its relevant memories
    Q multi cat,dog: ...                                 several relevant memories
    Q irr: ...                                           nothing in the corpus answers it

Contexts: ``@conv`` (speaker taken from the "Name:" prefix), ``@atp`` (goal id
and record type taken from "Goal: g-x. Action: ..."), ``@vault type=...``
(title / body split on " // "; the path is derived from the title). A memory
line may add metadata in brackets: ``M lbl [agent=builder]: ...``.
Query kinds: para, kw, mix, temp, multi, irr. Splits alternate dev / test
within each kind, in file order, so adding queries never moves an old one.

Memory ids are given in file order (c0001...), so appending keeps old ids. The
few templated filler memories (small talk, routine log lines) get ids from
c3001 on; every query and every memory it points at is hand-written.
The build refuses a "paraphrase" query that shares a content word (after
stopwords and Porter stemming) with one of its targets.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _recall_eval_data import DATA_DIR, content_stems, load

SOURCE_DIR = DATA_DIR / "source"
KIND = {"para": "paraphrase", "kw": "keyword", "mix": "mixed", "temp": "temporal", "multi": "multi", "irr": "irrelevant"}
FOLDER = {"decision": "decisions", "preference": "preferences", "fact": "facts", "howto": "howto"}
FILLER_START = 3001

_MEM = re.compile(r"^(M|D)\s*([\w-]+)?\s*(?:\[([^\]]*)\])?\s*:\s+(.+)$")
_QRY = re.compile(r"^Q\s+(\w+)\s*([\w,-]*)\s*:\s+(.+)$")
_CTX = re.compile(r"^@(conv|atp|vault)\b(.*)$")
_ATP = re.compile(r"^Goal: (g-[\w-]+)\. ([A-Z][\w-]*)(?: \(([\w-]+)\))?:")


def _kv(text: str, sep: str = " ") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in text.split(sep))):
        key, _, value = part.partition("=")
        out[key] = int(value) if value.isdigit() else value
    return out


def _slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:60]


def parse() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    memories: list[dict[str, Any]] = []
    labels: dict[str, int] = {}
    raw_queries: list[tuple[str, list[str], str, str]] = []
    for path in sorted(SOURCE_DIR.glob("*.txt")):
        source, ctx = "", {}
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            where = f"{path.name}:{number}"
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if m := _CTX.match(line):
                source = {"conv": "conversation", "atp": "atp", "vault": "vault"}[m.group(1)]
                ctx = _kv(m.group(2))
                continue
            if m := _MEM.match(line):
                _, label, extra, text = m.groups()
                meta = dict(ctx)
                content = text
                if source == "conversation":
                    speaker, colon, _ = text.partition(": ")
                    if not colon or " " in speaker:
                        raise SystemExit(f"{where}: a turn must start with 'Name: '")
                    meta = {"speaker": speaker, **meta}
                elif source == "atp":
                    a = _ATP.match(text)
                    if not a:
                        raise SystemExit(f"{where}: an ATP record must start with 'Goal: g-x. Type:'")
                    meta = {"record_type": a.group(2).lower().replace("-", ""), "goal_id": a.group(1), **meta}
                    if a.group(3):
                        meta["agent"] = a.group(3)
                elif source == "vault":
                    title, sep, body = text.partition(" // ")
                    if not sep:
                        raise SystemExit(f"{where}: a vault note needs 'Title // body'")
                    content = f"{title}\n{body.replace(' // ', chr(10))}"
                    kind = str(ctx.get("type", "fact"))
                    meta = {"type": kind, "path": f"{FOLDER.get(kind, kind)}/{_slug(title)}.md"}
                else:
                    raise SystemExit(f"{where}: memory before any @conv/@atp/@vault context")
                if extra:
                    meta.update(_kv(extra, ","))
                if label:
                    if label in labels:
                        raise SystemExit(f"{where}: label {label!r} used twice")
                    labels[label] = len(memories)
                memories.append({"id": f"c{len(memories) + 1:04d}", "content": content, "source": source, "metadata": meta})
                continue
            if m := _QRY.match(line):
                kind, refs, text = m.groups()
                if kind not in KIND:
                    raise SystemExit(f"{where}: unknown query kind {kind!r}")
                raw_queries.append((KIND[kind], [r for r in refs.split(",") if r], text, where))
                continue
            raise SystemExit(f"{where}: cannot parse: {line[:60]}")
    if len(memories) >= FILLER_START:
        raise SystemExit("too many hand-written memories for the filler id range")
    queries: list[dict[str, Any]] = []
    per_kind: Counter[str] = Counter()
    for kind, refs, text, where in raw_queries:
        missing = [r for r in refs if r not in labels]
        if missing:
            raise SystemExit(f"{where}: unknown label(s) {missing}")
        split = ("dev", "test")[per_kind[kind] % 2]
        per_kind[kind] += 1
        queries.append(
            {
                "id": f"q{len(queries) + 1:04d}",
                "query": text,
                "relevant": [memories[labels[r]]["id"] for r in refs],
                "kind": kind,
                "split": split,
                "_where": where,
            }
        )
    memories.extend(fillers(FILLER_START))
    return memories, queries


def fillers(start: int) -> list[dict[str, Any]]:
    """Templated background memories: small talk and routine records that answer no query."""
    try:
        from _recall_eval_fillers import make
    except ImportError:
        return []
    out = []
    for i, (source, content, meta) in enumerate(make()):
        out.append({"id": f"c{start + i:04d}", "content": content, "source": source, "metadata": meta})
    return out


def check(memories: list[dict[str, Any]], queries: list[dict[str, Any]]) -> list[str]:
    problems = []
    by_id = {m["id"]: m for m in memories}
    dup = [c for c, n in Counter(m["content"].lower() for m in memories).items() if n > 1]
    problems += [f"duplicate memory: {c[:70]}" for c in dup]
    dupq = [c for c, n in Counter(q["query"].lower() for q in queries).items() if n > 1]
    problems += [f"duplicate query: {c}" for c in dupq]
    for q in queries:
        qs = content_stems(q["query"])
        for rid in q["relevant"]:
            shared = qs & content_stems(by_id[rid]["content"])
            if q["kind"] == "paraphrase" and shared:
                problems.append(f"{q['_where']}: paraphrase shares {sorted(shared)} with its target: {q['query']}")
        if q["kind"] in ("keyword", "mixed"):
            best = max(len(qs & content_stems(by_id[r]["content"])) for r in q["relevant"])
            if best == 0:
                problems.append(f"{q['_where']}: {q['kind']} query shares no word with its target: {q['query']}")
            if q["kind"] == "mixed" and best == len(qs):
                problems.append(f"{q['_where']}: mixed query has no rephrased word: {q['query']}")
        if q["kind"] == "temporal" and (
            not q["query"].lower().startswith("when ")
            or any(by_id[r]["source"] != "conversation" for r in q["relevant"])
        ):
            problems.append(f"{q['_where']}: temporal query must ask 'When ...' about conversation turns")
    return problems


def traps(memories: list[dict[str, Any]], queries: list[dict[str, Any]]) -> int:
    """Queries whose content words also hit a memory that is not relevant, at least as hard as a target."""
    stems = {m["id"]: content_stems(m["content"]) for m in memories}
    count = 0
    for q in queries:
        if not q["relevant"]:
            continue
        qs = content_stems(q["query"])
        best = max(len(qs & stems[r]) for r in q["relevant"])
        rel = set(q["relevant"])
        if any(len(qs & s) >= max(1, best) for mid, s in stems.items() if mid not in rel):
            count += 1
    return count


def main() -> None:
    memories, queries = parse()
    problems = check(memories, queries)
    for p in problems:
        print("PROBLEM", p)
    if problems and "--force" not in sys.argv:
        raise SystemExit(f"{len(problems)} problem(s); nothing written")
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    with open(DATA_DIR / "corpus.jsonl", "w", encoding="utf-8") as f:
        f.writelines(json.dumps(m, ensure_ascii=False) + "\n" for m in memories)
    with open(DATA_DIR / "queries.jsonl", "w", encoding="utf-8") as f:
        f.writelines(
            json.dumps({k: v for k, v in q.items() if k != "_where"}, ensure_ascii=False) + "\n" for q in queries
        )
    corpus, qs = load()
    print(f"corpus {len(corpus)}: {dict(Counter(m['source'] for m in corpus))}")
    print(f"queries {len(qs)}: {dict(Counter(q['kind'] for q in qs))}")
    print(f"splits: {dict(Counter((q['kind'], q['split']) for q in qs))}")
    print(f"answerable {sum(1 for q in qs if q['relevant'])}; keyword traps {traps(corpus, qs)}")


if __name__ == "__main__":
    main()
