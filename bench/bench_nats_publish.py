"""What each piece of the nats sink's publish costs on this machine.

Starts a local nats-server with the streams of docs/transport.md (HM_RAW)
and runs build/bin/nats_publish_cost (bench/nats_publish_cost.c) against
it: a raw write() of a batch to the server's socket, natsConnection_Publish,
a natsMsg with the contract's headers with and without a reply (the
JetStream ack) read by an async or a sync subscription, messages destroyed
one by one or together, an ack on every 10th batch only. CPU microseconds
per batch of the whole process (libnats' threads too) and of the
publishing thread, the idle loop subtracted. The server is on this machine
(loopback), so the publisher's write also runs the server's TCP receive
path (see docs/transport.md "Agent sink cost").

    .venv/bin/python bench/bench_nats_publish.py [--iterations 200]
        [--interval-ms 50] [--batch-bytes 10240] [--variant NAME]

Not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from hushmon.errors import HushmonError
from hushmon.transport.natsserver import LocalNatsServer, NatsServerConfig, ensure_streams

ROOT = Path(__file__).resolve().parent.parent


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--interval-ms", type=int, default=50)
    ap.add_argument("--batch-bytes", type=int, default=10240)
    ap.add_argument("--variant", default="", help="one variant only (after the idle loop)")
    ap.add_argument("--binary", type=Path, default=ROOT / "build" / "bin" / "nats_publish_cost")
    args = ap.parse_args(argv)
    if not args.binary.exists():
        print(f"bench_nats_publish: {args.binary} not built (make)", file=sys.stderr)
        return 2
    try:
        with tempfile.TemporaryDirectory(prefix="hm-natspub-") as tmp:
            work = Path(tmp)
            with LocalNatsServer(NatsServerConfig(name="bench", store_dir=work / "js"), work) as s:
                ensure_streams(s.url)
                cmd = [str(args.binary), s.cfg.host, str(s.cfg.port), str(args.iterations),
                       str(args.interval_ms), str(args.batch_bytes)]  # fmt: skip
                if args.variant:
                    cmd.append(args.variant)
                print(f"nats-server {s.url} (loopback, same machine); {args.iterations} batches "
                      f"of {args.batch_bytes} bytes, one every {args.interval_ms} ms")  # fmt: skip
                sys.stdout.flush()
                return subprocess.run(cmd, check=False).returncode
    except HushmonError as exc:
        print(f"bench_nats_publish: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
