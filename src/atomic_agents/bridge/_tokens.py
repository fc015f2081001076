"""Token counts for the context budget, from a real tokenizer that works offline.

The default is OpenAI's ``o200k_base`` BPE (the GPT-4o / GPT-4.1 / o-series
family), run by ``bpe-openai``: Rust bindings whose wheel carries the BPE data
inside the compiled module, so nothing is downloaded (``tiktoken`` fetches its
files on first use). Its token ids match tiktoken's (checked against OpenAI's
published examples in the tests). Only the compiled module is loaded: the
package's Python layer decodes every rank table on import (~0.4 s), the
compiled tokenizer builds in ~40 ms.

When ``bpe-openai`` is missing (or its module does not load), the WordPiece
``tokenizer.json`` of all-MiniLM-L6-v2 that ships inside this package
(``atomic_agents/memory/data/``), run by ``tokenizers``, counts instead: a stated
approximation of hosted models' tokenizers (English prose within roughly
10-25%). :func:`tokenizer_name` says which one counted.

Counts are of the text as given: no special tokens (``<|endoftext|>`` is
ordinary text), no truncation. A BPE makes tokens of the blank lines between
parts and may merge them with a neighbour's punctuation, so the count of a
joined text is not the sum of its parts' counts: context assembly counts the
text it prints.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import os
import threading
from collections.abc import Callable
from functools import lru_cache
from typing import Any

__all__ = ["BPE_ENCODING", "count_tokens", "tokenizer_name"]

#: The hosted-model encoding counted with when ``bpe-openai`` is installed.
BPE_ENCODING = "o200k_base"
WORDPIECE_NAME = "all-MiniLM-L6-v2 WordPiece (bundled; an approximation of hosted-model tokenizers)"
_lock = threading.Lock()


def _bpe_module() -> Any:
    """``bpe_openai._bindings`` loaded on its own (not through the package, whose import costs ~0.4 s)."""
    spec = importlib.util.find_spec("bpe_openai")  # finds, does not import
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in sorted(names):
            if name.startswith("_bindings.") and name.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)):
                path = os.path.join(folder, name)
                loader = importlib.machinery.ExtensionFileLoader("bpe_openai._bindings", path)
                mod_spec = importlib.util.spec_from_file_location("bpe_openai._bindings", path, loader=loader)
                if mod_spec is None:
                    continue
                module = importlib.util.module_from_spec(mod_spec)
                loader.exec_module(module)
                return module
    return importlib.import_module("bpe_openai._bindings")  # an unusual layout: the ordinary (slower) import


def _bpe() -> tuple[str, Callable[[str], int]] | None:
    try:
        module = _bpe_module()
        if module is None:
            return None
        tok = module.tokenizer_for_encoding(BPE_ENCODING)
        count = tok.count
        count("probe")  # a module that loads but cannot count is no tokenizer
    except Exception:  # noqa: BLE001 - any failure of the optional tokenizer falls back to the bundled one
        return None
    from importlib.metadata import PackageNotFoundError, version

    try:
        ver = f" {version('bpe-openai')}"
    except PackageNotFoundError:
        ver = ""
    return f"{BPE_ENCODING} (bpe-openai{ver}; the GPT-4o family's tokenizer)", count


def _wordpiece() -> tuple[str, Callable[[str], int]]:
    from importlib.resources import files

    from tokenizers import Tokenizer

    from ..exceptions import StoreError

    try:
        text = files("atomic_agents.memory").joinpath("data", "all-MiniLM-L6-v2", "tokenizer.json").read_text(encoding="utf-8")
    except OSError as exc:
        raise StoreError(f"the bundled tokenizer is missing ({exc.strerror}); reinstall atomic-agents-vault") from None
    tok = Tokenizer.from_str(text)
    tok.no_truncation()
    tok.no_padding()

    def count(text: str) -> int:
        with _lock:  # one shared Rust tokenizer; encode is cheap next to anything else here
            return len(tok.encode(text, add_special_tokens=False).ids)

    return WORDPIECE_NAME, count


@lru_cache(maxsize=1)
def _tokenizer() -> tuple[str, Callable[[str], int]]:
    if os.environ.get("ATOMIC_AGENTS_TOKENIZER", "").strip().lower() == "wordpiece":
        return _wordpiece()  # the fallback on purpose (tests, comparisons)
    return _bpe() or _wordpiece()


def tokenizer_name() -> str:
    """Which tokenizer counts: ``o200k_base (bpe-openai ...)``, or the bundled WordPiece approximation."""
    return _tokenizer()[0]


def count_tokens(text: str) -> int:
    """Tokens in ``text`` (no special tokens, no truncation).

    >>> count_tokens("tiktoken is great!")  # o200k_base: [83, 8251, 2488, 382, 2212, 0]  # doctest: +SKIP
    6
    """
    if not text:
        return 0
    name, count = _tokenizer()
    return _counted(name, count, text)


@lru_cache(maxsize=4096)
def _counted(name: str, count: Callable[[str], int], text: str) -> int:
    """Counts by tokenizer and text: a context re-counts the same INDEX and notes on every call."""
    return count(text)
