"""Task payloads are encrypted at rest (``MCPQ_DATA_KEYS``), end to end.

Every bundled tool runs on a real stack (web + worker + a private redis-server with AOF on) with
unique marker strings as arguments and answers; the client gets them back in plaintext, and
neither any Redis value (every key, every type) nor the AOF files hold one. Then rotation: tasks
made under key 1 are read and completed by a deployment with key 2 first, ``mcpq keys
rotate-data`` re-encrypts them, and a deployment with key 2 alone still reads them.
"""

from __future__ import annotations

import re
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from mcpq.ops.harness.children import REPO
from mcpq.ops.harness.mcp_client import McpClient, text_of
from mcpq.ops.harness.stack import Stack
from mcpq.shared.sealing import new_data_key, sealed_kid
from mcpq.shared.store import task_ref
from tests.support.redis_server import AOF_ARGS
from tests.support.stacks import FAST_KNOBS, LiveStack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

TASK_FIELDS = ("args", "caps", "pre", "result", "error", "msg")
SEALED_HASHES = (":in", ":ans", ":steps")


def marker() -> str:
    return f"zq{secrets.token_hex(8)}"


# -- reading everything Redis holds ---------------------------------------------------------------


def every_value(client: redis.Redis) -> Iterator[bytes]:
    """Every key name and every value of every key, whatever its type."""
    for key in client.scan_iter(count=500):
        yield key
        kind = client.type(key)
        if kind == b"string":
            yield client.get(key) or b""
        elif kind == b"hash":
            for field, value in client.hgetall(key).items():
                yield field
                yield value
        elif kind == b"list":
            yield from client.lrange(key, 0, -1)
        elif kind == b"set":
            yield from client.smembers(key)
        elif kind == b"zset":
            yield from (member for member, _ in client.zrange(key, 0, -1, withscores=True))
        elif kind == b"stream":
            for _id, entry in client.xrange(key):
                for field, value in entry.items():
                    yield field
                    yield value
        elif kind != b"none":  # gone meanwhile
            raise AssertionError(f"a key of a type this test does not read: {kind!r}")


def found_in_redis(url: str, markers: list[str]) -> set[str]:
    client = redis.Redis.from_url(url, decode_responses=False)
    try:
        seen = b"\n".join(every_value(client))
    finally:
        client.close()
    return {m for m in markers if m.encode() in seen}


def found_in_files(folder: Path, markers: list[str]) -> tuple[set[str], int]:
    files = [path for path in folder.rglob("*") if path.is_file()]
    data = b"\n".join(path.read_bytes() for path in files)
    return {m for m in markers if m.encode() in data}, len(data)


def payload_values(client: redis.Redis) -> list[tuple[str, str, str]]:
    """(key, field, value) of every stored payload (what must be sealed)."""
    out = []
    for key in client.scan_iter(match="[{]mcpq[}]:t:*", count=500):
        name = str(key)
        rest = name.split(":t:", 1)[1]
        if ":" not in rest:
            fields = client.hgetall(name)
            out += [(name, f, v) for f, v in fields.items() if f in TASK_FIELDS and v]
        elif rest[rest.index(":") :] in SEALED_HASHES:
            out += [(name, f, v) for f, v in client.hgetall(name).items()]
    return out


def kids_in(url: str) -> list[str | None]:
    """The key id of every stored payload (``None``: plain)."""
    client = redis.Redis.from_url(url, decode_responses=True)
    try:
        return [sealed_kid(value) for _, _, value in payload_values(client)]
    finally:
        client.close()


# -- driving every bundled tool ---------------------------------------------------------------


def answer_one(client: McpClient, task_id: str, content: dict[str, Any]) -> None:
    task = client.wait_for_status(task_id, "input_required", timeout=30)
    ((key, _request),) = task["inputRequests"].items()
    assert client.update(task_id, {key: content}).result["resultType"] == "complete"


