"""Backbone families and the step mode, decided once: the trainer's and the plan's view of every combination
agree, every configured cell is priced in the mode it trains in, and the models' and schema's lists are
views of the one table. The trainer's side is built from the trainer's own inputs (the backbone's
config.json, the precision its runtime resolves, the images it loads), never from the plan's."""

from __future__ import annotations

import functools
import itertools
import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import yaml
from hub_standin import HubStandin

from contrastlab import config as cl_config
from contrastlab import families
from contrastlab.artifacts import package_model_dir
from contrastlab.cost import flops
from contrastlab.data.fixtures import write_demo_corpus, write_senteval_fixture
from contrastlab.data.images import load_images
from contrastlab.families import RESNETS, TEXT_FAMILIES, step_mode
from contrastlab.models import packed, text, vision
from contrastlab.models.export import _max_seq_length
from contrastlab.models.text import backbone_source, materialize_backbone
from contrastlab.paths import REPO_ROOT
from contrastlab.precision import CHOICES
from contrastlab.training import runtime, sentence
from contrastlab.training import vision as vision_trainer
from contrastlab.training.capture import for_device
from contrastlab.training.sentence import TrainSettings
from contrastlab.training.sentence_step import ROBERTA_TYPES
from contrastlab.training.vision import VisionTrainSettings

CUDA = torch.device("cuda")  # a device object only: nothing here touches a GPU
CONFIGS = [REPO_ROOT / "config.yaml", *sorted((REPO_ROOT / "config").glob("*.yaml"))]

#: What the Hub serves for the ids the walks name, as the trainer's side sees it: each repository's
#: config.json ``model_type`` (the one key of it the trainer's step rule reads), and the former ids it
#: redirects to their repositories' present names (the Hub moved its legacy models under their
#: organisations: huggingface.co/bert-base-uncased answers as google-bert/bert-base-uncased).
HUB_MODEL_TYPES = {
    "google-bert/bert-base-uncased": "bert",
    "google-bert/bert-large-uncased": "bert",
    "FacebookAI/roberta-base": "roberta",
    "FacebookAI/roberta-large": "roberta",
    "princeton-nlp/unsup-simcse-bert-base-uncased": "bert",
}
HUB_RENAMED = {
    "bert-base-uncased": "google-bert/bert-base-uncased",
    "bert-large-uncased": "google-bert/bert-large-uncased",
    "roberta-base": "FacebookAI/roberta-base",
    "roberta-large": "FacebookAI/roberta-large",
}
#: Training images of CIFAR-10 and CIFAR-100 as torchvision loads them (no copy of either here); the
#: digits are loaded as the trainer loads them.
CIFAR_TRAIN_IMAGES = 50_000
#: Whether a card computes bf16 natively (torch's ``is_bf16_supported(including_emulation=False)``:
#: compute capability 8.0 and later; the V100 is 7.0). None: the plan's default card, an H200.
NATIVE_BF16 = {None: True, "H200": True, "V100": False}


def _sentence_decision(settings: TrainSettings, backbone_dir: Path):
    """The sentence trainer's decision (``sentence._for_device``) on a CUDA GPU at the precision its
    runtime resolves there (the caller sets the card's ``torch.cuda.is_bf16_supported``), and that
    precision."""
    precision = runtime.resolve_precision(settings.precision, CUDA)
    run = SimpleNamespace(device=CUDA, precision=SimpleNamespace(name=precision))
    return sentence._for_device(settings, run, backbone_dir)[0], precision


def _trainer_sentence(tmp_path: Path, settings: dict, model_type: str):
    """:func:`_sentence_decision` with the backbone's config.json naming ``model_type``."""
    (tmp_path / "config.json").write_text(json.dumps({"model_type": model_type}))
    decided, _ = _sentence_decision(TrainSettings(loss="infonce", **settings), tmp_path)
    return decided.cuda_graph, decided.padding_free, decided.dev_batch_size


def _card(monkeypatch, native_bf16: bool) -> None:
    """The trainer's runtime on a card with (or without) native bf16, as torch reports it."""
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: native_bf16)


