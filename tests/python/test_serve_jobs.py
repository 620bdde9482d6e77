"""``hushmon serve``'s job history through real HTTP against the running
server: a store with jobs of two users (synthetic samples, their records),
per-user tokens, a trusted proxy's ``X-Remote-User`` (TCP and unix
socket), admins; a job's report built on demand; ``hushmon compare`` in
the page; the jobs page, a search and a comparison in headless Chromium
(screenshots kept under ``$HUSHMON_SCREENSHOTS`` when set)."""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from hushmon.history.records import JobRecord, record_job, words
from hushmon.store.synthetic import START_NS, Scenario, synthetic_store

HUSHMON = [sys.executable, "-m", "hushmon.cli"]
ADMIN_TOKEN = "operator-token-0123456789abcdef"
PROXY_IP = "127.0.0.2"  # the "reverse proxy" connects from here
H = 3_600_000_000_000


@dataclass
class Served:
    port: int
    unix: Path
    data: Path
    tokens: dict[str, str]
    proc: subprocess.Popen[bytes]


def _store(data: Path) -> None:
    """Alice ran 11 (saturated network) and 12 (a slow node), Bob 21; all
    on 2 nodes for 40 s. Their records as hushmon run leaves them, with
    findings as their digests would give (the reports are built on demand)."""
    db = data / "hushmon.duckdb"
    specs = [
        ("11", "alice", "butterfly", Scenario(nodes=2, seconds=40, job="11", network="saturated")),
        (
            "12",
            "alice",
            "snake",
            Scenario(nodes=2, seconds=40, job="12", slow_node=1, start_ns=START_NS + H),
        ),
        ("21", "bob", "cg", Scenario(nodes=2, seconds=40, job="21", start_ns=START_NS + 2 * H)),
    ]
    findings = {
        "11": ["network_bandwidth:high"],
        "12": ["imbalance:high", "idle_cpu:medium"],
        "21": ["idle_cpu:medium"],
    }
    records = []
    for job, owner, name, sc in specs:
        synthetic_store(sc, data, db)
        f = findings[job]
        records.append(
            JobRecord(
                job=job,
                owner=owner,
                name=name,
                state="COMPLETED",
                exit_code=0,
                start_ns=sc.start_ns,
                end_ns=sc.start_ns + 39 * 10**9,
                nodes=2,
                findings=words(f),
                worst=f[0].split(":")[1],
                main_finding=f[0].split(":")[0],
                tags=words(x.split(":")[0] for x in f),
                source="test",
            )
        )
        shutil.rmtree(data / f"spool-{job}")
    record_job(db, records)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("serve-jobs")
    data = root / "data"
    data.mkdir(mode=0o700)
    _store(data)
    tokens_dir = root / "tokens"
    tokens = {}
    for user in ("alice", "bob", "carol"):
        out = subprocess.run(
            [*HUSHMON, "serve", "token", "--user", user, "--tokens-dir", str(tokens_dir)],
            capture_output=True,
            text=True,
            check=True,
        )
        tokens[user] = out.stdout.strip()
    token_file = root / "admin.token"
    token_file.write_text(ADMIN_TOKEN + "\n")
    token_file.chmod(0o600)
    # a short path: a unix socket's name has room for ~100 bytes
    unix = Path(tempfile.mkdtemp(prefix="hm-")) / "serve.sock"
    log = root / "serve.log"
    with log.open("w") as err:
        proc = subprocess.Popen(
            [
                *HUSHMON,
                "serve",
                "--data-dir",
                str(data),
                "--port",
                "0",
                "--token-file",
                str(token_file),
                "--tokens-dir",
                str(tokens_dir),
                "--trusted-proxy",
                PROXY_IP,
                "--unix",
                str(unix),
                "--admin",
                "carol",
            ],
            stderr=err,
        )
    try:
        deadline = time.monotonic() + 60
        while not (m := re.search(r"http://127\.0\.0\.1:(\d+)/jobs", log.read_text())):
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        yield Served(int(m.group(1)), unix, data, tokens, proc)
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) == 0
        assert "Traceback" not in log.read_text(), log.read_text()
        shutil.rmtree(unix.parent, ignore_errors=True)


def get(
    s: Served,
    path: str,
    token: str = "",
    headers: dict[str, str] | None = None,
    source: str = "127.0.0.1",
) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=120, source_address=(source, 0))
    h = dict(headers or {})
    if token:
        h["Authorization"] = f"Bearer {token}"
    conn.request("GET", path, headers=h)
    r = conn.getresponse()
    body = r.read()
    conn.close()
    return r.status, body


