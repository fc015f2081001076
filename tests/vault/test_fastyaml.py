"""The frontmatter fast path must agree with PyYAML on everything it accepts."""

from __future__ import annotations

import datetime as dt
import os

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from atomic_agents._format._fastyaml import emit_key, fast_load
from atomic_agents._format._pyyaml import _Loader

_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=25)
_scalar = st.one_of(_text, st.integers(-10**9, 10**9), st.booleans(), st.none(),
                    st.dates(min_value=dt.date(1000, 1, 1)), st.floats(allow_nan=False))
_value = st.one_of(_scalar, st.lists(_scalar, max_size=4))
_key = st.from_regex(r"[a-z_][a-z0-9_]{0,10}", fullmatch=True)


def _yaml(text: str):
    return yaml.load(text, Loader=_Loader)


@settings(max_examples=int(os.environ.get('FASTYAML_EXAMPLES', '300')), deadline=None)
@given(key=_key, value=_value, flow=st.booleans())
def test_emitted_text_reads_back_identically(key: str, value, flow: bool) -> None:
    text = emit_key(key, value, flow=flow)
    if text is None:
        return
    assert _yaml(text) == {key: value}
    fast = fast_load(text)
    assert fast is None or fast == {key: value}


@settings(max_examples=int(os.environ.get('FASTYAML_EXAMPLES', '300')), deadline=None)
@given(meta=st.dictionaries(_key, _value, max_size=6), flow=st.booleans())
def test_fast_load_agrees_with_pyyaml_on_pyyaml_output(meta: dict, flow: bool) -> None:
    text = yaml.dump(meta, default_flow_style=flow, allow_unicode=True, sort_keys=False)
    fast = fast_load(text)
    assert fast is None or fast == _yaml(text)


@settings(max_examples=int(os.environ.get('FASTYAML_EXAMPLES', '300')), deadline=None)
@given(lines=st.lists(st.one_of(
    st.builds(lambda k, v: f"{k}: {v}", _key, st.text(max_size=20)),
    st.builds(lambda v: f"  - {v}", st.text(max_size=15)),
    st.just("# comment"), st.just(""), st.builds(lambda k: f"{k}:", _key),
), max_size=8))
def test_fast_load_agrees_with_pyyaml_on_hand_written_text(lines: list[str]) -> None:
    text = "\n".join(lines) + "\n"
    fast = fast_load(text)
    if fast is None:
        return
    try:
        expected = _yaml(text)
    except yaml.YAMLError:
        raise AssertionError(f"fast path accepted text YAML rejects: {text!r}")
    assert fast == (expected or {})


def test_typical_note_takes_the_fast_path() -> None:
    text = ("schema_version: 1\nname: Debt payoff order\ndescription: Avalanche first, unless motivation is low\n"
            "type: feedback\ncaptured: 2026-05-06\nlast_seen: 2026-05-06\nsources:\n  - conversation_2026-05-06\n"
            "confidence: high\npinned: false\nexpires_at: null\nsupersedes: null\nsuperseded_by: null\ntags: [a, b]\n")
    assert fast_load(text) == _yaml(text)


# Messy hand-written frontmatter: list items indented inconsistently, anchors and aliases
# (before keys and values), tags, flow lists, quotes and comments. The fast path may decline
# anything; what it accepts must be exactly what PyYAML reads, and the full chokepoint must
# answer every text with a value or a FrontmatterParseError naming a line, nothing else.
_word = st.sampled_from(["x", "a b", "12", "0x1f", "1e3", "yes", "null", "~", "2026-05-06", "2026-02-30",
                         "'q'", '"d"', "[a, b]", "[]", "{}", "- z", "#c", "x #c", "a: b", "9" * 25, ""])
