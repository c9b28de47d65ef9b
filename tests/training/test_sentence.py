"""The sentence trainer on a tiny random BERT (CPU, seconds per run)."""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from scipy.stats import spearmanr

from contrastlab.losses import build_loss
from contrastlab.paths import read_json
from contrastlab.training import sentence
from contrastlab.training import state as st
from contrastlab.training.sentence import NonFiniteLossError, TrainSettings, train
from contrastlab.training.sentence_step import build_head, embed_pairs, train_step
from tests import forked
from tests.training.conftest import TINY_SENTENCE, poison_loss
from tests.training.test_state import Payload

SCHEDULE_FIRST = 3  # a long module: tests/conftest.py starts the highest numbers first

HERE = Path(__file__).parent
RUNNER = HERE / "_run_train.py"  # the killed run, in a process of its own (forked: tests/forked.py)
FAMILIES = {  # one loss per paper family, with the protocol options its experiment uses
    "nie2023": dict(loss="infonce", protocol="simcse"),
    "li2024": dict(loss="mmhe", protocol="li2024", precision="fp32"),
    "macl": dict(loss="macl", protocol="simcse", dropout=0.2),
}


def run(tmp: Path, train_tiny, **overrides) -> tuple[dict, Path, Path]:
    """``train_tiny``'s cell for 12 steps with ``overrides`` in ``tmp`` (on the CPU: these tests mean it,
    bit-equality and the CPU's check cadence): its summary, checkpoint folder and log."""
    summary = train_tiny(tmp, **{"max_steps": 12, **overrides})
    return summary, tmp / "model", tmp / "log.jsonl"


