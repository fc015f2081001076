"""Atomic Agent vaults: typed notes and wiki pages on disk, validated and atomic.

>>> from atomic_agents.vault import Vault, NoteDraft
>>> vault = Vault("agents")                                   # doctest: +SKIP
>>> agent, _ = vault.init_agent("finance")                    # doctest: +SKIP
>>> agent.new_note(NoteDraft(type="feedback", topic="debt_order", name="Debt order",
...     description="Avalanche first", sources=["conversation_2026-05-06"],
...     confidence="high"))                                   # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._agent import Agent, WriteHook
from .._format._frontmatter import Document, parse, read, render
from .._format._vocab import CONFIDENCE_LEVELS, NOTE_TYPES
from ._units import Note, NoteDraft, WikiDraft
from .._format._validate import Issue, validate_note_meta, validate_wiki_meta
from ._vault import Vault, promote_journal_item

if TYPE_CHECKING:
    from .._format._models import NoteMeta, WikiMeta
    from ._index import Entry, Index, parse_entry
    from ._journal import JournalItem, append_journal, journal_items, journal_path
    from ._lint import LintReport, lint_agent
    from ._log import LogQueryResult, append_log, query_logs
    from ._log_entry import LogEntry
    from ._persona import ModelConfig, ToolsConfig, parse_model_md, parse_tools_md, scaffold

#: Names whose module loads when first asked for (PEP 562): `vault list` and `vault show` need none of them.
_LAZY = {
    "Entry": "._index", "Index": "._index", "parse_entry": "._index",
    "JournalItem": "._journal", "append_journal": "._journal", "journal_items": "._journal", "journal_path": "._journal",
    "LintReport": "._lint", "lint_agent": "._lint",
    "LogQueryResult": "._log", "append_log": "._log", "query_logs": "._log",
    "LogEntry": "._log_entry",
    "ModelConfig": "._persona", "ToolsConfig": "._persona", "parse_model_md": "._persona",
    "parse_tools_md": "._persona", "scaffold": "._persona",
    "NoteMeta": ".._format._models", "WikiMeta": ".._format._models",
}

__all__ = [
    "Agent",
    "CONFIDENCE_LEVELS",
    "Document",
    "Entry",
    "Index",
    "Issue",
    "JournalItem",
    "LintReport",
    "LogEntry",
    "LogQueryResult",
    "ModelConfig",
    "NOTE_TYPES",
    "Note",
    "NoteDraft",
    "NoteMeta",
    "ToolsConfig",
    "Vault",
    "WikiDraft",
    "WikiMeta",
    "WriteHook",
    "append_journal",
    "append_log",
    "journal_items",
    "journal_path",
    "lint_agent",
    "parse",
    "parse_entry",
    "parse_model_md",
    "parse_tools_md",
    "promote_journal_item",
    "query_logs",
    "read",
    "render",
    "scaffold",
    "validate_note_meta",
    "validate_wiki_meta",
]


def __getattr__(name: str) -> object:  # PEP 562: the pydantic models and the modules above load when first asked for
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib  # noqa: PLC0415

    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later reads cost nothing extra
    return value
