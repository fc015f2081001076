"""The system prompt an Atomic Agent runs with, assembled within its token budget.

Parts, in the order they are printed (and their priority, highest first):

1. persona: ``persona/IDENTITY.md``, ``SOUL.md``, ``USER.md``            -- always
2. the hard NOs and write paths of ``tools.md``                          -- always
3. every pinned note and wiki page (spec: "always loaded")              -- always
4. ``memory/INDEX.md`` (with its pointers to the sub-indexes)
5. the sub-indexes ``memory/INDEX_<slice>.md``
6. with a query: the notes most relevant to it (hybrid recall over the mirror,
   score >= 0.45, pinned ones already in, superseded/expired left out)
7. with a goal: its latest ATP records, then the memories recalled for it (for
   the query, or else the goal's request in its goal record)

The budget is ``model.md``'s "Max system prompt" unless one is given. When the
parts do not fit, the lowest-priority part goes first, one at a time, until the
rest fits: recalled notes (lowest score first), then memories recalled for the
goal, then sub-indexes (last first), then INDEX.md, then goal records (oldest
first). Each dropped part is reported with its size and why. Parts 1-3 are
never dropped: if they alone exceed the budget, :class:`ContextBudgetError`
names every one with its size. Same files, store and arguments: same output.
"""

from __future__ import annotations

import datetime as dt
import errno
import json
import os
import re
import stat
import threading
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._io import open_dir, resolve_inside
from .._text import decode, read_text
from ..exceptions import ContextBudgetError, NotFoundError, UnsafePathError, ValidationError
from ..vault import Agent, Note, parse_model_md, parse_tools_md
from ..vault._watch import MAX_FOLDERS, changed
from ._tokens import count_tokens, tokenizer_name

if TYPE_CHECKING:
    from ..atp import Identity
    from ..memory import MemoryStore

__all__ = ["Context", "ContextPart", "DroppedPart", "context"]

#: ATP's relevance floor (the memory store's RELEVANCE_FLOOR; kept here so a query-less context loads no numpy).
RELEVANCE_FLOOR = 0.45
PERSONA_FILES = ("IDENTITY.md", "SOUL.md", "USER.md")
_SEP = "\n\n"
_DIGITS = re.compile(r"(\d+)")

# priority: lower number = dropped later; required parts are never dropped
_PRI = {"persona": 0, "tools": 0, "pinned": 0, "goal_record": 1, "index": 2, "sub_index": 3, "goal_memory": 4, "recalled": 5}


@dataclass
class ContextPart:
    """One part of the context: what kind, from where, how big, and why it is in."""

    kind: str  # persona | tools | pinned | index | sub_index | recalled | goal_record | goal_memory
    source: str  # a path relative to the agent folder, or ``atp:<record id>`` / ``memory:<id>``
    text: str
    reason: str
    score: float | None = None
    order: int = 0  # position among parts of its kind (drop order within a kind)

    @cached_property
    def tokens(self) -> int:
        """Its count as printed, with the blank line after it; on first use (a part never weighed is never counted).

        The printed prompt is every part followed by a blank line, so its count is the sum of
        these (see :func:`_count`).
        """
        return count_tokens(self.text + _SEP)

    @property
    def required(self) -> bool:
        return _PRI[self.kind] == 0

    def to_dict(self, *, with_text: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "source": self.source, "tokens": self.tokens, "reason": self.reason}
        if self.score is not None:
            out["score"] = round(self.score, 4)
        if with_text:
            out["text"] = self.text
        return out


@dataclass(frozen=True)
class DroppedPart:
    """A part left out, and why. ``tokens`` is ``None`` for one never weighed (a higher-priority part did not fit)."""

    kind: str
    source: str
    tokens: int | None
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "source": self.source, "tokens": self.tokens, "reason": self.reason}


