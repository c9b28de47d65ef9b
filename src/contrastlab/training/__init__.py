"""contrastlab.training: the unsupervised SimCSE-protocol sentence trainer, the image trainer and the
workflow's training job of each track (``cells``).

``sentence`` (``TrainSettings``, ``train``) with its helpers ``corpus`` (tokenised-corpus cache),
``dev`` (on-device STS dev evaluation) and ``state`` (resumable snapshots). Nothing is imported here,
so ``import contrastlab.training`` stays cheap.
"""
