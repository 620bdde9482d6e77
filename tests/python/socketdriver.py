"""A client of the agent's two sockets that a test runs as another uid
(setpriv): it reads one command a line on stdin and answers one JSON line on
stdout, so a test can hold connections open while it acts as root. It uses
the standard library only, and is passed to the interpreter with ``-c``
(the checkout need not be readable by the test's uids).

Commands (``I``: the index of an app connection, in the order opened):

- ``ctl_hold N LINE``: N control connections, each sending LINE without its
  newline (a half-sent request); ``{"held": N}``
- ``ctl_answers``: the first line each held connection got before it
  closed (10 s at most); ``{"answers": [...]}``
- ``ctl LINE``: one request on a new connection; ``{"answer": "..."}``
- ``ctl_many N LINE``: N requests LINE on one connection; ``{"answers": [...]}``
- ``app_connect N``: N more app connections; ``{"connected": N}``
- ``metrics I CLAIM NAME,NAME,...``: one message of one metric record per name
- ``hello I CLAIM``: this connection takes control messages
- ``ack I CLAIM ID``: acknowledges control message ID
- ``recv_ctl I``: the next control message (5 s at most); ``{"id": N, "text": "..."}``
- ``orphan CLAIM``: a child connects and sends a metric "before", forks a
  grandchild that keeps the connection, and exits; the grandchild sends
  "after" and waits (5 s at most) for the agent to close it;
  ``{"closed": true|false}``
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import socket
import struct
import sys
import time

MAGIC, VERSION, CTL_MAGIC = 0x31414D48, 2, 0x31434D48
METRIC, CONTROL = 1, 4


def message(claim: str, records: list[tuple[int, str, float]]) -> bytes:
    """A libhushmon message (c/libhushmon/hm_app_wire.h): header + records."""
    head = struct.pack("<IHHiiQ64s", MAGIC, VERSION, len(records), 0, 1, 0, claim.encode())
    body = b"".join(
        struct.pack("<BBHIddd", kind, len(name), 0, 1, value, value, value) + name.encode()
        for kind, name, value in records
    )
    return head + body


def app_connection(path: str) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect(path)
    return s


def first_line(s: socket.socket, timeout_s: float) -> str:
    s.settimeout(timeout_s)
    data = b""
    try:
        while b"\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    except OSError:
        pass
    return data.decode(errors="replace").split("\n")[0]


def wait_closed(s: socket.socket, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        ready, _, _ = select.select([s], [], [], 0.05)
        if not ready:
            continue
        try:
            if s.recv(4096, socket.MSG_DONTWAIT) == b"":
                return True
        except BlockingIOError:
            continue
        except OSError:
            return True
    return False


def orphan(app_path: str, claim: str) -> bool:
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read_end)
        s = app_connection(app_path)
        s.send(message(claim, [(METRIC, "before", 1.0)]))
        if os.fork() == 0:  # the grandchild keeps the connection
            time.sleep(0.3)
            with contextlib.suppress(OSError):
                s.send(message(claim, [(METRIC, "after", 1.0)]))
            os.write(write_end, b"1" if wait_closed(s, 5.0) else b"0")
            os._exit(0)
        os._exit(0)  # the process that connected ends here
    os.close(write_end)
    os.waitpid(child, 0)
    with os.fdopen(read_end, "rb") as r:
        return r.read(1) == b"1"


def main(ctl_path: str, app_path: str) -> None:
    held: list[socket.socket] = []
    apps: list[socket.socket] = []
    for line in sys.stdin:
        cmd, _, rest = line.rstrip("\n").partition(" ")
        reply: dict[str, object]
        if cmd == "ctl_hold":
            n, _, text = rest.partition(" ")
            for _ in range(int(n)):
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.connect(ctl_path)
                # a refused connection may be closed already; its answer is there to read
                with contextlib.suppress(OSError):
                    s.sendall(text.encode())
                held.append(s)
            reply = {"held": int(n)}
        elif cmd == "ctl_answers":
            reply = {"answers": [first_line(s, 10.0) for s in held]}
            for s in held:
                s.close()
            held = []
        elif cmd in ("ctl", "ctl_many"):
            n, text = (
                (1, rest) if cmd == "ctl" else (int(rest.split(" ", 1)[0]), rest.split(" ", 1)[1])
            )
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(5)
                s.connect(ctl_path)
                # a refused connection may be closed already; its answer is there to read
                with contextlib.suppress(OSError):
                    s.sendall((text + "\n").encode() * n)
                data = b""
                while data.count(b"\n") < n:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    data += chunk
            answers = data.decode().splitlines()
            reply = (
                {"answer": answers[0] if answers else ""} if cmd == "ctl" else {"answers": answers}
            )
        elif cmd == "app_connect":
            for _ in range(int(rest)):
                apps.append(app_connection(app_path))
            reply = {"connected": int(rest)}
        elif cmd == "metrics":
            i, claim, names = rest.split(" ")
            records = [(METRIC, name, 1.0) for name in names.split(",")]
            apps[int(i)].send(message(claim, records))
            reply = {"sent": len(records)}
        elif cmd in ("hello", "ack"):
            parts = rest.split(" ")
            ident = "0" if cmd == "hello" else parts[2]
            apps[int(parts[0])].send(message(parts[1], [(CONTROL, ident, 0.0)]))
            reply = {"sent": 1}
        elif cmd == "recv_ctl":
            s = apps[int(rest)]
            s.settimeout(5)
            data = s.recv(4096)
            magic, _, text_len, ident = struct.unpack_from("<IHHI", data)
            reply = {
                "id": ident,
                "text": data[12 : 12 + text_len].decode(),
                "ok": magic == CTL_MAGIC,
            }
        elif cmd == "orphan":
            reply = {"closed": orphan(app_path, rest)}
        else:
            reply = {"error": f"unknown command {cmd}"}
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
