"""Image datasets of the vision track (protocol.md §3): CIFAR-10/100 through torchvision, and
scikit-learn's bundled digits for offline tests and the demo.

Every split is returned whole as a uint8 tensor [N, 3, H, W] (CIFAR-10's training split is 150 MB): the
trainer keeps it on the device and augments whole batches there, so no data loader bounds an epoch.

CIFAR is read by torchvision's dataset classes (which check every batch file's md5) from the archive
:func:`contrastlab.data.download.fetch` downloads and holds to the published md5. A :class:`CifarSource`
names the archive and the md5s; tests substitute one pointing at a local server, on the same code path.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torchvision import datasets

from contrastlab.data.download import LOCK_FILE, fetch, md5_file, replace_dir

__all__ = [
    "DATASETS",
    "IMAGE_STATS",
    "NATIVE_SIZE",
    "NUM_CLASSES",
    "PUBLISHED_SOURCES",
    "SPLITS",
    "CifarSource",
    "ImageDataError",
    "ImageSplit",
    "check_local_copy",
    "cifar_source",
    "labelled_subset",
    "load_images",
    "prepare_images",
]

DATASETS = ("digits", "cifar10", "cifar100")
SPLITS = ("train", "test")
NUM_CLASSES = {"digits": 10, "cifar10": 10, "cifar100": 100}
#: Side of the images as :func:`load_images` returns them by default (digits: 8x8 upsampled to 16x16).
NATIVE_SIZE = {"digits": 16, "cifar10": 32, "cifar100": 32}
#: Per-channel (mean, std) of the training split in [0, 1], for normalising the network's input.
#: CIFAR-10: the statistics of the 50,000 training images as reported in kuangliu/pytorch-cifar issue #19
#: and used by lightning-bolts (``pl_bolts/transforms/dataset_normalizations.py``); the often quoted std
#: (0.2023, 0.1994, 0.2010) of kuangliu/pytorch-cifar's ``main.py`` is an average of per-image stds, not
#: the dataset's. CIFAR-100: the training-set statistics of weiaicunzai/pytorch-cifar100
#: (``conf/global_settings.py``), rounded to 4 digits. Digits: of the 16x16 training split of
#: :func:`load_images` (one grey level, replicated; a test recomputes both numbers).
IMAGE_STATS = {
    "cifar10": ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
    "cifar100": ((0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762)),
    "digits": ((0.3054,) * 3, (0.3186,) * 3),
}
#: Digits: a stratified 80/20 split with this seed (1437 training, 360 test images).
DIGITS_TEST_FRACTION, DIGITS_SPLIT_SEED = 0.2, 0


class ImageDataError(OSError):
    """Image data missing or corrupt; the message is one line naming the folder or file and the fix."""


@dataclass(frozen=True)
class ImageSplit:
    """One split of a dataset: ``images`` uint8 [N, 3, H, W] (CPU), ``labels`` int64 [N], and the
    class names (``classes[label]``)."""

    images: torch.Tensor
    labels: torch.Tensor
    classes: tuple[str, ...]


@dataclass(frozen=True)
class CifarSource:
    """Where a CIFAR archive comes from and what it must hash to.

    ``torchvision_class`` is ``datasets.CIFAR10`` or ``datasets.CIFAR100``; ``archive_md5`` the md5 of
    the ``.tar.gz`` at ``url``. ``file_md5`` replaces torchvision's md5 of the unpacked files
    (``{file name: md5}`` for every file of ``train_list``, ``test_list`` and ``meta``; None keeps the
    published ones): a test's generated archive has its own, and torchvision's check still runs.
    """

    torchvision_class: type
    url: str
    archive_md5: str
    file_md5: dict[str, str] | None = None

    def dataset_class(self) -> type:
        """torchvision's class, or a subclass whose documented md5 attributes (``train_list``,
        ``test_list``, ``meta``) are this source's."""
        base = self.torchvision_class
        if self.file_md5 is None:
            return base
        md5 = self.file_md5
        return type(
            f"{base.__name__}FromSource",
            (base,),
            {
                "train_list": [[name, md5[name]] for name, _ in base.train_list],
                "test_list": [[name, md5[name]] for name, _ in base.test_list],
                "meta": {**base.meta, "md5": md5[base.meta["filename"]]},
            },
        )


#: torchvision's published archives: URL and md5 as the dataset classes declare them.
PUBLISHED_SOURCES = {
    "cifar10": CifarSource(datasets.CIFAR10, datasets.CIFAR10.url, datasets.CIFAR10.tgz_md5),
    "cifar100": CifarSource(datasets.CIFAR100, datasets.CIFAR100.url, datasets.CIFAR100.tgz_md5),
}


