"""hushmon: HPC performance monitoring that measures its own impact."""

__version__ = "0.1.0"
