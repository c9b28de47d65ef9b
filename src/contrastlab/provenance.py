"""What produced a result: package versions, Python, the git commit and the command line.

Every checkpoint summary and metrics file records :func:`run_metadata` (the style guide's "record the
resolved config, command, package versions and git SHA"). It sits at the bottom of the library's layers,
so the trainers and the evaluator call it without the workflow glue.
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys
from typing import Any

from contrastlab.paths import REPO_ROOT

#: The packages whose versions change the numbers.
VERSIONED_PACKAGES = ("contrastlab", "torch", "transformers", "tokenizers", "scikit-learn", "scipy", "numpy")


def _git(*args: str, timeout: float = 10) -> str | None:
    """git's output on ``args`` in the checkout; None where it fails, exits non-zero or takes too long."""
    try:
        out = subprocess.run(
            ["git", "-C", str(REPO_ROOT), *args], capture_output=True, text=True, timeout=timeout, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


def git_head() -> str | None:
    """The checkout's commit (``git rev-parse HEAD``); None outside a git checkout."""
    return _git("rev-parse", "HEAD") or None


#: The folders and files whose content decides what a cell's training does (not the docs, tests or configs).
CODE_PATHS = ("src", "scripts", "rules", "Snakefile")


def code_differs(sha: str) -> bool:
    """Whether the code (:data:`CODE_PATHS`) at commit ``sha`` differs from the checkout's HEAD; True where
    git cannot tell (no git, a commit this clone lacks)."""
    return _git("diff", "--quiet", sha, "HEAD", "--", *CODE_PATHS, timeout=30) is None


def package_versions() -> dict[str, str]:
    """Versions of the installed :data:`VERSIONED_PACKAGES` (missing ones left out)."""
    from importlib import metadata

    versions = {}
    for name in VERSIONED_PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


#: The user losses built in this process (``losses.user`` notes each one here, so that this bottom layer
#: records them without importing the losses): name -> module, callable, file, sha256.
_USER_LOSSES: dict[str, dict[str, str]] = {}


def note_user_loss(name: str, info: dict[str, str]) -> None:
    _USER_LOSSES[name] = dict(info)


def user_losses() -> dict[str, dict[str, str]]:
    return {name: dict(info) for name, info in _USER_LOSSES.items()}


#: What the job in this process reads (noted by the workflow's job frames): the backbone's source record
#: (its hub revision or package version, the weights' sha256) and the data's digests.
_INPUTS: dict[str, Any] = {}


def note_inputs(inputs: dict[str, Any]) -> None:
    _INPUTS.update(inputs)


def run_metadata() -> dict[str, Any]:
    """What produced a result: package versions, Python, git SHA (and a dirty flag), the command line,
    any user loss built in this process (module, callable, file, sha256) and the inputs the job noted
    (``inputs``: the backbone's revision and the data's digests)."""
    status = _git("status", "--porcelain")
    meta = {
        "versions": package_versions(),
        "python": platform.python_version(),
        "git_sha": git_head(),
        "git_dirty": None if status is None else bool(status),
        "command": sys.argv,
    }
    if _USER_LOSSES:
        meta["user_losses"] = user_losses()
    if _INPUTS:
        meta["inputs"] = json.loads(json.dumps(_INPUTS))  # a copy
    return meta
