"""Persona skeletons (IDENTITY/SOUL/USER), ``tools.md`` and ``model.md``.

Persona files are free-form markdown with conventional sections; the two
operational files parse into typed objects. A ``tools.md`` write path outside
the agent's own folder is a validation error (spec: "Write paths (own folder ONLY)").
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from .._io import atomic_write, make_dirs
from .._text import read_text
from ..exceptions import EncodingError, ValidationError
from .._format._validate import Issue

if TYPE_CHECKING:
    from ._agent import Agent

__all__ = ["ModelConfig", "ToolsConfig", "check_operational_files", "parse_model_md", "parse_tools_md", "scaffold"]

SKELETONS: dict[str, str] = {
    "persona/IDENTITY.md": """# IDENTITY — {title}

## Who I am

## Mission

## Scope

## Operating doctrine

## Autonomy ladder
- Internal:
- External:
- Earned autonomy:

## What I'm NOT
""",
    "persona/SOUL.md": """# SOUL — {title}

## Voice

## Posture

## Evolution discipline

## Things I've learned about how to advise / serve the operator
""",
    "persona/USER.md": """# USER — the operator

## Role and context

## Communication preferences

## Domain-specific preferences

## Things to avoid
""",
    "tools.md": """# TOOLS — {title}

## Read paths
- {name}/

## Write paths (own folder ONLY)
- {name}/memory/
- {name}/wiki/
- {name}/journal/
- {name}/log/

## External APIs

## Hard NOs
- Never write outside {name}/
""",
    "model.md": """# MODEL — {title}

## Default model
(reason for choice)

## Fallback
(when fallback fires)

## Token budget
- Max system prompt: tokens
- Max output per turn: tokens
- Daily token cap:

## Prompt caching

## Cost guardrail
""",
    "memory/INDEX.md": """# {title} — Memory Index

## Critical Feedback

## Locked Decisions

## User Profile

## Active Projects

## Reference

## Recently Promoted to Persona

## Archive (superseded)
""",
    "wiki/INDEX.md": """# {title} — Wiki Index

## Pages

## Archive (superseded)
""",
}
FOLDERS = ("persona", "memory", "wiki", "journal", "log", "raw")


def scaffold(agent: Agent, *, title: str | None = None) -> list[str]:
    """Create the agent's folders and skeleton files; existing files are never overwritten."""
    title = title or agent.name.replace("_", " ").title()
    created: list[str] = []
    root = agent.agents_root
    for folder in FOLDERS:
        make_dirs(agent.path / folder, root=root)  # a symlinked agent or sub-folder leading out is refused
    for rel, template in SKELETONS.items():
        target = agent.path / rel
        if not target.exists():  # a dangling symlink here is refused by atomic_write, never written through
            atomic_write(target, template.format(title=title, name=agent.name), root=root)
            created.append(rel)
    return created


