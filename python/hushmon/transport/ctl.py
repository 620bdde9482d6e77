"""The control channel's client: ``set`` and ``status`` requests to agents,
over NATS (many at once, scatter/gather with a timeout) or over the node's
local control socket. The agents' side: c/agent/agent_control.c; the
subjects: docs/transport.md, "Control channel".

An answer is one line, ``ok ... host=H period_ms=P sources=a,b ...`` or
``error [host=H] reason``; it is parsed into :class:`Answer`."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
from dataclasses import dataclass, field
from typing import Any

from hushmon.agentclient import exchange_line
from hushmon.errors import HushmonError

SUBJECT_HOST = "hm.ctl.host.{host}"
SUBJECT_ALL = "hm.ctl.all"
UID_HEADER = "Hm-Uid"
SET_KEYS = ("period", "sources", "apps")


@dataclass
class Answer:
    host: str
    ok: bool
    state: dict[str, str] = field(default_factory=dict)
    error: str = ""
    took_s: float = 0.0

    @property
    def not_here(self) -> bool:
        """The agent answered that the request's job does not run there."""
        return not self.ok and "does not run on" in self.error


@dataclass
class Outcome:
    request: str
    transport: str  # "nats" | "socket"
    timeout_s: float
    answers: list[Answer] = field(default_factory=list)
    no_answer: list[str] = field(default_factory=list)  # asked, nothing came
    no_agent: list[str] = field(default_factory=list)  # nobody listens (NATS no responders)
    broadcast: bool = False

    @property
    def applied(self) -> list[Answer]:
        return [a for a in self.answers if a.ok]

    @property
    def failed(self) -> list[Answer]:
        return [a for a in self.answers if not a.ok and not (self.broadcast and a.not_here)]

    def exit_code(self) -> int:
        bad = self.failed or self.no_answer or self.no_agent
        return 1 if bad or not self.applied else 0

    def to_json(self) -> dict[str, Any]:
        return {
            "request": self.request,
            "transport": self.transport,
            "timeout_s": self.timeout_s,
            "broadcast": self.broadcast,
            "answers": [a.__dict__ for a in self.answers],
            "no_answer": self.no_answer,
            "no_agent": self.no_agent,
            "ok": self.exit_code() == 0,
        }

    def lines(self) -> list[str]:
        out = []
        for a in sorted(self.answers, key=lambda a: a.host):
            if a.ok:
                keys = ("period_ms", "sources", "apps_muted", "jobs", "scope", "unopened")
                state = " ".join(f"{k}={a.state[k]}" for k in keys if k in a.state)
                out.append(f"{a.host}\tok\t{state}")
            elif not (self.broadcast and a.not_here):
                out.append(f"{a.host}\terror\t{a.error}")
        for host in self.no_agent:
            out.append(f"{host}\tno agent\tnobody listens on {SUBJECT_HOST.format(host=host)}")
        for host in self.no_answer:
            out.append(f"{host}\tno answer\twithin {self.timeout_s:g} s")
        skipped = [a.host for a in self.answers if self.broadcast and a.not_here]
        if skipped:
            out.append(f"({len(skipped)} agents answered that the job does not run there)")
        n = len(self.applied)
        asked = len(self.answers) + len(self.no_answer) + len(self.no_agent)
        out.append(
            f"{n} of {asked} agents {'applied' if self.request.startswith('set') else 'answered'}"
            + (f"; {len(self.no_answer)} did not answer" if self.no_answer else "")
            + (f"; {len(self.failed)} refused or failed" if self.failed else "")
        )
        return out


def build_request(verb: str, settings: list[str], job: str | None) -> str:
    """The request line; settings are checked for form here (values by the agent)."""
    if verb == "status":
        if settings:
            raise HushmonError("ctl status takes no settings")
        return "status"
    if not settings:
        raise HushmonError("ctl set: nothing to set (period=DUR, sources=+a,-b, apps=-NAME,+NAME)")
    seen = set()
    for s in settings:
        key, eq, value = s.partition("=")
        if key not in SET_KEYS or not eq or not value or " " in value:
            raise HushmonError(
                f"ctl set: '{s}' is not period=DUR, sources=+a,-b|a,b or apps=-NAME,+NAME"
            )
        if key in seen:
            raise HushmonError(f"ctl set: {key} given twice")
        seen.add(key)
    job_part = [f"job={job}"] if job else []
    return " ".join(["set", *job_part, *settings])


