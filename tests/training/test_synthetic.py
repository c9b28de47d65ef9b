"""OAR's synthetic study (§3, Table 2): data, views, network, collapse measures, the finding, determinism
and the figure.

The finding is checked over seeds 0-9: at the "strong learning" rate one run is decided by its first
chaotic steps. What holds on every seed is OAR-InfoNCE keeping three clusters on three lines; InfoNCE
on a single line (effective rank 1) is reached by none, so it is not asserted."""

from __future__ import annotations

import dataclasses
import math

import matplotlib.image
import numpy as np
import pandas as pd
import pytest
import torch

from contrastlab.config import load_schema
from contrastlab.figures.oar_synthetic import plot_synthetic, run_synthetic_study
from contrastlab.losses import build_loss
from contrastlab.training.synthetic import (
    CLUSTER_DIRECTIONS,
    SyntheticSettings,
    axis_angles,
    distinct_directions,
    effective_rank,
    line_energy,
    loss_terms,
    make_clusters,
    make_network,
    make_views,
    seed_table,
    train_synthetic,
)
from tests.images import distinct_colours


# --------------------------------------------------------------------------- data, views, network
def test_make_clusters_is_seeded_and_gives_three_noisy_lines_in_the_unit_ball():
    x, labels = make_clusters(200, 0.05, seed=3)
    again, labels_again = make_clusters(200, 0.05, seed=3)
    assert x.shape == (600, 3) and x.dtype == torch.float32
    assert torch.equal(x, again) and torch.equal(labels, labels_again)
    assert not torch.equal(x, make_clusters(200, 0.05, seed=4)[0])
    assert torch.equal(labels.bincount(), torch.tensor([200, 200, 200]))
    assert float(x.norm(dim=1).max()) <= 1.0 + 1e-6
    clean, _ = make_clusters(200, 0.0, seed=3)
    for k in range(3):
        noisy, exact = x[labels == k].double(), clean[labels == k].double()
        # Noise-free: exactly one line through the origin; with the default noise still rank 1 at 95%.
        assert effective_rank(exact, energy=1.0 - 1e-9) == 1
        assert effective_rank(noisy) == 1 and line_energy(noisy) > 0.97
        # ...along the documented direction, with both signs and |t| >= 0.2 (away from the origin).
        axis = torch.linalg.svd(noisy, full_matrices=False).Vh[0]
        assert abs(float(axis @ CLUSTER_DIRECTIONS[k])) > 0.999
        along = exact @ CLUSTER_DIRECTIONS[k]
        assert (along > 0).any() and (along < 0).any() and float(along.abs().min()) >= 0.2 - 1e-6


def test_views_are_the_point_and_its_negation_plus_seeded_noise():
    x, _ = make_clusters(10, 0.05, seed=0)
    first, second = make_views(x, 0.0, torch.Generator().manual_seed(1))
    assert torch.equal(first, x) and torch.equal(second, -x)
    a = make_views(x, 0.05, torch.Generator().manual_seed(1))
    b = make_views(x, 0.05, torch.Generator().manual_seed(1))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert 0.0 < float((a[0] - x).std()) < 0.1 and 0.0 < float((a[1] + x).std()) < 0.1


def test_network_is_three_dense_layers_with_batchnorm_and_relu_to_3d():
    net = make_network(16)
    kinds = [type(m).__name__ for m in net]
    assert kinds == ["Linear", "BatchNorm1d", "ReLU", "Linear", "BatchNorm1d", "ReLU", "Linear"]
    assert net(torch.zeros(4, 3)).shape == (4, 3)


