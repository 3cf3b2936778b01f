"""The read-only view of a process that imports candidate code: the file system layer of the sandbox's OS layer.

`sandbox.policy.wrap_command` starts the worker (and the ahead-of-time build process) under
`unshare --user --map-root-user --net --mount`: root of a user namespace of its own, which owns a fresh mount
namespace (private propagation: nothing done in it reaches the host). Before any candidate code is imported, the
process calls `readonly_view(writable)`, which

1. binds each writable path (the job folder, Triton's cache, the temp folder, the log file) onto itself, so it keeps
   the flags of the mount it lies on (read-write);
2. remounts every other mount point of its view read-only (`MS_REMOUNT | MS_BIND | MS_RDONLY`, keeping the flags a
   user namespace may not clear: nosuid, nodev, noexec, the atime mode);
3. mounts an empty read-only tmpfs over each protected folder (the run-key folder, `hide`);
4. leaves the namespace's privileges: a second user namespace (`unshare(CLONE_NEWUSER)`) without the capabilities
   that own the mount namespace, so not even native code can remount anything read-write again, unmount a bind to
   uncover what lies below, or mount anything new. Its uid maps to none (the kernel shows 65534); file permissions
   are still checked against the real user.

Device files stay usable on a read-only mount (the kernel does not count writes to them as writes to the file
system), so `/dev/null` and the GPU's device files keep working. `/proc` keeps its own mount as it is
(`KERNEL_VIEWS`): the CUDA driver does not initialise with it read-only; what guards another process's
`/proc/<pid>/mem` there is the kernel's ptrace access check, not the view.

Only the standard library here, and nothing that starts a thread: `unshare(CLONE_NEWUSER)` is refused to a
process with more than one thread, so this runs before torch is imported.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import json
import os
import sys

WRITABLE_ENV = "KERNELLOOP_WRITABLE"   # JSON list of the paths a confined child keeps writable

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
MS_REMOUNT, MS_NOATIME, MS_NODIRATIME, MS_BIND = 0x20, 0x400, 0x800, 0x1000
MS_REC, MS_PRIVATE, MS_RELATIME, MS_STRICTATIME = 0x4000, 0x40000, 0x200000, 0x1000000
CLONE_NEWUSER = 0x10000000
_KEPT = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC, "noatime": MS_NOATIME,
         "nodiratime": MS_NODIRATIME, "relatime": MS_RELATIME, "strictatime": MS_STRICTATIME}


# Mounts the view leaves as they are: with /proc read-only the CUDA driver does not initialise
# (cudaGetDeviceCount: error 304, "OS call failed", on an H200 host; with /proc writable it does).
KERNEL_VIEWS = ("/proc",)


class ViewUnavailable(OSError):
    """The read-only view could not be set up; the message says which step the kernel refused."""


def _libc():
    lib = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    lib.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
    lib.unshare.argtypes = [ctypes.c_int]
    return lib


def _call(what: str, rc: int) -> None:
    if rc != 0:
        e = ctypes.get_errno()
        raise ViewUnavailable(e, f"{what}: {errno.errorcode.get(e, e)} ({os.strerror(e)})")


def _unescape(field: str) -> str:
    """A mountinfo path: spaces, tabs, newlines and backslashes are written as octal escapes."""
    return field.encode().decode("unicode_escape") if "\\" in field else field


def mounts() -> list[tuple[str, set[str]]]:
    """(mount point, per-mount options) of every mount of this process's view, parents first."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            out.append((_unescape(fields[4]), set(fields[5].split(","))))
    return out


def _under(path: str, roots) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def writable_paths(paths) -> list[str]:
    """The real paths of `paths` that exist (created as folders when missing and creatable), in the order given,
    without duplicates and without those that lie inside another."""
    real = []
    for p in paths:
        if not p:
            continue
        p = os.path.realpath(p)
        if not os.path.exists(p):
            try:
                os.makedirs(p, exist_ok=True)
            except OSError:
                continue
        real.append(p)
    out: list[str] = []   # in the order given, without duplicates and paths inside another
    for p in real:
        if p not in out and not any(_under(p, [q]) for q in real if q != p):
            out.append(p)
    return out


