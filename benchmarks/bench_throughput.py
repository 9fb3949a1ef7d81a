"""Throughput against an endpoint: ragray's influence run vs the ideal and vs the seed's loop.

    python benchmarks/bench_throughput.py [--latency 0.5] [--limit 64] [--repeat 5]
        [--out benchmarks/results/throughput.json]

A loopback OpenAI-compatible server (:mod:`ragray.loopback`, its own process) answers every
request after ``--latency`` seconds and serves ``--limit`` at once, so no client can get more than
``limit / latency`` answers per second: the ideal. Every variant is a full ``run_influence``
(``--backend openai``, drop-one generate mode, the demo set's retrieval, influence, verdicts and
lexical answer metrics, defaults otherwise), with the call cache off unless the variant is about
it; calls/s is measured at the server (answers over the seconds from the first request to the
last answer). Workload: the demo set (36 questions, k = 10: 11 calls each) repeated ``--repeat``
times under new ids.

The embedding answer metrics (``metrics.embedding``: MiniLM over the question, answer, gold and
ten passages) cost about 0.45 s of CPU per question on a 2-core machine — a client-side limit of
about 2 questions (24 calls) per second here, whatever the endpoint. The variants therefore run
with ``metrics.embedding=false``; **embedding** runs the default set with them on and reports that
limit beside the rest.

- **seed**: the seed's loop, one request at a time (``concurrency 1``, one question in flight);
- **before**: ragray before questions in flight (``concurrency 4``, one question at a time: the
  issue's 2.2 calls/s);
- **in_flight**: ``concurrency 64`` with 1, 4, 16, 32 questions in flight on the demo set; their
  tables must be identical (timings aside);
- **default**: today's defaults on the repeated set, against the ideal and the seed;
- **cache** (call cache on, a fresh cache folder): the repeated set once (its copies share prompts:
  each distinct prompt is sent once, even when two questions in flight ask for it together), the
  same run again (nothing sent), and a second "trial" that differs only in the similarity measure
  (nothing sent: a sweep whose trials share prompts pays for them once).

``--defaults`` (issue 28) runs only the rows that choose the defaults, written into the same JSON
under ``defaults``: the demo set five times, each copy's questions worded apart so no prompt
repeats (180 questions), every setting at ragray's defaults apart from the endpoint — answer
metrics with MiniLM on, ``influence.mode auto`` (log-prob on this server, closed book on: 12 calls
a question), the call and embedding caches on in a fresh folder — at 1.0 s x 32 and 0.5 s x 64,
for several ``max_questions_in_flight``; then the default run again on its filled caches (the
cached rerun's wall time).
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.machine import machine_info, save_result  # noqa: E402
from ragray.config import load_config  # noqa: E402
from ragray.pipeline import run_influence  # noqa: E402

DEMO = Path(__file__).resolve().parents[1] / "ragray" / "demo" / "demo.jsonl"
TIMED = {"seconds", "latency_s"}


class Server:
    """``python -m ragray.loopback`` in its own process (its own GIL), with its stats over HTTP."""

    def __init__(self, latency: float, limit: int, over_limit: str = "queue", retry_after: float = 0.05) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ragray.loopback", "--latency", str(latency), "--limit", str(limit),
             "--over-limit", over_limit, "--retry-after", str(retry_after), "--port", str(self.port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        import httpx

        self.http = httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=30)
        deadline = time.time() + 60
        while True:
            try:
                self.http.get("/stats")
                break
            except httpx.TransportError:
                if time.time() > deadline or self.proc.poll() is not None:
                    raise RuntimeError(f"loopback server did not start: {self.proc.stderr.read()}") from None
                time.sleep(0.1)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def reset(self) -> None:
        self.http.post("/stats/reset")

    def stats(self) -> dict[str, Any]:
        return self.http.get("/stats").json()

    def set_limit(self, limit: int) -> None:
        self.http.post("/limit", json={"limit": limit})

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def repeated_demo(path: Path, repeat: int) -> Path:
    rows = [json.loads(line) for line in DEMO.read_text().splitlines() if line.strip()]
    with path.open("w") as fh:
        for r in range(repeat):
            for row in rows:
                fh.write(json.dumps({**row, "id": f"{row['id']}-r{r}"}) + "\n")
    return path


#: how each copy of the demo set asks its questions (copy 0: as written)
WORDINGS = ("{q}", "Quick question: {q}", "Please tell me: {q}", "I wonder: {q}", "Help me out here. {q}")


def worded_demo(path: Path, repeat: int) -> Path:
    """The demo set ``repeat`` times, each copy's questions worded apart: no prompt repeats."""
    rows = [json.loads(line) for line in DEMO.read_text().splitlines() if line.strip()]
    with path.open("w") as fh:
        for r in range(repeat):
            for row in rows:
                fh.write(json.dumps({**row, "id": f"{row['id']}-w{r}",
                                     "question": WORDINGS[r % len(WORDINGS)].format(q=row["question"])
                                     + (f" ({r // len(WORDINGS)})" if r >= len(WORDINGS) else "")}) + "\n")
    return path


