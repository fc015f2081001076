"""Who is writing: org, workspace, agent and user, resolved as ATP's scripts do.

Order (notes, "Identity resolution"): ``.claude/agentic-team-config.yaml`` in the
project (``org_id``/``workspace_id``, used only if both are set); else the
environment (``EDEN_ORG_ID``, ``EDEN_WORKSPACE_ID``, ``EDEN_AGENT_ID``); else the
project's ``.env``; else ``~/.eden-memory/.env``. The agent id defaults to
``claude-code-cli``, the user id to the OS user. Unlike the memory commands, the
ledger never falls back to a ``"default"`` org: records written to the wrong
workspace are records the team cannot find.

Nothing here changes ``os.environ``.
"""

from __future__ import annotations

import getpass
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..exceptions import ValidationError
from ..memory import Scope, ScopeFilter

__all__ = ["CONFIG_PATH", "Identity", "load_team_config", "resolve_identity"]

CONFIG_PATH = Path(".claude") / "agentic-team-config.yaml"
DEFAULT_AGENT_ID = "claude-code-cli"
_MAX_CONFIG_BYTES = 256_000


@dataclass(frozen=True)
class Identity:
    """The scope records are written under; a goal is read across ``org_id``/``workspace_id``."""

    org_id: str
    workspace_id: str
    agent_id: str = DEFAULT_AGENT_ID
    user_id: str = "atp"
    source: str = "explicit"

    @property
    def scope(self) -> Scope:
        return Scope(self.agent_id, self.user_id, self.org_id, self.workspace_id)

    @property
    def workspace(self) -> ScopeFilter:
        return ScopeFilter(org_id=self.org_id, workspace_id=self.workspace_id)

    def with_agent(self, agent_id: str) -> Identity:
        return Identity(self.org_id, self.workspace_id, agent_id, self.user_id, self.source)


def load_team_config(project_dir: Path) -> dict[str, Any]:
    """The project's ``.claude/agentic-team-config.yaml`` as a mapping ({} if absent).

    YAML anchors/aliases are refused (an alias bomb must not hang a command).
    """
    path = project_dir / CONFIG_PATH
    if not path.is_file():
        return {}
    import yaml

    try:
        raw = path.read_bytes()[: _MAX_CONFIG_BYTES + 1]
        if len(raw) > _MAX_CONFIG_BYTES:
            raise ValidationError("the team config is larger than 256 kB", path=path, rule="size")
        text = raw.decode("utf-8")
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        if any(isinstance(ev, yaml.AliasEvent) for ev in yaml.parse(text, Loader=loader)):
            raise ValidationError("YAML aliases are not allowed in the team config", path=path, rule="yaml")
        data = yaml.load(text, Loader=loader)
    except UnicodeDecodeError as exc:
        raise ValidationError(f"not UTF-8 (byte {exc.start})", path=path, rule="encoding") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ValidationError(f"YAML does not parse{where}", path=path, rule="yaml") from None
    except OSError as exc:
        raise ValidationError(f"cannot read: {exc.strerror}", path=path, rule="io") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ValidationError("must be a YAML mapping", path=path, rule="yaml")
    return data


def _dotenv(path: Path) -> Mapping[str, str]:
    if not path.is_file():
        return {}
    from dotenv import dotenv_values  # parses only; never touches os.environ

    try:
        return {k: v for k, v in dotenv_values(path, encoding="utf-8").items() if v}
    except (OSError, UnicodeDecodeError):
        raise ValidationError("cannot read as a UTF-8 .env file", path=path, rule="encoding") from None


def _scalar(value: object, key: str, project: Path) -> str | None:
    """A config id as text: YAML reads ``org_id: 5`` as a number, which is still an id."""
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValidationError(f"{key} must be a string", path=project / CONFIG_PATH, field=key, rule="identity")
    return str(value)


def _os_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "atp"


def resolve_identity(
    project_dir: str | os.PathLike[str] | None = None,
    *,
    org_id: str | None = None,
    workspace_id: str | None = None,
    agent_id: str | None = None,
    user_id: str | None = None,
    environ: Mapping[str, str] | None = None,
    home: str | os.PathLike[str] | None = None,
) -> Identity:
    """Resolve the identity; explicit arguments win over every source.

    >>> resolve_identity(org_id="acme", workspace_id="acme/web", environ={}, home="/nonexistent").agent_id
    'claude-code-cli'
    """
    project = Path(project_dir) if project_dir is not None else Path.cwd()
    env = os.environ if environ is None else environ
    home_dir = Path(home) if home is not None else Path.home()
    cfg = load_team_config(project)
    sources: list[tuple[str, Mapping[str, Any]]] = []
    org_cfg, ws_cfg = (_scalar(cfg.get(k), k, project) for k in ("org_id", "workspace_id"))
    if org_cfg and ws_cfg:
        sources.append((str(project / CONFIG_PATH), {"EDEN_ORG_ID": org_cfg, "EDEN_WORKSPACE_ID": ws_cfg}))
    sources.append(("environment", env))
    sources.append((str(project / ".env"), _dotenv(project / ".env")))
    sources.append((str(home_dir / ".eden-memory" / ".env"), _dotenv(home_dir / ".eden-memory" / ".env")))

    def pick(explicit: str | None, key: str) -> tuple[str | None, str]:
        if explicit:
            return explicit, "explicit"
        for name, src in sources:
            value = src.get(key)
            if isinstance(value, str) and value.strip():
                return value.strip(), name
        return None, ""

    org, org_src = pick(org_id, "EDEN_ORG_ID")
    ws, _ = pick(workspace_id, "EDEN_WORKSPACE_ID")
    agent, _ = pick(agent_id, "EDEN_AGENT_ID")
    missing = [n for n, v in (("EDEN_ORG_ID", org), ("EDEN_WORKSPACE_ID", ws)) if not v]
    if missing:
        raise ValidationError(
            f"no {' or '.join(missing)}: set org_id and workspace_id in {CONFIG_PATH}, "
            "or export EDEN_ORG_ID and EDEN_WORKSPACE_ID (or put them in .env or ~/.eden-memory/.env)",
            field=missing[0].lower().removeprefix("eden_"),
            rule="identity",
        )
    assert org is not None and ws is not None
    ident = Identity(org, ws, agent or DEFAULT_AGENT_ID, user_id or _os_user(), org_src)
    ident.scope  # noqa: B018  (validates the ids: non-empty, no NUL, not too long)
    return ident
