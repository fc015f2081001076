"""atp_ratify_charter reads only a charter inside the project folder (or the global ~/.claude one).

A client, possibly remote (``serve --http --allow-remote``), names the path: it
must not make the server read, hash or quote any other file, nor learn whether
one exists.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from atomic_agents.atp._charter import CHARTER_GOAL_ID
from atomic_agents.exceptions import UnsafePathError
from atomic_agents.mcp._atp import _charter_path

from ._client import McpClient

ID = {"agent_id": "archivist", "user_id": "alice", "rater": "alice"}
OUTSIDE = "# Outside charter\n<PROJECT_NAME> secret-ish text: dispatcher, builder, verifier, archivist.\n"


@pytest.fixture(scope="module")
def outside(workdir: Path) -> Path:
    """A Markdown file next to the project folder, not in it."""
    path = workdir.parent / "outside-charter.md"
    path.write_text(OUTSIDE, encoding="utf-8")
    return path


def _refused(server: McpClient, path: str) -> dict[str, object]:
    err = server.error("atp_ratify_charter", {**ID, "path": path})
    assert err["error"] == "UnsafePathError", err
    assert "PROJECT_NAME" not in str(err) and "secret-ish" not in str(err)  # nothing of the file is quoted
    return err


def test_paths_outside_the_project_are_refused_with_a_typed_error(server: McpClient, workdir: Path, outside: Path) -> None:
    server.ok("atp_ratify_charter", ID)  # the default charter, so the chain exists before the refusals
    before = server.ok("atp_chain", {"goal_id": CHARTER_GOAL_ID})
    for path in (str(outside), "../outside-charter.md", ".claude/../../outside-charter.md", "/etc/passwd"):
        assert _refused(server, path)["rule"] in ("outside-project", "not-markdown"), path
    # The same answer whether or not the outside file exists: no existence oracle.
    gone = _refused(server, str(workdir.parent / "no-such-file.md"))
    assert gone["rule"] == "outside-project"
    assert _refused(server, str(outside))["rule"] == "outside-project"
    # Nothing was recorded by the refusals, and the server still serves a legitimate ratification.
    assert server.ok("atp_chain", {"goal_id": CHARTER_GOAL_ID}) == before
    out = server.ok("atp_ratify_charter", {**ID, "path": ".claude/agentic-team-charter.md"})
    assert out["record"]["charter_path"] == ".claude/agentic-team-charter.md"


def test_a_symlink_inside_the_project_leading_out_is_refused(server: McpClient, workdir: Path, outside: Path) -> None:
    link = workdir / "docs-link.md"
    link.symlink_to(outside)
    assert _refused(server, "docs-link.md")["rule"] == "outside-project"
    (workdir / "linked-dir").symlink_to(outside.parent, target_is_directory=True)
    assert _refused(server, "linked-dir/outside-charter.md")["rule"] == "outside-project"


def test_only_markdown_files_inside_the_project_are_read(server: McpClient, workdir: Path) -> None:
    (workdir / ".env").write_text("EDEN_API_KEY=<TODO-not-a-charter>\n", encoding="utf-8")
    err = _refused(server, ".env")
    assert err["rule"] == "not-markdown" and "TODO-not-a-charter" not in str(err)
    docs = workdir / "docs"
    docs.mkdir()
    (docs / "charter.md").write_text((workdir / ".claude" / "agentic-team-charter.md").read_text(encoding="utf-8"), encoding="utf-8")
    out = server.ok("atp_ratify_charter", {**ID, "path": "docs/charter.md"})
    assert out["record"]["charter_path"] == "docs/charter.md" and out["record"]["proceed"] is True
    assert server.ok("atp_ratify_charter", {**ID, "path": str(docs / "charter.md")})["record"]["charter_path"] == "docs/charter.md"


def test_the_global_charter_is_the_one_path_allowed_outside(tmp_path: Path) -> None:
    project, home = tmp_path / "project", tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    project.mkdir()
    charter = home / ".claude" / "agentic-team-charter.md"
    charter.write_text("# charter\n", encoding="utf-8")
    (home / ".claude" / "other.md").write_text("# other\n", encoding="utf-8")
    assert _charter_path(project, str(charter), home=home) == Path(os.path.realpath(charter))
    with pytest.raises(UnsafePathError) as info:
        _charter_path(project, str(home / ".claude" / "other.md"), home=home)
    assert info.value.rule == "outside-project"
    assert _charter_path(project, None, home=home) is None  # nothing named: the default search
