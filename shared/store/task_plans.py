"""A task's operations of the web tier as plans (``plans``): create, answer, cancel, read, and
the enqueue mark. The asyncio store (``aio``) runs them all; the synchronous store (``sync``)
runs the create and the enqueue mark (the sweeper, tests and tools), the same steps, and
``durable`` (a run's claim and step memos, replicated with ``MCPQ_REDIS_MIN_REPLICAS``)."""

from __future__ import annotations

import contextlib
from typing import Any, TypeVar

from mcpq.shared.errors import StoreUnavailable, TaskNotFound
from mcpq.shared.jobs import Message
from mcpq.shared.store import client_calls, create_calls
from mcpq.shared.store.call_types import ScriptCall
from mcpq.shared.store.client_calls import Answered, Cancelled
from mcpq.shared.store.clock import RedisClock
from mcpq.shared.store.create_calls import Admission, NewTask
from mcpq.shared.store.keyspace import Keys
from mcpq.shared.store.payloads import PLAIN, Payloads
from mcpq.shared.store.plans import Plan, ScriptPlans
from mcpq.shared.store.records import TaskRecord
from mcpq.shared.store.redis_errors import NotReplicated
from mcpq.shared.store.states import Reply
from mcpq.shared.store.tally import StatsTally

T = TypeVar("T")


