"""The hub and MTEB metadata's derived numbers, each on a by-hand case: a ModelMeta's memory, the split a
card names for each SentEval score, the bridge step at which MTEB's own pairs enter."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from contrastlab.evaluation.bridge import bridge_task
from contrastlab.evaluation.mteb_sts import PairSet
from contrastlab.hub import mteb_results as mr
from contrastlab.hub.publish import eval_results
from contrastlab.models.export import write_sentence_transformers_files
from contrastlab.senteval.tasks import Pairs
from tests.hub_standin import save_tiny_bert

# A one-layer BERT, hidden 8, 2 heads, feed-forward 16, 512 positions, 2 token types, vocabulary V:
# embeddings 8V + 512*8 + 2*8 + LayerNorm 16 = 8V + 4128; the layer's Q, K, V 3*(8*8 + 8) = 216, attention
# output 72 + LayerNorm 16, feed-forward 8*16 + 16 = 144 and 16*8 + 8 = 136 + LayerNorm 16: 600; the
# pooler 72. V = 674,422: 8V + 4800 = 5,400,176 parameters, 21,600,704 bytes in fp32 = 20.60003 MiB.
VOCAB = 674_422
PARAMETERS = 5_400_176


def test_memory_usage_mb_is_mtebs_rule_on_a_checkpoint_of_known_size(tmp_path):
    """mteb 2.26 (ModelMeta._calculate_memory_usage_mb without the hub): round(n_parameters * 4 / 1024**2),
    fp32. 20.60003 MiB -> 21; a floor would give 20, decimal megabytes (1e6) 22, 2 bytes a parameter 10."""
    mteb_models = pytest.importorskip("mteb.models")
    save_tiny_bert(tmp_path / "model", VOCAB)
    write_sentence_transformers_files(tmp_path / "model", "cls")
    meta = mr.model_meta(
        tmp_path / "model",
        name="contrastlab/hand",
        license="apache-2.0",
        base_model=None,
        training_data=None,
        release_date="2026-01-01",
    )
    assert meta["n_parameters"] == PARAMETERS
    assert meta["memory_usage_mb"] == 21
    assert meta["n_embedding_parameters"] == VOCAB * 8 == 5_395_376  # mteb: vocab_size * hidden_size
    assert meta["embed_dim"] == 8
    # mteb's own rule, applied by mteb to the parameter count we state, gives the same number
    checked = mteb_models.ModelMeta.model_validate_json_resolved(json.dumps(meta))
    assert checked.calculate_memory_usage_mb() == 21


SCORES = {"STS12": 70.0, "STSBenchmark": 80.0, "SICKRelatedness": 75.0, "MR": 81.0}


@pytest.mark.parametrize(
    ("mode", "sts_b_and_sick_r"), [("dev", "dev"), ("fasttest", "test"), ("test", "test")]
)
def test_the_split_a_card_names_for_each_senteval_score(mode, sts_b_and_sick_r):
    """SimCSE's evaluation.py:148-156 (dev mode: STS-B and SICK-R on their dev split) and :173-184 (test,
    fasttest: the test split). STS12 has only test data; a transfer score is the test accuracy (acc)."""
    results = eval_results({"mode": mode, "scores": SCORES}, {})
    assert {r.dataset_config: (r.dataset_split, r.metric_value) for r in results} == {
        "STS12": ("test", 70.0),
        "STSBenchmark": (sts_b_and_sick_r, 80.0),
        "SICKRelatedness": (sts_b_and_sick_r, 75.0),
        "MR": ("test", 81.0),
    }


# --- the bridge: where MTEB's own pairs enter --------------------------------------------------------

# (name, cosine, gold). SentEval scores p1-p4; MTEB has p1-p3, m5 of its own, o6 from SentEval's train
# split, and lacks p4. Spearman = 1 - 6 Σd² / (n (n² - 1)), no ties:
# p1-p4 (SentEval): cosine ranks 4 2 1 3, gold ranks 4 3 1 2: Σd² = 2, n = 4 -> 80;
# p1-p3 + m5 (the pairs step): cosine ranks 3 2 1 4, gold ranks 4 3 2 1: Σd² = 12 -> 1 - 72/60 = -20;
# + o6 (the split step): cosine ranks 4 3 2 5 1, gold ranks 5 4 3 2 1: Σd² = 12, n = 5 -> 1 - 72/120 = 40.
PAIRS = {
    "p1": (0.9, 5.0),
    "p2": (0.5, 3.0),
    "p3": (0.1, 1.0),
    "p4": (0.7, 2.0),
    "m5": (0.95, 0.5),
    "o6": (-0.5, 0.0),
}


def _encode(sentences: list[str]) -> np.ndarray:
    """'<name> left' -> e0, '<name> right' -> the unit vector at the pair's cosine to e0."""
    out = []
    for sentence in sentences:
        name, side = sentence.split()
        cosine = PAIRS[name][0]
        out.append([1.0, 0.0] if side == "left" else [cosine, math.sqrt(1 - cosine**2)])
    return np.array(out)


def _pairs(label: str, names: list[str]) -> Pairs:
    gold = np.array([PAIRS[n][1] for n in names])
    return Pairs(label, [f"{n} left" for n in names], [f"{n} right" for n in names], gold)


def test_mtebs_own_pairs_enter_at_the_pairs_step_and_its_other_splits_pairs_at_the_split_step():
    scored, other = [_pairs("s", ["p1", "p2", "p3", "p4"])], [_pairs("train", ["o6"])]
    mteb_rows = _pairs("mteb", ["p1", "p2", "p3", "m5", "o6"])
    mteb = PairSet(mteb_rows.a, mteb_rows.b, mteb_rows.gold)
    r = bridge_task(_encode, scored, other, mteb, mteb_score=45.0)
    assert r["senteval"] == pytest.approx(80.0, abs=1e-9)
    want = {"text_form": 80.0, "pooling": 80.0, "pairs": -20.0, "split": 40.0, "similarity": 45.0}
    assert r["chain"] == pytest.approx(want, abs=1e-9)
    parts = {"text_form": 0.0, "pooling": 0.0, "pairs": -100.0, "split": 60.0, "similarity": 5.0}
    assert r["parts"] == pytest.approx(parts, abs=1e-9)
    assert r["total"] == pytest.approx(-35.0, abs=1e-9)
    assert r["counts"] == {
        "senteval_pairs": 4,
        "mteb_pairs": 5,
        "text_changed": 0,
        "senteval_only": 1,  # p4
        "mteb_only": 1,  # m5
        "other_split": 1,  # o6
    }