def _sections(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("## "):
            current = out.setdefault(line[3:].strip().lower(), [])
        elif current is not None:
            current.append(line)
    return out


def _bullets(lines: list[str]) -> list[str]:
    items = []
    for line in lines:
        s = line.strip()
        if s.startswith(("- ", "* ")) or s in ("-", "*"):
            item = s[1:].strip()
            if item:
                items.append(item)
    return items


def _section(sections: dict[str, list[str]], prefix: str) -> list[str]:
    for key, lines in sections.items():
        if key.startswith(prefix):
            return lines
    return []


@dataclass(frozen=True)
class ToolsConfig:
    """``tools.md``: what the agent may read, write and call, and what it must never do."""

    read_paths: list[str] = field(default_factory=list)
    write_paths: list[str] = field(default_factory=list)
    external_apis: dict[str, str] = field(default_factory=dict)
    hard_nos: list[str] = field(default_factory=list)


def parse_tools_md(text: str, *, agent_name: str, path: str | Path = "tools.md") -> ToolsConfig:
    """Parse ``tools.md``; a write path outside ``<agent>/`` raises :class:`ValidationError`.

    >>> parse_tools_md("## Write paths (own folder ONLY)\\n- fin/memory/\\n", agent_name="fin").write_paths
    ['fin/memory/']
    """
    secs = _sections(text)
    apis: dict[str, str] = {}
    for item in _bullets(_section(secs, "external api")):
        name, _, desc = item.partition(":")
        if name.strip():
            apis[name.strip().strip("`")] = desc.strip()
    cfg = ToolsConfig(
        read_paths=[p.strip("`") for p in _bullets(_section(secs, "read path"))],
        write_paths=[p.strip("`") for p in _bullets(_section(secs, "write path"))],
        external_apis=apis,
        hard_nos=_bullets(_section(secs, "hard no")),
    )
    for wp in cfg.write_paths:
        if not write_path_inside(wp, agent_name):
            raise ValidationError(
                f"write path {wp!r} is outside the agent's own folder {agent_name}/",
                path=path,
                field="Write paths",
                rule="own-folder-only",
            )
    return cfg


def write_path_inside(raw: str, agent_name: str) -> bool:
    """True if a tools.md write path stays inside the agent's folder.

    Paths are read relative to the vault root (``finance/memory/``); a path
    relative to the agent folder itself (``memory/``) is accepted too.
    Absolute paths, ``~`` and any ``..`` that climbs out are refused.
    """
    p = raw.strip().split()[0] if raw.strip() else raw
    if not p or p.startswith(("/", "~", "\\")) or re.match(r"^[A-Za-z]:", p):
        return False
    parts = [x for x in PurePosixPath(p.replace("\\", "/")).parts if x not in (".", "")]
    if parts and parts[0] == agent_name:
        parts = parts[1:]
    depth = 0
    for part in parts:
        depth += -1 if part == ".." else 1
        if depth < 0:
            return False
    return True


@dataclass(frozen=True)
class ModelConfig:
    """``model.md``: default and fallback model, token budgets, caching, cost guardrail."""

    default_model: str | None = None
    default_reason: str = ""
    fallback_model: str | None = None
    fallback_when: str = ""
    max_system_prompt_tokens: int | None = None
    max_output_tokens: int | None = None
    daily_token_cap: int | None = None
    prompt_caching: bool | None = None
    prompt_caching_notes: str = ""
    cost_guardrail_usd: float | None = None
    cost_guardrail: str = ""


_PLACEHOLDER = re.compile(r"^\(.*\)$")
_NUMBER = re.compile(r"^\s*([\d][\d,_]*(?:\.\d+)?)\s*([kKmM])?\b")


def _first_text(lines: list[str]) -> tuple[str | None, str]:
    content = [l.strip() for l in lines if l.strip() and not _PLACEHOLDER.match(l.strip())]
    if not content:
        return None, ""
    first = content[0].lstrip("-* ").strip()
    model, _, reason = first.partition(" ")
    return model.strip("`") or None, " ".join([reason.strip(" -—()")] + content[1:]).strip()


def _tokens(value: str, *, field: str, path: str | Path) -> int | None:
    v = value.strip()
    if not v or v.lower() in ("tokens", "none", "n/a"):
        return None
    m = _NUMBER.match(v)
    if not m:
        raise ValidationError(f"{v!r} is not a token count", path=path, field=field, rule="token-count")
    n = float(m.group(1).replace(",", "").replace("_", ""))
    n *= {"k": 1_000, "m": 1_000_000}.get((m.group(2) or "").lower(), 1)
    return int(n)


def parse_model_md(text: str, *, path: str | Path = "model.md") -> ModelConfig:
    """Parse ``model.md`` into a :class:`ModelConfig` (skeleton blanks become ``None``)."""
    secs = _sections(text)
    default_model, default_reason = _first_text(_section(secs, "default model"))
    fallback_model, fallback_when = _first_text(_section(secs, "fallback"))
    budget: dict[str, int | None] = {}
    for item in _bullets(_section(secs, "token budget")):
        label, _, value = item.partition(":")
        key = label.strip().lower()
        if key.startswith("max system"):
            budget["max_system_prompt_tokens"] = _tokens(value, field="Max system prompt", path=path)
        elif key.startswith("max output"):
            budget["max_output_tokens"] = _tokens(value, field="Max output per turn", path=path)
        elif key.startswith("daily"):
            budget["daily_token_cap"] = _tokens(value, field="Daily token cap", path=path)
    caching_text = " ".join(l.strip() for l in _section(secs, "prompt caching") if l.strip())
    caching: bool | None = None
    if caching_text:
        low = caching_text.lower()
        caching = not any(w in low for w in ("disabled", "off", "no ", "false", "none"))
        if low.startswith(("no", "off", "disabled", "false")):
            caching = False
    guard_text = " ".join(l.strip() for l in _section(secs, "cost guardrail") if l.strip())
    usd = None
    m = re.search(r"\$\s*([\d][\d,]*(?:\.\d+)?)", guard_text)
    if m:
        usd = float(m.group(1).replace(",", ""))
    return ModelConfig(
        default_model=default_model,
        default_reason=default_reason,
        fallback_model=fallback_model,
        fallback_when=fallback_when,
        prompt_caching=caching,
        prompt_caching_notes=caching_text,
        cost_guardrail_usd=usd,
        cost_guardrail=guard_text,
        **budget,
    )


def check_operational_files(agent: Agent) -> list[Issue]:
    """Lint issues for tools.md and model.md (missing files are hints; bad content errors)."""
    out: list[Issue] = []
    for fname, parser in (("tools.md", "tools"), ("model.md", "model")):
        path = agent.path / fname
        rel = os.path.relpath(path, agent.agents_root)
        if not path.exists():
            out.append(Issue(rel, None, "missing-file", f"{fname} is missing (run: vault init {agent.name})", "hint"))
            continue
        try:
            text = read_text(path, universal_newlines=True)
            if parser == "tools":
                parse_tools_md(text, agent_name=agent.name, path=rel)
            else:
                parse_model_md(text, path=rel)
        except EncodingError as exc:
            out.append(Issue(f"{rel}:{exc.line}", exc.field, exc.rule or "utf-8", exc.message))
        except ValidationError as exc:
            out.append(Issue(rel, exc.field, exc.rule or "invalid", exc.message))
    for p in ("IDENTITY.md", "SOUL.md", "USER.md"):
        if not (agent.persona_dir / p).exists():
            out.append(Issue(os.path.relpath(agent.persona_dir / p, agent.agents_root), None, "missing-file",
                             f"persona/{p} is missing", "hint"))
    return out