def run_every_tool(client: McpClient, sampler: McpClient, marks: list[str]) -> dict[str, str]:
    """Each bundled tool once, with fresh markers; the client's plaintext results by tool."""

    def mark() -> str:
        marks.append(marker())
        return marks[-1]

    texts: dict[str, str] = {}
    # Synchronous, never a task (a hidden task all the same).
    name = mark()
    texts["greet"] = text_of(client.call_tool("greet", {"name": name}, tasks=False).result)
    assert name in texts["greet"]

    # A result, progress messages and a sleep.
    label = mark()
    task_id = client.create_task("slow_compute", {"seconds": 0, "label": label})["taskId"]
    texts["slow_compute"] = text_of(client.wait_for_status(task_id, "completed", 30)["result"])
    assert label in texts["slow_compute"]

    # Memoized steps, progress, a structured result.
    topic = mark()
    args = {"topic": topic, "steps": 2, "step_seconds": 0}
    task_id = client.create_task("build_report", args)["taskId"]
    report = client.wait_for_status(task_id, "completed", 30)["result"]
    texts["build_report"] = str(report)
    assert topic in texts["build_report"]

    # An elicitation answered through tasks/update, then a step and a report.
    service, version, reason = mark(), mark(), mark()
    args = {"service": service, "version": version}
    task_id = client.create_task("approve_deployment", args)["taskId"]
    answer_one(
        client, task_id, {"action": "accept", "content": {"approve": True, "reason": reason}}
    )
    texts["approve_deployment"] = text_of(
        client.wait_for_status(task_id, "completed", 30)["result"]
    )
    assert service in texts["approve_deployment"]

    # Two questions at once.
    color, size = mark(), mark()
    task_id = client.create_task("multi_input")["taskId"]
    task = client.wait_for_status(task_id, "input_required", timeout=30)
    responses = {}
    for key, request in task["inputRequests"].items():
        which = "color" if "color" in request["params"]["message"] else "size"
        value = color if which == "color" else size
        responses[key] = {"action": "accept", "content": {which: value}}
    client.update(task_id, responses)
    texts["multi_input"] = text_of(client.wait_for_status(task_id, "completed", 30)["result"])
    assert color in texts["multi_input"] and size in texts["multi_input"]

    # Sampling: the text to summarize goes into the input request, the answer into the result.
    text, summary = mark(), mark()
    task_id = sampler.create_task("summarize", {"text": text})["taskId"]
    sampled = {"role": "assistant", "content": {"type": "text", "text": summary}, "model": "m"}
    answer_one(sampler, task_id, sampled)
    texts["summarize"] = text_of(sampler.wait_for_status(task_id, "completed", 30)["result"])
    assert summary in texts["summarize"]

    # MRTR before a task (ask_first): the answer travels in requestState, then in `pre`.
    who = mark()
    first = client.call_tool("test_tool_with_task", {}).result
    assert first["resultType"] == "input_required"
    (key,) = first["inputRequests"]
    created = client.call_tool(
        "test_tool_with_task",
        {},
        input_responses={key: {"action": "accept", "content": {"name": who}}},
        request_state=first["requestState"],
    ).result
    assert created["resultType"] == "task"
    texts["test_tool_with_task"] = text_of(
        client.wait_for_status(created["taskId"], "completed", 30)["result"]
    )
    assert who in texts["test_tool_with_task"]

    # MRTR of a synchronous call: the hidden task asks mid-run.
    filename = mark()
    first = client.call_tool("confirm_delete", {"filename": filename}, tasks=False).result
    assert first["resultType"] == "input_required"
    ((key, _request),) = first["inputRequests"].items()
    final = client.call_tool(
        "confirm_delete",
        {"filename": filename},
        tasks=False,
        input_responses={key: {"action": "accept", "content": {"confirm": True}}},
        request_state=first["requestState"],
    ).result
    texts["confirm_delete"] = text_of(final)
    assert texts["confirm_delete"] == f"Deleted {filename}"

    # Errors: a tool error (a result with isError) and a protocol error (`error`).
    task_id = client.create_task("failing_job")["taskId"]
    failed = client.wait_for_status(task_id, "completed", 30)["result"]
    assert failed["isError"] is True
    task_id = client.create_task("protocol_error_job")["taskId"]
    assert client.wait_for_status(task_id, "failed", 30)["error"]["code"] == -32603
    return texts


