"""Names of the NATS streams, subjects and durable consumers, shared by the
server helper (:mod:`natsserver`) and the logins' permissions
(:mod:`natsusers`), which both build on them.
"""

from __future__ import annotations

RAW_STREAM = "HM_RAW"
RAW_SUBJECTS = "hm.raw.>"
SUM_STREAM = "HM_SUM"
SUM_SUBJECTS = "hm.sum.>"

# The durable consumers, made by the admin step with the streams (`deploy
# streams`): the services only bind to them and pull, so no service login
# may create or redefine a consumer (a creator picks its deliver subject,
# which the server does not check against the creator's permissions).
COLLECT_RAW, COLLECT_SUM, REDUCE_TOP = "collect-raw", "collect-sum", "reduce-top"


def reduce_consumer(rack: str) -> str:
    """A rack reducer's durable consumer on HM_RAW (and its login's name)."""
    return f"reduce-{rack}"
