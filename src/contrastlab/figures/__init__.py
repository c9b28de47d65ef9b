"""The papers' figures: one module per paper for the computations, one plotting style (:mod:`.style`)."""
