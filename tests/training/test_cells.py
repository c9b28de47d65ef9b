"""One training job per track (training.cells): a later search stage starts from the earlier winner, a
point equal to it gets its checkpoint, a diverged point leaves ``diverged.json`` (a configured cell fails)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contrastlab import search as S
from contrastlab.evaluation.vision import DIVERGED_KEY, evaluate_features, job_features
from contrastlab.training import cells, vision
from contrastlab.training.runtime import NonFiniteLossError
from tests.training.conftest import poison_loss

SMALL = dict(loss="infonce", lr=1e-4, batch_size=32, max_steps=4, eval_every=2, log_every=2, state_every=2)
SMALL_SETTINGS = {**SMALL, "seed": 42}


def train_sentence(tmp: Path, data: dict, settings: dict, **where) -> str:
    paths = dict(out_dir=tmp / "model", log_path=tmp / "train_log.jsonl", state_dir=tmp / "state")
    return cells.train_cell(settings, **paths, cache_dir=tmp.parent / "cache", **data, **where)


def selection_file(tmp: Path, winner_settings: dict, winner_model: Path) -> Path:
    path = tmp / "stage1.json"
    path.write_text(json.dumps({"winner_settings": winner_settings, "winner_model": str(winner_model)}))
    return path


def test_a_later_stage_point_trains_at_the_winners_settings_moved(tmp_path, sentence_data):
    winner = {**SMALL_SETTINGS, "lr": 5e-5}
    previous = selection_file(tmp_path, winner, tmp_path / "nowhere" / "model")
    point = S.SearchPoint("nie2023", "tiny-bert", "infonce", 2, 0, {}, {"lr": ("times", 2)})
    # the settings the rule knew before stage 1 had a winner: only the seed survives
    known = {**SMALL_SETTINGS, "lr": 1.0, "batch_size": 64}
    cell = tmp_path / "point"
    assert train_sentence(cell, sentence_data, known, point=point, previous_selection=previous) == "trained"
    summary = json.loads((cell / "model" / "train_summary.json").read_text())
    assert summary["settings"]["lr"] == 1e-4 and summary["settings"]["batch_size"] == 32
    assert summary["steps"] == 4 and S.read_point(cell / "model")["dev"] == summary["best_dev_spearman"]


def test_a_point_equal_to_the_earlier_winner_is_its_checkpoint(tmp_path):
    winner_dir = tmp_path / "winner" / "model"
    winner_dir.mkdir(parents=True)
    (winner_dir / "train_summary.json").write_text(
        json.dumps({"best_dev_spearman": 71.5, "settings": SMALL_SETTINGS, "best_step": 4})
    )
    (winner_dir / "model.safetensors").write_bytes(b"weights")
    (winner_dir.parent / "train_log.jsonl").write_text('{"event": "end"}\n')
    previous = selection_file(tmp_path, SMALL_SETTINGS, winner_dir)
    point = S.SearchPoint("nie2023", "tiny-bert", "infonce", 2, 0, {"lr": SMALL["lr"]})
    cell = tmp_path / "point"
    # no backbone, corpus or dev data is touched: nothing trains
    where = dict(backbone_dir="absent", corpus_path="absent", dev_data_dir="absent")
    done = train_sentence(
        cell, where, {**SMALL_SETTINGS, "lr": 3.0}, point=point, previous_selection=previous
    )
    assert done == "copied" and not (cell / "state").exists()
    assert (cell / "model" / "model.safetensors").read_bytes() == b"weights"
    assert (cell / "train_log.jsonl").read_text() == '{"event": "end"}\n'
    assert S.read_point(cell / "model")["dev"] == 71.5
    assert sorted(p.name for p in cell.iterdir()) == ["model", "train_log.jsonl"]  # no partial left


def test_previous_selection_needs_the_point(tmp_path):
    previous = selection_file(tmp_path, SMALL_SETTINGS, tmp_path / "w")
    with pytest.raises(ValueError, match="later stage's point"):
        train_sentence(tmp_path, {}, SMALL_SETTINGS, point=None, previous_selection=previous)


def test_a_diverging_point_is_recorded_and_passed_over_by_selection(tmp_path, sentence_data):
    point = S.SearchPoint("nie2023", "tiny-bert", "infonce", 1, 1, {"lr": 1e12})
    settings = {**SMALL_SETTINGS, "lr": 1e12}  # NaN within two steps
    cell = tmp_path / "diverged"
    assert train_sentence(cell, sentence_data, settings, point=point, previous_selection=None) == "diverged"
    # one record, written whole: no summary, no partial file, the snapshots gone
    assert sorted(p.name for p in (cell / "model").iterdir()) == ["diverged.json"]
    assert not (cell / "state").exists()
    record = json.loads((cell / "model" / "diverged.json").read_text())
    assert "not finite at step" in record["diverged"] and record["settings"] == settings
    log = [json.loads(line) for line in (cell / "train_log.jsonl").read_text().splitlines()]
    assert log == [{"event": "diverged", "error": record["diverged"]}]

    good = tmp_path / "good" / "model"
    good.mkdir(parents=True)
    (good / "train_summary.json").write_text(json.dumps({"best_dev_spearman": 60.0, "settings": SMALL}))
    points = [point, S.SearchPoint("nie2023", "tiny-bert", "infonce", 1, 0, {"lr": 1e-4})]
    selection = S.stage_selection(points, [cell / "model", good])
    assert selection["winner"] == points[1].name
    read = selection["points"][0]
    assert read["dev"] is None and read["diverged"] == record["diverged"] and read["settings"] == settings

    # the same settings in a configured cell: a failure, nothing recorded
    with pytest.raises(NonFiniteLossError):
        train_sentence(tmp_path / "configured", sentence_data, settings, point=None, previous_selection=None)
    assert not (tmp_path / "configured" / "model" / "diverged.json").exists()


def test_a_record_that_cannot_be_written_whole_is_not_there(tmp_path):
    with pytest.raises(TypeError):
        S.record_diverged(tmp_path / "model", tmp_path / "log.jsonl", {"lr": object()}, "loss nan")
    assert not (tmp_path / "model" / S.DIVERGED_FILE).exists()
    assert S.diverged_reason(tmp_path / "model") is None


EVALUATION = {"probes": ["linear", "knn"], "linear": {}, "knn": {}}


def train_image(tmp: Path, settings: dict, *, point: bool) -> str:
    paths = dict(out_dir=tmp / "encoder", log_path=tmp / "train_log.jsonl", state_dir=tmp / "state")
    return cells.train_vision_cell(settings, point=point, data_root=None, device="cpu", **paths)


def test_a_diverging_image_point_is_evaluated_as_diverged(tmp_path, monkeypatch, vision_settings):
    poison_loss(monkeypatch, vision, 2)  # a rate too large, without the minutes to reach it
    settings = vision_settings(max_steps=4, log_every=2, state_every=2)
    assert train_image(tmp_path, settings, point=True) == "diverged"
    encoder = tmp_path / "encoder"
    assert sorted(p.name for p in encoder.iterdir()) == ["diverged.json"]
    assert not (tmp_path / "state").exists()
    reason = S.diverged_reason(encoder)
    assert "not finite at step 2" in reason
    features = job_features(encoder, data_root=None)  # the GPU job: no encoder to extract with
    assert features == {DIVERGED_KEY: reason}
    metrics = evaluate_features(encoder, tmp_path / "absent.pt", EVALUATION)  # the CPU job: no features read
    assert metrics["scores"] == {} and metrics["encoder_diverged"] == reason
    assert set(metrics["diverged"]) == {"linear_top1", "knn_top1", "embedding_variance", "effective_rank_95"}

    with pytest.raises(NonFiniteLossError):  # a configured image cell
        train_image(tmp_path / "configured", settings, point=False)


def test_the_debugging_cli_trains_with_its_settings(tmp_path, tiny_bert, corpus, senteval_dir, capsys):
    paths = [tiny_bert, corpus, senteval_dir, tmp_path / "model", tmp_path / "log.jsonl", tmp_path / "state"]
    flags = [item for flag, path in zip(cells.CLI_PATHS, paths, strict=True) for item in (flag, str(path))]
    settings = json.dumps({**SMALL, "max_steps": 2, "eval_every": 2})
    flags += ["--cache-dir", str(tmp_path / "cache")]  # not the checkout's resources/cache (the guard)
    summary = cells.cli([*flags, "--device", "cpu", "--settings", settings, "--set", "precision=fp32"])
    assert summary["steps"] == 2 and summary["requested_precision"] == "fp32"  # a bare string, not JSON
    assert json.loads(capsys.readouterr().out)["best_step"] == summary["best_step"]
