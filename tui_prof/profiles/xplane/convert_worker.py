"""TensorBoard's converter in a process of its own, so a file that crashes its native code
(a negated event offset makes it segfault) costs one line naming the file, never tuiprof itself.

Contract: `ConverterProcess.tool(links, tool)` returns the tool's JSON text (or None where the
converter has none) as `xspace_to_tool_data` would; its death raises `ConverterDied` with the
signal's name, and the next call starts a fresh process. The process (forked where
`profiles.forked` finds that safe, else `python -m tui_prof.profiles.xplane.convert_worker`)
imports the converter once and answers requests: a JSON line in, a JSON header line (naming the
request's id) and the data out. Requests run in order, one at a time, but for those sent
`beside`: each runs in a thread of its own from when it is read (the converter's native calls
release the GIL), so a tool that does not reuse the overview's op stats (the memory profile)
costs no wall time on two cores; answers come as they are ready, and `receive` keeps those
read before they are asked for. Its stdout is the protocol's alone (fd 1 goes to /dev/null, so
native code printing cannot corrupt it) and its stderr, where the native code logs, is
discarded. It exits when its stdin closes, i.e. with tuiprof.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from tui_prof.profiles import forked

if TYPE_CHECKING:  # imported where used: `main` imports this module before it parses
    import tempfile

OVERVIEW = "overview_page"
OP_STATS = "framework_op_stats"
KERNEL_STATS = "kernel_stats"
HLO_STATS = "hlo_stats"  # device HLO ops with their text (types), for XLA programs
MEMORY_PROFILE = "memory_profile"  # allocators' peaks and snapshots (XProf's Memory Profile)
# What the reader asks of every session it converts (xplane/reader.py): these in order, and the
# memory profile beside them; `ask_ahead` asks the same before the reader is imported.
SUMMARY_TOOLS = (OVERVIEW, OP_STATS, KERNEL_STATS)
# The memory profile is made beside them (on two cores it then costs no wall time), but in the
# first screen's analysis child, which wants the overview's step time first and shares the
# cores with Textual's start: there it follows the tables (the child sets this False).
MEMORY_BESIDE = True


def summary_beside() -> tuple[str, ...]:
    """The tools a summary asks for beside SUMMARY_TOOLS (see MEMORY_BESIDE)."""
    return (MEMORY_PROFILE,) if MEMORY_BESIDE else ()


OPTIONS = {"use_saved_result": True}
BESIDE_NICE = 10
CLOSE_WAIT_S = 0.05  # how long `close` lets the process end by itself before it stops it


def large_profile_bytes() -> int:
    """Sessions at least this big skip the converter unless asked (`TUIPROF_LARGE_MB`, default
    200): the reader's streaming path reads them."""
    try:
        return int(float(os.environ.get("TUIPROF_LARGE_MB", "200")) * 2**20)
    except ValueError:
        return 200 * 2**20


def link_name(name: str, index: int) -> str:
    """The converter takes UTF-8 paths only; a host file whose name is not gets a neutral one."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return f"host{index}.xplane.pb"
    return name


def make_links(directory: str, paths: Sequence[Path]) -> list[str]:
    """Symlinks to `paths` in `directory` (the converter writes its cache beside what it reads)."""
    links = []
    for i, p in enumerate(paths):
        link = os.path.join(directory, link_name(p.name, i))
        os.symlink(os.path.abspath(p), link)
        links.append(link)
    return links


class Ahead:
    """Requests asked before their caller (`ask_ahead`): their files, links and ids."""

    def __init__(
        self,
        paths: tuple[str, ...],
        tmp: tempfile.TemporaryDirectory[str],
        links: list[str],
        ids: dict[tuple[str, bool], int],  # (tool, beside) → request id
    ) -> None:
        self.paths, self.tmp, self.links, self.ids = paths, tmp, links, ids


class ConverterDied(Exception):
    """The converter's process ended mid-request: the message says how (e.g. SIGSEGV)."""


