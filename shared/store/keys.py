"""Every Redis key mcpq uses, built in one place.

All keys share one prefix that is also a Redis Cluster hash tag (``{mcpq}`` by default), so every
Lua script may touch a task and the global indexes atomically, on one slot. The prefix stays clear
of Celery's ``celery-task-meta-*`` and kombu's ``_kombu.*`` / ``unacked*`` keys.

Tasks are stored under ``ref = sha256(taskId)[:32 hex]``, never under the ``taskId`` itself: the
id is a bearer token, and neither Celery messages, Flower nor logs ever carry it. Redis holds it
in one place only: the ``tasks/list`` index of the principal (or anonymous session) that created
a task over the 2025-11-25 wire, because that method must hand the ids back to their owner.

Schema (``<p>`` = ``{mcpq}``):

==========================  =====  ===========================================================
``<p>:t:<ref>``             hash   the task: status, msg, created_ms, updated_ms, ttl_ms,
                                   expire_at, poll_ms, tool, queue, args, owner, caps, pre,
                                   sync, gen (fencing), lease (ms), parked, runs, sends
                                   (messages sent since the last claim), lost (runs whose
                                   lease expired unfinished), result, error,
                                   reports (``ctx.report`` count), push (a channel),
                                   answered (1 once the answers hash exists)
``<p>:t:<ref>:in``          hash   outstanding input requests: key -> request JSON
``<p>:t:<ref>:ans``         hash   delivered answers, kept for replay: key -> response JSON
``<p>:t:<ref>:steps``       hash   memoized ``ctx.step`` results: name -> JSON
``<p>:t:<ref>:wake``        chan   (a channel) wakes the task's run: an answer, a cancel
``<p>:t:<ref>:ev``          chan   (a pub/sub channel, not a key) every change a client can
                                   see, published by the script that makes it
``<p>:s:<sref>``            hash   a 2025-era session (``sref`` = hash of ``Mcp-Session-Id``):
                                   version, caps, principal, scope, created_ms; sliding TTL
``<p>:s:<sref>:out``        hash   server→client requests in flight on the session's streams:
                                   JSON-RPC id -> {ref, key} (where the answer goes)
``<p>:s:<sref>:calls``      hash   the session's synchronous calls in flight: request id -> ref
                                   (``notifications/cancelled``)
``<p>:l:<scope>``           zset   ``tasks/list``: ref -> createdAt (ms) of a listing scope's
                                   tasks (2025-11-25 wire)
``<p>:l:<scope>:ids``       hash   ref -> taskId of those tasks (``tasks/list`` must return ids)
``<p>:l:<scope>:ev``        chan   changes of those tasks (the task hash's ``push`` field)
``<p>:leases``              zset   ref -> lease deadline (ms) of running tasks
``<p>:unclaimed``           zset   ref -> deadline (ms) by which a run must be enqueued, or
                                   once enqueued, started (claimed); claim removes it
``<p>:active``              zset   ref -> createdAt (ms) of every non-terminal task
``<p>:expiry``              zset   ref -> expire-at (ms) of non-terminal tasks with a TTL
``<p>:stats``               hash   counters: created|completed|failed|cancelled:<tool>,
                                   poisoned:<tool> (failed for lost runs);
                                   gauges: state:input_required, parked,
                                   inputs (outstanding input requests)
``<p>:workers``             zset   worker node name -> last heartbeat (ms)
``<p>:q:<pk>:tasks``        zset   quota: ref -> createdAt of a principal's unfinished tasks
                                   (``pk`` = hash of the principal); ended ones leave lazily
``<p>:q:<pk>:sync``         zset   quota: the same for its synchronous calls in flight
``<p>:q:<pk>:rate``         hash   quota: the principal's token bucket (tokens, at ms)
``<p>:used:<jti>``          str    a task-creating ``requestState`` already used; its TTL is
                                   the state's remaining life
``<p>:k:<key id>``          hash   an API key: name, digest (SHA-256 of its secret), scopes,
                                   created_ms, revoked_ms
``<p>:k``                   zset   key id -> created_ms of every API key (``mcpq keys list``)
``<p>:lock:<name>``         str    a lock (``sweeper``): its holder's token, with a TTL
==========================  =====  ===========================================================

Payloads are sealed (``payloads``, ``MCPQ_DATA_KEYS``): the task's args, caps, pre, result,
error and msg, every value of ``:in``, ``:ans`` and ``:steps``, a session's caps. Everything a
script reads stays plain.

Every per-task key expires with the task (``expire_at`` = createdAt + ttlMs). The indexes, the
stats and the worker list are global; index entries leave when their task ends. A lock expires
by itself.
The ``state:*`` gauges drift if a non-terminal task reaches its TTL (it vanishes unfinished).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass


def task_ref(task_id: str) -> str:
    """The storage reference of a task: not reversible to the bearer ``taskId``."""
    # 128 bits of the hash: collision-free for any number of tasks a store will hold, and
    # whoever sees a ref (Flower, logs, Redis) cannot turn it into the id that reads the task.
    return hashlib.sha256(task_id.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class Keys:
    """Key builder for one prefix."""

    prefix: str = "mcpq"

    @property
    def root(self) -> str:
        # The braces are a Cluster hash tag: every key of the store maps to one slot, so a
        # script may touch a task and the global indexes together (a cluster would refuse
        # a script whose keys span slots).
        return "{" + self.prefix + "}"

    @property
    def task_prefix(self) -> str:
        return f"{self.root}:t:"

    def task(self, ref: str) -> str:
        return f"{self.task_prefix}{ref}"

    def inputs(self, ref: str) -> str:
        return f"{self.task(ref)}:in"

    def answers(self, ref: str) -> str:
        return f"{self.task(ref)}:ans"

    def steps(self, ref: str) -> str:
        return f"{self.task(ref)}:steps"

    def wake(self, ref: str) -> str:
        """The channel that wakes the task's run (answers, cancel); the run's process
        subscribes to it (``shared.store.wakeups``)."""
        return f"{self.task(ref)}:wake"

    @property
    def leases(self) -> str:
        return f"{self.root}:leases"

    @property
    def unclaimed(self) -> str:
        return f"{self.root}:unclaimed"

    @property
    def active(self) -> str:
        return f"{self.root}:active"

    @property
    def expiry(self) -> str:
        return f"{self.root}:expiry"

    @property
    def stats(self) -> str:
        return f"{self.root}:stats"

    @property
    def workers(self) -> str:
        return f"{self.root}:workers"

    def events(self, ref: str) -> str:
        """The task's pub/sub channel (see ``publish`` in ``lua/_prelude.lua``)."""
        return f"{self.task(ref)}:ev"

    def session(self, sref: str) -> str:
        return f"{self.root}:s:{sref}"

    def session_out(self, sref: str) -> str:
        return f"{self.session(sref)}:out"

    def session_calls(self, sref: str) -> str:
        return f"{self.session(sref)}:calls"

    def listing(self, scope: str) -> str:
        return f"{self.root}:l:{scope}"

    def listing_ids(self, scope: str) -> str:
        return f"{self.listing(scope)}:ids"

    def listing_events(self, scope: str) -> str:
        """The pub/sub channel of a listing scope's tasks (the session's GET stream)."""
        return f"{self.listing(scope)}:ev"

    def quota(self, principal_key: str, kind: str) -> str:
        """A principal's unfinished tasks (``kind`` ``tasks``) or sync calls (``sync``)."""
        return f"{self.root}:q:{principal_key}:{kind}"

    def bucket(self, principal_key: str) -> str:
        return f"{self.root}:q:{principal_key}:rate"

    def used_state(self, jti: str) -> str:
        return f"{self.root}:used:{jti}"

    def api_key(self, key_id: str) -> str:
        return f"{self.root}:k:{key_id}"

    @property
    def api_keys(self) -> str:
        return f"{self.root}:k"

    def lock(self, name: str) -> str:
        return f"{self.root}:lock:{name}"

    @property
    def pattern(self) -> str:
        """Glob matching every key of this prefix (for tests and ops)."""
        return self.root.replace("{", "[{]").replace("}", "[}]") + ":*"
