"""Which of Ray's listening ports the network reaches, read from the sockets themselves.

Ray's processes talk gRPC with no authentication unless token auth is on (``RAY_AUTH_MODE=token``),
so a port of Ray that listens beyond loopback lets whoever reaches it run code in the cluster
(https://docs.ray.io/en/latest/ray-security/index.html). ``ragray serve`` on a non-loopback host
says where Ray listens from the listening sockets of Ray's processes (psutil, which Ray ships), not
from what ragray asked Ray for: a Ray of its own is the process tree of the server, and a Ray whose
GCS port no process of that tree listens on is a cluster the server joined.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["RAY_SECURITY_URL", "ListeningSocket", "describe", "exposed", "is_loopback_ip", "listening_sockets",
           "process_tree", "report"]

RAY_SECURITY_URL = "https://docs.ray.io/en/latest/ray-security/index.html"


@dataclass(frozen=True)
class ListeningSocket:
    """One listening TCP socket: the process that holds it and the address it is bound to."""

    pid: int
    process: str
    ip: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.ip}]" if ":" in self.ip else self.ip
        return f"{host}:{self.port} ({self.process}, pid {self.pid})"


def is_loopback_ip(ip: str) -> bool:
    """127.0.0.0/8 and ::1, also written IPv4-mapped (``::ffff:127.0.0.1``: how a dual-stack gRPC
    socket bound to 127.0.0.1 shows); the wildcards ``0.0.0.0`` and ``::`` are every interface."""
    addr = ipaddress.ip_address(ip.split("%", 1)[0])  # a link-local address may carry "%<interface>"
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped  # Python < 3.13 calls ::ffff:127.0.0.1 not loopback
    return addr.is_loopback


def exposed(sockets: Iterable[ListeningSocket], allowed_ports: Iterable[int] = ()) -> list[ListeningSocket]:
    """The sockets the network reaches (not bound to loopback), but for ``allowed_ports``."""
    allowed = set(allowed_ports)
    return [s for s in sockets if s.port not in allowed and not is_loopback_ip(s.ip)]


def process_tree(pid: int) -> list[int]:
    """``pid`` and every process under it (Ray's GCS, raylet, agents and workers, for a driver)."""
    import psutil  # a dependency of Ray (vendored in ray/thirdparty_files)

    return [pid, *(child.pid for child in psutil.Process(pid).children(recursive=True))]


def listening_sockets(pids: Iterable[int]) -> list[ListeningSocket]:
    """The listening TCP sockets (IPv4 and IPv6) of ``pids``; a process gone meanwhile has none."""
    import psutil

    out: list[ListeningSocket] = []
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            name = proc.name()
            conns = proc.net_connections(kind="tcp")
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        out.extend(ListeningSocket(pid, name, c.laddr.ip, c.laddr.port) for c in conns
                   if c.status == psutil.CONN_LISTEN)
    return sorted(out, key=lambda s: (s.port, s.pid))


def _port(address: str) -> int:
    return int(address.rsplit(":", 1)[1])


def describe(sockets: Sequence[ListeningSocket], *, gcs_address: str, http: str) -> str:
    """The line ``ragray serve`` prints about Ray's ports. ``sockets``: those of the server's
    process tree; ``gcs_address``: the GCS it is connected to; ``http``: ``host:port`` of the API,
    the one port meant for the network. No socket on the GCS port: a cluster it joined, whose
    ports this machine cannot see, so the line names it and gives Ray's guidance."""
    if not any(s.port == _port(gcs_address) for s in sockets):
        return (f"Ray: joined the cluster at {gcs_address}; its ports are the cluster's. Ray's processes do not "
                "authenticate each other unless token auth is on (RAY_AUTH_MODE=token): keep the cluster on a "
                f"trusted network and firewall its ports ({RAY_SECURITY_URL})")
    ray_sockets = [s for s in sockets if s.port != _port(http)]
    open_ = exposed(ray_sockets)
    if not open_:
        return (f"Ray: its {len(ray_sockets)} listening ports ({len({s.pid for s in ray_sockets})} processes) are "
                f"on loopback only; the network reaches the API at {http}")
    return (f"WARNING: {len(open_)} of Ray's listening ports are reachable from the network, where anyone can run "
            f"code in this server through them ({RAY_SECURITY_URL}): " + ", ".join(map(str, open_)))


def report(*, gcs_address: str, http: str) -> str:
    """:func:`describe` for this process's tree, or why the sockets could not be read."""
    try:
        return describe(listening_sockets(process_tree(os.getpid())), gcs_address=gcs_address, http=http)
    except (ImportError, OSError) as exc:  # no psutil, or /proc unreadable: say so, claim nothing
        return f"Ray: could not list the listening ports of Ray's processes ({exc}); check with `ss -ltnp`"