@dataclass(frozen=True)
class Context:
    """An assembled context: :attr:`text` is the system prompt (``tokens`` <= ``budget``)."""

    agent: str
    budget: int
    budget_source: str
    parts: list[ContextPart]
    dropped: list[DroppedPart] = field(default_factory=list)
    tokenizer: str = field(default_factory=tokenizer_name)

    @property
    def text(self) -> str:
        return _joined(self.parts)

    @cached_property
    def tokens(self) -> int:
        """The count of :attr:`text` as printed (the sum of the parts' counts): never above the budget."""
        return _count(self.parts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "agent": self.agent, "budget": self.budget, "budget_source": self.budget_source, "tokens": self.tokens,
            "tokenizer": self.tokenizer, "parts": [p.to_dict() for p in self.parts],
            "dropped": [d.to_dict() for d in self.dropped], "text": self.text,
        }  # fmt: skip

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=2) + "\n"

    def summary(self) -> list[str]:
        """What went in and what was dropped, one line each (the CLI prints it on stderr)."""
        lines = [f"context for {self.agent}: {self.tokens}/{self.budget} tokens (budget from {self.budget_source}; "
                 f"{len(self.parts)} parts; tokenizer: {self.tokenizer})"]
        lines += [f"dropped {d.kind} {d.source}" + (f" ({d.tokens} tokens)" if d.tokens is not None else "")
                  + f": {d.reason}" for d in self.dropped]
        return lines


def _joined(parts: list[ContextPart]) -> str:
    """The prompt: each part followed by a blank line."""
    return "".join(p.text + _SEP for p in parts)


def _count(parts: list[ContextPart]) -> int:
    """Tokens of ``_joined(parts)``, from the parts' own counts.

    A part is stripped, so it starts and ends with a non-space character. A BPE
    of the GPT family splits its input into pieces by a regex before merging,
    and the only piece that can reach across the blank line after a part is a
    run of punctuation at its end, which takes in the newlines and then any
    ``/`` that follows (``[\\r\\n/]*`` in the o200k/cl100k patterns): so unless
    the next part starts with ``/``, the count of the joined text is exactly the
    sum of each part's count with its blank line (a test checks this on random
    text). WordPiece makes no token of whitespace at all. A part starting with
    ``/`` (rare: parts are persona, headings, INDEX files) makes the text be
    counted whole.
    """
    if any(p.text.startswith("/") for p in parts[1:]):
        return count_tokens(_joined(parts))
    return sum(p.tokens for p in parts)


def _read(agent: Agent, path: Path) -> str | None:
    """A file of the agent's folder as text (universal newlines), ``None`` if absent; never from outside the root."""
    if not path.is_file():
        return None
    resolve_inside(agent.agents_root, path, what="this file")
    return read_text(path, universal_newlines=True).strip()


def _part(kind: str, source: str, text: str, reason: str, *, score: float | None = None, order: int = 0) -> ContextPart:
    return ContextPart(kind, source, text, reason, score, order)


def _note_text(note: Note, heading: str) -> str:
    desc = note.description.strip()
    body = note.body.strip()
    return "\n\n".join(x for x in (heading, desc, body) if x)


def _rel(agent: Agent, note: Note) -> str:
    """``memory/<file>`` as text: a file name that is not UTF-8 (held with surrogate escapes) shows its bytes as ``\\xff``."""
    rel = f"{agent.folder(note.unit_type).name}/{note.filename}"
    return rel.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _budget(agent: Agent, budget: int | None) -> tuple[int, str]:
    if budget is not None:
        if isinstance(budget, bool) or not isinstance(budget, int) or budget <= 0:
            raise ValidationError("the budget must be a positive number of tokens", field="budget", rule="positive")
        return budget, "--budget"
    path = agent.path / "model.md"
    text = _read(agent, path)
    cfg = parse_model_md(text or "", path=path)
    if cfg.max_system_prompt_tokens is None or cfg.max_system_prompt_tokens <= 0:
        raise ValidationError(
            "no token budget: set '- Max system prompt: N tokens' under '## Token budget' in model.md, or pass --budget",
            path=path, field="Max system prompt", rule="budget",
        )
    return cfg.max_system_prompt_tokens, "model.md"


def _always(agent: Agent) -> list[ContextPart]:
    parts: list[ContextPart] = []
    for name in PERSONA_FILES:
        text = _read(agent, agent.persona_dir / name)
        if text:
            parts.append(_part("persona", f"persona/{name}", text, "persona: always loaded"))
    tools_path = agent.path / "tools.md"
    tools_text = _read(agent, tools_path)
    if tools_text is not None:
        cfg = parse_tools_md(tools_text, agent_name=agent.name, path=tools_path)
        if cfg.hard_nos or cfg.write_paths:
            lines = ["## Tools: hard NOs and write paths"]
            if cfg.hard_nos:
                lines += ["", "Hard NOs:", *(f"- {x}" for x in cfg.hard_nos)]
            if cfg.write_paths:
                lines += ["", "Write paths (own folder only):", *(f"- {x}" for x in cfg.write_paths)]
            parts.append(_part("tools", "tools.md", "\n".join(lines), "tools.md hard NOs and write paths: always loaded"))
    for unit_type in ("memory", "wiki"):
        for i, note in enumerate(agent.pinned_notes(unit_type)):
            rel = _rel(agent, note)
            parts.append(_part("pinned", rel, _note_text(note, f"## Pinned: {note.name} ({rel})"), "pinned: always loaded", order=i))
    return parts


