"""Python code run in a sandbox: a separate interpreter with no network, a read-only view of the
documents, a small temp dir as the only writable place, resource limits and an empty environment.

The service stays as it is; bootstrap.py (a fresh `python -I -S`, started here with an empty
environment in a session of its own) builds the isolation, and the program runs under it:

- new mount, network, PID, IPC and UTS namespaces: no interface but a loopback that is down, no
  abstract Unix sockets or SysV IPC of the host, only the sandbox's processes in /proc, hostname
  `sandbox`;
- a minimal root: /usr, the libraries and the Python installation read-only; /docs (the files given,
  read-only, also `docs/` from the cwd); /code (the program, read-only); /work (a tmpfs of `disk_mb`,
  the cwd and HOME, the only writable place); no /tmp, /home, /etc (but ld.so.cache), repository,
  config or data dir; of /root or /opt only the Python installation when it lives there;
- the standard library only: the program runs as `python -I -S -B /code/main.py`, no site-packages;
- an unprivileged uid and gid of its own (a fresh one per run, in no passwd file), no supplementary
  groups, no capabilities, no new privileges (setuid binaries do nothing), a new empty session
  keyring; so processes of two runs cannot signal each other and RLIMIT_NPROC counts this run only;
- rlimits: CPU seconds, address space, processes (threads count), file size, open files, no core;
- a wall-clock timeout and an output cap here, both killing the whole process group; the namespace's
  init exits when the program does, which kills anything it left running.

Where the kernel or the platform refuses any of it (not root, no namespaces, no mount_setattr), the
run raises SandboxUnavailable naming why; it never runs the code with less isolation."""

from __future__ import annotations

import json
import os
import platform
import re
import secrets
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

BOOTSTRAP = Path(__file__).with_name("bootstrap.py")
ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/work"}
DOCS = "/docs"  # where the program finds the files given to run(); also `docs/` from its cwd, /work
_UID_BASE = 3_000_000_000  # sandbox uids: far above any account's and the usual subordinate ranges
_UID_SPAN = 1_000_000_000
_MACHINES = {"x86_64", "amd64", "aarch64", "arm64"}
_GRACE_S = 5.0  # how long a killed group may take to close its pipes


class SandboxUnavailable(RuntimeError):
    """The sandbox cannot be set up here; the message says why. Nothing ran."""


@dataclass(frozen=True)
class Limits:
    """What one run may use. The defaults fit an analysis over a library's tables with room to spare:
    a few seconds of CPU, 512 MiB of address space per process (tables of a few hundred thousand
    rows in plain Python), 8 processes or threads (so at most 8 x 512 MiB together, and no fork bomb), 16 MiB
    per file and 64 MiB in all in /work, 64 open files, 64 KiB of output (the trace keeps it), and a
    wall clock that also stops a program that sleeps or blocks."""

    cpu_s: int = 5
    memory_mb: int = 512
    wall_s: float = 10.0
    output_kb: int = 64
    processes: int = 8
    file_mb: int = 16
    disk_mb: int = 64
    open_files: int = 64

    def __post_init__(self) -> None:
        for name in ("cpu_s", "memory_mb", "output_kb", "processes", "file_mb", "disk_mb", "open_files"):
            if getattr(self, name) < 1:
                raise ValueError(f"sandbox limit {name} must be at least 1")
        if self.wall_s <= 0:
            raise ValueError("sandbox limit wall_s must be positive")
        if self.memory_mb < 64:
            raise ValueError("sandbox limit memory_mb must be at least 64 (the interpreter needs it)")


@dataclass(frozen=True)
class Outcome:
    """How a run ended. `exit`: the program's exit status, or minus the signal that ended it.
    `killed_by`: what stopped it, None when it ended on its own: `wall` (timeout), `output` (cap),
    `cpu`, `memory`, `processes`, `file_size`, `disk` (a limit), `network` or `filesystem` (the isolation
    refused an operation and the program ended on that error), `signal:NAME` for any other signal.
    `truncated`: the output was cut at the cap."""

    stdout: str
    stderr: str
    exit: int
    killed_by: str | None
    took_ms: int
    truncated: bool
    cpu_ms: int = 0


