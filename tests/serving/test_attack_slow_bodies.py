"""Issue 64, hole 5: slow bodies locked everyone out before auth. 24 connections each sending one
byte of a 1,000-byte body made every client, keyed ones included, get 503 until they closed
(admission wrapped the body check, which wrapped auth).

Now the key is checked on the headers, before the body is read and before admission counts the
request, and a body has ``serve.body_timeout_s`` to arrive. Over real sockets against uvicorn:
unkeyed slow senders get 401 at once, keyed slow senders 408 at the deadline, and keyed clients
are served throughout."""

import asyncio
import socket
import threading
import time

import pytest

httpx = pytest.importorskip("httpx")
uvicorn = pytest.importorskip("uvicorn")

from ragray.adapters.serving.local import local_app  # noqa: E402

KEY = "k-slow-1"
AUTH = {"Authorization": f"Bearer {KEY}"}


class _Server:
    """uvicorn serving ``app`` on a free loopback port, in a thread."""

    def __init__(self, app):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self):
        self.thread.start()
        deadline = time.time() + 30
        while not self.server.started and time.time() < deadline:
            time.sleep(0.05)
        return f"http://127.0.0.1:{self.port}"

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(10)


def _slow_sender(port: int, keyed: bool) -> socket.socket:
    """A connection that declares a 1,000-byte JSON body and sends its first byte only."""
    s = socket.create_connection(("127.0.0.1", port))
    auth = f"Authorization: Bearer {KEY}\r\n" if keyed else ""
    s.sendall((f"POST /retrieve HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{auth}"
               "Content-Length: 1000\r\n\r\n{").encode())
    return s


def _status(s: socket.socket, timeout: float) -> int | None:
    s.settimeout(timeout)
    try:
        head = s.recv(200)
    except (TimeoutError, socket.timeout):
        return None
    return int(head.split()[1]) if head.startswith(b"HTTP/") else None


@pytest.fixture()
def keyed(served_config):
    config = served_config.model_copy(update={"serve": served_config.serve.model_copy(update={"body_timeout_s": 8.0})})
    return local_app(config, api_key=KEY)


@pytest.mark.slow  # over 2 s: outside the fast subset (README)
@pytest.mark.timeout(120)
def test_a_slow_body_flood_leaves_keyed_clients_served(keyed):
    with _Server(keyed) as url:
        port = int(url.rsplit(":", 1)[1])
        unkeyed = [_slow_sender(port, keyed=False) for _ in range(24)]
        slow_keyed = [_slow_sender(port, keyed=True) for _ in range(24)]
        try:
            started = time.monotonic()
            assert [_status(s, 5) for s in unkeyed] == [401] * 24  # answered on the headers alone
            with httpx.Client(base_url=url, headers=AUTH, timeout=10) as client:
                for _ in range(3):  # while 24 keyed bodies are still arriving
                    assert client.get("/health").status_code == 200
                    r = client.post("/retrieve", json={"question": "Which ferry goes to Corran?"})
                    assert r.status_code == 200, r.text
            # served while the 24 keyed bodies were still pending (before their 8 s deadline)
            assert time.monotonic() - started < 8.0, "the keyed requests ran after the slow bodies' deadline"
            assert [_status(s, 20) for s in slow_keyed] == [408] * 24  # the body's deadline, then closed
        finally:
            for s in unkeyed + slow_keyed:
                s.close()


def test_the_key_is_checked_before_the_body_is_read():
    from ragray.adapters.serving.gate import Gate

    read = []

    async def app(scope, receive, send):  # never reached without the key
        read.append(await receive())

    async def receive():
        read.append("body")
        await asyncio.sleep(3600)

    sent = []

    async def send(message):
        sent.append(message)

    gate = Gate(app, key=KEY, limit=1000, body_timeout_s=5)
    scope = {"type": "http", "method": "POST", "path": "/x", "headers": [(b"content-length", b"1000")]}
    asyncio.run(asyncio.wait_for(gate(scope, receive, send), 1))
    assert sent[0]["status"] == 401 and read == []


@pytest.mark.parametrize("rid", [b"ab\xffcd", "é".encode(), b"a b", b"x" * 65])
def test_a_bad_request_id_header_is_400_not_500(client, rid):
    r = client.get("/health", headers=[(b"x-request-id", rid)])
    assert r.status_code == 400 and "X-Request-ID" in r.json()["error"], r.text
    assert len(r.headers.get_list("x-request-id")) == 1


def test_a_valid_request_id_is_echoed_and_an_empty_one_replaced(client):
    r = client.get("/health", headers={"x-request-id": "req-1.2:3"})
    assert r.status_code == 200 and r.headers["x-request-id"] == "req-1.2:3"
    r = client.get("/health", headers={"x-request-id": ""})
    assert r.status_code == 200 and len(r.headers["x-request-id"]) == 32
