"""What a run costs: the FLOP model (``flops``), the GPU calibration (``calibration``), the plan of a
config's GPU-hours and memory (``plan``) and when it finishes (``schedule``), the search budget
(``budget``), several small cells per GPU (``packing``), the measured cost of a finished run
(``measured``) and ``make gpu-check``'s figures (``gpu_check``)."""