def unavailable_reason() -> str | None:
    """Why the sandbox cannot run here (checked without starting it), or None."""
    if not sys.platform.startswith("linux"):
        return f"the sandbox needs Linux namespaces; this is {sys.platform}"
    if platform.machine().lower() not in _MACHINES:
        return f"the sandbox knows the syscalls of x86_64 and arm64 only; this is {platform.machine()}"
    if os.geteuid() != 0:
        return (
            "the sandbox needs root to create namespaces and drop to an unprivileged uid of its own; "
            f"this service runs as uid {os.geteuid()}"
        )
    if not BOOTSTRAP.is_file():
        return f"the sandbox's bootstrap is missing: {BOOTSTRAP}"
    return None


def run(code: str, files: Mapping[str, bytes], limits: Limits | None = None) -> Outcome:
    """Runs `code` with `files` (relative paths) read-only under /docs. Raises SandboxUnavailable
    when the isolation cannot be set up, ValueError for a file path outside the view."""
    limits = limits or Limits()
    for name in files:
        _safe_path(name)
    reason = unavailable_reason()
    if reason:
        raise SandboxUnavailable(reason)
    with tempfile.TemporaryDirectory(prefix="ragstack-sandbox-") as tmp:
        base = Path(tmp)
        try:
            _lay_out(base, code, files)
            return _execute(base, limits)
        finally:
            for folder, _, _ in os.walk(base):
                os.chmod(folder, 0o700)  # so the temp dir can be removed


def _safe_path(name: str) -> PurePosixPath:
    path = PurePosixPath(name)
    if path.is_absolute() or not path.parts or any(p in ("..", ".", "") for p in path.parts):
        raise ValueError(f"sandbox file path must be relative and plain: {name!r}")
    return path


def _lay_out(base: Path, code: str, files: Mapping[str, bytes]) -> None:
    docs, program, newroot = base / "docs", base / "code", base / "root"
    for folder in (docs, program, newroot):
        folder.mkdir()
    for name, data in files.items():
        target = docs / _safe_path(name)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        target.chmod(0o444)
    (program / "main.py").write_text(code, encoding="utf-8")
    (program / "main.py").chmod(0o444)
    for folder in (docs, program):
        for sub, _, _ in os.walk(folder):
            os.chmod(sub, 0o555)


def _interpreter() -> tuple[str, list[str]]:
    """The base interpreter (not a venv's wrapper) and the folders it needs, outside /usr."""
    python = os.path.realpath(getattr(sys, "_base_executable", "") or sys.executable)
    prefixes: list[str] = []
    for folder in (sys.base_prefix, sys.base_exec_prefix, os.path.dirname(os.path.dirname(python))):
        real = os.path.realpath(folder)
        inside = [p for p in ["/usr", *prefixes] if real == p or real.startswith(p + "/")]
        if not inside and real != "/":
            prefixes.append(real)
    return python, prefixes


def _config(base: Path, limits: Limits, status_fd: int) -> dict[str, Any]:
    python, prefixes = _interpreter()
    return {
        "parent": os.getpid(),
        "status_fd": status_fd,
        "uid": _UID_BASE + secrets.randbelow(_UID_SPAN),
        "python": python,
        "prefixes": prefixes,
        "docs": str(base / "docs"),
        "code": str(base / "code"),
        "newroot": str(base / "root"),
        "env": ENV,
        "limits": {
            "cpu_s": limits.cpu_s,
            "memory_mb": limits.memory_mb,
            "processes": limits.processes,
            "file_mb": limits.file_mb,
            "disk_mb": limits.disk_mb,
            "open_files": limits.open_files,
        },
    }


@dataclass
class _Capture:
    cap: int
    out: bytearray
    err: bytearray
    truncated: bool = False

    def add(self, which: bytearray, data: bytes) -> bool:
        """Keeps what fits under the cap (stdout and stderr together); False once past it."""
        room = self.cap - len(self.out) - len(self.err)
        which += data[: max(room, 0)]
        if len(data) > room:
            self.truncated = True
        return not self.truncated


