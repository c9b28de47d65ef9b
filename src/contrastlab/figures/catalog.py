"""Which figures a config draws, with their captions: the Snakefile's figure rules and the report read this
catalogue. Import-light (no matplotlib, no torch), so that the workflow parses fast.
"""

from __future__ import annotations

from contrastlab.config import Grid

#: Sentence experiments whose paper has a figure read from the training logs and metrics (Nie Fig. 1).
LOG_FIGURE_EXPERIMENTS = ("nie2023",)


#: Figures over a swept setting, from their own experiments (no tables): figure -> (experiments,
#: caption, what they read: the training logs' dev scores, or the evaluated metrics).
SWEEP_FIGURES = {
    "li2024/li2024_fig6": (
        ("li2024_fig6_m", "li2024_fig6_tau", "li2024_fig6_r"),
        "Li Fig. 6: STS-B dev Spearman of the baseline when one component varies (m of the GD indicator, "
        "τ of the weight, r of the ratio); the paper: performance falls as m grows, drops sharply once "
        "τ passes 0.3, and rises with r.",
        "logs",
    ),
    "nie2023/nie2023_fig3": (
        ("nie2023_fig3",),
        "Nie Fig. 3a: STS.Avg and TR.Avg of MPT against its margin m and against the distance gap d_ij "
        "the run ends at (probe of training sentences); the paper: STS is far more sensitive to the gap "
        "than TR, best at m = 0.23.",
        "metrics+logs",
    ),
    # Figures from the trainer's geometry records (training.analysis_every; figures.geometry_logs).
    "nie2023/nie2023_fig3b": (
        ("nie2023",),
        "Nie Fig. 3b: the distance gap d_ij (mean anchor-negative minus anchor-positive distance) across "
        "training per loss; the paper: it keeps growing under the decoupled forms, far beyond L_cl's.",
        "logs",
    ),
    "nie2023/nie2023_fig3cde": (
        ("nie2023_fig3",),
        "Nie Fig. 3c-e: train L_cl, ℓ_align and ℓ_uniform of MPT per margin m; the paper: at m = 0.23 L_cl "
        "and ℓ_uniform fall lowest, ℓ_align barely moves; m = 0.80 looks like DCL's overfitting curves.",
        "logs",
    ),
    "li2024/li2024_fig5": (
        ("li2024_conjectures",),
        "Li Fig. 5: density of anchor-negative (left) and anchor-positive (right) cosines on held-out "
        "sentences after training the baseline with and without GD; the paper: with GD the positive "
        "cosines lie closer to the negative ones.",
        "logs",
    ),
    "li2024/li2024_fig7": (
        ("li2024_conjectures",),
        "Li Fig. 7: the hardest negative's share of the update against τ before training and after the "
        "baseline; the paper: the backbone needs a tiny τ for the hardest negative to dominate, the "
        "trained model already at τ = 0.05.",
        "logs",
    ),
    "li2024/li2024_fig8a": (
        ("li2024_conjectures",),
        "Li Fig. 8a: density of the least ratio r meeting Lemma 1 (anchor nearer its positive after a "
        "step λ(r h'_i − h'_j)) before and after training the baseline; λ = 0.1, 0.3, 0.5 are ours (the "
        "paper's are not given); the paper: a ratio above 1 meets the condition more often.",
        "logs",
    ),
    "li2024/li2024_fig8b": (
        ("li2024_conjectures",),
        "Li Fig. 8b: the dynamic ratios of ArcCon, MET (and MAT) on the baseline's held-out batches across "
        "training; the paper: they stay above 1 throughout.",
        "logs",
    ),
    "li2024/li2024_fig8c": (
        ("li2024_fig6_r",),
        "Li Fig. 8c: mean anchor-positive cosine across training for each ratio r of the baseline; the "
        "paper: a larger r keeps anchor and positive closer.",
        "logs",
    ),
    "li2024/li2024_fig9": (
        ("li2024_conjectures",),
        "Li Fig. 9: estimated μ_pos, μ_neg, σ_pos, σ_neg of the angles across training of the baseline; "
        "the paper: within its simulation's ranges, σ near 0.05 and 0.10.",
        "logs",
    ),
}


#: Figures computed from the papers' formulas (no training): experiment -> {figure: caption}.
ANALYTIC_FIGURES = {
    "nie2023": {
        "nie2023_fig2a": "Nie Fig. 2a: norm of the alignment part of the gradient over the anchor-positive "
        "(θ_ii′) and anchor-negative (θ_ij′) angles, InfoNCE at 64-512 negatives, L_align and DCL; the "
        "paper: InfoNCE's gradient dissipates as the positive nears the negatives, L_align and DCL do "
        "not. Closed forms, checked against autograd of our losses.",
        "nie2023_fig2b": "Nie Fig. 2b: the same for DCL+, MPT, MET and MAT (64 negatives); the paper: the "
        "margin losses keep a dissipation band at a controlled distance gap.",
        "nie2023_fig4": "Nie Fig. 4 (App. B): the uniformity part (one negative's, the hardest for the hinge "
        "losses) of the same losses.",
    },
    "li2024": {
        "li2024_fig2": "Li Fig. 2: Monte-Carlo mean of the gradient-dissipation term of ArcCon and MET over "
        "μ_pos × μ_neg (1 positive + 127 negatives per batch); the paper: GD falls to 0 once the positive "
        "is closer than the negatives by a margin.",
        "li2024_fig10": "Li Fig. 10 (App. A.1): the same for InfoNCE and MPT; at μ_pos = μ_neg InfoNCE's "
        "term is 127/128 in closed form (tested).",
        "li2024_fig3": "Li Fig. 3 (simulated part): share of the weight taken by the hardest negative "
        "against μ_neg for several τ; the paper: small τ puts nearly all weight on one negative.",
        "li2024_fig4": "Li Fig. 4: the dynamic ratios of ArcCon, MET and MAT over μ_pos × μ_neg, grey where "
        "the pair does not occur in training (μ_pos > μ_neg, or the gradient has dissipated); the "
        "paper: where pairs occur the ratio is mostly between 1 and 2.",
    },
}