def _index_parts(agent: Agent) -> list[ContextPart]:
    parts: list[ContextPart] = []
    main = _read(agent, agent.memory_dir / "INDEX.md")
    if main:
        parts.append(_part("index", "memory/INDEX.md", main, "INDEX: the agent's map of its memory"))
    names = _sub_index_names(str(agent.memory_dir))
    if not names:
        return parts
    dfd = open_dir(agent.agents_root, agent.memory_dir)  # the folder checked once: inside the root
    try:
        for i, name in enumerate(names):
            text = _read_sub(agent, dfd, name)
            if text:
                parts.append(_part("sub_index", f"memory/{name}", text, "sub-index pointed to by INDEX.md", order=i))
    finally:
        os.close(dfd)
    return parts


_sub_names: dict[str, list[str]] = {}  # memory folder -> its sub-index names, while the folder is watched
_sub_lock = threading.Lock()


def _reset_after_fork() -> None:
    """A child starts afresh: the lock may be held by a thread that is not in the child (it would never be released)."""
    global _sub_lock
    _sub_lock = threading.Lock()
    _sub_names.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


def _sub_index_names(folder: str) -> list[str]:
    """``INDEX_*.md`` in ``folder``, in the order INDEX.md lists them (INDEX_x_2.md before INDEX_x_10.md).

    Listed again only when the folder's watch (:mod:`atomic_agents.vault._watch`) cannot
    vouch for the last listing or saw a name of that shape come or go.
    """
    with _sub_lock:  # one look at a time: two threads must not split the folder's events between them
        news = changed(folder, "sub-index names")
        known = _sub_names.pop(folder, None)
        if news is None or known is None or any(n.startswith("INDEX_") for n in news):
            try:  # names in C (a pathlib glob matches 10,000 note names in Python)
                known = sorted((n for n in os.listdir(folder) if n.startswith("INDEX_") and n.endswith(".md")),
                               key=_natural)
            except (FileNotFoundError, NotADirectoryError):  # no folder: no sub-index (the notes' listing says why)
                known = []
        _sub_names[folder] = known
        while len(_sub_names) > MAX_FOLDERS:
            del _sub_names[next(iter(_sub_names))]
        return list(known)


def _natural(name: str) -> list[Any]:
    return [int(t) if i % 2 else t for i, t in enumerate(_DIGITS.split(name))]  # odd: the digit runs


def _read_sub(agent: Agent, dfd: int, name: str) -> str | None:
    """A sub-index read relative to the checked folder; a symlinked one is resolved and checked as any file."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0), dir_fd=dfd)  # a FIFO never blocks
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.EISDIR):
            raise
        return _read(agent, agent.memory_dir / name)  # a symlink (checked there) or a folder (None)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None  # a folder or a device named like a sub-index: not one
    with os.fdopen(fd, "rb") as fh:
        data = fh.read()
    text = decode(data, path=agent.memory_dir / name)
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text.strip()


def _recalled(agent: Agent, store: MemoryStore, query: str, limit: int, skip: set[str], today: dt.date) -> list[ContextPart]:
    from ._mirror import search

    parts: list[ContextPart] = []
    for hit in search(agent, store, query, limit=limit + len(skip), today=today):
        if hit.score < RELEVANCE_FLOOR or hit.path in skip or len(parts) >= limit:
            continue
        unit_type, _, filename = hit.path.partition("/")
        try:
            note = agent.load(filename, "wiki" if unit_type == "wiki" else "memory")  # the file, not the mirror, is the truth
        except (NotFoundError, UnsafePathError, ValidationError):
            continue  # mirror lags the files (lint says so); never text that is no longer a note
        heading = f"## Recalled ({hit.score:.2f}): {note.name} ({hit.path})"
        parts.append(_part("recalled", hit.path, _note_text(note, heading),
                           f"recalled for the query, score {hit.score:.4f} >= {RELEVANCE_FLOOR}", score=hit.score,
                           order=len(parts)))
    return parts


def _goal_records(store: MemoryStore, identity: Identity, goal: str, records: int) -> tuple[list[ContextPart], list[Any]]:
    """The goal's latest ``records`` ATP records as parts, and the whole chain (oldest first)."""
    from ..atp import Ledger

    chain = Ledger(store, identity).records(goal)
    if not chain:
        raise NotFoundError(f"no records of goal {goal!r} in {identity.org_id}/{identity.workspace_id}", record=goal)
    latest = chain[-records:]
    parts = [
        _part("goal_record", f"atp:{r.id}", f"## Goal {goal}: {r.kind} ({r.stage}, {r.owner_role})\n\n{r.content.strip()}",
              f"goal {goal}: one of its {len(latest)} latest records", order=i)
        for i, r in enumerate(latest)
    ]
    return parts, chain


