"""The lean way into `atomic-agents serve` (mcp/_entry.py, mcp/_sdk.py): same options and answers as the typer command.

A spawned server must answer ``initialize`` without importing typer, the other
CLI commands, the store, the model or the vault's models; the typer command
stays the definition of the options, their help and the usage errors.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from atomic_agents.mcp import ServerConfig
from atomic_agents.mcp import _entry

from ._client import server_env

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}}  # fmt: skip


def _serve_command() -> Any:
    import typer.main

    from atomic_agents.cli._app import app

    return typer.main.get_command(app).commands["serve"]  # type: ignore[attr-defined]


def test_the_lean_parser_knows_exactly_the_typer_commands_options() -> None:
    cmd = _serve_command()
    typer_opts = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts) if o != "--help"}
    assert typer_opts == set(_entry.OPTIONS)
    flags = {o for p in cmd.params if getattr(p, "is_flag", False) for o in p.opts if o != "--help"}
    assert flags == set(_entry._FLAGS)
    (level,) = [p for p in cmd.params if "--log-level" in p.opts]
    assert level.envvar == _entry.LOG_LEVEL_ENV and level.default == "warning"


def _resolved(kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """What run_server makes of its arguments: the transport choice and the ServerConfig."""
    config = ServerConfig.from_env(db=kwargs["db"], agents_root=kwargs["agents_root"], embedder=kwargs["embedder"],
                                   project=kwargs["project"] or Path("."))  # fmt: skip
    return kwargs["http"], kwargs["allow_remote"], kwargs["log_level"].lower(), config


def _through_typer(args: list[str], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    from atomic_agents.cli._app import app
    from atomic_agents.cli._common import run

    seen: dict[str, Any] = {}
    monkeypatch.setattr(_entry, "run_server", lambda **kw: seen.update(kw))
    with pytest.raises(SystemExit) as done:  # click's standalone mode exits 0 after the command
        run(app, args, prog_name="atomic-agents")
    assert done.value.code in (0, None) and seen, args
    return seen


LINES = [
    ["serve"],
    ["serve", "--agents-root", "agents2", "--db", "x/memory.db", "--embedder", "hashing", "--project", "proj"],
    ["--agents-root", "root-first", "serve"],
    ["--agents-root=root-first", "serve", "--agents-root", "command-wins"],
    ["serve", "--db=postgresql://u@h/db", "--log-level", "DEBUG"],
    ["serve", "--http", "127.0.0.1:8765", "--allow-remote", "--log-level=info"],
    ["serve", "--db", "a.db", "--db", "b.db"],  # the last one wins, as in click
]


@pytest.mark.parametrize("args", LINES, ids=[" ".join(a) for a in LINES])
@pytest.mark.parametrize("env", [{}, {"ATOMIC_AGENTS_ROOT": "env-root", "ATOMIC_AGENTS_DB": "env.db", "ATOMIC_AGENTS_LOG_LEVEL": "error"}])
def test_both_parsers_start_the_same_server(args: list[str], env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    for k in ("ATOMIC_AGENTS_ROOT", "ATOMIC_AGENTS_DB", "EDEN_DB", "ATOMIC_AGENTS_LOG_LEVEL", "ATOMIC_AGENTS_EMBEDDER"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    lean = _entry.parse(args)
    assert lean is not None, args
    assert _resolved(lean) == _resolved(_through_typer(args, monkeypatch))


@pytest.mark.parametrize("args", [
    ["serve", "--help"], ["--help"], ["--version"], ["serve", "--bogus"], ["serve", "--db"], ["serve", "--allow"],
    ["serve", "extra"], ["vault", "list"], ["serve", "--db", "--http"], ["--agents-root", "serve"], ["serve", "--", "x"],
    ["vault", "serve"], ["serve", "--db", "caf\udce9.db"],
])  # fmt: skip
def test_anything_but_a_plain_serve_line_is_left_to_the_typer_cli(args: list[str]) -> None:
    assert _entry.parse(args) is None


def _run(args: list[str], stdin: bytes = b"", **env: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(args, input=stdin, capture_output=True, env=server_env(**env), timeout=120)


def test_help_and_usage_errors_are_the_typer_commands(tmp_path: Path) -> None:
    cli = [sys.executable, "-m", "atomic_agents.cli", "serve"]
    lean = [sys.executable, "-m", "atomic_agents.mcp"]
    helps = [_run([*c, "--help"], COLUMNS="100") for c in (cli, lean)]
    assert helps[0].returncode == helps[1].returncode == 0
    assert helps[0].stdout == helps[1].stdout and b"--allow-remote" in helps[0].stdout and b"--log-level" in helps[0].stdout
    for c in (cli, lean):
        bad = _run([*c, "--no-such-option"])
        assert bad.returncode == 2 and b"No such option" in bad.stderr and b"Traceback" not in bad.stderr


def test_user_mistakes_are_one_line_and_exit_1(tmp_path: Path) -> None:
    for c in ([sys.executable, "-m", "atomic_agents.cli", "serve"], [sys.executable, "-m", "atomic_agents.mcp"]):
        level = _run([*c, "--log-level", "chatty"])
        assert level.returncode == 1 and level.stdout == b""
        assert level.stderr.decode().strip() == "error: log_level: --log-level must be one of debug, info, warning, error, critical [choice]"
        remote = _run([*c, "--http", "10.1.2.3:8765"])
        assert remote.returncode == 1 and b"not a loopback address" in remote.stderr and b"Traceback" not in remote.stderr
    env_level = _run([sys.executable, "-m", "atomic_agents.cli", "serve"], ATOMIC_AGENTS_LOG_LEVEL="chatty")
    assert env_level.returncode == 1 and b"--log-level must be one of" in env_level.stderr


PROBE = """
import json, sys
from atomic_agents.cli import main
try:
    main(["serve", "--agents-root", sys.argv[1]])
