"""Live view of the reduced stream: ``hushmon top`` and ``hushmon serve``."""