def _execute(base: Path, limits: Limits) -> Outcome:
    python, _ = _interpreter()
    read_status, write_status = os.pipe()
    config = _config(base, limits, write_status)
    started = time.monotonic()
    capture = _Capture(limits.output_kb * 1024, bytearray(), bytearray())
    try:
        with subprocess.Popen(
            [python, "-I", "-S", "-B", str(BOOTSTRAP), json.dumps(config)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={},
            cwd="/",
            start_new_session=True,
            pass_fds=(write_status,),
        ) as process:
            os.close(write_status)
            write_status = -1
            stopped = _pump(process, capture, started + limits.wall_s)
            process.wait()
        status = _read_status(read_status)
    finally:
        os.close(read_status)
        if write_status >= 0:
            os.close(write_status)
    took_ms = int((time.monotonic() - started) * 1000)
    if "error" in status:
        raise SandboxUnavailable(f"the sandbox could not be set up: {status['error']}")
    return _outcome(status, capture, stopped, took_ms, limits)


def _kill(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)  # the bootstrap's session; init's exit takes the rest
    except ProcessLookupError:
        pass


def _pump(process: subprocess.Popen[bytes], capture: _Capture, deadline: float) -> str | None:
    """Reads stdout and stderr until both close; kills the group at the deadline or past the cap.
    Returns `wall` or `output` when it killed, else None."""
    assert process.stdout is not None and process.stderr is not None
    streams = {process.stdout.fileno(): capture.out, process.stderr.fileno(): capture.err}
    stopped: str | None = None
    with selectors.DefaultSelector() as selector:
        for fd in streams:
            os.set_blocking(fd, False)
            selector.register(fd, selectors.EVENT_READ)
        while streams:
            now = time.monotonic()
            if now >= deadline:
                if stopped is not None:
                    break  # killed, and the pipes still open after the grace: give up on them
                stopped = "wall"
                _kill(process)
                deadline = now + _GRACE_S
                continue
            for key, _ in selector.select(timeout=deadline - now):
                fd = int(key.fd)
                data = os.read(fd, 65536)
                if not data:
                    selector.unregister(fd)
                    del streams[fd]
                elif not capture.add(streams[fd], data) and stopped is None:
                    stopped = "output"
                    _kill(process)
                    deadline = time.monotonic() + _GRACE_S
    return stopped


def _read_status(fd: int) -> dict[str, Any]:
    os.set_blocking(fd, False)
    chunks = []
    try:
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    except BlockingIOError:
        pass
    status: dict[str, Any] = {}
    for line in b"".join(chunks).decode("utf-8", "replace").splitlines():
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if isinstance(message, dict) and "error" not in status:
            status.update(message)
    return status


_LIMIT_ERRORS = (  # the program ended on an error the limits or the isolation raised
    ("memory", re.compile(r"^MemoryError\b|Cannot allocate memory", re.M)),
    ("processes", re.compile(r"Resource temporarily unavailable|can't start new thread", re.M)),
    ("file_size", re.compile(r"File too large", re.M)),
    ("disk", re.compile(r"No space left on device|Disk quota exceeded", re.M)),
    ("network", re.compile(r"Network is unreachable|Cannot assign requested address", re.M)),
    ("filesystem", re.compile(r"Read-only file system|Permission denied", re.M)),
)


def _stopped_by(status: dict[str, Any], stderr: str, limits: Limits) -> str | None:
    sig = status.get("signal")
    if sig is not None:
        if sig == signal.SIGXCPU or (sig == signal.SIGKILL and status.get("cpu_s", 0) >= limits.cpu_s):
            return "cpu"
        if sig == signal.SIGXFSZ:
            return "file_size"
        try:
            return f"signal:{signal.Signals(sig).name}"
        except ValueError:
            return f"signal:{sig}"
    if status.get("exit") in (0, None):
        return None
    tail = stderr[-2000:]
    return next((name for name, pattern in _LIMIT_ERRORS if pattern.search(tail)), None)


def _outcome(
    status: dict[str, Any], capture: _Capture, stopped: str | None, took_ms: int, limits: Limits
) -> Outcome:
    stdout = capture.out.decode("utf-8", "replace")
    stderr = capture.err.decode("utf-8", "replace")
    if "exit" not in status:  # killed with its init before it could report
        exit_code = -signal.SIGKILL
    elif status["signal"] is not None:
        exit_code = -int(status["signal"])
    else:
        exit_code = int(status["exit"])
    killed_by = stopped or _stopped_by(status, stderr, limits)
    if stopped is None and "exit" not in status:
        killed_by = "signal:SIGKILL"
    return Outcome(
        stdout=stdout,
        stderr=stderr,
        exit=exit_code,
        killed_by=killed_by,
        took_ms=took_ms,
        truncated=capture.truncated,
        cpu_ms=int(float(status.get("cpu_s", 0.0)) * 1000),
    )
