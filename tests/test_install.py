"""scripts/install.py: requirements.lock pins exactly what constraints.txt pins, each release with its
sha256, and make install installs it with --require-hashes (a torch build of another CUDA version aside);
uv is handed pip's package sources, so that it installs from where pip would."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
import shlex
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from contrastlab.paths import REPO_ROOT

spec = importlib.util.spec_from_file_location("install_script", REPO_ROOT / "scripts" / "install.py")
install = importlib.util.module_from_spec(spec)
spec.loader.exec_module(install)

# `pip config list` on the development machine: config files, then the PIP_* variables (":env:").
LISTED = """\
global.cert='/etc/ssl/certs/ca-certificates.crt'
global.constraint='/etc/xdg/pip/constraints.txt'
global.extra-index-url='file:///opt/pypi/simple file:///opt/pypi-more/simple'
global.find-links='/opt/wheels'
:env:.default-timeout='180'
:env:.find-links='/opt/other-wheels'
"""
SHA256 = re.compile(r"--hash=sha256:[0-9a-f]{64}\b")


def pins(constraints: Path) -> dict[str, str]:
    """A constraints file's ``name==version`` lines as {normalised name: version}."""
    lines = [line.split("#")[0].strip() for line in constraints.read_text().splitlines()]
    return {install.normalised(name): version for name, _, version in (p.partition("==") for p in lines if p)}


def test_pip_settings_are_read_with_the_variables_winning_over_the_files():
    settings = install.parse_pip_config(LISTED)
    assert settings["extra-index-url"] == "file:///opt/pypi/simple file:///opt/pypi-more/simple"
    assert settings["find-links"] == "/opt/other-wheels"  # PIP_FIND_LINKS overrides pip.conf, as in pip
    assert settings["cert"] == "/etc/ssl/certs/ca-certificates.crt"


def test_uv_gets_every_index_and_find_links_of_pip_and_picks_the_best_match_as_pip_does():
    """pip's constraint file is not handed over: the lock pins every package exactly, and under
    --require-hashes uv refuses a constraint that is not == (this machine's ``torch<=2.14.1``)."""
    options = install.uv_options(install.parse_pip_config(LISTED))
    assert options == [
        "--index", "file:///opt/pypi/simple",
        "--index", "file:///opt/pypi-more/simple",
        "--find-links", "/opt/other-wheels",
        "--index-strategy", "unsafe-best-match",
    ]  # fmt: skip


def test_a_plain_pip_gives_uv_no_options():
    assert install.uv_options(install.parse_pip_config("")) == []
    mirror = "https://mirror.example/simple"
    assert install.uv_options({"index-url": mirror}) == ["--default-index", mirror]


@pytest.mark.parametrize(
    "constraints, lock",
    [(install.CONSTRAINTS, install.LOCK), (install.CFFCONVERT_CONSTRAINTS, install.CFFCONVERT_LOCK)],
    ids=["project", "cffconvert"],
)
def test_the_lock_pins_exactly_what_the_constraints_pin_each_release_with_its_sha256(constraints, lock):
    """Every lock package is pinned in the constraints at its version with a sha256, and every pin is in
    the lock (a pin changed without `make lock-deps` fails here)."""
    entries = install.lock_entries(lock.read_text())
    assert {name: version for name, version, _ in entries} == pins(constraints)
    unhashed = [name for name, _, lines in entries if not SHA256.search(lines)]
    assert unhashed == []
    assert "#    make lock-deps\n" in lock.read_text()  # the header names the command that writes it


def test_the_lock_holds_every_requirement_of_the_installed_extras():
    """A requirement added to pyproject.toml without a pin and `make lock-deps` would never be installed:
    the lock is installed whole, the project with --no-deps."""
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    wanted = [*project["dependencies"]]
    for extra in install.EXTRAS:
        wanted += project["optional-dependencies"][extra]
    locked = {name for name, _, _ in install.lock_entries(install.LOCK.read_text())}
    assert {install.normalised(Requirement(line).name) for line in wanted} - locked == set()
    assert {"uv", "setuptools", "pygithub"} <= locked  # the installer, the build backend, mteb's PR path


