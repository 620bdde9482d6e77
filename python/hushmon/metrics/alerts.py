"""The findings so far: the live alerts ``hushmon alert`` publishes.

``hushmon alert`` (python/hushmon/tags/alert.py) runs the live tag rules on
each job summary and publishes ``{"job", "rule", "tag", "state": "firing" |
"cleared", ...}`` on ``hm.alert.<job>``. A firing alert is a series
(``hushmon_job_alert{jobid, tag, rule}`` = 1) until its clearing message
comes or its job leaves the answer. A message that is not an alert is
counted and dropped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from hushmon.transport import wire

ALERT_SUBJECTS = "hm.alert.>"
# A job's alerts are bounded by the rules; this bounds what a publisher
# that is not hushmon alert could make us hold.
MAX_ALERTS = 10_000


@dataclass
class Alerts:
    firing: dict[tuple[str, str], str] = field(default_factory=dict)  # (job, rule) -> tag
    messages: int = 0
    bad: int = 0
    last_error: str = ""

    def add(self, payload: bytes) -> str:
        self.messages += 1
        why = self._take(payload)
        if why:
            self.bad += 1
            self.last_error = why
        return why

    def _take(self, payload: bytes) -> str:
        try:
            doc = json.loads(payload)
        except (ValueError, UnicodeDecodeError):
            return "alert is not JSON"
        if not isinstance(doc, dict):
            return "alert is not an object"
        job, rule, tag, state = (doc.get(k) for k in ("job", "rule", "tag", "state"))
        why = wire.bad_job(job)
        if why or not isinstance(job, str):
            return why
        if not (isinstance(rule, str) and isinstance(tag, str)):
            return "alert rule or tag is not a string"
        if not (0 < len(rule) <= wire.NAME_MAX and 0 < len(tag) <= wire.NAME_MAX):
            return f"alert rule or tag is empty or longer than {wire.NAME_MAX}"
        if state == "cleared":
            self.firing.pop((job, rule), None)
        elif state == "firing":
            if len(self.firing) >= MAX_ALERTS and (job, rule) not in self.firing:
                return f"more than {MAX_ALERTS} alerts firing"
            self.firing[(job, rule)] = tag
        else:
            return f"alert state {str(state)[:20]!r} is neither firing nor cleared"
        return ""

    def forget_jobs_but(self, jobs: set[str]) -> None:
        for key in [k for k in self.firing if k[0] not in jobs]:
            del self.firing[key]
