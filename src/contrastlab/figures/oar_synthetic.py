"""OAR Table 2 (a figure in the paper): the synthetic clusters and each loss's embeddings, +- OAR."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from contrastlab.figures.style import PALETTE, figure, house_style, save

__all__ = ["LOSS_LABELS", "plot_synthetic"]

LOSS_LABELS = {"ntxent": "InfoNCE", "dcl_vision": "DCL", "vicreg": "VICReg", "barlow_twins": "BarlowTwins"}


def plot_synthetic(results: Mapping[tuple[str, bool], Mapping], stem: str | Path) -> list[Path]:
    """The input points (first panel) and, per loss, the unit embeddings without (top row) and with
    (bottom row) OAR as 3-D scatter plots coloured by cluster, titled with the effective rank and the
    smallest angle between cluster axes; writes ``stem``.png/.pdf/.csv (every plotted point)."""
    losses = list(dict.fromkeys(loss for loss, _ in results))
    first = next(iter(results.values()))
    rows = []
    with house_style():
        fig, axes = figure(2, len(losses) + 1, width="page", aspect=1.1, subplot_kw={"projection": "3d"})
        colours = [PALETTE[int(k)] for k in first["labels"]]
        axes[0, 0].scatter(*first["x"].T, c=colours, s=2, depthshade=False)
        axes[0, 0].set_title("input: 3 rank-1 clusters")
        axes[1, 0].set_axis_off()
        rows += [
            {"panel": "input", "cluster": int(k), "x": float(a), "y": float(b), "z": float(c)}
            for k, (a, b, c) in zip(first["labels"], first["x"], strict=True)
        ]
        for col, loss in enumerate(losses, start=1):
            for row, oar in enumerate((False, True)):
                r = results[(loss, oar)]
                ax = axes[row, col]
                ax.scatter(*r["z"].T, c=colours, s=2, depthshade=False)
                name = ("OAR-" if oar else "") + LOSS_LABELS.get(loss, loss)
                ax.set_title(
                    f"{name}\nrank {r['effective_rank']}, axes ≥ {r['min_axis_angle_deg']:.0f}°", fontsize=7
                )
                rows += [
                    {"panel": name, "cluster": int(k), "x": float(a), "y": float(b), "z": float(c)}
                    for k, (a, b, c) in zip(r["labels"], r["z"], strict=True)
                ]
        for ax in axes.flat:
            ax.tick_params(labelsize=4, pad=0)
            ax.set_xticklabels([])
            ax.set_yticklabels([])
            ax.set_zticklabels([])
        return save(fig, stem, pd.DataFrame(rows))