def run(server: Server, out: Path, data: Path, limit: int | None, *overrides: str,
        base: tuple[str, ...] = ("influence.mode=loo", "metrics.embedding=false")) -> dict[str, Any]:
    config = load_config(None, [
        f"data.path={data}", "generation.backend=openai", f"generation.openai.base_url={server.base_url}",
        "generation.model=loopback", *base, *([f"data.limit={limit}"] if limit else []), *overrides,
    ])
    server.reset()
    began = time.perf_counter()
    result = run_influence(config, out, progress=False)
    wall = time.perf_counter() - began
    stats = server.stats()
    s = result.summary
    return {"questions": s.n_questions, "calls": s.n_calls, "errors": s.errors, "wall_s": round(wall, 3),
            "server_answered": stats["answered"], "server_calls_per_s": stats["answered_per_second"],
            "server_max_in_flight": stats["max_in_flight"], "answered_twice": stats["answered_twice"],
            "server_rejected": stats["rejected"], "backend_settings": s.backend_settings,
            "calls_per_s_wall": round(s.n_calls / wall, 2), "cache": s.cache, "overrides": list(overrides),
            "out": str(out)}


def tables(out: str) -> dict[str, list[dict]]:
    import pyarrow.parquet as pq

    return {name: [{k: v for k, v in row.items() if k not in TIMED}
                   for row in pq.read_table(Path(out) / f"{name}.parquet").to_pylist()]
            for name in ("questions", "passages", "calls")}


def defaults_rows(work: Path, repeat: int, flights: list[int],
                  settings: tuple[tuple[float, int], ...] = ((1.0, 32), (0.5, 64))) -> dict[str, Any]:
    """The ``--defaults`` rows (see the module docstring)."""
    data = worded_demo(work / "demo_worded.jsonl", repeat)
    out: dict[str, Any] = {"workload": f"demo set x{repeat}, questions worded apart (no prompt repeats), "
                                       "ragray defaults apart from the endpoint", "settings": {}}
    for latency, limit in settings:
        server = Server(latency, limit)
        ideal = limit / latency
        rows: dict[str, Any] = {}
        try:
            for n in flights:
                cache = work / f"cache-{latency}-{limit}-{n}"
                row = run(server, work / f"d-{latency}-{limit}-{n}", data, None, f"cache.dir={cache}",
                          f"execution.max_questions_in_flight={n}", base=())
                rows[str(n)] = {**row, "share_of_ideal": row["server_calls_per_s"] / ideal}
                print(f"defaults {latency} s x {limit}, {n} in flight:", round(row["server_calls_per_s"], 1),
                      "calls/s", f"({rows[str(n)]['share_of_ideal']:.2f} of ideal)", flush=True)
            default_n = str(questions_default())
            cache = work / f"cache-{latency}-{limit}-{default_n}"
            if default_n in rows:
                again = run(server, work / f"d-{latency}-{limit}-{default_n}-again", data, None, f"cache.dir={cache}",
                            f"execution.max_questions_in_flight={default_n}", base=())
                rows["cached_rerun"] = {"wall_s": again["wall_s"], "server_answered": again["server_answered"],
                                        "cache": again["cache"],
                                        "first_run_wall_s": rows[default_n]["wall_s"]}
                print("cached rerun:", again["wall_s"], "s, sent", again["server_answered"], flush=True)
        finally:
            server.close()
        out["settings"][f"{latency}s_x{limit}"] = {"latency_s": latency, "limit": limit, "ideal_calls_per_s": ideal,
                                                  "default_in_flight": questions_default(), "runs": rows}
    return out


