"""Acceptance: the bag-of-words test encoder on the real data vs SentEval's own scores (bow_scores.json).

The encoder and the reference scores are in ../shared/docs/senteval-reference; they are imported by path
at test time (never copied into the project). Skipped when ../shared is absent.
"""

from __future__ import annotations

import importlib.util
import json

import pytest

from contrastlab.evaluation import protocol as P
from contrastlab.evaluation import senteval as S

pytestmark = pytest.mark.shared

# Transfer tasks where our converged probe differs from the reference draw of SentEval's early-stopped
# Adam probe by more than 0.5 points with this encoder (ours - reference: SST2 -0.98, TREC +0.60,
# MRPC -1.27). A re-implementation of SentEval's Adam procedure gives, over 3 seeds, SST2 test
# 60.63 / 61.89 / 61.67 and MRPC 71.07-72.64 on the same embeddings: that probe's own seed noise is as
# large as these gaps. They are asserted within KNOWN_NOISE_BAND, and strictly-xfailed at 0.5.
KNOWN_DEVIATIONS = {"SST2", "TREC", "MRPC"}
TOLERANCE = 0.5
KNOWN_NOISE_BAND = 1.5


@pytest.fixture(scope="module")
def reference(shared):
    folder = shared / "docs" / "senteval-reference"
    data = shared / "data" / "senteval"
    if not (folder / "bow_encoder.py").exists() or not (data / "downstream").is_dir():
        pytest.skip(f"no SentEval reference encoder or data under {shared}")
    spec = importlib.util.spec_from_file_location("bow_encoder", folder / "bow_encoder.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    scores = json.loads((folder / "bow_scores.json").read_text())["scores"]
    return module.encode, data, scores


def test_sts_equal_to_senteval(reference):
    encode, data, ref = reference
    ours = S.evaluate(encode, data, P.STS_TASKS, "test")
    for task in P.STS_TASKS:
        assert ours[task] == pytest.approx(ref[task], abs=0.01), task


@pytest.fixture(scope="module")
def transfer_scores(reference):
    encode, data, _ = reference
    return S.evaluate(encode, data, P.TRANSFER_TASKS, "test")


@pytest.mark.slow
@pytest.mark.parametrize(
    "task",
    [
        pytest.param(
            t, marks=pytest.mark.xfail(strict=True, reason="SentEval probe seed noise, see module doc")
        )
        if t in KNOWN_DEVIATIONS
        else t
        for t in P.TRANSFER_TASKS
    ],
)
def test_transfer_within_half_a_point(reference, transfer_scores, task):
    assert abs(transfer_scores[task] - reference[2][task]) <= TOLERANCE


@pytest.mark.slow
@pytest.mark.parametrize("task", sorted(KNOWN_DEVIATIONS))
def test_known_deviations_stay_within_noise_band(reference, transfer_scores, task):
    assert abs(transfer_scores[task] - reference[2][task]) <= KNOWN_NOISE_BAND