def cifar_source(dataset: str, custom: Mapping[str, Any] | None) -> CifarSource | None:
    """``dataset``'s ``data.cifar_sources`` entry ``custom`` as a :class:`CifarSource` (a mirror's URL with
    the published md5s, or a re-packed archive with its own), or None for torchvision's published source
    (no entry, or a dataset torchvision does not publish)."""
    if not custom or dataset not in PUBLISHED_SOURCES:
        return None
    published = PUBLISHED_SOURCES[dataset]
    archive_md5 = custom.get("archive_md5", published.archive_md5)
    return replace(published, url=custom["url"], archive_md5=archive_md5, file_md5=custom.get("file_md5"))


def _check_name(dataset: str, split: str = "train") -> None:
    if dataset not in DATASETS:
        raise ValueError(f"unknown image dataset {dataset!r}; valid: {', '.join(DATASETS)}")
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; valid: {', '.join(SPLITS)}")


def _checked_class(dataset: str, root: str | Path, source: CifarSource | None) -> type:
    """torchvision's dataset class to read ``root``'s copy with, after our own per-file md5 check:
    torchvision's raises a generic "not found or corrupted"; this one names the file."""
    source = source or PUBLISHED_SOURCES[dataset]
    cls = source.dataset_class()
    folder = Path(root) / cls.base_folder
    if not folder.is_dir():
        raise ImageDataError(
            f"{dataset}: {folder} does not exist; set data.cifar_root to the folder holding "
            f"{cls.base_folder}/, or allow the download (leave data.cifar_root unset; download=True)"
        )
    for name, md5 in [*cls.train_list, *cls.test_list, [cls.meta["filename"], cls.meta["md5"]]]:
        path = folder / name
        if not path.is_file():
            raise ImageDataError(f"{dataset}: {path} is missing; restore the file or download again")
        if md5_file(path) != md5:
            raise ImageDataError(
                f"{dataset}: {path} is corrupt (md5 differs from the published file); replace it or "
                "delete the folder and download again"
            )
    return cls


def check_local_copy(dataset: str, root: str | Path, *, source: CifarSource | None = None) -> None:
    """Raise :class:`ImageDataError` unless ``root`` holds an intact copy of ``dataset`` (md5 per file)."""
    _check_name(dataset)
    if dataset != "digits":
        _checked_class(dataset, root, source)


def _unpack(archive: Path, root: Path, folder_name: str) -> None:
    """Extract into a temporary folder beside the target and move ``folder_name`` into place, so an
    interrupted unpack never leaves a half-written folder that a later run would take for a copy."""
    from torchvision.datasets.utils import extract_archive

    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=root, prefix=".unpack-") as tmp:
        extract_archive(str(archive), tmp)
        unpacked = Path(tmp) / folder_name
        if not unpacked.is_dir():
            raise ImageDataError(f"{archive} holds no {folder_name}/ folder; is it the CIFAR archive?")
        replace_dir(unpacked, root / folder_name)


def prepare_images(
    dataset: str,
    root: str | Path,
    *,
    download: bool,
    downloads: str | Path | None = None,
    source: CifarSource | None = None,
    lock_file: str | Path = LOCK_FILE,
    progress: bool = True,
    **fetch_kwargs: Any,
) -> type | None:
    """Make ``dataset`` loadable from ``root`` and return torchvision's class to read it with: digits
    need nothing (None); CIFAR is checked file by file and, when absent and ``download`` is set, fetched
    to ``downloads`` (default ``root``) with :func:`~contrastlab.data.download.fetch` (``fetch_kwargs``:
    retries, timeout), held to the archive's published md5 (a mismatch raises ``ChecksumError`` and
    moves the file aside), and unpacked. Raises :class:`ImageDataError` (one line) when the copy is
    missing or corrupt."""
    _check_name(dataset)
    if dataset == "digits":
        return None
    source = source or PUBLISHED_SOURCES[dataset]
    folder_name = source.dataset_class().base_folder
    root = Path(root)
    if download and not (root / folder_name).is_dir():
        archive = Path(downloads if downloads is not None else root) / source.url.rsplit("/", 1)[-1]
        fetch(
            source.url,
            archive,
            md5=source.archive_md5,
            lock_file=lock_file,
            progress=progress,
            local_copy=f"data.cifar_root (a folder holding {folder_name}/)",
            **fetch_kwargs,
        )
        _unpack(archive, root, folder_name)
    return _checked_class(dataset, root, source)