def jobs_of(
    s: Served,
    token: str = "",
    headers: dict[str, str] | None = None,
    source: str = "127.0.0.1",
    query: str = "",
) -> list[str]:
    status, body = get(s, "/jobs.json" + query, token, headers, source)
    assert status == 200, body
    return [j["job"] for j in json.loads(body)["jobs"]]


def test_each_user_sees_only_their_jobs_and_admins_see_all(served: Served) -> None:
    t = served.tokens
    assert jobs_of(served, t["alice"]) == ["12", "11"]
    assert jobs_of(served, t["bob"]) == ["21"]
    assert jobs_of(served, ADMIN_TOKEN) == ["21", "12", "11"]  # the operator's token
    assert jobs_of(served, t["carol"]) == ["21", "12", "11"]  # --admin carol
    # a user asking for another's jobs by name gets none of them
    assert jobs_of(served, t["bob"], query="?user=alice") == ["21"]
    _, body = get(served, "/whoami", t["bob"])
    assert json.loads(body) == {"user": "bob", "admin": False, "how": "user-token"}


def test_another_users_job_is_not_found_as_a_missing_one(served: Served) -> None:
    bob = served.tokens["bob"]
    for path in ("/job/11", "/job/11.json", "/compare.json?job=21&job=11"):
        status, body = get(served, path, bob)
        missing, body_missing = get(served, path.replace("11", "99"), bob)
        assert status == missing == 404, body
        same = body.replace(b"'11'", b"'99'").replace(b"&#x27;11&#x27;", b"&#x27;99&#x27;")
        assert same == body_missing  # nothing tells them apart
        assert b"alice" not in body and b"butterfly" not in body


def test_proxy_user_header_is_believed_only_from_the_proxy(served: Served) -> None:
    alice = {"X-Remote-User": "alice"}
    assert jobs_of(served, headers=alice, source=PROXY_IP) == ["12", "11"]
    assert jobs_of(served, headers={"X-Remote-User": "carol"}, source=PROXY_IP) == [
        "21",
        "12",
        "11",
    ]
    # from anyone else the header is nothing: no token, no entry; with bob's, bob's jobs
    status, _ = get(served, "/jobs.json", headers=alice)
    assert status == 401
    assert jobs_of(served, served.tokens["bob"], headers=alice) == ["21"]


def test_proxy_on_the_unix_socket(served: Served) -> None:
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(60)
        sock.connect(str(served.unix))
        sock.sendall(b"GET /jobs.json HTTP/1.1\r\nHost: localhost\r\nX-Remote-User: bob\r\n\r\n")
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    assert [j["job"] for j in json.loads(body)["jobs"]] == ["21"]


def test_search_sort_and_pages_over_http(served: Served) -> None:
    admin = ADMIN_TOKEN
    assert jobs_of(served, admin, query="?user=alice&name=SNA") == ["12"]
    assert jobs_of(served, admin, query="?factor=idle_cpu") == ["21", "12"]
    assert jobs_of(served, admin, query="?factor=idle_cpu&severity=high") == []
    assert jobs_of(served, admin, query="?tag=network_bandwidth") == ["11"]
    since = "2024-11-22T11:00:00"  # START_NS is 2024-11-22 10:06:40 UTC
    assert jobs_of(served, admin, query=f"?since={since}") == ["21", "12"]
    assert jobs_of(served, admin, query="?sort=job&order=asc") == ["11", "12", "21"]
    status, body = get(served, "/jobs.json?per_page=2&page=2", admin)
    page = json.loads(body)
    assert (page["total"], page["pages"], [j["job"] for j in page["jobs"]]) == (3, 2, ["11"])
    status, body = get(served, "/jobs.json?sort=nope", admin)
    assert status == 400 and "sort must be one of" in json.loads(body)["error"]


def _threads(pid: int) -> int:
    m = re.search(r"^Threads:\s+(\d+)", Path(f"/proc/{pid}/status").read_text(), re.M)
    assert m is not None
    return int(m.group(1))


def test_many_users_at_once_add_no_threads(served: Served) -> None:
    """The history answers one request at a time in one thread of its own:
    a burst of users leaves no idle pool behind (each thread would hold a
    glibc heap arena of its own)."""
    jobs_of(served, ADMIN_TOKEN)  # the history's thread has started
    before = _threads(served.proc.pid)
    with ThreadPoolExecutor(12) as pool:
        answers = list(pool.map(lambda _: jobs_of(served, ADMIN_TOKEN), range(24)))
    assert all(a == ["21", "12", "11"] for a in answers)
    assert _threads(served.proc.pid) == before


