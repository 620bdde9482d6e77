"""A cluster on one machine: network namespaces, shaped links, cgroups, agents, Slurm."""