# --------------------------------------------------------------------------- collapse measures
def test_effective_rank_on_hand_made_matrices():
    rng = np.random.default_rng(0)
    rank_one = np.outer(rng.normal(size=50), [1.0, -2.0, 0.5])
    assert effective_rank(rank_one) == 1 and line_energy(rank_one) == pytest.approx(1.0)
    assert effective_rank(torch.from_numpy(rank_one)) == 1  # tensors too
    assert effective_rank(np.eye(3)) == 3 and line_energy(np.eye(3)) == pytest.approx(1 / 3)
    q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    assert effective_rank(np.vstack([q, -q]) * 2.0) == 3  # isotropic: rows ±q_i of an orthonormal basis
    # A known spectrum σ² = (0.5, 0.3, 0.15, 0.05), rotated on both sides: cumulative shares 0.5, 0.8,
    # 0.95, 1.0, so 95% needs 3 values, 80% needs 2, 81% needs 3 and 50% needs 1.
    u, _ = np.linalg.qr(rng.normal(size=(20, 4)))
    v, _ = np.linalg.qr(rng.normal(size=(4, 4)))
    z = u @ np.diag(np.sqrt([0.5, 0.3, 0.15, 0.05])) @ v.T
    assert [effective_rank(z, e) for e in (0.95, 0.8, 0.81, 0.5, 1.0)] == [3, 2, 3, 1, 4]
    assert line_energy(z) == pytest.approx(0.5)
    # Uncentred: all rows one point off the origin is one line; centred there is nothing left.
    same = np.tile([0.3, 0.4, 0.0], (10, 1))
    assert effective_rank(same) == 1 and effective_rank(same, centre=True) == 0
    assert effective_rank(np.zeros((5, 3))) == 0
    with pytest.raises(ValueError, match="energy"):
        effective_rank(z, 0.0)
    with pytest.raises(ValueError, match=r"\[N, D\]"):
        effective_rank(np.ones(3))


def test_cluster_axis_measures_are_sign_invariant():
    labels = torch.arange(3).repeat_interleave(40)
    sign = torch.where(torch.arange(120) % 3 == 0, -1.0, 1.0).unsqueeze(1)
    t = torch.linspace(0.5, 1.0, 120).unsqueeze(1)
    fused = sign * t * torch.tensor([0.0, 0.0, 1.0])  # every cluster on one line, both ends
    assert np.allclose(axis_angles(fused, labels), 0.0, atol=1e-3)
    assert distinct_directions(fused, labels) == 1
    apart = sign * torch.eye(3)[labels]
    assert np.allclose(axis_angles(apart, labels), 90.0)
    assert distinct_directions(apart, labels) == 3
    two = apart.clone()
    two[labels == 1] = sign[labels == 1] * torch.tensor([0.95, 0.1, 0.0])  # 6 degrees from cluster 0
    assert distinct_directions(two, labels) == 2 and axis_angles(two, labels).min() < 10
    # The input's lines: 90, 54.7 and 54.7 degrees apart, whatever the signs of the points.
    x, xl = make_clusters(100, 0.0, seed=1)
    expected = math.degrees(math.acos(1 / math.sqrt(3)))
    assert np.allclose(np.sort(axis_angles(x, xl)), [expected, expected, 90.0], atol=1e-4)
    assert distinct_directions(x, xl) == 3


# --------------------------------------------------------------------------- the paper's finding
def test_oar_keeps_the_clusters_apart_where_infonce_fuses_them():
    """Seeds 0-9: InfoNCE often loses a dimension; OAR-InfoNCE keeps rank 3 and three directions always."""
    table = seed_table(SyntheticSettings(), range(10), losses=["ntxent"])
    plain, oar = table[~table.oar], table[table.oar]
    assert not table.diverged.any() and len(plain) == len(oar) == 10
    # OAR: on every seed three clusters on three lines, far apart.
    assert (oar.effective_rank == 3).all() and (oar.distinct_directions == 3).all()
    assert oar.min_axis_angle_deg.min() > 45.0
    # InfoNCE: often one dimension lost, sometimes the three clusters fused into one direction.
    assert (plain.effective_rank <= 2).sum() >= 4
    assert (plain.distinct_directions == 1).sum() >= 1
    assert plain.min_axis_angle_deg.median() < oar.min_axis_angle_deg.median() - 15.0
    assert plain.line_energy.median() > oar.line_energy.median()


