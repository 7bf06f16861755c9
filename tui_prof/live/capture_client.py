"""The child side of `tuiprof capture`: runs xprof's native capture client, reads its log.

Contract: `python -m tui_prof.live.capture_client REQUEST_JSON` calls the client once and writes
`{"ok": ...}` to the request's result path; `classify()` turns the client's terse error plus
the per-address reasons it logs into one clear line. Internal to `tui_prof.live.capture`, which
runs this in its own process so the client's logging, blocking and crashes stay out of tuiprof.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Sequence

# How long gRPC tries to connect before giving up (seen in the native log: 20 s), plus slack.
CONNECT_WAIT_S = 25.0

_RETURNED_RE = re.compile(r"capture_profile\.cc:\d+\] (\S+) returned (\w+): (.*)")
_NO_EVENTS_RE = re.compile(r"No trace event is collected from (\S+)")


def classify(
    kind_hint: str,
    error_text: str,
    log_text: str,
    addresses: Sequence[str],
    duration_ms: int,
    elapsed_s: float | None = None,
) -> tuple[str, str]:
    """(kind, one-line message) for a failed capture, from the native client's error and log.

    gRPC's "failed to connect" means no capture began, whatever closed the connection; and a
    message says how long it took (elapsed_s), never a limit that was not reached.
    """
    reasons = {m.group(1): (m.group(2), m.group(3)) for m in _RETURNED_RE.finditer(log_text)}
    after = f"after {elapsed_s:.1f} s: " if elapsed_s is not None else ""
    for addr in addresses:
        code, detail = reasons.get(addr, ("", ""))
        low = detail.lower()
        never_connected = "failed to connect" in low
        if any(s in low for s in ("dns resolution", "errors resolving", "name resolution")):
            host = addr.rsplit(":", 1)[0]
            return ("no_server", f"cannot resolve host {host!r} of {addr}")
        if "connection refused" in low:
            return (
                "no_server",
                f"no profiler server at {addr} (connection refused): is the job running, and did "
                "it call tf.profiler.experimental.server.start(PORT) with this port?",
            )
        if never_connected and any(s in low for s in ("http/2", "http1", "http status")):
            return (
                "no_server",
                f"something answers at {addr} but it is not a profiler server (it does not speak "
                f"gRPC): check the port ({after}{code}: {detail.strip()})",
            )
        if any(
            s in low
            for s in (
                "socket closed",
                "stream removed",
                "connection reset",
                "broken pipe",
                "goaway",
                "end of tcp stream",
            )
        ):
            if never_connected:
                return (
                    "no_server",
                    f"{addr} closed the connection before any capture began: not a profiler "
                    f"server, or one shutting down? ({after}{code}: {detail.strip()})",
                )
            return (
                "server_died",
                f"the profiler server at {addr} went away during the capture "
                f"(the job exited or crashed?): {after}{code}: {detail.strip()}",
            )
        if code in ("UNAVAILABLE", "DEADLINE_EXCEEDED") and (
            never_connected or "timed out" in low or "deadline" in low
        ):
            return (
                "no_server",
                f"no profiler server answered at {addr} ({after}{detail.strip()}): check the host, "
                "the port and any firewall",
            )
        if code:
            return ("failed", f"capture from {addr} failed: {after}{code}: {detail.strip()}")
    if (
        kind_hint == "empty"
        or _NO_EVENTS_RE.search(log_text)
        or "no trace event" in error_text.lower()
    ):
        who = ", ".join(addresses)
        return (
            "empty",
            f"{who} answered but recorded no events in {duration_ms} ms: the job was idle (not "
            "running steps: starting up, evaluating, waiting for input, or done). Capture while "
            "it trains, with a longer --duration-ms, or more --retries",
        )
    return ("failed", f"capture failed: {error_text or 'the client gave no reason'}")


def child_main(request_json: str) -> int:
    """The child: call the native client once and record the outcome as JSON for the parent."""
    request = json.loads(request_json)
    outcome: dict[str, object]
    try:
        from xprof.convert import _pywrap_profiler_plugin as plugin

        plugin.trace(
            request["service_addr"],
            request["logdir"],
            "",
            True,
            request["duration_ms"],
            request["attempts"],
            request["options"],
        )
        outcome = {"ok": True}
    except Exception as exc:  # the native client reports every failure as one exception
        text = str(exc)
        kind = "empty" if "no trace event" in text.lower() else "failed"
        outcome = {"ok": False, "kind": kind, "error": text}
    sys.stdout.flush()
    tmp = request["result"] + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(outcome, fh)
    os.replace(tmp, request["result"])
    return 0


if __name__ == "__main__":
    sys.exit(child_main(sys.argv[1]))
