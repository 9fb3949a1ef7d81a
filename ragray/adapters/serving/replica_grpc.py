"""A Serve replica on a loopback-only Ray keeps its inter-deployment gRPC port on loopback too.

Ray Serve 2.60 starts in every replica an inter-deployment gRPC server bound to ``[::]:0``: every
interface, whatever address the node has, with no setting to change it (ray-project/ray#64544). It
unpickles what it is sent, and without Ray's token auth it asks for nothing, so whoever reaches the
port runs code in the replica, past ``$RAGRAY_API_KEY``. On a node whose address is loopback (the
Ray ragray starts itself, :mod:`ragray.adapters.execution.ray_runtime`) no other node can call a
replica anyway, so there the replica's bind of a wildcard address becomes 127.0.0.1. Ray builds the
server after the deployment's constructor ran, so each deployment calls :func:`keep_on_loopback`
first thing. A replica on a cluster (a routable node address) is left as Ray makes it.
"""

from __future__ import annotations

import functools
import ipaddress
import logging
from collections.abc import Callable
from typing import Any

__all__ = ["keep_on_loopback", "loopback_address"]

log = logging.getLogger(__name__)

_WILDCARDS = ("[::]", "0.0.0.0", "")


def loopback_address(address: str) -> str:
    """``[::]:0`` / ``0.0.0.0:0`` / ``:0`` (every interface) as ``127.0.0.1:0``; any other as it is."""
    host, sep, port = address.rpartition(":")
    return f"127.0.0.1:{port}" if sep and host in _WILDCARDS else address


def _bind_on_loopback(add_port: Callable[[Any, str], int]) -> Callable[[Any, str], int]:
    @functools.wraps(add_port)
    def add_port_on_loopback(server: Any, address: str) -> int:
        return add_port(server, loopback_address(address))

    add_port_on_loopback.ragray_loopback = True  # type: ignore[attr-defined]
    return add_port_on_loopback


def keep_on_loopback() -> bool:
    """In a Serve replica on a node whose address is loopback, make the replica's inter-deployment
    gRPC server bind 127.0.0.1 (module docstring); True when it will. Elsewhere a no-op."""
    import ray
    from ray.serve._private import replica

    if not ipaddress.ip_address(ray.util.get_node_ip_address()).is_loopback:
        return False
    add_port = getattr(replica, "add_port_to_grpc_server", None)
    if add_port is None:  # another Serve: `ragray serve` lists what listens where, and says so
        log.warning("Ray Serve has no replica.add_port_to_grpc_server: its inter-deployment gRPC port is bound "
                    "as Serve binds it")
        return False
    if not getattr(add_port, "ragray_loopback", False):
        replica.add_port_to_grpc_server = _bind_on_loopback(add_port)
    return True