class TaskPlans(ScriptPlans):
    def __init__(
        self,
        keys: Keys,
        payloads: Payloads = PLAIN,
        clock: RedisClock | None = None,
        *,
        tally: StatsTally | None = None,
        min_replicas: int = 0,
        replica_wait_ms: int = 1000,
    ) -> None:
        super().__init__(clock or RedisClock())
        self.keys = keys
        #: Seals and opens payloads (``MCPQ_DATA_KEYS``).
        self.payloads = payloads
        #: Where creates are counted (``mcpq.shared.store.tally``); ``None``: in the create script.
        self.tally = tally
        #: Replicas that must confirm a create or an answer before it is acknowledged
        #: (``MCPQ_REDIS_MIN_REPLICAS``; 0: the primary's word is enough), and for how long
        #: the write waits for them (``MCPQ_REDIS_REPLICA_WAIT_MS``).
        self.min_replicas, self.replica_wait_ms = min_replicas, replica_wait_ms

    def durable(self, call: ScriptCall[T]) -> Plan[T]:
        """``call``, and with ``min_replicas`` its ``WAIT`` too: a run's write that a failover
        must not undo though no client is told of it (a claim: its generation fences every
        earlier run, and a promoted replica without it would hand the same generation to a
        second run; a step's memo: without it a replay calls ``fn`` again). Fewer replicas
        than required: :class:`NotReplicated` (the run stops; its lease lapses, excused)."""
        if not self.min_replicas:
            return (yield from self.run(call))
        result, replicas = yield from self.replicated(call, self.min_replicas, self.replica_wait_ms)
        if replicas < self.min_replicas:
            refused = NotReplicated(self.min_replicas, replicas)
            refused.result = result  # what the write did on the primary (to undo: a claim)
            raise refused
        return result

    # -- the client's side of a task -------------------------------------------------------------
    def create(
        self,
        task: NewTask,
        unclaimed_ms: int,
        admit: Admission | None = None,
        message: Message | None = None,
        start_within_ms: int = 0,
    ) -> Plan[int | None]:
        """Persist a new task (and push its run's ``message``, see :func:`create_calls.create`);
        its ``createdAt`` (ms), or ``None`` if the ref exists already. Raises
        :class:`~mcpq.shared.store.create_calls.Refused` when ``admit`` refuses it (quota, rate, a
        replayed state): then nothing was written, and nothing sent."""
        if admit is not None and self.keys.shards > 1:
            # NOTE: two steps, because the principal's keys and the task's are on different
            # shards: admitted first (everything checked and spent there, atomically), created
            # second. A process that dies in between leaves a quota member without a task,
            # dropped after create_calls.ADMIT_GRACE_MS; a state marked used without a task (its
            # client's retry is refused as a replay, never run twice).
            yield from self._admit(task.ref, admit)
            admit = None
        call = create_calls.create(
            self.keys,
            task,
            unclaimed_ms,
            admit,
            message,
            start_within_ms,
            self.payloads,
            count=self.tally is None,
        )
        if not self.min_replicas:
            created = yield from self.run(call)
        else:
            created, replicas = yield from self.replicated(
                call, self.min_replicas, self.replica_wait_ms
            )
            if replicas < self.min_replicas:
                if created is not None:
                    self._count_created(task)  # it was created (and is withdrawn: cancelled)
                    yield from self._withdraw(task)
                raise NotReplicated(self.min_replicas, replicas)
        if created is not None:
            self._count_created(task)
        return created

    def _count_created(self, task: NewTask) -> None:
        if self.tally is not None:
            self.tally.add(self.keys.at(task.ref).stats, f"created:{task.tool}")

    def _withdraw(self, task: NewTask) -> Plan[None]:
        """Cancel a create the client is told failed (not replicated), so that its run, whose
        message went out with it, ends at its claim instead of running unknown to anyone; the
        client creates it again. Best effort: if Redis is gone too, a failover loses the task
        anyway, and if not, it runs to its end and expires with its TTL."""
        call = client_calls.cancel(self.keys, task.ref, task.owner, "not replicated", self.payloads)
        with contextlib.suppress(StoreUnavailable):
            yield from self.run(call)

    def _admit(self, ref: str, admit: Admission) -> Plan[None]:
        """Admit ``ref`` on the principal's home shard (see :func:`create_calls.admit`): a full
        quota set is pruned of ended tasks (read on their own shards) and asked once more."""
        full = yield from self.run(create_calls.admit(self.keys, ref, admit))
        if full is not None:
            found = yield create_calls.statuses(self.keys, list(full.members))
            ended = create_calls.ended_members(full, found)
            yield from self.run(create_calls.admit(self.keys, ref, admit, ended, may_ask=False))

    def mark_enqueued(self, ref: str, start_within_ms: int) -> Plan[bool]:
        """The run's message is out: it must now start within ``start_within_ms``."""
        return (yield from self.run(create_calls.mark_enqueued(self.keys, ref, start_within_ms)))

    def answer(
        self, ref: str, owner: str, answers: dict[str, Any], unclaimed_ms: int
    ) -> Plan[Answered]:
        call = client_calls.answer(self.keys, ref, owner, answers, unclaimed_ms, self.payloads)
        if not self.min_replicas:
            return (yield from self.run(call))
        answered, replicas = yield from self.replicated(
            call, self.min_replicas, self.replica_wait_ms
        )
        # An answer not replicated stays delivered (the run goes on with it); the client's
        # retry is harmless: answers to keys no longer outstanding are ignored.
        if replicas < self.min_replicas and answered.reply not in (Reply.NOTFOUND, Reply.IGNORED):
            raise NotReplicated(self.min_replicas, replicas)
        return answered

    def cancel(self, ref: str, owner: str, message: str) -> Plan[Cancelled]:
        call = client_calls.cancel(self.keys, ref, owner, message, self.payloads)
        return (yield from self.run(call))

    def logs(self, ref: str, after: int, upto: int) -> Plan[list[Any]]:
        """A synchronous call's log messages after number ``after`` up to ``upto`` (its
        record's ``logs``): those its task still keeps, opened, in order."""
        if upto <= after:
            return []
        opened: list[Any] = yield client_calls.read_logs(self.keys, ref, after, upto, self.payloads)
        return opened

    def get(
        self, ref: str, owner: str, *, watching: bool = False, call: bool = False
    ) -> Plan[tuple[TaskRecord, dict[str, Any]]]:
        """The task and its outstanding input requests, in one round trip (one script, so the
        two are read at one instant). Another principal's task reads as unknown
        (``TaskNotFound``). ``watching``: the caller holds a watch of the task opened with
        ``mark=False`` (``AsyncTaskStore.watch``); this read marks the task watched (its changes
        are pushed from now on). ``call``: the record carries the call's arguments, capabilities
        and pre-answers too (else they are empty: a poll needs the task's state, and leaves them
        sealed in Redis)."""
        # The owner is compared inside Redis: unknown, expired and another principal's task
        # read exactly alike, in reply and in timing (an id must not reveal that it exists).
        read = client_calls.read(self.keys, ref, owner, watching=watching, call=call)
        found = yield from self.run(read)
        if found is None:
            raise TaskNotFound()
        task, inputs = found
        requests = self.payloads.load_entries(self.keys.inputs(ref), inputs)
        return TaskRecord.from_hash(ref, task, self.payloads), requests
