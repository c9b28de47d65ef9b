"""What the plan's step modes rest on before anything is fetched: a backbone's model type (known Hub ids,
else the family its name spells, or none, said in the plan) and the card's bf16 (``auto``: fp32 without)."""

from __future__ import annotations

import json
import math
import re

import pytest

from contrastlab import config as cl_config
from contrastlab.cost import backbones, cards, plan
from contrastlab.cost import calibration as cl_calibration
from contrastlab.cost import flops as cl_flops
from contrastlab.families import TEXT_FAMILIES
from contrastlab.paths import REPO_ROOT
from tests.cost.common import NIE

CONFIG = REPO_ROOT / "config.yaml"


def _config(backbone_ids=None, gpu_model=None) -> dict:
    """config.yaml with its sentence backbones' hub ids or its card changed."""
    config = cl_config.load(CONFIG)
    for alias, hf_id in (backbone_ids or {}).items():
        config["backbones"][alias] = {**config["backbones"][alias], "hf_id": hf_id}
    if gpu_model:
        config["resources"] = {**config["resources"], "gpu_model": gpu_model}
    return config


def test_the_hubs_present_ids_are_priced_as_the_former_ids_config_yaml_names():
    shipped = cl_config.Grid(_config())
    present = cl_config.Grid(
        _config({alias: backbones.FORMER_HUB_IDS[spec["hf_id"]] for alias, spec in _sentence_backbones()})
    )
    assert {spec["hf_id"] for _, spec in _sentence_backbones()} == set(backbones.FORMER_HUB_IDS)
    for cell in shipped.cells:
        assert cl_flops.cell_work(present, cell) == cl_flops.cell_work(shipped, cell), cell
    assert plan.step_mode_blocks(present) == plan.step_mode_blocks(shipped) == []


def _sentence_backbones():
    return [(a, s) for a, s in cl_config.load(CONFIG)["backbones"].items() if "hf_id" in s]


@pytest.mark.parametrize(
    ("hf_id", "model_type"),
    [
        ("princeton-nlp/unsup-simcse-bert-base-uncased", "bert"),
        ("princeton-nlp/sup-simcse-roberta-large", "roberta"),
        ("FacebookAI/xlm-roberta-base", "xlm-roberta"),  # not roberta: the longer family holds it
        ("distilbert/distilbert-base-uncased", "distilbert"),
        ("almanach/camembert-base", "camembert"),
        ("microsoft/mpnet-base", "mpnet"),
        ("google/electra-base-discriminator", "electra"),
        ("microsoft/deberta-v3-base", ""),  # "bert" inside a word is not the family
        ("allenai/scibert_scivocab_uncased", ""),
        ("sentence-transformers/all-MiniLM-L6-v2", ""),
        ("google-bert/sentence-encoder", ""),  # the organisation's words do not count
        ("org/bert-to-roberta-distilled", ""),  # two families: no guess
    ],
)
def test_an_unknown_hub_id_names_a_family_by_whole_words_and_only_one(hf_id, model_type):
    assert backbones.model_type_named_by(hf_id) == model_type


def test_an_unknown_hub_id_is_priced_as_the_family_it_names_and_the_plan_says_so():
    named = "princeton-nlp/unsup-simcse-bert-base-uncased"
    grid = cl_config.Grid(_config({"bert-base": named, "roberta-base": "org/sentence-encoder"}))
    bert = backbones.backbone_transformer(grid, "bert-base")
    other = backbones.backbone_transformer(grid, "roberta-base")
    assert (bert.model_type, bert.model_type_from) == ("bert", "id")
    assert (other.model_type, other.model_type_from) == ("", "")
    assert cl_flops.cell_work(grid, NIE).padding_free  # IEEE fp32
    assert not cl_flops.cell_work(grid, cl_config.Cell("nie2023", "roberta-base", "cl", 42)).padding_free
    first, second = [paragraph.text for paragraph in plan.step_mode_blocks(grid)]
    assert f"`bert-base` (`{named}`)" in first and "as a `bert`, the family its id names" in first
    assert "`roberta-base` (`org/sentence-encoder`)" in second and "its id names none" in second
    assert all("resources/models/" in text and "`fetch_backbone`" in text for text in (first, second))