class ConverterProcess:
    def __init__(self) -> None:
        self._proc: forked.Child | None = None
        self._next_id = 0
        self._waiting: list[int] = []  # ids asked for and not yet received, oldest first
        self._kept: dict[int, tuple[dict[str, Any], bytes]] = {}  # answers read early
        self._dropped: set[int] = set()  # ids whose answers nobody waits for any more
        self._ahead: Ahead | None = None

    def start(self) -> forked.Child:
        """Start the process (if it is not running); requests start it too. Forked where that
        is safe (one thread: the CLI, the analysis child), which spares a Python start."""
        if self._proc is None or self._proc.poll() is not None:
            self._forget_all()
            self._proc = forked.start(
                main,
                ["-m", "tui_prof.profiles.xplane.convert_worker"],
                stdin=True,
                stdout=True,
                env={"TF_CPP_MIN_LOG_LEVEL": "3"},
            )
        return self._proc

    def tool(self, links: list[str], tool: str, options: dict[str, Any]) -> str | None:
        """One tool's output text; RuntimeError with the converter's message where it raised."""
        return self.receive(self.send(links, tool, options))

    def send(
        self, links: list[str], tool: str, options: dict[str, Any], *, beside: bool = False
    ) -> int:
        """Ask for one tool without waiting, `beside` the others or after them (see the
        module); returns its id for `receive`, so the caller may work meanwhile."""
        proc = self.start()
        assert proc.stdin is not None
        request_id = self._next_id
        self._next_id += 1
        request = {"id": request_id, "links": links, "tool": tool, "options": options}
        if beside:
            request["beside"] = True
        try:
            proc.stdin.write(json.dumps(request).encode())
            proc.stdin.write(b"\n")
            proc.stdin.flush()
        except BrokenPipeError:
            raise ConverterDied(self._death(proc)) from None
        self._waiting.append(request_id)
        return request_id

    def receive(self, request_id: int | None = None) -> str | None:
        """The answer to this request (default: the oldest not yet received), as `tool`."""
        proc = self._proc
        if proc is None or not self._waiting:
            raise ConverterDied("not running")
        wanted = self._waiting[0] if request_id is None else request_id
        self._waiting.remove(wanted)
        kept = self._kept.pop(wanted, None)
        header, data = kept if kept is not None else self._read_until(proc, wanted)
        if "error" in header:
            raise RuntimeError(header["error"])
        if header.get("none"):
            return None
        return data.decode("utf-8")

    def _read_until(self, proc: forked.Child, wanted: int) -> tuple[dict[str, Any], bytes]:
        """Read answers, keeping the others, until this request's."""
        assert proc.stdout is not None
        try:
            while True:
                header = json.loads(proc.stdout.readline() or b"null")
                if header is None:
                    raise ConverterDied(self._death(proc))
                data = b""
                if "size" in header:
                    data = proc.stdout.read(header["size"])
                    if len(data) != header["size"]:
                        raise ConverterDied(self._death(proc))
                answered = header.get("id", -1)
                if answered == wanted:
                    return header, data
                if answered in self._dropped:
                    self._dropped.discard(answered)
                else:
                    self._kept[answered] = (header, data)
        except (BrokenPipeError, ValueError) as exc:  # ValueError: a header cut short
            if isinstance(exc, ValueError) and proc.poll() is None:
                raise
            raise ConverterDied(self._death(proc)) from None

    def ask_ahead(self, paths: Sequence[Path]) -> None:
        """Ask now for what a summary of these host files asks (SUMMARY_TOOLS, summary_beside),
        so this process starts on them while the caller imports the readers; the next
        `claim` of the same files takes them (of other files: drops them)."""
        self._drop_ahead()
        if len({p.name for p in paths}) != len(paths):
            return  # the converter refuses them (converter.convert says why)
        import tempfile

        tmp = tempfile.TemporaryDirectory(prefix="tuiprof-")
        try:
            links = make_links(tmp.name, paths)
            ids = {(t, True): self.send(links, t, OPTIONS, beside=True) for t in summary_beside()}
            ids.update({(t, False): self.send(links, t, OPTIONS) for t in SUMMARY_TOOLS})
        except (OSError, ConverterDied):
            tmp.cleanup()  # asked again by the caller, who reports what is wrong
            return
        self._ahead = Ahead(tuple(map(str, paths)), tmp, links, ids)

    def claim(self, paths: Sequence[Path]) -> Ahead | None:
        """The requests `ask_ahead` made for these files (their answers still owed), or None;
        the caller owns them (and their links' directory) now."""
        ahead, self._ahead = self._ahead, None
        if ahead is None:
            return None
        if ahead.paths == tuple(map(str, paths)) and all(
            i in self._waiting for i in ahead.ids.values()
        ):
            return ahead
        self.forget(ahead.ids.values())
        ahead.tmp.cleanup()
        return None

    def _drop_ahead(self) -> None:
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            self.forget(ahead.ids.values())
            ahead.tmp.cleanup()

    def forget(self, ids: Iterable[int] | None = None) -> None:
        """Drop the answers still owed to these requests (default: all): read later, they are
        thrown away (the caller gave up on them, e.g. after an error), so they never pass for
        another request's."""
        gone = set(self._waiting if ids is None else ids) & set(self._waiting)
        self._dropped.update(gone)
        self._waiting = [i for i in self._waiting if i not in gone]
        for request_id in [i for i in self._kept if i in self._dropped]:
            del self._kept[request_id]
            self._dropped.discard(request_id)

    def _forget_all(self) -> None:
        self._waiting.clear()
        self._kept.clear()
        self._dropped.clear()
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            ahead.tmp.cleanup()

    def _death(self, proc: forked.Child) -> str:
        try:
            code = proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        self._proc = None
        self._forget_all()
        if code < 0:
            with contextlib.suppress(ValueError):
                return f"killed by {signal.Signals(-code).name}"
            return f"killed by signal {-code}"
        return f"exited with status {code}"

    def abandon(self) -> None:
        """Stop it now, whatever it is doing (started for work that turned out not needed)."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()

    def finish(self) -> None:
        """No more requests: its stdin closes, and it exits while the caller goes on (`close`
        then finds it ended)."""
        proc = self._proc
        if proc is not None and proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()

    def close(self) -> None:
        proc, self._proc = self._proc, None
        self._forget_all()
        if proc is not None and proc.poll() is None:
            assert proc.stdin is not None
            with contextlib.suppress(OSError):
                proc.stdin.close()
            try:  # an idle one exits on its stdin's end at once; one still importing the
                proc.wait(timeout=CLOSE_WAIT_S)  # converter, or converting what nobody
            except subprocess.TimeoutExpired:  # waits for any more, is stopped: it writes
                proc.kill()  # nothing but its answers and the converter's cache in the
                proc.wait()  # links' directory


_process: ConverterProcess | None = None


def process() -> ConverterProcess:
    """This process's converter process (callers serialise their calls)."""
    global _process
    if _process is None:
        _process = ConverterProcess()
        atexit.register(_process.close)
    return _process


