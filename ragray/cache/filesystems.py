"""Which filesystem a cache file lives on: SQLite's WAL journal needs every process that opens
the database on one host (its index is shared memory), so a cache on a network filesystem —
the documented way for trials on several nodes to share ``cache.dir`` — uses the rollback
journal instead, which SQLite locks through the filesystem's own (POSIX) locks.

Read from ``/proc/self/mounts`` (Linux); elsewhere every path counts as local.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["NETWORK_FILESYSTEMS", "filesystem_of", "is_network_filesystem", "sqlite_journal_mode"]

#: filesystem types whose files other hosts open too (``fuse.*`` counts: sshfs, gcsfuse, s3fs, ...)
NETWORK_FILESYSTEMS = frozenset({
    "nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "lustre", "gpfs", "ceph", "glusterfs", "beegfs", "afs",
    "ocfs2", "gfs2", "efs", "virtiofs", "wekafs", "panfs", "fuse", "fuseblk",
})


def _unescape(field: str) -> str:
    """``/proc/mounts`` writes spaces, tabs, newlines and backslashes as octal escapes."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def filesystem_of(path: str | Path, mounts: str | None = None) -> str | None:
    """The type of the filesystem holding ``path`` (its longest mount point), None if unknown.
    ``mounts``: the text of ``/proc/self/mounts`` (tests)."""
    if mounts is None:
        try:
            mounts = Path("/proc/self/mounts").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
    target = os.path.realpath(os.path.abspath(os.fspath(path)))
    best, kind = "", None
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        point = _unescape(fields[1])
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, fields[2]
    return kind


def is_network_filesystem(path: str | Path, mounts: str | None = None) -> bool:
    kind = filesystem_of(path, mounts)
    return kind is not None and (kind in NETWORK_FILESYSTEMS or kind.startswith("fuse."))


def sqlite_journal_mode(path: str | Path, mounts: str | None = None) -> str:
    """``WAL`` on a local filesystem, ``DELETE`` (the rollback journal) on a network one."""
    return "DELETE" if is_network_filesystem(Path(path).parent, mounts) else "WAL"
