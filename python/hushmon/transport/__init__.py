"""Cluster mode's online transport on NATS: docs/transport.md."""
