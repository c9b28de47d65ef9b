from __future__ import annotations

import os
from pathlib import Path

import pytest

from contrastlab.data.fixtures import write_demo_corpus, write_senteval_fixture
from contrastlab.training.capture import CUBLAS_DETERMINISTIC

# cuBLAS reads its workspace setting when CUDA first runs it, which on a GPU is before the tests that run
# under deterministic algorithms (capture.require_cublas_workspace refuses a setting made after that).
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_DETERMINISTIC)

#: The tiny sentence cell the trainer's tests start from: InfoNCE on the tiny BERT, 8 steps of 32
#: sentences, the dev score, a log line and a snapshot every 4 steps.
TINY_SENTENCE = {
    "loss": "infonce",
    "lr": 1e-4,
    "batch_size": 32,
    "max_steps": 8,
    "eval_every": 4,
    "log_every": 4,
    "state_every": 4,
}
#: The tiny image cell the trainer's tests start from: MACL's loss on the digits, a ResNet of width 4
#: with a 32 -> 16 head, batches of 32, 24 steps, a log line every 3 steps and a snapshot every 5.
TINY_VISION = {
    "dataset": "digits",
    "loss": "macl_vision",
    "loss_hp": {"tau0": 0.1, "alpha": 0.5, "a0": 0.0, "reweight": True},
    "width": 4,
    "head_hidden": 32,
    "head_dim": 16,
    "batch_size": 32,
    "max_steps": 24,
    "log_every": 3,
    "state_every": 5,
}


def poison_loss(monkeypatch, trainer, nan_at: int) -> None:
    """``trainer.build_loss`` (a trainer module's) builds losses that see a NaN embedding from their
    ``nan_at``-th call on: the step of that call diverges."""
    real = trainer.build_loss

    def build(name, **hp):
        loss_fn, calls = real(name, **hp), [0]

        def call(h1, h2, **kwargs):
            calls[0] += 1
            return loss_fn(h1 * float("nan") if calls[0] >= nan_at else h1, h2, **kwargs)

        return call

    monkeypatch.setattr(trainer, "build_loss", build)


@pytest.fixture(scope="session")
def corpus(tmp_path_factory) -> Path:
    return write_demo_corpus(tmp_path_factory.mktemp("corpus") / "corpus.txt", 1200)


@pytest.fixture(scope="session")
def senteval_dir(tmp_path_factory) -> Path:
    return write_senteval_fixture(tmp_path_factory.mktemp("senteval"))


@pytest.fixture(scope="session")
def sentence_data(tiny_bert, corpus, senteval_dir) -> dict:
    """The data keywords of ``sentence.train`` (and ``cells.train_cell``) for a tiny cell on the CPU: the
    tiny BERT, the demo corpus and the SentEval fixture."""
    return dict(backbone_dir=tiny_bert, corpus_path=corpus, dev_data_dir=senteval_dir, device="cpu")


@pytest.fixture(scope="session")
def tokenized(tiny_bert, corpus, tmp_path_factory):
    """``(tokenizer, corpus)``: the tiny BERT's tokenizer and the corpus tokenised at 32 tokens
    (:class:`~contrastlab.training.corpus.TokenizedCorpus`, whose ``batch(rows, pad_id)`` pads rows)."""
    from transformers import AutoTokenizer

    from contrastlab.training.corpus import load_tokenized_corpus

    tokenizer = AutoTokenizer.from_pretrained(tiny_bert)
    return tokenizer, load_tokenized_corpus(corpus, tokenizer, 32, tmp_path_factory.mktemp("cache"))[0]


@pytest.fixture(scope="session")
def vision_settings():
    """``vision_settings(**overrides)``: :data:`TINY_VISION` with ``overrides``, a flat dict as the
    workflow passes a cell's settings (``VisionTrainSettings.from_dict`` reads it)."""

    def settings(**overrides) -> dict:
        return {**TINY_VISION, **overrides}

    return settings


@pytest.fixture(scope="session")
def train_tiny(sentence_data):
    """``train_tiny(folder, device="cpu", check_every=None, **overrides)``: ``sentence.train`` of
    :data:`TINY_SENTENCE` on the tiny BERT and the fixtures into ``folder`` (model, log.jsonl, state; the
    tokenised corpus cached beside it). Returns the summary."""
    from contrastlab.training.sentence import TrainSettings, train

    def run(folder: Path, *, device: str = "cpu", check_every: int | None = None, **overrides) -> dict:
        paths = dict(out_dir=folder / "model", log_path=folder / "log.jsonl", state_dir=folder / "state")
        settings = TrainSettings(**{**TINY_SENTENCE, **overrides})
        data = {**sentence_data, "device": device, "cache_dir": folder.parent / "cache"}
        return train(settings, **data, **paths, progress=False, check_every=check_every)

    return run


@pytest.fixture(scope="session")
def train_image():
    """``train_image(settings, folder, **options)``: ``train_vision`` of the flat ``settings`` (as
    :func:`vision_settings` gives them) on the CPU in this process, as ``_run_vision.py`` runs it,
    writing ``folder/encoder``, ``folder/train_log.jsonl`` and ``folder/state``; ``options`` go to
    ``train_vision`` (``progress`` False unless given). Returns the run's summary."""
    import torch

    from contrastlab.training.vision import VisionTrainSettings, train_vision

    def run(settings: dict, folder: Path, **options) -> dict:
        assert torch.get_num_threads() == 1  # as _run_vision.py: bit-equality needs the same thread count
        paths = dict(
            out_dir=folder / "encoder", log_path=folder / "train_log.jsonl", state_dir=folder / "state"
        )
        parsed = VisionTrainSettings.from_dict(settings)
        return train_vision(parsed, data_root=None, device="cpu", **paths, **{"progress": False, **options})

    return run
