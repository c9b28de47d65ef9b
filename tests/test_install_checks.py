"""What ``make install`` checks besides the downloads' sha256 (reliability 9, I1 and I2), on a tiny wheel
in a local find-links folder, a private uv cache and a fresh environment: no network.

- I1: uv installs from its cache the bytes it checked when it downloaded them; a file changed there since
  is installed, and only the package's RECORD tells (:func:`install.check_installed`).
- I2: a lock line whose hashes alone were edited passes while the package is installed; the next install
  reinstalls it (:func:`install.changed_entries`), which checks the hashes, and stops in one line."""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from test_install import install  # scripts/install.py, loaded once
from test_wheel import fresh_environment


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def tiny_wheel(folder: Path) -> str:
    """``tinypkg 1.0`` (one module, ``VALUE = 1``) as a wheel in ``folder``; its sha256."""
    files = {
        "tinypkg/__init__.py": b"VALUE = 1\n",
        "tinypkg-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: tinypkg\nVersion: 1.0\n",
        "tinypkg-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        b"Tag: py3-none-any\n",
    }
    record = "".join(f"{name},{_record_hash(data)},{len(data)}\n" for name, data in files.items())
    wheel = folder / "tinypkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
        archive.writestr("tinypkg-1.0.dist-info/RECORD", record + "tinypkg-1.0.dist-info/RECORD,,\n")
    return hashlib.sha256(wheel.read_bytes()).hexdigest()


@pytest.fixture
def env(tmp_path, monkeypatch):
    """A wheel folder, its lock, a fresh environment, a private uv cache and the uv command into it."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    lock = tmp_path / "requirements.lock"
    lock.write_text(f"tinypkg==1.0 \\\n    --hash=sha256:{tiny_wheel(wheels)}\n")
    python, site = fresh_environment(tmp_path / "venv", our_dependencies=False)
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    uv = [sys.executable, "-m", "uv", "pip", "install", "--python", str(python), "--no-index"]
    return {
        "lock": lock,
        "site": str(site),
        "stamp": tmp_path / "installed.json",
        "uv": [*uv, "--find-links", str(wheels)],
        "python": python,
        "tmp": tmp_path,
    }


def uv_install(env, *extra) -> subprocess.CompletedProcess:
    command = [*env["uv"], "--require-hashes", *extra, "-r", str(env["lock"])]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def installed_value(env) -> str:
    return (Path(env["site"]) / "tinypkg" / "__init__.py").read_text()


@pytest.mark.fault(
    "a file changed in uv's cache after its download, then installed under --require-hashes (I1)",
    "make install's RECORD check names the package and file and the cache clean",
)
def test_a_file_changed_in_uvs_cache_is_caught_by_its_record(env, capsys):
    assert uv_install(env).returncode == 0
    assert install.check_installed(env["lock"], env["stamp"], [env["site"]])  # the install as downloaded
    [cached] = (env["tmp"] / "uv-cache").glob("archive-*/*/tinypkg/__init__.py")
    cached.chmod(0o644)
    cached.write_text("VALUE = 666  # changed in the cache\n")  # a hard link: the installed file too
    subprocess.run([*env["uv"][:4], "uninstall", "--python", str(env["python"]), "tinypkg"], check=True)
    assert uv_install(env).returncode == 0 and "666" in installed_value(env)  # uv installed it, no word
    assert not install.check_installed(env["lock"], env["stamp"], [env["site"]])
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith(
        "contrastlab: 1 installed file(s) differ from their package's RECORD (first: tinypkg 1.0: "
        "tinypkg/__init__.py): a damaged or changed uv cache; run "
    )
    assert line.endswith("-m uv cache clean tinypkg, then make install again")


def test_the_record_check_hashes_only_what_changed_since_the_last_check(env):
    assert uv_install(env).returncode == 0
    paths = [env["site"]]
    [dist] = importlib.metadata.distributions(path=paths)
    listed = [f for f in dist.files if f.hash]  # the installer's own files too (RECORD has no hash)
    assert {"tinypkg/__init__.py", "tinypkg-1.0.dist-info/METADATA"} <= {str(f) for f in listed}
    assert install.record_mismatches(paths)[1] == len(listed)
    assert install.check_installed(env["lock"], env["stamp"], paths)
    assert install.record_mismatches(paths, since=install.time.time() + 1)[1] == 0


@pytest.mark.fault(
    "both sha256 of an installed package's lock line edited, version kept (I2)",
    "the next install reinstalls it under the lock's hashes and stops in one line",
)
def test_a_lock_line_with_edited_hashes_is_checked_by_the_next_install(env, capsys):
    assert uv_install(env).returncode == 0
    assert install.check_installed(env["lock"], env["stamp"], [env["site"]])
    lock = env["lock"]
    lock.write_text(lock.read_text().split("sha256:")[0] + "sha256:" + "a" * 64 + "\n")
    assert uv_install(env).returncode == 0  # the installed release is kept, nothing checked
    assert install.changed_entries(lock, env["stamp"]) == ["tinypkg"]
    again = install.reinstall_step(env["uv"], lock, ["tinypkg"], env["tmp"])
    done = subprocess.run(again, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "VALUE = 1" in installed_value(env)
    install.ERRORS[:] = [done.stderr]
    assert install.hash_mismatch() == (
        "contrastlab: requirements.lock's sha256 for tinypkg does not match the file downloaded: restore "
        "the lock (git checkout requirements.lock) or write it anew (make lock-deps); nothing was installed "
        "from it"
    )


def test_without_a_checked_install_nothing_counts_as_changed(env):
    """A first install (no stamp): every package is downloaded and checked anyway."""
    assert install.changed_entries(env["lock"], env["stamp"]) == []
