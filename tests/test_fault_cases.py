"""Every case of the last two reliability reviews that did not hold has a fault test naming it (issues 76
and 83: `make faults` lists every reliability case with its test)."""

import re

import pytest
from fault_cases import RELIABILITY_8_NOT_HELD, RELIABILITY_9_NOT_HELD, case_of, cases_in_tests

from contrastlab.paths import REPO_ROOT, shared_dir


def test_every_case_the_review_found_not_holding_has_a_fault_test():
    found = cases_in_tests(REPO_ROOT / "tests")
    assert [case for case in RELIABILITY_8_NOT_HELD + RELIABILITY_9_NOT_HELD if case not in found] == []


def test_the_list_is_the_reviews_own():
    """The rows of the review's table of new cases whose verdict is not "good", and G15 (the one case of
    review 8 it found still open)."""
    shared = shared_dir()
    review = shared / "docs" / "reliability.md" if shared else None
    if review is None or not review.is_file():
        pytest.skip("../shared/docs/reliability.md is not beside the checkout")
    new_cases = review.read_text().partition("## New cases")[2].partition("## Details")[0]
    rows = re.findall(r"^\| ([A-Z]\d{1,2}) \| [^|]+ \| ([^|]+) \|", new_cases, re.M)
    not_held = {case for case, verdict in rows if not verdict.strip().startswith("good")}
    assert not_held | {"G15"} == set(RELIABILITY_9_NOT_HELD)


@pytest.mark.parametrize(
    ("name", "case"),
    [
        ("one results folder under two names (C3)", "C3"),
        ("gzip-compressed corpus (M7) ", "M7"),
        ("a disk full (F1) at the end", None),
        ("nothing named", None),
        ("(G15)", "G15"),
    ],
)
def test_a_case_id_is_read_from_the_end_of_a_faults_description(name, case):
    assert case_of(name) == case
