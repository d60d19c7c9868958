"""The lease keeper's renewals as its Redis sees them (``mcpq.workers.heartbeat.LeaseKeeper``):
how many round trips each renewal takes, how many runs each renews, how often they come and
what they cost Redis. Measured by ``mcpq.ops.bench.waiting_runs`` while a worker holds its runs.

Two windows, one after the other, on a Redis that only this stack uses:

- ``INFO commandstats`` before and after the first: EVALSHA's calls and microseconds. (No MONITOR
  then: it would slow every command it reports.) In steady state nearly every script is a
  renewal; the second window counts the others, to say how far that holds.
- ``MONITOR`` over the second: every EVALSHA of the ``renew`` script (its SHA1 from the store's
  script registry, ``mcpq.shared.store.scripts``), by Redis's own clock and the client
  connection it came on. The keeper renews all its runs in one pipeline, then sleeps a period,
  so its renewals come in bursts apart by at least a period: a burst is one renewal round (or,
  where a keeper late for its period sends them back to back, each run once: a run renewed
  again begins the next round). Its
  runs are the refs its scripts name (a call renews up to ``RENEW_CHUNK`` runs of one shard),
  its round trips the connections they came on (a pipeline is one connection's). The first
  burst is left out (it may have begun before MONITOR did), and so is the last if it may have
  gone on after the window.
"""

from __future__ import annotations

import contextlib
import itertools
import re
import socket
import statistics
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

import redis

from mcpq.shared.store import scripts

#: A MONITOR line of an EVALSHA: Redis's time, the client's address, the SHA1, then the rest.
_EVALSHA = re.compile(rb'^\+(\d+\.\d+) \[\d+ ([^\]]+)\] "EVALSHA" "([0-9a-f]{40})" (.*)$', re.M)
#: One quoted argument of a MONITOR line (Redis escapes quotes and backslashes in it).
_ARG = re.compile(rb'"((?:[^"\\]|\\.)*)"')


@dataclass
class Renewals:
    #: The keeper's renewal period: min(max(lease / 3, 0.05), 0.5) s.
    period_s: float
    window_s: float
    #: Complete renewal rounds seen under MONITOR.
    rounds: int
    #: Mean seconds from one round's start to the next's (a period plus the round's own time).
    every_s: float
    #: ``period_s / every_s``: 1 when every period has its renewal.
    per_period: float
    #: The same without MONITOR (the first window): its renew scripts over the runs of a round
    #: are its rounds.
    per_period_unmonitored: float
    #: Connections (round trips) per round: the most any round took.
    round_trips: int
    #: Runs renewed per round (distinct task refs), the fewest and the most.
    runs_min: int
    runs_max: int
    #: Median span of a round on Redis, its first renewal to its last (slowed by MONITOR).
    span_ms: float
    #: EVALSHA's mean time in Redis over the first window (commandstats), and that times the
    #: renew scripts of a round: what one renewal round costs Redis.
    script_us: float
    redis_ms_per_round: float
    #: Other scripts in the MONITOR window, beside the renewals counted.
    other_scripts: int
    #: Runs renewed in the MONITOR window, and the renew scripts that did it.
    renew_scripts: int
    renew_calls: int = 0
    #: Renew scripts per round (one per shard and chunk of runs), the median.
    calls_per_round: float = 0.0

    def render(self) -> str:
        runs = f"{self.runs_min}" if self.runs_min == self.runs_max else f"{self.runs_min}-"
        runs += "" if self.runs_min == self.runs_max else f"{self.runs_max}"
        return "\n".join(
            [
                f"  lease renewals, {self.window_s:g} s under MONITOR (+{self.window_s:g} s"
                f" commandstats), period {self.period_s:g} s",
                f"    renewal rounds            {self.rounds:9d} (every {self.every_s:.3f} s)",
                f"    renewals per period       {self.per_period:9.2f}"
                f" ({self.per_period_unmonitored:.2f} without MONITOR)",
                f"    round trips per renewal   {self.round_trips:9d}",
                f"    runs per renewal          {runs:>9} ({self.calls_per_round:g} script calls)",
                f"    round on Redis, median    {self.span_ms:9.1f} ms (first -> last, MONITOR on)",
                f"    Redis time per renewal    {self.redis_ms_per_round:9.1f} ms"
                f" ({self.script_us:.1f} us per script, commandstats)",
                f"    other scripts in window   {self.other_scripts:9d}"
                f" (runs renewed: {self.renew_scripts}, in {self.renew_calls} calls)",
            ]
        )


def renew_sha(admin: redis.Redis) -> str:
    """The SHA1 the store calls ``renew`` by (computed here; nothing is loaded)."""
    return str(admin.register_script(scripts.source("renew")).sha)