def read_log(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def family_runs(tmp_path_factory, train_tiny):
    return {family: run(tmp_path_factory.mktemp(family), train_tiny, **hp) for family, hp in FAMILIES.items()}


@pytest.mark.parametrize("family", FAMILIES)
def test_each_loss_family_trains_and_keeps_dev_score(family, family_runs, tiny_bert):
    summary, out, log = family_runs[family]
    assert summary["steps"] == 12 and summary["best_step"] in (4, 8, 12)
    start = summary["evals"][0]
    assert start["step"] == 0
    # A random tiny BERT has nothing to gain from 12 steps; the score must not fall (1 point of slack)
    assert summary["best_dev_spearman"] >= start["dev_spearman"] - 1.0
    records = read_log(log)
    assert [r["event"] for r in records][:2] == ["start", "eval"] and records[-1]["event"] == "end"
    train_lines = [r for r in records if r["event"] == "train"]
    assert [r["step"] for r in train_lines] == [4, 8, 12]
    assert all(np.isfinite(r["loss"]) and r["lr"] > 0 and r["stats"] for r in train_lines)
    evals = [r for r in records if r["event"] == "eval"]
    assert [r["step"] for r in evals] == [0, 4, 8, 12]
    assert all({"dev_spearman", "dev_align", "dev_uniformity"} <= set(r) for r in evals)
    assert records[0]["meta"]["versions"]["torch"] and "git_sha" in records[0]["meta"]
    assert json.loads((out / "train_summary.json").read_text())["best_step"] == summary["best_step"]
    config = json.loads((out / "config.json").read_text())
    assert config["hidden_dropout_prob"] == 0.1  # the backbone's value, whatever dropout trained with
    assert not (out.parent / "state").exists()  # snapshots are removed once the checkpoint is out
    if family == "li2024":  # embeddings frozen
        before, after = load_file(tiny_bert / "model.safetensors"), load_file(out / "model.safetensors")
        emb = [k for k in after if "embeddings" in k]
        assert emb and all(torch.equal(before[k], after[k]) for k in emb)
        assert any(not torch.equal(before[k], after[k]) for k in after if "encoder" in k)


def test_checkpoint_loads_and_reproduces_logged_dev_score(family_runs, senteval_dir):
    from transformers import AutoModel, AutoTokenizer

    from contrastlab.models import make_encoder
    from contrastlab.senteval.tasks import load_sts_split
    from contrastlab.training.dev import DevEvaluator

    summary, out, _ = family_runs["nie2023"]
    model = AutoModel.from_pretrained(out).eval()
    tokenizer = AutoTokenizer.from_pretrained(out)
    # The same computation as during training: bit-identical, so the checkpoint is the selected model.
    again = DevEvaluator(senteval_dir, "STSBenchmark", tokenizer, torch.device("cpu"))(model)
    assert again["dev_spearman"] == summary["best_dev_spearman"]
    # An independent path (the evaluator's encoder: other batches, other padding): equal up to float noise.
    encode = make_encoder(model, tokenizer, pooling="cls")
    a, b, gold = load_sts_split(senteval_dir, "STSBenchmark", "dev")
    ea, eb = encode(a), encode(b)
    cos = (ea * eb).sum(1) / np.linalg.norm(ea, axis=1) / np.linalg.norm(eb, axis=1)
    assert spearmanr(cos, gold).statistic * 100 == pytest.approx(summary["best_dev_spearman"], abs=0.05)


def test_kept_checkpoint_is_a_sentence_transformer_with_the_cells_pooling(family_runs):
    """sentence-transformers loads the kept checkpoint and returns the vectors the evaluator scores."""
    from contrastlab.models import load_backbone, make_encoder
    from contrastlab.senteval.protocol import CELL_POOLING

    SentenceTransformer = pytest.importorskip("sentence_transformers").SentenceTransformer
    _, out, _ = family_runs["nie2023"]
    written = json.loads((out / "config_sentence_transformers.json").read_text())
    assert written["contrastlab_pooling"] == CELL_POOLING
    sentences = ["A man is playing a guitar.", "The stock market fell on Monday.", "Rain again."]
    model, tokenizer = load_backbone(out, device="cpu")
    expected = make_encoder(model, tokenizer, pooling=CELL_POOLING, progress=False)(sentences)
    got = SentenceTransformer(str(out), device="cpu").encode(sentences)
    assert np.abs(got - expected).max() <= 1e-5


def _info_step(state_dir: Path) -> int:
    return read_json(state_dir / st.STATE_INFO).get("step", -1)  # -1 until the first snapshot is whole


# Snapshots every 2 steps, logs every 3: a resumed run must log the same interval means. fp16: CPU
# autocast + GradScaler("cpu"), whose state is in the snapshot (the loss scale is logged). The geometry
# analysis too: a resumed run must log the same probe statistics.
KILL_SETTINGS = {**TINY_SENTENCE, "max_steps": 14, "state_every": 2, "log_every": 3}
KILL_SETTINGS |= {"analysis_every": 5, "analysis_sentences": 64, "analysis_batch": 32}


def _train_args(settings: dict, data: dict, folder: Path, cache: Path) -> dict:
    """``sentence.train``'s arguments as JSON for ``_run_train.py`` (which trains on the CPU)."""
    paths = {**data, "out_dir": folder / "model", "log_path": folder / "log.jsonl", "cache_dir": cache}
    paths |= {"state_dir": folder / "state"}
    return {"settings": settings, **{k: str(v) for k, v in paths.items() if k != "device"}}


def _train_in_process(args: dict) -> None:
    """What _run_train.py does without its sleep, in this process (one torch thread: the conftest's)."""
    assert torch.get_num_threads() == 1  # as _run_train.py: bit-equality needs the same thread count
    settings = TrainSettings.from_dict(args["settings"])
    train(settings, progress=False, device="cpu", **{k: v for k, v in args.items() if k != "settings"})


def _wait(proc: multiprocessing.Process, tmp_path: Path, ready, what: str) -> None:
    """Until ``ready()``: the killed run (its output in ``killed.log``) must not end first, and ``what``
    must be seen within two minutes."""
    deadline = time.monotonic() + 120
    while not ready():
        assert proc.is_alive(), f"run ended before the kill: {(tmp_path / 'killed.log').read_text()[-2000:]}"
        assert time.monotonic() < deadline, f"no {what} seen in time"
        time.sleep(0.02)


def _resumed_as_straight(killed_args: dict, folder: Path, straight_dir: Path) -> dict:
    """The killed run in ``folder`` resumed in this process: its selection, dev scores and weights are the
    uninterrupted run's, bit for bit. Returns its summary."""
    _train_in_process(killed_args)
    resumed = json.loads((folder / "model/train_summary.json").read_text())
    straight = json.loads((straight_dir / "model/train_summary.json").read_text())
    assert straight["resumed_from"] == []
    for key in ("best_dev_spearman", "best_step", "steps", "evals"):
        assert resumed[key] == straight[key], key
    a, b = (load_file(f / "model/model.safetensors") for f in (folder, straight_dir))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    return resumed


@pytest.fixture(scope="module")
def straight_runs(tmp_path_factory, sentence_data):
    """The uninterrupted run per precision, trained once for all kill points (in this process)."""
    folders: dict[str, Path] = {}

    def get(precision: str) -> Path:
        if precision not in folders:
            root = tmp_path_factory.mktemp(f"straight-{precision}")
            settings = {**KILL_SETTINGS, "precision": precision}
            _train_in_process(_train_args(settings, sentence_data, root / "straight", root / "cache"))
            folders[precision] = root / "straight"
        return folders[precision]

    return get


@pytest.mark.fault("SIGKILL of a training job at a random step", "resumes; checkpoint and log bit-identical")
@pytest.mark.parametrize("kill_seed, precision", [(0, "fp32"), (1, "fp32"), (2, "fp32"), (3, "fp16")])
def test_resume_after_sigkill_is_bit_identical(
    tmp_path, sentence_data, kill_seed, precision, observed, straight_runs, read_curves
):
    """Killed after a random snapshot, a run resumes to the straight run's weights, log, curves, bitwise."""
    settings = {**KILL_SETTINGS, "precision": precision}
    chooser = random.Random(kill_seed)
    kill_after = chooser.choice([2, 4, 6, 8, 10])
    killed_args = _train_args(settings, sentence_data, tmp_path / "killed", tmp_path / "cache")

    proc = forked.run_script(RUNNER, [json.dumps({**killed_args, "sleep": 0.15})], tmp_path / "killed.log")
    _wait(proc, tmp_path, lambda: _info_step(tmp_path / "killed" / "state") >= kill_after, "snapshot")
    time.sleep(chooser.uniform(0, 0.3))  # somewhere in the next steps
    proc.kill()  # SIGKILL
    proc.join()
    assert not (tmp_path / "killed" / "model").exists()

    straight_dir = straight_runs(precision)
    resumed = _resumed_as_straight(killed_args, tmp_path / "killed", straight_dir)
    assert resumed["resumed_from"] and resumed["resumed_from"][0] >= kill_after

    logs = {"killed": tmp_path / "killed" / "log.jsonl", "straight": straight_dir / "log.jsonl"}

    def metrics(name):
        keep = ("step", "loss_scale", "skipped_steps", "loss", "loss_last", "lr", "grad_norm", "stats")
        keep += ("dev_spearman", "dev_align", "dev_uniformity")
        records = read_log(logs[name])
        return [{k: r[k] for k in keep if k in r} for r in records if r["event"] in ("train", "eval")]

    assert metrics("killed") == metrics("straight")
    geometry = [
        [r for r in read_log(logs[name]) if r["event"] == "geometry"] for name in ("killed", "straight")
    ]
    assert [r["step"] for r in geometry[1]] == [0, 5, 10, 14] and geometry[0] == geometry[1]
    curves = [read_curves(folder / "state.tensorboard") for folder in (tmp_path / "killed", straight_dir)]
    assert curves[0].keys() == curves[1].keys() and {"dev/spearman", "train/grad_norm"} <= curves[1].keys()
    assert {"probe/align", "probe/uniformity", "probe/gd_active", "train/stats/align"} <= curves[1].keys()
    for tag, points in curves[1].items():  # every tag's steps once each, and the same values
        timing = tag in ("train/steps_per_s", "train/sentences_per_s", "train/ms_per_step", "dev/seconds")
        assert [s for s, _ in curves[0][tag]] == [s for s, _ in points], tag
        assert timing or curves[0][tag] == points, tag
    if precision == "fp16":
        assert {"train/loss_scale", "train/skipped_steps"} <= curves[1].keys()
        assert resumed["precision"] == "fp16" and resumed["loss_scaling"]
        assert all(
            "loss_scale" in r for r in read_log(tmp_path / "killed" / "log.jsonl") if r["event"] == "train"
        )
    observed(
        f"{precision}: killed after step {kill_after}, resumed from step {resumed['resumed_from'][0]}; "
        "weights equal"
    )


@pytest.mark.fault(
    "SIGKILL while a snapshot is written in the background",
    "resumes from the previous complete snapshot; checkpoint and log bit-identical",
)
def test_a_kill_during_a_background_snapshot_write_resumes_from_the_previous_one(
    tmp_path, sentence_data, observed, straight_runs
):
    """A kill mid-write of step 4's snapshot leaves step 2's, which resumes to the straight run, bitwise."""
    killed_args = _train_args(KILL_SETTINGS, sentence_data, tmp_path / "killed", tmp_path / "cache")
    state_dir = tmp_path / "killed" / "state"
    proc = forked.run_script(
        RUNNER, [json.dumps({**killed_args, "slow_write": 120.0})], tmp_path / "killed.log"
    )

    def writing_after_step_6() -> bool:
        partial = list(state_dir.glob(f".{st.STATE_FILE}.*.partial"))
        steps = [r.get("step", 0) for r in read_log(state_dir / st.LOG_FILE)] if partial else []
        return bool(partial) and max(steps, default=0) >= 6

    _wait(proc, tmp_path, writing_after_step_6, "background write")
    assert _info_step(state_dir) == 2  # step 4's snapshot is the one being written
    proc.kill()  # SIGKILL
    proc.join()

    resumed = _resumed_as_straight(killed_args, tmp_path / "killed", straight_runs("fp32"))
    assert resumed["resumed_from"] == [2]
    observed("killed while step 4's snapshot was written, step 6 trained; resumed from step 2, weights equal")


def test_grad_accum_without_dropout_equals_one_big_batch(tmp_path, train_tiny):
    """With dropout 0 the forward is deterministic: k micro-batches must give the plain step's updates."""
    common = dict(max_steps=3, eval_every=3, log_every=1, dropout=0.0)
    _, out1, log1 = run(tmp_path / "ga1", train_tiny, **common)
    _, out2, log2 = run(tmp_path / "ga2", train_tiny, **common, grad_accum=3)
    losses1 = [r["loss"] for r in read_log(log1) if r["event"] == "train"]
    losses2 = [r["loss"] for r in read_log(log2) if r["event"] == "train"]
    np.testing.assert_allclose(losses1, losses2, rtol=1e-5)
    a, b = load_file(out1 / "model.safetensors"), load_file(out2 / "model.safetensors")
    # Adam turns float noise (summation order) in near-zero gradients into updates of up to ~lr per
    # step, on whichever elements happen to have them (machine-dependent): every element stays within
    # the 3 steps' bound, and all but a handful agree to a tenth of one step's update.
    lr, steps = TINY_SENTENCE["lr"], common["max_steps"]
    diffs = torch.cat([(a[key].float() - b[key].float()).abs().flatten() for key in a])
    assert diffs.max() <= 2 * steps * lr, diffs.max()
    assert (diffs > 0.1 * lr).sum() <= max(5, 1e-5 * diffs.numel()), int((diffs > 0.1 * lr).sum())


def test_gradient_caching_replays_the_dropout_masks(tiny_bert, tokenized):
    """train_step with micro-batches = encoding the same micro-batches with a graph (same RNG draws), so the
    loss and every gradient are those of one pass over the whole batch."""
    tokenizer, cached = tokenized
    chunks = [cached.batch(np.arange(i, i + 8), tokenizer.pad_token_id) for i in (0, 8, 16)]
    model = sentence._load_model(tiny_bert, 0.1).train()
    head, _ = build_head("simcse", "bert", model.config.hidden_size)
    loss_fn = build_loss("infonce")
    params = [*model.parameters(), *head.parameters()]

    torch.manual_seed(0)
    cached_out, _, _ = train_step(
        model, head, loss_fn, chunks, autocast=contextlib.nullcontext, with_stats=False
    )
    cached_grads = [None if p.grad is None else p.grad.clone() for p in params]  # the pooler has none
    for p in params:
        p.grad = None
    torch.manual_seed(0)
    views = [embed_pairs(model, head, ids, mask, contextlib.nullcontext) for ids, mask in chunks]
    direct = loss_fn(torch.cat([v[0] for v in views]), torch.cat([v[1] for v in views]), with_stats=False)
    direct.loss.backward()
    torch.testing.assert_close(cached_out.loss, direct.loss)
    assert sum(g is not None for g in cached_grads) > 10
    for got, want in zip(cached_grads, [p.grad for p in params], strict=True):
        assert (got is None) == (want is None)
        if got is not None:
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-7)