@pytest.mark.parametrize("native_bf16", [True, False], ids=["bf16-card", "no-bf16-card"])
def test_every_sentence_combination_is_decided_alike_by_the_trainer_and_the_plan(
    tmp_path, monkeypatch, native_bf16
):
    _card(monkeypatch, native_bf16)
    types = [*TEXT_FAMILIES, "gpt2"]  # and a family the project does not list
    keys = ("precision", "cuda_graph", "compile", "padding_free", "grad_accum")
    grid = itertools.product(CHOICES, (None, True, False), (False, True), (None, True, False), (1, 2), types)
    agreed = refused = 0
    for *values, model_type in grid:
        settings = dict(zip(keys, values, strict=True))
        try:
            trainer = _trainer_sentence(tmp_path, settings, model_type)
        except ValueError:  # padding_free with the graph or compile, the graph with grad_accum 2
            refused += 1
            continue
        mode = flops.sentence_mode(settings, model_type, native_bf16)
        assert trainer == (mode.graph, mode.padding_free, mode.dev_batch), settings | {
            "model_type": model_type
        }
        assert flops.padding_free_for(settings, model_type, native_bf16) is trainer[1]
        agreed += 1
    assert (agreed, refused) == (960, 480)  # 5 choices x 8 types x (24 + 12)


def test_an_ieee_fp32_cell_that_asks_for_the_graph_or_compile_is_priced_as_the_graph_it_runs(
    tmp_path, monkeypatch
):
    _card(monkeypatch, True)
    for asked in ({"cuda_graph": True}, {"compile": True}):
        settings = {"precision": "fp32", **asked}
        assert _trainer_sentence(tmp_path, settings, "bert") == (True, False, 512)
        assert not flops.padding_free_for(settings, "bert")
        assert flops.sentence_mode(settings, "bert").name == (
            "graph" if "cuda_graph" in asked else "compile + graph"
        )
    assert flops.sentence_mode({"precision": "fp32"}, "bert").name == "padding-free"
    assert flops.sentence_mode({"precision": "bf16"}, "roberta").name == "graph"


def test_every_image_combination_is_decided_alike_by_the_trainer_and_the_plan():
    keys = ("precision", "cuda_graph", "compile", "oar_fraction", "drop_last")
    grid = itertools.product(
        CHOICES, (None, True, False), (False, True), (0.0, 0.1), (True, False), (1024, 1000)
    )
    outcomes = []
    for *values, n_images in grid:
        settings = {**dict(zip(keys, values, strict=True)), "batch_size": 256}
        trainer = plan = "refused"
        try:
            trainer = for_device(VisionTrainSettings(**settings), CUDA, n_images=n_images)[0].cuda_graph
        except ValueError:
            pass
        try:
            plan = flops.vision_mode(settings, n_images).graph
        except ValueError:
            pass
        assert trainer == plan, settings | {"n_images": n_images}
        outcomes.append(trainer)
    # of 240: 3 capturable steps x (None, true) x 5
    assert (outcomes.count(True), outcomes.count(False), outcomes.count("refused")) == (30, 145, 65)


def _fetched(spec: dict, out: Path) -> Path:
    """The folder rule ``fetch_backbone`` writes for a sentence backbone ``spec`` (its config.json, which
    the trainer reads), built here without the plan: a hub id fetched through
    :func:`~contrastlab.models.text.materialize_backbone` from the stand-in Hub; a package's or a
    folder's config.json, which it copies; a random backbone's BertConfig, which it saves."""
    source = backbone_source(spec)
    if source == "hf_id":
        return materialize_backbone(spec, out, lock_file=out.with_name(f"{out.name}.lock.json"))
    out.mkdir(parents=True)
    if source == "random":
        from transformers import BertConfig

        BertConfig(**spec["random"]).to_json_file(out / "config.json")
    else:
        folder = package_model_dir(spec["package"]) if source == "package" else Path(spec["path"])
        shutil.copy(folder / "config.json", out / "config.json")
    return out