def parse_answer(line: str, host: str = "", took_s: float = 0.0) -> Answer:
    line = line.strip()
    words = line.split()
    if not words or words[0] not in ("ok", "error"):
        return Answer(host, False, error=f"unreadable answer {line[:120]!r}", took_s=took_s)
    if words[0] == "error":
        rest = words[1:]
        if rest and rest[0].startswith("host="):
            host = rest[0][5:]
            rest = rest[1:]
        return Answer(host, False, error=" ".join(rest), took_s=took_s)
    state = dict(w.split("=", 1) for w in words[1:] if "=" in w)
    return Answer(state.get("host", host), True, state=state, took_s=took_s)


def ask_socket(path: str, request: str, timeout_s: float) -> Outcome:
    """One request to the local agent's control socket."""
    out = Outcome(request, "socket", timeout_s)
    t0 = time.monotonic()
    try:
        data = exchange_line(path, request, timeout_s)
    except TimeoutError:
        out.no_answer.append(socket.gethostname().split(".")[0])
        return out
    except OSError as exc:
        raise HushmonError(f"control socket {path}: {exc.strerror or exc}") from None
    text = data.decode(errors="replace")
    out.answers.append(parse_answer(text, "local", time.monotonic() - t0))
    return out


async def _ask_nats(url: str, request: str, hosts: list[str], timeout_s: float) -> Outcome:
    import nats
    from nats.errors import NoRespondersError
    from nats.errors import TimeoutError as NatsTimeout

    from hushmon.transport.natsusers import USER_ENV, connect_logged_in

    out = Outcome(request, "nats", timeout_s, broadcast=not hosts)
    headers = {UID_HEADER: str(os.getuid())}
    refused: list[str] = []

    publish_refused = asyncio.Event()

    async def on_error(exc: Exception) -> None:
        # The server refuses a publish this login may not make (a
        # non-admin's hm.ctl.>): nothing reaches the agents, say why.
        if "permissions violation" in str(exc).lower():
            refused.append(str(exc).strip())
            publish_refused.set()

    try:
        nc = await connect_logged_in(
            url.split(","), on_error, connect_timeout=timeout_s, max_reconnect_attempts=0
        )
    except nats.errors.Error as exc:
        raise HushmonError(f"NATS server {url}: {exc}", exit_code=1) from None

    async def exchange() -> None:
        if hosts:

            async def one(host: str) -> None:
                t0 = time.monotonic()
                subject = SUBJECT_HOST.format(host=host)
                try:
                    msg = await nc.request(
                        subject, request.encode(), timeout=timeout_s, headers=headers
                    )
                except NoRespondersError:
                    out.no_agent.append(host)
                    return
                except NatsTimeout:
                    out.no_answer.append(host)
                    return
                text = msg.data.decode(errors="replace")
                out.answers.append(parse_answer(text, host, time.monotonic() - t0))

            await asyncio.gather(*(one(h) for h in hosts))
        else:
            # Broadcast: nobody knows how many agents there are, so every
            # answer within the timeout counts; silence cannot be listed.
            inbox = nc.new_inbox()
            sub = await nc.subscribe(inbox)
            t0 = time.monotonic()
            await nc.publish(SUBJECT_ALL, request.encode(), reply=inbox, headers=headers)
            deadline = t0 + timeout_s
            while (left := deadline - time.monotonic()) > 0:
                try:
                    msg = await sub.next_msg(timeout=left)
                except NatsTimeout:
                    break
                text = msg.data.decode(errors="replace")
                out.answers.append(parse_answer(text, "?", time.monotonic() - t0))

    try:
        # Ends early when the server refuses the publish (a non-admin login).
        work = asyncio.create_task(exchange())
        stop = asyncio.create_task(publish_refused.wait())
        await asyncio.wait({work, stop}, return_when=asyncio.FIRST_COMPLETED)
        stop.cancel()
        if work.done():
            work.result()
        else:
            work.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await work
    finally:
        await nc.close()
    if refused:
        raise HushmonError(
            f"NATS refused the request: {refused[0]}; control requests need the admin login "
            f"(${USER_ENV}=admin, docs/transport.md 'Users and permissions')",
            exit_code=1,
        )
    out.no_answer.sort()
    out.no_agent.sort()
    return out


