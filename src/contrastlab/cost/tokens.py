"""The training corpus's token profile: how many of a padded batch's tokens are real, which is what a
padding-free step computes on (:func:`contrastlab.cost.flops.padding_free_fraction` prices it)."""

from __future__ import annotations

#: wiki1m's token profile: how many of the 11,914 sentences of the wiki1m head sample in ../shared/data
#: have 3, 4, ..., 32 tokens ([CLS]/[SEP] included, bert-base-uncased's WordPiece vocabulary, truncated
#: at 32: the last count holds every longer sentence); mean 21.9, 27.1% at the cap. The same counts as
#: ``benchmarks/gpu_bench.py``'s ``WIKI1M_LENGTHS``, which the GPU benchmarks draw their lengths from.
WIKI1M_TOKEN_LENGTHS = (
    34,
    151,
    236,
    284,
    275,
    247,
    231,
    252,
    256,
    273,
    302,
    332,
    373,
    347,
    384,
    376,
    363,
    371,
    392,
    371,
    400,
    352,
    330,
    323,
    303,
    298,
    315,
    253,
    261,
    3229,
)
#: The shortest length :data:`WIKI1M_TOKEN_LENGTHS` counts, and the truncation its last count is at.
WIKI1M_SHORTEST, WIKI1M_CAP = 3, 32


def profile_real_tokens(width: int, lengths: tuple[int, ...] = WIKI1M_TOKEN_LENGTHS) -> float:
    """The mean real tokens per row of a token profile (counts of sentences of
    :data:`WIKI1M_SHORTEST`, ... tokens) truncated at ``width``. Beyond the profile's own cap
    (:data:`WIKI1M_CAP`) the lengths of its capped sentences are not known: they are taken to fill the
    row (the most real tokens they could have: a padding-free step is then priced no faster than it is).

    >>> round(profile_real_tokens(32), 4), round(profile_real_tokens(16), 4)
    (21.8965, 14.3561)
    """
    # the last count's sentences fill any row up to the cap, and are taken to fill a longer one too
    shorter = sum(min(WIKI1M_SHORTEST + i, width) * count for i, count in enumerate(lengths[:-1]))
    return (shorter + lengths[-1] * width) / sum(lengths)
