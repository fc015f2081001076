"""Cold start: what each command imports, observed in a fresh process's ``sys.modules`` (no timing).

``--help``, the vault commands that do not embed, and the memory commands that do
not embed (keyword search, list, get, forget, ...) must not import numpy,
onnxruntime or the tokenizer; ``import atomic_agents.memory`` must not import the
vault. A command that embeds is the positive control: the probe does see numpy.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
MODEL = ("numpy", "onnxruntime", "tokenizers")

PROBE = """
import json, os, sys
args = json.loads(os.environ["PROBE_ARGS"])
code = 0
if args is None:
    import atomic_agents.memory
else:
    from atomic_agents.cli import main
    try:
        main(args)
    except SystemExit as exc:
        code = exc.code or 0
with open(os.environ["PROBE_OUT"], "w") as fh:
    json.dump({"code": code, "modules": sorted(sys.modules)}, fh)
"""


def probe(tmp_path: Path, args: list[str] | None, **env: str) -> tuple[int, set[str]]:
    out = tmp_path / "probe.json"
    full_env = {**os.environ, "PYTHONPATH": str(SRC), "PROBE_ARGS": json.dumps(args), "PROBE_OUT": str(out), **env}
    full_env.pop("ATOMIC_AGENTS_DB", None)
    subprocess.run([sys.executable, "-c", PROBE], env=full_env, cwd=tmp_path, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=False, timeout=120)
    data = json.loads(out.read_text())
    return data["code"], set(data["modules"])


@pytest.fixture(scope="module")
def vault_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("lazy") / "agents"
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    run = [sys.executable, "-m", "atomic_agents.cli", "--agents-root", str(root)]
    subprocess.run([*run, "vault", "init", "finance"], env=env, check=True, capture_output=True)
    subprocess.run([*run, "vault", "new", "finance", "--type", "user", "--topic", "risk", "--name", "Risk",
                    "--description", "Moderately risk-averse", "--source", "conversation_2026-05-06",
                    "--confidence", "high"], env=env, check=True, capture_output=True)
    subprocess.run([*run, "memory", "remember", "--agent-id", "a", "--user-id", "u", "deploy went green"],
                   env={**env, "ATOMIC_AGENTS_EMBEDDER": "hashing"}, check=True, capture_output=True)
    return root


def test_importing_the_memory_package_loads_no_vault_and_no_model(tmp_path: Path) -> None:
    code, mods = probe(tmp_path, None)
    assert code == 0
    assert "atomic_agents.memory" in mods
    assert not {"atomic_agents.vault", "yaml", "pydantic", *MODEL} & mods


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["memory", "--help"], ["vault", "--help"], ["memory", "remember", "--help"]])
def test_help_imports_no_model_and_no_vault(tmp_path: Path, args: list[str]) -> None:
    code, mods = probe(tmp_path, args)
    assert code == 0
    assert not {"atomic_agents.vault", "atomic_agents.memory._sqlite", *MODEL} & mods
    if len(args) == 1:  # the root parses no typed option: not even typer's pydantic-based coercion loads
        assert "pydantic" not in mods


VAULT_COMMANDS = [
    ["vault", "list"],
    ["vault", "list", "finance"],
    ["vault", "list", "finance", "--json"],
    ["vault", "show", "finance", "user_risk.md"],
    ["vault", "validate", "finance"],
    ["vault", "lint", "finance"],
    ["vault", "index", "show", "finance"],
    ["vault", "journal", "add", "finance", "--happened", "checked the deploy"],
]


@pytest.mark.parametrize("args", VAULT_COMMANDS, ids=lambda a: " ".join(a))
def test_vault_commands_import_no_model_and_no_store(tmp_path: Path, vault_root: Path, args: list[str]) -> None:
    code, mods = probe(tmp_path, ["--agents-root", str(vault_root), *args])
    assert code == 0 and "atomic_agents.vault" in mods  # the command really ran
    # lint also checks the memory mirror when the vault has a store: it may open it, never the model
    assert not {*MODEL, *(() if args[1] == "lint" else ("atomic_agents.memory._sqlite",))} & mods
    assert not {"atomic_agents.cli._memory", "atomic_agents.cli._team", "atomic_agents.cli._migrate"} & mods


KEYWORD_COMMANDS = [
    ["memory", "search", "--agent-id", "a", "--user-id", "u", "deploy"],
    ["memory", "list", "--agent-id", "a", "--user-id", "u"],
    ["memory", "get", "no-such-id"],
    ["memory", "forget-expired"],
    ["memory", "prune", "--agent-id", "a"],
    ["memory", "export"],
]


@pytest.mark.parametrize("embedder", ["minilm", "hashing"])
@pytest.mark.parametrize("args", KEYWORD_COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_memory_commands_that_do_not_embed_import_no_model(tmp_path: Path, vault_root: Path, args: list[str],
                                                           embedder: str) -> None:
    code, mods = probe(tmp_path, ["--agents-root", str(vault_root), *args], ATOMIC_AGENTS_EMBEDDER=embedder)
    assert code == (1 if args[1] == "get" else 0)  # get: "no memory no-such-id", after opening the store
    assert "atomic_agents.memory._sqlite" in mods  # the store was opened
    assert not {"atomic_agents.vault", *MODEL} & mods
    assert not {"atomic_agents.cli._vault", "atomic_agents.cli._team", "atomic_agents.cli._migrate"} & mods


def test_the_probe_sees_numpy_when_a_command_embeds(tmp_path: Path, vault_root: Path) -> None:
    code, mods = probe(tmp_path, ["--agents-root", str(vault_root), "memory", "recall", "--agent-id", "a",
                                  "--user-id", "u", "deploy"], ATOMIC_AGENTS_EMBEDDER="hashing")
    assert code == 0
    assert "numpy" in mods and "atomic_agents.vault" not in mods


@pytest.mark.parametrize("args", [
    ["memory", "--help"], ["vault", "list", "--help"], ["memory", "remember", "--agent-id", "a"],
    ["vault", "nope"], ["memory", "search", "--limit", "x"], ["--agents-root", "nowhere", "vault", "list"],
    ["team", "--help"],
    # narrowed to the one command (or subgroup) they name, past the group's own options
    ["vault", "list"], ["vault", "list", "--bogus"], ["vault", "show"], ["vault", "show", "--help"],
    ["vault", "--agents-root", "nowhere", "list"], ["vault", "--agents-root=nowhere", "list", "--json"],
    ["--agents-root=nowhere", "vault", "lint", "--stale-days", "x"], ["vault", "index"], ["vault", "index", "--help"],
    ["vault", "index", "show"], ["vault", "index", "show", "--help"], ["vault", "index", "nope"],
    ["vault", "journal", "add", "--help"], ["vault", "log", "query", "--bogus"],
    ["memory", "search", "--help"], ["memory", "--db", "x.db", "search"], ["memory", "--db=x.db", "get", "--help"],
    ["team", "goal", "--help"], ["team", "goal"], ["team", "--db", "x", "nope"],
    # not narrowed: an option the group does not take, help or "--" before the command, no command
    ["vault", "--db", "x", "list"], ["vault", "--help", "list"], ["vault", "--", "list"], ["vault", "--agents-root"],
    ["vault", "List"], ["memory", "serch", "x"],
])
def test_a_command_line_built_with_its_group_alone_answers_as_the_full_app(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, args: list[str]
) -> None:
    from atomic_agents.cli import app, main
    from atomic_agents.cli._app import group_of
    from atomic_agents.cli._common import run

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ATOMIC_AGENTS_DAEMON", "off")
    assert group_of(args) in ("memory", "vault", "team")
    answers = []
    for entry in (lambda: main(args), lambda: run(app, args, prog_name="atomic-agents")):
        with pytest.raises(SystemExit) as exit_info:
            entry()
        answers.append((exit_info.value.code, *capsys.readouterr()))
    assert answers[0] == answers[1]
    assert group_of(["--help"]) is None and group_of(["serve"]) is None and group_of(["--version"]) is None


def test_a_command_line_that_names_a_command_builds_that_command_alone() -> None:
    """The narrowing is real (else the test above compares the full app with itself)."""
    import typer

    from atomic_agents.cli._app import build

    def commands(args: list[str]) -> dict[str, object]:
        root = typer.main.get_command(build(args[args.index("vault") if "vault" in args else 0], args))
        return root.commands  # type: ignore[attr-defined,no-any-return]

    vault = commands(["vault", "list", "finance"])["vault"]
    assert list(vault.commands) == ["list"]  # type: ignore[attr-defined]
    vault = commands(["--agents-root", "x", "vault", "--agents-root=y", "index", "show", "finance"])["vault"]
    assert list(vault.commands) == ["index"] and list(vault.commands["index"].commands) == ["show"]  # type: ignore[attr-defined]
    assert len(commands(["vault", "--help", "list"])["vault"].commands) > 10  # type: ignore[attr-defined]
    assert len(commands(["vault", "lst"])["vault"].commands) > 10  # type: ignore[attr-defined]


READ_ONLY = [
    ["vault", "list"],
    ["vault", "list", "finance", "--json"],
    ["vault", "show", "finance", "user_risk.md"],
    ["vault", "index", "show", "finance"],
    ["memory", "search", "--agent-id", "a", "--user-id", "u", "deploy"],
    ["memory", "list", "--agent-id", "a", "--user-id", "u"],
]


@pytest.mark.parametrize("args", READ_ONLY, ids=lambda a: " ".join(a[:2]))
def test_read_only_commands_load_no_pydantic(tmp_path: Path, vault_root: Path, args: list[str]) -> None:
    """Reading validates nothing: neither our pydantic models nor typer's option coercion (typer < 0.29) load."""
    code, mods = probe(tmp_path, ["--agents-root", str(vault_root), *args], ATOMIC_AGENTS_EMBEDDER="hashing")
    assert code == 0
    assert "pydantic" not in mods


