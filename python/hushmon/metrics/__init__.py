"""``hushmon metrics``: hushmon's job summaries and its own cost as a Prometheus endpoint."""
