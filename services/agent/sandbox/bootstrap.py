"""The sandbox's first process, run as root by runner.py in a fresh `python -I -S` with an empty
environment; it imports only the standard library and never the package around it.

It unshares new mount, network, PID, IPC and UTS namespaces, builds a minimal root on a tmpfs (the
system's /usr and libraries and the Python installation read-only, /docs read-only, /work a small
tmpfs, a fresh /proc, a few device nodes), pivots into it and makes every mount read-only except /work.
It then forks the namespace's init (PID 1), which forks the program: resource limits, no supplementary
groups, an unprivileged uid and gid of its own, no new privileges, cwd /work, exec of the interpreter.
Init reaps every process, and when the program ends it reports how (one JSON line on the status fd)
and exits, which kills whatever the program left behind. Anything that cannot be set up is reported as
{"error": ...} on the status fd and nothing runs."""

from __future__ import annotations

import ctypes
import errno
import json
import os
import platform
import resource
import signal
import sys
from typing import Any

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 1 << 18
MNT_DETACH = 0x2
MOUNT_ATTR_RDONLY = 0x1
MOUNT_ATTR_NOSUID = 0x2
AT_FDCWD = -100
AT_RECURSIVE = 0x8000
PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
SYS_MOUNT_SETATTR = 442  # the same number on every architecture (added in Linux 5.12)
SYS_PIVOT_ROOT = {"x86_64": 155, "amd64": 155, "aarch64": 41, "arm64": 41}
SYS_KEYCTL = {"x86_64": 250, "amd64": 250, "aarch64": 219, "arm64": 219}
KEYCTL_JOIN_SESSION_KEYRING = 1
DEVICES = ("null", "zero", "full", "random", "urandom")

_libc = ctypes.CDLL(None, use_errno=True)


class SetupError(Exception):
    """Isolation could not be set up; the message names the step and the kernel's reason."""


class _MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


