"""Every Redis key mcpq uses, built in one place.

Keys live under one prefix (``mcpq`` by default) and carry Redis Cluster hash tags, so that every
Lua script touches keys of one slot only. The prefix stays clear of Celery's
``celery-task-meta-*`` and kombu's ``_kombu.*`` / ``unacked*`` keys.

Shards (``MCPQ_STORE_SHARDS`` = N). With N = 1 (the default) every key shares the tag
``{mcpq}``: one slot, the key names mcpq always had. With N > 1 a task goes to shard
``s = crc32(ref) % N``; its keys and the indexes its transitions update (``leases``,
``unclaimed``, ``active``, ``expiry``, ``stats``) carry that shard's tag ``{mcpq:<s>:<salt>}``, so
a transition is still one script on one slot, and a Redis Cluster spreads the shards over its
primaries. A principal's admission keys (quota sets, token bucket, used ``requestState``
markers) live on its *home* shard, ``crc32(principal key) % N``. What no transition touches
together with a task keeps the global tag ``{mcpq}``: worker heartbeats, locks, API keys,
sessions, the ``tasks/list`` indexes, resource subscriptions and the listings' digests. The
``<salt>`` of each shard tag is the smallest number that puts the tag's slot (CRC16, as Redis
Cluster computes it) within an eighth of a cell of the centre of the shard's cell, the cells
being the 16384 slots cut into N equal ranges: the N shards sit evenly over the slots, so a
cluster whose primaries own equal contiguous ranges (what ``redis-cli --cluster create``
makes) gets N / primaries shards each. N is fixed for the life of
a store: a task's keys are found from its ref and N, and its payloads are sealed to its key
names, so changing N needs an empty (drained) store.

Tasks are stored under ``ref = sha256(taskId)[:32 hex]``, never under the ``taskId`` itself: the
id is a bearer token, and neither Celery messages, Flower nor logs ever carry it. Redis holds it
in one place only: the ``tasks/list`` index of the principal (or anonymous session) that created
a task over the 2025-11-25 wire, because that method must hand the ids back to their owner.

Schema (``<p>`` = ``{mcpq}``, the global tag; ``<s>``: the tag of the task's shard, ``<h>``: of
the principal's home shard; all three are ``{mcpq}`` when N = 1):

==========================  =====  ===========================================================
``<s>:t:<ref>``             hash   the task: status, msg, created_ms, updated_ms, ttl_ms,
                                   expire_at, poll_ms, tool, queue, args, owner, caps, pre,
                                   sync, gen (fencing), lease (ms), parked, runs, sends
                                   (messages sent since the last claim), lost (runs whose
                                   lease expired unfinished), result, error,
                                   reports (``ctx.report`` count), prog and total
                                   (``report_progress``'s numbers), logs (a synchronous
                                   call's log messages so far) and log:<n> (message n, sealed
                                   JSON; the last 100 kept), push (a channel),
                                   answered (1 once the answers hash exists), watch (1
                                   once a client watches it: its changes are published)
``<s>:t:<ref>:in``          hash   outstanding input requests: key -> request JSON
``<s>:t:<ref>:ans``         hash   delivered answers, kept for replay: key -> response JSON
``<s>:t:<ref>:steps``       hash   memoized ``ctx.step`` results: name -> JSON
``<s>:t:<ref>:wake``        chan   (a channel) wakes the task's run: an answer, a cancel
``<s>:t:<ref>:ev``          chan   (a pub/sub channel, not a key) every change a client can
                                   see, published by the script that makes it, once the
                                   task is watched (its ``watch`` field)
``<p>:s:<sref>``            hash   a 2025-era session (``sref`` = hash of ``Mcp-Session-Id``):
                                   version, caps, principal, scope, created_ms, log_level
                                   (``logging/setLevel``); sliding TTL
``<p>:s:<sref>:out``        hash   server→client requests in flight on the session's streams:
                                   JSON-RPC id -> {ref, key} (where the answer goes)
``<p>:s:<sref>:calls``      hash   the session's synchronous calls in flight: request id -> ref
                                   (``notifications/cancelled``)
``<p>:s:<sref>:res``        hash   the resources the session subscribed to
                                   (``resources/subscribe``): URI digest -> the URI (sealed,
                                   like the session's caps); slid and ended with the session
``<p>:s:<sref>:ev``         chan   the session's GET stream: ``res:<digest>`` when a resource
                                   it subscribed to is announced (``resource_updated.lua``)
``<p>:r:<digest>:subs``     set    the sessions (srefs) subscribed to the resource whose URI
                                   digest (sha256, 32 hex) is ``digest``; its TTL is the longest
                                   a subscriber's session may still live; a session gone leaves
                                   when an update finds it
``<p>:r:<digest>:ev``       chan   that resource's updates (``res:<digest>``) for
                                   ``subscriptions/listen`` streams
``<p>:lists``               hash   list (``tools``, ``prompts``, ``resources``) -> digest of
                                   that list as the web process that started last serves it
``<p>:lists:ev``            chan   ``list:<name>``: that list changed (a web process started
                                   serving another one: a deploy), announced once per change
``<p>:l:<scope>``           zset   ``tasks/list``: ref -> createdAt (ms) of a listing scope's
                                   tasks (2025-11-25 wire)
``<p>:l:<scope>:ids``       hash   ref -> taskId of those tasks (``tasks/list`` must return ids)
``<p>:l:<scope>:ev``        chan   changes of those tasks (the task hash's ``push`` field)
``<s>:unclaimed``           zset   the due index: ref -> the time (ms) at which the sweeper
                                   looks at the task: the earlier of its deadline (until a
                                   claim, by when its run must be enqueued or, once enqueued,
                                   started; from the claim on, its lease, which renewals move)
                                   and its expiry (a parked task has only that; then the
                                   sweeper drops it from ``active``); ended tasks have none
``<s>:leases``              zset   legacy: leases of runs claimed before the due index (the
                                   sweeper drains it; nothing writes it any more)
``<s>:active``              zset   ref -> createdAt (ms) of every non-terminal task
``<s>:expiry``              zset   legacy: ref -> expire-at (ms) of unfinished tasks created
                                   before expiries went into the due index (the sweeper
                                   drains it; nothing writes it any more)
``<s>:stats``               hash   counters: created|completed|failed|cancelled:<tool>,
                                   poisoned:<tool> (failed for lost runs);
                                   gauges: state:input_required, parked,
                                   inputs (outstanding input requests)
``<p>:workers``             zset   worker node name -> last heartbeat (ms)
``<h>:q:<pk>:tasks``        zset   quota: ref -> createdAt of a principal's unfinished tasks
                                   (``pk`` = hash of the principal); ended ones leave lazily
``<h>:q:<pk>:sync``         zset   quota: the same for its synchronous calls in flight
``<h>:q:<pk>:rate``         hash   quota: the principal's token bucket (tokens, at ms)
``<h>:used:<jti>``          str    a task-creating ``requestState`` already used; its TTL is
                                   the state's remaining life
``<p>:k:<key id>``          hash   an API key: name, digest (SHA-256 of its secret), scopes,
                                   created_ms, revoked_ms
``<p>:k``                   zset   key id -> created_ms of every API key (``mcpq keys list``)
``<p>:lock:<name>``         str    a lock (``sweeper``): its holder's token, with a TTL
==========================  =====  ===========================================================

Payloads are sealed (``payloads``, ``MCPQ_DATA_KEYS``): the task's args, caps, pre, result,
error and msg, every value of ``:in``, ``:ans`` and ``:steps``, a session's caps and the URIs it
subscribed to. Everything a script reads stays plain. A resource's URI is never a key, a
channel or a message: those name its digest (``resource_events.uri_digest``), which each reader
maps back to the URIs its own clients named.

Every per-task key expires with the task (``expire_at`` = createdAt + ttlMs). The indexes and
the stats (one set per shard), the worker list and the listings' digests never expire; index
entries leave when their task ends. A lock expires by itself.
The ``state:*`` gauges drift if a non-terminal task reaches its TTL (it vanishes unfinished).
"""

