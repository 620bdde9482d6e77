"""``hushmon noise``: measure how much a (model of a) monitoring agent slows a job.

The method of seed 000 (Khudoleeva & Stefanov) with a stronger test: clean
and noisy runs of ``hushmon-detect`` in random order, per-run statistics as in
the seed and, per iteration, the detector's detours folded over the agent's
period. See docs/noise.md.
"""
