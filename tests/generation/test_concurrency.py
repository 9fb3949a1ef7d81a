"""The adaptive endpoint limit: halves on throttles, learns a fixed cap and settles just under it,
follows a cap that moves (driven step by step against a simulated capped server, no threads)."""

from collections import deque

from ragray.generation.concurrency import PROBE_EVERY, AdaptiveLimit


def drive(limit: AdaptiveLimit, cap, steps: int) -> list[int]:
    """A server that answers requests in order, one per step, and refuses (429 at once) any request
    that would make more than ``cap(step)`` in flight; the client keeps its limit full. Returns the
    requests in flight at the server after each step."""
    server: deque = deque()
    seen = []
    for step in range(steps):
        while limit.active < limit.limit:
            ticket = limit.acquire()
            if len(server) >= cap(step):
                limit.release(ticket, throttled=True)  # retried later, as the generator does
            else:
                server.append(ticket)
        seen.append(len(server))
        if server:
            limit.release(server.popleft(), throttled=False)
    return seen


def test_a_fixed_cap_is_learned_and_the_limit_settles_under_it():
    limit = AdaptiveLimit(64)
    seen = drive(limit, lambda step: 32, 6000)
    assert limit.cap == 32 and limit.limit in (32, 33)  # 33 only while probing
    tail = seen[1000:]
    assert sum(tail) / len(tail) >= 0.97 * 32  # the halving rule alone averaged ~0.73 of the cap
    state = limit.state()
    assert state["limit"] == 32 and state["learned_cap"] == 33 and state["ceiling"] == 64
    assert state["cuts"] <= 2  # the first burst over the cap and at most one more before the cap is learned
    # probes above the cap cost about one throttled request each PROBE_EVERY x 32 successes
    assert state["throttled_requests"] - 32 <= 6000 / (PROBE_EVERY * 32) + 40


def test_a_cap_that_drops_is_followed_down_and_learned_again():
    limit = AdaptiveLimit(64)
    seen = drive(limit, lambda step: 32 if step < 3000 else 16, 8000)
    assert limit.cap == 16 and limit.state()["limit"] == 16
    assert max(seen[3100:]) <= 16  # once the 31 it held when the cap dropped are answered
    assert sum(seen[4000:]) / len(seen[4000:]) >= 0.97 * 16


def test_a_cap_that_rises_is_found_by_the_probes():
    limit = AdaptiveLimit(64)
    drive(limit, lambda step: 16 if step < 2000 else 40, 20000)
    assert limit.cap in (None, 40) and limit.state()["limit"] >= 39


def test_a_moving_limit_still_halves():
    """Throttles at different levels each time are no cap: the limit halves, as for an unknown limit."""
    limit = AdaptiveLimit(64)
    for level in (60, 40, 20):
        while limit.active < level and limit.active < limit.limit:
            limit.acquire()
        limit.release(limit.acquire() if limit.active < limit.limit else _last(limit), throttled=True)
        while limit.active:
            limit.release(_last(limit), throttled=False)
    assert limit.cap is None and limit.cuts == 3


def _last(limit):
    from ragray.generation.concurrency import Ticket

    return Ticket(limit._epoch, limit.active)


def test_adaptive_limit_halves_once_per_burst_and_recovers():
    limit = AdaptiveLimit(8)
    tickets = [limit.acquire() for _ in range(8)]
    for t in tickets:  # a burst of eight 429s from requests sent before the cut: one cut
        limit.release(t, throttled=True)
    assert (limit.limit, limit.cuts) == (4, 1)
    for _ in range(4):
        limit.release(limit.acquire(), throttled=False)
    assert limit.limit == 5  # one more after `limit` successes
    for _ in range(40):
        limit.release(limit.acquire(), throttled=False)
    assert limit.limit == 8  # never above the configured concurrency


def test_engine_counts_update_and_read_under_their_lock():
    """Two JSD questions (or Serve requests) can be inside one engine at once: each count's
    read-modify-write, and a snapshot, happen under the counts' lock (CPython's GIL rarely shows the
    race, so the test checks the lock is held rather than waiting for a lost update)."""
    import threading

    from ragray.generation.engine_counts import EngineCounts

    counts = EngineCounts()
    held = []

    class Watched(dict):
        def __setitem__(self, key, value):
            held.append(counts._lock.locked())
            super().__setitem__(key, value)

        def copy(self):
            held.append(counts._lock.locked())
            return dict(self)

    counts.values = Watched(counts.values)

    def work():
        for _ in range(2_000):
            counts.add(forward_passes=1, host_syncs=2)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    snap = counts.snapshot()
    assert snap["forward_passes"] == 8_000 and snap["host_syncs"] == 16_000
    assert held and all(held)