# --------------------------------------------------------------------------- determinism and files
SMALL = SyntheticSettings(
    points_per_cluster=40,
    epochs=6,
    batch_size=64,
    losses={"ntxent": {"tau": 1.0}, "barlow_twins": {"lam": 5e-3}},
    seeds=1,
    sweep=(),
)


def test_training_is_deterministic_and_leaves_global_state_alone():
    threads, rng = torch.get_num_threads(), torch.random.get_rng_state()
    first = train_synthetic(SMALL, "ntxent", oar=True)
    second = train_synthetic(SMALL, "ntxent", oar=True)
    assert torch.get_num_threads() == threads and torch.equal(torch.random.get_rng_state(), rng)
    assert np.array_equal(first.z, second.z) and np.array_equal(first.curve, second.curve)
    assert first.z.shape == (120, 3) and np.allclose(np.linalg.norm(first.z, axis=1), 1.0)
    assert len(first.curve) == 6 * (120 // 64)
    with pytest.raises(ValueError, match="not in settings.losses"):
        train_synthetic(SMALL, "vicreg", oar=False)


def test_study_writes_identical_tables_and_a_real_figure(tmp_path):
    first = run_synthetic_study(SMALL, tmp_path / "a")
    second = run_synthetic_study(SMALL, tmp_path / "b")
    rows = [("ntxent", False), ("ntxent", True), ("barlow_twins", False), ("barlow_twins", True)]
    assert list(zip(first.loss, first.oar, strict=True)) == rows
    assert {"effective_rank", "min_axis_angle_deg", "distinct_directions", "final_loss"} <= set(first)
    assert first.equals(second)
    assert (tmp_path / "a" / "table2.csv").read_bytes() == (tmp_path / "b" / "table2.csv").read_bytes()
    png = tmp_path / "a" / "table2_figure.png"
    assert png.stat().st_size > 10_000 and (tmp_path / "a" / "table2_figure.pdf").stat().st_size > 5_000
    assert distinct_colours(matplotlib.image.imread(png)[..., :3]) > 20
    points = np.loadtxt(tmp_path / "a" / "table2_figure.csv", delimiter=",", skiprows=1, usecols=(4, 5, 6))
    assert points.shape == ((2 + 4) * 120, 3)  # the input twice, then every run's embeddings
    with pytest.raises(ValueError, match="unknown oar_synthetic setting"):
        run_synthetic_study({"step": 3}, tmp_path / "c")


def test_figure_marks_a_diverged_run(tmp_path):
    run = train_synthetic(SMALL, "ntxent", oar=False)
    broken = dataclasses.replace(run, z=np.full_like(run.z, np.nan), diverged=True)
    written = plot_synthetic({("ntxent", False): run, ("ntxent", True): broken}, tmp_path / "fig")
    assert [p.suffix for p in written] == [".png", ".pdf", ".csv"]


def test_the_study_runs_every_seed_and_sweeps_the_unstated_settings(tmp_path):
    """A row per loss, ± OAR and seed, the figure, then each sweep override once per seed."""
    settings = dataclasses.replace(SMALL, seeds=2, sweep=({"lr": 0.1}, {"optimizer": "adam", "lr": 1e-3}))
    table = run_synthetic_study(settings, tmp_path)
    assert list(zip(table.loss, table.oar, table.seed, strict=True)) == [
        (loss, oar, seed) for seed in (0, 1) for loss in ("ntxent", "barlow_twins") for oar in (False, True)
    ]
    sweep = pd.read_csv(tmp_path / "table2_sweep.csv")
    names = ("as configured", "lr=0.1", "optimizer=adam, lr=0.001")
    assert list(zip(sweep.setting, sweep.seed, strict=True)) == [(s, seed) for s in names for seed in (0, 1)]
    assert set(sweep.loss) == {"ntxent"} and not sweep.oar.any()
    own = table[(table.loss == "ntxent") & ~table.oar].reset_index(drop=True)
    as_configured = sweep[sweep.setting == "as configured"]
    assert as_configured["effective_rank"].tolist() == own["effective_rank"].tolist()
    # each override is the run of the changed settings, seed by seed
    lr = train_synthetic(dataclasses.replace(SMALL, lr=0.1, seed=1), "ntxent", False)
    swept = sweep[(sweep.setting == "lr=0.1") & (sweep.seed == 1)]
    assert swept["line_energy"].item() == round(lr.line_energy, 6)
    points = np.loadtxt(tmp_path / "table2_figure.csv", delimiter=",", skiprows=1, usecols=(4, 5, 6))
    assert points.shape == ((2 + 4) * 120, 3)  # the first seed's runs only
    with pytest.raises(ValueError, match=r"sweep overrides fields of the study's setup, not \['seeds'\]"):
        dataclasses.replace(SMALL, sweep=({"seeds": 3},))
    with pytest.raises(ValueError, match="seeds must be >= 1"):
        dataclasses.replace(SMALL, seeds=0)
    # a sweep entry's reading: these settings with it, checked as a block (a whole float is that integer)
    assert SMALL.reading({"epochs": 2.0}, 3) == dataclasses.replace(SMALL, epochs=2, seed=3, sweep=[])
    with pytest.raises(ValueError, match=r"sweep entry \{'batch_size': 700\}: batch_size must be <= 120"):
        dataclasses.replace(SMALL, sweep=({"batch_size": 700},))
    # the schema names every field (the config load refuses any other key of oar_synthetic) and no other
    names = set(load_schema()["$defs"]["oar_synthetic"]["properties"])
    assert names == {f.name for f in dataclasses.fields(SyntheticSettings)}


def test_the_clip_and_the_loss_terms_say_how_a_run_ended():
    """VICReg's terms (each weighted as in the loss) and Barlow Twins' on/off-diagonal parts add up to the
    loss on the same batch, and both equal the reference formulas (VICReg: Bardes et al. 2022, Alg. 1;
    Barlow Twins: Zbontar et al. 2021, Alg. 1) computed here from the batch; the clip's share is the
    fraction of steps whose norm exceeded it (a clip of 1e-9 cuts every step, none at 1e9)."""
    g = torch.Generator().manual_seed(0)
    h1, h2 = torch.randn(64, 3, generator=g), torch.randn(64, 3, generator=g)
    vic = loss_terms("vicreg", {"lam": 25.0, "mu": 25.0, "nu": 1.0}, h1, h2)
    total = float(build_loss("vicreg", lam=25.0, mu=25.0, nu=1.0)(h1, h2).loss)
    assert sum(vic.values()) == pytest.approx(total, rel=1e-6)
    assert vic["invariance"] == pytest.approx(25.0 * float(torch.nn.functional.mse_loss(h1, h2)), rel=1e-6)

    def std_hinge(h):
        return torch.relu(1 - torch.sqrt(h.var(dim=0) + 1e-4)).mean()

    assert vic["variance"] == pytest.approx(25.0 * float(std_hinge(h1) + std_hinge(h2)) / 2, rel=1e-4)
    bt = loss_terms("barlow_twins", {"lam": 5e-3}, h1, h2)
    assert set(bt) == {"on_diagonal", "off_diagonal"}
    barlow = float(build_loss("barlow_twins", lam=5e-3)(h1, h2).loss)
    assert sum(bt.values()) == pytest.approx(barlow, rel=1e-6)
    assert loss_terms("ntxent", {"tau": 1.0}, h1, h2) == {}
    always = train_synthetic(dataclasses.replace(SMALL, grad_clip=1e-9), "ntxent", False)
    never = train_synthetic(dataclasses.replace(SMALL, grad_clip=1e9), "ntxent", False)
    assert (always.clipped_share, never.clipped_share) == (1.0, 0.0)
    assert never.max_grad_norm > 0 and set(train_synthetic(SMALL, "barlow_twins", False).terms) == set(bt)
