"""hushmon-agent's bmc source end to end: the real agent against a Redfish
BMC made here (Python's HTTPS server with a CA made in the test, Basic
authentication, the Power resource of an older BMC: EnvironmentMetrics
404) and against a fake ``ipmitool`` on PATH; the published node power and
energy; a BMC that stops answering does not hold up the samples (their
timestamps keep the period) and its last reading is not published once it
is 3 intervals old. The parsers' cases are in tests/c/test_agent_bmc.c."""

from __future__ import annotations

import base64
import itertools
import json
import os
import signal
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from hushmon.transport.natstls import TlsFiles, make_ca, write_identity
from test_agent_once import FIXTURES, Line, parse_lines

USER, PASSWORD = "monitor", "s3cret:with-colon"
# An iLO-shaped Power resource, served as it is: PowerControl[0] at 245.5 W
POWER_JSON = json.loads((FIXTURES / "bmc" / "redfish-power-ilo.json").read_text())
POWER_W = 245.5
PERIOD_MS = 100
INTERVAL_MS = 1000


class FakeBmc:
    """A Redfish service on 127.0.0.1 over HTTPS: the Power resource of
    chassis 1 (``POWER_JSON``); after ``answers`` requests it hangs (holds
    the connection, never answers) until closed."""

    def __init__(self, tls: TlsFiles, answers: int = 10**9) -> None:
        self.requests: list[tuple[str, str]] = []
        self.answers = answers
        self.release = threading.Event()
        bmc = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                auth = self.headers.get("Authorization", "")
                bmc.requests.append((self.path, auth))
                if len(bmc.requests) > bmc.answers:
                    bmc.release.wait(30)
                    return
                good = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
                if auth != good:
                    self._send(401, {"error": "unauthorized"})
                elif self.path == "/redfish/v1/Chassis/1/Power":
                    self._send(200, POWER_JSON)
                else:
                    self._send(404, {"error": {"code": "Base.1.8.ResourceMissingAtURI"}})

            def _send(self, status: int, body: dict[str, object]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        assert tls.cert_file is not None and tls.key_file is not None
        ctx.load_cert_chain(tls.cert_file, tls.key_file)
        self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    folder = tmp_path_factory.mktemp("bmc-tls")
    make_ca(folder, "test BMC CA")
    return write_identity(folder, "bmc", "127.0.0.1", server=True)


@contextmanager
def fake_bmc(tls: TlsFiles, answers: int = 10**9) -> Iterator[FakeBmc]:
    bmc = FakeBmc(tls, answers)
    try:
        yield bmc
    finally:
        bmc.close()


def credentials(tmp: Path, mode: int = 0o600) -> Path:
    path = tmp / "bmc.cred"
    path.write_text(f"{USER}:{PASSWORD}\n")
    path.chmod(mode)
    return path


class Batches:
    """A running agent's stdout, batch by batch (lines grouped by timestamp)."""

    def __init__(self, bin_dir: Path, args: list[str], env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [
                str(bin_dir / "hushmon-agent"),
                "--sink",
                "stdout",
                "--socket",
                "",
                "--host",
                "n1",
                "--period-ms",
                str(PERIOD_MS),
                "--sources",
                "load,bmc",
                *args,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **(env or {})},
        )
        self.lines: list[Line] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for text in self.proc.stdout:
            self.lines += parse_lines(text.rstrip("\n"))

    def bmc(self) -> list[Line]:
        return [x for x in list(self.lines) if x.m == "bmc"]

    def wait(self, cond: str, check: object, timeout_s: float = 20) -> None:
        deadline = time.monotonic() + timeout_s
        while not check():  # type: ignore[operator]
            assert self.proc.poll() is None, f"agent ended: {self.stop()}"
            assert time.monotonic() < deadline, f"{cond} not seen in {timeout_s} s: {self.stop()}"
            time.sleep(0.05)

    def stop(self) -> str:
        """Stops the agent; its stderr."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            _, err = self.proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
            raise AssertionError(f"the agent did not stop in 15 s: {err}") from None
        self.reader.join(5)
        assert self.proc.returncode == 0, f"the agent ended with {self.proc.returncode}: {err}"
        return err


def redfish_args(url: str, cred: Path, ca: Path, timeout_ms: int = INTERVAL_MS) -> list[str]:
    return [
        "--bmc",
        "redfish",
        "--bmc-url",
        url,
        "--bmc-credentials-file",
        str(cred),
        "--bmc-ca-file",
        str(ca),
        "--bmc-interval-ms",
        str(INTERVAL_MS),
        "--bmc-timeout-ms",
        str(timeout_ms),
    ]


def longest_gap_s(lines: list[Line]) -> float:
    """The longest time between two consecutive batches' timestamps."""
    ts = sorted({x.ts for x in lines if x.m == "load"})
    return max(b - a for a, b in itertools.pairwise(ts)) / 1e9


def test_redfish_power_and_energy(bin_dir: Path, tls: TlsFiles, tmp_path: Path) -> None:
    with fake_bmc(tls) as bmc:
        run = Batches(bin_dir, redfish_args(bmc.url, credentials(tmp_path), tls.ca_file))
        # three readings: energy integrated over two intervals
        run.wait(
            "a third reading", lambda: len({x.fields["energy_total_j"] for x in run.bmc()}) >= 3
        )
        err = run.stop()
    lines = run.bmc()
    assert {x.tags["backend"] for x in lines} == {"redfish"}
    assert {x.fields["power_w"] for x in lines} == {POWER_W}
    energies = sorted({x.fields["energy_total_j"] for x in lines})
    assert energies[0] == 0  # one reading: nothing to integrate yet
    in_order = [x.fields["energy_total_j"] for x in sorted(lines, key=lambda x: x.ts)]
    assert in_order == sorted(in_order)  # a counter: never down
    steps = [b - a for a, b in itertools.pairwise(energies)]
    # 245.5 W x the time between two readings: one interval (1 s) give or take
    # what a loaded machine adds to one request more than to the other
    assert all(POWER_W * 0.5 <= s <= POWER_W * 3 for s in steps), steps
    assert all(0 <= x.fields["age_s"] <= 3 * INTERVAL_MS / 1000 for x in lines)
    # EnvironmentMetrics asked first, the Power resource kept once it answered
    paths = [p for p, _ in bmc.requests]
    assert paths[:2] == ["/redfish/v1/Chassis/1/EnvironmentMetrics", "/redfish/v1/Chassis/1/Power"]
    assert set(paths[2:]) == {"/redfish/v1/Chassis/1/Power"}
    assert "PowerControl[0].PowerConsumedWatts" in err


def test_a_hung_bmc_never_delays_a_sample(bin_dir: Path, tls: TlsFiles, tmp_path: Path) -> None:
    """Two answers, then a BMC that holds every request: each read waits its
    whole 1 s timeout on the poller thread while the agent samples every
    100 ms. A read on (or a lock held across it from) the sampling path
    leaves a gap of about the timeout between two batches; a loaded machine
    may delay a wake-up, so the bound is half of it. Then the BMC answers
    again: the lines come back, and the silent stretch (over 3 intervals)
    adds no energy."""
    with fake_bmc(tls, answers=3) as bmc:  # EnvironmentMetrics 404, Power, Power
        run = Batches(bin_dir, redfish_args(bmc.url, credentials(tmp_path), tls.ca_file))
        run.wait("two readings", lambda: len({x.fields["energy_total_j"] for x in run.bmc()}) >= 2)
        hung_at = time.monotonic()
        run.wait("two hung requests", lambda: len(bmc.requests) >= 5, timeout_s=20)
        # past 3 intervals of no answer (and a margin for a loaded machine)
        while time.monotonic() < hung_at + 3 * INTERVAL_MS / 1000 + 2:
            time.sleep(0.1)
        stale_ts = max(x.ts for x in list(run.lines))
        bmc.answers = 10**9
        bmc.release.set()
        run.wait(
            "two readings after the BMC came back",
            lambda: len({x.fields["energy_total_j"] for x in run.bmc() if x.ts > stale_ts}) >= 2,
        )
        err = run.stop()
    lines = run.lines
    assert longest_gap_s(lines) <= 0.5, "samples waited for the BMC"
    hung = [x for x in lines if x.ts <= stale_ts]
    last_bmc = max(x.ts for x in hung if x.m == "bmc")
    # the reading went stale: lines stopped 3 intervals after it (plus a period or two)
    assert (stale_ts - last_bmc) / 1e9 >= 1.5, (stale_ts - last_bmc) / 1e9
    assert max(x.fields["age_s"] for x in lines if x.m == "bmc") <= 3 * INTERVAL_MS / 1000 + 0.3
    assert err.count("no node power lines until the BMC answers") == 1, err
    assert "Timeout was reached" in err or "timed out" in err, err
    energy_before = max(x.fields["energy_total_j"] for x in hung if x.m == "bmc")
    back = sorted((x for x in run.bmc() if x.ts > stale_ts), key=lambda x: x.ts)
    assert back[0].fields["energy_total_j"] == energy_before  # the gap is not guessed
    assert back[-1].fields["energy_total_j"] > energy_before
    assert "the BMC answers again" in err, err


def test_a_bmc_that_never_answers_at_all(bin_dir: Path, tls: TlsFiles, tmp_path: Path) -> None:
    """A port that takes connections (the kernel's backlog) but never
    accepts: the TLS handshake never starts. No line, one warning, and the
    samples keep their period."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        url = f"https://127.0.0.1:{silent.getsockname()[1]}"
        args = redfish_args(url, credentials(tmp_path), tls.ca_file)
        run = Batches(bin_dir, args)
        run.wait("3 s of samples", lambda: len({x.ts for x in run.lines}) >= 30)
        err = run.stop()
    assert run.bmc() == []
    assert longest_gap_s(run.lines) <= 0.5, "samples waited for the BMC"
    assert err.count("Timeout was reached") == 1, err


def test_redfish_refuses_a_wrong_ca_and_open_credentials(
    bin_dir: Path, tls: TlsFiles, tmp_path: Path
) -> None:
    other = tmp_path / "other-ca"
    make_ca(other, "not the BMC's CA")
    with fake_bmc(tls) as bmc:
        run = Batches(bin_dir, redfish_args(bmc.url, credentials(tmp_path), other / "ca.pem"))
        run.wait("the TLS warning", lambda: len(run.lines) >= 8)
        time.sleep(0.5)
        err = run.stop()
        assert run.bmc() == [] and bmc.requests == []  # no request got past the handshake
        assert "certificate" in err.lower(), err
        open_cred = credentials(tmp_path, 0o644)
        run = Batches(bin_dir, redfish_args(bmc.url, open_cred, tls.ca_file))
        run.wait("a few samples", lambda: len(run.lines) >= 4)
        err = run.stop()
    assert run.bmc() == [] and bmc.requests == []
    assert err.count("mode 0644") == 1 and "chmod 600" in err, err


def fake_ipmitool(folder: Path, body: str) -> Path:
    folder.mkdir(exist_ok=True)
    tool = folder / "ipmitool"
    tool.write_text(f"#!/bin/sh\n{body}\n")
    tool.chmod(0o755)
    return folder


def dcmi_args(timeout_ms: int = 500) -> list[str]:
    return [
        "--bmc",
        "dcmi",
        "--bmc-interval-ms",
        str(INTERVAL_MS),
        "--bmc-timeout-ms",
        str(timeout_ms),
    ]


def test_dcmi_through_ipmitool_on_path(bin_dir: Path, tmp_path: Path) -> None:
    reading = FIXTURES / "bmc" / "dcmi-reading.txt"
    tools = fake_ipmitool(
        tmp_path / "bin", f'[ "$*" = "dcmi power reading" ] || exit 9\ncat "{reading}"'
    )
    env = {"PATH": f"{tools}:{os.environ['PATH']}"}
    run = Batches(bin_dir, dcmi_args(), env)
    run.wait("two readings", lambda: len({x.fields["energy_total_j"] for x in run.bmc()}) >= 2)
    err = run.stop()
    lines = run.bmc()
    assert {x.tags["backend"] for x in lines} == {"dcmi"}
    assert {x.fields["power_w"] for x in lines} == {220.0}
    step = sorted({x.fields["energy_total_j"] for x in lines})[1]
    assert 220 * 0.5 <= step <= 220 * 3, step
    assert "bmc_power" not in err, err


def test_dcmi_not_available_and_hung_ipmitool(bin_dir: Path, tmp_path: Path) -> None:
    refused = FIXTURES / "bmc" / "dcmi-not-available.txt"
    tools = fake_ipmitool(tmp_path / "refused", f'cat "{refused}"\nexit 1')
    run = Batches(bin_dir, dcmi_args(), {"PATH": f"{tools}:{os.environ['PATH']}"})
    run.wait("a few periods", lambda: len(run.lines) >= 10)
    err = run.stop()
    assert run.bmc() == []
    assert err.count("Invalid command (c1)") == 1, err  # once, not once per poll
    # A hung ipmitool (and the child it started) is killed at the timeout;
    # the samples do not wait for it.
    pids = tmp_path / "pids"
    tools = fake_ipmitool(tmp_path / "hung", f'sleep 60 &\necho $! >> "{pids}"\nwait')
    run = Batches(bin_dir, dcmi_args(timeout_ms=900), {"PATH": f"{tools}:{os.environ['PATH']}"})
    run.wait("three reads", lambda: pids.exists() and len(pids.read_text().split()) >= 3)
    err = run.stop()
    assert run.bmc() == []
    assert longest_gap_s(run.lines) <= 0.5, "samples waited for ipmitool"
    assert "no answer in 900 ms (killed)" in err, err
    for pid in map(int, pids.read_text().split()):
        deadline = time.monotonic() + 5
        while _alive(pid):
            assert time.monotonic() < deadline, f"ipmitool's child {pid} outlived its timeout"
            time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1][:1] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--bmc", "redfish"], "needs bmc.url https://"),
        (["--bmc", "redfish", "--bmc-url", "http://bmc"], "HTTPS only"),
        (["--bmc", "dcmi", "--bmc-timeout-ms", "20000"], "at most bmc.interval_ms"),
        (["--bmc", "ipmi"], "not one of none|redfish|dcmi"),
    ],
)
def test_bad_settings_are_one_line(bin_dir: Path, args: list[str], says: str) -> None:
    proc = subprocess.run(
        [str(bin_dir / "hushmon-agent"), "--once", "--sink", "stdout", "--socket", "", *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert proc.returncode != 0 and proc.stdout == ""
    assert len(proc.stderr.splitlines()) == 1 and says in proc.stderr, proc.stderr
