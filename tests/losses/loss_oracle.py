"""Slow, obviously-correct NumPy/loop oracles of every loss (sentence and vision), written from the
formulas of protocol.md §1 and §3 and the papers (never from the implementation). float64, explicit
Python loops."""

from __future__ import annotations

import math

import numpy as np


def unit(h):
    return [np.asarray(row, dtype=np.float64) / math.sqrt(sum(x * x for x in row)) for row in h]


def dot(a, b):
    return float(sum(x * y for x, y in zip(a, b, strict=True)))


def lse(values):
    mx = max(values)
    return mx + math.log(sum(math.exp(v - mx) for v in values))


def mean(xs):
    return sum(xs) / len(xs)


def cosines(h1, h2):
    z1, z2 = unit(h1), unit(h2)
    return z1, z2, [[dot(a, b) for b in z2] for a in z1]


def infonce(h1, h2, tau):
    _, _, s = cosines(h1, h2)
    n = len(s)
    return sum(-s[i][i] / tau + lse([s[i][j] / tau for j in range(n)]) for i in range(n)) / n


def align_uniform(h1, h2, alpha, t, lam):
    z1, z2 = unit(h1), unit(h2)
    n = len(z1)
    align = sum(np.linalg.norm(z1[i] - z2[i]) ** alpha for i in range(n)) / n

    def uni(z):
        vals = [math.exp(-t * np.linalg.norm(z[k] - z[l]) ** 2) for k in range(n) for l in range(k + 1, n)]
        return math.log(sum(vals) / len(vals))

    return (1 - lam) * align + lam * 0.5 * (uni(z1) + uni(z2))


def dcl_terms(h1, h2, tau):
    _, _, s = cosines(h1, h2)
    n = len(s)
    return [
        -s[i][i] / tau + math.log(sum(math.exp(s[i][j] / tau) for j in range(n) if j != i)) for i in range(n)
    ]


def dcl(h1, h2, tau):
    return mean(dcl_terms(h1, h2, tau))


def dcl_plus(h1, h2, tau):
    return mean([max(x, 0.0) for x in dcl_terms(h1, h2, tau)])


def mpt(h1, h2, m):
    _, _, s = cosines(h1, h2)
    n = len(s)
    return sum(max(0.0, max(s[i][j] for j in range(n) if j != i) - s[i][i] + m) for i in range(n)) / n


def met(h1, h2, m):
    _, _, s = cosines(h1, h2)
    n = len(s)
    d = [[math.sqrt(max(2 - 2 * s[i][j], 1e-4)) for j in range(n)] for i in range(n)]
    return sum(max(0.0, d[i][i] - min(d[i][j] for j in range(n) if j != i) + m) for i in range(n)) / n


def mat(h1, h2, m):
    _, _, s = cosines(h1, h2)
    n = len(s)
    th = [[math.acos(min(max(s[i][j], -1 + 1e-6), 1 - 1e-6)) for j in range(n)] for i in range(n)]
    return mean(
        [max(0.0, th[i][i] - min(th[i][j] for j in range(n) if j != i) + m * math.pi) for i in range(n)]
    )


def arccon(h1, h2, tau, u):
    _, _, s = cosines(h1, h2)
    n = len(s)
    total = 0.0
    for i in range(n):
        pos = math.cos(math.acos(min(max(s[i][i], -1 + 1e-6), 1 - 1e-6)) + u) / tau
        total += -pos + lse([pos] + [s[i][j] / tau for j in range(n) if j != i])
    return total / n


def paradigm(h1, h2, m, tau, r, gd=True, weight="exp"):
    _, _, s = cosines(h1, h2)
    n = len(s)
    total = 0.0
    for sv in (s, [list(col) for col in zip(*s, strict=True)]):  # view-1 rows, then view-2 anchors
        active = [(not gd) or (sv[i][i] - max(sv[i][j] for j in range(n) if j != i) < m) for i in range(n)]
        if not any(active):
            continue
        acc = 0.0
        for i in range(n):
            if not active[i]:
                continue
            if weight == "exp":
                den = sum(math.exp(sv[i][k] / tau) for k in range(n) if k != i)
                w = [math.exp(sv[i][j] / tau) / den if j != i else 0.0 for j in range(n)]
            else:
                w = [1.0 / (n - 1) if j != i else 0.0 for j in range(n)]
            acc += sum(w[j] * (sv[i][j] - r * s[i][i]) for j in range(n))
        total += acc / (n * sum(active))
    return total


