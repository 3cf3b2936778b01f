"""The run key: what derives the held-out cases, the verification seeds and the timing inputs of a run.

Threat model (docs/verification.md): a proposer -- an outside agent running `kernelloop submit` itself, as the
same OS user -- reads everything in its workspace and its run folder, and the answers to its own submissions. So
the key must not be in either. The archive keeps a public salt and a commitment to the key (a salted sha256);
the key itself stays with the user's controller:

- `$KERNELLOOP_KEY` (at least 32 characters), when set: the run uses it and writes no key file;
- otherwise a fresh random key is written to `$KERNELLOOP_KEY_DIR/<run-id>` (default
  `$XDG_CONFIG_HOME/kernelloop/keys/<run-id>`, i.e. `~/.config/kernelloop/keys/<run-id>`), mode 0600 in a 0700
  folder, refused when that folder lies inside the run folder or the agent's workspace.

`--resume` (and every later `submit`) reads the key the same way and checks it against the commitment: a missing
or wrong key is a `RunKeyError` that says where it looked. The worker processes never receive the key: it is
taken out of their environment (core/execute/pool.py), and they only see the seeds of the cases they run.
The per-run secret the evaluator uses is sha256(salt | key), so one user key serves many runs with unrelated draws.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from pathlib import Path

KEY_ENV = "KERNELLOOP_KEY"
KEY_DIR_ENV = "KERNELLOOP_KEY_DIR"
MIN_KEY_CHARS = 32
WORKSPACE_MARKER = "kernelloop-workspace.json"


class RunKeyError(RuntimeError):
    """The run's key is missing, malformed, stored where a proposer can read it, or not the run's."""


def key_dir() -> Path:
    """Where key files live: $KERNELLOOP_KEY_DIR, else $XDG_CONFIG_HOME/kernelloop/keys, else ~/.config/..."""
    if os.environ.get(KEY_DIR_ENV):
        return Path(os.environ[KEY_DIR_ENV]).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base).expanduser() / "kernelloop" / "keys"


def commitment(key: str, salt: str) -> str:
    """The archived commitment to the key: it checks a key without revealing it."""
    return "sha256:" + hashlib.sha256(f"kernelloop-run-key|{salt}|{key}".encode()).hexdigest()


def run_secret(key: str, salt: str) -> str:
    """The secret the evaluator derives seeds and held-out cases from."""
    return hashlib.sha256(f"kernelloop-run-secret|{salt}|{key}".encode()).hexdigest()


def _env_key() -> str | None:
    key = os.environ.get(KEY_ENV)
    if key is None or key == "":
        return None
    key = key.strip()
    if len(key) < MIN_KEY_CHARS:
        raise RunKeyError(f"${KEY_ENV} holds {len(key)} characters; a run key needs at least {MIN_KEY_CHARS} "
                          f"(e.g. python3 -c 'import secrets; print(secrets.token_hex(32))')")
    return key


def protected_roots(run_dir: Path) -> list[Path]:
    """Folders a proposer can read: the run folder and, when it lies in an agent workspace, that workspace."""
    run_dir = Path(run_dir).resolve()
    roots = [run_dir]
    for parent in [run_dir, *run_dir.parents]:
        if (parent / WORKSPACE_MARKER).is_file():
            roots.append(parent)
            break
    return roots


def _check_outside(path: Path, run_dir: Path) -> None:
    p = path.resolve()
    for root in protected_roots(run_dir):
        if p == root or root in p.parents:
            raise RunKeyError(f"the key folder {path.parent} lies inside {root}, which a proposer can read: set "
                              f"${KEY_DIR_ENV} to a folder outside the run folder and the agent workspace")


def key_file(run_id: str) -> Path:
    return key_dir() / run_id


def new_key(run_dir: Path) -> tuple[str, str]:
    """A key for a new run and where it comes from ('env' or 'file'); checks the key folder is out of reach."""
    key = _env_key()
    if key is not None:
        return key, "env"
    _check_outside(key_dir() / "x", run_dir)
    return secrets.token_hex(32), "file"


def save_key(run_id: str, key: str, run_dir: Path) -> Path:
    """Write a new run's key file (0600, in a 0700 folder). Raises RunKeyError when it cannot."""
    path = key_file(run_id)
    _check_outside(path, run_dir)
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(key + "\n")
    except OSError as e:
        raise RunKeyError(f"cannot store the run's key in {path}: {e}; set ${KEY_DIR_ENV} to a writable folder "
                          f"outside the run folder, or give the key in ${KEY_ENV}") from None
    return path


def load_key(run_id: str, salt: str, expected: str, run_dir: Path) -> str:
    """The run's key from $KERNELLOOP_KEY or its key file, checked against the archived commitment."""
    key = _env_key()
    where = f"${KEY_ENV}"
    if key is None:
        path = key_file(run_id)
        where = str(path)
        try:
            key = path.read_text().strip()
        except FileNotFoundError:
            raise RunKeyError(
                f"run {run_id}: its key is missing: ${KEY_ENV} is not set and {path} does not exist. The key "
                f"stays with the user who started the run (the archive holds only its commitment {expected[:19]}...); "
                f"copy the key file there, point ${KEY_DIR_ENV} at its folder, or set ${KEY_ENV}") from None
        except OSError as e:
            raise RunKeyError(f"run {run_id}: cannot read its key file {path}: {e}") from None
        _check_outside(path, run_dir)
    if commitment(key, salt) != expected:
        raise RunKeyError(f"run {run_id}: the key in {where} is not this run's key (its commitment differs from the "
                          f"archived {expected[:19]}...)")
    return key


def start_run(run_dir: Path, run_id_of) -> tuple[str, dict, str]:
    """A new run's key: (run id from `run_id_of(salt)`, the record the archive keeps -- salt, commitment, source
    --, the evaluator's secret). The key file, when there is one, is written before the run exists."""
    salt = secrets.token_hex(16)
    key, source = new_key(run_dir)
    run_id = run_id_of(salt)
    if source == "file":
        save_key(run_id, key, run_dir)
    return run_id, {"salt": salt, "commitment": commitment(key, salt), "source": source}, run_secret(key, salt)


def resume_secret(run: dict, run_dir: Path) -> str:
    """The secret of an archived run, from its key checked against the archived commitment (runs archived before
    keys existed kept their secret in the options; they keep it)."""
    opts = run["options"]
    if "secret" in opts:
        return opts["secret"]
    k = opts["key"]
    return run_secret(load_key(run["id"], k["salt"], k["commitment"], run_dir), k["salt"])


__all__ = ["KEY_DIR_ENV", "KEY_ENV", "RunKeyError", "commitment", "key_dir", "key_file", "load_key", "new_key",
           "protected_roots", "resume_secret", "run_secret", "save_key", "start_run"]
