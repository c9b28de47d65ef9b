"""SentEval's protocol constants, each pinned to the line of SentEval's source it comes from.

"SentEval" is SimCSE's copy (princeton-nlp/SimCSE at 49fa580, ``SentEval/senteval/``, the version behind
the papers' numbers); where facebookresearch/SentEval (at 5d6dc11) has the same line, it is cited too
(``fb:``). SimCSE's ``evaluation.py`` chooses the per-mode parameters. (facebookresearch's STS-B and
SICK-R train a regressor; SimCSE's copy scores their splits by cosine, as the protocol does.) Every
case is by hand (a hand-made data tree and encoder, or literal values): no shared data.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from sklearn.model_selection import StratifiedKFold

from contrastlab.evaluation import probe as transfer_probe
from contrastlab.evaluation import senteval as S
from contrastlab.evaluation.probe import schemes
from contrastlab.evaluation.probe import senteval as SP
from contrastlab.senteval import protocol as P
from contrastlab.senteval.tasks import Labelled, LabelledPairs


def test_the_l2_grid_is_sentevals_pytorch_regs():
    # SentEval/senteval/tools/validation.py:61, :130, :205 (fb: the same lines), with usepytorch=True
    # (SimCSE evaluation.py:70, :75): regs = [10**t for t in range(-5, -1)].
    assert P.L2_GRID == (1e-05, 0.0001, 0.001, 0.01)
    assert P.L2_GRID == tuple(10**t for t in range(-5, -1))


def test_the_folds_per_mode_are_simcses_kfold():
    # SimCSE evaluation.py:68-70 (dev, fasttest: 'kfold': 5) and :73-75 (test: 'kfold': 10); engine.py:35
    # (fb: :35) defaults kfold to 5. validation.py:55, :124 read it as self.k.
    assert dict(P.KFOLD) == {"test": 10, "fasttest": 5, "dev": 5}


def test_the_seed_is_sentevals_1111_for_the_folds_and_the_probe():
    # engine.py:31 (fb: :31): params.seed = 1111; validation.py:63-65 (fb: the same): the inner k-fold's
    # outer and inner StratifiedKFold use random_state=1111 literally; :132-133 random_state=self.seed.
    assert P.SEED == 1111
    # tools/classifier.py:25-29: MLP(seed=1111) seeds NumPy and torch; validation.py:80, :96 pass the
    # task's seed (binary.py:52 'seed': self.seed) to every probe, in both of SimCSE's classifier settings.
    assert SP.DEFAULT_CONFIG.seed == SP.FASTTEST_CONFIG.seed == 1111
    # validation.py:98, :172: the outer/refit probe holds out validation_split=0.05 for early stopping;
    # classifier.py:181: max_epoch defaults to 200 (SimCSE's classifier dicts set none).
    assert SP.DEFAULT_CONFIG.validation_split == SP.FASTTEST_CONFIG.validation_split == 0.05
    assert SP.DEFAULT_CONFIG.max_epoch == SP.FASTTEST_CONFIG.max_epoch == 200


def test_the_split_each_mode_scores_for_stsb_and_sickr():
    # SimCSE evaluation.py:148-156: mode dev prints results[task]['dev']['spearman'] for STSBenchmark and
    # SICKRelatedness; :173-184: test and fasttest print results[task]['test']['spearman'].
    # SentEval/senteval/sts.py:160-169 (STSBenchmarkEval) and :205-214 (SICKRelatednessEval): datasets
    # train/dev/test from sts-{train,dev,test}.csv and SICK_{train,trial,test_annotated}.txt.
    assert dict(P.STS_SPLIT_BY_MODE) == {"test": "test", "fasttest": "test", "dev": "dev"}
    assert dict(P.SPLIT_FILES["STSBenchmark"]) == {
        "train": "STS/STSBenchmark/sts-train.csv",
        "dev": "STS/STSBenchmark/sts-dev.csv",
        "test": "STS/STSBenchmark/sts-test.csv",
    }
    assert dict(P.SPLIT_FILES["SICKRelatedness"]) == {
        "train": "SICK/SICK_train.txt",
        "dev": "SICK/SICK_trial.txt",
        "test": "SICK/SICK_test_annotated.txt",
    }


# --- each mode scores its split, by hand -------------------------------------------------------------

# (cosine, gold) per pair. Spearman = 1 - 6 Σd² / (n (n² - 1)), no ties:
# A: cosine ranks 4 2 1 3, gold ranks 4 3 1 2 -> Σd² = 2, n = 4 -> 1 - 12/60 = 0.8;
# B: cosine ranks 3 2 1 4, gold ranks 4 3 2 1 -> Σd² = 12, n = 4 -> 1 - 72/60 = -0.2;
# C: ranks equal -> 1.
SPLIT_A = [(0.9, 5.0), (0.5, 3.0), (0.1, 1.0), (0.7, 2.0)]
SPLIT_B = [(0.9, 5.0), (0.5, 3.0), (0.1, 1.0), (0.95, 0.5)]
SPLIT_C = [(0.9, 5.0), (0.5, 3.0), (0.1, 1.0)]
# STS-B: train C (100), dev A (80), test B (-20); SICK-R the other way round: dev B (-20), test A (80).
HAND = {
    "STSBenchmark": {"train": SPLIT_C, "dev": SPLIT_A, "test": SPLIT_B},
    "SICKRelatedness": {"train": SPLIT_C, "dev": SPLIT_B, "test": SPLIT_A},
}


def _hand_tree(root: Path) -> dict[str, np.ndarray]:
    """STS-B and SICK-R files in SentEval's formats, each pair's sentences encoded (by the returned
    table) at the pair's cosine; the counts manifest the loaders check."""
    vectors, counts = {}, {}
    for task, splits in HAND.items():
        for split, pairs in splits.items():
            rel = P.SPLIT_FILES[task][split]
            header = "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment"
            lines = [header] if task == "SICKRelatedness" else []
            for i, (cosine, gold) in enumerate(pairs):
                a, b = f"{task} {split} left {i}", f"{task} {split} right {i}"
                vectors[a] = np.array([1.0, 0.0])
                vectors[b] = np.array([cosine, math.sqrt(1 - cosine**2)])
                if task == "STSBenchmark":  # sts.py:175-178: score in column 4, sentences in 5 and 6
                    lines.append(f"main-captions\tMSRvid\t2012test\t{i:04d}\t{gold}\t{a}\t{b}")
                else:  # sts.py:219-227: a header row, sentences in columns 1 and 2, score in 3
                    lines.append(f"{i}\t{a}\t{b}\t{gold}\tNEUTRAL")
            path = root / "downstream" / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("\n".join(lines) + "\n", encoding="utf-8")
            counts[rel] = len(pairs)
    (root / "downstream" / P.COUNTS_MANIFEST).write_text(json.dumps({"rows": counts}))
    return vectors