@pytest.mark.fault("NaN loss injected at step 3", "the cell fails naming step, loss and stats; no checkpoint")
def test_nan_loss_fails_fast_naming_step_loss_and_stats(tmp_path, train_tiny, monkeypatch):
    poison_loss(monkeypatch, sentence, 3)
    with pytest.raises(NonFiniteLossError, match=r"loss 'infonce'.*not finite at step 3.*stats at step 3"):
        run(tmp_path, train_tiny, log_every=5)
    assert not (tmp_path / "model").exists()


@pytest.mark.fault(
    "NaN loss at step 3, checked at the CUDA cadence", "the error names step 3, found at step 4"
)
def test_nan_loss_at_the_cuda_check_cadence_names_the_first_bad_step(
    tmp_path, train_tiny, monkeypatch, observed
):
    """With check_every=0 (CUDA's) the flag is read at step 4's evaluation; the message names step 3."""
    poison_loss(monkeypatch, sentence, 3)
    with pytest.raises(NonFiniteLossError, match=r"not finite at step 3 \(detected at step 4") as caught:
        train_tiny(tmp_path, max_steps=12, log_every=5, check_every=0)
    observed(str(caught.value)[:80])


@pytest.mark.fault(
    "write error while saving a snapshot", "the previous snapshot stays intact; a rerun resumes"
)
def test_write_error_while_saving_keeps_the_previous_snapshot(tmp_path, train_tiny, monkeypatch, observed):
    real_save = torch.save
    saves = {"n": 0}

    def save_then_fail(payload, handle, *args, **kwargs):
        saves["n"] += 1
        if saves["n"] == 2:  # the second snapshot: half written, then the disk is full
            handle.write(b"partial")
            raise OSError(28, "No space left on device")
        return real_save(payload, handle, *args, **kwargs)

    monkeypatch.setattr(st.torch, "save", save_then_fail)
    with pytest.raises(OSError, match="No space left"):
        run(tmp_path, train_tiny, max_steps=8, state_every=2)
    state_dir = tmp_path / "state"
    info = json.loads((state_dir / st.STATE_INFO).read_text())
    assert info["step"] == 2
    payload = torch.load(state_dir / st.STATE_FILE, map_location="cpu", weights_only=True)
    assert payload["fingerprint"]
    assert not [p.name for p in state_dir.iterdir() if ".tmp" in p.name or p.name.endswith(".partial")]

    monkeypatch.setattr(st.torch, "save", real_save)
    summary, _, _ = run(tmp_path, train_tiny, max_steps=8, state_every=2)
    assert summary["resumed_from"] == [2] and summary["steps"] == 8
    observed("OSError at the 2nd snapshot; snapshot of step 2 loaded; rerun resumed from step 2")