finally:
    sys.stderr.write("MODULES " + json.dumps(sorted(sys.modules)) + "\\n")
"""


def test_a_spawned_server_answers_initialize_without_the_cli_the_store_or_the_sdk_client(tmp_path: Path) -> None:
    out = _run([sys.executable, "-c", PROBE, str(tmp_path / "agents")], (json.dumps(INIT) + "\n").encode())
    assert out.returncode == 0, out.stderr[-2000:]
    answer = json.loads(out.stdout.splitlines()[0])
    assert answer["id"] == 1 and answer["result"]["serverInfo"]["name"] == "atomic-agents"
    line = next(ln for ln in out.stderr.decode().splitlines() if ln.startswith("MODULES "))
    modules = set(json.loads(line[len("MODULES "):]))
    assert "mcp.server.lowlevel.server" in modules  # the real SDK served it
    loaded = {m.split(".")[0] for m in modules}
    assert not loaded & {"typer", "numpy", "onnxruntime", "tokenizers", "yaml", "psycopg"}
    never = ("atomic_agents.cli._app", "atomic_agents.cli._common", "atomic_agents.memory", "atomic_agents.vault",
             "atomic_agents.atp", "atomic_agents.bridge", "mcp.client", "mcp.server.mcpserver")  # fmt: skip
    assert not {m for m in modules if m.startswith(never)}


def test_the_skipped_sdk_packages_complete_themselves_on_first_use() -> None:
    code = """
import sys
from atomic_agents.mcp._sdk import import_server_modules
assert import_server_modules() is True
assert "mcp.client" not in sys.modules and "mcp.server.mcpserver" not in sys.modules
from mcp.server.lowlevel import Server
from mcp import ClientSession, StdioServerParameters
import mcp, mcp.server
assert mcp.server.MCPServer.__name__ == "MCPServer" and mcp.types.Tool.__name__ == "Tool"
assert "mcp.client" in sys.modules
assert import_server_modules() is False  # already imported: nothing to skip
print("ok")
"""
    out = _run([sys.executable, "-c", code])
    assert out.returncode == 0 and out.stdout.strip() == b"ok", out.stderr[-2000:]


def test_python_m_atomic_agents_mcp_serves(tmp_path: Path) -> None:
    root = tmp_path / "agents"
    out = _run([sys.executable, "-m", "atomic_agents.mcp", "--agents-root", str(root)], (json.dumps(INIT) + "\n").encode())
    assert out.returncode == 0 and json.loads(out.stdout.splitlines()[0])["result"]["serverInfo"]["name"] == "atomic-agents"
    assert not root.exists()  # initialize opens nothing: the store and the vault wait for a tool call


def test_an_sdk_layout_the_lean_import_does_not_know_falls_back_to_the_ordinary_import() -> None:
    code = """
import sys, types
from atomic_agents.mcp import _sdk
_sdk._deferred = lambda name: types.ModuleType(name)  # a 'package' without a path: its submodules cannot load
assert _sdk.import_server_modules() is False
from mcp.server.lowlevel import Server
from mcp import ClientSession
assert "mcp.client" in sys.modules and hasattr(sys.modules["mcp"], "__path__")
print("ok")
"""
    out = _run([sys.executable, "-c", code])
    assert out.returncode == 0 and out.stdout.strip() == b"ok", out.stderr[-2000:]
