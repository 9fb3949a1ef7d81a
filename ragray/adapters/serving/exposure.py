"""No open server by accident: a server that listens beyond loopback needs an API key.

A client of the API can make the server work (load data, run models, write runs) and read what
it wrote; with no key anyone who reaches the port can. So a ``serve.host`` that is not loopback
(``0.0.0.0``, a LAN address, a host name) starts only when ``$<serve.api_key_env>`` is set, or
with ``serve.insecure`` / ``ragray serve --insecure``, which prints a warning at every start.
"""

from __future__ import annotations

import ipaddress
import os

from ragray.config import ServeConfig
from ragray.errors import ConfigError

__all__ = ["check_exposure", "is_loopback"]


def is_loopback(host: str) -> bool:
    """``localhost``, ``127.0.0.0/8`` and ``::1``; anything else (``0.0.0.0``, a name) is not."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:
        return False


def check_exposure(sc: ServeConfig, host: str | None = None) -> str | None:
    """Refuse (:class:`ConfigError`) to serve on a non-loopback ``host`` (default ``sc.host``)
    without an API key unless ``sc.insecure``; returns the warning to print when insecure."""
    host = sc.host if host is None else host
    if is_loopback(host) or os.environ.get(sc.api_key_env):
        return None
    if not sc.insecure:
        raise ConfigError(
            f"serve.host {host} is not loopback: anyone who reaches it could run models and read the runs. "
            f"Set ${sc.api_key_env} to require 'Authorization: Bearer <key>', or start with --insecure "
            "(serve.insecure=true) to serve without a key")
    return (f"WARNING: serving on {host} without an API key (--insecure): anyone who reaches this port can "
            f"start runs and read them; set ${sc.api_key_env} to require a key")