def figures(grid: Grid) -> list[dict[str, str]]:
    """The figures a config produces, each ``{"name", "kind", "experiment", "caption"}`` (``name`` is
    the path under ``<results>/figures`` without extension): per selected vision experiment with an
    ``lr`` sweep evaluated by the FFN, its ``lr_sweep`` (OAR Fig. 2/4); with ``spectra``, its
    ``spectra`` (OAR Fig. 3); with a top-level ``oar_synthetic`` block, the synthetic study (OAR
    Table 2); for Nie's experiment, alignment/uniformity and the training curves (Nie Fig. 1); for
    Nie's and Li's experiments, their analytic and simulated figures (:data:`ANALYTIC_FIGURES`)."""
    narrowed = len(grid.experiments) < len(grid.every_experiment)  # select: names the experiments
    out = []
    if grid.oar_synthetic is not None and (
        not narrowed or any(e.startswith("oar") for e in grid.experiments)
    ):
        out.append(
            {
                "name": "oar_synthetic/table2",
                "kind": "oar_synthetic",
                "experiment": "",
                "caption": "OAR Table 2 (synthetic): three noisy rank-1 clusters in 3-D embedded by a "
                "3-layer MLP trained with each loss, without and with OAR; the paper: InfoNCE fuses "
                "the clusters onto one line, OAR keeps them apart. Ours, in part: over 20 seeds InfoNCE "
                "flattens to a plane in 14 (never a line), OAR-InfoNCE keeps 3 directions in all 20.",
            }
        )
    for figure_name, (experiments, caption, _) in SWEEP_FIGURES.items():
        present = [e for e in experiments if e in grid.every_experiment]
        if set(present) & set(grid.experiments):
            out.append({"name": figure_name, "kind": "sweep", "experiment": "", "caption": caption})
    for name, exp in grid.experiments.items():
        for figure_name, caption in ANALYTIC_FIGURES.get(name, {}).items():
            out.append(
                {"name": f"{name}/{figure_name}", "kind": "analytic", "experiment": name, "caption": caption}
            )
        if name in LOG_FIGURE_EXPERIMENTS:
            out += [
                {
                    "name": f"{name}/align_uniform",
                    "kind": "align_uniform",
                    "experiment": name,
                    "caption": "Nie Fig. 1a: ℓ_align against ℓ_uniform on STS-B dev of every checkpoint, "
                    "coloured by STS.Avg; the paper: the positions do not show the gap between L_cl and "
                    "its decoupled forms.",
                },
                {
                    "name": f"{name}/training_curves",
                    "kind": "training_curves",
                    "experiment": name,
                    "caption": "Nie Fig. 1b-d (in part): training loss and dev ℓ_align, ℓ_uniform and STS-B "
                    "Spearman over training per loss, from the trainer's logs (the train-set ℓ_uniform "
                    "and dev loss the paper also plots are not logged yet).",
                },
            ]
        probes = grid.vision_evaluation(name).get("probes") or [] if grid.track(name) == "vision" else []
        if "lr" in (exp.get("sweep") or {}) and "ffn" in probes:
            out.append(
                {
                    "name": f"{name}/lr_sweep",
                    "kind": "lr_sweep",
                    "experiment": name,
                    "caption": "OAR Fig. 2 and 4: FFN top-1 at each label fraction and the total variance "
                    "of the embeddings across the learning rates, each loss without (solid) and with "
                    "(dotted) OAR; the paper: without OAR accuracy and variance collapse at large rates "
                    "(InfoNCE to ~10% at lr 1), with OAR accuracy keeps rising. A cross on a panel's "
                    "bottom edge: the FFN diverged at that rate (no accuracy, not a collapse)."
                    + _anchor_reach_note(grid, name),
                }
            )
        if exp.get("search") and grid.searches_in_all:
            out.append(
                {
                    "name": f"{name}/search",
                    "kind": "search",
                    "experiment": name,
                    "caption": "The hyperparameter search (contrastlab.search): STS-B dev Spearman of every "
                    "point, one panel per backbone, method and stage; white box: the selected point, black "
                    "circle: the published setting (Nie Table 2, Li Tables 6-7) where it lies on the grid. "
                    "The selected settings beside the published ones: the search table.",
                }
            )
        if exp.get("spectra"):
            out.append(
                {
                    "name": f"{name}/spectra",
                    "kind": "spectra",
                    "experiment": name,
                    "caption": "OAR Fig. 3: normalised singular values and cosine affinity of 1000 test "
                    f"embeddings ({', '.join(exp['spectra'])}); the paper: OAR gives class-block "
                    "structure and a higher effective rank (95% energy)." + _anchor_reach_note(grid, name),
                }
            )
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
    exp = grid.spec(experiment)
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
