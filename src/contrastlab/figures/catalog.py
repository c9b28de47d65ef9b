"""Which figures a config draws: the Snakefile's figure rules and the report read this catalogue. The
captions are the papers' (``figures`` in each paper's record, :mod:`contrastlab.papers`); this module keeps
the rule for which kinds a config draws. Import-light (no matplotlib, no torch), so that the workflow parses
fast.
"""

from __future__ import annotations

from contrastlab.config import Grid
from contrastlab.papers import PAPERS, paper_of

#: Sentence experiments whose paper has a figure read from the training logs and metrics (Nie Fig. 1).
LOG_FIGURE_EXPERIMENTS = tuple(e for p in PAPERS for e in p.figures.get("from_logs", ()))

#: Figures over a swept setting, from their own experiments (no tables): figure -> (experiments,
#: caption, what they read: the training logs' dev scores, or the evaluated metrics).
SWEEP_FIGURES = {
    name: (tuple(figure["experiments"]), figure["caption"], figure["reads"])
    for p in PAPERS
    for name, figure in (p.figures.get("sweep") or {}).items()
}

#: Figures computed from the papers' formulas (no training): experiment -> {figure: caption}.
ANALYTIC_FIGURES = {
    e: dict(figures) for p in PAPERS for e, figures in (p.figures.get("analytic") or {}).items()
}

#: The caption of each figure kind a paper's protocol draws (align_uniform, lr_sweep, ...).
KIND_CAPTIONS = {kind: caption for p in PAPERS for kind, caption in (p.figures.get("kinds") or {}).items()}
# the paper whose experiments ask for a kind drawn once per config (OAR's synthetic study)
_KIND_PAPER = {kind: p.prefix for p in PAPERS for kind in p.figures.get("kinds") or {}}

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
    the path under ``<results>/figures`` without extension): per selected vision experiment with an
    ``lr`` sweep evaluated by the FFN, its ``lr_sweep`` (OAR Fig. 2/4); with ``spectra``, its
    ``spectra`` (OAR Fig. 3); with a top-level ``oar_synthetic`` block, the synthetic study (OAR
    Table 2); for the experiments of :data:`LOG_FIGURE_EXPERIMENTS`, alignment/uniformity and the
    training curves (Nie Fig. 1); the papers' analytic and sweep figures (:data:`ANALYTIC_FIGURES`,
    :data:`SWEEP_FIGURES`) of the selected experiments. With ``figures: false``, only the synthetic
    study (a table as well as a figure)."""
    narrowed = len(grid.experiments) < len(grid.every_experiment)  # select: names the experiments
    synthetic_paper = _KIND_PAPER["oar_synthetic"]
    out = []
    if grid.options.oar_synthetic is not None and (
        not narrowed or any(paper_of(e) == synthetic_paper for e in grid.experiments)
    ):
        out.append(_figure("oar_synthetic/table2", "oar_synthetic"))
    if not grid.options.figures:  # the synthetic study stays: it is OAR Table 2
        return out
    for figure_name, (experiments, caption, _) in SWEEP_FIGURES.items():
        present = [e for e in experiments if e in grid.every_experiment]
        if set(present) & set(grid.experiments):
            out.append(_figure(figure_name, "sweep", caption=caption))
    for name, exp in grid.experiments.items():
        for figure_name, caption in ANALYTIC_FIGURES.get(name, {}).items():
            out.append(_figure(f"{name}/{figure_name}", "analytic", name, caption))
        if name in LOG_FIGURE_EXPERIMENTS:
            out += [_figure(f"{name}/{kind}", kind, name) for kind in ("align_uniform", "training_curves")]
        probes = (
            grid.experiment(name).vision_evaluation.get("probes") or []
            if grid.experiment(name).track == "vision"
            else []
        )
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
        {
            "name": f"paradigm/{method}",
            "kind": "paradigm",
            "experiment": "",
            "caption": f"Where {method} ({loss}) sits in Li et al.'s unified gradient paradigm, computed by "
            "autograd on synthetic batches over the mean anchor-positive and anchor-negative angles: GD "
            "(the push from the negatives, as a share of its largest; Li Fig. 2), the hardest negative's "
            "share of the weights W (Li Fig. 3) and the ratio R of pull to push (Li Fig. 4).",
        }
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