def measure(redis_url: str, period_s: float, window_s: float) -> Renewals:
    """Both windows, ``window_s`` each (at least four periods)."""
    window_s = max(window_s, 4 * period_s)
    with redis.Redis.from_url(redis_url) as admin:
        sha = renew_sha(admin)
        before = admin.info("commandstats").get("cmdstat_evalsha", {})
        time.sleep(window_s)
        after = admin.info("commandstats").get("cmdstat_evalsha", {})
        calls = int(after.get("calls", 0)) - int(before.get("calls", 0))
        # (Every EVALSHA, renewals or not: MONITOR's window counts the others.)
        usec = int(after.get("usec", 0)) - int(before.get("usec", 0))
        script_us = usec / calls if calls else 0.0
        renewals, calls_seen, others, end = _monitor(redis_url, sha, window_s)
    rounds = _rounds(renewals, gap=period_s / 2)
    if rounds and rounds[-1][-1][0] > end - period_s / 2:
        rounds.pop()  # it may have gone on after the window
    rounds = rounds[1:]  # it may have begun before MONITOR did
    starts = [burst[0][0] for burst in rounds]
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    every = statistics.mean(gaps) if gaps else 0.0
    runs = [len({ref for _, _, ref in burst}) for burst in rounds] or [0]
    per_round = [
        len([at for at in calls_seen if burst[0][0] <= at <= burst[-1][0]]) for burst in rounds
    ] or [0]
    scripts_per_round = statistics.median(per_round)
    # The first window's rounds: its scripts, less the share MONITOR saw were not renewals.
    renew_share = len(calls_seen) / (len(calls_seen) + others) if calls_seen else 0.0
    rounds_unmonitored = calls * renew_share / scripts_per_round if scripts_per_round else 0.0
    return Renewals(
        period_s=period_s,
        window_s=window_s,
        rounds=len(rounds),
        every_s=every,
        per_period=period_s / every if every else 0.0,
        per_period_unmonitored=rounds_unmonitored * period_s / window_s,
        round_trips=max((len({addr for _, addr, _ in burst}) for burst in rounds), default=0),
        runs_min=min(runs),
        runs_max=max(runs),
        span_ms=statistics.median([(b[-1][0] - b[0][0]) * 1000 for b in rounds] or [0.0]),
        script_us=script_us,
        redis_ms_per_round=script_us * scripts_per_round / 1000,
        other_scripts=others,
        renew_scripts=len(renewals),
        renew_calls=len(calls_seen),
        calls_per_round=scripts_per_round,
    )


Renewal = tuple[float, bytes, bytes]  # Redis's time, the client's address, the task's ref


def _rounds(renewals: list[Renewal], gap: float) -> list[list[Renewal]]:
    """Renewals split into rounds: where ``gap`` seconds passed without one, or where a run is
    renewed again (a round renews each run once: a keeper late for its period, its rounds back
    to back, still shows each of them)."""
    rounds: list[list[Renewal]] = []
    refs: set[bytes] = set()
    for renewal in renewals:
        at, _, ref = renewal
        if rounds and at - rounds[-1][-1][0] < gap and ref not in refs:
            rounds[-1].append(renewal)
        else:
            rounds.append([renewal])
            refs = set()
        refs.add(ref)
    return rounds


def _monitor(
    redis_url: str, sha: str, window_s: float
) -> tuple[list[Renewal], list[float], int, float]:
    """MONITOR for ``window_s`` by Redis's clock: the renewals (one per run), the times of the
    renew scripts that made them, the count of other EVALSHAs, and the window's end (Redis's
    clock). Read on a plain socket, only EVALSHA lines parsed: the
    scripts' own commands (``[0 lua]`` lines) are most of what MONITOR sends."""
    parts = urlsplit(redis_url)
    renew = sha.encode()
    renewals: list[Renewal] = []
    calls: list[float] = []
    others = 0
    with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 6379)) as sock:
        sock.sendall(b"MONITOR\r\n")
        buffered = b""
        while not buffered.startswith(b"+OK\r\n"):
            buffered += sock.recv(64)
        buffered = buffered[5:]
        with redis.Redis.from_url(redis_url) as admin:
            seconds, micros = admin.time()
        start = seconds + micros / 1e6
        end = start + window_s
        sock.settimeout(0.5)
        deadline = time.monotonic() + window_s + 60  # a reader lagging behind a busy Redis
        last = start
        while last < end and time.monotonic() < deadline:
            try:
                chunk = sock.recv(1 << 20)
            except TimeoutError:  # an idle Redis sends nothing: its clock goes on all the same
                last = time.time()  # (the same host's clock)
                continue
            if not chunk:
                break
            buffered += chunk
            cut = buffered.rfind(b"\r\n") + 2
            lines, buffered = buffered[:cut], buffered[cut:]
            for found in _EVALSHA.finditer(lines):
                at = float(found.group(1))
                last = max(last, at)
                if at < start or at >= end:
                    continue
                if found.group(3) != renew:
                    others += 1
                    continue
                # renew: numkeys, the keys, then the lease, the peers, each run's ref and gen,
                # and the clock last (``run_calls.renew_shard``).
                args = _ARG.findall(found.group(4))
                numkeys = int(args[0]) if args else 0
                argv = args[1 + numkeys :]
                calls.append(at)
                for ref in argv[2:-1:2]:
                    renewals.append((at, found.group(2), ref))
            if lines:
                tail = lines[lines.rfind(b"\n", 0, len(lines) - 2) + 1 :]
                if tail.startswith(b"+"):
                    with contextlib.suppress(ValueError):
                        last = max(last, float(tail[1:].split(b" ", 1)[0]))
    return renewals, calls, others, end
