"""hushmon bench: run hushmon-bench under mpirun, check and report its results."""
