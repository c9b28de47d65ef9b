"""What the config says about the data: where they lie, which lock holds them, where they come from.

One class, :class:`DataConfig`, asked as ``grid.data`` by what holds a grid and as
``DataConfig(config)`` by what holds only the validated config (a job's script, ``versioning``): both
ask the same methods. The data rooms below (:mod:`contrastlab.data.acquire`, :mod:`contrastlab.data.images`)
take the values read here (folders, URLs, the lock, a source's md5s), never the config.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from contrastlab import artifacts as artifacts_lock
from contrastlab.data import acquire
from contrastlab.data.download import CORPUS_NAME

#: The data a data rule prepares and its marker names (besides ``images-<dataset>``).
DATA_KINDS = ("senteval", "corpus")


class DataConfig(Mapping[str, Any]):
    """The config's ``data`` section, read-only (``fixture``, ``wiki_path``, ...), and the questions about
    the data asked of it: where they lie, what they are, which lock pins them (``grid.data``)."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self._config = config
        self._section = dict(config.get("data") or {})

    def __getitem__(self, key: str) -> Any:
        return self._section[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._section)

    def __len__(self) -> int:
        return len(self._section)

    @property
    def lock_file(self) -> str:
        """The artifacts lock the config names (``artifacts_lock``), relative to the working directory;
        where the config leaves it out (the tables job's param does, so that a new pin re-renders
        nothing), the schema's default name: the file read and the file the report names are one."""
        return str(self._config.get("artifacts_lock") or artifacts_lock.LOCK_NAME)

    def locations(self) -> dict[str, str]:
        """Where the data lie: ``senteval_dir`` (the folder holding ``downstream/``) and ``corpus`` (the
        training text): the user's copies if set, else the generated fixture (demo) or the download under
        ``resources_dir``; ``downloads`` is where archives are fetched to, ``cache`` where tokenised
        corpora are kept, ``images`` the image folder, ``lock`` the artifacts lock."""
        data, resources = self._section, self._config["resources_dir"]
        senteval_dir = data["senteval_dir"] or (
            f"{resources}/data/senteval-fixture" if data["fixture"] else f"{resources}/data/senteval"
        )
        # The generated corpus's file names its size: presets share resources/, and one preset's corpus
        # must never overwrite another's under a data marker that still names the old size.
        corpus = data["wiki_path"] or (
            f"{resources}/data/demo_corpus-{data['fixture_corpus_sentences']}.txt"
            if data["fixture"]
            else f"{resources}/data/wiki1m_for_simcse.txt"
        )
        return {
            "senteval_dir": str(senteval_dir),
            "corpus": str(corpus),
            "downloads": f"{resources}/downloads",
            "cache": f"{resources}/cache",  # tokenised corpora, keyed by content
            # Vision track: the folder holding cifar-10-batches-py/ or cifar-100-python/ (a job of one
            # dataset gets that dataset's own, contrastlab.workflow.job.job_data_locations).
            "images": self.images_root(None),
            "lock": self.lock_file,
        }

    def user_images_root(self, dataset: str | None) -> str | None:
        """The user's copy of ``dataset`` (``data.cifar_root``: one folder for both, or one per dataset),
        or None where it is to be downloaded."""
        root = self._section.get("cifar_root")
        if isinstance(root, Mapping):
            return root.get(dataset) if dataset else None
        return root or None

    def images_root(self, dataset: str | None) -> str:
        """The folder ``dataset``'s images are read from: the user's copy, else the download's folder."""
        return str(self.user_images_root(dataset) or f"{self._config['resources_dir']}/data/cifar")

    def cifar_source_spec(self, dataset: str) -> dict[str, Any] | None:
        """``dataset``'s ``data.cifar_sources`` entry (a mirror's ``url``, a re-packed archive's md5s), or
        None for the published archive (:func:`contrastlab.data.images.cifar_source` makes it a source)."""
        entry = (self._section.get("cifar_sources") or {}).get(dataset)
        return dict(entry) if entry else None

    def corpus_source(self) -> acquire.CorpusSource:
        """Where the training corpus comes from: the user's file, the fixture or the download."""
        data = self._section
        return acquire.CorpusSource(
            wiki_path=data["wiki_path"] or None,
            fixture_sentences=data["fixture_corpus_sentences"] if data["fixture"] else None,
            url=data["wiki_url"],
            dest=self.locations()["corpus"],
            lines=data["wiki_lines"],
            lock_file=self.lock_file,
        )

    def identity(self, what: str, *, resolve: bool = False) -> dict[str, Any]:
        """What the ``what`` data (``senteval``, ``corpus``) are, independent of where they lie: the params
        of its data rule and of every cell that reads them (:mod:`contrastlab.data.acquire`'s
        ``senteval_identity``, ``corpus_identity``; ``resolve``: an unpinned download's digest is resolved
        now, as the workflow's main process does)."""
        if what == "senteval":
            return acquire.senteval_identity(
                self._section["senteval_dir"] or None, fixture=bool(self._section["fixture"])
            )
        if what == "corpus":
            return acquire.corpus_identity(self.corpus_source(), resolve=resolve)
        raise ValueError(f"unknown data kind {what!r}; expected {' or '.join(DATA_KINDS)}")

    def image_identity(self, dataset: str) -> dict[str, Any]:
        """What the images of ``dataset`` are (:func:`contrastlab.data.acquire.image_identity`; a user's
        copy is checked file by file)."""
        return acquire.image_identity(
            dataset, user_copy=self.user_images_root(dataset), custom=self.cifar_source_spec(dataset)
        )

    def check_lock(self) -> None:
        """Raise LockMismatch (one line) where the config asks for another revision than the artifacts lock
        pins: a backbone's ``revision``, or a data URL naming another commit. Read from the lock alone (no
        network), so the workflow stops before any job, and no finished folder is replaced by a failing
        one."""
        lock = self.lock_file
        for alias, spec in self._config["backbones"].items():
            if "hf_id" in spec and "path" not in spec:
                artifacts_lock.pinned_backbone(
                    lock, spec["hf_id"], spec.get("revision"), where=f"backbones.{alias}.revision"
                )
        urls = {"senteval.tar": self._section["senteval_url"], CORPUS_NAME: self._section["wiki_url"]}
        acquire.check_data_pins(lock, urls)
