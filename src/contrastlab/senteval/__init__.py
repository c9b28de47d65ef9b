"""The SentEval benchmark, at the bottom of the library: its protocol as data and its file readers.

:mod:`.protocol` holds the tasks, files, row counts, modes and L2 grid (protocol.md §4, each value
citing SentEval); :mod:`.tasks` reads the ``downstream/`` tree as SentEval does and lists the
sentences each task needs (:func:`~.tasks.task_sentences`). The downloader and the demo fixture
(``contrastlab.data``), the trainer's dev evaluation and the evaluator all build on these, so
none of them imports another for them.
"""