def test_no_payload_reaches_redis_or_its_aof_in_plaintext(tmp_path: Path) -> None:
    # AOF fsynced every second, as in production, by Redis's background thread: every write is
    # in the AOF files all the same once Redis stops (it writes its AOF buffer on every loop and
    # fsyncs at shutdown). With `appendfsync always` the fsync ran on Redis's main thread: one
    # slow fsync of the shared disk (3 s) stalled every client past the web's 2 s Redis timeout.
    stack = LiveStack("rest", tmp_path / "rest", redis_args=AOF_ARGS)
    try:
        stack.start_redis()
        stack.start_web()
        stack.start_worker(queues="mcpq,bulk", pool="io")
        marks: list[str] = []
        with McpClient(stack.url()) as client, McpClient(stack.url(), sampling=True) as sampler:
            texts = run_every_tool(client, sampler, marks)
        assert len(texts) == 8 and len(marks) == 12

        # The test can fail: a marker written in plain is found by the same scan.
        canary = marker()
        with stack.redis_client() as raw:
            raw.hset("canary", "f", f'{{"x":"{canary}"}}')
            assert found_in_redis(stack.redis_url, [canary]) == {canary}
            raw.delete("canary")

        assert found_in_redis(stack.redis_url, marks) == set()
        with stack.redis_client() as raw:
            stored = payload_values(raw)
        kid = stack.data_keys.split(":")[0]
        assert {sealed_kid(value) for _, _, value in stored} == {kid}, stored
        fields = {(key.rsplit(":", 1)[-1] if key.count(":") > 2 else f) for key, f, _ in stored}
        assert {"args", "caps", "pre", "result", "error", "msg", "ans", "steps"} <= fields

        stack.stop_redis()  # fsyncs the AOF
        found, size = found_in_files(stack.workdir / "redis-data", [*marks, canary])
        assert size > 0, "no AOF written"
        assert found == {canary}, "only the canary, written in plain on purpose, is in the AOF"
    finally:
        stack.close()


# -- rotation -------------------------------------------------------------------------------------


def rotate(stack: Stack, keys: str) -> str:
    env = stack.child_env(MCPQ_DATA_KEYS=keys)
    done = subprocess.run(
        [sys.executable, "-m", "mcpq", "keys", "rotate-data", "--batch", "5"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def counts(summary: str) -> tuple[int, int, int]:
    found = re.search(r"(\d+) tasks seen, (\d+) values re-encrypted, (\d+) skipped", summary)
    assert found, summary
    return int(found[1]), int(found[2]), int(found[3])


def restart(stack: Stack, keys: str) -> None:
    for child in [*stack.webs, *stack.workers]:
        stack.stop_child(child)
    stack.knobs["MCPQ_DATA_KEYS"] = keys
    stack.start_web()
    stack.start_worker(pool="io")


def test_rotation_reencrypts_old_tasks_and_the_old_key_can_go(tmp_path: Path) -> None:
    key1, key2 = new_data_key(), new_data_key()
    kid1, kid2 = key1.split(":")[0], key2.split(":")[0]
    env = {**FAST_KNOBS, "MCPQ_DATA_KEYS": key1}
    stack = LiveStack("rotate", tmp_path / "rotate", env=env)
    try:
        stack.start(webs=1, workers=1, pool="io")
        label, service, reason = marker(), marker(), marker()
        with McpClient(stack.url()) as client:
            done_id = client.create_task("slow_compute", {"seconds": 0, "label": label})["taskId"]
            client.wait_for_status(done_id, "completed", 30)
            waiting_id = client.create_task(
                "approve_deployment", {"service": service, "version": "1"}
            )["taskId"]
            client.wait_for_status(waiting_id, "input_required", 30)
        assert set(kids_in(stack.redis_url)) == {kid1}

        # Key 2 first, key 1 kept: old tasks read and complete; new writes use key 2.
        restart(stack, f"{key2},{key1}")
        with McpClient(stack.url()) as client:
            assert label in text_of(client.task(done_id)["result"])
            answer = {"action": "accept", "content": {"approve": True, "reason": reason}}
            answer_one(client, waiting_id, answer)
            finished = client.wait_for_status(waiting_id, "completed", 30)
            assert text_of(finished["result"]) == f"Deployed {service} 1."
        before = kids_in(stack.redis_url)
        assert set(before) == {kid1, kid2}

        tasks, resealed, changed = counts(rotate(stack, f"{key2},{key1}"))
        assert tasks == 2
        # Every value under key 1 (the first task's; the second's args, caps and pre: its
        # answer, step and result came under key 2), and nothing else.
        assert resealed == before.count(kid1) and changed == 0
        assert set(kids_in(stack.redis_url)) == {kid2}
        # Re-runnable: nothing is left to do.
        assert counts(rotate(stack, f"{key2},{key1}"))[1:] == (0, 0)

        # Key 2 alone reads everything.
        restart(stack, key2)
        with McpClient(stack.url()) as client:
            assert label in text_of(client.task(done_id)["result"])
            assert text_of(client.task(waiting_id)["result"]) == f"Deployed {service} 1."
        # ...and the store does, as a worker would (steps, answers).
        store = stack.store()
        record = store.record(task_ref(waiting_id))
        assert record is not None and record.arguments == {"service": service, "version": "1"}
        assert store.step_value(task_ref(waiting_id), "deploy") == (
            True,
            {"service": service, "version": "1"},
        )
    finally:
        stack.close()
