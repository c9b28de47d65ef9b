"""Losses from the user's own code: ``loss: "mypkg.losses:my_loss"`` in a config, checked on load.

A *user loss* is named in one of three ways (none needs an edit of this package):

- ``"package.module:callable"``: imported like any module (installed packages, ``PYTHONPATH``, and
  the working directory, which is where Snakemake runs);
- ``"path/to/file.py:callable"``: the file itself (relative to the working directory);
- a name registered by an installed package under the entry-point group ``contrastlab.losses``
  (``[project.entry-points."contrastlab.losses"] myloss = "mypkg.losses:my_loss"``).

The callable receives the two views ``z1, z2`` ([N, D], row i of both is the same sample), takes its
hyperparameters as named keyword arguments (a default makes one optional) and returns a scalar loss,
or ``(loss, stats)`` with ``stats`` a dict of scalars logged with the training loss. It declares what
it wants with :func:`contrastive_loss`: ``inputs="normalized"`` (the default: unit rows, as every
sentence loss of the papers) or ``"raw"`` (the encoder's output, as VICReg), and ``symmetric=True`` if
swapping the views leaves the loss unchanged. :func:`contrastlab.losses.checks.check_user_loss`
verifies all of it on a random batch before any training starts: the workflow calls it when it loads
the config, so a bad loss stops the run with one ``contrastlab:`` line.

Importing this module does not import torch (the workflow reads it while it parses).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import math
import os
import sys
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

from contrastlab.provenance import note_user_loss

__all__ = [
    "ENTRY_POINT_GROUP",
    "UserLoss",
    "UserLossError",
    "contrastive_loss",
    "is_user_loss",
    "resolve_user_loss",
    "user_loss_path",
]

ENTRY_POINT_GROUP = "contrastlab.losses"

#: The declarations :func:`contrastive_loss` sets on the callable.
INPUTS_ATTRIBUTE = "contrastlab_inputs"
SYMMETRIC_ATTRIBUTE = "contrastlab_symmetric"
INPUTS = ("normalized", "raw")

#: The random batch of the load-time check: N samples of dimension D, float64, this seed.
CHECK_BATCH = (8, 16)
CHECK_SEED = 0


class UserLossError(ValueError):
    """A user loss cannot be used; the message is one line naming the problem and the fix."""


def contrastive_loss(
    *, inputs: str = "normalized", symmetric: bool = False
) -> Callable[[Callable], Callable]:
    """Decorator declaring what a user loss receives and whether it is symmetric in the two views.

    >>> @contrastive_loss(inputs="raw", symmetric=True)
    ... def my_loss(z1, z2, *, lam=1.0):
    ...     return ((z1 - z2) ** 2).sum(-1).mean() * lam
    >>> my_loss.contrastlab_inputs, my_loss.contrastlab_symmetric
    ('raw', True)
    """
    if inputs not in INPUTS:
        raise UserLossError(f"contrastive_loss: inputs must be one of {', '.join(INPUTS)}, got {inputs!r}")
    if not isinstance(symmetric, bool):
        raise UserLossError(f"contrastive_loss: symmetric must be true or false, got {symmetric!r}")

    def declare(fn: Callable) -> Callable:
        setattr(fn, INPUTS_ATTRIBUTE, inputs)
        setattr(fn, SYMMETRIC_ATTRIBUTE, symmetric)
        return fn

    return declare


@dataclass(frozen=True)
class UserLoss:
    """A resolved user loss: where it lives, what it declares and which hyperparameters it takes."""

    name: str  # as written in the config
    module: str  # dotted module name, or the file path for the file form
    attribute: str
    path: Path  # the source file (its code's stamp a rule input: a change retrains the cells that use it)
    fn: Callable = field(repr=False, compare=False)
    inputs: str = "normalized"
    symmetric: bool = False
    defaults: Mapping[str, Any] = field(default_factory=dict)  # optional hyperparameters
    required: tuple[str, ...] = ()  # hyperparameters without a default

    @property
    def hyperparameters(self) -> tuple[str, ...]:
        return (*self.required, *self.defaults)

    def provenance(self) -> dict[str, str]:
        """What a cell's metadata records: module, callable, file and its sha256."""
        return {
            "module": self.module,
            "callable": self.attribute,
            "file": str(self.path),
            "sha256": hashlib.sha256(self.path.read_bytes()).hexdigest(),
        }


