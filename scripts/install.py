"""Install the project into the virtual environment this interpreter runs in: uv when it can, else pip.

    .venv/bin/python scripts/install.py        (what `make install` runs)

Both install the same thing: ``-e '.[workflow,offline-models,dev]'`` under the exact pins of
constraints.txt. uv unpacks the ~200 wheels in parallel (torch with its CUDA libraries is 6 GB unpacked):
about 30 s on the 2-core machine where pip takes about 3 minutes. uv reads neither pip.conf nor the
``PIP_*`` variables, so pip's package sources (index, extra indexes, find-links, constraints, CA bundle)
are handed to it; a machine set up for pip needs nothing else. If uv cannot be installed or fails, pip
does the install as before, after one line saying why. cffconvert (the CITATION.cff check) goes into an
environment of its own inside this one, ``.venv/cffconvert``, under constraints-cffconvert.txt: it
requires jsonschema < 4, the project >= 4.20.

Both leave every installed module compiled (``.pyc``), and the project's ``src/`` too: pip compiles what
it installs, uv only with ``--compile-bytecode``. Where ``PYTHONDONTWRITEBYTECODE`` is set (as on the
2-core machines) Python never writes a ``.pyc`` itself, so without them every interpreter compiles each
module it imports from source: 10 of the 16 s a toy training job took, in every job of every run.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET = "-e", ".[workflow,offline-models,dev]"
CONSTRAINTS = ROOT / "constraints.txt"

# The project's own modules (an editable install: not under site-packages, so neither installer compiles
# them); a stale .pyc after an edit is recompiled in memory, never used.
OWN_SOURCES = ROOT / "src"

# Where a torch build for another CUDA version comes from (``--cuda 12.6``: PyTorch's own index; uv knows
# it as ``--torch-backend cu126``), and the file in the environment that remembers the choice, so that a
# later ``make install`` (constraints changed) keeps the build the machine needs.
TORCH_INDEX = "https://download.pytorch.org/whl/{backend}"
CUDA_CHOICE = Path(sys.prefix) / ".contrastlab-cuda"
# The packages whose versions the torch build decides (its CUDA libraries, its triton): left unpinned for
# another build, whose own requirements pin them.
CUDA_STACK = re.compile(r"^(nvidia-|cuda-|triton\b)", re.IGNORECASE)

# cffconvert (`cffconvert --validate` of CITATION.cff, tests/test_citation.py) requires jsonschema < 4, the
# project >= 4.20: it gets a small environment of its own inside this one, under its own exact pins.
CFFCONVERT_CONSTRAINTS = ROOT / "constraints-cffconvert.txt"
CFFCONVERT_ENV = Path(sys.prefix) / "cffconvert"

# pip setting -> the uv option taking the same values, one option per value.
PIP_TO_UV = {"index-url": "--default-index", "extra-index-url": "--index", "find-links": "--find-links"}


def pip_settings() -> dict[str, str]:
    """pip's effective settings: :func:`parse_pip_config` of ``pip config list``."""
    listed = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, check=False
    ).stdout
    return parse_pip_config(listed)


def parse_pip_config(listed: str) -> dict[str, str]:
    """``pip config list``'s lines (``global.find-links='/opt/wheels'``; files first, then the ``PIP_*``
    variables as ``:env:.``, the later winning as in pip) as {setting: value}, without the section."""
    settings: dict[str, str] = {}
    for line in listed.splitlines():
        key, _, value = line.partition("=")
        section, _, name = key.rpartition(".")
        if section in ("global", "install", ":env:") and value:
            settings[name] = " ".join(shlex.split(value))
    return settings


def uv_options(settings: dict[str, str]) -> list[str]:
    """The options of ``uv pip install`` that make it find packages where pip would."""
    options = []
    for name, option in PIP_TO_UV.items():
        for value in settings.get(name, "").split():
            options += [option, value]
    for constraint in settings.get("constraint", "").split():
        options += ["-c", constraint]
    if settings.get("extra-index-url") or settings.get("find-links"):
        # pip takes the best version over all its sources; uv's default stops at the first index that
        # has the package.
        options += ["--index-strategy", "unsafe-best-match"]
    return options


def uv_command(settings: dict[str, str], backend: str | None = None) -> list[str]:
    """``uv pip install`` into this interpreter's environment, compiling what it installs as pip does;
    ``backend`` (``cu126``, ``cpu``): torch and torchvision from PyTorch's index for that build."""
    uv = [sys.executable, "-m", "uv", "pip", "install", "--python", sys.executable, "--compile-bytecode"]
    torch = ["--torch-backend", backend] if backend else []
    return [*uv, "-c", str(constraints_for(backend)), *torch, *uv_options(settings)]


