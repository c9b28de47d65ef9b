"""The training corpus's token profile (contrastlab.cost.tokens)."""

from __future__ import annotations

import ast

from contrastlab.cost import tokens
from contrastlab.paths import REPO_ROOT


def test_the_profile_is_the_one_the_gpu_benchmarks_draw_their_lengths_from():
    bench = ast.parse((REPO_ROOT / "benchmarks" / "gpu_bench.py").read_text())
    drawn = next(
        ast.literal_eval(node.value)
        for node in bench.body
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "WIKI1M_LENGTHS"
    )
    assert drawn == tokens.WIKI1M_TOKEN_LENGTHS
    assert len(drawn) == tokens.WIKI1M_CAP - tokens.WIKI1M_SHORTEST + 1 == 30


def test_a_row_shorter_than_every_sentence_is_all_real_tokens():
    assert tokens.profile_real_tokens(tokens.WIKI1M_SHORTEST) == 3
    assert round(tokens.profile_real_tokens(16), 4) == 14.3561
