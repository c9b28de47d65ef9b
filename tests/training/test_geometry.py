"""Geometry statistics of the probe set (training.geometry) against loop oracles and closed forms, and the
trainer's analysis setting: off by default, and when on it changes no training number."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file

from contrastlab.training import geometry
from contrastlab.training.sentence import TrainSettings


def _oracle(z1: np.ndarray, z2: np.ndarray, m: float, tau: float) -> dict:
    """Per-anchor loops over one batch, in float64: the authors' formulas written out."""
    n = len(z1)
    pos, neg, gap, lcl, active, arccon, met, mat, share = [], [], [], [], [], [], [], [], []
    lemma = {lam: [] for lam in geometry.LEMMA1_LAMBDAS}
    for i in range(n):
        s = z2 @ z1[i]
        others = [j for j in range(n) if j != i]
        pos.append(s[i])
        neg += [s[j] for j in others]
        gap.append(np.mean([np.linalg.norm(z1[i] - z2[j]) for j in others]) - np.linalg.norm(z1[i] - z2[i]))
        lcl.append(-s[i] / 0.05 + math.log(sum(math.exp(x / 0.05) for x in s)))
        hard = max(others, key=lambda j: s[j])
        if s[i] - s[hard] < m:
            active.append(i)
            theta = math.acos(s[i])
            arccon.append(math.sin(theta + geometry.ARCCON_U) / math.sin(theta))
            met.append(np.linalg.norm(z1[i] - z2[hard]) / np.linalg.norm(z1[i] - z2[i]))
            mat.append(math.sqrt((1 - s[hard] ** 2) / (1 - s[i] ** 2)))
            w = np.array([math.exp(s[j] / tau) for j in others])
            w /= w.sum()
            vectors = [z2[j] - s[j] * z1[i] for j in others]
            combined = sum(wj * v for wj, v in zip(w, vectors, strict=True))
            k = others.index(hard)
            share.append(float((w[k] * vectors[k]) @ combined / (combined @ combined)))
            # Lemma 1 (Li App. A.3) in the paper's notation: the plane angle from the tangent directions
            t_pos, t_neg = z2[i] - s[i] * z1[i], z2[hard] - s[hard] * z1[i]
            cos_a = t_pos @ t_neg / (np.linalg.norm(t_pos) * np.linalg.norm(t_neg))
            sin_ii, sin_ij = math.sin(math.acos(s[i])), math.sin(math.acos(s[hard]))
            for lam in geometry.LEMMA1_LAMBDAS:
                under = 1 / lam**2 - sin_ij**2 * (1 - cos_a**2) / sin_ii**2
                if s[i] > 0 and s[hard] > 0 and cos_a > 0 and under > 0:
                    lemma[lam].append(1 / lam + sin_ij * cos_a / sin_ii - math.sqrt(under))
    theta_pos, theta_neg = np.arccos(np.clip(pos, -1, 1)), np.arccos(np.clip(neg, -1, 1))
    return {
        "mu_pos": theta_pos.mean(),
        "sigma_pos": theta_pos.std(),
        "mu_neg": theta_neg.mean(),
        "sigma_neg": theta_neg.std(),
        "cos_pos": np.mean(pos),
        "cos_neg": np.mean(neg),
        "align": np.mean(((z1 - z2) ** 2).sum(-1)),
        "l_cl": np.mean(lcl),
        "d_gap": np.mean(gap),
        "gd_active": len(active) / n,
        "ratio": {"arccon": np.mean(arccon), "met": np.mean(met), "mat": np.mean(mat)},
        "share": np.mean(share),
        "lemma1": {lam: np.array(values) for lam, values in lemma.items()},
    }


def test_statistics_equal_per_anchor_loops():
    gen = torch.Generator().manual_seed(3)
    base = torch.randn(12, 6, generator=gen, dtype=torch.float64)
    z1 = F.normalize(base + 0.3 * torch.randn(12, 6, generator=gen, dtype=torch.float64), dim=-1)
    z2 = F.normalize(base + 0.3 * torch.randn(12, 6, generator=gen, dtype=torch.float64), dim=-1)
    tau, m = 0.1, 0.3
    got = geometry.finalize(geometry.batch_sums(z1, z2, m=m, taus=[tau]), (z1, z2), [tau])
    want = _oracle(z1.numpy(), z2.numpy(), m, tau)
    assert 0 < want["gd_active"] < 1  # both branches of the GD indicator are exercised
    for key in ("mu_pos", "sigma_pos", "mu_neg", "sigma_neg", "cos_pos", "cos_neg", "align", "l_cl", "d_gap"):
        assert got[key] == pytest.approx(want[key], rel=1e-10, abs=1e-12), key
    assert got["gd_active"] == want["gd_active"]
    for name in ("arccon", "met", "mat"):
        assert got["ratio"][name] == pytest.approx(want["ratio"][name], rel=1e-10), name
    assert got["hardest_share"][f"{tau:g}"] == pytest.approx(want["share"], rel=1e-9)
    assert sum(got["hist"]["pos"]) == 12 and sum(got["hist"]["neg"]) == 12 * 11
    for lam, r_min in want["lemma1"].items():
        entry = got["lemma1"][f"{lam:g}"]
        assert entry["n"] == len(r_min) and sum(entry["hist"]) == len(r_min), lam
        if len(r_min):
            assert entry["share_r1"] == pytest.approx(np.mean(r_min < 1))
    assert any(len(r) for r in want["lemma1"].values())  # the condition was exercised
    uniformity = [torch.pdist(z).square().mul(-2).exp().mean().log().item() for z in (z1, z2)]
    assert got["uniformity"] == pytest.approx(sum(uniformity) / 2)


