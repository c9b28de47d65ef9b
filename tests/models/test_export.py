"""Exported checkpoints load in others' tools: sentence-transformers gives our evaluator's vectors."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

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
    """The package's modules (mean pooling, Normalize) give way to the evaluator's pooling, unnormalised."""
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


# --- image encoders: docs/encoders.md's torchvision snippets load what the trainer writes ----------------

ENCODERS_DOC = Path(__file__).resolve().parents[2] / "docs" / "encoders.md"


def written_encoder(tmp_path, arch, stem, width, out_dim=None, head=None):
    """An encoder with random weights and BatchNorm statistics, saved by the trainer's own writer."""
    from contrastlab.models.vision import build_encoder
    from contrastlab.training.vision import _write_encoder

    torch.manual_seed(0)
    encoder = build_encoder(arch, stem=stem, width=width, out_dim=out_dim)
    for module in encoder.modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            module.running_mean.normal_()
            module.running_var.uniform_(0.5, 2.0)
    settings = {"arch": arch, "stem": stem, "width": width, "out_dim": out_dim}
    folder = tmp_path / "encoder"
    _write_encoder(folder, encoder, {"settings": settings}, None, head)
    return encoder.eval(), folder


@pytest.mark.parametrize(
    ("arch", "stem", "out_dim"),
    [("resnet18", "cifar", None), ("resnet18", "imagenet", None), ("resnet50", "imagenet", 512)],
)
def test_readme_snippet_loads_the_encoder_in_plain_torchvision(tmp_path, arch, stem, out_dim):
    import safetensors.torch
    import torchvision

    ours, folder = written_encoder(tmp_path, arch, stem, 64, out_dim)
    images = torch.randn(3, 3, 32, 32)
    with torch.no_grad():
        expected = ours(images)
    # docs/encoders.md's Python blocks that build a torchvision ResNet: the three-line one, the general one
    blocks = re.findall(r"```python\n(.*?)```", ENCODERS_DOC.read_text(), flags=re.S)
    snippets = [block for block in blocks if "torchvision.models" in block]
    assert len(snippets) == 2, snippets
    three_lines, general = snippets
    assert len(three_lines.strip().splitlines()) == 3
    for snippet in [general, three_lines] if (arch, stem) == ("resnet18", "cifar") else [general]:
        scope = dict(folder=str(folder), torch=torch, torchvision=torchvision, safetensors=safetensors)
        exec(snippet, scope)  # noqa: S102 - the documented code itself
        with torch.no_grad():
            got = scope["net"](images)
        assert got.shape == expected.shape and torch.allclose(got, expected, rtol=0, atol=1e-5)


def test_demo_size_encoder_says_it_needs_our_loader_and_saves_its_head(tmp_path):
    """The demo's 1/8-width ResNet's spec says it needs our loader; its head loads into a plain Sequential."""
    from safetensors.torch import load_file

    from contrastlab.models.vision import ProjectionHead
    from contrastlab.training.vision import load_encoder

    torch.manual_seed(1)
    head = ProjectionHead(64, 32, 16).eval()
    ours, folder = written_encoder(tmp_path, "resnet18", "cifar", 8, head=head)
    spec = json.loads((folder / "torchvision.json").read_text())
    assert spec["torchvision"] is False and spec["width"] == 8 and spec["anchors"] is None
    assert spec["head"] == {**spec["head"], "in": 64, "hidden": 32, "out": 16}
    plain = torch.nn.Sequential(
        torch.nn.Linear(64, 32, bias=False),
        torch.nn.BatchNorm1d(32),
        torch.nn.ReLU(),
        torch.nn.Linear(32, 16),
    ).eval()
    plain.load_state_dict(load_file(folder / "head.safetensors"))
    loaded, _ = load_encoder(folder)  # our loader reads the folder as before
    images = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        features = loaded(images)
        assert torch.equal(features, ours(images))
        assert torch.equal(plain(features), head(features))


def test_mteb_cli_takes_no_folder_so_the_doc_shows_its_api(tmp_path):
    """``mteb run -m <folder>`` looks the name up on the hub: a folder gets no loader ("No model
    implementation is available for this model"); docs/encoders.md shows ``mteb.evaluate`` on it instead."""
    mteb = pytest.importorskip("mteb")
    assert mteb.get_model_meta(str(tmp_path / "cl" / "model"), fetch_from_hf=True).loader is None
    assert "mteb run -m results/" not in ENCODERS_DOC.read_text()