def _digits(split: str, image_size: int) -> ImageSplit:
    """scikit-learn's 1797 digits (8x8, grey levels 0..16), split 80/20 stratified by class with a fixed
    seed, scaled to 0..255, resized to ``image_size`` and replicated to three channels."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    indices = np.arange(len(digits.target))
    train, test = train_test_split(
        indices, test_size=DIGITS_TEST_FRACTION, stratify=digits.target, random_state=DIGITS_SPLIT_SEED
    )
    chosen = train if split == "train" else test
    grey = torch.tensor(digits.images[chosen] / 16.0, dtype=torch.float32)[:, None]
    if image_size != grey.shape[-1]:
        # Bilinear with antialias (torchvision's Resize default): identical to plain bilinear when
        # enlarging (the 16x16 default), and without aliasing should a size below 8 be asked for.
        grey = F.interpolate(grey, size=image_size, mode="bilinear", align_corners=False, antialias=True)
    images = (grey * 255).round().clamp(0, 255).to(torch.uint8).expand(-1, 3, -1, -1).contiguous()
    labels = torch.as_tensor(digits.target[chosen], dtype=torch.int64)
    return ImageSplit(images, labels, tuple(str(c) for c in digits.target_names))


def load_images(
    dataset: str,
    split: str,
    *,
    root: str | Path | None = None,
    download: bool = False,
    image_size: int | None = None,
    source: CifarSource | None = None,
    **fetch_kwargs: Any,
) -> ImageSplit:
    """The ``split`` ("train", "test") of ``dataset`` ("digits", "cifar10", "cifar100") as uint8 NCHW.

    CIFAR is read from ``root`` (the folder holding ``cifar-10-batches-py/`` or ``cifar-100-python/``)
    at its 32x32, every file md5-checked; with ``download`` a missing copy is first fetched and
    unpacked there (:func:`prepare_images`; ``fetch_kwargs`` such as ``lock_file`` and ``retries`` go
    to it). ``image_size`` sets the digits' side (default 16); for CIFAR it must be None or 32.
    Raises :class:`ImageDataError` (one line, naming the folder or file and the fix).
    """
    _check_name(dataset, split)
    if image_size is not None and image_size < 1:
        raise ValueError(f"image_size must be >= 1, got {image_size}")
    if dataset == "digits":
        return _digits(split, image_size or NATIVE_SIZE["digits"])
    if root is None:
        raise ImageDataError(
            f"{dataset}: no folder given; set data.cifar_root or let the workflow download it"
        )
    if image_size is not None and image_size != NATIVE_SIZE[dataset]:
        raise ValueError(f"{dataset}: images are 32x32; image_size must be None or 32, got {image_size}")
    cls = prepare_images(dataset, root, download=download, source=source, **fetch_kwargs)
    data = cls(str(root), train=split == "train", download=False)
    # torchvision keeps .data as [N, 32, 32, 3] (HWC, as pickled); the network wants NCHW.
    images = torch.from_numpy(np.ascontiguousarray(data.data)).permute(0, 3, 1, 2).contiguous()
    return ImageSplit(images, torch.as_tensor(data.targets, dtype=torch.int64), tuple(data.classes))


def labelled_subset(n_images: int, fraction: float, seed: int) -> torch.Tensor:
    """Indices of the training images whose labels a run may use: the first
    ``int(fraction * n_images)`` entries of a permutation drawn from ``seed`` (OAR §4-5: the labelled
    set S of the regression term and the 10/50/100% label budgets of the fine-tuning).

    The subsets of one seed are nested (the 10% subset is inside the 50% one), so an OAR run and its
    fine-tuning at 10% use the same labels, as the paper does ("the same 10% of labels"). Not stratified:
    the authors draw S with ``random_split`` (``data_CIFAR10.py``). Sorted indices; at least 2.

    >>> labelled_subset(10, 0.3, seed=0).tolist()
    [2, 3, 4]
    """
    if not 0 < fraction <= 1:
        raise ValueError(f"label fraction must be in (0, 1], got {fraction}")
    count = int(fraction * n_images)
    if count < 2:
        raise ValueError(
            f"label fraction {fraction} of {n_images} images leaves {count} labelled image(s); "
            "raise the fraction (at least 2 images)"
        )
    order = torch.from_numpy(np.random.default_rng([seed, 0x0A4]).permutation(n_images))
    return order[:count].sort().values


def validation_split(n_images: int, fraction: float, seed: int) -> torch.Tensor:
    """Indices of the training images held out to select the encoder on a validation loss: the *last*
    ``int(fraction * n_images)`` entries of :func:`labelled_subset`'s permutation, so they never overlap
    a labelled subset of up to ``1 - fraction`` of the images (OAR's 10% labels stay the FFN's). The OAR
    authors hold out a random 20% with ``random_split(val_split=0.2)`` (``data_CIFAR10.py``). Sorted.

    >>> validation_split(10, 0.2, seed=0).tolist(), labelled_subset(10, 0.3, seed=0).tolist()
    ([0, 7], [2, 3, 4])
    """
    if not 0 < fraction < 1:
        raise ValueError(f"validation fraction must be in (0, 1), got {fraction}")
    count = int(fraction * n_images)
    if count < 2:
        raise ValueError(f"validation fraction {fraction} of {n_images} images leaves {count}; raise it")
    order = torch.from_numpy(np.random.default_rng([seed, 0x0A4]).permutation(n_images))
    return order[n_images - count :].sort().values