from __future__ import annotations

import binascii
import hashlib
import zlib
from dataclasses import dataclass
from functools import cache, cached_property

CLUSTER_SLOTS = 16384


def task_ref(task_id: str) -> str:
    """The storage reference of a task: not reversible to the bearer ``taskId``."""
    # 128 bits of the hash: collision-free for any number of tasks a store will hold, and
    # whoever sees a ref (Flower, logs, Redis) cannot turn it into the id that reads the task.
    return hashlib.sha256(task_id.encode()).hexdigest()[:32]


def slot(tag: str) -> int:
    """The Redis Cluster slot of every key tagged ``{tag}`` (CRC16/XMODEM mod 16384, the
    cluster specification's hash)."""
    return binascii.crc_hqx(tag.encode(), 0) % CLUSTER_SLOTS


@cache
def shard_tags(prefix: str, shards: int) -> tuple[str, ...]:
    """The hash tag (without braces) of each shard: ``prefix`` alone for one shard, else
    ``<prefix>:<s>:<salt>`` with the smallest salt that puts shard ``s`` near the centre of
    the ``s``-th of ``shards`` equal slot ranges (see the module docs)."""
    if shards < 1:
        raise ValueError(f"a store has at least one shard, not {shards}")
    if shards == 1:
        return (prefix,)
    cell = CLUSTER_SLOTS / shards
    window = max(cell / 8, 0.5)
    tags = []
    for s in range(shards):
        centre = (s + 0.5) * cell
        salt = 0
        # Expected tries: cell / (2 * window) = 4; a few hundred at most for any N up to 16384.
        while abs(slot(f"{prefix}:{s}:{salt}") - centre) > window:
            salt += 1
        tags.append(f"{prefix}:{s}:{salt}")
    return tuple(tags)


