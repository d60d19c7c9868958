"""The host's floor under the end-to-end latency: ``python -m mcpq.ops.bench.floor``.

``mcpq.ops.bench.throughput``'s 1-client phase (``tools/call`` sent → ``completed`` seen, polling
every 2 ms) against mcpq and, in alternating rounds of the same run, against a **bare server**
built of the same parts: Falcon's ASGI app under gunicorn with uvicorn's worker (httptools,
uvloop), one Redis script per request (redis-py on hiredis) on a private redis-server. It does
nothing else: no session, no checks, no sealing, no queue consumer, no worker process. Its
``tasks/get`` answers ``working`` at a task's first poll and ``completed`` from the second: the
path most mcpq tasks take (a no-op run ends after the first poll has read it).

Both run on the same shared host, so the bare server's numbers are what the host charges for any
server made of these parts, driven by this generator (its loopback wake-ups, its cold caches after
the 2 ms pause); mcpq's minus the bare server's is what mcpq itself costs (its protocol checks,
its task store, and its worker running the task on the same CPUs). The host drifts by tens of
percent within an hour, and the bare server's numbers with it: read mcpq's against the bare
server's of the same run, not against a number measured another day.

``--json`` prints one JSON object. A smoke test runs it tiny in CI (correctness only).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import redis

from mcpq.ops.bench.bare_target import bare_target
from mcpq.ops.bench.load import Load
from mcpq.ops.bench.loadgen import EndToEnd, OneClient, Target, end_to_end, steal_s
from mcpq.ops.bench.throughput import mcpq_target

#: What a script's run is in ``INFO commandstats`` (the check that the bare server used Redis).
SCRIPT_COMMANDS = ("evalsha", "eval")


@dataclass
class Floor:
    tasks: int
    rounds: int
    mcpq: OneClient
    bare: OneClient
    #: mcpq's e2e p50 minus the bare server's, round by round (ms)
    above_floor_ms: list[float]
    #: the bare server's Redis: scripts it ran (one per request, the check that it used Redis)
    bare_scripts: int
    steal_s: float

    def lines(self) -> list[str]:
        out = [f"1 client, tools/call sent -> completed seen, polling every 2 ms, {self.rounds}"]
        out[0] += f" alternating rounds of {self.tasks} tasks"
        for name, side in (("mcpq", self.mcpq), ("bare server", self.bare)):
            share = ", ".join(f"{n}: {s:.0%}" for n, s in side.polls.items())
            out += [
                f"  {name:<12} e2e p50 {side.e2e_p50_ms:6.2f} ms  p99 {side.e2e_p99_ms:6.2f} ms"
                f"  tools/call p50 {side.call_p50_ms:.2f} ms  tasks/get p50 {side.get_p50_ms:.2f}"
                f" ms  (tasks/get per task {share}; failed requests {side.failures})"
            ]
        rounds = ", ".join(f"{ms:.2f}" for ms in self.above_floor_ms)
        out += [
            f"  mcpq above the floor, by round: {rounds} ms"
            f" (median {statistics.median(self.above_floor_ms or [0.0]):.2f} ms)",
            f"  host steal time {self.steal_s:.2f} s"
            + ("  (noisy: latencies may be the host's)" if self.steal_s >= 0.1 else ""),
        ]
        return out


def measure(mcpq: Target, bare: Target, tasks: int, rounds: int) -> Floor:
    """``rounds`` rounds of ``tasks`` tasks on each, the first of each round alternating."""
    loads = {"mcpq": Load(mcpq.url), "bare": Load(bare.url)}
    for load in loads.values():  # connections, caches and the scripts' cache warm
        asyncio.run(end_to_end(load, max(5, tasks // 10)))
        load.failures = 0
    runs: dict[str, list[EndToEnd]] = {"mcpq": [], "bare": []}
    above: list[float] = []
    stolen = steal_s()
    for turn in range(rounds):
        order = ["mcpq", "bare"] if turn % 2 == 0 else ["bare", "mcpq"]
        found = {name: asyncio.run(end_to_end(loads[name], tasks)) for name in order}
        for name, run in found.items():
            runs[name].append(run)
        ours, bare_e2e = found["mcpq"].e2e, found["bare"].e2e
        if ours and bare_e2e:
            above.append(statistics.median(ours) - statistics.median(bare_e2e))
    with redis.Redis.from_url(bare.stack.redis_url) as admin:
        stats: dict[str, Any] = admin.info("commandstats")
    scripts = sum(int(stats.get(f"cmdstat_{name}", {}).get("calls", 0)) for name in SCRIPT_COMMANDS)
    return Floor(
        tasks,
        rounds,
        OneClient.of(runs["mcpq"], loads["mcpq"].failures),
        OneClient.of(runs["bare"], loads["bare"].failures),
        [round(ms, 3) for ms in above],
        scripts,
        round(steal_s() - stolen, 3),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m mcpq.ops.bench.floor", description=(__doc__ or "").split("\n\n")[0]
    )
    parser.add_argument("--tasks", type=int, default=500, help="tasks per round (500)")
    parser.add_argument("--rounds", type=int, default=4, help="rounds on each deployment (4)")
    parser.add_argument("--json", action="store_true", help="one JSON object")
    args = parser.parse_args(argv)
    with (
        tempfile.TemporaryDirectory(prefix="mcpq-floor-") as tmp,
        mcpq_target(Path(tmp) / "mcpq") as mcpq,
        bare_target(Path(tmp) / "bare") as bare,
    ):
        found = measure(mcpq, bare, args.tasks, args.rounds)
    print(json.dumps(asdict(found)) if args.json else "\n".join(found.lines()))
    return 1 if found.mcpq.failures or found.bare.failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