def test_out_of_memory_suggests_smaller_batch_or_grad_accum(tmp_path, train_tiny, monkeypatch):
    def oom(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(sentence, "train_step", oom)
    with pytest.raises(MemoryError, match=r"lower batch_size or raise grad_accum \(e.g. grad_accum=2"):
        run(tmp_path, train_tiny)


def test_a_backbone_folder_without_config_json_names_the_rule_that_materialises_it(tmp_path, sentence_data):
    """The refusal names the folder and the fix, not a bare FileNotFoundError of config.json."""
    (tmp_path / "backbone").mkdir()
    data = {**sentence_data, "backbone_dir": tmp_path / "backbone"}
    paths = dict(out_dir=tmp_path / "model", log_path=tmp_path / "log.jsonl", state_dir=tmp_path / "state")
    refusal = r"backbone folder .*backbone has no config.json; materialise it first \(rule fetch_backbone\)"
    with pytest.raises(FileNotFoundError, match=refusal):
        train(TrainSettings(loss="infonce", max_steps=2), **data, **paths, progress=False)


def test_settings_validate_eagerly():
    with pytest.raises(ValueError, match="unknown training setting.*bogus"):
        TrainSettings.from_dict({"loss": "infonce", "bogus": 1})
    with pytest.raises(ValueError, match="protocol must be one of simcse, li2024"):
        TrainSettings(loss="infonce", protocol="simcse2")
    with pytest.raises(ValueError, match="batch_size must be >= 2"):
        TrainSettings(loss="infonce", batch_size=1)
    settings = TrainSettings.from_dict({"loss": "mpt", "loss_hp": {"m": 0.23}, "lr": 1e-5})
    assert settings.to_dict()["loss_hp"] == {"m": 0.23} and TrainSettings(**settings.to_dict()) == settings
    whole = TrainSettings.from_dict({"loss": "infonce", "batch_size": 16.0, "eval_every": 10.0, "lr": 1.0})
    assert (whole.batch_size, whole.eval_every, whole.lr) == (16, 10, 1.0)  # the schema's integer takes 16.0
    assert [type(whole.batch_size), type(whole.eval_every), type(whole.lr)] == [int, int, float]


def test_stale_state_of_another_run_is_discarded(tmp_path, train_tiny):
    state = tmp_path / "state"
    state.mkdir()
    torch.save({"fingerprint": "someone-else", "finished": True, "summary": {}}, state / "state.pt")
    summary, out, _ = run(tmp_path, train_tiny, max_steps=2, eval_every=2)
    assert summary["resumed_from"] == [] and (out / "model.safetensors").exists()


@pytest.mark.fault(
    "a planted pickle (__reduce__ creates a file) as the cell's state.pt", "the cell stops; payload never run"
)
def test_a_planted_snapshot_stops_the_cell_and_never_runs(tmp_path, train_tiny, observed):
    """S3: a pickle with code as the snapshot stops the cell in one line; nothing trained or deleted."""
    state, marker = tmp_path / "state", tmp_path / "PWNED"
    state.mkdir()
    torch.save({"fingerprint": "someone-else", "rng": Payload(marker)}, state / st.STATE_FILE)
    with pytest.raises(
        st.SnapshotUnreadableError, match=re.escape(f"delete the cell's state folder {state} to")
    ) as caught:
        run(tmp_path, train_tiny, max_steps=2, eval_every=2)
    assert not marker.exists() and not (tmp_path / "model").exists()
    assert (state / st.STATE_FILE).exists() and not (tmp_path / "log.jsonl").exists()
    observed(f"refused: {str(caught.value)[:60]}...; no payload run, no model, state folder kept")


def test_a_job_killed_while_exporting_redoes_only_the_export(tmp_path, train_tiny, monkeypatch):
    """The "finished" snapshot loads with weights_only=True and resumes to its summary without training."""
    real_export = sentence._export

    def killed(*args):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(sentence, "_export", killed)
    with pytest.raises(OSError, match="Input/output error"):
        run(tmp_path, train_tiny, max_steps=2, eval_every=2)
    finished = torch.load(tmp_path / "state" / st.STATE_FILE, map_location="cpu", weights_only=True)
    assert finished["finished"] is True
    monkeypatch.setattr(sentence, "_export", real_export)
    monkeypatch.setattr(sentence, "_step", None)  # no training step may run again
    summary, out, _ = run(tmp_path, train_tiny, max_steps=2, eval_every=2)
    assert summary == finished["summary"] and (out / "model.safetensors").exists()


def test_script_help_runs_without_snakemake():
    result = subprocess.run(
        [sys.executable, str(HERE.parents[1] / "scripts" / "train.py"), "--help"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "--backbone" in result.stdout and "--set" in result.stdout


def test_a_new_best_is_written_with_the_next_snapshot_and_at_the_end_not_at_each_evaluation(
    tmp_path, train_tiny, monkeypatch
):
    real_call = sentence.DevEvaluator.__call__
    held: list[list[str]] = []
    written: list[int] = []
    real_save_best = st.save_best

    def rising(self, model, head=None):
        held.append(sorted(p.name for p in (tmp_path / "state").glob(f"{st.BEST_PREFIX}*")))
        return {**real_call(self, model, head), "dev_spearman": float(len(held))}

    def save_best(state_dir, step, save):
        written.append(step)
        return real_save_best(state_dir, step, save)

    monkeypatch.setattr(sentence.DevEvaluator, "__call__", rising)
    monkeypatch.setattr(st, "save_best", save_best)
    summary, out, _ = run(tmp_path, train_tiny, max_steps=14, eval_every=2, state_every=10)
    assert written == [10, 14], written
    assert max(len(names) for names in held) <= 1, held
    assert held[5] == []  # at step 10, before its snapshot: five new bests, none written
    assert summary["best_step"] == 14 and (out / "config.json").exists()
    assert len(summary["eval_seconds"]) == len(summary["evals"]) == 8
