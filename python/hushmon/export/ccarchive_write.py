"""``hushmon export --cc-archive``'s work: stored jobs -> ccarchive.py's documents -> files."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hushmon.errors import HushmonError
from hushmon.export.ccarchive import (
    ARCHIVE_VERSION,
    JobMeta,
    cluster_doc,
    job_documents,
    write_job,
)
from hushmon.history.records import TABLE as RECORDS
from hushmon.history.records import table_exists
from hushmon.tags.store import tags_of


@dataclass
class Written:
    folders: dict[str, Path] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    cluster_json: Path | None = None


def job_meta(store: Path, job: str) -> JobMeta:
    from hushmon.store.schema import open_store_readonly

    meta = JobMeta(job)
    con = open_store_readonly(store)
    try:
        if table_exists(con, RECORDS, ("owner", "name", "state", "findings", "tags")):
            row = con.execute(
                f"SELECT owner, name, state, findings, tags FROM {RECORDS} WHERE job = ? "
                "ORDER BY recorded_ns DESC LIMIT 1",
                [job],
            ).fetchone()
            if row:
                meta.user, meta.name, meta.state = (str(v or "") for v in row[:3])
                meta.findings = tuple(str(row[3] or "").split())
                meta.tags = tuple(str(row[4] or "").split())
        tagged = tags_of(con, job)
        if tagged:
            meta.tags = tuple(t.tag for t in tagged)
    finally:
        con.close()
    return meta


def version_file(root: Path) -> Path:
    return root / "version.txt"


def check_version(root: Path) -> None:
    """An archive of another version is refused before anything is written:
    cc-backend reads one version per archive (its archive-migration tool
    upgrades an older one)."""
    try:
        found = version_file(root).read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return
    except OSError as exc:
        raise HushmonError(f"cannot read {version_file(root)}: {exc.strerror}") from exc
    if found != ARCHIVE_VERSION:
        raise HushmonError(
            f"{root} is a version {found or '(empty)'} job archive; hushmon writes version "
            f"{ARCHIVE_VERSION} (cc-backend's tools/archive-migration upgrades it, or use "
            "another folder)"
        )


def export_jobs(
    store: Path,
    root: Path,
    jobs: list[str],
    cluster: str,
    subcluster: str,
    shared: str,
    progress: Callable[[str], None],
) -> Written:
    from hushmon.digest.jobdata import load_job  # numpy cube of the job: only when exporting

    check_version(root)
    out = Written()
    configs: dict[str, dict[str, Any]] = {}
    hosts: set[str] = set()
    cpus = 1
    root.mkdir(parents=True, exist_ok=True)
    for job in jobs:
        try:
            data = load_job(store, job)
            meta_doc, data_doc, cfg = job_documents(
                job_meta(store, job), data.hosts, data.times_ns, data.period_s, data.matrix,
                cluster, subcluster, shared,
            )  # fmt: skip
        except HushmonError as exc:
            out.skipped[job] = str(exc)
            progress(f"job {job}: not exported: {exc}")
            continue
        out.folders[job] = write_job(root, meta_doc, data_doc)
        progress(f"job {job}: {out.folders[job]}")
        configs.update(cfg)
        hosts.update(data.hosts)
        m = data.matrix("node_cgroup.cpus")
        if m is not None and np.isfinite(m).any():
            cpus = max(cpus, int(np.nanmax(m)))
    if out.folders and not version_file(root).exists():
        version_file(root).write_text(ARCHIVE_VERSION + "\n", encoding="utf-8")
    cluster_json = root / cluster / "cluster.json"
    if out.folders and not cluster_json.exists():
        # a cluster cc-backend already knows keeps its own description
        cluster_json.write_text(
            json.dumps(cluster_doc(cluster, subcluster, sorted(hosts), cpus, configs), indent=1),
            encoding="utf-8",
        )
        out.cluster_json = cluster_json
    return out