def _check(result: int, step: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise SetupError(f"{step} refused: {errno.errorcode.get(code, str(code))} ({os.strerror(code)})")


def _b(path: str | None) -> bytes | None:
    return None if path is None else path.encode()


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    result = _libc.mount(_b(source), _b(target), _b(fstype), ctypes.c_ulong(flags), _b(data))
    _check(result, f"mount {source or ''} on {target}")


def _mount_setattr(path: str, flags: int, attr_set: int, attr_clr: int) -> None:
    attr = _MountAttr(attr_set, attr_clr, 0, 0)
    result = _libc.syscall(
        ctypes.c_long(SYS_MOUNT_SETATTR),
        ctypes.c_int(AT_FDCWD),
        _b(path),
        ctypes.c_uint(flags),
        ctypes.byref(attr),
        ctypes.c_size_t(ctypes.sizeof(attr)),
    )
    _check(result, f"mount_setattr on {path} (needs Linux 5.12+)")


def _prctl(option: int, value: int) -> None:
    _check(_libc.prctl(ctypes.c_int(option), ctypes.c_ulong(value), 0, 0, 0), f"prctl({option})")


def _bind(source: str, target: str) -> None:
    _mount(source, target, None, MS_BIND | MS_REC)


def _mkdirs(root: str, path: str) -> str:
    target = root + path
    os.makedirs(target, mode=0o755, exist_ok=True)
    return target


def _touch(root: str, path: str) -> str:
    target = root + path
    os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
    with open(target, "w"):
        pass
    return target


def _system(root: str) -> None:
    """/usr and the top-level library folders (as symlinks where the host has symlinks)."""
    _bind("/usr", _mkdirs(root, "/usr"))
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        host = "/" + name
        if os.path.islink(host):
            os.symlink(os.readlink(host), root + host)
        elif os.path.isdir(host):
            _bind(host, _mkdirs(root, host))
    if os.path.isfile("/etc/ld.so.cache"):
        _bind("/etc/ld.so.cache", _touch(root, "/etc/ld.so.cache"))


def _devices(root: str) -> None:
    _mkdirs(root, "/dev")
    for name in DEVICES:
        if os.path.exists("/dev/" + name):
            _bind("/dev/" + name, _touch(root, "/dev/" + name))
    os.symlink("/proc/self/fd", root + "/dev/fd")
    for i, name in enumerate(("stdin", "stdout", "stderr")):
        os.symlink(f"/proc/self/fd/{i}", f"{root}/dev/{name}")


def build_root(config: dict[str, Any]) -> None:
    """The new mount namespace's root, then pivots into it; every mount is read-only but /work."""
    limits = config["limits"]
    root = config["newroot"]
    _mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing done here propagates to the host
    _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,nr_inodes=4096,mode=0755")
    _system(root)
    for prefix in config["prefixes"]:  # the Python installation, when it lives outside /usr
        _bind(prefix, _mkdirs(root, prefix))
    _devices(root)
    _mkdirs(root, "/proc")
    _bind(config["docs"], _mkdirs(root, "/docs"))
    _bind(config["code"], _mkdirs(root, "/code"))
    uid = config["uid"]
    _mount(
        "tmpfs",
        _mkdirs(root, "/work"),
        "tmpfs",
        MS_NOSUID | MS_NODEV,
        f"size={limits['disk_mb']}m,nr_inodes=4096,mode=0700,uid={uid},gid={uid}",
    )
    os.symlink("/docs", root + "/work/docs")  # `docs/` from the cwd too
    os.chdir(root)
    pivot = SYS_PIVOT_ROOT[platform.machine().lower()]
    _check(_libc.syscall(ctypes.c_long(pivot), b".", b"."), "pivot_root")
    _check(_libc.umount2(b".", ctypes.c_int(MNT_DETACH)), "umount of the old root")
    os.chdir("/")
    _mount_setattr("/", AT_RECURSIVE, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID, 0)
    _mount_setattr("/work", 0, 0, MOUNT_ATTR_RDONLY)


def _limit(kind: int, value: int) -> None:
    resource.setrlimit(kind, (value, value))


def _drop_and_exec(config: dict[str, Any], status_fd: int) -> None:
    """In the program's process: limits, an unprivileged identity, then the interpreter."""
    limits = config["limits"]
    # CPU: SIGXCPU at the soft limit, SIGKILL a second later if the program ignores it.
    resource.setrlimit(resource.RLIMIT_CPU, (limits["cpu_s"], limits["cpu_s"] + 1))
    _limit(resource.RLIMIT_AS, limits["memory_mb"] * 1024 * 1024)
    _limit(resource.RLIMIT_NPROC, limits["processes"])
    _limit(resource.RLIMIT_FSIZE, limits["file_mb"] * 1024 * 1024)
    _limit(resource.RLIMIT_NOFILE, limits["open_files"])
    _limit(resource.RLIMIT_CORE, 0)
    _limit(resource.RLIMIT_MEMLOCK, 0)
    _limit(resource.RLIMIT_MSGQUEUE, 0)
    uid = config["uid"]
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    if os.getuid() != uid or os.geteuid() != uid or os.getgid() != uid:
        raise SetupError("dropping privileges did not take")
    _prctl(PR_SET_NO_NEW_PRIVS, 1)
    _own_keyring()
    os.chdir("/work")
    os.set_inheritable(status_fd, False)  # closed by exec: the program cannot write the status
    os.umask(0o077)
    argv = [config["python"], "-I", "-S", "-B", "/code/main.py"]
    os.execve(config["python"], argv, config["env"])


def _own_keyring() -> None:
    """A new, empty session keyring: the service's (possessed through inheritance) is left behind."""
    number = SYS_KEYCTL[platform.machine().lower()]
    result = _libc.syscall(ctypes.c_long(number), ctypes.c_int(KEYCTL_JOIN_SESSION_KEYRING), None)
    if result < 0 and ctypes.get_errno() != errno.ENOSYS:  # ENOSYS: no keyrings in this kernel
        _check(-1, "joining a new session keyring")


def _report(status_fd: int, message: dict[str, Any]) -> None:
    os.write(status_fd, (json.dumps(message) + "\n").encode())


def _init(config: dict[str, Any], status_fd: int) -> int:
    """PID 1 of the new namespace: mounts /proc, runs the program, reaps, reports."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    _mount("proc", "/proc", "proc", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)
    program = os.fork()
    if program == 0:
        try:
            _drop_and_exec(config, status_fd)
        except Exception as error:
            _report(status_fd, {"error": f"starting the program: {error!r}"})
        os._exit(127)
    while True:
        try:
            pid, status, usage = os.wait4(-1, 0)
        except ChildProcessError:
            return 0
        if pid != program:
            continue
        _report(
            status_fd,
            {
                "exit": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
                "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
                "cpu_s": usage.ru_utime + usage.ru_stime,
                "max_rss_kb": usage.ru_maxrss,
            },
        )
        return 0  # init's exit kills whatever the program left running


def main() -> int:
    config: dict[str, Any] = json.loads(sys.argv[1])
    status_fd: int = config["status_fd"]
    try:
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != config["parent"]:
            return 1  # the service is already gone
        if platform.machine().lower() not in SYS_PIVOT_ROOT:
            raise SetupError(f"no syscall numbers known for {platform.machine()} (x86_64 and arm64 are)")
        flags = CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS
        _check(_libc.unshare(ctypes.c_int(flags)), "unshare of the mount, network and PID namespaces")
        _check(_libc.sethostname(b"sandbox", ctypes.c_size_t(7)), "sethostname")
        build_root(config)
    except Exception as error:  # whatever it is, nothing may run: report it
        _report(status_fd, {"error": f"{error}" if isinstance(error, OSError | SetupError) else repr(error)})
        return 70
    child = os.fork()
    if child == 0:
        try:
            code = _init(config, status_fd)
        except Exception as error:
            _report(status_fd, {"error": f"the sandbox's init: {error!r}"})
            code = 70
        os._exit(code)
    _, status = os.waitpid(child, 0)
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 70


if __name__ == "__main__":
    sys.exit(main())
