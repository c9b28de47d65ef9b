"""Where things live: the repository root and the optional ``shared`` folder beside it."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def shared_dir() -> Path | None:
    """The ``shared`` folder with real data and papers, or None when this clone has none.

    ``$CONTRASTLAB_SHARED`` wins; otherwise the folder ``shared`` beside the repository root.
    """
    env = os.environ.get("CONTRASTLAB_SHARED")
    candidate = Path(env) if env else REPO_ROOT.parent / "shared"
    return candidate if (candidate / "data").is_dir() or (candidate / "papers").is_dir() else None
