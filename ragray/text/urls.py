"""URLs as they may be shown: without the credentials and the query an operator put in them.

An endpoint's ``base_url`` may hold a user and password (``http://op:pw@host/v1``) or a key in
its query (``?key=...``); a message that names the URL (a log line, an error a client reads)
shows ``http://host/v1``.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

__all__ = ["public_url", "strip_urls"]

_SCHEME = r"[A-Za-z][A-Za-z0-9+.-]*://"
_USERINFO = re.compile(rf"({_SCHEME})[^/\s@\"'<>]*@")
_QUERY = re.compile(rf"({_SCHEME}[^\s\"'<>?#]*)\?[^\s\"'<>#]*")


def public_url(url: str) -> str:
    """``url`` without its userinfo, query and fragment."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return strip_urls(url)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def strip_urls(text: str) -> str:
    """``text`` with every URL's userinfo and query removed."""
    return _QUERY.sub(r"\1", _USERINFO.sub(r"\1", text))
