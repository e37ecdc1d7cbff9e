"""The cluster secret's file (``<cluster.state-dir>/secret``), kept private the way ssh keeps keys.

``flintlock cluster start`` writes the generated ``security.cluster.secret`` there and clients on
the same machine read it. Whoever reads the file can submit jobs, which run code on every host,
so:

- writing refuses a symlink (it would write through to wherever the link points), refuses a file
  owned by another user, and sets mode 0600 also on an existing file (``fchmod`` on the opened
  descriptor, so a rename in between cannot redirect it);
- reading refuses a symlink, a file owned by another user, and a file that the group or others
  may read or write (ssh's "Permissions 0644 ... are too open"), naming the ``chmod`` that fixes it.

Both raise ``InsecureSecretFileError`` (a ``FlintlockException``: the CLI prints its message).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from flintlock.exceptions import FlintlockException

__all__ = ["InsecureSecretFileError", "read_secret_file", "write_secret_file"]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


class InsecureSecretFileError(FlintlockException):
    """The secret file is a symlink, belongs to another user, or others may read it."""


def _check_not_symlink(path: Path) -> None:
    if path.is_symlink():
        raise InsecureSecretFileError(
            f"the cluster secret file {path} is a symbolic link; refusing to follow it. Remove the "
            "link (a regular file with mode 0600 is expected), or set security.cluster.secret.")


def _check_owner(path: Path, st: os.stat_result) -> None:
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        raise InsecureSecretFileError(
            f"the cluster secret file {path} belongs to user id {st.st_uid}, not to this user "
            f"({os.getuid()}); refusing to use it. Use a cluster.state-dir of your own.")


def write_secret_file(path: Path, value: str) -> None:
    """Write ``value`` to ``path`` with mode 0600 (an existing file's mode is fixed too).

    Raises:
        InsecureSecretFileError: ``path`` is a symlink or another user's file.
        OSError: the file cannot be written.
    """
    _check_not_symlink(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | _NOFOLLOW, 0o600)
    try:
        _check_owner(path, os.fstat(fd))
        os.fchmod(fd, 0o600)
        os.ftruncate(fd, 0)
        os.write(fd, value.encode("utf-8"))
    finally:
        os.close(fd)


def read_secret_file(path: Path) -> str | None:
    """The secret stored at ``path``; None when the file does not exist or is empty.

    Raises:
        InsecureSecretFileError: ``path`` is a symlink, another user's file, or readable or
            writable by the group or others (the message names ``chmod 600 <path>``).
        OSError: the file exists but cannot be read.
    """
    _check_not_symlink(path)
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        _check_owner(path, st)
        mode = stat.S_IMODE(st.st_mode)
        if mode & 0o077:
            raise InsecureSecretFileError(
                f"permissions {mode:04o} for the cluster secret file {path} are too open: others "
                f"could read the key that runs code on the cluster. Run `chmod 600 {path}` (and "
                "consider rotating the secret: `flintlock cluster stop`, delete the file, "
                "`flintlock cluster start`).")
        return f.read().decode("utf-8").strip() or None