@cache
def _entry_points() -> dict[str, str]:
    return {ep.name: ep.value for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)}


def is_user_loss(name: str) -> bool:
    """True for a ``module:callable`` / ``file.py:callable`` name or a registered entry point."""
    return isinstance(name, str) and (":" in name or name in _entry_points())


def _split(name: str) -> tuple[str, str]:
    target = _entry_points().get(name, name)
    module, sep, attribute = target.rpartition(":")
    if not sep or not module or not attribute.isidentifier():
        raise UserLossError(
            f"user loss {name!r}: write it as 'package.module:callable' or 'path/to/file.py:callable'"
        )
    return module, attribute


def _is_file(module: str) -> bool:
    return module.endswith(".py") or "/" in module or os.sep in module


def user_loss_path(name: str) -> Path:
    """The absolute path of the file defining user loss ``name``, found without running the module
    (for dotted modules, ``importlib.util.find_spec``; parent packages are imported)."""
    module, _ = _split(name)
    if _is_file(module):
        path = Path(module).resolve()
        if not path.is_file():
            raise UserLossError(
                f"user loss {name!r}: no file {module} (relative to {Path.cwd()}); fix the path"
            )
        return path
    try:
        with _cwd_on_path():
            spec = importlib.util.find_spec(module)
    except ModuleNotFoundError:  # a parent package is missing
        spec = None
    except (ImportError, ValueError) as error:
        raise UserLossError(f"user loss {name!r}: cannot import {module!r} ({one_line(error)})") from error
    if spec is None or not spec.origin or not Path(spec.origin).is_file():
        raise UserLossError(
            f"user loss {name!r}: no module {module!r} on the Python path or in {Path.cwd()}; install it, "
            "add its folder to PYTHONPATH or give a file path 'path/to/file.py:callable'"
        )
    return Path(spec.origin).resolve()


class _cwd_on_path:
    """The working directory on ``sys.path`` for the duration (Snakemake's jobs run scripts whose
    ``sys.path[0]`` is a temporary folder, not the folder the workflow runs in)."""

    def __enter__(self):
        self.added = os.getcwd() not in sys.path and "" not in sys.path
        if self.added:
            sys.path.append(os.getcwd())

    def __exit__(self, *exc):
        if self.added and os.getcwd() in sys.path:
            sys.path.remove(os.getcwd())


def one_line(error: BaseException) -> str:
    return f"{type(error).__name__}: {' '.join(str(error).split())}"


def _import(name: str, module: str):
    if _is_file(module):
        path = user_loss_path(name)
        unique = "contrastlab_user_" + hashlib.sha256(str(path).encode()).hexdigest()[:12]
        if unique in sys.modules:
            return sys.modules[unique]
        spec = importlib.util.spec_from_file_location(unique, path)
        loaded = importlib.util.module_from_spec(spec)
        sys.modules[unique] = loaded
        try:
            spec.loader.exec_module(loaded)
        except BaseException:
            del sys.modules[unique]
            raise
        return loaded
    with _cwd_on_path():
        return importlib.import_module(module)


@cache
def resolve_user_loss(name: str) -> UserLoss:
    """Import user loss ``name`` and read its signature and declarations (cached per name).

    Raises :class:`UserLossError` (one line) when the module does not import, the callable is missing,
    or its signature is not ``fn(z1, z2, *, hp1=..., ...)``.
    """
    module, attribute = _split(name)
    path = user_loss_path(name)
    try:
        loaded = _import(name, module)
    except Exception as error:  # anything the user's module raises on import
        raise UserLossError(f"user loss {name!r}: importing {module} failed: {one_line(error)}") from error
    fn = getattr(loaded, attribute, None)
    if not callable(fn):
        found = "is not callable" if hasattr(loaded, attribute) else "does not exist"
        raise UserLossError(
            f"user loss {name!r}: {module}.{attribute} {found}; name a function of {path.name}"
        )
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError) as error:
        raise UserLossError(f"user loss {name!r}: cannot read its signature ({one_line(error)})") from error
    wanted = f"write it as def {attribute}(z1, z2, *, hp=default, ...)"
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    views = params[:2]
    if len(views) < 2 or any(p.kind not in positional or p.default is not p.empty for p in views):
        raise UserLossError(
            f"user loss {name!r}: signature {inspect.signature(fn)} does not take the two views as its first "
            f"two positional arguments; {wanted}"
        )
    named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    for p in params[2:]:
        if p.kind not in named:
            raise UserLossError(
                f"user loss {name!r}: parameter {p} of {inspect.signature(fn)} is not a named "
                f"hyperparameter; {wanted}"
            )
    required = [p.name for p in params[2:] if p.default is p.empty]
    defaults = {p.name: p.default for p in params[2:] if p.default is not p.empty}
    inputs = getattr(fn, INPUTS_ATTRIBUTE, "normalized")
    symmetric = getattr(fn, SYMMETRIC_ATTRIBUTE, False)
    if inputs not in INPUTS or not isinstance(symmetric, bool):
        raise UserLossError(
            f"user loss {name!r}: declare it with @contrastive_loss(inputs='normalized' or 'raw', symmetric="
            f"True/False), got inputs={inputs!r}, symmetric={symmetric!r}"
        )
    display = str(path) if _is_file(module) else module
    return UserLoss(name, display, attribute, path, fn, inputs, symmetric, defaults, tuple(required))


