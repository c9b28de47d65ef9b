"""Backbone families and the step mode, decided once (issue 64 item 2, issue 62 item 1): the trainer's view
and the plan's view of every combination agree, every configured cell is priced in the mode it trains in,
and the lists the models and the schema keep are views of the one table."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import yaml

from contrastlab import config as cl_config
from contrastlab import families
from contrastlab.cost import flops
from contrastlab.data.images import validation_split
from contrastlab.families import RESNETS, TEXT_FAMILIES, step_mode
from contrastlab.paths import REPO_ROOT
from contrastlab.precision import CHOICES, ON_A_BF16_GPU
from contrastlab.training import sentence
from contrastlab.training import vision_capture as vc
from contrastlab.training.sentence import TrainSettings
from contrastlab.training.vision import VisionTrainSettings

CUDA = torch.device("cuda")  # a device object only: nothing here touches a GPU
CONFIGS = [REPO_ROOT / "config.yaml", *sorted((REPO_ROOT / "config").glob("*.yaml"))]


def _trainer_sentence(tmp_path: Path, settings: dict, precision: str, model_type: str):
    """The sentence trainer's decision (``sentence._for_device``) on a bf16 GPU, the backbone's
    config.json naming ``model_type``."""
    (tmp_path / "config.json").write_text(json.dumps({"model_type": model_type}))
    run = SimpleNamespace(device=CUDA, precision=SimpleNamespace(name=ON_A_BF16_GPU[precision]))
    decided, _ = sentence._for_device(TrainSettings(loss="infonce", **settings), run, tmp_path)
    return decided.cuda_graph, decided.padding_free, decided.dev_batch_size


def test_every_sentence_combination_is_decided_alike_by_the_trainer_and_the_plan(tmp_path):
    types = [*TEXT_FAMILIES, "gpt2"]  # and a family the project does not list
    grid = itertools.product(CHOICES, (None, True, False), (False, True), (None, True, False), types, (1, 2))
    agreed = refused = 0
    for precision, graph, compiled, padding_free, model_type, grad_accum in grid:
        settings = dict(
            precision=precision,
            cuda_graph=graph,
            compile=compiled,
            padding_free=padding_free,
            grad_accum=grad_accum,
        )
        try:
            trainer = _trainer_sentence(tmp_path, settings, precision, model_type)
        except ValueError:  # padding_free with the graph or compile, the graph with grad_accum 2
            refused += 1
            continue
        mode = flops.sentence_mode(settings, model_type)
        assert trainer == (mode.graph, mode.padding_free, mode.dev_batch), settings | {
            "model_type": model_type
        }
        assert flops.padding_free_for(settings, model_type) is trainer[1]
        agreed += 1
    assert (agreed, refused) == (960, 480)  # 5 choices x 8 types x (24 + 12)


def test_an_ieee_fp32_cell_that_asks_for_the_graph_or_compile_is_priced_as_the_graph_it_runs(tmp_path):
    for asked in ({"cuda_graph": True}, {"compile": True}):
        settings = {"precision": "fp32", **asked}
        assert _trainer_sentence(tmp_path, settings, "fp32", "bert") == (True, False, 512)
        assert not flops.padding_free_for(settings, "bert")
        assert flops.sentence_mode(settings, "bert").name == (
            "graph" if "cuda_graph" in asked else "compile + graph"
        )
    assert flops.sentence_mode({"precision": "fp32"}, "bert").name == "padding-free"
    assert flops.sentence_mode({"precision": "bf16"}, "roberta").name == "graph"


def test_every_image_combination_is_decided_alike_by_the_trainer_and_the_plan():
    grid = itertools.product(
        CHOICES, (None, True, False), (False, True), (0.0, 0.1), (True, False), (1024, 1000)
    )
    outcomes = []
    for precision, graph, compiled, oar, drop_last, n_images in grid:
        settings = dict(
            precision=precision,
            cuda_graph=graph,
            compile=compiled,
            oar_fraction=oar,
            drop_last=drop_last,
            batch_size=256,
        )
        trainer = plan = "refused"
        try:
            trainer = vc.resolve(VisionTrainSettings(**settings), CUDA, n_images)[0]
        except ValueError:
            pass
        try:
            plan = flops.vision_mode(settings, n_images).graph
        except ValueError:
            pass
        assert trainer == plan, settings | {"n_images": n_images}
        outcomes.append(trainer)
    assert (outcomes.count(True), outcomes.count(False), outcomes.count("refused")) == (
        30,
        145,
        65,
    )  # of 240: 3 capturable steps x (None, true) x 5


def _trainer_mode(grid: cl_config.Grid, cell: cl_config.Cell, backbone_dir: Path) -> str:
    """The mode the trainer runs ``cell`` in on a bf16 GPU, from the settings its rule hands it (a
    sentence backbone's config.json, in ``backbone_dir``, naming the model type the plan knows)."""
    s = dict(grid.settings(cell))
    if grid.experiment(cell.experiment).track == "vision":
        vs = VisionTrainSettings.from_dict(s)
        n_images = flops.DATASET_IMAGES[vs.dataset][0]
        held_out = len(validation_split(n_images, vs.val_fraction, vs.seed)) if vs.val_fraction else 0
        return "graph" if vc.resolve(vs, CUDA, n_images - held_out)[0] else "eager"
    model_type = flops.backbone_transformer(grid, cell.backbone).model_type
    (backbone_dir / "config.json").write_text(json.dumps({"model_type": model_type}))
    precision = SimpleNamespace(name=ON_A_BF16_GPU[s.get("precision") or "auto"])
    decided, _ = sentence._for_device(
        TrainSettings.from_dict(s), SimpleNamespace(device=CUDA, precision=precision), backbone_dir
    )
    return "padding-free" if decided.padding_free else "graph" if decided.cuda_graph else "eager"


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_the_plan_prices_every_configured_cell_in_the_mode_the_trainer_runs(path, tmp_path):
    grid = cl_config.Grid(cl_config.load(path))
    modes = {}
    for cell in grid.cells:
        work = flops.cell_work(grid, cell)
        priced = "padding-free" if work.padding_free else "graph" if work.graphed else "eager"
        assert priced == _trainer_mode(grid, cell, tmp_path), cell
        modes[priced] = modes.get(priced, 0) + 1
    assert sum(modes.values()) == len(grid.cells) > 0


def test_macls_captured_image_step_is_priced_as_captured():
    grid = cl_config.Grid(cl_config.load(REPO_ROOT / "config.yaml"))
    macl = [c for c in grid.cells if c.experiment == "macl_cifar10"]
    oar = [c for c in grid.cells if c.experiment == "oar_cifar10" and grid.settings(c).get("oar_fraction")]
    assert macl and all(flops.cell_work(grid, c).graphed for c in macl)
    assert oar and not any(flops.cell_work(grid, c).graphed for c in oar)  # OAR's step stays eager


def test_the_schemas_arch_choices_are_the_resnets():
    schema = yaml.safe_load((REPO_ROOT / "schemas" / "config.schema.yaml").read_text())
    found = []

    def walk(node):
        if isinstance(node, dict):
            if isinstance(node.get("arch"), dict) and "enum" in node["arch"]:
                found.append(node["arch"]["enum"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    assert found == [list(RESNETS)]


def test_the_models_lists_are_views_of_the_families():
    from torchvision.models.resnet import BasicBlock, Bottleneck

    from contrastlab.models import packed, text, vision
    from contrastlab.training.sentence_step import ROBERTA_TYPES

    assert text.MASK_4D_MODEL_TYPES == tuple(TEXT_FAMILIES)
    assert ROBERTA_TYPES == ("roberta", "xlm-roberta", "camembert")
    assert packed.SUPPORTED_TYPES == ("bert", "roberta") and len(packed.SUPPORTED) == len(
        packed.SUPPORTED_TYPES
    )
    assert vision.ARCHS == {"resnet18": (BasicBlock, (2, 2, 2, 2)), "resnet50": (Bottleneck, (3, 4, 6, 3))}
    assert all(vision.ARCHS[a][0].expansion == r.expansion for a, r in RESNETS.items())
    assert flops.RESNET_LAYERS == {"resnet18": ((2, 2, 2, 2), 1), "resnet50": ((3, 4, 6, 3), 4)}
    assert flops.ENCODER_LAUNCHES == {"resnet18": (214, 86), "resnet50": (560, 226)}


def test_positions_are_offset_for_the_families_whose_transformers_code_offsets_them():
    from contrastlab.models.export import _max_seq_length

    offset = {
        t: _max_seq_length(
            Path("/nonexistent"), {"model_type": t, "max_position_embeddings": 514, "pad_token_id": 1}
        )
        for t in TEXT_FAMILIES
    }
    assert {t for t, limit in offset.items() if limit == 512} == {
        "roberta",
        "xlm-roberta",
        "camembert",
        "mpnet",
    }
    assert {t for t, limit in offset.items() if limit == 514} == {"bert", "distilbert", "electra"}


def test_the_step_modes_name_themselves():
    def name(**settings):
        return step_mode(
            settings, track="sentence", device_type="cuda", precision="bf16", model_type="bert"
        ).name

    assert (name(), name(cuda_graph=False), name(compile=True), name(compile=True, cuda_graph=False)) == (
        "graph",
        "eager",
        "compile + graph",
        "compile",
    )
    cpu = step_mode({}, track="sentence", device_type="cpu", precision="fp32", model_type="bert")
    assert (cpu.name, cpu.dev_batch) == ("eager", families.DEV_BATCH_SIZE_ELSEWHERE)
    image = step_mode({"oar_fraction": 0.1}, track="vision", device_type="cuda", precision="fp32", n_images=1)
    assert (image.name, image.dev_batch, len(image.notes)) == ("eager", None, 1)
