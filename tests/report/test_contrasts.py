"""A claim's contrast parts (contrastlab.report.contrasts): a part's short form, a term's cell, how a
part is paired and which parts pool their own contrasts (evaluated end to end in test_claims.py)."""

from __future__ import annotations

import pytest

from contrastlab.report.contrasts import cell_of, contrast, own_groups, pairing

STRATA = {"infonce": "simcse/fp16", "arccon": "simcse/fp16", "mmhe": "li2024/fp32"}


def stratum(ours: str, method: str) -> str:
    return STRATA.get(method, "simcse/fp16")


def test_a_part_is_a_contrast_and_its_short_form_reads_a_beats_b():
    assert contrast(["a", "b"]) == {"a": 1.0, "b": -1.0}
    assert contrast({"a": 1, "b": -0.5, "c": -0.5}) == {"a": 1.0, "b": -0.5, "c": -0.5}
    with pytest.raises(ValueError, match="names two methods"):
        contrast(["a", "b", "c"])


def test_a_term_names_its_own_task_or_is_on_the_parts():
    assert cell_of("oar_bt@best/ffn10_top1", "ffn100_top1") == ("oar_bt@best", "ffn10_top1")
    assert cell_of("infonce", "sts_avg") == ("infonce", "sts_avg")


def test_how_a_part_is_paired():
    # one stratum, coefficients that sum to 0 in it: the seed's effect on the stratum cancels
    assert pairing({"infonce": 1.0, "arccon": -1.0}, "sts_avg", "bert", stratum) == "blocked"
    # the same runs on two tasks: one protocol and precision, paired on its own contrasts
    assert pairing({"infonce/ffn10": 1.0, "infonce/ffn100": -1.0}, "ffn10", "bert", stratum) == "own"
    # two protocols share a seed number and nothing else: unpaired
    assert pairing({"infonce": 1.0, "mmhe": -1.0}, "sts_avg", "bert", stratum) is None


def test_own_parts_pool_only_when_independent():
    first = ({"a/t1": 1.0, "a/t2": -1.0}, "t1", "bert")
    disjoint = ({"b/t1": 1.0, "b/t2": -1.0}, "t1", "bert")
    sharing = ({"a/t1": 1.0, "b/t2": -1.0}, "t1", "bert")  # a/t1 is also the first part's
    other_shape = ({"b/t1": 1.0, "b/t3": -1.0}, "t1", "bert")
    assert own_groups([first, disjoint], stratum) == [[0, 1]]
    assert own_groups([first, sharing], stratum) == [[0], [1]]
    assert own_groups([first, other_shape], stratum) == [[0], [1]]
    assert own_groups([first, (disjoint[0], "t1", "roberta")], stratum) == [[0], [1]]  # another backbone
