"""Issue 7, section 2: hostile or messy files never hang or crash whole-vault readers.

Each class is planted in a vault next to a good note, then every reader runs:
validate, lint, list/scan, show (load), index rebuild, the migration's status
and dry run. The hostile file is reported by path and line with a typed error;
the good note is still processed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from atomic_agents.exceptions import EncodingError, FrontmatterParseError, UnsafeNameError, ValidationError
from atomic_agents.migration import FilesystemMigrationBackend
from atomic_agents.vault import Agent, Vault, append_log, query_logs
from atomic_agents._format._frontmatter import load_yaml, parse

from .conftest import TODAY, draft, tree_digest


def _bomb(levels: int) -> str:
    """A 'billion laughs' frontmatter: each level is nine aliases of the one before."""
    lines = ['l0: &l0 ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    for i in range(1, levels + 1):
        lines.append(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


GOOD_META = ("schema_version: 1\nname: Hostile\ndescription: d\ntype: feedback\ncaptured: 2026-05-06\n"
             "last_seen: 2026-05-06\nsources:\n  - s\nconfidence: high\n")

# name -> (file bytes, 1-based line the error must name)
HOSTILE: dict[str, tuple[bytes, int]] = {
    "alias_bomb": (("---\n" + GOOD_META + _bomb(6) + "---\nbody\n").encode(), 11),
    "alias_only": (("---\n" + GOOD_META + "extra: *nowhere\n---\n").encode(), 11),
    "anchor_before_key": (("---\n" + GOOD_META + "&a : x\n---\n").encode(), 11),
    "tag_binary": (("---\n" + GOOD_META + "blob: !!binary aGVsbG8=\n---\n").encode(), 11),
    "tag_set": (("---\n" + GOOD_META + "s: !!set {a, b}\n---\n").encode(), 11),
    "tag_python": (("---\n" + GOOD_META + "p: !!python/object/apply:os.system [ls]\n---\n").encode(), 11),
    "tag_local": (("---\n" + GOOD_META + "p: !mine x\n---\n").encode(), 11),
    "bad_int": (("---\n" + GOOD_META + "n: !!int abc\n---\n").encode(), 11),
    "bad_timestamp": (("---\n" + GOOD_META + "t: !!timestamp not-a-date\n---\n").encode(), 11),
    "bad_float": (("---\n" + GOOD_META + "f: !!float x1\n---\n").encode(), 11),
    "bad_bool": (("---\n" + GOOD_META + "b: !!bool maybe\n---\n").encode(), 11),
    "huge_int": (("---\n" + GOOD_META + "n: " + "9" * 5000 + "\n---\n").encode(), 11),
    "huge_int_in_list": (("---\n" + GOOD_META + "n: [1, " + "9" * 5000 + "]\n---\n").encode(), 11),
    "int_key": (("---\n" + GOOD_META + "2026: x\n---\n").encode(), 11),
    "latin1_value": (b"---\n" + GOOD_META.replace("name: Hostile", "name: caf\xe9").encode("latin-1") + b"---\n", 3),
    "latin1_body": (("---\n" + GOOD_META + "---\nline one\n").encode() + b"line \xff two\n", 13),
}


def _plant(agent: Agent, key: str) -> Path:
    data, _ = HOSTILE[key]
    path = agent.memory_dir / "feedback_hostile_file.md"
    path.write_bytes(data)
    return path


@pytest.fixture
def planted(agent: Agent, request: pytest.FixtureRequest) -> tuple[Agent, Path, int]:
    agent.new_note(draft("good_note"), today=TODAY)
    path = _plant(agent, request.param)
    return agent, path, HOSTILE[request.param][1]


ids = sorted(HOSTILE)


@pytest.mark.parametrize("planted", ids, indirect=True, ids=ids)
def test_load_names_file_and_line(planted: tuple[Agent, Path, int]) -> None:
    agent, path, line = planted
    with pytest.raises(FrontmatterParseError) as exc:
        agent.load(path.name)
    assert exc.value.path == str(path)
    assert exc.value.line == line
    assert f"{path}:{line}" in str(exc.value)


@pytest.mark.parametrize("planted", ids, indirect=True, ids=ids)
def test_whole_vault_readers_report_it_and_go_on(planted: tuple[Agent, Path, int], vault: Vault) -> None:
    agent, path, line = planted
    rel = f"finance/memory/{path.name}:{line}"

    notes, errors = agent.scan()
    assert [n.filename for n in notes] == ["feedback_good_note.md"]
    assert [(e.path, e.line) for e in errors] == [(str(path), line)]
    assert [n.filename for n in agent.list_notes()] == ["feedback_good_note.md"]

    issues = vault.validate()
    assert [i.path for i in issues] == [rel]
    (report,) = vault.lint()
    assert rel in [i.path for i in report.errors]
    assert report.notes == 1  # the good note was read and checked

    result = agent.rebuild_index(today=TODAY)
    assert result["entries"] == 1 and len(result["unreadable"]) == 1 and path.name in result["unreadable"][0]


@pytest.mark.parametrize("planted", ids, indirect=True, ids=ids)
def test_migration_reports_it_and_refuses(planted: tuple[Agent, Path, int], agents_root: Path) -> None:
    _, path, line = planted
    backend = FilesystemMigrationBackend(agents_root)
    status = backend.status()
    assert [(Path(u.unit_id).name, u.line) for u in status.unparseable] == [(path.name, line)]
    before = tree_digest(agents_root)
    result = backend.run_migration(1, dry_run=True)
    assert not result.ok and path.name in (result.error or "")
    real = backend.run_migration(1)
    assert not real.ok and path.name in (real.error or "")
    assert {k: v for k, v in before.items() if not k.startswith("_")} == {
        k: v for k, v in tree_digest(agents_root).items() if not k.startswith("_")}


def test_non_utf8_index_is_reported_by_lint(agent: Agent, vault: Vault) -> None:
    agent.new_note(draft("good_note"), today=TODAY)
    index = agent.memory_dir / "INDEX.md"
    index.write_bytes(index.read_bytes() + b"\n- `Caf\xe9` \xe2 hook\n")
    (report,) = vault.lint()
    bad = [i for i in report.errors if i.rule == "utf-8"]
    assert bad and bad[0].path.startswith("finance/memory/INDEX.md:")


def test_non_utf8_tools_md_is_a_lint_issue(agent: Agent, vault: Vault) -> None:
    (agent.path / "tools.md").write_bytes(b"# Tools\n\xff\n")
    (report,) = vault.lint()
    assert any(i.path == "finance/tools.md:2" and i.rule == "utf-8" for i in report.issues)


def test_log_query_reports_bad_line_and_counts_the_rest(agent: Agent) -> None:
    entry = {"ts": "2026-05-06T09:00:00+00:00", "trigger": "cron", "model": "m", "input_tokens": 1,
             "output_tokens": 2, "status": "ok", "summary": "fine"}
    path = append_log(agent, entry)
    with open(path, "ab") as fh:
        fh.write(json.dumps({**entry, "summary": "x"}).encode().replace(b'"x"', b'"caf\xe9"') + b"\n")
        fh.write(b"[" * 100_000 + b"\n")  # nested past the recursion limit
    append_log(agent, entry)
    result = query_logs(agent)
    assert len(result.entries) == 2
    assert any(f"{path}:2" in bad and "UTF-8" in bad for bad in result.invalid)
    assert any(f"{path}:3" in bad for bad in result.invalid)


def test_set_style_values_go_through_the_same_chokepoint() -> None:
    assert load_yaml("[a, b]") == ["a", "b"]
    for text in ("&a [*a]", "!!binary aGk=", "!!timestamp nope", "9" * 5000, "[unclosed"):
        with pytest.raises(FrontmatterParseError):
            load_yaml(text)


def test_anchor_before_a_key_never_round_trips_as_none(agent: Agent) -> None:
    with pytest.raises(FrontmatterParseError):
        parse("---\nname: x\n&a : y\n---\n")
    with pytest.raises(FrontmatterParseError):
        parse("---\n&k name: x\n---\n")


def test_plain_text_with_ampersands_and_stars_still_reads() -> None:
    doc = parse("---\nname: R&D * notes!\ndescription: 'a & b'\nsources: [\"x*y\"]\n---\n")
    assert doc.meta == {"name": "R&D * notes!", "description": "a & b", "sources": ["x*y"]}
    assert parse("---\na: !!str 12\nb: !!int '7'\nc: !!float 1\n---\n").meta == {"a": "12", "b": 7, "c": 1.0}


def test_encoding_error_is_typed_with_offset(tmp_path: Path) -> None:
    from atomic_agents._text import read_text

    p = tmp_path / "x.md"
    p.write_bytes(b"ok\nok\nbad \xc3\x28 here\n")
    with pytest.raises(EncodingError) as exc:
        read_text(p)
    assert (exc.value.line, exc.value.offset, exc.value.rule) == (3, 10, "utf-8")
    assert isinstance(exc.value, ValidationError)


@pytest.mark.parametrize("field,value", [("topic", "a" * 300), ("agent", "b" * 300)])
def test_names_longer_than_the_file_system_allows_are_refused_before_writing(
    agent: Agent, vault: Vault, agents_root: Path, field: str, value: str
) -> None:
    before = tree_digest(agents_root)
    with pytest.raises(UnsafeNameError) as exc:
        if field == "topic":
            agent.new_note(draft(value), today=TODAY)
        else:
            vault.init_agent(value)
    assert exc.value.rule == "max-length"
    assert tree_digest(agents_root) == before
    with pytest.raises(UnsafeNameError):
        agent.load("c" * 300 + ".md")


def test_validate_takes_no_write_lock_on_a_clean_vault(agent: Agent, vault: Vault, agents_root: Path) -> None:
    agent.new_note(draft("good_note"), today=TODAY)
    lock = agent.path / ".agent.lock"
    lock.unlink()
    names_before = sorted(str(p) for p in agents_root.rglob("*") if "_cache" not in p.parts)
    before = tree_digest(agents_root)
    assert vault.validate() == []
    assert not lock.exists()  # reading created (and so opened for writing) no lock file
    assert sorted(str(p) for p in agents_root.rglob("*") if "_cache" not in p.parts) == names_before
    assert {k: v for k, v in tree_digest(agents_root).items() if not k.startswith("_cache")} == before


def test_validate_when_the_lock_cannot_be_taken(agent: Agent, vault: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    """A read-only file system (EROFS) refuses the lock file; validate still reports, no OSError."""
    import errno

    from atomic_agents._io import FileLock

    agent.new_note(draft("good_note"), today=TODAY)
    (agent.memory_dir / ".index-pending.json").write_text("[]")  # a repair would be wanted

    def refuse(self: FileLock) -> None:
        raise OSError(errno.EROFS, "Read-only file system", str(self.path))

    monkeypatch.setattr(FileLock, "acquire", refuse)
    # no OSError: the repair it cannot make is reported instead
    assert [i.rule for i in vault.validate()] == ["interrupted-write"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores file modes (the EROFS test above covers this as root)")
def test_validate_on_a_read_only_vault(agent: Agent, vault: Vault, agents_root: Path) -> None:
    agent.new_note(draft("good_note"), today=TODAY)
    (agent.memory_dir / ".index-pending.json").write_text("[]")  # would want a repair
    dirs = [agents_root, *[p for p in agents_root.rglob("*") if p.is_dir()]]
    for d in dirs:
        d.chmod(0o555)
    try:
        issues = vault.validate()
        assert [i.rule for i in issues] == ["interrupted-write"]
    finally:
        for d in dirs:
            d.chmod(0o755)