def shard_index(text: str, shards: int) -> int:
    """Which of ``shards`` a task (by ref) or a principal (by its key hash) belongs to."""
    return 0 if shards == 1 else zlib.crc32(text.encode()) % shards


@dataclass(frozen=True)
class Shard:
    """The keys of one shard: its tasks' indexes and counters, and the admission keys of the
    principals whose home it is. ``root`` is its hash tag, braces included."""

    index: int
    root: str

    @cached_property
    def task_prefix(self) -> str:
        # (Cached: every task key is built from it, 10,000 of them per renewal round.)
        return f"{self.root}:t:"

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

    def quota(self, principal_key: str, kind: str) -> str:
        """A principal's unfinished tasks (``kind`` ``tasks``) or sync calls (``sync``)."""
        return f"{self.root}:q:{principal_key}:{kind}"

    def bucket(self, principal_key: str) -> str:
        return f"{self.root}:q:{principal_key}:rate"

    def used_state(self, jti: str) -> str:
        return f"{self.root}:used:{jti}"


@dataclass(frozen=True)
class Keys:
    """Key builder for one prefix and number of shards (``MCPQ_STORE_SHARDS``)."""

    prefix: str = "mcpq"
    shards: int = 1

    def __post_init__(self) -> None:
        shard_tags(self.prefix, self.shards)  # refuses a count below one here, not later

    @cached_property
    def all_shards(self) -> tuple[Shard, ...]:
        return tuple(
            Shard(i, "{" + tag + "}") for i, tag in enumerate(shard_tags(self.prefix, self.shards))
        )

    def at(self, ref: str) -> Shard:
        """The shard of task ``ref``: its keys and the indexes its transitions update."""
        return self.all_shards[shard_index(ref, self.shards)]

    def home(self, principal_key: str) -> Shard:
        """The shard holding a principal's quota sets, token bucket and used states."""
        return self.all_shards[shard_index(principal_key, self.shards)]

    @property
    def root(self) -> str:
        # The braces are a Cluster hash tag: every global key maps to one slot (with one shard,
        # every key of the store does, which lets any script touch anything).
        return "{" + self.prefix + "}"

    @property
    def _only(self) -> Shard:
        if self.shards != 1:
            raise ValueError("a sharded store has one of these per shard: use Keys.at(ref)")
        return self.all_shards[0]

    # -- the single shard's indexes (a store of one shard; tests and benchmarks) ---------------
    @property
    def task_prefix(self) -> str:
        return self._only.task_prefix

    @property
    def leases(self) -> str:
        return self._only.leases

    @property
    def unclaimed(self) -> str:
        return self._only.unclaimed

    @property
    def active(self) -> str:
        return self._only.active

    @property
    def expiry(self) -> str:
        return self._only.expiry

    @property
    def stats(self) -> str:
        return self._only.stats

    # -- a task ----------------------------------------------------------------------------------
    def task(self, ref: str) -> str:
        return f"{self.at(ref).task_prefix}{ref}"

    def inputs(self, ref: str) -> str:
        return f"{self.task(ref)}:in"

    def answers(self, ref: str) -> str:
        return f"{self.task(ref)}:ans"

    def steps(self, ref: str) -> str:
        return f"{self.task(ref)}:steps"

    def wake(self, ref: str) -> str:
        """The channel that wakes the task's run (answers, cancel); the run's process
        subscribes to it (``mcpq.shared.store.wakeups``)."""
        return f"{self.task(ref)}:wake"

    def events(self, ref: str) -> str:
        """The task's pub/sub channel (see ``publish`` in ``lua/_prelude.lua``)."""
        return f"{self.task(ref)}:ev"

    @staticmethod
    def ref_of(task_key: str) -> str:
        """The ref of a task key (what the scripts publish on a task's channel)."""
        return task_key.rpartition(":t:")[2]

    # -- global ----------------------------------------------------------------------------------
    @property
    def workers(self) -> str:
        return f"{self.root}:workers"

    def session(self, sref: str) -> str:
        return f"{self.root}:s:{sref}"

    def session_out(self, sref: str) -> str:
        return f"{self.session(sref)}:out"

    def session_calls(self, sref: str) -> str:
        return f"{self.session(sref)}:calls"

    def session_resources(self, sref: str) -> str:
        """The resources a 2025-era session subscribed to (``resources/subscribe``)."""
        return f"{self.session(sref)}:res"

    def session_events(self, sref: str) -> str:
        """The pub/sub channel of a 2025-era session's GET stream: its subscribed resources'
        updates (``resource_updated.lua``)."""
        return f"{self.session(sref)}:ev"

    def resource_subscribers(self, digest: str) -> str:
        """The 2025-era sessions subscribed to the resource whose URI digest is ``digest``."""
        return f"{self.root}:r:{digest}:subs"

    def resource_events(self, digest: str) -> str:
        """The pub/sub channel of a resource's updates (``subscriptions/listen`` streams)."""
        return f"{self.root}:r:{digest}:ev"

    @property
    def listings(self) -> str:
        """The digests of what the deployment's web processes serve, by list."""
        return f"{self.root}:lists"

    @property
    def listing_changes(self) -> str:
        """The pub/sub channel on which a changed list (``tools``...) is announced."""
        return f"{self.root}:lists:ev"

    def listing(self, scope: str) -> str:
        return f"{self.root}:l:{scope}"

    def listing_ids(self, scope: str) -> str:
        return f"{self.listing(scope)}:ids"

    def listing_events(self, scope: str) -> str:
        """The pub/sub channel of a listing scope's tasks (the session's GET stream)."""
        return f"{self.listing(scope)}:ev"

    def quota(self, principal_key: str, kind: str) -> str:
        """A principal's unfinished tasks (``kind`` ``tasks``) or sync calls (``sync``)."""
        return self.home(principal_key).quota(principal_key, kind)

    def bucket(self, principal_key: str) -> str:
        return self.home(principal_key).bucket(principal_key)

    def used_state(self, jti: str) -> str:
        """A used state's marker in a store of one shard (a sharded store keeps it on the
        principal's home shard: ``Shard.used_state``)."""
        return self._only.used_state(jti)

    def api_key(self, key_id: str) -> str:
        return f"{self.root}:k:{key_id}"

    @property
    def api_keys(self) -> str:
        return f"{self.root}:k"

    def lock(self, name: str) -> str:
        return f"{self.root}:lock:{name}"

    @property
    def permanent(self) -> frozenset[str]:
        """The keys that never expire: each shard's indexes and counters, the worker list."""
        found = {self.workers}
        for shard in self.all_shards:
            found |= {shard.leases, shard.unclaimed, shard.active, shard.expiry, shard.stats}
        return frozenset(found)

    @property
    def pattern(self) -> str:
        """Glob matching every key of this prefix, of every shard (for tests and ops)."""
        if self.shards == 1:
            return self.root.replace("{", "[{]").replace("}", "[}]") + ":*"
        return "[{]" + self.prefix + "[}:]*"
