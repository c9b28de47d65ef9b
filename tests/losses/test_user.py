"""A loss from the user's own module: resolution, hyperparameters, inputs, the load-time check, metadata."""

from __future__ import annotations

import gc
import math
import textwrap

import pytest
import torch
import torch.nn.functional as F
from loss_oracle import lse

from contrastlab.losses import build_loss
from contrastlab.losses.checks import check_user_loss
from contrastlab.losses.user import UserLossError, module_path
from contrastlab.paths import REPO_ROOT
from contrastlab.provenance import user_losses

EXAMPLE = "examples/margin_infonce.py:margin_infonce"


def margin_oracle(h1, h2, tau, m):
    """float64 loops: mean over both directions of -log softmax with the positive logit (s_ii - m)/tau."""
    z1, z2 = F.normalize(h1, dim=-1), F.normalize(h2, dim=-1)
    n = z1.shape[0]
    total = 0.0
    for a, b in ((z1, z2), (z2, z1)):
        for i in range(n):
            logits = [(float(a[i] @ b[j]) - (m if j == i else 0.0)) / tau for j in range(n)]
            total += lse(logits) - logits[i]
    return total / (2 * n)


@pytest.fixture
def in_repo(monkeypatch):
    monkeypatch.chdir(REPO_ROOT)


@pytest.mark.parametrize("name", [EXAMPLE, "examples.margin_infonce:margin_infonce"])
def test_example_loss_resolves_by_file_and_by_module_and_matches_its_formula(in_repo, name):
    g = torch.Generator().manual_seed(3)
    h1 = torch.randn(5, 7, generator=g, dtype=torch.float64)
    h2 = h1 + 0.4 * torch.randn(5, 7, generator=g, dtype=torch.float64)
    out = build_loss(name, tau=0.2, m=0.3)(h1, h2)
    assert out.loss.item() == pytest.approx(margin_oracle(h1, h2, 0.2, 0.3), rel=1e-12)
    assert set(out.stats) == {"positive_cos"}
    assert module_path(name) == str(REPO_ROOT / "examples" / "margin_infonce.py")


def test_defaults_come_from_the_signature_and_metadata_records_file_and_sha256(in_repo):
    import hashlib

    loss = build_loss(EXAMPLE, tau=0.1)
    assert loss.hp == {"tau": 0.1, "m": 0.1}
    record = user_losses()[EXAMPLE]
    path = REPO_ROOT / "examples" / "margin_infonce.py"
    assert record == {
        "module": str(path),
        "callable": "margin_infonce",
        "file": str(path),
        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
    }
    from contrastlab.provenance import run_metadata

    assert run_metadata()["user_losses"][EXAMPLE] == record


def _module(tmp_path, body: str, name: str = "userloss") -> str:
    path = tmp_path / f"{name}.py"
    path.write_text(
        "import torch\nfrom contrastlab.losses.user import contrastive_loss\n" + textwrap.dedent(body)
    )
    return str(path)


def test_raw_inputs_are_passed_unnormalised_and_symmetry_is_checked(tmp_path):
    path = _module(
        tmp_path,
        """
        @contrastive_loss(inputs="raw", symmetric=True)
        def sq(z1, z2, *, lam=1.0):
            return lam * ((z1 - z2) ** 2).sum(-1).mean()
        """,
    )
    h1, h2 = torch.full((3, 2), 2.0, dtype=torch.float64), torch.zeros(3, 2, dtype=torch.float64)
    assert build_loss(f"{path}:sq", lam=0.5)(h1, h2).loss.item() == pytest.approx(4.0)  # raw: 0.5 * 8
    assert check_user_loss(f"{path}:sq", {"lam": 2.0}).symmetric


def _returns(value: str, head: str = "def f(z1, z2):") -> str:
    """A module defining ``head`` whose body returns ``value``."""
    return f"{head}\n    return {value}\n"