def readonly_view(writable, drop: bool = True) -> list[str]:
    """Make this process's mount namespace read-only except `writable`, then (with `drop`) give up the right to
    change it. Returns the paths kept writable. Raises ViewUnavailable naming the step the kernel refused (the
    view may then be partly read-only; the caller records that it is unavailable)."""
    keep = writable_paths([*writable, *KERNEL_VIEWS])
    if not keep:
        raise ViewUnavailable(errno.EINVAL, "no writable path exists")
    if "/" in keep:
        raise ViewUnavailable(errno.EINVAL, "the root itself is to stay writable")
    libc = _libc()
    _call("make the mounts private", libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None))
    for p in keep:
        b = os.fsencode(p)
        _call(f"bind {p}", libc.mount(b, b, None, MS_BIND | MS_REC, None))
    hidden = hide(protected_from_env())
    for point, opts in mounts():
        if _under(point, keep) or "ro" in opts or point in hidden:
            continue
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY
        for name, bit in _KEPT.items():
            if name in opts:
                flags |= bit
        if not opts & {"noatime", "relatime", "strictatime"}:
            flags |= MS_STRICTATIME
        if not os.path.exists(point):   # a mount point below a bind that hides it
            continue
        _call(f"remount {point} read-only", libc.mount(None, os.fsencode(point), None, flags, None))
    top = dict(mounts())   # a mount point listed twice: the later mount lies on top and is the one seen
    left = [point for point, opts in top.items() if "ro" not in opts and not _under(point, keep)
            and os.path.exists(point)]
    if left:
        raise ViewUnavailable(errno.EPERM, f"still writable after the remount: {', '.join(left[:4])}")
    if drop:
        _call("leave the mount namespace's privileges (unshare CLONE_NEWUSER)", libc.unshare(CLONE_NEWUSER))
    return keep


PROTECTED_ENV = "KERNELLOOP_PROTECTED"   # JSON list of folders to hide (core/sandbox/policy.py protected_paths)


def protected_from_env() -> list[str]:
    """The folders this process must not see: the run-key folder as the controller named it, and as found here."""
    from .keys import key_dir
    try:
        named = json.loads(os.environ.get(PROTECTED_ENV) or "[]")
    except ValueError:
        named = []
    return sorted({os.path.realpath(p) for p in [*named, str(key_dir())]})


def hide(paths) -> list[str]:
    """Mount an empty read-only tmpfs over each existing folder of `paths` (the run-key folder): not even native
    code that gets past the audit hook can list or read what lies below. Returns the folders hidden."""
    libc, out = _libc(), []
    for p in paths:
        if not os.path.isdir(p):
            continue
        _call(f"hide {p}", libc.mount(b"tmpfs", os.fsencode(p), b"tmpfs",
                                      MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, b"size=4k,mode=0500"))
        out.append(p)
    return out


def describe(keep: list[str]) -> str:
    return "read-only view except " + ", ".join(keep)


def confine_from_env() -> str:
    """In a child started by `wrap_command` with a read-only view: set it up from $KERNELLOOP_WRITABLE. Returns
    what was done ('' when nothing was asked for), 'read-only view unavailable: <why>' when it failed."""
    raw = os.environ.pop(WRITABLE_ENV, None)
    if raw is None:
        return ""
    try:
        return describe(readonly_view(json.loads(raw)))
    except (ViewUnavailable, OSError, ValueError) as e:
        return f"read-only view unavailable: {e}"


PROBE_OUTSIDE = "kernelloop-probe-outside"


def probe(job: str, outside: str) -> dict:
    """Set the view up with only `job` writable, then try what it must stop and what it must allow (run inside
    `unshare --user --map-root-user --net --mount`; prints the result as JSON when run as a program)."""
    out: dict = {}
    try:
        keep = readonly_view([job])
    except (ViewUnavailable, OSError) as e:
        return {"ok": False, "why": str(e)}
    out["keep"] = keep

    def attempt(fn) -> str:
        try:
            fn()
            return "allowed"
        except OSError as e:
            return errno.errorcode.get(e.errno, str(e.errno))

    out["write inside"] = attempt(lambda: os.close(os.open(os.path.join(job, "probe"),
                                                           os.O_WRONLY | os.O_CREAT, 0o600)))
    out["write outside"] = attempt(lambda: os.close(os.open(os.path.join(outside, PROBE_OUTSIDE),
                                                            os.O_WRONLY | os.O_CREAT, 0o600)))
    out["remount read-write"] = attempt(
        lambda: _call("remount", _libc().mount(None, b"/", None, MS_REMOUNT | MS_BIND, None)))
    out["ok"] = (out["write inside"] == "allowed" and out["write outside"] != "allowed"
                 and out["remount read-write"] != "allowed")
    if not out["ok"]:
        out["why"] = (f"the view does not hold: write inside {out['write inside']}, write outside "
                      f"{out['write outside']}, remount {out['remount read-write']}")
    return out


if __name__ == "__main__":
    print(json.dumps(probe(sys.argv[1], sys.argv[2])))