def mhe_general(h1, h2, lam, tau=0.05, r=None, weight="none"):
    z1, z2 = unit(h1), unit(h2)
    n = len(z1)
    a = [2 - 2 * dot(z1[i], z2[i]) for i in range(n)]
    total = 0.0
    for z in (z1, z2):
        q = [[dot(x, y) for y in z] for x in z]
        scale = tau if weight == "exp" else 1.0
        uni = lse([q[k][l] / scale for k in range(n) for l in range(k)])  # over the pairs k > l
        for i in range(n):
            if weight == "exp":
                w = math.exp(lse([q[i][j] / tau for j in range(n) if j != i]) - uni) / tau
            else:
                w = 1.0 / n
            total += a[i] * w * (1.0 if r is None else r) / 2
        total += lam * uni
    return total


def mhs_general(h1, h2, lam, r=None):
    z1, z2 = unit(h1), unit(h2)
    n = len(z1)
    a = [float(np.linalg.norm(z1[i] - z2[i]) ** 2) for i in range(n)]
    total = 0.0
    for u, v in ((z1, z2), (z2, z1)):
        d = [
            min(math.sqrt(float(np.linalg.norm(u[i] - v[j]) ** 2) + 1e-4) for j in range(n) if j != i)
            for i in range(n)
        ]
        total += lam * sum(-x for x in d) / n
        coef = [0.5 if r is None else r / (2 * d[i]) for i in range(n)]
        total += sum(a[i] * coef[i] for i in range(n)) / n
    return total


def siamese_general(h1, h2, kind, lam, tau=0.05, r=None, weight="none"):
    """VICReg / Barlow Twins gradient-equivalent forms (protocol.md §1), both directions summed."""
    z1, z2 = unit(h1), unit(h2)
    n, dim = len(z1), len(z1[0])
    total = 0.0
    for u1, u2 in ((z1, z2), (z2, z1)):
        src = u1 if kind == "vicreg" else u2
        gram = [[dot(x, y) for y in src] for x in src]
        if weight == "exp":
            den = sum(math.exp(gram[k][l] / tau) for k in range(n) for l in range(n) if k != l)
            g = [[math.exp(gram[i][j] / tau) / den for j in range(n)] for i in range(n)]
        else:
            g = [[2 * gram[i][j] / n**2 for j in range(n)] for i in range(n)]
        c = [sum(u1[i][k] * u2[i][k] for i in range(n)) / n for k in range(dim)]
        for i in range(n):
            neg = sum(g[i][j] * dot(u1[i], u1[j]) for j in range(n))
            if r is not None:
                pos = lam * r * sum(g[i][j] for j in range(n) if j != i) * (-dot(u1[i], u2[i]))
            elif kind == "vicreg":
                pos = -(2 / n) * dot(u1[i], u2[i])
            else:
                pos = -sum((2 / n) * (1 - (1 - lam) * c[k]) * u1[i][k] * u2[i][k] for k in range(dim))
            total += pos + lam * neg
    return total


def macl(h1, h2, tau0, alpha, a0, reweight):
    _, _, s = cosines(h1, h2)
    n = len(s)
    big_a = sum(s[i][i] for i in range(n)) / n
    tau_a = tau0 * (1 + alpha * (big_a - a0))
    total = 0.0
    for i in range(n):
        den = sum(math.exp(s[i][j] / tau_a) for j in range(n))
        p = math.exp(s[i][i] / tau_a) / den
        v = 1 / (1 - p + 1e-8) if reweight else 1.0
        total += -v * math.log(p)
    return total / n


