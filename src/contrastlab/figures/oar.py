"""The OAR paper's CIFAR figures, from the pipeline's metrics and encoders.

- Fig. 2 (and Appendix Fig. 4): FFN fine-tuning accuracy and the total variance of the embeddings
  across the learning-rate sweep, each loss without OAR (solid) and with it (dotted). Read from the
  sweep cells' metrics (``vision.json``: ``ffn<P>_top1``, ``embedding_variance``).
- Fig. 3: singular values (normalised) and the cosine affinity matrix of 1000 test embeddings (fewer
  where the test split is smaller: the demo's digits have 360; the panels say how many),
  InfoNCE vs OAR-InfoNCE, with the effective rank at 95% energy in the titles.

[0] "Stable Contrastive Learning with Orthonormal Anchors Regression" (OAR), 2024, §5.1, Fig. 2-4.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from matplotlib.lines import Line2D

from contrastlab.figures.style import LINESTYLES, PALETTE, figure, house_style, note, save
from contrastlab.models import pick_device
from contrastlab.search import diverged_reason
from contrastlab.tables.metrics import collect_metrics
from contrastlab.tables.published import sweep_point_names
from contrastlab.training.synthetic import effective_rank

__all__ = ["embedding_spectrum", "plot_lr_sweep", "plot_spectra", "sweep_frame"]

OAR_PREFIX = "oar_"
#: The papers' names of the losses of the OAR study (config method names without ``oar_``).
LOSS_LABELS = {"infonce": "InfoNCE", "dcl": "DCL", "bt": "BarlowTwins", "vicreg": "VICReg"}


def method_label(method: str) -> str:
    """``oar_infonce`` -> ``OAR-InfoNCE`` (the paper's row names)."""
    loss = method.removeprefix(OAR_PREFIX)
    return ("OAR-" if method.startswith(OAR_PREFIX) else "") + LOSS_LABELS.get(loss, loss)


def sweep_frame(
    metrics: pd.DataFrame, experiment: str, label: str, values: Sequence[float], keys: Sequence[str]
) -> pd.DataFrame:
    """Seed means of ``keys`` at every sweep point ``<method>-<label><value>`` of ``experiment``.

    ``metrics`` is :func:`contrastlab.tables.metrics.collect_metrics`'s frame. Returns one row per
    (method, value, key): method (without the suffix), loss (method without ``oar_``), oar (bool),
    value, key, mean, std, n_seeds (seeds with a score) and n_diverged (seeds whose probe diverged:
    NaN scores, see :func:`contrastlab.tables.metrics.collect_metrics`); sorted by method, key and value.
    """
    mine = metrics[(metrics["experiment"] == experiment) & metrics["task"].isin(keys)]
    points = sweep_point_names(mine["method"].unique(), label, list(values))
    rows = []
    for (name, key), scores in mine[mine["method"].isin(points)].groupby(["method", "task"])["score"]:
        base, value = points[name]
        oar = (base.removeprefix(OAR_PREFIX), base.startswith(OAR_PREFIX))
        counts = (int(scores.notna().sum()), int(scores.isna().sum()))
        rows.append((base, *oar, float(value), key, scores.mean(), scores.std(), *counts))
    columns = ["method", "loss", "oar", "value", "key", "mean", "std", "n_seeds", "n_diverged"]
    return pd.DataFrame(rows, columns=columns).sort_values(["method", "key", "value"], ignore_index=True)


def plot_lr_sweep(frame: pd.DataFrame, stem: str | Path, *, accuracy_keys: Sequence[str]) -> list[Path]:
    """One panel per accuracy key (top-1 % against the swept rate, log scale) and a last panel of the
    total embedding variance (log scale); colour per loss, solid without OAR and dotted with it, as OAR
    Fig. 2. A point whose FFN diverged on every seed (no mean, ``n_diverged`` > 0) is drawn as a cross
    ``x`` on the panel's bottom edge, "FFN diverged" in the legend, never as an accuracy; one whose
    encoder diverged (no embedding variance either) as a ``+`` on every panel, "encoder diverged".
    Writes ``stem``.png/.pdf/.csv (the plotted rows of ``frame``)."""
    keys = [*accuracy_keys, "embedding_variance"]
    losses = list(dict.fromkeys(frame["loss"]))
    colour = {loss: PALETTE[i % len(PALETTE)] for i, loss in enumerate(losses)}
    lost_all = frame["mean"].isna() & (frame.get("n_diverged", 0) > 0)
    variance_lost = frame[lost_all & (frame["key"] == "embedding_variance")]
    encoder_lost = set(zip(variance_lost["method"], variance_lost["value"], strict=True))
    marks_drawn: set[str] = set()
    with house_style():
        fig, axes = figure(len(keys), 1, width="column", aspect=0.55, sharex=True)
        for ax, key in zip(axes[:, 0], keys, strict=True):
            part = frame[frame["key"] == key]
            for method, curve in part.groupby("method", sort=False):
                hue = colour[curve["loss"].iloc[0]]
                dash = LINESTYLES[1] if curve["oar"].iloc[0] else LINESTYLES[0]  # dotted with OAR
                ax.plot(
                    curve["value"], curve["mean"], dash, marker="o", color=hue, label=method_label(method)
                )
                lost = curve[lost_all.loc[curve.index]]
                encoder = [(method, value) in encoder_lost for value in lost["value"]]
                for mark, rows in (("x", lost[[not e for e in encoder]]), ("+", lost[encoder])):
                    if len(rows):
                        _edge_marks(ax, rows["value"], mark, hue)
                        marks_drawn.add(mark)
            ax.set_xscale("log")
            if key == "embedding_variance":
                drawn = part["mean"].dropna()  # a diverged encoder has none: a +, not a value
                if (drawn > 0).all() and not drawn.empty:
                    ax.set_yscale("log")  # the paper's collapse spans orders of magnitude
                ax.set_ylabel("embedding variance")
            else:
                ax.set_ylabel(f"top-1 (%), {_fraction_label(key)}")
            if part.empty:
                note(ax, "no runs yet")
        axes[-1, 0].set_xlabel("learning rate")
        handles, names = axes[0, 0].get_legend_handles_labels()
        for mark, name in (("x", "FFN diverged (no accuracy)"), ("+", "encoder diverged (no embeddings)")):
            if mark in marks_drawn:
                handles.append(
                    Line2D([], [], linestyle="none", marker=mark, color="0.3", markeredgewidth=1.5)
                )
                names.append(name)
        if handles:
            fig.legend(handles, names, loc="outside upper center", ncol=min(4, len(handles)))
        return save(fig, stem, frame[frame["key"].isin(keys)])


def _edge_marks(ax, values: pd.Series, mark: str, hue: str) -> None:
    """``mark`` at each of ``values`` on ``ax``'s bottom edge: a point drawn without a value."""
    ax.plot(
        values,
        [0.0] * len(values),
        mark,
        color=hue,
        markersize=7,
        markeredgewidth=1.5,
        transform=ax.get_xaxis_transform(),  # y in axes units: the bottom edge
        clip_on=False,
    )


def _fraction_label(key: str) -> str:
    digits = "".join(ch for ch in key.split("_")[0] if ch.isdigit())
    return f"{digits}% labels" if digits else key


def embedding_spectrum(
    features: torch.Tensor, labels: torch.Tensor, *, n: int = 1000, seed: int = 0
) -> dict[str, np.ndarray | int]:
    """OAR Fig. 3 for one encoder: ``n`` test embeddings drawn with ``seed``, sorted by class.

    Returns ``singular_values`` (of the centred embeddings, divided by the largest), ``affinity``
    (cosine similarity [n, n], rows and columns in class order), ``labels`` (sorted) and
    ``effective_rank`` (:func:`~contrastlab.training.synthetic.effective_rank` of the centred embeddings at
    95% energy).
    """
    generator = torch.Generator().manual_seed(seed)
    n = min(n, len(features))
    rows = torch.randperm(len(features), generator=generator)[:n]
    x, y = features[rows].double().cpu(), labels[rows].cpu()
    order = torch.argsort(y, stable=True)
    x, y = x[order], y[order]
    sigma = torch.linalg.svdvals(x - x.mean(dim=0))
    unit = torch.nn.functional.normalize(x, dim=1)
    return {
        "singular_values": (sigma / sigma[0].clamp_min(1e-300)).numpy(),
        "affinity": (unit @ unit.T).numpy(),
        "labels": y.numpy(),
        "effective_rank": effective_rank(x, centre=True),
    }


def _bare(ax) -> None:
    """No ticks and no grid on ``ax`` (a matrix, or a panel with nothing to show)."""
    ax.set(xticks=[], yticks=[])
    ax.grid(False)


def plot_spectra(spectra: Mapping[str, Mapping], stem: str | Path) -> list[Path]:
    """Per encoder, its normalised singular values (top row, log scale) and affinity matrix (bottom
    row, colour bar from -1 to 1), titled with the effective rank; writes ``stem``.png/.pdf/.csv (the
    singular values; the affinity matrices are summarised by their class-block means)."""
    names = list(spectra)
    rows = []
    image = None
    with house_style():
        fig, axes = figure(2, len(names), width="page", aspect=0.8)
        for col, name in enumerate(names):
            s, title = spectra[name], f"{method_label(name.split('-lr')[0])} ({name})"
            if s is None:  # a point whose training diverged: no encoder to embed with
                axes[0, col].set_title(title)
                for ax in axes[:, col]:
                    note(ax, "training diverged")
                    _bare(ax)
                rows.append((name, 0, np.nan, "diverged"))
                continue
            sv = np.asarray(s["singular_values"])
            ax = axes[0, col]
            ax.semilogy(np.arange(1, len(sv) + 1), np.clip(sv, 1e-12, None), color=PALETTE[col])
            ax.set_title(f"{title}\neffective rank (95%): {s['effective_rank']}")
            ax.set(xlabel="index", ylabel="σ / σ₁")
            matrix = axes[1, col]
            image = matrix.imshow(s["affinity"], vmin=-1, vmax=1, cmap="RdBu_r", interpolation="nearest")
            matrix.set_title(f"cosine affinity, {len(s['affinity'])} test images (sorted by class)")
            _bare(matrix)
            rows += [(name, i + 1, float(v), s["effective_rank"]) for i, v in enumerate(sv)]
        if image is not None:
            fig.colorbar(image, ax=axes[1, :].tolist(), shrink=0.8, label="cos")
        return save(
            fig, stem, pd.DataFrame(rows, columns=["encoder", "index", "singular_value", "effective_rank"])
        )


def lr_sweep_figure(
    metrics_root: str | Path,
    experiment: str,
    stem: str | Path,
    *,
    rates: Sequence[float],
    label_fractions: Sequence[float] = (0.1, 0.5, 1.0),
) -> list[Path]:
    """OAR Fig. 2 and 4 of ``experiment`` (its ``sweep: {lr: rates}`` cells evaluated with the FFN at
    ``label_fractions``): accuracy at every label fraction and the embedding variance against the rate."""
    accuracy = [f"ffn{round(100 * f)}_top1" for f in label_fractions]
    metrics = collect_metrics(metrics_root)
    frame = sweep_frame(metrics, experiment, "lr", list(rates), [*accuracy, "embedding_variance"])
    return plot_lr_sweep(frame, stem, accuracy_keys=accuracy)


def spectra_figure(
    encoder_dirs: Mapping[str, str | Path],
    *,
    data_root: str | Path | None,
    stem: str | Path,
    n: int = 1000,
    device: str | None = None,
) -> list[Path]:
    """OAR Fig. 3: :func:`embedding_spectrum` of each trained encoder (``name -> encoder dir``) on
    ``n`` test images of its dataset (the same images for every encoder), plotted side by side; on
    ``device`` (default: CUDA when available)."""
    # torchvision: loaded only when the spectrum figure encodes images
    from contrastlab.data.images import IMAGE_STATS, load_images
    from contrastlab.evaluation.vision import extract_features
    from contrastlab.training.vision import load_encoder

    device = pick_device(device)
    spectra: dict[str, Mapping | None] = {}
    for name, encoder_dir in encoder_dirs.items():
        if diverged_reason(encoder_dir) is not None:
            spectra[name] = None  # drawn as "training diverged"
            continue
        encoder, summary = load_encoder(encoder_dir, device)
        s = summary["settings"]
        test = load_images(s["dataset"], "test", root=data_root, image_size=s["image_size"])
        rows = torch.randperm(len(test.labels), generator=torch.Generator().manual_seed(0))[:n]
        features = extract_features(
            encoder,
            test.images[rows],
            size=summary.get("input_size") or summary["image_size"],
            mean=IMAGE_STATS[s["dataset"]][0],
            std=IMAGE_STATS[s["dataset"]][1],
            batch_size=256,
            device=device,
        )
        spectra[name] = embedding_spectrum(features.cpu(), test.labels[rows], n=n, seed=0)
    return plot_spectra(spectra, stem)
