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


def test_wiki1m_profile_gives_21_9_real_tokens_of_32():
    assert sum(tokens.WIKI1M_TOKEN_LENGTHS) == 11_914
    assert tokens.profile_real_tokens(32) == 260_875 / 11_914  # 21.8965
    # a shorter row truncates more sentences (one shorter than every sentence is all real tokens); a
    # longer one is priced as if the capped ones filled it
    assert tokens.profile_real_tokens(tokens.WIKI1M_SHORTEST) == 3
    assert round(tokens.profile_real_tokens(16), 4) == 14.3561
    assert tokens.profile_real_tokens(64) == (260_875 - 3229 * 32 + 3229 * 64) / 11_914
