"""Exported checkpoints load in others' tools: sentence-transformers gives our evaluator's vectors."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from contrastlab.models import POOLINGS, load_backbone, make_encoder
from contrastlab.models.export import sentence_transformers_modules, write_sentence_transformers_files

SentenceTransformer = pytest.importorskip("sentence_transformers").SentenceTransformer

SENTENCES = [
    "A man is playing a guitar.",
    "The cat sat on the mat while the dog slept.",
    "Stocks fell sharply on Monday after the report.",
    "no",
    "Two children are riding bicycles down a quiet street in the rain.",
]


def exported(source, tmp_path, pooling):
    folder = tmp_path / pooling
    shutil.copytree(source, folder)
    write_sentence_transformers_files(folder, pooling)
    return folder


def ours(folder, pooling):
    model, tokenizer = load_backbone(folder, device="cpu")
    return make_encoder(model, tokenizer, pooling=pooling, batch_size=2, progress=False)(SENTENCES)


def theirs(folder):
    return SentenceTransformer(str(folder), device="cpu").encode(SENTENCES, batch_size=3)


@pytest.mark.parametrize("pooling", POOLINGS)
def test_tiny_bert_loads_as_sentence_transformer_with_every_pooling(tiny_bert, tmp_path, pooling):
    folder = exported(tiny_bert, tmp_path, pooling)
    expected, got = ours(folder, pooling), theirs(folder)
    assert got.shape == expected.shape
    assert np.abs(got - expected).max() <= 1e-5, pooling
    # still a Hugging Face folder: the evaluator's own loader reads it unchanged
    assert np.array_equal(ours(folder, pooling), expected)


@pytest.mark.parametrize("pooling", ["cls", "avg", "avg_embeddings_and_last"])
def test_minilm_loads_as_sentence_transformer(minilm_dir, tmp_path, pooling):
    """The package ships its own sentence-transformers files (mean pooling + Normalize); the export
    replaces them with the evaluator's pooling, unnormalised."""
    folder = exported(minilm_dir, tmp_path, pooling)
    assert not (folder / "2_Normalize").exists()
    expected, got = ours(folder, pooling), theirs(folder)
    assert np.abs(got - expected).max() <= 1e-5, pooling
    assert not np.allclose(np.linalg.norm(got, axis=1), 1.0)  # raw, as the evaluator scores them


def test_export_again_replaces_the_modules(tiny_bert, tmp_path):
    folder = exported(tiny_bert, tmp_path, "cls_pooler")
    write_sentence_transformers_files(folder, "avg")
    assert not (folder / "2_Dense").exists() and (folder / "1_Pooling").exists()
    assert np.abs(theirs(folder) - ours(folder, "avg")).max() <= 1e-5


def test_unknown_pooling_names_the_valid_ones():
    with pytest.raises(ValueError, match="avg_first_layer_and_last"):
        sentence_transformers_modules("avg_top2")
