"""Post-training methods compared in closed-loop rounds against iterated baselines (``vla-compare``).

- :mod:`training.compare.arms`: the arms (baselines, methods, ablations) and their presets;
- :mod:`training.compare.harness`: the base, the per-arm lineages of rounds, the cache;
- :mod:`training.compare.stats`: means and intervals over seeds, per round, paired differences;
- :mod:`training.compare.report`: the tables, the per-task plot and the acceptance lines;
- :mod:`training.compare.credit_share`: where a credit method's actor signal goes.
"""