def _goal_text(chain: list[Any]) -> str:
    """What the goal asks for, in words: its goal record's ``request``.

    Not the record's whole text: its header (goal id, record id, stage, labels) is a weak
    keyword match for every record of the workspace and drowns the request's own words.
    A chain without a readable request (a hand-made record) falls back to its first record's text.
    """
    from ..atp import Kind

    for r in chain:
        request = r.metadata.get("request") if r.kind == Kind.GOAL else None
        if isinstance(request, str) and request.strip():
            return request
    return str(chain[0].content)


def _goal_memories(store: MemoryStore, identity: Identity, goal: str, chain: list[Any], query: str | None,
                   limit: int) -> list[ContextPart]:
    ids = {r.id for r in chain}
    q = (query or _goal_text(chain)).strip()[:2000]
    # hybrid recall in the ledger's own scope, at the same floor as the notes (ATP: relevant at >= 0.45)
    hits = store.search_hybrid(q, identity.scope, None, min(limit + len(ids), 1000)) if q else []
    parts: list[ContextPart] = []
    for h in hits:
        if h.id in ids or h.memory.metadata.get("source") == "vault" or h.score < RELEVANCE_FLOOR or len(parts) >= limit:
            continue  # the goal's own records are in already; vault notes come as recalled notes
        parts.append(_part("goal_memory", f"memory:{h.id}", f"## Recalled for goal {goal} ({h.score:.2f})\n\n"
                           f"{h.memory.content.strip()}", f"recalled for goal {goal}, score {h.score:.4f} >= {RELEVANCE_FLOOR}",
                           score=h.score, order=len(parts)))
    return parts


def _drop_key(p: ContextPart) -> tuple[int, float, int]:
    """Sort key: the first part to drop sorts first (lowest priority; then lowest score, latest)."""
    score = p.score if p.score is not None else 0.0
    if p.kind == "goal_record":
        return (-_PRI[p.kind], 0.0, p.order)  # oldest of the latest first
    return (-_PRI[p.kind], score, -p.order)


def context(
    agent: Agent,
    store: MemoryStore | None = None,
    *,
    query: str | None = None,
    goal: str | None = None,
    budget: int | None = None,
    identity: Identity | None = None,
    limit: int = 8,
    goal_records: int = 5,
    today: dt.date | None = None,
) -> Context:
    """Assemble the agent's system prompt; ``store`` is needed for ``query`` and ``goal``.

    >>> ctx = context(Vault("agents").agent("finance"), store, query="debt order")  # doctest: +SKIP
    >>> ctx.tokens <= ctx.budget                                                     # doctest: +SKIP
    True
    """
    agent.require()
    today = today or dt.date.today()
    if (query or goal) and store is None:
        raise ValidationError("a query or a goal needs a memory store", field="store", rule="required")
    if goal and identity is None:
        raise ValidationError("a goal needs the ATP identity (org and workspace) its records are under",
                              field="identity", rule="required")
    cap, source = _budget(agent, budget)
    required = _always(agent)
    need = _count(required)  # the parts as printed, with the blank lines between them
    if need > cap:
        raise ContextBudgetError(
            f"the always-loaded parts need {need} tokens as printed (with the blank lines between them), over the "
            f"budget of {cap} ({source}); each part: "
            + ", ".join(f"{p.source} {p.tokens}" for p in required)
            + "; raise 'Max system prompt' in model.md, pass a larger --budget, or unpin notes",
            budget=cap, parts={p.source: p.tokens for p in required},
        )
    # Parts are made in priority order, and a store search only runs when its results could
    # still fit: once a higher-priority part does not fit, everything below it is dropped anyway.
    walk = _Walk(required, need, cap)
    chain: list[Any] = []
    if goal and store is not None and identity is not None:
        records, chain = _goal_records(store, identity, goal, goal_records)
        walk.add(records)
    walk.add(_index_parts(agent))
    if goal and store is not None and identity is not None:
        if walk.full:
            walk.unsearched("goal_memory", f"goal:{goal}", "memories recalled for the goal")
        else:
            walk.add(_goal_memories(store, identity, goal, chain, query, limit))
    if query and store is not None:
        if walk.full:
            walk.unsearched("recalled", "query", "notes recalled for the query")  # the query is not echoed
        else:
            walk.add(_recalled(agent, store, query, limit, {p.source for p in required if p.kind == "pinned"}, today))
    kept, dropped = walk.finish()
    return Context(agent.name, cap, source, kept, dropped)


