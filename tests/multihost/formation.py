"""mcpq spread over hosts: redis-server, ``mcpq web`` and ``mcpq worker``, each on a host of a
:class:`tests.multihost.netns.Network`.

A :class:`Formation` is a :class:`tests.support.stacks.LiveStack` (children in process groups,
logs in its directory, the store and log reads of ``ops.harness.stack.Stack``, leftovers asserted on
close) whose children run inside the hosts' namespaces (``ip netns exec``) and talk over the
bridge, as separate machines would:

- redis-server binds its host's address only, with a password (``requirepass``, from a config
  file readable by root only, so it is on no command line); every client's ``REDIS_URL``
  carries it;
- each web host runs ``mcpq web`` bound to its own address (not loopback: the start-up checks
  then want ``MCPQ_AUTH``, here the explicit ``none``, and ``MCPQ_ALLOWED_HOSTS`` lists the web
  addresses the test's client uses as ``Host``);
- each worker host runs ``mcpq worker`` (the Procfile's command; io pool by default) as a Celery
  node named after its host, with ``MULTIHOST_HOST`` naming the host for the test tools.

One ``MCPQ_SECRET`` and one ``MCPQ_DATA_KEYS`` (``mcpq.shared.sealing.new_data_key``) serve every
host, as a real deployment's configuration would. The test process reaches Redis and the web
hosts through the bridge's address.
"""

from __future__ import annotations

import os
import re
import secrets
import sys
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path

import redis

from mcpq.ops.harness.children import Child
from mcpq.ops.harness.stack import http_ok
from mcpq.ops.runtime.redis_binary import choose_redis_server
from mcpq.shared.settings import DEFAULT_TOOLS
from tests.multihost.netns import Host, Network
from tests.multihost.tools_multihost import HOST_ENV
from tests.support.stacks import LiveStack

REDIS_PORT = 6379
WEB_PORT = 8000
MULTIHOST_TOOLS = f"{DEFAULT_TOOLS},tests.multihost.tools_multihost"

LEASE_S = 2.0
SWEEP_INTERVAL_S = 0.5
MULTIHOST_KNOBS = {
    # Private network, one test client: no authentication, chosen explicitly (a non-loopback
    # bind without MCPQ_AUTH does not start).
    "MCPQ_AUTH": "none",
    # A short lease and frequent sweeps: a lost run is found again within seconds.
    "MCPQ_LEASE_S": f"{LEASE_S:g}",
    "MCPQ_SWEEP_INTERVAL_S": f"{SWEEP_INTERVAL_S:g}",
    "MCPQ_UNCLAIMED_AFTER_S": "2",
    "MCPQ_REQUEUE_UNSTARTED_S": "5",
    "MCPQ_CANCEL_GRACE_S": "1",
    "MCPQ_INPUT_HOLD_S": "3",
    "MCPQ_POLL_INTERVAL_MS": "200",
    "MCPQ_SYNC_TIMEOUT_S": "20",
}


