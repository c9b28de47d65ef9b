"""scripts/install.py: uv is handed pip's package sources, so that it installs from where pip would."""

from __future__ import annotations

import importlib.util
from pathlib import Path

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


def test_pip_settings_are_read_with_the_variables_winning_over_the_files():
    settings = install.parse_pip_config(LISTED)
    assert settings["extra-index-url"] == "file:///opt/pypi/simple file:///opt/pypi-more/simple"
    assert settings["find-links"] == "/opt/other-wheels"  # PIP_FIND_LINKS overrides pip.conf, as in pip
    assert settings["cert"] == "/etc/ssl/certs/ca-certificates.crt"


def test_uv_gets_every_index_find_links_and_constraint_of_pip_and_picks_the_best_match_as_pip_does():
    options = install.uv_options(install.parse_pip_config(LISTED))
    assert options == [
        "--index", "file:///opt/pypi/simple",
        "--index", "file:///opt/pypi-more/simple",
        "--find-links", "/opt/other-wheels",
        "-c", "/etc/xdg/pip/constraints.txt",
        "--index-strategy", "unsafe-best-match",
    ]  # fmt: skip


def test_a_plain_pip_gives_uv_no_options():
    assert install.uv_options(install.parse_pip_config("")) == []
    assert install.uv_options({"index-url": "https://mirror.example/simple"}) == [
        "--default-index",
        "https://mirror.example/simple",
    ]


def test_the_constraints_pin_uv_itself():
    pins = (REPO_ROOT / "constraints.txt").read_text().splitlines()
    assert any(line.startswith("uv==") for line in pins)


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
    """Issue 48: ``make install CUDA=12.6`` installs torch's CUDA 12.6 build (drivers >= 525, P100/V100):
    uv's torch backend (pip: PyTorch's index), constraints without the CUDA 13 libraries' and triton's
    pins (the build's own requirements pin them), torch's own pin kept (2.14.1 admits 2.14.1+cu126)."""
    import pytest

    assert install.torch_backend("12.6") == "cu126" and install.torch_backend("cpu") == "cpu"
    assert install.torch_backend(None) is None
    with pytest.raises(SystemExit, match="CUDA='twelve' is not a CUDA version"):
        install.torch_backend("twelve")
    monkeypatch.setattr(install.sys, "prefix", str(tmp_path))
    constraints = install.constraints_for("cu126", tmp_path)
    pins = constraints.read_text().splitlines()
    assert "torch==2.14.1" in pins and "torchvision==0.29.1" in pins
    assert not [p for p in pins if p.startswith(("nvidia-", "cuda-", "triton=="))], pins
    assert install.constraints_for(None) == install.CONSTRAINTS
    command = install.uv_command({}, "cu126")
    assert command[command.index("--torch-backend") + 1] == "cu126"
    assert command[command.index("-c") + 1] == str(tmp_path / "constraints-cu126.txt")
    pip = install.pip_command("cu126")
    assert pip[pip.index("--extra-index-url") + 1] == "https://download.pytorch.org/whl/cu126"
    assert "--torch-backend" not in install.uv_command({})
    assert "--extra-index-url" not in install.pip_command()
    # the choice is remembered in the environment: a later plain `make install` keeps the build
    monkeypatch.setattr(install, "CUDA_CHOICE", tmp_path / ".contrastlab-cuda")
    assert install.chosen_cuda([]) is None
    assert install.chosen_cuda(["--cuda", "12.6"]) == "12.6" and install.chosen_cuda([]) == "12.6"
