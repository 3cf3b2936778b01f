"""What an audit event asks of the file system and of other processes: the stateless half of the sandbox's check.

Each `*_denial` function reads one family of audit events and returns the denial's detail (a string), or None when
the event is allowed. They keep no state and see no grant: `policy.install` passes in its access rules (`readable`,
`writable`, closures over its grants) and keeps everything the hook decides with in its own closures.
"""

from __future__ import annotations

import os
from typing import Callable

WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
LISTINGS = ("os.listdir", "os.scandir")
# Events that change one path; those of the first group take a trailing dir_fd argument.
EDITS_WITH_DIR_FD = ("os.mkdir", "os.remove", "os.rmdir", "os.chmod", "os.chown", "os.utime", "shutil.rmtree")
EDITS = (*EDITS_WITH_DIR_FD, "os.truncate", "os.chflags", "os.lchflags", "os.setxattr", "os.removexattr")
MOVES = ("os.rename", "os.link", "os.symlink", "shutil.copyfile", "shutil.copytree", "shutil.move")
SPAWNS = ("os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty", "os.startfile",
          "pty.spawn", "os.popen")
KILLS = ("os.kill", "os.killpg", "signal.pthread_kill")

Rule = Callable[[str], bool]


def real_path(p: str | os.PathLike, dir_fd: int | None = None) -> str:
    """The real path of `p` (relative to the folder open as `dir_fd`, when given)."""
    p = os.fsdecode(p)
    if dir_fd is not None and dir_fd >= 0 and not os.path.isabs(p):
        try:
            p = os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), p)
        except OSError:   # a descriptor /proc cannot name: judge the path as given, relative to the cwd
            return os.path.realpath(p)
    return os.path.realpath(p)


def _text(a) -> str:
    return os.fsdecode(a) if isinstance(a, (bytes, os.PathLike)) else str(a)


def file_denial(event: str, args: tuple, readable: Callable[..., bool], writable: Rule,
                record_fd: int) -> str | None:
    """Opens, listings, edits and moves of paths: allowed when the rules allow every path they touch. The
    process's own denial record (open as `record_fd`) may never be truncated."""
    if event == "open":
        path, mode, flags = args
        if path is None or isinstance(path, int):
            return None
        p = real_path(path)
        write = (isinstance(mode, str) and any(c in mode for c in "wax+")) or bool((flags or 0) & WRITE_FLAGS)
        return None if (writable(p) if write else readable(p)) else \
            f"{os.fsdecode(path)!r}" + (", write" if write else "")
    if event in LISTINGS:
        target = args[0] if args and args[0] is not None else "."
        if isinstance(target, int):        # a folder already open (its open was checked)
            return None
        return None if readable(real_path(target), listing=True) else repr(real_path(target))
    if event in EDITS:
        target = args[0]
        if isinstance(target, int):
            return "the denial record" if event == "os.truncate" and target == record_fd else None
        dir_fd = args[-1] if event in EDITS_WITH_DIR_FD and isinstance(args[-1], int) else None
        return None if writable(real_path(target, dir_fd)) else repr(os.fsdecode(target))
    if event in MOVES:
        fds = [a if isinstance(a, int) else None for a in (*args[2:4], None, None)][:2]
        if event == "os.symlink":      # (src, dst, dir_fd): the link's target is read through it
            fds = [None, fds[0]]
        src, dst = real_path(args[0], fds[0]), real_path(args[1], fds[1])
        src_ok = readable(src) if event.startswith("shutil.") or event == "os.symlink" else writable(src)
        return None if src_ok and writable(dst) else f"{os.fsdecode(args[0])!r} -> {os.fsdecode(args[1])!r}"
    return None


def popen_command(args: tuple) -> tuple[str, list]:
    """The executable and argument list of a `subprocess.Popen` event."""
    exe, argv = args[0], args[1]
    argv = [argv] if isinstance(argv, (str, bytes)) else list(argv or [])
    exe = os.fsdecode(exe) if exe is not None else (os.fsdecode(argv[0]) if argv else "")
    return exe, argv


def command_line(argv: list) -> str:
    """A denied command line, as recorded."""
    return " ".join(_text(a) for a in argv)[:300]


def path_arguments_ok(argv: list, readable: Callable[..., bool]) -> bool:
    """Whether every absolute path among a command's arguments is readable."""
    return all(not a.startswith("/") or readable(real_path(a)) for a in (_text(x) for x in argv[1:]))


def process_denial(event: str, args: tuple, own_pid: int) -> str | None:
    """Other ways to start a process (always denied: allowed commands come through `subprocess.Popen`) and signals
    to another process or a process group."""
    if event in SPAWNS:
        return " ".join(repr(a)[:120] for a in args[:2])
    if event in KILLS and args and args[0] != own_pid and event != "signal.pthread_kill":   # 0 or < 0: a group
        return f"pid {args[0]}, signal {args[1] if len(args) > 1 else '?'}"
    return None
