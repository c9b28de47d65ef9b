"""Stand-ins for downloaded archives, built in their publishers' layouts and formats (not ours).

- :func:`senteval_tar`: ``senteval.tar`` as SimCSE publishes it, the task folders (``STS/``, ``SICK/``
  ...) at its top level (its ``download_dataset.sh`` unpacks it inside ``SentEval/data/downstream/``);
  ``published=False`` gives the ``downstream/`` layout of SentEval's own tree, which is accepted too.
- :func:`cifar_archive`: ``cifar-10-python.tar.gz`` / ``cifar-100-python.tar.gz`` as the Toronto page
  publishes them and torchvision reads them: ``cls.base_folder/`` holding pickled dicts of uint8 rows (the
  R, G and B planes of 32x32) with their labels, one file per batch of ``cls.train_list`` and
  ``cls.test_list``, and the meta file with the class names. The published files are Python 2 pickles,
  whose str keys torchvision reads as str (it unpickles with encoding="latin1"); protocol-2 pickles with
  str keys are read the same way.
"""

from __future__ import annotations

import hashlib
import io
import pickle
import tarfile
from pathlib import Path

import numpy as np
from torchvision.datasets import CIFAR10


def senteval_tar(downstream: Path, *, published: bool = True) -> bytes:
    """The tar of the task folders in ``downstream`` (see the module docstring for the two layouts)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        if published:
            for task in sorted(downstream.iterdir()):
                tar.add(task, arcname=task.name)
        else:
            tar.add(downstream, arcname="downstream")
    return buffer.getvalue()


def cifar_archive(cls: type, rows: np.ndarray, labels: np.ndarray, per_file: int) -> dict:
    """A CIFAR archive of torchvision's dataset class ``cls`` whose batch files hold ``per_file`` of
    ``rows`` (uint8 [n, 3072]) and ``labels`` each, in ``cls.train_list`` then ``cls.test_list`` order.
    Returns ``archive`` (the .tar.gz bytes), ``files`` (name -> bytes), ``file_md5``, ``classes`` and the
    ``train`` / ``test`` split as torchvision will load it (pixels [n, 3, 32, 32], labels)."""
    n_classes, label_key = (10, "labels") if cls is CIFAR10 else (100, "fine_labels")
    classes = [f"class{i}" for i in range(n_classes)]
    files, expected = {}, {"train": ([], []), "test": ([], [])}
    for index, (name, _) in enumerate([*cls.train_list, *cls.test_list]):
        chunk = slice(index * per_file, (index + 1) * per_file)
        target = np.asarray(labels[chunk]).tolist()
        files[name] = pickle.dumps({"data": rows[chunk], label_key: target, "batch_label": name}, protocol=2)
        pixels, split_labels = expected["test" if index >= len(cls.train_list) else "train"]
        pixels.append(rows[chunk].reshape(-1, 3, 32, 32))
        split_labels += target
    files[cls.meta["filename"]] = pickle.dumps({cls.meta["key"]: classes}, protocol=2)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, blob in files.items():
            info = tarfile.TarInfo(f"{cls.base_folder}/{name}")
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))
    return {
        "archive": buffer.getvalue(),
        "files": files,
        "file_md5": {name: md5(blob) for name, blob in files.items()},
        "classes": tuple(classes),
        **{split: (np.concatenate(p), np.array(lab)) for split, (p, lab) in expected.items()},
    }


def md5(data: bytes) -> str:
    return hashlib.md5(data, usedforsecurity=False).hexdigest()