@pytest.fixture
def fetch_backbone(tmp_path, monkeypatch):
    """``fetch(grid, alias)``: backbone ``alias``'s folder as rule fetch_backbone writes it
    (:func:`_fetched`), hub ids fetched from a stand-in Hub that serves :data:`HUB_MODEL_TYPES` and
    redirects :data:`HUB_RENAMED`; each spec fetched once."""
    with HubStandin() as hub:
        hub.configure_client(monkeypatch, tmp_path / "hf-home")
        for repo, model_type in HUB_MODEL_TYPES.items():
            config = json.dumps({"model_type": model_type}).encode()
            hub.add_repo(repo, {"config.json": config, "model.safetensors": b"stand-in weights"})
        for former, present in HUB_RENAMED.items():
            hub.redirect(former, present)
        folders: dict[str, Path] = {}

        def fetch(grid: cl_config.Grid, alias: str) -> Path:
            key = json.dumps(grid.backbone(alias), sort_keys=True)
            if key not in folders:
                folders[key] = _fetched(dict(grid.backbone(alias)), tmp_path / f"backbone{len(folders)}")
            return folders[key]

        yield fetch


@functools.cache
def _training_images(dataset: str) -> int:
    """The training images the image trainer loads (``len(data.labels)``)."""
    return len(load_images("digits", "train").labels) if dataset == "digits" else CIFAR_TRAIN_IMAGES


def _trainer_mode(grid: cl_config.Grid, cell: cl_config.Cell, backbone_dir: Path | None) -> str:
    """The mode the trainer runs ``cell`` in on a CUDA GPU (a sentence cell's with the precision it runs
    in), from the settings its rule hands it and the inputs it reads itself: the images it loads (less its
    validation split), the backbone's config.json in ``backbone_dir`` (sentence cells), the precision its
    runtime resolves on the card (whose ``torch.cuda.is_bf16_supported`` the caller sets)."""
    s = dict(grid.settings(cell))
    if grid.experiment(cell.experiment).track == "vision":
        vs = VisionTrainSettings.from_dict(s)
        n_images = _training_images(vs.dataset)
        kept = vision_trainer._trained_rows(vs, n_images, torch.device("cpu"))
        n_train = n_images if kept is None else len(kept)
        return "graph" if for_device(vs, CUDA, n_images=n_train)[0].cuda_graph else "eager"
    decided, precision = _sentence_decision(TrainSettings.from_dict(s), backbone_dir)
    mode = "padding-free" if decided.padding_free else "graph" if decided.cuda_graph else "eager"
    return f"{mode} {precision}"


#: The walks: every shipped config on the plan's default card, then the inputs that split plan and
#: trainer at bf5710a (docs/gpu-review.md §2): the Hub's present names of config.yaml's backbones, which
#: are not the ids its table was written with, before the backbones are fetched; a backbone named by a
#: Hub id no table holds; and a card without native bf16 under ``precision: auto`` (config.yaml's every
#: cell through the switch; demo.yaml's one ``auto`` sentence cell).
HUB_IDS = {"bert-base": "google-bert/bert-base-uncased", "roberta-base": "FacebookAI/roberta-base"}
WALKS = [
    *((path.name, path, {}) for path in CONFIGS),
    ("config.yaml-hub-ids", REPO_ROOT / "config.yaml", {"hub_ids": HUB_IDS}),
    (
        "config.yaml-simcse-id",
        REPO_ROOT / "config.yaml",
        {"hub_ids": {"bert-base": "princeton-nlp/unsup-simcse-bert-base-uncased"}},
    ),
    ("config.yaml-V100-auto", REPO_ROOT / "config.yaml", {"gpu_model": "V100", "precision_override": "auto"}),
    ("demo.yaml-V100", REPO_ROOT / "config" / "demo.yaml", {"gpu_model": "V100"}),
]


def _variant(path: Path, hub_ids=None, gpu_model=None, precision_override=None) -> dict:
    """The config at ``path`` with its backbones' hub ids, its card or its precision switch changed."""
    config = cl_config.load(path)
    for alias, hf_id in (hub_ids or {}).items():
        config["backbones"][alias] = {**config["backbones"][alias], "hf_id": hf_id}
    if gpu_model:
        config["resources"] = {**config["resources"], "gpu_model": gpu_model}
    if precision_override:
        config["precision_override"] = precision_override
    return config