def pip_command(backend: str | None = None) -> list[str]:
    """``pip install`` of the same, PyTorch's index for ``backend`` added."""
    index = ["--extra-index-url", TORCH_INDEX.format(backend=backend)] if backend else []
    return [sys.executable, "-m", "pip", "install", "-q", "-c", str(constraints_for(backend)), *index]


def uv_environment(settings: dict[str, str]) -> dict[str, str]:
    env = dict(os.environ)
    if settings.get("cert"):
        env.setdefault("SSL_CERT_FILE", settings["cert"])  # pip's CA bundle (a proxy's certificate)
    return env


def torch_backend(cuda: str | None) -> str | None:
    """``"12.6"`` -> ``"cu126"``, ``"cpu"`` -> ``"cpu"``, None -> None (the registry's default build);
    anything else stops with one line."""
    if cuda is None or cuda == "":
        return None
    if cuda == "cpu":
        return "cpu"
    match = re.fullmatch(r"(\d+)\.(\d)", cuda)
    if match is None:
        sys.exit(
            f"contrastlab: CUDA={cuda!r} is not a CUDA version; use e.g. CUDA=12.6, CUDA=13.0 or CUDA=cpu"
        )
    return f"cu{match[1]}{match[2]}"


def constraints_for(backend: str | None, folder: Path | None = None) -> Path:
    """constraints.txt, or for another torch build a copy without the CUDA stack's pins (torch==2.14.1
    itself stays: it admits 2.14.1+cu126)."""
    if backend is None:
        return CONSTRAINTS
    kept = [line for line in CONSTRAINTS.read_text().splitlines() if not CUDA_STACK.match(line.strip())]
    path = Path(folder or sys.prefix) / f"constraints-{backend}.txt"
    path.write_text("\n".join(kept) + "\n")
    return path


def run(command: list[str], env: dict[str, str] | None = None) -> bool:
    print("+", shlex.join(command), flush=True)
    return subprocess.run(command, cwd=ROOT, env=env, check=False).returncode == 0


def chosen_cuda(argv: list[str] | None = None) -> str | None:
    """``--cuda`` (``make install CUDA=12.6``), remembered in the environment; else the earlier choice."""
    parser = argparse.ArgumentParser(description="Install contrastlab into this environment.")
    parser.add_argument(
        "--cuda",
        default=None,
        help="a torch build for this CUDA version (12.6: drivers >= 525 and P100/V100 GPUs) or cpu; "
        "default: the package registry's build, or the one chosen before in this environment",
    )
    cuda = parser.parse_args(argv).cuda
    if cuda is None:
        return CUDA_CHOICE.read_text().strip() or None if CUDA_CHOICE.is_file() else None
    CUDA_CHOICE.write_text(cuda + "\n")
    return cuda


def main(argv: list[str] | None = None) -> int:
    pip = [sys.executable, "-m", "pip", "install", "-q"]
    settings = pip_settings()
    backend = torch_backend(chosen_cuda(argv))
    if backend:
        print(f"contrastlab: installing torch's {backend} build (make install CUDA=...)", flush=True)
    if run([*pip, "-c", str(CONSTRAINTS), "uv"]):
        if run([*uv_command(settings, backend), *TARGET], env=uv_environment(settings)):
            return finish(settings)
        print("contrastlab: uv could not install the project; installing with pip instead", flush=True)
    else:
        print("contrastlab: uv is not installable here; installing with pip instead", flush=True)
    if not run([*pip, "--upgrade", "pip"]):
        return 1
    return finish(settings) if run([*pip_command(backend), *TARGET]) else 1


def finish(settings: dict[str, str]) -> int:
    """After the project's install: its sources compiled, and cffconvert's environment."""
    if compile_own_sources() != 0:
        return 1
    return 0 if install_cffconvert(settings) else 1


def compile_own_sources() -> int:
    return 0 if run([sys.executable, "-m", "compileall", "-q", "-j", "0", str(OWN_SOURCES)]) else 1


def install_cffconvert(settings: dict[str, str]) -> bool:
    """cffconvert under constraints-cffconvert.txt into :data:`CFFCONVERT_ENV` (made where absent): with
    uv where it is installed, else with that environment's pip. True when it is installed."""
    python = CFFCONVERT_ENV / "bin" / "python"
    if not python.exists() and not run([sys.executable, "-m", "venv", str(CFFCONVERT_ENV)]):
        return False
    target = ["-c", str(CFFCONVERT_CONSTRAINTS), "cffconvert"]
    uv = [sys.executable, "-m", "uv", "pip", "install", "--python", str(python), *uv_options(settings)]
    return run([*uv, *target], env=uv_environment(settings)) or run(
        [str(python), "-m", "pip", "install", "-q", *target]
    )


if __name__ == "__main__":
    sys.exit(main())