_prefix = st.sampled_from(["", "&a ", "*a ", "!!int ", "!!str ", "!!binary ", "!!timestamp ", "!x ", "&b !!str "])
_indent = st.sampled_from(["", " ", "  ", "   ", "    ", "\t"])
_messy_line = st.one_of(
    st.builds(lambda p, k, v: f"{p}{k}: {v}", st.sampled_from(["", "&k ", "? "]), _key, st.builds(str.__add__, _prefix, _word)),
    st.builds(lambda i, p, v: f"{i}- {p}{v}", _indent, _prefix, _word),
    st.builds(lambda k: f"{k}:", _key),
    st.sampled_from(["# comment", "", "&a : x", ": x", "  continued", "-", "  -"]),
)


@settings(max_examples=int(os.environ.get('FASTYAML_EXAMPLES', '300')) * 3, deadline=None)
@given(lines=st.lists(_messy_line, max_size=8))
def test_fast_path_agrees_with_pyyaml_on_messy_text(lines: list[str]) -> None:
    from atomic_agents.exceptions import FrontmatterParseError
    from atomic_agents._format._frontmatter import load_yaml

    text = "\n".join(lines) + "\n"
    fast = fast_load(text)
    if fast is not None:
        try:
            expected = _yaml(text)
        except yaml.YAMLError:
            raise AssertionError(f"fast path accepted text PyYAML rejects: {text!r}")
        assert fast == (expected or {}), text
        assert "&" not in text and "*" not in text and "!" not in text.replace("#", "")
    try:
        value = load_yaml(text, path="n.md", first_line=2)
    except FrontmatterParseError as exc:
        assert exc.path == "n.md"
        return
    if isinstance(value, dict):
        assert all(isinstance(k, str) for k in value), text  # never a None key (`&a : x`)


def test_inconsistently_indented_items_fall_back_to_pyyaml() -> None:
    assert fast_load("sources:\n  - a\n - b\n") is None
    assert fast_load("sources:\n - a\n   - b\n") is None  # PyYAML: one item "a - b"
    assert fast_load("sources:\n  - a\n  - b\n") == {"sources": ["a", "b"]}


def test_long_integers_are_left_to_pyyaml() -> None:
    assert fast_load("n: " + "9" * 19 + "\n") is None
    assert fast_load("n: 123\n") == {"n": 123}


def test_the_resolver_table_is_pyyamls_pattern_for_pattern() -> None:
    """The fast path resolves plain scalars with its own copy of PyYAML's table (no yaml import): the same."""
    from atomic_agents._format._fastyaml import _TABLE

    ref = yaml.resolver.Resolver.yaml_implicit_resolvers
    assert list(_TABLE) == list(ref)  # the same first characters, in the same order
    for first, resolvers in ref.items():
        assert [(tag, rx.pattern, rx.flags) for tag, rx in _TABLE[first]] == \
               [(tag, rx.pattern, rx.flags) for tag, rx in resolvers], first


def test_the_spelled_out_character_classes_are_the_originals_for_every_code_point() -> None:
    """_UNUSUAL and _PLAIN_BAD are complements written out; each admits exactly what the original class did."""
    import re

    from atomic_agents._format._fastyaml import _PLAIN_BAD, _UNUSUAL

    unusual = re.compile(r"[^\x09\x0a\x0d\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]")
    plain = re.compile(r"[\x20-\x7e\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
    everything = "".join(map(chr, range(0x110000)))
    assert _UNUSUAL.findall(everything) == unusual.findall(everything)
    assert [c for c in everything if _PLAIN_BAD.match(c) is None] == plain.findall(everything)
    assert len(unusual.findall(everything)) > 2000  # the probe really ran over the controls and surrogates


@settings(max_examples=int(os.environ.get('FASTYAML_EXAMPLES', '300')), deadline=None)
@given(s=st.text(max_size=20))
def test_plain_is_the_former_plain_body_rule(s: str) -> None:
    """The old ``^[class]*$`` also let a trailing newline through; ``_plain`` strips first, so it agrees everywhere."""
    import re

    from atomic_agents._format import _fastyaml as fy

    body = re.compile(r"^[\x20-\x7e\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]*$")
    former = (bool(s) and s[0] not in fy._INDICATORS and s == s.strip() and body.match(s) is not None
              and not (fy._PLAIN_NEVER & set(s)) and fy._resolve(s) == fy._STR)
    assert fy._plain(s) == former
