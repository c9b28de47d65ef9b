"""The claims' derived numbers by hand (issue 63 item 8): the seeds needed when several parts are tested
under Holm's bar, and the GPU-hours of one more seed and of the seeds a claim needs."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from contrastlab.report import claims, power
from contrastlab.report.parts import NOT_REPRODUCED, NOT_RUN, UNDECIDED, PartResult
from contrastlab.stats import t_quantile


def _part(p_value: float, status: str = UNDECIDED) -> PartResult:
    return PartResult("bert-base", {"a": 1.0, "b": -1.0}, status, seeds=3, p_value=p_value)


def _unpaired(n: int) -> float:
    return 2 * (n - 1)


def test_seeds_needed_under_holms_bar_by_hand():
    """Four parts, three tested (p = 0.001, 0.2, 0.5; the fourth not run): Holm at α = 0.025 rejects
    0.001 < 0.025/3 and stops at 0.2 ≥ 0.025/2. Each undecided part: s = 1, unpaired (factor 2, ν = 2(n−1)),
    from 4 seeds (it has 3):
    - Δ = −1.5 ("not reproduced" is what it could become): Holm's strictest bar α/k, the two-sided level
      1 − 2 · 0.025/3 = 0.98333: t_{10} · sqrt(2/6) = 1.657 ≥ 1.5, t_{12} · sqrt(2/7) = 1.486 < 1.5:
      7 seeds (the part's own level 0.95 would say 5, a bar over all four parts' count 8);
    - Δ = +1.5 (can become "reproduced"): its own level 0.95: t_6 · sqrt(2/4) = 1.730, t_8 · sqrt(2/5) =
      1.458 < 1.5: 5 seeds.
    The claim's seeds needed: the largest, 7."""
    parts = [_part(0.001), _part(0.2), _part(0.5), _part(math.nan, NOT_RUN)]
    pending = [(parts[1], -1.5, 1.0, 2.0, _unpaired), (parts[2], 1.5, 1.0, 2.0, _unpaired)]
    claims._holm_and_seeds(parts, pending, 0.95)
    assert [p.status for p in parts] == [NOT_REPRODUCED, UNDECIDED, UNDECIDED, NOT_RUN]
    assert t_quantile(10, 1 - 0.05 / 3) * math.sqrt(2 / 6) == pytest.approx(1.65704, abs=1e-5)
    assert t_quantile(12, 1 - 0.05 / 3) * math.sqrt(2 / 7) == pytest.approx(1.48569, abs=1e-5)
    assert t_quantile(6, 0.95) * math.sqrt(2 / 4) == pytest.approx(1.73023, abs=1e-5)
    assert t_quantile(8, 0.95) * math.sqrt(2 / 5) == pytest.approx(1.45845, abs=1e-5)
    assert [p.seeds_needed for p in parts] == [None, 7, 5, None]
    result = claims.ClaimResult({"id": "hand"}, UNDECIDED, parts)
    assert result.parts_tested == 3 and result.seeds_needed == 7


def test_a_part_below_its_interval_spared_by_holm_is_undecided_with_its_seeds():
    """Two tested parts, p = 0.02 and 0.03: neither passes 0.025/2 first, so the part whose own test
    said "not reproduced" (p = 0.02 < 0.025) is spared and undecided; Δ = −1.5 at the bar
    1 − 2 · 0.025/2 = 0.975: t_{10} · sqrt(2/6) = 1.521 ≥ 1.5, t_{12} · sqrt(2/7) = 1.368: 7 seeds.
    The other, Δ = +5: 3 seeds would pass (t_4 · sqrt(2/3) = 2.267 < 5), but seeds needed counts from
    one more than the part has: 4."""
    parts = [_part(0.02, NOT_REPRODUCED), _part(0.03)]
    pending = [(parts[0], -1.5, 1.0, 2.0, _unpaired), (parts[1], 5.0, 1.0, 2.0, _unpaired)]
    claims._holm_and_seeds(parts, pending, 0.95)
    assert parts[0].status == UNDECIDED and parts[0].spared_by_holm and parts[0].seeds_needed == 7
    assert t_quantile(10, 0.975) * math.sqrt(2 / 6) == pytest.approx(1.52061, abs=1e-5)
    assert t_quantile(4, 0.95) * math.sqrt(2 / 3) == pytest.approx(2.26696, abs=1e-5)
    assert parts[1].status == UNDECIDED and parts[1].seeds_needed == 4


def _job(rule: str, cell: str, hours: float) -> SimpleNamespace:
    return SimpleNamespace(rule=rule, cell=cell, seconds={"config": hours * 3600})


class _Grid:
    """The one question a grid answers here: an experiment's spec (``e`` plain, ``s`` a batch-size
    sweep), through its per-experiment view."""

    def experiment(self, experiment: str):
        spec = {
            "e": {"methods": {"m": {}}},
            "s": {"methods": {"cl": {}}, "sweep": {"batch_size": [64, 128]}},
        }.get(experiment)
        return SimpleNamespace(spec=spec)


JOBS = [
    # e/b/m: two seeds, training 2 h and 3 h, encoding 0.5 h each: 6 h over 2 seeds = 3 h a seed
    _job("train", "e/b/m/seed1", 2.0),
    _job("train", "e/b/m/seed2", 3.0),
    _job("encode", "e/b/m/seed1", 0.5),
    _job("encode", "e/b/m/seed2", 0.5),
    # s: two sweep points of one seed, 1 + 0.25 h and 3 + 0.25 h; "cl" priced at their mean, 2.25 h
    _job("train", "s/b/cl-bs64/seed1", 1.0),
    _job("encode", "s/b/cl-bs64/seed1", 0.25),
    _job("train", "s/b/cl-bs128/seed1", 3.0),
    _job("encode", "s/b/cl-bs128/seed1", 0.25),
    # not a seed's work: the Pretrained row's encoding
    _job("encode_pretrained", "pretrained/b/pretrained/none", 7.0),
]


def test_the_gpu_hours_of_one_more_seed_by_hand():
    hours = power.seed_hours(JOBS, _Grid())
    assert hours == {
        ("e", "b", "m"): 3.0,
        ("s", "b", "cl-bs64"): 1.25,
        ("s", "b", "cl-bs128"): 3.25,
        ("s", "b", "cl"): 2.25,
    }
    # a claim at 2 seeds needing 5 on e/b/m and s/b/cl: 3 more seeds each, 3 × 3 + 3 × 2.25 = 15.75 GPU-h
    claim = power.ClaimPower({"id": "hand"}, seeds=2, probability=0.3, seeds_needed=5)
    claim.cells = [("e", "b", "m"), ("s", "b", "cl")]
    assert power.extra_hours([claim], hours) == (15.75, 6)
    note = power.power_note(claim, hours)
    assert note == (
        "undecided at the configured seeds; P(decided) = 0.30 at 2 seeds; needs 5 seeds per cell for "
        "≥ 0.9 = +15.8 GPU-hours"
    )
    assert power._power_rows([claim], hours)[0]["+GPU-h"] == "15.8"
