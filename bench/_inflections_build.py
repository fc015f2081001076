"""Write ``src/atomic_agents/memory/data/inflections.txt``: English word forms Porter stemming does not join.

    pip install lemminflect==0.2.3        # the lexicon; a build-time tool, not a dependency
    .venv/bin/python bench/_inflections_build.py    # writes the file, prints counts

SQLite's ``porter`` tokenizer joins regular inflections (``walks walked walking`` -> ``walk``)
but not irregular ones (``buy``/``bought``, ``go``/``went``, ``child``/``children``) nor some
regular ones its rules cut differently (``pay``/``paid``: ``pai``/``paid``; ``cry``/``cried``;
``add``/``adding``: ``add``/``ad``). A question asks "When did Maya buy the bike?", the memory
says "Maya bought a bike": no shared stem. Keyword search reads each line of the file as one
word (:func:`atomic_agents.memory._words.word_forms`).

The forms come from LemmInflect's lexicon (``lemma_lu.csv.gz``: English form -> lemma by part
of speech, derived from the NIH SPECIALIST Lexicon; MIT licence, see the file's header). A pair
(form, lemma) is kept when:

- both are lower-case words, the part of speech is a verb, a noun or an adjective;
- their stems (the index's own tokenizer) differ;
- an adjective's form is a regular comparative or superlative (``-er``/``-est`` on the lemma):
  suppletive ones (``good better best``, ``much more most``, ``bad worse``) are degree words
  that would join nearly every memory;
- the form's stem is not also the stem of a word outside the lemma's own forms (``lives``
  stems to ``live``, so it is not joined to ``life``; ``adding`` to ``ad``);
- the pair is not one of :data:`REFUSED`: rows where the lexicon lists two words as one
  lemma or gives a form of a rare sense, and the join would merge two everyday words
  (``dive`` as a form of ``diva``, ``wound`` of ``wind``, ``dice`` of ``die``).

Pairs sharing a stem are joined into one word (union-find). Each line of the file lists one
form per distinct stem, as ``form/stem``, the lemma first.
"""

from __future__ import annotations

import csv
import gzip
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from atomic_agents.memory import _scoring as scoring  # noqa: E402

OUT = ROOT / "src" / "atomic_agents" / "memory" / "data" / "inflections.txt"
POS = ("verb", "noun", "adj")
#: (form, lemma) pairs left out although the lexicon has them, and every form stemmed as that form
#: is (``chiles`` as ``chile``). Each would join two everyday
#: words that mean different things; homographs whose forms are everyday forms of the lemma
#: (``saw``/``see``, ``found``/``find``, ``left``/``leave``) stay joined on purpose.
REFUSED = frozenset({
    ("dive", "diva"),  # the lexicon lists "dive/diva" as one noun lemma: would join dive, dove and diva
    ("crew", "crow"),  # crew, the archaic past of crow
    ("dice", "die"),  # dice, the plural of the gaming die: would join dice and die (dying)
    ("wound", "wind"),  # wound, the past of wind: would join an injury and the weather
    ("lay", "lie"),  # lay, the past of lie: would join lay/laid with lie/lied (to tell a lie)
    ("reis", "real"), ("reis", "rial"), ("rial", "real"), ("real", "rial"),  # a currency: would join real (adj)
    ("chile", "chili"), ("chile", "chilli"), ("chili", "chile"), ("chilli", "chile"),  # chile: the country, lower-cased
})  # fmt: skip


def _lexicon() -> Path:
    import lemminflect  # type: ignore[import-not-found]

    return Path(lemminflect.__file__).parent / "resources" / "lemma_lu.csv.gz"


def _stems(words: set[str]) -> dict[str, str]:
    ws = sorted(words)
    out: dict[str, str] = {}
    for i in range(0, len(ws), 2000):
        out.update(scoring.stems(ws[i : i + 2000]))
    return out


def build() -> list[list[str]]:
    rows: list[tuple[str, str, str]] = []
    lemmas: set[str] = set()
    forms_of: dict[str, set[str]] = defaultdict(set)
    with gzip.open(_lexicon(), "rt", encoding="utf-8") as f:
        for form, pos, joined in csv.reader(f):
            for lemma in joined.split("/"):
                forms_of[lemma].add(form)
                if lemma.isalpha() and lemma.islower():
                    lemmas.add(lemma)
                    if pos in POS and form.isalpha() and form.islower() and form != lemma:
                        rows.append((form, pos, lemma))
    st = _stems(lemmas | {f for f, _, _ in rows} | {w for pair in REFUSED for w in pair})
    refused = {(st[f], st[lemma]) for f, lemma in REFUSED}  # by stem: "chiles" is refused as "chile" is
    owners: dict[str, set[str]] = defaultdict(set)
    for lemma in lemmas:
        if lemma in st:
            owners[st[lemma]].add(lemma)
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    word_of: dict[str, str] = {}  # stem -> the word written for it (a lemma's own word first)
    lemma_stems: set[str] = set()
    for form, pos, lemma in sorted(rows):
        sf, sl = st.get(form), st.get(lemma)
        if not sf or not sl or sf == sl or (sf, sl) in refused:
            continue
        if pos == "adj" and not (form.startswith(lemma[:-1]) and form.endswith(("er", "est"))):
            continue
        if owners.get(sf, set()) - {lemma} - forms_of[lemma]:
            continue
        parent[find(sf)] = find(sl)
        lemma_stems.add(sl)
        word_of.setdefault(sl, lemma)
        if word_of[sl] != lemma and st.get(word_of[sl]) != sl:
            word_of[sl] = lemma
        word_of.setdefault(sf, form)
    groups: dict[str, list[str]] = defaultdict(list)
    for s in parent:
        groups[find(s)].append(s)
    out = []
    for members in groups.values():
        members.sort(key=lambda s: (s not in lemma_stems, len(word_of[s]), word_of[s]))
        out.append([f"{word_of[s]}/{s}" for s in members])
    return sorted(out)


def main() -> None:
    groups = build()
    header = (
        "# English word forms whose Porter stems differ: one word per line, one form per stem as form/stem\n"
        "# (the stem SQLite's porter tokenizer gives it), the lemma first.\n"
        "# Written by bench/_inflections_build.py from LemmInflect 0.2.3's lexicon (lemma_lu.csv.gz),\n"
        "# Copyright (C) 2019 Brad Jascob, MIT licence; derived from the NIH SPECIALIST Lexicon.\n"
    )
    OUT.write_text(header + "".join(" ".join(g) + "\n" for g in groups), encoding="utf-8")
    print(f"{OUT.relative_to(ROOT)}: {len(groups)} words, {sum(len(g) for g in groups)} forms")


if __name__ == "__main__":
    main()
