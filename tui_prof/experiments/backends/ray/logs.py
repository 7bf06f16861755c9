"""A finished Ray job's whole log, from wherever it can still be read.

Why more than one way: the dashboard serves a job's log through the dashboard agent of the node
that ran the job's driver (`driver_agent_http_address`). Where that agent's HTTP server is not
running (it could not bind its port: two nodes sharing one network namespace, a port taken on a
real machine) the dashboard answers with an error or, when another node's agent listens on that
port, with that node's copy of the log, which holds only Ray's "Runtime env is setting up." line.
A run's results must not depend on that path alone.

Contract: `whole_logs(client, address, sid, node_id)` yields the log from each way in turn:
first the Jobs API (`get_job_logs`, what `ray job logs` reads), then the state API's log file
endpoint (`/api/v0/logs/file`, what `ray logs` reads), which goes to the node by its id over the
agent's gRPC port. The caller takes the first copy that holds the run's `end` record (stream.py
checks the records' token: a copy from the wrong node is never taken for the run's) and decides
what it means when none does. Stdlib only besides the Jobs client passed in.
"""

from __future__ import annotations

import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

TIMEOUT_S = 30.0


def _short(text: str, limit: int = 200) -> str:
    """One line of an error: a server traceback's last exception line, else its last line."""
    lines = [ln.strip() for ln in text.strip().splitlines() if len(ln.strip()) > 2]
    raised = [ln for ln in lines if re.match(r"^[\w.]+(Error|Exception)\b.*:", ln)]
    return ((raised or lines or ["no reason given"])[-1])[:limit]


def node_log(address: str, node_id: str, filename: str, timeout_s: float = TIMEOUT_S) -> str:
    """A log file of one node, whole, through the dashboard's state API (OSError if not)."""
    query = urllib.parse.urlencode(
        {"node_id": node_id, "filename": filename, "lines": -1, "timeout": int(timeout_s)}
    )
    url = f"{address.rstrip('/')}/api/v0/logs/file?{query}"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            return bytes(resp.read()).decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        body = exc.read().decode("utf-8", "replace")
        raise OSError(_short(body) or f"HTTP {exc.code}") from None
    except (urllib.error.URLError, TimeoutError, ValueError) as exc:
        raise OSError(str(getattr(exc, "reason", exc))) from None


def whole_logs(
    client: Any, address: str, sid: str, node_id: str | None
) -> Iterator[tuple[str, str | None, str]]:
    """The job's whole log from each way in turn (see the module contract): `(way, text, "")`,
    or `(way, None, why it failed)`; the caller stops at the first copy that holds the run."""
    try:
        yield "Jobs API", str(client.get_job_logs(sid)), ""
    except Exception as exc:  # Ray raises RuntimeError with the server's traceback
        yield "Jobs API", None, _short(str(exc))
    if not node_id:
        yield "state API", None, "the node that ran it is not known"
        return
    try:
        yield "state API", node_log(address, node_id, f"job-driver-{sid}.log"), ""
    except OSError as exc:
        yield "state API", None, str(exc)