@pytest.mark.parametrize(
    ("mode", "stsb", "sickr"),
    [("test", -20.0, 80.0), ("fasttest", -20.0, 80.0), ("dev", 80.0, -20.0)],
)
def test_each_mode_scores_its_split_of_stsb_and_sickr(tmp_path, mode, stsb, sickr):
    vectors = _hand_tree(tmp_path)
    scores = S.evaluate(lambda batch: np.stack([vectors[s] for s in batch]), tmp_path, list(HAND), mode)
    assert scores == {
        "STSBenchmark": pytest.approx(stsb, abs=1e-9),
        "SICKRelatedness": pytest.approx(sickr, abs=1e-9),
    }


# --- the constants reach the probe -------------------------------------------------------------------


def _loaded() -> dict[str, object]:
    """One task per cross-validation scheme (binary.py, sst.py, trec.py, mrpc.py), two sentences each."""
    two = Labelled(["one", "two"], np.array([0, 1]))
    pairs = LabelledPairs(["one", "two"], ["two", "one"], np.array([0, 1]))
    return {
        "MR": two,
        "SST2": {"train": two, "dev": two, "test": two},
        "TREC": {"train": two, "test": two},
        "MRPC": {"train": pairs, "test": pairs},
    }


@pytest.mark.parametrize(("mode", "k"), [("test", 10), ("fasttest", 5), ("dev", 5)])
def test_every_transfer_task_gets_the_modes_folds_the_l2_grid_and_the_seed(monkeypatch, mode, k):
    """What SentEval hands its classifier (binary.py:52-56 InnerKFoldClassifier, trec.py:76-80 and
    mrpc.py:92-96 KFoldClassifier with 'kfold': params.kfold and 'seed'; sst.py:78-82 SplitClassifier),
    read from the calls the evaluator makes."""
    seen = {}

    def spy(name):
        def scheme(*args, **kwargs):
            seen[name] = {key: kwargs.get(key) for key in ("k", "grid", "seed", "nclasses")}
            return 0.0, 0.0

        return scheme

    for name in ("inner_kfold", "kfold_then_test", "split_then_test"):
        monkeypatch.setattr(transfer_probe, name, spy(name))
    lookup = lambda batch: np.ones((len(batch), 2), dtype=np.float32)  # noqa: E731
    for task, data in _loaded().items():
        seen.clear()
        S.transfer_accuracies(lookup, task, data, mode)
        (name,) = seen
        want = {"inner_kfold": "MR", "kfold_then_test": ("TREC", "MRPC"), "split_then_test": "SST2"}[name]
        assert task in want
        grid = (1e-05, 0.0001, 0.001, 0.01)
        nclasses = 6 if task == "TREC" else 2  # trec.py:76 'nclasses': 6
        if name == "split_then_test":  # no folds: one probe per L2 on train, chosen on dev
            assert seen[name] == {"k": None, "grid": grid, "seed": None, "nclasses": nclasses}
        else:
            assert seen[name] == {"k": k, "grid": grid, "seed": 1111, "nclasses": nclasses}