def cap_rows(work: Path, repeat: int, latency: float = 1.0, cap: int = 32, drop_to: int = 16,
             drop_after_s: float = 30.0) -> dict[str, Any]:
    """The ``--cap`` rows (issue 34): a server that answers 429 with ``Retry-After: 1`` above ``cap``
    requests in flight, ragray at defaults on the worded demo set; the same with the cap dropping to
    ``drop_to`` after ``drop_after_s`` seconds; and the queueing server of the same size, for
    comparison with the ``defaults`` rows."""
    import threading

    data = worded_demo(work / "demo_worded.jsonl", repeat)
    ideal = cap / latency
    out: dict[str, Any] = {"workload": f"demo set x{repeat}, questions worded apart, ragray defaults apart from the "
                                       "endpoint", "latency_s": latency, "cap": cap, "ideal_calls_per_s": ideal}
    server = Server(latency, cap, over_limit="reject", retry_after=1.0)
    try:
        row = run(server, work / "cap-fixed", data, None, f"cache.dir={work / 'cap-cache-1'}", base=())
        out["fixed_cap"] = {**row, "share_of_cap": row["server_calls_per_s"] / ideal,
                            "lost_or_duplicated": row["calls"] - row["server_answered"] + row["answered_twice"]}
        print(f"cap {cap} (429 above it): {row['server_calls_per_s']:.1f} calls/s "
              f"({out['fixed_cap']['share_of_cap']:.2f} of the cap), settled: "
              f"{(row['backend_settings'] or {}).get('concurrency')}", flush=True)
        from ragray.generation import concurrency

        learn, concurrency.SAME_LEVEL = concurrency.SAME_LEVEL, -1  # no level ever repeats: halving only
        try:
            row = run(server, work / "cap-halving", data, None, f"cache.dir={work / 'cap-cache-0'}", base=())
        finally:
            concurrency.SAME_LEVEL = learn
        out["fixed_cap_halving_only"] = {**row, "share_of_cap": row["server_calls_per_s"] / ideal,
                                         "note": "the same run with cap learning switched off (the rule before)"}
        print(f"cap {cap}, halving only: {row['server_calls_per_s']:.1f} calls/s", flush=True)
        server.set_limit(cap)
        timer = threading.Timer(drop_after_s, server.set_limit, args=(drop_to,))
        timer.start()
        try:
            row = run(server, work / "cap-drop", data, None, f"cache.dir={work / 'cap-cache-2'}", base=())
        finally:
            timer.cancel()
        out["cap_drops"] = {**row, "drop": f"{cap} -> {drop_to} after {drop_after_s:g} s",
                            "lost_or_duplicated": row["calls"] - row["server_answered"] + row["answered_twice"]}
        print(f"cap {cap} -> {drop_to}: errors {row['errors']}, lost or duplicated "
              f"{out['cap_drops']['lost_or_duplicated']}, settled: {(row['backend_settings'] or {}).get('concurrency')}",
              flush=True)
    finally:
        server.close()
    server = Server(latency, cap)
    try:
        row = run(server, work / "queue", data, None, f"cache.dir={work / 'cap-cache-3'}", base=())
        out["queueing_server"] = {**row, "share_of_ideal": row["server_calls_per_s"] / ideal}
        print(f"queueing server {latency:g} s x {cap}: {row['server_calls_per_s']:.1f} calls/s", flush=True)
    finally:
        server.close()
    out["acceptance"] = {
        "fixed cap >= 0.9 of it": out["fixed_cap"]["share_of_cap"] >= 0.9,
        "nothing lost or sent twice (fixed, dropping)": out["fixed_cap"]["lost_or_duplicated"] == 0
        and out["cap_drops"]["lost_or_duplicated"] == 0 and out["cap_drops"]["errors"] == 0,
        "followed the drop": ((out["cap_drops"]["backend_settings"] or {}).get("concurrency") or {}).get("limit", 99)
        <= drop_to,
    }
    return out


