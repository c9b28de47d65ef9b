"""Image data of the vision track: digits offline, CIFAR through torchvision from a local server."""

from __future__ import annotations

import hashlib
import io
import pickle
import tarfile

import numpy as np
import pytest
import torch
from test_download import server  # noqa: F401 (the local HTTP server fixture)
from torchvision.datasets import CIFAR10

from contrastlab.data import images
from contrastlab.data.download import ChecksumError

CLASSES = [f"class{i}" for i in range(10)]


def _md5(data: bytes) -> str:
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


def cifar_archive(
    per_batch: int = 4, seed: int = 0
) -> tuple[bytes, dict[str, bytes], np.ndarray, np.ndarray]:
    """A tiny archive in the real CIFAR-10 python format: (tar.gz bytes, files, train pixels NCHW, labels)."""
    rng = np.random.default_rng(seed)
    files, pixels, labels = {}, [], []
    for name in [*(f"data_batch_{i}" for i in range(1, 6)), "test_batch"]:
        data = rng.integers(0, 256, (per_batch, 3072), dtype=np.uint8)
        target = rng.integers(0, 10, per_batch).tolist()
        files[name] = pickle.dumps({"data": data, "labels": target, "batch_label": name})
        if name != "test_batch":
            pixels.append(data.reshape(-1, 3, 32, 32))
            labels += target
    files["batches.meta"] = pickle.dumps({"label_names": CLASSES, "num_vis": 3072})
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, blob in files.items():
            info = tarfile.TarInfo(f"cifar-10-batches-py/{name}")
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))
    return buffer.getvalue(), files, np.concatenate(pixels), np.array(labels)


def source_for(url: str, archive: bytes, files: dict[str, bytes]) -> images.CifarSource:
    return images.CifarSource(CIFAR10, url, _md5(archive), {n: _md5(b) for n, b in files.items()})


def test_digits_split_is_stratified_and_deterministic():
    train, test = images.load_images("digits", "train"), images.load_images("digits", "test")
    assert train.images.shape == (1437, 3, 16, 16) and test.images.shape == (360, 3, 16, 16)
    assert train.images.dtype == torch.uint8 and int(train.images.max()) == 255
    assert torch.equal(train.images[:, 0], train.images[:, 2])  # grey, replicated
    counts = torch.bincount(test.labels)  # 20% of each class's ~180 images
    assert counts.sum() == 360 and int(counts.min()) >= 35 and int(counts.max()) <= 37
    again = images.load_images("digits", "train")
    assert torch.equal(train.images, again.images) and torch.equal(train.labels, again.labels)
    assert images.load_images("digits", "test", image_size=8).images.shape[-1] == 8
    mean = train.images.float().div(255).mean().item()
    assert mean == pytest.approx(images.IMAGE_STATS["digits"][0][0], abs=1e-4)


def test_unknown_names_list_the_valid_ones():
    with pytest.raises(ValueError, match="valid: digits, cifar10, cifar100"):
        images.load_images("mnist", "train")
    with pytest.raises(ValueError, match="valid: train, test"):
        images.load_images("digits", "val")


@pytest.mark.fault("CIFAR download: HTTP 500, then served", "retried, md5-checked, unpacked, loaded")
def test_cifar_download_from_a_local_server(server, tmp_path, observed):  # noqa: F811
    base, handler = server
    archive, files, pixels, labels = cifar_archive()
    handler.files["/cifar-10-python.tar.gz"] = archive
    handler.faults["/cifar-10-python.tar.gz"] = "500"
    source = source_for(f"{base}/cifar-10-python.tar.gz", archive, files)
    root = tmp_path / "cifar"
    images.prepare_images(
        "cifar10",
        root,
        download=True,
        downloads=tmp_path / "dl",
        source=source,
        lock_file=tmp_path / "lock.json",
        progress=False,
    )
    train = images.load_images("cifar10", "train", root=root, source=source)
    assert torch.equal(train.images, torch.from_numpy(pixels)) and train.labels.tolist() == labels.tolist()
    assert (
        train.classes == tuple(CLASSES)
        and len(images.load_images("cifar10", "test", root=root, source=source).labels) == 4
    )
    assert [path for path, _ in handler.log].count("/cifar-10-python.tar.gz") == 2  # the 500, then the file
    observed("retried after HTTP 500; pixels and labels equal the served archive")


@pytest.mark.fault("CIFAR archive whose md5 differs", "one-line error, the file kept aside")
def test_a_wrong_archive_stops_and_is_kept_aside(server, tmp_path, observed):  # noqa: F811
    base, handler = server
    archive, files, _, _ = cifar_archive()
    handler.files["/cifar-10-python.tar.gz"] = archive[:-1] + bytes([archive[-1] ^ 1])
    source = source_for(f"{base}/cifar-10-python.tar.gz", archive, files)
    with pytest.raises(ChecksumError, match="differs from the published archive") as caught:
        images.prepare_images(
            "cifar10",
            tmp_path / "c",
            download=True,
            downloads=tmp_path / "dl",
            source=source,
            lock_file=tmp_path / "l.json",
            progress=False,
        )
    assert "\n" not in str(caught.value)
    assert (tmp_path / "dl" / "cifar-10-python.tar.gz.corrupt").exists() and not (tmp_path / "c").exists()
    observed(str(caught.value).split(";")[0])


@pytest.mark.fault("CIFAR copy missing or with a damaged batch file", "one line naming the folder or file")
def test_a_local_copy_is_checked_file_by_file(tmp_path, observed):
    archive, files, _, _ = cifar_archive()
    source = images.CifarSource(
        CIFAR10, "http://unused/cifar-10-python.tar.gz", _md5(archive), {n: _md5(b) for n, b in files.items()}
    )
    with pytest.raises(images.ImageDataError, match="does not exist; set data.cifar_root"):
        images.check_local_copy("cifar10", tmp_path, source=source)
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    for name, blob in files.items():
        (folder / name).write_bytes(blob)
    images.check_local_copy("cifar10", tmp_path, source=source)  # intact
    (folder / "data_batch_3").write_bytes(files["data_batch_3"][:-10])
    with pytest.raises(images.ImageDataError, match="data_batch_3 is corrupt") as caught:
        images.load_images("cifar10", "train", root=tmp_path, source=source)
    observed(str(caught.value))


def test_the_published_source_is_torchvisions():
    source = images.PUBLISHED_SOURCES["cifar10"]
    assert source.url == CIFAR10.url and source.archive_md5 == CIFAR10.tgz_md5
    assert source.dataset_class() is CIFAR10
