"""The vault root: many agents side by side, and the operations that span files."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..exceptions import NotFoundError, UnsafePathError
from ._agent import Agent, WriteHook
from ._names import SNAKE
from ._units import Note, NoteDraft
from .._format._validate import Issue

if TYPE_CHECKING:
    from ._lint import LintReport

# The journal, lint and persona modules load in the methods that use them: `vault list` needs none.

__all__ = ["Vault", "promote_journal_item"]

ENV_ROOT = "ATOMIC_AGENTS_ROOT"


class Vault:
    """A vault root (``--agents-root`` / ``ATOMIC_AGENTS_ROOT``) holding agent folders.

    >>> vault = Vault("agents")  # doctest: +SKIP
    >>> agent, created = vault.init_agent("finance", title="Finance Coach")  # doctest: +SKIP
    """

    def __init__(self, root: str | os.PathLike[str] | None = None, *, write_hooks: Iterable[WriteHook] = ()) -> None:
        self.root = Path(root if root is not None else os.environ.get(ENV_ROOT, "agents"))
        #: Given to every agent this vault hands out (e.g. the memory bridge's mirror).
        self.write_hooks: list[WriteHook] = list(write_hooks)

    def agent(self, name: str) -> Agent:
        return Agent(self.root, name, write_hooks=self.write_hooks)

    def agents(self) -> list[str]:
        """Agent folders: lowercase snake_case directories not starting with ``_`` or ``.``.

        A root that does not exist (a typo in ``--agents-root``) is a NotFoundError, not an empty vault.
        """
        if not self.root.is_dir():
            what = "is not a folder" if self.root.exists() else "does not exist"
            raise NotFoundError(f"vault root {self.root} {what}", path=self.root)
        return sorted(p.name for p in self.root.iterdir() if p.is_dir() and SNAKE.match(p.name))

    def init_agent(self, name: str, *, title: str | None = None) -> tuple[Agent, list[str]]:
        """Scaffold an agent (idempotent: existing files are kept)."""
        from ._persona import scaffold

        agent = self.agent(name)
        self.root.mkdir(parents=True, exist_ok=True)
        return agent, scaffold(agent, title=title)

    def _targets(self, name: str | None) -> list[Agent]:
        if name is not None:
            agent = self.agent(name)
            agent.require()
            return [agent]
        if not self.root.is_dir():
            raise NotFoundError(f"vault root {self.root} does not exist", path=self.root)
        return [self.agent(n) for n in self.agents()]

    def validate(self, name: str | None = None) -> list[Issue]:
        """Errors only, over one agent or all (an agent folder leading out of the root is one, by name)."""
        out: list[Issue] = []
        for a in self._targets(name):
            try:
                out.extend(a.validate())
            except UnsafePathError as exc:
                out.append(_unsafe_issue(exc))
        return out

    def lint(self, name: str | None = None, *, today: dt.date | None = None, stale_days: int = 90,
             store: Any = None) -> list[LintReport]:
        """Lint one agent or all; ``store`` (a memory store) adds the mirror check (see :func:`lint_agent`)."""
        from ._lint import LintReport, lint_agent

        reports = []
        for a in self._targets(name):
            try:
                reports.append(lint_agent(a, today=today, stale_days=stale_days, store=store))
            except UnsafePathError as exc:
                reports.append(LintReport(a.name, [_unsafe_issue(exc)]))
        return reports


def _unsafe_issue(exc: UnsafePathError) -> Issue:
    return Issue(exc.path, None, exc.rule or "symlink", exc.message)


def promote_journal_item(
    agent: Agent,
    day: dt.date,
    item: int | str,
    *,
    type: str,
    topic: str,
    name: str | None = None,
    description: str | None = None,
    confidence: str = "medium",
    period: str | None = None,
    tags: list[str] | None = None,
) -> Note:
    """Turn a journal item into a note whose ``sources`` points at the journal file.

    The day's "Captured to memory" section then links the new note.
    """
    from ._journal import journal_path, link_capture, pick_item

    chosen = pick_item(agent, day, item)
    text = chosen.text
    source = str(journal_path(agent, day).relative_to(agent.path))
    draft = NoteDraft(
        type=type,
        topic=topic,
        name=name or _clip(text, 80),
        description=description or _clip(text, 150),
        sources=[source],
        confidence=confidence,
        body=f"{text}\n\nPromoted from {source} ({chosen.section}).\n",
        period=period,
        captured=day,
        tags=tags or [],
    )
    note = agent.new_note(draft)
    link_capture(agent, day, note.filename, note.name)
    return note


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
