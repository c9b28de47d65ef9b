"""Install the project into the virtual environment this interpreter runs in: uv when it can, else pip.

    .venv/bin/python scripts/install.py        (what `make install` runs)

Both install the same thing: ``-e '.[workflow,offline-models,dev]'`` under the exact pins of
constraints.txt. uv unpacks the ~200 wheels in parallel (torch with its CUDA libraries is 6 GB unpacked):
about 30 s on the 2-core machine where pip takes about 3 minutes. uv reads neither pip.conf nor the
``PIP_*`` variables, so pip's package sources (index, extra indexes, find-links, constraints, CA bundle)
are handed to it; a machine set up for pip needs nothing else. If uv cannot be installed or fails, pip
does the install as before, after one line saying why.

Both leave every installed module compiled (``.pyc``), and the project's ``src/`` too: pip compiles what
it installs, uv only with ``--compile-bytecode``. Where ``PYTHONDONTWRITEBYTECODE`` is set (as on the
2-core machines) Python never writes a ``.pyc`` itself, so without them every interpreter compiles each
module it imports from source: 10 of the 16 s a toy training job took, in every job of every run.
"""

from __future__ import annotations

import os
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


def uv_command(settings: dict[str, str]) -> list[str]:
    """``uv pip install`` into this interpreter's environment, compiling what it installs as pip does."""
    uv = [sys.executable, "-m", "uv", "pip", "install", "--python", sys.executable, "--compile-bytecode"]
    return [*uv, "-c", str(CONSTRAINTS), *uv_options(settings)]


def uv_environment(settings: dict[str, str]) -> dict[str, str]:
    env = dict(os.environ)
    if settings.get("cert"):
        env.setdefault("SSL_CERT_FILE", settings["cert"])  # pip's CA bundle (a proxy's certificate)
    return env


def run(command: list[str], env: dict[str, str] | None = None) -> bool:
    print("+", shlex.join(command), flush=True)
    return subprocess.run(command, cwd=ROOT, env=env, check=False).returncode == 0


def main() -> int:
    pip = [sys.executable, "-m", "pip", "install", "-q"]
    settings = pip_settings()
    if run([*pip, "-c", str(CONSTRAINTS), "uv"]):
        if run([*uv_command(settings), *TARGET], env=uv_environment(settings)):
            return compile_own_sources()
        print("contrastlab: uv could not install the project; installing with pip instead", flush=True)
    else:
        print("contrastlab: uv is not installable here; installing with pip instead", flush=True)
    if not run([*pip, "--upgrade", "pip"]):
        return 1
    return compile_own_sources() if run([*pip, "-c", str(CONSTRAINTS), *TARGET]) else 1


def compile_own_sources() -> int:
    return 0 if run([sys.executable, "-m", "compileall", "-q", "-j", "0", str(OWN_SOURCES)]) else 1


if __name__ == "__main__":
    sys.exit(main())
