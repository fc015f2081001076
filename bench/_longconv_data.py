"""Load the hand-written long conversations in ``bench/data/longconv/`` (a second labelled set).

    from _longconv_data import load
    for conv in load("dev"):             # every conversation, only its dev questions
        conv["turns"], conv["questions"]

The labelled set of ``bench/data/recall_eval`` has short dialogues (4 to 6 sessions, a few
dozen turns each) in one shared store. What an agent's chat memory meets is longer: hundreds
of turns between the same two people over months, stored one memory per turn as
``"Name: text"``, every turn opening with one of two names, facts sitting in the reply to a
question without its words, relative dates ("yesterday") whose day follows only from the
session's date, and threads that come back sessions later. Each file here is one such
conversation, written by hand for this project (MIT, like the repository; all people and
events invented), with an outside reader's questions and the turns that answer them.

Source format (``source/*.txt``, read in name order)::

    # conversation: lena-marco
    # speakers: Lena, Marco
    ## session 1 | 2026-02-07
    Lena: Hey Marco! ...
    {pottery1} Lena: I signed up for a pottery class yesterday ...
    ## questions
    Q single pottery1 | What class did Lena sign up for? | pottery
    Q multi pottery1,kiln2 | ... | ...
    Q irr | When did Marco sign up for a pottery class? | -

A ``{label}`` marks a turn that some question points at. Question kinds: ``single`` (one
evidence turn), ``multi`` (two or more), ``temporal`` ("when", often a relative date),
``open`` (an inference from the evidence), ``irr`` (the chat never says it). Turn ids are
``S<session>:<n>``; splits alternate dev / test within each kind of each conversation, in
file order. The first bad line raises ``ValueError`` naming the file and line.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

__all__ = ["DATA_DIR", "KINDS", "load", "parse"]

DATA_DIR = Path(__file__).resolve().parent / "data" / "longconv"
KINDS = frozenset({"single", "multi", "temporal", "open", "irr"})
#: The labelled set's kind names, for tables that show both sets.
AS_RECALL_EVAL_KIND = {"single": "keyword", "multi": "multi", "temporal": "temporal", "open": "mixed", "irr": "irrelevant"}

_SESSION = re.compile(r"^## session (\d+) \| (\d{4}-\d{2}-\d{2})$")
_TURN = re.compile(r"^(?:\{([\w-]+)\}\s+)?([A-Z][\w'-]*):\s+(\S.*)$")
_QUESTION = re.compile(r"^Q\s+(\w+)\s*([\w,-]*)\s*\|\s*(.+?)\s*\|\s*(.+?)$")


def parse(path: Path) -> dict[str, Any]:
    """One source file: ``{"conversation", "speakers", "turns", "questions"}`` (questions without a split)."""
    name, speakers, turns, questions = "", [], [], []
    labels: dict[str, str] = {}
    session: tuple[int, str] | None = None
    per_session = 0
    in_questions = False

    def bad(no: int, why: str) -> ValueError:
        return ValueError(f"{path.name}:{no}: {why}")

    for no, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("# conversation:"):
            name = line.split(":", 1)[1].strip()
        elif line.startswith("# speakers:"):
            speakers = [s.strip() for s in line.split(":", 1)[1].split(",")]
        elif line.startswith("## questions"):
            in_questions = True
        elif (m := _SESSION.match(line)) is not None:
            if in_questions:
                raise bad(no, "a session after the questions")
            n = int(m.group(1))
            if n != (session[0] + 1 if session else 1):
                raise bad(no, f"session {n} out of order")
            session, per_session = (n, m.group(2)), 0
        elif line.startswith("#"):
            continue
        elif in_questions:
            if (m := _QUESTION.match(line)) is None:
                raise bad(no, f"not a question line: {line!r}")
            kind, evidence, question, answer = m.groups()
            ev = [e for e in evidence.split(",") if e]
            if kind not in KINDS:
                raise bad(no, f"unknown kind {kind!r}")
            if (kind == "irr") != (not ev) or (kind == "multi" and len(ev) < 2):
                raise bad(no, f"a {kind!r} question with {len(ev)} evidence labels")
            if unknown := [e for e in ev if e not in labels]:
                raise bad(no, f"unknown evidence label {unknown[0]!r}")
            questions.append({"kind": kind, "question": question, "answer": answer, "evidence": [labels[e] for e in ev]})
        else:
            if (m := _TURN.match(line)) is None or session is None:
                raise bad(no, f"not a turn line (or no session yet): {line!r}")
            label, speaker, text = m.groups()
            if speaker not in speakers:
                raise bad(no, f"speaker {speaker!r} is not in '# speakers'")
            per_session += 1
            tid = f"S{session[0]}:{per_session}"
            if label:
                if label in labels:
                    raise bad(no, f"label {label!r} used twice")
                labels[label] = tid
            turns.append({"id": tid, "speaker": speaker, "text": text, "session": session[0], "date": session[1]})
    if not name or len(speakers) != 2 or not turns:
        raise ValueError(f"{path.name}: needs '# conversation:', two '# speakers:' and turns")
    return {"conversation": name, "speakers": speakers, "turns": turns, "questions": questions}


def load(split: str | None = None, data_dir: Path = DATA_DIR) -> list[dict[str, Any]]:
    """Every conversation, its questions given a ``split`` (``dev`` / ``test``, alternating per kind) and kept to it."""
    out = []
    for path in sorted((data_dir / "source").glob("*.txt")):
        conv = parse(path)
        seen: Counter[str] = Counter()
        for q in conv["questions"]:
            q["split"] = "dev" if seen[q["kind"]] % 2 == 0 else "test"
            seen[q["kind"]] += 1
        if split is not None:
            conv["questions"] = [q for q in conv["questions"] if q["split"] == split]
        out.append(conv)
    return out
