"""What the figure tests ask of a written PNG's pixels: how many colours it holds (a blank figure, or
one drawn with nothing in it, has a handful)."""

from __future__ import annotations

import numpy as np


def distinct_colours(pixels: np.ndarray) -> int:
    """The number of distinct colours among ``pixels`` (matplotlib.image.imread of a PNG: floats, 8 bits
    per channel, the channels last). Each pixel's channels are packed into one integer, so that numpy
    counts them in one sort of a flat array (``np.unique(..., axis=0)`` sorts rows, about a second per
    figure)."""
    levels = np.round(pixels.reshape(pixels.shape[0] * pixels.shape[1], -1) * 255).astype(np.uint64)
    packed = np.zeros(len(levels), dtype=np.uint64)
    for channel in levels.T:
        packed = packed * 256 + channel
    return len(np.unique(packed))