class _Recorder:
    """A fitter that records the fits a scheme asks for (and scores every probe 0)."""

    def __init__(self):
        self.fits, self.grid = None, None

    def __call__(self, X, y, fits, grid, nclasses):
        self.fits, self.grid = list(fits), list(grid)
        return schemes.Fitted(np.zeros((len(fits), len(grid))), lambda f, r, rows: 0.0)


def test_the_inner_kfold_uses_k_inner_folds_seeded_1111_on_each_outer_training_part():
    """validation.py:63-65 (fb: the same): skf and innerskf are both StratifiedKFold(n_splits=self.k,
    shuffle=True, random_state=1111); :74 splits each outer training part (X_train) with innerskf; :98
    refits the chosen L2 on the whole outer training part with validation_split."""
    y = np.array([0, 1] * 9)
    X = np.arange(len(y), dtype=float)[:, None]
    fitter = _Recorder()
    schemes.inner_kfold(X, y, nclasses=2, k=3, grid=P.L2_GRID, seed=P.SEED, fitter=fitter)
    assert len(fitter.fits) == 3 * (3 + 1) and fitter.grid == list(P.L2_GRID)
    outer = list(StratifiedKFold(n_splits=3, shuffle=True, random_state=1111).split(X, y))
    for o, (train_idx, _) in enumerate(outer):
        inner = StratifiedKFold(n_splits=3, shuffle=True, random_state=1111).split(train_idx, y[train_idx])
        for i, (a, b) in enumerate(inner):
            fit = fitter.fits[o * 4 + i]
            assert fit.train.tolist() == train_idx[a].tolist() and fit.dev.tolist() == train_idx[b].tolist()
        refit = fitter.fits[o * 4 + 3]
        assert refit.train.tolist() == train_idx.tolist() and refit.dev is None


def test_the_kfold_classifier_folds_train_with_the_seed_and_refits_on_all_of_it():
    """validation.py:132-133 (fb: the same): StratifiedKFold(n_splits=self.k, shuffle=True,
    random_state=self.seed) over train; :172 refits on all of train with validation_split."""
    y = np.array([0, 1] * 6)
    X = np.arange(len(y), dtype=float)[:, None]
    fitter = _Recorder()
    schemes.kfold_then_test(X, y, X[:4], y[:4], nclasses=2, k=3, grid=P.L2_GRID, seed=P.SEED, fitter=fitter)
    folds = list(StratifiedKFold(n_splits=3, shuffle=True, random_state=1111).split(X, y))
    assert [(f.train.tolist(), f.dev.tolist()) for f in fitter.fits[:3]] == [
        (a.tolist(), b.tolist()) for a, b in folds
    ]
    assert fitter.fits[3].train.tolist() == list(range(12)) and fitter.fits[3].dev is None
    assert len(fitter.fits) == 4 and fitter.grid == list(P.L2_GRID)