def _serve(requests: IO[bytes], replies: IO[bytes]) -> None:
    from xprof.convert import raw_to_tool_data

    lock = threading.Lock()  # one answer at a time on the pipe
    beside: list[threading.Thread] = []

    def answer(req: dict[str, Any]) -> None:
        header: dict[str, Any] = {"id": req.get("id")}
        body = b""
        try:
            data, _ = raw_to_tool_data.xspace_to_tool_data(
                req["links"], req["tool"], req["options"]
            )
        except Exception as exc:  # native errors surface as assorted exception types
            header["error"] = f"{type(exc).__name__}: {exc}"
        else:
            if data is None:
                header["none"] = True
            else:
                body = data.encode("utf-8") if isinstance(data, str) else bytes(data)
                header["size"] = len(body)
        with lock:
            replies.write(json.dumps(header).encode() + b"\n" + body)
            replies.flush()

    def answer_beside(req: dict[str, Any]) -> None:
        # The tools in order (the overview first) are what the caller waits for: on busy
        # cores this thread yields to them.
        forked.yield_cpu(BESIDE_NICE)
        answer(req)

    for line in requests:
        req = json.loads(line)
        if req.get("beside"):
            thread = threading.Thread(target=answer_beside, args=(req,), daemon=True)
            thread.start()
            beside.append(thread)
        else:
            answer(req)
    for thread in beside:  # stdin closed: what was asked is still answered
        thread.join()


def main() -> int:
    replies = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # whatever else writes to stdout, native code included, is not a reply
    sys.stdout = open(os.devnull, "w")  # noqa: SIM115
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # tuiprof decides when it ends (stdin closes)
    _serve(sys.stdin.buffer, replies)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
