"""Image data of the vision track: digits offline, CIFAR through torchvision from a local server."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import publisher_formats
import pytest
import torch
from test_download import server  # noqa: F401 (the local HTTP server fixture)
from torchvision.datasets import CIFAR10, CIFAR100

from contrastlab.data import images
from contrastlab.data.download import ChecksumError

ARCHIVE = "/cifar-10-python.tar.gz"


def cifar_archive(cls: type = CIFAR10, per_file: int = 3, seed: int = 0) -> dict:
    """A tiny archive in the real CIFAR python format of ``cls`` (tests/publisher_formats.py), random
    pixels and labels."""
    rng = np.random.default_rng(seed)
    n = per_file * (len(cls.train_list) + len(cls.test_list))
    rows = rng.integers(0, 256, (n, 3072), dtype=np.uint8)
    labels = rng.integers(0, 10 if cls is CIFAR10 else 100, n)
    return publisher_formats.cifar_archive(cls, rows, labels, per_file)


def source_for(url: str, made: dict, cls: type = CIFAR10) -> images.CifarSource:
    return images.CifarSource(cls, url, publisher_formats.md5(made["archive"]), made["file_md5"])


def write_copy(root, made: dict, cls: type = CIFAR10) -> None:
    folder = root / cls.base_folder
    folder.mkdir(parents=True)
    for name, blob in made["files"].items():
        (folder / name).write_bytes(blob)


# --- digits ---------------------------------------------------------------------------------------


def test_digits_split_is_stratified_and_deterministic():
    train, test = images.load_images("digits", "train"), images.load_images("digits", "test")
    assert train.images.shape == (1437, 3, 16, 16) and test.images.shape == (360, 3, 16, 16)
    assert train.images.dtype == torch.uint8 and train.labels.dtype == torch.int64
    assert int(train.images.min()) == 0 and int(train.images.max()) == 255
    assert torch.equal(train.images[:, 0], train.images[:, 2])  # grey, replicated
    assert train.classes == tuple(str(c) for c in range(10))
    # 20% of each class's 174..183 images in the test split, the rest in training
    for split, fraction in ((test, 0.2), (train, 0.8)):
        counts = torch.bincount(split.labels, minlength=10)
        full = torch.bincount(torch.cat([train.labels, test.labels]), minlength=10)
        assert ((counts - fraction * full).abs() <= 1).all()
    again = images.load_images("digits", "train")
    assert torch.equal(train.images, again.images) and torch.equal(train.labels, again.labels)
    x = train.images.float().div(255)
    mean, std = images.IMAGE_STATS["digits"]
    assert x.mean().item() == pytest.approx(mean[0], abs=1e-4)
    assert x.std().item() == pytest.approx(std[0], abs=1e-4)


def test_digits_resize():
    native = images.load_images("digits", "test", image_size=8)
    assert native.images.shape == (360, 3, 8, 8)
    from sklearn.datasets import load_digits

    # the native size is the sklearn grey levels scaled by 255/16, nothing resampled
    values = torch.unique(native.images).float()
    assert torch.allclose(values, (values * 16 / 255).round() * 255 / 16, atol=0.5)
    assert load_digits().images.shape[1:] == (8, 8)
    big = images.load_images("digits", "test", image_size=24)
    assert big.images.shape == (360, 3, 24, 24)
    # bilinear enlarging keeps the image's mean within rounding
    assert big.images.float().mean().item() == pytest.approx(native.images.float().mean().item(), rel=0.02)
    assert images.load_images("digits", "test", image_size=4).images.shape[-1] == 4
    with pytest.raises(ValueError, match="image_size must be >= 1"):
        images.load_images("digits", "test", image_size=0)


def test_unknown_names_list_the_valid_ones():
    with pytest.raises(ValueError, match="valid: digits, cifar10, cifar100"):
        images.load_images("mnist", "train")
    with pytest.raises(ValueError, match="valid: train, test"):
        images.load_images("digits", "val")
    assert set(images.DATASETS) == set(images.NUM_CLASSES) == set(images.IMAGE_STATS)


# --- CIFAR ----------------------------------------------------------------------------------------


@pytest.mark.fault("CIFAR download: HTTP 500 or a dropped connection first", "retried, md5-checked, loaded")
@pytest.mark.parametrize("fault", ["500", "drop"])
def test_cifar_download_from_a_local_server(server, tmp_path, fault, observed):  # noqa: F811
    base, handler = server
    made = cifar_archive()
    handler.files[ARCHIVE] = made["archive"]
    handler.faults[ARCHIVE] = fault
    source = source_for(base + ARCHIVE, made)
    root, lock = tmp_path / "cifar", tmp_path / "lock.json"
    train = images.load_images(
        "cifar10", "train", root=root, download=True, source=source, lock_file=lock, progress=False
    )
    pixels, labels = made["train"]
    assert train.images.dtype == torch.uint8 and train.images.shape == (15, 3, 32, 32)
    assert torch.equal(train.images, torch.from_numpy(pixels)) and train.labels.tolist() == labels.tolist()
    assert train.classes == made["classes"]
    test = images.load_images("cifar10", "test", root=root, source=source)
    assert torch.equal(test.images, torch.from_numpy(made["test"][0]))
    assert [path for path, _ in handler.log] == [ARCHIVE, ARCHIVE]  # the fault, then the file
    assert not list(root.glob(".unpack-*"))  # the temporary extraction folder is gone
    # the archive's sha256 was recorded only after its md5 matched
    entry = json.loads(lock.read_text())["data"][ARCHIVE.lstrip("/")]
    assert entry["sha256"] == hashlib.sha256(made["archive"]).hexdigest()
    observed(f"{fault} then 200: 2 requests; pixels and labels equal the served archive")


@pytest.mark.fault("CIFAR archive whose md5 differs", "one-line error, the file kept aside")
def test_a_wrong_archive_stops_and_is_kept_aside(server, tmp_path, observed):  # noqa: F811
    base, handler = server
    made = cifar_archive()
    handler.files[ARCHIVE] = made["archive"][:-1] + bytes([made["archive"][-1] ^ 1])
    source = source_for(base + ARCHIVE, made)
    lock = tmp_path / "l.json"
    with pytest.raises(ChecksumError, match="md5 mismatch.*moved aside") as caught:
        images.prepare_images(
            "cifar10",
            tmp_path / "c",
            download=True,
            downloads=tmp_path / "dl",
            source=source,
            lock_file=lock,
            progress=False,
        )
    assert "\n" not in str(caught.value)
    assert (tmp_path / "dl" / "cifar-10-python.tar.gz.corrupt").exists()
    assert not (tmp_path / "dl" / "cifar-10-python.tar.gz").exists() and not (tmp_path / "c").exists()
    assert not lock.exists()  # the wrong file's digest never entered the lock file
    observed(str(caught.value).split(";")[0])


@pytest.mark.fault("CIFAR copy missing or with a damaged batch file", "one line naming the folder or file")
def test_a_local_copy_is_checked_file_by_file(tmp_path, observed):
    made = cifar_archive()
    source = source_for("http://unused/cifar-10-python.tar.gz", made)
    with pytest.raises(images.ImageDataError, match="does not exist; set data.cifar_root") as missing:
        images.load_images("cifar10", "train", root=tmp_path, source=source)
    assert "\n" not in str(missing.value) and str(tmp_path / "cifar-10-batches-py") in str(missing.value)
    write_copy(tmp_path, made)
    images.check_local_copy("cifar10", tmp_path, source=source)  # intact
    train = images.load_images("cifar10", "train", root=tmp_path, source=source)  # no download
    assert torch.equal(train.images, torch.from_numpy(made["train"][0]))
    (tmp_path / "cifar-10-batches-py" / "data_batch_3").write_bytes(made["files"]["data_batch_3"][:-10])
    with pytest.raises(images.ImageDataError, match="data_batch_3 is corrupt") as caught:
        images.load_images("cifar10", "train", root=tmp_path, source=source)
    assert "\n" not in str(caught.value)
    (tmp_path / "cifar-10-batches-py" / "data_batch_3").write_bytes(made["files"]["data_batch_3"])
    (tmp_path / "cifar-10-batches-py" / "batches.meta").unlink()
    with pytest.raises(images.ImageDataError, match="batches.meta is missing"):
        images.check_local_copy("cifar10", tmp_path, source=source)
    observed(str(caught.value))


def test_torchvisions_own_per_file_check_runs_for_a_substituted_source(tmp_path):
    made = cifar_archive()
    write_copy(tmp_path, made)
    cls = source_for("http://unused/x.tar.gz", made).dataset_class()
    assert issubclass(cls, CIFAR10) and cls is not CIFAR10
    assert len(cls(str(tmp_path), train=True, download=False)) == 15  # torchvision accepts our md5s
    with pytest.raises(RuntimeError, match="not found or corrupted"):
        CIFAR10(str(tmp_path), train=True, download=False)  # ... and rejects them against the published
    (tmp_path / "cifar-10-batches-py" / "test_batch").write_bytes(b"x")
    with pytest.raises(RuntimeError, match="not found or corrupted"):
        cls(str(tmp_path), train=True, download=False)


def test_cifar100_format_loads(tmp_path):
    made = cifar_archive(CIFAR100, per_file=4, seed=1)
    write_copy(tmp_path, made, CIFAR100)
    source = source_for("http://unused/cifar-100-python.tar.gz", made, CIFAR100)
    for split in ("train", "test"):
        got = images.load_images("cifar100", split, root=tmp_path, source=source)
        assert torch.equal(got.images, torch.from_numpy(made[split][0]))
        assert got.labels.tolist() == made[split][1].tolist() and len(got.classes) == 100
    with pytest.raises(ValueError, match="image_size must be None or 32"):
        images.load_images("cifar100", "train", root=tmp_path, source=source, image_size=16)


def test_the_published_source_is_torchvisions():
    for name, cls in (("cifar10", CIFAR10), ("cifar100", CIFAR100)):
        source = images.PUBLISHED_SOURCES[name]
        assert source.url == cls.url and source.archive_md5 == cls.tgz_md5
        assert source.dataset_class() is cls