#: where each kind of optional part is printed (after the required ones), then by its order
_PRINT = {"index": 0, "sub_index": 1, "recalled": 2, "goal_record": 3, "goal_memory": 4}


class _Walk:
    """The drop walk: keep the longest highest-priority run of parts that fits the budget.

    Dropping the lowest-priority part until the rest fits keeps the longest
    highest-priority run that fits: so walk from the top and stop at the first
    part that does not fit. Parts are added in priority order (each
    :meth:`add` below the ones before). Each step adds the part's count as
    printed (exact: see :func:`_count`); when the sum passes the budget the
    parts are counted by :func:`_count` to decide. :meth:`finish` checks the
    result the same way and drops the lowest kept part while it is over (only
    possible when a part starts with ``/`` and the text is counted whole): the
    printed prompt never exceeds the budget.
    """

    def __init__(self, required: list[ContextPart], need: int, cap: int) -> None:
        self.required, self.cap, self.total = required, cap, need
        self.ranked: list[ContextPart] = []  # every optional part, highest priority first
        self.chosen = 0  # ranked[:chosen] fit
        self.with_boundary: int | None = None  # tokens with ranked[chosen] in, once it did not fit
        self.skipped: list[DroppedPart] = []

    @property
    def full(self) -> bool:
        return self.with_boundary is not None

    def _printed(self, n: int) -> int:
        return _count(self.required + sorted(self.ranked[:n], key=lambda p: (_PRINT[p.kind], p.order)))

    def add(self, parts: list[ContextPart]) -> None:
        self.ranked.extend(sorted(parts, key=_drop_key, reverse=True))
        while not self.full and self.chosen < len(self.ranked):
            p = self.ranked[self.chosen]
            bound = self.total + p.tokens
            if bound > self.cap:
                exact = self._printed(self.chosen + 1)
                if exact > self.cap:
                    self.with_boundary = exact
                    break
                bound = exact
            self.total = bound
            self.chosen += 1

    def unsearched(self, kind: str, source: str, what: str) -> None:
        boundary = self.ranked[self.chosen]
        self.skipped.append(DroppedPart(kind, source, None, f"not searched: {what} rank below {boundary.kind} "
                                        f"{boundary.source}, which does not fit"))

    def finish(self) -> tuple[list[ContextPart], list[DroppedPart]]:
        while self.chosen and (exact := self._printed(self.chosen)) > self.cap:
            self.chosen -= 1
            self.with_boundary = exact
        dropped = list(reversed(self.skipped))  # the lowest first, the order they go in
        if self.with_boundary is not None:
            boundary = self.ranked[self.chosen]
            for p in reversed(self.ranked[self.chosen + 1:]):
                dropped.append(DroppedPart(p.kind, p.source, None, f"lower priority than {boundary.kind} {boundary.source}, "
                                           f"which does not fit; {p.kind} parts go before higher-priority ones"))
            dropped.append(DroppedPart(boundary.kind, boundary.source, boundary.tokens,
                                       f"over budget: with it the context is {self.with_boundary} tokens > {self.cap}; "
                                       f"{boundary.kind} parts go before higher-priority ones"))
        kept = sorted(self.ranked[:self.chosen], key=lambda p: (_PRINT[p.kind], p.order))
        return self.required + kept, dropped