def ask_nats(url: str, request: str, hosts: list[str], timeout_s: float) -> Outcome:
    """Asks each host (or, with no hosts, every agent on hm.ctl.all)."""
    from hushmon.transport.connect import reachable

    first = url.split(",")[0]
    why = reachable(first, min(timeout_s, 5.0))
    if why:
        raise HushmonError(f"NATS server {first} does not answer: {why}")
    return asyncio.run(_ask_nats(url, request, hosts, timeout_s))


# `hushmon ctl app NAME COMMAND [ARGS] --job ID`: a control message to the
# job's programs (libhushmon hm_on_control). The agent answers at once with
# how many processes it sent to; each process acknowledges at its next
# hm_poll, so the acknowledgements are asked for until all are in or the
# timeout passes.
APP_ARGS_MAX = 4  # the agent's request takes 8 words: app send JOB NAME COMMAND + 4
APP_TEXT_MAX = 255


def build_app_request(job: str, name: str, command: str, args: list[str]) -> str:
    words = [name, command, *args]
    if len(args) > APP_ARGS_MAX:
        raise HushmonError(f"ctl app: at most {APP_ARGS_MAX} arguments after the command")
    for w in words:
        if not w or any(c.isspace() for c in w):
            raise HushmonError(f"ctl app: {w!r} must be one word (no spaces)")
    text = " ".join([command, *args])
    if len(text.encode()) > APP_TEXT_MAX:
        raise HushmonError(f"ctl app: the message is over {APP_TEXT_MAX} bytes")
    return f"app send {job} {name} {text}"


@dataclass
class AppDelivery:
    host: str
    app_id: str
    sent: int
    acked: int = 0
    failed: int = 0


@dataclass
class AppOutcome:
    request: str
    sent: Outcome
    deliveries: list[AppDelivery] = field(default_factory=list)

    def exit_code(self) -> int:
        if self.sent.failed or self.sent.no_answer or self.sent.no_agent:
            return 1
        total = sum(d.sent for d in self.deliveries)
        done = all(d.acked == d.sent and d.failed == 0 for d in self.deliveries)
        return 0 if total > 0 and done else 1

    def to_json(self) -> dict[str, Any]:
        doc = self.sent.to_json()
        doc["deliveries"] = [d.__dict__ for d in self.deliveries]
        doc["processes"] = sum(d.sent for d in self.deliveries)
        doc["acknowledged"] = sum(d.acked for d in self.deliveries)
        doc["ok"] = self.exit_code() == 0
        return doc

    def lines(self) -> list[str]:
        out = []
        for d in sorted(self.deliveries, key=lambda d: d.host):
            how = f"delivered to {d.acked} of {d.sent} processes"
            if d.failed:
                how += f" ({d.failed} callbacks returned an error)"
            if d.sent == 0:
                how = "no process of the job by that name takes control messages here"
            out.append(f"{d.host}	{'ok' if d.sent and d.acked == d.sent else 'short'}	{how}")
        out += [line for line in self.sent.lines()[:-1] if "\tok\t" not in line]
        sent = sum(d.sent for d in self.deliveries)
        acked = sum(d.acked for d in self.deliveries)
        out.append(
            f"{acked} of {sent} processes on {len(self.deliveries)} agents acknowledged"
            + (f" within {self.sent.timeout_s:g} s" if acked < sent else "")
        )
        return out


def app_control(
    request: str,
    timeout_s: float,
    socket_path: str = "",
    url: str = "",
    hosts: list[str] | None = None,
) -> AppOutcome:
    """Sends, then asks each agent for its acknowledgements until all are in
    or ``timeout_s`` more has passed (a broadcast gathers answers for the
    whole first timeout, since nobody knows how many agents there are)."""
    if url:
        sent = ask_nats(url, request, hosts or [], timeout_s)
    else:
        sent = ask_socket(socket_path, request, timeout_s)
    deadline = time.monotonic() + timeout_s
    out = AppOutcome(request, sent)
    for a in sent.applied:
        out.deliveries.append(AppDelivery(a.host, a.state["app_id"], int(a.state["sent"])))
    waiting = [d for d in out.deliveries if d.sent > 0]
    while waiting and (left := deadline - time.monotonic()) > 0:
        time.sleep(min(0.1, left))
        for d in waiting:
            ask = f"app acks {d.app_id}"
            left = max(0.5, deadline - time.monotonic())
            got = ask_nats(url, ask, [d.host], left) if url else ask_socket(socket_path, ask, left)
            for a in got.applied:
                d.acked, d.failed = int(a.state["acked"]), int(a.state["failed"])
        waiting = [d for d in waiting if d.acked < d.sent]
    return out
