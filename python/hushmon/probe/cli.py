"""``hushmon probe``: measure this node type's roofline ceilings once and store
them (``--show`` lists the stored ones)."""

from __future__ import annotations

import argparse
from typing import Any

from hushmon import jsonio
from hushmon.datadir import add_data_dir_options, data_dir
from hushmon.errors import HushmonError
from hushmon.hostlist import expand_hostlist


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "probe",
        help="measure a node type's roofline ceilings (memory GB/s, peak GFLOP/s) and store them",
        description="Run hushmon-probe (a STREAM-like triad and a peak-FLOP kernel on every "
        "CPU this process may use) and store the ceilings for the node type (CPU model + "
        "online CPUs) in <data>/probe/ceilings.json, where the digest's roofline factor reads "
        "them. A node type already stored is not measured again without --force. On a "
        "cluster, run it once per node type, on a node of that type (--launch) and name the "
        "hosts of the type (--hosts).",
    )
    p.add_argument("--show", action="store_true", help="list the stored ceilings; measure nothing")
    p.add_argument("--seconds", type=float, default=2.0, help="time for each kernel (default 2)")
    p.add_argument(
        "--array-mib",
        type=int,
        metavar="MIB",
        help="each triad array (default: 4 x the last-level cache, at most 1/8 of free memory)",
    )
    p.add_argument("--threads", type=int, metavar="N", help="run on N CPUs (default: all allowed)")
    p.add_argument(
        "--hosts",
        metavar="HOSTLIST",
        help="the hosts of this node type, a Slurm host list such as node[01-64] "
        "(default: the host the probe ran on); added to those already stored",
    )
    p.add_argument(
        "--launch",
        metavar="CMD",
        help="run the probe through this command, e.g. 'srun -N1 -p gpu' (default: here)",
    )
    p.add_argument("--force", action="store_true", help="measure again a node type already stored")
    add_data_dir_options(p, with_db=False)
    p.add_argument("--json", metavar="FILE|-", help="the stored records as JSON ('-' = stdout)")
    p.set_defaults(func=run)


def _check(args: argparse.Namespace) -> None:
    if not 0.01 <= args.seconds <= 600:
        raise HushmonError(f"--seconds {args.seconds:g}: outside [0.01, 600]")
    if args.array_mib is not None and args.array_mib < 1:
        raise HushmonError(f"--array-mib {args.array_mib}: must be 1 or more")
    if args.threads is not None and args.threads < 1:
        raise HushmonError(f"--threads {args.threads}: must be 1 or more")
    if args.hosts is not None and not expand_hostlist(args.hosts):
        raise HushmonError(f"--hosts {args.hosts!r}: names no host")


def _line(r: Any) -> str:
    return (
        f"{r.key}: {r.gb_per_s:.1f} GB/s, {r.gflop_per_s:.1f} GFLOP/s ({r.isa}), ridge "
        f"{r.ridge_flop_per_byte:.2f} FLOP/byte; {r.threads} threads on {r.probed_host} at "
        f"{r.measured_at} (load {r.load_avg}); hosts {', '.join(r.hosts)}"
        + ("" if r.beyond_llc else "; arrays under 4 x the last-level cache: cache bandwidth")
    )


def run(args: argparse.Namespace) -> int:
    from hushmon.probe.ceilings import ceilings_path, load_ceilings, store_record
    from hushmon.probe.runprobe import probe_command, run_probe

    _check(args)
    path = ceilings_path(data_dir(args.data_dir).root)
    human = jsonio.human_stream(args.json)
    if args.show:
        records = load_ceilings(path)
        if not records:
            print(f"no ceilings stored in {path} (run hushmon probe)", file=human)
        for r in records:
            print(_line(r), file=human)
        jsonio.emit(args.json, {"file": str(path), "records": [r.to_json() for r in records]})
        return 0
    cmd = probe_command(args.launch, args.seconds, args.array_mib, args.threads)
    # the node type is known only once the probe has run (it may run elsewhere)
    measured = run_probe(cmd, timeout_s=60 + 4 * args.seconds + 120)
    if args.hosts:
        measured.hosts = [args.hosts]
    stored = {r.key: r for r in load_ceilings(path)}
    old = stored.get(measured.key)
    if old is not None and not args.force:
        old.hosts = sorted(set(old.hosts) | set(measured.hosts))
        records = store_record(path, old)
        print(f"{measured.key} was stored already (--force measures it again); hosts now "
              f"{', '.join(old.hosts)}", file=human)  # fmt: skip
    else:
        records = store_record(path, measured)
        print(_line(measured), file=human)
    print(f"stored in {path}", file=human)
    jsonio.emit(args.json, {"file": str(path), "records": [r.to_json() for r in records]})
    return 0
