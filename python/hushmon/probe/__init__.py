"""``hushmon probe``: a node type's roofline ceilings (memory bandwidth, peak
FLOP rate) measured by ``hushmon-probe`` and stored for the digest."""
