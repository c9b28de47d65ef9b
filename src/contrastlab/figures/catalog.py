"""Which figures a config draws, for the Snakefile's figure rules and the report. A paper's own figures
are its record's (:mod:`contrastlab.papers`; their drawings register in :mod:`contrastlab.figures.registry`);
this module keeps the rules for the kinds a config draws per experiment (``lr_sweep``, ``spectra``,
``search``, the synthetic study, the user losses' paradigm). Import-light, so the workflow parses fast.
"""

from __future__ import annotations

from contrastlab.config import Grid
from contrastlab.papers import PAPERS, FigureSpec, paper_of

#: Every paper's own figures, in the papers' order: name (``<prefix>/<figure>``) -> its record's entry.
RECORD_FIGURES: dict[str, FigureSpec] = {name: spec for p in PAPERS for name, spec in p.figures.items()}

#: The figures read from experiments' cells (their training logs, or metrics and logs): one job each.
CELL_FIGURES = {name: spec for name, spec in RECORD_FIGURES.items() if spec.reads != "analytic"}


def _analytic_figures() -> dict[str, list[str]]:
    """Paper -> the names of its figures computed from its formulas, in its record's order."""
    out: dict[str, list[str]] = {}
    for name, spec in RECORD_FIGURES.items():
        if spec.reads == "analytic":
            out.setdefault(paper_of(name), []).append(name)
    return out


#: The figures computed from the papers' formulas (no training), per paper: one job each, since Li's Fig. 2
#: and 10 share one simulation.
ANALYTIC_FIGURES = _analytic_figures()

#: The caption of each figure kind drawn per experiment of a config (lr_sweep, spectra, oar_synthetic).
KIND_CAPTIONS = {kind: caption for p in PAPERS for kind, caption in p.figure_kinds.items()}
# the paper whose experiments ask for a kind drawn once per config (OAR's synthetic study)
_KIND_PAPER = {kind: p.prefix for p in PAPERS for kind in p.figure_kinds}

#: The search figure's caption: of no paper's, as any experiment with a ``search`` draws it.
SEARCH_CAPTION = (
    "The hyperparameter search (contrastlab.search): STS-B dev Spearman of every point, one panel per "
    "backbone, method and stage; white box: the selected point, black circle: the published setting (Nie "
    "Table 2, Li Tables 6-7) where it lies on the grid. The selected settings beside the published ones: "
    "the search table."
)


def _figure(name: str, kind: str, experiment: str = "", caption: str | None = None) -> dict[str, str]:
    """One catalogue entry; ``caption`` defaults to the kind's (:data:`KIND_CAPTIONS`)."""
    return {"name": name, "kind": kind, "experiment": experiment, "caption": caption or KIND_CAPTIONS[kind]}


def figures(grid: Grid) -> list[dict[str, str]]:
    """The figures a config produces, each ``{"name", "kind", "experiment", "caption"}`` (``name`` is
    the path under ``<results>/figures`` without extension; ``kind`` what a paper's own figure reads, else
    the kind): with a top-level ``oar_synthetic`` block, the synthetic study (OAR Table 2); each figure
    of a paper's record (:data:`RECORD_FIGURES`) one of whose experiments is selected; per selected
    vision experiment with an ``lr`` sweep evaluated by the FFN, its ``lr_sweep`` (OAR Fig. 2/4); with a
    ``search``, its ``search``; with ``spectra``, its ``spectra`` (OAR Fig. 3); the user losses'
    paradigm figures. With ``figures: false``, only the synthetic study (a table as well as a figure)."""
    narrowed = len(grid.experiments) < len(grid.every_experiment)  # select: names the experiments
    synthetic_paper = _KIND_PAPER["oar_synthetic"]
    out = []
    if grid.options.oar_synthetic is not None and (
        not narrowed or any(paper_of(e) == synthetic_paper for e in grid.experiments)
    ):
        out.append(_figure("oar_synthetic/table2", "oar_synthetic"))
    if not grid.options.figures:  # the synthetic study stays: it is OAR Table 2
        return out
    for figure_name, spec in RECORD_FIGURES.items():
        if set(spec.experiments) & set(grid.experiments):
            experiment = spec.experiments[0] if len(spec.experiments) == 1 else ""
            out.append(_figure(figure_name, spec.reads, experiment, spec.caption))
    for name, exp in grid.experiments.items():
        spec = grid.experiment(name)
        probes = (spec.vision_evaluation.get("probes") or []) if spec.track == "vision" else []
        if "lr" in (exp.get("sweep") or {}) and "ffn" in probes:
            caption = KIND_CAPTIONS["lr_sweep"] + _anchor_reach_note(grid, name)
            out.append(_figure(f"{name}/lr_sweep", "lr_sweep", name, caption))
        if exp.get("search") and grid.options.searches_in_all:
            out.append(_figure(f"{name}/search", "search", name, SEARCH_CAPTION))
        if exp.get("spectra"):
            spectra = KIND_CAPTIONS["spectra"].format(spectra=", ".join(exp["spectra"]))
            out.append(_figure(f"{name}/spectra", "spectra", name, spectra + _anchor_reach_note(grid, name)))
    return out + paradigm_figures(grid)


def paradigm_figures(grid: Grid) -> list[dict[str, str]]:
    """Li et al.'s gradient paradigm (GD, W, R by autograd) of every user loss: ``paradigm/<method>``."""
    return [
        _figure(
            f"paradigm/{method}",
            "paradigm",
            caption=f"Where {method} ({loss}) sits in Li et al.'s unified gradient paradigm, computed by "
            "autograd on synthetic batches over the mean anchor-positive and anchor-negative angles: GD "
            "(the push from the negatives, as a share of its largest; Li Fig. 2), the hardest negative's "
            "share of the weights W (Li Fig. 3) and the ratio R of pull to push (Li Fig. 4).",
        )
        for method, (loss, _) in grid.user_losses.items()
    ]


def _anchor_reach_note(grid: Grid, experiment: str) -> str:
    """A caption sentence for OAR experiments whose loss sees a ResNet's pooled output directly (no
    projection head, no final linear layer): that output is non-negative after ReLU, so a random
    orthonormal anchor is reachable only up to cosine sqrt(1/2) in expectation (the norm of its
    positive part); empty otherwise."""
    exp = grid.experiment(experiment).spec
    first = next((c for c in grid.cells if c.experiment == experiment), None)
    if first is None:
        return ""
    settings = grid.settings(first)
    linear_out = any(
        (grid.backbone(b).get("vision") or {}).get("out_dim") for b in exp.get("backbones") or []
    )
    if settings.get("projection_head", True) or linear_out:
        return ""
    return (
        " Without a projection head (as the paper) the embeddings are the encoder's pooled ReLU outputs, "
        "non-negative, so the cosine to an OAR anchor can reach only about 0.71 (sqrt 1/2), not 1."
    )
