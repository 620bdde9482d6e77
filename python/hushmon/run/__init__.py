"""``hushmon run``: monitor one command (an mpirun line or anything else),
then store its data and build its digest."""
