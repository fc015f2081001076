"""Token counts for the context budget, from a real tokenizer that works offline.

The tokenizer is the WordPiece ``tokenizer.json`` of all-MiniLM-L6-v2 that
ships inside this package (``atomic_agents/memory/data/``), run by the
``tokenizers`` library: no download, no model load. It is a stated
approximation of a hosted model's tokenizer (English prose counts within
roughly 10-25% of the GPT/Claude BPE families); no tokenizer of a hosted family
ships with its data inside a PyPI package we can rely on offline. Counts are
taken without the [CLS]/[SEP] markers and with no truncation, and WordPiece
never makes a token of whitespace, so the count of parts joined by blank lines
is the sum of their counts: the budget check is exact for the text we print.
"""

from __future__ import annotations

import threading
from functools import lru_cache
from typing import Any

__all__ = ["TOKENIZER_NAME", "count_tokens"]

TOKENIZER_NAME = "all-MiniLM-L6-v2 WordPiece (bundled; an approximation of hosted-model tokenizers)"
_lock = threading.Lock()


@lru_cache(maxsize=1)
def _tokenizer() -> Any:
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
    return tok


def count_tokens(text: str) -> int:
    """Tokens in ``text`` by the bundled WordPiece tokenizer (no special tokens, no truncation).

    >>> count_tokens("Pay the highest-interest debt first.")
    8
    """
    if not text:
        return 0
    tok = _tokenizer()
    with _lock:  # one shared Rust tokenizer; encode is cheap next to anything else here
        return len(tok.encode(text, add_special_tokens=False).ids)
