"""A tiny iperf for the bed's tests: ``serve ADDR PORT`` receives until the
peer closes; ``send ADDR PORT SECONDS`` sends for that long and prints the
rate in bits/s."""

from __future__ import annotations

import socket
import sys
import time

CHUNK = b"\0" * (1 << 18)


def serve(addr: str, port: int) -> None:
    with socket.socket() as srv:
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind((addr, port))
        srv.listen(1)
        print("ready", flush=True)
        conn, _ = srv.accept()
        with conn:
            while conn.recv(1 << 20):
                pass


def send(addr: str, port: int, seconds: float) -> None:
    with socket.create_connection((addr, port), timeout=10) as conn:
        sent, start = 0, time.monotonic()
        while time.monotonic() - start < seconds:
            conn.sendall(CHUNK)
            sent += len(CHUNK)
        conn.shutdown(socket.SHUT_WR)
        conn.recv(1)  # the receiver closes once it has read everything
        print(sent * 8 / (time.monotonic() - start))


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(sys.argv[2], int(sys.argv[3]))
    else:
        send(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