def questions_default() -> int:
    """The openai backend's default questions in flight (what ``null`` gives)."""
    from ragray.generation import GENERATORS

    return GENERATORS.get("openai").default_questions_in_flight


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--latency", type=float, default=0.5)
    ap.add_argument("--limit", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=5, help="the demo set this many times for the default run")
    ap.add_argument("--seed-questions", type=int, default=4, help="questions of the one-at-a-time seed loop")
    ap.add_argument("--out", default="benchmarks/results/throughput.json")
    ap.add_argument("--defaults", action="store_true", help="only the rows that choose the defaults (issue 28)")
    ap.add_argument("--flights", type=int, nargs="+", default=[8, 16, 32, 64], help="--defaults: questions in flight")
    ap.add_argument("--settings", nargs="+", default=["1.0x32", "0.5x64"], help="--defaults: LATENCYxLIMIT servers")
    ap.add_argument("--cap", action="store_true", help="only the capped-endpoint rows (issue 34): 429 above 32")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ragray-throughput-"))
    if args.cap:
        path = Path(args.out)
        result = json.loads(path.read_text()) if path.is_file() else {}
        result["cap"] = {**cap_rows(work, args.repeat), "machine": machine_info(("httpx", "uvicorn", "starlette"))}
        save_result(path, result)
        print(json.dumps(result["cap"]["acceptance"], indent=1))
        print(f"-> {path}")
        return 0
    if args.defaults:
        path = Path(args.out)
        result = json.loads(path.read_text()) if path.is_file() else {}
        settings = tuple((float(x.split("x")[0]), int(x.split("x")[1])) for x in args.settings)
        result["defaults"] = {**defaults_rows(work, args.repeat, args.flights, settings),
                              "machine": machine_info(("httpx", "uvicorn", "starlette", "torch"))}
        save_result(path, result)
        print(f"-> {path}")
        return 0
    data = repeated_demo(work / "demo_x.jsonl", args.repeat)
    server = Server(args.latency, args.limit)
    ideal = args.limit / args.latency
    result: dict[str, Any] = {"machine": machine_info(("httpx", "uvicorn", "starlette")),
                              "server": {"latency_s": args.latency, "limit": args.limit, "ideal_calls_per_s": ideal},
                              "workload": f"demo set x{args.repeat} (new ids), k = 10, drop-one generate, "
                                          f"openai backend, defaults otherwise"}
    no_cache = "cache.calls=false"
    try:
        result["seed"] = run(server, work / "seed", DEMO, args.seed_questions, no_cache,
                             "generation.openai.concurrency=1", "execution.max_questions_in_flight=1")
        print("seed", result["seed"]["server_calls_per_s"], flush=True)
        result["before"] = run(server, work / "before", DEMO, 12, no_cache, "generation.openai.concurrency=4",
                               "execution.max_questions_in_flight=1")
        print("before", result["before"]["server_calls_per_s"], flush=True)
        flights = {}
        for n in (1, 4, 16, 32):
            flights[n] = run(server, work / f"flight{n}", DEMO, None, no_cache, f"execution.max_questions_in_flight={n}")
            print("in flight", n, flights[n]["server_calls_per_s"], flush=True)
        same = [tables(flights[n]["out"]) == tables(flights[1]["out"]) for n in flights]
        result["in_flight"] = {"runs": {str(n): v for n, v in flights.items()}, "tables_identical": all(same)}
        cache_dir = f"cache.dir={work / 'cache'}"
        default = run(server, work / "default", data, None, no_cache)
        print("default", default["server_calls_per_s"], flush=True)
        seed_rate = result["seed"]["server_calls_per_s"]
        result["default"] = {**default, "share_of_ideal": default["server_calls_per_s"] / ideal,
                             "x_seed": default["server_calls_per_s"] / seed_rate,
                             "x_before": default["server_calls_per_s"] / result["before"]["server_calls_per_s"]}
        embedding = run(server, work / "embedding", DEMO, None, no_cache, "metrics.embedding=true")
        result["embedding"] = {**embedding, "seconds_per_question_client": embedding["wall_s"] / embedding["questions"],
                               "note": "client CPU (MiniLM answer metrics on 2 cores) is the limit, not the endpoint"}
        print("embedding metrics on", embedding["server_calls_per_s"], flush=True)
        cold = run(server, work / "cached", data, None, cache_dir)
        again = run(server, work / "cached-again", data, None, cache_dir)
        trial = run(server, work / "trial-token-jaccard", data, None, cache_dir, "influence.similarity=token_jaccard")
        result["cache"] = {
            "first_run": {"calls": cold["calls"], "server_answered": cold["server_answered"],
                          "answered_twice": cold["answered_twice"], "cache": cold["cache"], "wall_s": cold["wall_s"],
                          "note": f"the demo set x{args.repeat}: its copies ask the same prompts"},
            "repeat_run": {"calls": again["calls"], "server_answered": again["server_answered"],
                           "cache": again["cache"], "wall_s": again["wall_s"]},
            "second_trial_other_similarity": {"calls": trial["calls"], "server_answered": trial["server_answered"],
                                              "cache": trial["cache"]},
            "calls_saved": sum(r["calls"] - r["server_answered"] for r in (cold, again, trial)),
        }
    finally:
        server.close()
    result["acceptance"] = {
        "share_of_ideal >= 0.90": result["default"]["share_of_ideal"] >= 0.90,
        "x_seed >= 20": result["default"]["x_seed"] >= 20,
        "tables identical in flight vs one at a time": result["in_flight"]["tables_identical"],
        "rerun sends zero calls": result["cache"]["repeat_run"]["server_answered"] == 0,
        "each distinct prompt sent once": result["cache"]["first_run"]["answered_twice"] == 0,
    }
    path = save_result(args.out, result)
    print(json.dumps({k: result[k] for k in ("default", "acceptance")}, indent=1, default=str))
    print(f"-> {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
