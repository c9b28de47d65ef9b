"""What the figure tests ask of a written figure: how many colours its PNG holds (a blank figure, or
one drawn with nothing in it, has a handful), and the files it is written as."""

from __future__ import annotations

import matplotlib.image
import numpy as np
import pandas as pd


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


def assert_nontrivial_png(path, min_bytes: int = 8_000) -> None:
    """A figure's PNG with something drawn in it: over ``min_bytes``, in colour, more than 20 colours."""
    assert path.stat().st_size > min_bytes
    pixels = matplotlib.image.imread(path)
    assert pixels.ndim == 3 and distinct_colours(pixels) > 20


def assert_written(paths, frame) -> None:
    """A figure as ``figures.style.save`` writes it: a non-trivial PNG, a PDF, the CSV of ``frame``."""
    assert [p.suffix for p in paths] == [".png", ".pdf", ".csv"]
    assert_nontrivial_png(paths[0])
    assert paths[1].stat().st_size > 5_000 and paths[1].read_bytes().startswith(b"%PDF")
    assert len(pd.read_csv(paths[2])) == len(frame)