def test_a_fetched_config_json_gives_the_model_type_whatever_the_id(tmp_path):
    config = _config({"roberta-base": "org/sentence-encoder"})
    config["resources_dir"] = str(tmp_path)
    folder = tmp_path / "models" / "roberta-base"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(
        '{"model_type": "roberta", "hidden_size": 768, "num_hidden_layers": 12, "intermediate_size": 3072}'
    )
    grid = cl_config.Grid(config)
    model = backbones.backbone_transformer(grid, "roberta-base")
    assert (model.model_type, model.model_type_from) == ("roberta", "config")
    assert plan.step_mode_blocks(grid) == []


@pytest.mark.parametrize("model_type", list(TEXT_FAMILIES))
def test_a_fetched_config_json_of_every_listed_family_is_priced_by_the_plan(tmp_path, model_type):
    """A fetched config.json keyed in its family's own names (DistilBERT's ``dim``, ``n_layers``) is read
    for its shape, and the plan prices its cells."""
    from transformers import AutoConfig

    fetched = AutoConfig.for_model(model_type)
    config = _config({"bert-base": "org/sentence-encoder"})
    config["resources_dir"], config["results_dir"] = str(tmp_path), str(tmp_path / "results")
    config["select"] = {"experiments": ["nie2023"], "backbones": ["bert-base"], "methods": ["cl"]}
    path = tmp_path / "models" / "bert-base" / "config.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(fetched.to_dict()))
    grid = cl_config.Grid(config)
    model = backbones.backbone_transformer(grid, "bert-base")
    # transformers' own attribute names answer for every family (its attribute_map: DistilBERT's dim)
    assert (model.model_type, model.model_type_from, model.source) == (model_type, "config", str(path))
    shape = (fetched.hidden_size, fetched.num_hidden_layers, fetched.num_attention_heads)
    assert (model.hidden, model.layers, model.heads) == shape
    calibration = cl_calibration.load_calibration()
    jobs = plan.make_plan(grid, calibration, points=plan.plan_points(grid, calibration))
    hours = {job.cell: job.seconds[plan.AS_CONFIGURED] / 3600 for job in jobs if job.rule == "train"}
    assert hours and all(math.isfinite(h) and h > 0 for h in hours.values()), hours


@pytest.mark.parametrize(("card", "native"), [(None, True), ("H200", True), ("A100", True), ("V100", False)])
def test_precision_auto_is_priced_as_the_card_resolves_it(card, native):
    config = _config(gpu_model=card)
    config["precision_override"] = "auto"
    grid = cl_config.Grid(config)
    oar = cl_config.Cell("oar_cifar10", "resnet18-oar", "infonce-lr0.01", 42)
    work, image = cl_flops.cell_work(grid, NIE), cl_flops.cell_work(grid, oar)
    assert cards.native_bf16(card) is native
    modes = ("bf16", False, True) if native else ("fp32", True, False)
    assert (work.precision, work.padding_free, work.graphed) == modes
    assert image.precision == ("bf16" if native else "fp32")
    said = any("The V100 has no native bf16" in p.text for p in plan.step_mode_blocks(grid))
    assert said is not native


#: Each card's compute capability (NVIDIA's list of CUDA GPUs): torch computes bf16 natively from 8.0 on
#: (``torch.cuda.is_bf16_supported(including_emulation=False)``, which the trainer's runtime asks).
CAPABILITY = {
    **dict.fromkeys(["H100 PCIe", "H100 NVL", "H100", "H200 NVL", "H200"], 9.0),
    **{"A100": 8.0, "L40S": 8.9, "V100": 7.0, "P100": 6.0},
}


def test_a_card_computes_bf16_natively_where_torch_says_it_does():
    assert {card: cards.native_bf16(card) for card in cards.GPU_PEAKS} == {
        card: capability >= 8.0 for card, capability in CAPABILITY.items()
    }
    assert cards.native_bf16("Tesla V100-SXM2-32GB") is False and cards.native_bf16("NVIDIA H200") is True


def test_make_plan_prices_the_card_it_is_asked_for(tmp_path):
    # `make plan GPU_MODEL=V100` on a config that names no card: the modes follow the V100 too
    config = cl_config.load(REPO_ROOT / "config" / "demo.yaml")
    plan.plan_report(config, out_dir=tmp_path, echo=False, gpu_model="V100")
    text = (tmp_path / "plan.md").read_text()
    assert "The V100 has no native bf16" in text
    assert re.search(r"\| macl/tiny-bert/macl/seed\* \| \d+ \| fp32 \|", text)  # its one `auto` cell
