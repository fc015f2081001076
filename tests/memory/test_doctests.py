"""The examples in the memory package's docstrings run and say what they show."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["__init__", "_embed", "_fake", "_models", "_rerank", "_scoring", "_secrets", "_vectors", "_words"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module("atomic_agents.memory" + ("" if name == "__init__" else f".{name}"))
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0