def test_orthonormal_batch_has_the_closed_form_values():
    """z1 = z2 = the identity: θ_ii' = 0, θ_ij' = π/2, gap √2, L_cl = log(1 + (N-1) e^{-1/τ}), GD off
    everywhere (the positive is 1 ahead of every negative, more than m = 0.3)."""
    n = 5
    z = torch.eye(n, dtype=torch.float64)
    got = geometry.finalize(geometry.batch_sums(z, z), (z, z))
    assert got["mu_pos"] == 0 and got["sigma_pos"] == 0
    assert got["mu_neg"] == pytest.approx(math.pi / 2) and got["sigma_neg"] == pytest.approx(0, abs=1e-7)
    assert got["d_gap"] == pytest.approx(math.sqrt(2))
    assert got["l_cl"] == pytest.approx(math.log1p((n - 1) * math.exp(-1 / 0.05)), rel=1e-9)
    assert got["align"] == 0 and got["gd_active"] == 0
    assert got["ratio"] == {"arccon": None, "met": None, "mat": None}
    assert got["uniformity"] == pytest.approx(-4.0)  # every pair at distance² 2


def test_as_tau_goes_to_zero_the_hardest_negative_takes_the_whole_update():
    """W → one-hot on the hardest negative as τ → 0, so the combined direction is its term: share 1."""
    gen = torch.Generator().manual_seed(5)
    z1 = F.normalize(torch.randn(10, 8, generator=gen, dtype=torch.float64), dim=-1)
    z2 = F.normalize(z1 + 0.5 * torch.randn(10, 8, generator=gen, dtype=torch.float64), dim=-1)
    stats = geometry.finalize(geometry.batch_sums(z1, z2, m=10.0, taus=[1e-4, 3.0]), (z1, z2), [1e-4, 3.0])
    assert stats["gd_active"] == 1.0
    assert stats["hardest_share"]["0.0001"] == pytest.approx(1.0, abs=1e-9)
    assert stats["hardest_share"]["3"] < 0.5


def test_analysis_logs_geometry_changes_no_training_number_and_its_holdout_is_not_trained_on(
    tmp_path, train_tiny
):
    off = train_tiny(tmp_path / "off")
    on = train_tiny(tmp_path / "on", analysis_every=3, analysis_sentences=70, analysis_batch=32)
    assert all(on[key] == off[key] for key in ("best_dev_spearman", "best_step", "evals"))
    a, b = (load_file(tmp_path / name / "model/model.safetensors") for name in ("off", "on"))
    assert all(torch.equal(a[k], b[k]) for k in a)

    def records(name, event):
        lines = (tmp_path / name / "log.jsonl").read_text().splitlines()
        return [r for r in map(json.loads, lines) if r["event"] == event]

    keep = ("step", "loss", "loss_last", "grad_norm", "stats")
    kept = [[{k: r[k] for k in keep} for r in records(name, "train")] for name in ("on", "off")]
    assert kept[0] == kept[1]
    assert records("off", "geometry") == []
    geo = records("on", "geometry")
    assert [r["step"] for r in geo] == [0, 3, 6, 8]  # before training, every 3 steps, the last step
    assert all(r["probe_sentences"] == 64 and r["probe_heldout"] is False for r in geo)  # 2 full batches
    assert all(0 <= r["mu_pos"] < r["mu_neg"] <= math.pi and r["l_cl"] > 0 for r in geo)
    assert all(r["dev_l_cl"] > 0 and r["dev_d_gap"] > 0 for r in geo)  # the dev probe: Nie's dev-set L_cl
    assert "analysis_s" in on["timings"] and on["n_sentences"] == off["n_sentences"]
    # analysis_holdout takes the probe out of training
    analysis = dict(analysis_every=2, analysis_sentences=100, analysis_batch=50, analysis_holdout=True)
    held = train_tiny(tmp_path / "held", max_steps=2, eval_every=2, log_every=2, **analysis)
    assert held["n_sentences"] == off["n_sentences"] - 100


def test_analysis_settings_validate():
    with pytest.raises(ValueError, match=r"analysis_every must be >= 1 or None, got 0"):
        TrainSettings(loss="infonce", analysis_every=0)
    with pytest.raises(ValueError, match="analysis_batch must be >= 2 and <= analysis_sentences"):
        TrainSettings(loss="infonce", analysis_every=5, analysis_sentences=10, analysis_batch=20)
    assert np.isclose(geometry.ARCCON_U, math.radians(10))