def validate_hyperparameters(user: UserLoss, hp: Mapping[str, Any]) -> dict[str, Any]:
    """``hp`` over the callable's defaults; unknown, missing and non-finite values raise one line."""
    unknown = sorted(set(hp) - set(user.hyperparameters))
    if unknown:
        takes = ", ".join(user.hyperparameters) or "none"
        raise UserLossError(f"user loss {user.name!r}: no hyperparameter {unknown[0]!r}; it takes {takes}")
    missing = [key for key in user.required if key not in hp]
    if missing:
        raise UserLossError(
            f"user loss {user.name!r}: hyperparameter {missing[0]!r} has no default; "
            "set it under the method's hp"
        )
    for key, value in hp.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise UserLossError(f"user loss {user.name!r}: {key} must be finite, got {value!r}")
    return {**user.defaults, **hp}


def note_loaded(user: UserLoss) -> None:
    """Record ``user`` in :mod:`contrastlab.provenance`: ``run_metadata`` writes it to the cell's files."""
    note_user_loss(user.name, user.provenance())


def adapt(user: UserLoss) -> Callable:
    """The registry entry for ``user``: ``entry(x1, x2, **hp) -> (loss, stats)`` with tensor stats."""
    import torch

    def entry(x1, x2, **hp):
        with warnings.catch_warnings():  # float(loss): the line below says it, not torch's warning first
            warnings.filterwarnings("ignore", "Converting a tensor with requires_grad=True to a scalar")
            out = user.fn(x1, x2, **hp)
        loss, stats = out if isinstance(out, tuple) and len(out) == 2 else (out, {})
        if not isinstance(loss, torch.Tensor):
            raise UserLossError(
                f"user loss {user.name!r} returned {type(loss).__name__}, not a tensor: it has no gradient "
                "to train with; return the 0-dim tensor computed from z1, z2 (no float()), or (loss, stats)"
            )
        if loss.ndim != 0:
            raise UserLossError(
                f"user loss {user.name!r} returned a tensor of shape {tuple(loss.shape)}, not a scalar; "
                "reduce it over the batch (e.g. .mean())"
            )
        if not isinstance(stats, Mapping):
            raise UserLossError(
                f"user loss {user.name!r}: stats must be a dict of scalars, got {type(stats).__name__}"
            )
        values = {str(k): torch.as_tensor(v).detach() for k, v in stats.items()}
        wrong = [k for k, v in values.items() if v.numel() != 1]
        if wrong:
            raise UserLossError(
                f"user loss {user.name!r}: stat {wrong[0]!r} is not a scalar; return one number per stat"
            )
        return loss, values

    return entry


def module_path(name: str) -> str:
    """Repository-relative path of the file that implements loss ``name`` (absolute for a user loss:
    ``module:callable``, ``file.py:callable`` or an entry point, see :mod:`.user`)."""
    from .catalog import LOSS_MODULES, LOSSES

    if name not in LOSS_MODULES and is_user_loss(name):
        return str(user_loss_path(name))
    if name not in LOSS_MODULES:
        raise ValueError(f"unknown loss {name!r}; valid names: {', '.join(LOSSES)}")
    return f"src/contrastlab/losses/{LOSS_MODULES[name]}.py"