class Formation(LiveStack):
    """redis-server, web processes and Celery workers on the hosts of ``network``."""

    def __init__(
        self,
        network: Network,
        workdir: Path,
        *,
        env: Mapping[str, str] | None = None,
        tools: str = MULTIHOST_TOOLS,
    ) -> None:
        super().__init__(
            f"mh{network.tag}", workdir, tools=tools, env={**MULTIHOST_KNOBS, **(env or {})}
        )
        self.network = network
        self._password = secrets.token_urlsafe(24)
        self.redis_host: Host | None = None
        self._hosts: dict[str, Host] = {}  # child name -> the host it runs on
        self._worker_names: set[str] = set()

    @property
    def redis_url(self) -> str:
        assert self.redis_host is not None, "start_redis_on() first"
        return f"redis://:{self._password}@{self.redis_host.address}:{REDIS_PORT}/0"

    # -- starting -------------------------------------------------------------------------------
    def start_on(
        self,
        *,
        redis_host: Host,
        web_hosts: Sequence[Host],
        worker_hosts: Sequence[Host],
        pool: str = "io",
        concurrency: int = 4,
    ) -> Formation:
        """Redis first, then every web and worker process at once; returns once each web
        answers ``/healthz`` and each worker logged Celery's `` ready.``."""
        try:
            self.start_redis_on(redis_host)
            webs = [self.spawn_web(host, web_hosts) for host in web_hosts]
            workers = [self.spawn_worker(host, pool, concurrency) for host in worker_hosts]
            for child, url in zip(webs, self.web_urls, strict=True):
                self._ready(child, partial(http_ok, f"{url}/healthz"), "/healthz")
            for child in workers:
                self.wait_ready(child)
        except BaseException:
            self.abort()
            raise
        return self

    def start_redis_on(self, host: Host) -> Child:
        """redis-server bound to ``host``'s address, in memory, with a password."""
        data = self.workdir / "redis-data"
        data.mkdir(exist_ok=True)
        conf = self.workdir / "redis.conf"
        conf.touch(mode=0o600)
        conf.write_text(
            f"bind {host.address}\nport {REDIS_PORT}\nrequirepass {self._password}\n"
            f'dir {data}\nsave ""\nappendonly no\ndaemonize no\n',
            encoding="utf-8",
        )
        argv = self.network.argv(host, [choose_redis_server().path, str(conf)])
        child = self._spawn("redis", argv, {"PATH": os.environ.get("PATH", "")})
        self.extras.append(child)
        self._hosts[child.name] = host
        self.redis_host = host
        return self._ready(child, self._redis_answers, "PING with the password")

    def spawn_web(self, host: Host, web_hosts: Sequence[Host]) -> Child:
        """``mcpq web`` on ``host``, bound to its address; ``Host`` may name any web host."""
        argv = [sys.executable, "-m", "mcpq", "web", "--host", host.address]
        argv += ["--port", str(WEB_PORT)]
        allowed = ",".join(f"{h.address}:{WEB_PORT}" for h in web_hosts)
        env = self.child_env(MCPQ_ALLOWED_HOSTS=allowed)
        child = self._spawn(host.name, self.network.argv(host, argv), env)
        self._hosts[child.name] = host
        self.webs.append(child)
        self.web_urls.append(f"http://{host.address}:{WEB_PORT}")
        return child

    def spawn_worker(self, host: Host, pool: str = "io", concurrency: int = 4) -> Child:
        """``mcpq worker`` on ``host``, a Celery node named after it."""
        argv = [sys.executable, "-m", "mcpq", "worker", "--pool", pool]
        argv += ["--concurrency", str(concurrency), "--hostname", f"{self.name}-{host.name}@%h"]
        env = self.child_env(**{HOST_ENV: host.name})
        child = self._spawn(host.name, self.network.argv(host, argv), env)
        self._hosts[child.name] = host
        self._worker_names.add(child.name)
        self.workers.append(child)
        return child

    def _redis_answers(self) -> bool:
        client = redis.Redis.from_url(self.redis_url, socket_timeout=1, socket_connect_timeout=1)
        try:
            return bool(client.ping())
        except redis.RedisError:
            return False
        finally:
            client.close()

    # -- hosts ----------------------------------------------------------------------------------
    def host_of(self, child: Child) -> Host:
        return self._hosts[child.name]

    def worker_on(self, host: Host) -> Child:
        (child,) = [w for w in self.workers if self.host_of(w) == host]
        return child

    def kill_host(self, host: Host) -> float:
        """SIGKILL every process on ``host`` (``ip netns pids``), then reap its children;
        returns when it was killed (``time.monotonic()``)."""
        children = [c for c in self.webs + self.workers + self.extras if self.host_of(c) == host]
        for child in children:
            child.remember_descendants()
        killed_at = self.network.kill_host(host)
        for child in children:
            self.reap(child, timeout=10)
        return killed_at

    def received(self, tool: str) -> dict[str, list[str]]:
        """The hosts whose worker received a message of each task (ref -> host names, one per
        message), from Celery's ``Task <tool>[<ref>] received`` lines (a recovery send's id is
        the ref and a suffix: ``mcpq.shared.jobs.job_id``)."""
        pattern = re.compile(rf"Task {re.escape(tool)}\[([0-9a-f]+)(?:-[0-9a-f]+)?\] received")
        found: dict[str, list[str]] = {}
        for child in self.workers + self.stopped:
            if child.name in self._worker_names:
                for ref in pattern.findall(child.log()):
                    found.setdefault(ref, []).append(self.host_of(child).name)
        return found