# --------------------------------------------------------------------------- vision losses (2N batch)
def two_n(h1, h2):
    """z = z1 followed by z2 (2N unit rows), all cosines s[k][j], each anchor's positive (k + N) mod 2N,
    and its negatives (every j other than k and its positive)."""
    z = unit(h1) + unit(h2)
    n2 = len(z)
    s = [[dot(a, b) for b in z] for a in z]
    pos = [(k + n2 // 2) % n2 for k in range(n2)]
    negs = [[j for j in range(n2) if j not in (k, pos[k])] for k in range(n2)]
    return z, s, pos, negs


def positive_prob(s, k, p, tau):
    """P_k(τ) = e^{s_kp/τ} / Σ_{j≠k} e^{s_kj/τ}."""
    others = [s[k][j] / tau for j in range(len(s)) if j != k]
    return math.exp(s[k][p] / tau - lse(others))


def negatives_prob(s, k, p, tau):
    """1 - P_k(τ), summed over the negatives' probabilities (exact where P_k rounds to 1)."""
    others = [s[k][j] / tau for j in range(len(s)) if j != k]
    return sum(math.exp(s[k][j] / tau - lse(others)) for j in range(len(s)) if j not in (k, p))


def ntxent_terms(h1, h2, tau):
    """-log P_k = log(1 + Σ_{j neg} e^{(s_kj - s_kp)/τ}) (log1p: exact when P_k is near 1)."""
    _, s, pos, negs = two_n(h1, h2)
    return [math.log1p(sum(math.exp((s[k][j] - s[k][pos[k]]) / tau) for j in negs[k])) for k in range(len(s))]


def ntxent(h1, h2, tau):
    return mean(ntxent_terms(h1, h2, tau))


flatnce = ntxent  # FlatNCE's value is NT-Xent's (released code: mean e^{v - sg v} - 1 + sg(NT-Xent))


def dcl_vision(h1, h2, tau):
    _, s, pos, negs = two_n(h1, h2)
    return mean(
        [-s[k][pos[k]] / tau + math.log(sum(math.exp(s[k][j] / tau) for j in negs[k])) for k in range(len(s))]
    )


def dualtemp_other_view(h1, h2, tau, tau_beta):
    """The released SimCo loss as loops: per direction (q, k) in ((z1, z2), (z2, z1)) and anchor i,
    logits [q_i.k_i, q_i.k_j (j != i)]; term w_i * -log P_i(τ), w_i = (1 - P_i(τ_β)) / (1 - P_i(τ));
    each direction's mean, then the mean of the two. Returns (terms, weights), view-1 anchors first."""
    z1, z2 = unit(h1), unit(h2)
    n = len(z1)
    terms, weights = [], []
    for q, k in ((z1, z2), (z2, z1)):
        for i in range(n):
            logits = [dot(q[i], k[j]) for j in range(n)]

            def negatives_share(t, logits=logits, i=i):
                total = lse([x / t for x in logits])
                return sum(math.exp(x / t - total) for j, x in enumerate(logits) if j != i)

            terms.append(
                math.log1p(sum(math.exp((x - logits[i]) / tau) for j, x in enumerate(logits) if j != i))
            )
            weights.append(negatives_share(tau_beta) / negatives_share(tau))
    return terms, weights


def dualtemp_weights(h1, h2, tau, tau_beta, negatives="other_view"):
    if negatives == "other_view":
        return dualtemp_other_view(h1, h2, tau, tau_beta)[1]
    _, s, pos, _ = two_n(h1, h2)
    return [negatives_prob(s, k, pos[k], tau_beta) / negatives_prob(s, k, pos[k], tau) for k in range(len(s))]


def dualtemp(h1, h2, tau, tau_beta, negatives="other_view"):
    if negatives == "other_view":
        terms, w = dualtemp_other_view(h1, h2, tau, tau_beta)
        n = len(terms) // 2
        directions = [
            sum(a * b for a, b in zip(w[d : d + n], terms[d : d + n], strict=True)) / n for d in (0, n)
        ]
        return sum(directions) / 2
    w = dualtemp_weights(h1, h2, tau, tau_beta, negatives)
    terms = ntxent_terms(h1, h2, tau)
    return sum(a * b for a, b in zip(w, terms, strict=True)) / len(terms)


def macl_vision_tau(h1, h2, tau0, alpha, a0):
    z1, z2 = unit(h1), unit(h2)
    big_a = sum(dot(a, b) for a, b in zip(z1, z2, strict=True)) / len(z1)
    return tau0 * (1 + alpha * (big_a - a0))


def macl_vision_weights(h1, h2, tau0, alpha, a0, reweight):
    _, s, pos, _ = two_n(h1, h2)
    tau_a = macl_vision_tau(h1, h2, tau0, alpha, a0)
    if not reweight:
        return [1.0] * len(s)
    return [1 / (negatives_prob(s, k, pos[k], tau_a) + 1e-8) for k in range(len(s))]


def macl_vision(h1, h2, tau0, alpha, a0, reweight):
    tau_a = macl_vision_tau(h1, h2, tau0, alpha, a0)
    v = macl_vision_weights(h1, h2, tau0, alpha, a0, reweight)
    terms = ntxent_terms(h1, h2, tau_a)
    return sum(a * b for a, b in zip(v, terms, strict=True)) / len(terms)


# --------------------------------------------------------------------------- OAR study (raw embeddings)
def column(h, d):
    return [row[d] for row in h]


def barlow_twins(h1, h2, lam, eps=1e-5):
    """Σ_i (1 - C_ii)² + λ Σ_{i≠j} C_ij², C_ij = (1/N) Σ_b a_bi b_bj with a, b each view standardised
    per dimension by its batch mean and biased variance (+ eps): BatchNorm1d(affine=False)."""
    n, dim = len(h1), len(h1[0])

    def standardise(h):
        cols = []
        for d in range(dim):
            x = column(h, d)
            m = mean(x)
            var = mean([(v - m) ** 2 for v in x])
            cols.append([(v - m) / math.sqrt(var + eps) for v in x])
        return cols  # cols[d][b]

    a, b = standardise(h1), standardise(h2)
    c = [[sum(a[i][k] * b[j][k] for k in range(n)) / n for j in range(dim)] for i in range(dim)]
    on = sum((1 - c[i][i]) ** 2 for i in range(dim))
    off = sum(c[i][j] ** 2 for i in range(dim) for j in range(dim) if i != j)
    return on + lam * off


def vicreg_terms(h1, h2, gamma, eps):
    """(invariance, variance, covariance) of VICReg: MSE over all N·D entries; per view
    mean_d relu(γ - sqrt(unbiased var_d + ε)), averaged over the two views; per view
    Σ_{i≠j} cov_ij² / D (cov unbiased), summed over the two views."""
    n, dim = len(h1), len(h1[0])
    inv = sum((h1[b][d] - h2[b][d]) ** 2 for b in range(n) for d in range(dim)) / (n * dim)

    def var_term(h):
        out = 0.0
        for d in range(dim):
            x = column(h, d)
            m = mean(x)
            out += max(0.0, gamma - math.sqrt(sum((v - m) ** 2 for v in x) / (n - 1) + eps))
        return out / dim

    def cov_term(h):
        means = [mean(column(h, d)) for d in range(dim)]
        total = 0.0
        for i in range(dim):
            for j in range(dim):
                if i != j:
                    cov = sum((h[b][i] - means[i]) * (h[b][j] - means[j]) for b in range(n)) / (n - 1)
                    total += cov**2
        return total / dim

    return inv, 0.5 * (var_term(h1) + var_term(h2)), cov_term(h1) + cov_term(h2)


def vicreg(h1, h2, lam, mu, nu, gamma, eps):
    inv, var, cov = vicreg_terms(h1, h2, gamma, eps)
    return lam * inv + mu * var + nu * cov


def oar_terms(z, labels, anchors, mask=None):
    """Per labelled sample 1 - cos(z_i, c_{y_i}) (OAR §4); unlabelled samples are left out."""
    zs, cs = unit(z), unit(anchors)
    mask = mask if mask is not None else [True] * len(z)
    return [1.0 - dot(zs[i], cs[labels[i]]) for i in range(len(z)) if mask[i]]


def value(name: str, h1, h2, hp: dict) -> float:
    """Oracle value of loss ``name`` with the full hyperparameter dict ``hp``."""
    if name in ("mhe", "mmhe"):
        return mhe_general(h1, h2, hp["lam"], hp.get("tau", 0.05), hp.get("r"), hp.get("weight", "none"))
    if name in ("mhs", "mmhs"):
        return mhs_general(h1, h2, hp["lam"], hp.get("r"))
    if name in ("vicreg_li", "mvicreg", "barlow_twins_li", "mbarlow_twins"):
        kind = "vicreg" if "vicreg" in name else "bt"
        return siamese_general(
            h1, h2, kind, hp["lam"], hp.get("tau", 0.05), hp.get("r"), hp.get("weight", "none")
        )
    fn = globals()[name]
    args = {k: v for k, v in hp.items() if k != "gd" or name == "paradigm"}
    return fn(h1, h2, **args)