def test_make_install_installs_the_lock_with_require_hashes_then_the_project_without_dependencies(tmp_path):
    """The lock's setuptools first, then the whole lock, then the project, editable, without resolving."""
    for installer in (install.uv_command({}), install.pip_command()):
        setuptools, lock, project = install.install_steps(installer, [], None, tmp_path)
        first = tmp_path / "requirements-setuptools.txt"
        assert setuptools == [*installer, "--require-hashes", "-r", str(first)]
        assert lock == [*installer, "--require-hashes", "--no-build-isolation", "-r", str(install.LOCK)]
        assert project == [*installer, "--no-deps", "--no-build-isolation", "-e", "."]
        assert [name for name, _, _ in install.lock_entries(first.read_text())] == ["setuptools"]
    assert install.install_note(None) == (
        "contrastlab: installing requirements.lock: every package downloaded checked against its sha256, "
        "a package whose lock hashes changed reinstalled, every installed file against its RECORD"
    )


def test_uv_itself_is_installed_under_its_hash_in_the_lock(tmp_path, monkeypatch):
    commands = []
    monkeypatch.setattr(
        install, "run", lambda command, env=None, stdin=None: commands.append(command) or True
    )
    monkeypatch.setattr(install.sys, "prefix", str(tmp_path))
    assert install.install_uv()
    assert commands == [
        [*install.pip_command(), "--require-hashes", "-r", str(tmp_path / "requirements-uv.txt")]
    ]
    written = install.lock_entries((tmp_path / "requirements-uv.txt").read_text())
    assert [(name, version) for name, version, _ in written] == [("uv", pins(install.CONSTRAINTS)["uv"])]
    assert SHA256.search(written[0][2])


def test_cffconverts_environment_is_installed_from_its_own_lock_with_require_hashes(tmp_path, monkeypatch):
    commands = []
    monkeypatch.setattr(
        install, "run", lambda command, env=None, stdin=None, keep=False: commands.append(command) or True
    )
    monkeypatch.setattr(install, "CFFCONVERT_ENV", tmp_path / "cffconvert")
    monkeypatch.setattr(install.sys, "prefix", str(tmp_path))
    (tmp_path / "cffconvert" / "bin").mkdir(parents=True)
    (tmp_path / "cffconvert" / "bin" / "python").touch()
    assert install.install_cffconvert({}, uv=True)
    want = ["--require-hashes", "--no-build-isolation", "-r", str(install.CFFCONVERT_LOCK)]
    assert commands[1][-4:] == want
    assert commands[1][commands[1].index("--python") + 1] == str(tmp_path / "cffconvert" / "bin" / "python")


def test_make_lock_deps_compiles_both_locks_with_every_hash_from_the_default_index():
    """From the default index alone (an extra index may hold one wheel of a release), for every platform."""
    (project, stdin), (cffconvert, cff_stdin) = install.lock_commands(install.parse_pip_config(LISTED))
    assert stdin is None and cff_stdin == "cffconvert\n"
    for command in (project, cffconvert):
        assert {"--generate-hashes", "--universal"} <= set(command)
        assert "--index" not in command and "--find-links" not in command
    assert shlex.join(project[project.index("pyproject.toml") :]) == (
        "pyproject.toml --extra workflow --extra offline-models --extra dev -c constraints.txt --universal "
        "--generate-hashes --custom-compile-command 'make lock-deps' -o requirements.lock"
    )
    assert project[project.index("--python") + 1] == install.sys.executable
    assert cffconvert[-2:] == ["-o", "requirements-cffconvert.lock"]
    assert cffconvert[cffconvert.index("-c") + 1] == "constraints-cffconvert.txt"


def test_mteb_submits_pull_request_path_has_pygithub_pinned_and_installed():
    """`make mteb-submit PR=1` needs PyGithub (mteb's `mteb[github]` extra): in the workflow extra, pinned,
    and in this environment at its pin."""
    import github

    workflow = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert "github" in Requirement(next(r for r in workflow["workflow"] if r.startswith("mteb"))).extras
    assert importlib.metadata.version("PyGithub") == pins(install.CONSTRAINTS)["pygithub"] == "2.10.0"
    assert github.Github.__module__ == "github.MainClass"
    assert "PyGithub (`mteb[github]`, in the `workflow` extra" in (REPO_ROOT / "docs/publish.md").read_text()