BAD_LOSSES = {  # fault: (module text, hyperparameters, what the one line says)
    "import error": ("import no_such_package_xyz\n" + _returns("(z1 * z2).sum()"), {}, "ModuleNotFoundError"),
    "missing callable": (_returns("(z1 * z2).sum()", "def g(z1, z2):"), {}, "f does not exist"),
    "one view only": (_returns("z.sum()", "def f(z):"), {}, "first two positional arguments"),
    "hp as **kwargs": (_returns("(z1 * z2).sum()", "def f(z1, z2, **hp):"), {}, "not a named hyperparameter"),
    "unknown hp": (
        _returns("(z1 @ z2.T / tau).sum()", "def f(z1, z2, *, tau=0.1):"),
        {"t": 1},
        "no hyperparameter 't'",
    ),
    "missing hp": (_returns("(z1 @ z2.T / tau).sum()", "def f(z1, z2, *, tau):"), {}, "'tau' has no default"),
    "NaN": (_returns("(z1 * z2).sum() * float('nan')"), {}, "returned nan"),
    "non-scalar": (_returns("(z1 * z2).sum(-1)"), {}, "shape (8,), not a scalar"),
    "not a tensor": (_returns("1.0"), {}, "returned float, not a tensor"),
    "float() of the loss": (_returns("float((z1 * z2).sum())"), {}, "it has no gradient to train with"),
    "detached": (_returns("(z1 * z2).sum().detach()"), {}, "has no gradient"),
    "raises": (_returns("z1 @ z2"), {}, "raised RuntimeError"),
    "NaN gradient": (_returns("(z1 - z1).abs().sqrt().sum() + (z1 * z2).sum()"), {}, "not finite"),
    "false symmetry": (
        "@contrastive_loss(symmetric=True)\n" + _returns("(z1[:, :1] * 2 + z2[:, :1]).sum()"),
        {},
        "declares symmetric=True",
    ),
}


@pytest.mark.parametrize("fault", list(BAD_LOSSES))
def test_bad_user_losses_raise_one_line_naming_the_problem(tmp_path, fault, recwarn):
    body, hp, expected = BAD_LOSSES[fault]
    path = _module(tmp_path, body, name=f"bad_{list(BAD_LOSSES).index(fault)}")
    gc.collect()  # earlier tests' garbage may warn as it is freed (CI once saw a socket's): not this check's
    recwarn.clear()
    with pytest.raises(UserLossError) as info:
        check_user_loss(f"{path}:f", hp)
    message = str(info.value)
    assert expected in message and "\n" not in message, message
    assert not recwarn.list, recwarn.list[0].message  # the one line alone: no torch warning before it


def test_malformed_names_and_missing_files_are_one_line(tmp_path):
    with pytest.raises(UserLossError, match="no file"):
        check_user_loss(f"{tmp_path}/nothing.py:f")
    with pytest.raises(UserLossError, match="no module 'no_such_pkg_q.losses'"):
        check_user_loss("no_such_pkg_q.losses:f")
    with pytest.raises(UserLossError, match="write it as"):
        check_user_loss("pkg.mod:not-a-name")


def test_an_entry_point_name_resolves_to_its_callable(in_repo, monkeypatch):
    """A package's ``[project.entry-points."contrastlab.losses"] margin = "examples.margin_infonce:..."``."""
    from contrastlab.losses import user

    monkeypatch.setattr(user, "_entry_points", lambda: {"margin": "examples.margin_infonce:margin_infonce"})
    user.resolve_user_loss.cache_clear()
    assert user.is_user_loss("margin") and not user.is_user_loss("infonce")
    h = torch.eye(4, 8, dtype=torch.float64)
    # identical one-hot views: each anchor's positive logit 1/τ = 10, its three negatives' 0
    expected = math.log(1 + 3 * math.exp(-10))
    assert build_loss("margin", tau=0.1, m=0.0)(h, h).loss.item() == pytest.approx(expected, rel=1e-12)
    assert module_path("margin") == str(REPO_ROOT / "examples" / "margin_infonce.py")