def test_a_token_file_holds_only_its_hash(tmp_path: Path) -> None:
    out = subprocess.run(
        [*HUSHMON, "serve", "token", "--user", "dave", "--tokens-dir", str(tmp_path / "t")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert len(out.stdout.strip()) >= 40 and (tmp_path / "t" / "dave").stat().st_mode & 0o077 == 0
    assert out.stdout.strip() not in (tmp_path / "t" / "dave").read_text()  # only its hash


def test_job_report_is_built_on_demand_and_compare_runs(served: Served) -> None:
    alice = served.tokens["alice"]
    assert not (served.data / "reports" / "11" / "digest.json").exists()
    status, body = get(served, "/job/11", alice)
    assert status == 200 and b"<svg" in body and b"/jobs" in body
    assert (served.data / "reports" / "11" / "digest.json").exists()
    status, body = get(served, "/job/11.json", alice)
    doc = json.loads(body)
    assert doc["record"]["owner"] == "alice" and doc["digest"]["job"] == "11"
    status, body = get(served, "/compare.json?job=11&job=12", alice)
    assert status == 200, body
    cmp = json.loads(body)
    assert cmp["mode"] == "side_by_side" and {r["job"] for r in cmp["runs"]} == {"11", "12"}
    status, _ = get(served, "/compare.json?job=11", alice)
    assert status == 400


def _chromium(args: list[str]) -> subprocess.CompletedProcess[str]:
    from hushmon.report.screenshot import _FLAGS, chromium_path

    browser = chromium_path()
    assert browser, "chromium missing: scripts/install-deps.sh"
    with tempfile.TemporaryDirectory(prefix="hushmon-chromium-") as profile:
        return subprocess.run(
            [browser, *_FLAGS, f"--user-data-dir={profile}", *args],
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )


def test_pages_in_headless_chromium(served: Served, tmp_path: Path) -> None:
    """The jobs page, a search and a comparison as a user's browser gets
    them: the token in the address once (a cookie from then on)."""
    keep = Path(os.environ.get("HUSHMON_SCREENSHOTS", tmp_path))
    keep.mkdir(parents=True, exist_ok=True)
    base = f"http://127.0.0.1:{served.port}"
    alice = served.tokens["alice"]
    pages = {
        "jobs": f"/jobs?token={ADMIN_TOKEN}",
        "search": f"/jobs?token={alice}&factor=imbalance&severity=medium",
        "compare": f"/compare?token={alice}&job=11&job=12",
    }
    for name, path in pages.items():
        dom = _chromium(["--dump-dom", base + path])
        assert dom.returncode == 0, dom.stderr[-2000:]
        if name == "jobs":
            assert re.findall(r"<tr data-job=\"(\d+)\"", dom.stdout) == ["21", "12", "11"]
            assert "every user's jobs (admin)" in dom.stdout
        elif name == "search":
            assert re.findall(r"<tr data-job=\"(\d+)\"", dom.stdout) == ["12"]
            assert "your jobs only" in dom.stdout
        else:
            assert "hushmon compare" in dom.stdout and "side by side" in dom.stdout
            assert "job 11" in dom.stdout and "job 12" in dom.stdout
        png = keep / f"serve-{name}.png"
        size = "1250,900" if name != "compare" else "1250,1500"
        shot = _chromium([f"--window-size={size}", f"--screenshot={png}", base + path])
        assert shot.returncode == 0 and png.stat().st_size > 10_000, shot.stderr[-2000:]


def test_a_records_report_folder_stays_inside_reports(served: Served) -> None:
    """A record is data: its report folder ``../evil`` may not make the
    server read a file outside the data folder's reports/. (Last in the
    file: its job 66 would show in the admin's lists above.)"""
    evil = served.data / "evil"
    evil.mkdir(exist_ok=True)
    (evil / "report.html").write_text("<html><body>LEAKED</body></html>")
    (evil / "digest.json").write_text('{"job": "LEAKED"}')
    record_job(served.data / "hushmon.duckdb",
               [JobRecord(job="66", owner="mallory", report="../evil", source="test")])  # fmt: skip
    for path in ("/job/66", "/job/66.json"):
        status, body = get(served, path, ADMIN_TOKEN)
        assert b"LEAKED" not in body and status == 400, (status, body[:300])