def test_uv_compiles_what_it_installs_as_pip_does():
    """uv writes no .pyc unless asked; with PYTHONDONTWRITEBYTECODE set, every job would then compile
    torch and transformers from source (10 of the 16 s of a toy training job)."""
    assert "--compile-bytecode" in install.uv_command({})


def test_this_environment_imports_compiled_modules():
    """What make install left: the installed packages and the project's own modules have their .pyc."""
    import torch

    import contrastlab.config

    for module in (torch, contrastlab.config):
        cached = importlib.util.cache_from_source(module.__file__)
        assert Path(cached).is_file(), f"{module.__name__} has no {cached}: run make install again"


def test_make_install_cuda_picks_that_torch_build_and_leaves_its_cuda_stack_to_it(tmp_path, monkeypatch):
    """``make install CUDA=12.6``: uv's torch backend (pip: PyTorch's index), constraints without the CUDA 13
    libraries' and triton's pins, torch's own pin kept (2.14.1 admits 2.14.1+cu126)."""
    # (the backend of 12.6, cpu and none: tests/test_container.py)
    with pytest.raises(SystemExit, match="CUDA='twelve' is not a CUDA version"):
        install.torch_backend("twelve")
    monkeypatch.setattr(install.sys, "prefix", str(tmp_path))
    constraints = install.constraints_for("cu126", tmp_path)
    constrained = constraints.read_text().splitlines()
    assert "torch==2.14.1" in constrained and "torchvision==0.29.1" in constrained
    assert not [p for p in constrained if p.startswith(("nvidia-", "cuda-", "triton=="))], constrained
    assert install.constraints_for(None) == install.CONSTRAINTS

    # the choice is remembered in the environment: a later plain `make install` keeps the build
    monkeypatch.setattr(install, "CUDA_CHOICE", tmp_path / ".contrastlab-cuda")
    assert install.chosen_cuda(None) is None
    assert install.chosen_cuda("12.6") == "12.6" and install.chosen_cuda(None) == "12.6"
    assert install.options(["--cuda", "cpu"]).cuda == "cpu" and install.options(["--lock"]).lock


def test_another_torch_build_is_pinned_and_everything_else_installed_from_the_lock_with_hashes(tmp_path):
    """With CUDA=12.6 the lock less the torch build's 21 packages installs with --require-hashes, then torch
    and torchvision at the lock's versions from PyTorch's index (unhashed, said in one line)."""
    uv = install.uv_command({})
    _, rest, torch, project = install.install_steps(uv, ["--torch-backend", "cu126"], "cu126", tmp_path)
    left = tmp_path / "requirements-cu126.txt"
    assert rest == [*uv, "--require-hashes", "--no-build-isolation", "--no-deps", "-r", str(left)]
    locked = {name for name, _, _ in install.lock_entries(install.LOCK.read_text())}
    taken = locked - {name for name, _, _ in install.lock_entries(left.read_text())}
    assert len(taken) == 21 and {"torch", "torchvision", "triton", "nvidia-cublas", "cuda-bindings"} <= taken
    assert all(name in install.TORCH or name.startswith(("nvidia-", "cuda-", "triton")) for name in taken)
    constraints = str(tmp_path / "constraints-cu126.txt")
    pinned = ["torch==2.14.1", "torchvision==0.29.1"]
    assert torch == [*uv, "-c", constraints, "--torch-backend", "cu126", *pinned]
    assert project == [*uv, "--no-deps", "--no-build-isolation", "-e", "."]
    index = ["--extra-index-url", "https://download.pytorch.org/whl/cu126"]
    pip = install.pip_command()
    steps = install.install_steps(pip, index, "cu126", tmp_path)
    assert steps[2] == [*pip, "-c", constraints, *index, *pinned]
    assert install.install_note("cu126") == (
        "contrastlab: installing torch's cu126 build (make install CUDA=...): torch, torchvision and their "
        "CUDA libraries from PyTorch's index, pinned but not hash-checked; every other package checked "
        "against requirements.lock's sha256"
    )
