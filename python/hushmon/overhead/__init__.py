"""``hushmon overhead``: what monitoring costs real programs (seed 003).

NPB-like kernels (c/apps) run in configurations ``<nodes>-<ppn>-<class>``,
N times each in randomized interleaved order, with no monitoring and with
each monitoring agent; the result is the seed's table of % slowdown per
kernel x configuration x mode, anomalous runs detected and reported.
"""
