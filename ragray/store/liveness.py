"""Is the process that recorded a run still there? (``running`` versus ``interrupted``.)

A run is recorded with the process that runs it: pid, host name and the process's start time, and
its record gets a heartbeat every :data:`HEARTBEAT_S` seconds while the run goes on
(:mod:`ragray.store.recording`). A process killed by SIGKILL, the OOM killer or a lost machine
never ends its record, so whoever reads the record decides:

- on the host that ran it: gone when no process has that pid, or when the process with that pid
  started at another time (the pid was reused);
- on another host (the pid means nothing there): gone when the last heartbeat is older than
  :data:`STALE_AFTER_S`.

A record without a pid (written before ragray recorded one) and without a heartbeat cannot be
judged and stays ``running``.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

__all__ = ["HEARTBEAT_S", "STALE_AFTER_S", "ProcessInfo", "is_gone", "process_start_time", "this_process"]

#: how often a running run's record is touched
HEARTBEAT_S = 30.0
#: a run on another host whose heartbeat is older than this is ``interrupted`` (ten missed beats)
STALE_AFTER_S = 300.0
#: process start times read twice may differ by clock-tick rounding; a reused pid starts later
_START_TOLERANCE_S = 1.0


@dataclass(frozen=True)
class ProcessInfo:
    """The process a run is recorded with. ``started``: its start time (seconds since the epoch),
    None where it cannot be read (no ``/proc``)."""

    pid: int
    host: str
    started: float | None


def _boot_time() -> float | None:
    try:
        for line in Path("/proc/stat").read_text().splitlines():
            if line.startswith("btime "):
                return float(line.split()[1])
    except OSError:
        pass
    return None


def process_start_time(pid: int) -> float | None:
    """When process ``pid`` started (seconds since the epoch), from ``/proc`` (Linux); None when
    it cannot be read (no such process, another platform)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    boot = _boot_time()
    if boot is None:
        return None
    # field 22, counted after the command name, which is in parentheses and may hold spaces
    fields = stat[stat.rindex(")") + 2:].split()
    try:
        ticks = int(fields[19])
    except (IndexError, ValueError):
        return None
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def this_process() -> ProcessInfo:
    """This process: its pid, host name and start time."""
    pid = os.getpid()
    return ProcessInfo(pid, socket.gethostname(), process_start_time(pid))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        return True
    except OSError:
        return False
    return True


def is_gone(pid: int | None, host: str | None, started: float | None, heartbeat_at: datetime | None,
            now: datetime, here: str | None = None) -> bool:
    """Whether the process recorded as ``pid`` on ``host`` (started at ``started``, last heartbeat
    ``heartbeat_at``, naive UTC like ``now``) is gone (see the module docstring). ``here``: this
    host's name (default :func:`socket.gethostname`)."""
    if pid is not None and host is not None and host == (here or socket.gethostname()):
        if not _pid_alive(pid):
            return True
        if started is None:
            return False
        now_started = process_start_time(pid)
        return now_started is not None and abs(now_started - started) > _START_TOLERANCE_S
    if heartbeat_at is None:
        return False
    return now - heartbeat_at > timedelta(seconds=STALE_AFTER_S)
