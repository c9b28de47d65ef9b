"""Li, Zhang & Nie's gradient paradigm as an analysis of any loss, not a loss: ``paradigm`` gives the
per-anchor gradient dissipation (GD), weight (W) and ratio (R) in closed form for the losses of Li Tables
1-2; ``paradigm_autograd`` the same for any loss from its autograd gradient (Li Fig. 4). Read by
``figures/paradigm.py`` and ``figures/li2024.py``; no loss or trainer imports it."""