@pytest.mark.parametrize(("path", "change"), [w[1:] for w in WALKS], ids=[w[0] for w in WALKS])
def test_the_plan_prices_every_configured_cell_in_the_mode_the_trainer_runs(
    path, change, fetch_backbone, monkeypatch
):
    grid = cl_config.Grid(_variant(path, **change))
    _card(monkeypatch, NATIVE_BF16[grid.compute.get("gpu_model")])
    assert grid.cells
    for cell in grid.cells:
        work = flops.cell_work(grid, cell)
        priced = "padding-free" if work.padding_free else "graph" if work.graphed else "eager"
        if work.track == "sentence":
            priced = f"{priced} {work.precision}"
            trained = _trainer_mode(grid, cell, fetch_backbone(grid, cell.backbone))
        else:
            trained = _trainer_mode(grid, cell, None)
        assert priced == trained, cell


def test_macls_captured_image_step_is_priced_as_captured():
    grid = cl_config.Grid(cl_config.load(REPO_ROOT / "config.yaml"))
    macl = [c for c in grid.cells if c.experiment == "macl_cifar10"]
    oar = [c for c in grid.cells if c.experiment == "oar_cifar10" and grid.settings(c).get("oar_fraction")]
    assert macl and all(flops.cell_work(grid, c).graphed for c in macl)
    assert oar and not any(flops.cell_work(grid, c).graphed for c in oar)  # OAR's step stays eager


def test_the_schemas_arch_choices_are_the_resnets():
    schema = yaml.safe_load((REPO_ROOT / "schemas" / "config.schema.yaml").read_text())

    def arch_enums(node):
        if isinstance(node, dict):
            if isinstance(node.get("arch"), dict) and "enum" in node["arch"]:
                yield node["arch"]["enum"]
            node = list(node.values())
        for value in node if isinstance(node, list) else []:
            yield from arch_enums(value)

    assert list(arch_enums(schema)) == [list(RESNETS)]


def test_the_models_lists_are_views_of_the_families():
    from torchvision.models.resnet import BasicBlock, Bottleneck

    assert text.MASK_4D_MODEL_TYPES == tuple(TEXT_FAMILIES)
    assert ROBERTA_TYPES == ("roberta", "xlm-roberta", "camembert")
    assert [t for t in TEXT_FAMILIES if packed.supported(t)] == ["bert", "roberta"]
    assert vision.ARCHS == {"resnet18": (BasicBlock, (2, 2, 2, 2)), "resnet50": (Bottleneck, (3, 4, 6, 3))}
    assert all(vision.ARCHS[a][0].expansion == r.expansion for a, r in RESNETS.items())
    assert flops.RESNET_LAYERS == {"resnet18": ((2, 2, 2, 2), 1), "resnet50": ((3, 4, 6, 3), 4)}
    assert flops.ENCODER_LAUNCHES == {"resnet18": (214, 86), "resnet50": (560, 226)}


def test_positions_are_offset_for_the_families_whose_transformers_code_offsets_them():
    offset = {
        t: _max_seq_length(
            Path("/nonexistent"), {"model_type": t, "max_position_embeddings": 514, "pad_token_id": 1}
        )
        for t in TEXT_FAMILIES
    }
    offset_families = {"roberta", "xlm-roberta", "camembert", "mpnet"}
    assert {t for t, limit in offset.items() if limit == 512} == offset_families
    assert {t for t, limit in offset.items() if limit == 514} == {"bert", "distilbert", "electra"}


def test_the_step_modes_name_themselves():
    def name(**settings):
        return step_mode(
            settings, track="sentence", device_type="cuda", precision="bf16", model_type="bert"
        ).name

    names = (name(), name(cuda_graph=False), name(compile=True), name(compile=True, cuda_graph=False))
    assert names == ("graph", "eager", "compile + graph", "compile")
    cpu = step_mode({}, track="sentence", device_type="cpu", precision="fp32", model_type="bert")
    assert (cpu.name, cpu.dev_batch) == ("eager", families.DEV_BATCH_SIZE_ELSEWHERE)
    image = step_mode({"oar_fraction": 0.1}, track="vision", device_type="cuda", precision="fp32", n_images=1)
    assert (image.name, image.dev_batch, len(image.notes)) == ("eager", None, 1)


