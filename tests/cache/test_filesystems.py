"""The call cache's journal follows the filesystem: WAL on a local disk, the rollback journal on
a network filesystem shared by several nodes (SQLite's WAL index is shared memory: one host)."""

import sqlite3

from ragray.cache.calls import CallStore
from ragray.cache.filesystems import filesystem_of, is_network_filesystem, sqlite_journal_mode

MOUNTS = """\
/dev/vda / ext4 rw,relatime 0 0
proc /proc proc rw 0 0
nas:/export/cache /shared nfs4 rw,vers=4.2 0 0
nas:/export/with\\040space /mnt/with\\040space nfs rw 0 0
s3fs /mnt/bucket fuse.s3fs rw 0 0
tmpfs /shared/local tmpfs rw 0 0
"""


def test_the_longest_mount_point_decides():
    assert filesystem_of("/home/u/.cache/ragray/calls.sqlite", MOUNTS) == "ext4"
    assert filesystem_of("/shared/ragray/calls.sqlite", MOUNTS) == "nfs4"
    assert filesystem_of("/shared/local/calls.sqlite", MOUNTS) == "tmpfs"  # a local mount inside the share
    assert filesystem_of("/sharedx/calls.sqlite", MOUNTS) == "ext4"  # a prefix of the name is not a parent
    assert filesystem_of("/mnt/with space/c.sqlite", MOUNTS) == "nfs"
    assert is_network_filesystem("/mnt/bucket/c", MOUNTS) and not is_network_filesystem("/tmp/c", MOUNTS)


def test_journal_mode_per_filesystem():
    assert sqlite_journal_mode("/home/u/.cache/ragray/calls.sqlite", MOUNTS) == "WAL"
    assert sqlite_journal_mode("/shared/ragray/calls.sqlite", MOUNTS) == "DELETE"
    assert sqlite_journal_mode("/mnt/bucket/calls.sqlite", MOUNTS) == "DELETE"


def test_the_store_opens_with_the_journal_its_filesystem_needs(tmp_path):
    local = CallStore(tmp_path / "calls.sqlite")
    assert local.journal_mode == "WAL"  # tmp_path is on a local disk here
    shared = CallStore(tmp_path / "shared" / "calls.sqlite")
    shared.journal_mode = "DELETE"  # what it picks on NFS
    for store in (local, shared):
        store.put_many({"k": {"answer": "tern"}})
        assert store.get_many(["k"]) == {"k": {"answer": "tern"}}
        store.close()
    modes = []
    for store in (local, shared):
        db = sqlite3.connect(store.path)
        modes.append(db.execute("PRAGMA journal_mode").fetchone()[0])
        db.close()
    assert modes == ["wal", "delete"]