@pytest.mark.parametrize("args", [*READ_ONLY, ["vault", "validate", "finance"], ["vault", "lint", "finance"],
                                  ["vault", "journal", "add", "finance", "--happened", "checked"]],
                         ids=lambda a: " ".join(a[:2]))
def test_plain_frontmatter_loads_no_yaml_and_reads_load_no_write_machinery(tmp_path: Path, vault_root: Path,
                                                                           args: list[str]) -> None:
    """Plain notes take the fast path (PyYAML's resolver table is copied, not imported); the secret scanner
    loads with the first write, the thread pool (and logging) with the first batch of files."""
    code, mods = probe(tmp_path, ["--agents-root", str(vault_root), *args], ATOMIC_AGENTS_EMBEDDER="hashing")
    assert code == 0
    assert not {"yaml", "atomic_agents._format._pyyaml"} & mods
    assert not {"atomic_agents.memory._secrets", "concurrent.futures", "logging"} & mods


def test_frontmatter_the_fast_path_declines_still_goes_to_pyyaml(tmp_path: Path, vault_root: Path) -> None:
    """The positive control: quoting the fast path does not take, and a hostile alias, reach PyYAML's loader."""
    root = tmp_path / "agents"
    shutil.copytree(vault_root / "finance", root / "finance", symlinks=True)
    note = root / "finance" / "memory" / "user_risk.md"
    text = note.read_text(encoding="utf-8")
    note.write_text(text.replace("name: Risk\n", 'name: "Risk \\u00e9"\n', 1), encoding="utf-8")
    code, mods = probe(tmp_path, ["--agents-root", str(root), "vault", "show", "finance", "user_risk.md", "--json"])
    assert code == 0 and "yaml" in mods
    note.write_text(text.replace("name: Risk\n", "name: &a Risk\ndescription2: *a\n", 1), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run([sys.executable, "-m", "atomic_agents.cli", "--agents-root", str(root), "vault", "show",
                           "finance", "user_risk.md"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "user_risk.md" in done.stderr and "anchor &a is not allowed" in done.stderr


def test_memory_reads_load_no_secret_scanner_and_no_hashlib(tmp_path: Path, vault_root: Path) -> None:
    for args in (KEYWORD_COMMANDS[0], KEYWORD_COMMANDS[1]):
        code, mods = probe(tmp_path, ["--agents-root", str(vault_root), *args], ATOMIC_AGENTS_EMBEDDER="hashing")
        assert code == 0 and "atomic_agents.memory._sqlite" in mods
        assert not {"atomic_agents.memory._secrets", "hashlib", "random", "yaml"} & mods
    # the positive control: a write does load the scanner
    code, mods = probe(tmp_path, ["--agents-root", str(vault_root), "memory", "remember", "--agent-id", "a",
                                  "--user-id", "u", "lazy probe write"], ATOMIC_AGENTS_EMBEDDER="hashing")
    assert code == 0 and "atomic_agents.memory._secrets" in mods


@pytest.mark.parametrize("args", [["vault", "list", "finance"], ["vault", "list", "finance", "--json"],
                                  ["vault", "show", "finance", "user_risk.md"], ["vault", "index", "show", "finance"]],
                         ids=lambda a: " ".join(a))
def test_listing_and_showing_load_no_index_lint_journal_log_or_persona_module(tmp_path: Path, vault_root: Path,
                                                                        args: list[str]) -> None:
    code, mods = probe(tmp_path, ["--agents-root", str(vault_root), *args])
    assert code == 0 and "atomic_agents.vault._agent" in mods
    unused = {"_lint", "_journal", "_log", "_persona", "_log_entry", *(() if args[1] == "index" else ("_index",))}
    assert not {f"atomic_agents.vault.{m}" for m in unused} & mods
    assert ("atomic_agents.vault._index" in mods) == (args[1] == "index")  # INDEX.md read: the module loads


def test_the_vault_package_still_exports_every_name() -> None:
    import atomic_agents.vault as vault

    for name in vault.__all__:
        assert getattr(vault, name) is not None, name
    assert vault.lint_agent.__module__ == "atomic_agents.vault._lint"
    with pytest.raises(AttributeError):
        vault.no_such_name  # noqa: B018


def test_commands_answered_by_the_daemon_import_neither_typer_nor_the_vault(tmp_path: Path, vault_root: Path) -> None:
    """The lean client (``_daemon_client.py``) answers memory commands, ``context`` and ``vault search`` with the stdlib."""
    import tempfile

    runtime = tempfile.mkdtemp(prefix="aa-", dir="/tmp")  # short: a Unix socket path has ~100 bytes
    os.chmod(runtime, 0o700)
    env = {**os.environ, "PYTHONPATH": str(SRC), "XDG_RUNTIME_DIR": runtime, "ATOMIC_AGENTS_EMBEDDER": "hashing"}
    env.pop("ATOMIC_AGENTS_DB", None)
    daemon = [sys.executable, "-m", "atomic_agents.cli", "daemon"]
    started = subprocess.run([*daemon, "start", "--agents-root", str(vault_root)], env=env, capture_output=True,
                             stdin=subprocess.DEVNULL, timeout=120)
    assert started.returncode == 0, started.stderr
    try:
        for args in (["context", "finance", "--query", "risk", "--budget", "4000"], ["context", "finance", "--budget", "40"],
                     ["vault", "search", "finance", "risk"], ["memory", "list", "--agent-id", "a", "--user-id", "u"]):
            out = tmp_path / "probe.json"
            subprocess.run([sys.executable, "-c", PROBE], cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=120,
                           env={**env, "PROBE_ARGS": json.dumps(["--agents-root", str(vault_root), *args]),
                                "PROBE_OUT": str(out)})
            data = json.loads(out.read_text())
            assert data["code"] == (1 if "40" in args else 0), args  # and a budget error, as in-process
            mods = set(data["modules"])
            assert "atomic_agents._daemon_client" in mods, args  # the daemon was asked ...
            assert not {"typer", "click", "typing", "pathlib", "atomic_agents.vault", "atomic_agents.memory", *MODEL} & mods, args
        status = subprocess.run([*daemon, "status", "--agents-root", str(vault_root), "--json"], env=env,
                                capture_output=True, stdin=subprocess.DEVNULL, timeout=120)
        assert json.loads(status.stdout)["requests"] == 4  # ... and answered every one
    finally:
        subprocess.run([*daemon, "stop", "--agents-root", str(vault_root)], env=env, capture_output=True,
                       stdin=subprocess.DEVNULL, timeout=120)
        shutil.rmtree(runtime, ignore_errors=True)