@pytest.mark.parametrize("model_type", TEXT_FAMILIES)
def test_each_familys_dropout_keys_set_every_dropout_of_its_model(model_type):
    """Set to 0.25 through the family's ``dropout_keys``, every ``nn.Dropout`` of its model drops at 0.25."""
    from transformers import AutoConfig, AutoModel

    sizes = dict(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32)
    sizes |= dict(dim=16, hidden_dim=32, n_layers=1, n_heads=2)  # DistilBERT's names for the same sizes
    keys = TEXT_FAMILIES[model_type].dropout_keys
    config = AutoConfig.for_model(model_type, vocab_size=50, **sizes, **dict.fromkeys(keys, 0.25))
    model = AutoModel.from_config(config)
    assert {m.p for m in model.modules() if isinstance(m, torch.nn.Dropout)} == {0.25}
    assert TEXT_FAMILIES["bert"].dropout_keys == ("hidden_dropout_prob", "attention_probs_dropout_prob")


@pytest.mark.parametrize("model_type", TEXT_FAMILIES)
def test_each_familys_config_keys_read_the_shape_its_config_json_holds(model_type):
    """Sizes set through transformers' attribute names come back from config.json (``config_shape``)."""
    from transformers import AutoConfig

    config = AutoConfig.for_model(model_type)
    config.hidden_size, config.num_hidden_layers, config.num_attention_heads = 48, 3, 4
    config.vocab_size, config.max_position_embeddings = 77, 130
    shape = families.config_shape(json.loads(config.to_json_string()))  # what save_pretrained writes
    got = (shape.model_type, shape.hidden, shape.layers, shape.heads, shape.vocab, shape.positions)
    assert got == (model_type, 48, 3, 4, 77, 130)
    assert shape.token_types == getattr(config, "type_vocab_size", 0)
    with pytest.raises(ValueError, match=rf"^here: no '{TEXT_FAMILIES[model_type].config_keys.hidden}', "):
        families.config_shape({"model_type": model_type}, "here")


def _tiny_distilbert(out: Path, tokenizer_dir: Path) -> Path:
    """A random two-layer DistilBERT (its config's dropouts the defaults, 0.1) with the MiniLM tokenizer."""
    from transformers import AutoTokenizer, DistilBertConfig, DistilBertModel

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    torch.manual_seed(0)
    config = DistilBertConfig(
        vocab_size=tokenizer.vocab_size, dim=32, hidden_dim=64, n_layers=2, n_heads=2, initializer_range=0.2
    )
    DistilBertModel(config).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


@pytest.mark.parametrize("model_type", ["bert", "distilbert"])
def test_the_trainer_sets_the_dropout_through_the_familys_keys(
    model_type, tmp_path, tiny_bert, minilm_dir, monkeypatch
):
    """A BERT or DistilBERT cell trains at the cell's dropout; the checkpoint's config keeps the 0.1."""
    backbone = tiny_bert
    if model_type == "distilbert":
        backbone = _tiny_distilbert(tmp_path / "distilbert", minilm_dir)
    built, load = [], sentence._load_model
    monkeypatch.setattr(sentence, "_load_model", lambda folder, p: built.append(load(folder, p)) or built[-1])
    settings = dict(batch_size=16, max_steps=2, eval_every=2, state_every=None, dropout=0.3)
    summary = sentence.train(
        TrainSettings(loss="infonce", **settings),
        backbone_dir=backbone,
        corpus_path=write_demo_corpus(tmp_path / "corpus.txt", 64),
        dev_data_dir=write_senteval_fixture(tmp_path / "senteval"),
        out_dir=tmp_path / "model",
        log_path=tmp_path / "log.jsonl",
        state_dir=tmp_path / "state",
        cache_dir=tmp_path / "cache",
        device="cpu",
        progress=False,
    )
    keys = TEXT_FAMILIES[model_type].dropout_keys
    (model,) = built
    assert summary["steps"] == 2 and model.config.model_type == model_type
    assert {m.p for m in model.modules() if isinstance(m, torch.nn.Dropout)} == {0.3}  # trained at 0.3
    saved = json.loads((tmp_path / "model" / "config.json").read_text())
    assert [getattr(model.config, k) for k in keys] == [saved[k] for k in keys] == [0.1, 0.1]
