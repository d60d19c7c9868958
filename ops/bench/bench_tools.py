"""The tools of the benchmarks: the tool module their stacks load (``MCPQ_TOOLS=...``).

Like any tool module it is imported by the web tier and the workers, so it imports only
mcpq's public API, ``shared``, the standard library and httpx (a dependency of mcpq); the
benchmark drivers (``pools``, ``recovery``, ``answer_latency``, ``soak``, ``capacity``,
``waiting_runs``) import nothing from here but the tool names (and, for the soak, the expected
result of its job: ``soak_result``).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import os
import ssl
import time
import weakref

import httpx

from mcpq import ToolContext, tool

MODULE = "mcpq.ops.bench.bench_tools"
BULK_QUEUE = "bulk"
SLEEP = "bench_sleep"
NOOP = "bench_noop"
ASYNC_SLEEP = "bench_async_sleep"
ASYNC_ANSWER = "bench_async_answer"
ASYNC_HTTP = "bench_async_http"
EFFECT = "bench_effect"
ANSWER = "bench_answer"

_SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


@tool(name=NOOP, task="optional", description="Benchmark: returns at once (a no-op).")
def bench_noop() -> str:
    return "ok"


@tool(
    name=ASYNC_SLEEP,
    task="optional",
    description="Benchmark: an async tool that awaits ctx.sleep(`seconds`, or until `until`).",
)
async def bench_async_sleep(ctx: ToolContext, seconds: float = 0.2, until: float = 0.0) -> str:
    await ctx.sleep(_left(seconds, until))
    return "slept"


def _left(seconds: float, until: float) -> float:
    """``seconds``, or with ``until`` (a ``time.time()``) what is left until then: a run replayed
    after its worker died waits only the rest."""
    return max(until - time.time(), 0.0) if until else seconds


@tool(
    name=ASYNC_ANSWER,
    task="optional",
    description="Benchmark: an async tool that awaits an answer (ctx.elicit), then returns.",
)
async def bench_async_answer(ctx: ToolContext) -> dict[str, float]:
    await ctx.elicit("Go on?", _SCHEMA)
    return {"answered_at": time.time()}


#: Requests one client carries at once; a loop opens another client when all of its carry that
#: many. Not one client for all: httpx's pool (httpcore 1.0) looks through all of its requests
#: and connections each time one is sent or ends, which grows as the square of the requests it
#: holds (measured on a bare event loop sending 10,000 GETs that a slow server held: the loop's
#: longest stall was 6.5 s through one client, 0.3 s through clients of 256 each; the worker's
#: run loop takes a stall of 1 s for a blocking tool, MCPQ_LOOP_STALL_S). 32, not 256: that look
#: was still the largest part of a worker's CPU while 10,000 runs started their GETs (profiled);
#: with 32 each they were all running after 42.7 s, against 50.9 s with 256, in the same hour.
_PER_CLIENT = 32


class _Client:
    def __init__(self) -> None:
        # No cap on connections (httpx's 100 would queue the rest and fail them after its 5 s
        # pool timeout); one SSL context for every client.
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=16)
        self.http = httpx.AsyncClient(verify=_tls(), limits=limits)
        self.busy = 0


#: The HTTP clients of each event loop that runs these tools: the worker's run loop (one for all
#: its runs) or, with the run loop off, each run's own loop. A client's connections belong to the
#: loop they were opened on, so a client is never shared across loops; keyed weakly, a per-run
#: loop's clients go when its loop does (their idle sockets closed by their finalizers).
#: Not a client per run: each would load the CA bundle into an SSL context of its own, about
#: 0.8 MiB and 18 ms of CPU (httpx 0.28 here), 8 GiB for 10,000 waiting runs.
_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, list[_Client]] = (
    weakref.WeakKeyDictionary()
)


@functools.cache
def _tls() -> ssl.SSLContext:
    return httpx.create_ssl_context()


def _http_client() -> _Client:
    """A client of the running loop that carries fewer than ``_PER_CLIENT`` requests."""
    loop = asyncio.get_running_loop()
    mine = _clients.setdefault(loop, [])
    for client in mine:
        if client.busy < _PER_CLIENT:
            return client
    mine.append(client := _Client())
    return client


@tool(
    name=ASYNC_HTTP,
    task="optional",
    description="Benchmark: an async tool that awaits GET `url`?seconds=S from a slow server "
    "(S: `seconds`, or what is left until `until`).",
)
async def bench_async_http(url: str, seconds: float = 0.2, until: float = 0.0) -> str:
    seconds = _left(seconds, until)
    # The server answers after `seconds`: the read timeout covers that, and more.
    timeout = httpx.Timeout(10.0, read=seconds + 30.0)
    client = _http_client()
    client.busy += 1  # (only this loop's coroutines count: no lock)
    try:
        reply = await client.http.get(url, params={"seconds": seconds}, timeout=timeout)
    finally:
        client.busy -= 1
    reply.raise_for_status()
    return "fetched"


@tool(
    name=SLEEP,
    task="optional",
    queue=BULK_QUEUE,
    description="Benchmark: sleeps `seconds` on the bulk pool.",
)
def bench_sleep(ctx: ToolContext, seconds: float = 0.2) -> str:
    ctx.sleep(seconds)
    return "slept"


@tool(
    name=EFFECT,
    task="optional",
    description="Benchmark: a memoized step appends a line to `path`, then the tool sleeps.",
)
def bench_effect(ctx: ToolContext, path: str, seconds: float = 2.0) -> str:
    def effect() -> int:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write("effect\n")
        return 1

    ctx.step("effect", effect)
    ctx.report("stepped")
    ctx.sleep(seconds)
    return f"done after {seconds:g}s"


@tool(
    name=ANSWER,
    task="optional",
    description="Benchmark: asks once, returns when it got the answer.",
)
def bench_answer(ctx: ToolContext) -> dict[str, float]:
    ctx.elicit("Go on?", _SCHEMA)
    return {"answered_at": time.time()}


# -- the soak (``ops.bench.soak``) ----------------------------------------------------------------
SOAK = "soak_job"
SOAK_BULK = "soak_job_bulk"
SOAK_BULK_QUEUE = "soak-bulk"
SOAK_STEPS = ("one", "two")
#: The file, in the directory a soak job is given, that every step call and save is appended to.
SOAK_LOG = "steps.log"

_WORD = {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]}


def soak_step_value(tag: str, step: str) -> str:
    """What step ``step`` of the job tagged ``tag`` returns: derived from both, so a value
    memoized for another task or step shows up in the result."""
    return hashlib.sha256(f"{tag}/{step}".encode()).hexdigest()[:8]


def soak_result(tag: str, seconds: float, word: str | None) -> str:
    """The text a soak job returns: its tag, both step values, the answer's word (``-`` when it
    did not ask) and its sleep; the soak compares every result with this."""
    values = "+".join(soak_step_value(tag, step) for step in SOAK_STEPS)
    return f"{tag}:{values}:{'-' if word is None else word}:{seconds:g}"


def _record(log: str, *fields: object) -> None:
    """One line, one ``write`` on an ``O_APPEND`` descriptor: lines of concurrent runs (threads
    or processes) never interleave."""
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, ("\t".join(map(str, fields)) + "\n").encode())
    finally:
        os.close(fd)


def _soak(ctx: ToolContext, tag: str, log_dir: str, seconds: float, ask: bool) -> str:
    """Two memoized steps around a sleep (and, with ``ask``, a question between them). Each
    step's function records its call (tag, step, the run's generation, pid, time, the step's
    idempotency key) before it returns, and the tool records ``saved`` once ``ctx.step`` has
    returned (with whether this run called the function): the soak tells from these lines
    whether a second call of a step was allowed (its first caller died before saving) or not."""
    log = os.path.join(log_dir, SOAK_LOG)
    gen = getattr(ctx, "gen", -1)
    word: str | None = None
    for step in SOAK_STEPS:
        called: list[bool] = []

        def call(step: str = step, called: list[bool] = called) -> str:
            called.append(True)
            key = ctx.step_key(step)
            _record(log, "call", tag, step, gen, os.getpid(), f"{time.time():.6f}", key)
            return soak_step_value(tag, step)

        value = ctx.step(step, call)
        _record(log, "saved", tag, step, gen, os.getpid(), f"{time.time():.6f}", int(bool(called)))
        if value != soak_step_value(tag, step):
            return f"{tag}: step {step} returned {value!r}"
        if step == SOAK_STEPS[0]:
            ctx.sleep(seconds)
            if ask:
                answer = ctx.elicit(f"soak {tag}: the word?", _WORD)
                content = answer.get("content") or {}
                word = str(content.get("word")) if answer.get("action") == "accept" else "declined"
    return soak_result(tag, seconds, word)


@tool(
    name=SOAK,
    task="optional",
    description="Soak: two recorded steps around a sleep, and maybe a question between them.",
)
def soak_job(ctx: ToolContext, tag: str, log_dir: str, seconds: float, ask: bool = False) -> str:
    return _soak(ctx, tag, log_dir, seconds, ask)


@tool(
    name=SOAK_BULK,
    task="optional",
    queue=SOAK_BULK_QUEUE,
    description="Soak: soak_job on the queue of the cpu (prefork) pool.",
)
def soak_job_bulk(
    ctx: ToolContext, tag: str, log_dir: str, seconds: float, ask: bool = False
) -> str:
    return _soak(ctx, tag, log_dir, seconds, ask)
