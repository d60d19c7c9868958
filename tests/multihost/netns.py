"""Hosts as Linux network namespaces on one bridge: the network of the multi-host tests.

A :class:`Network` is a bridge in the root namespace with the first address of a private /24
(``10.213.<n>.0/24``, ``n`` picked at random among the /24s no interface or route of this
machine uses), and one namespace per host, joined to the bridge by a veth pair whose inner end
is the host's ``eth0``. The test process stays in the root namespace and reaches every host
through the bridge's address; the hosts reach each other through the bridge. Processes run
inside a host with ``ip netns exec`` (which execs, so the pid is the process's own), each the
leader of its own process group; only the network is separate, the filesystem and the pid
namespace are shared.

What a test does to a host:

- :meth:`Network.cut` / :meth:`Network.restore`: the host's bridge port goes down / up, as a
  switch port would. Nothing is reset: packets are dropped, TCP retransmits, and connections
  that outlive the cut carry on when the link returns;
- :meth:`Network.kill_host`: SIGKILL every process in the namespace (``ip netns pids``), a host
  that loses power.

Names are unique per run (a random tag; namespaces also carry the test process's pid, so a later
run can remove what a killed run left behind: :func:`sweep_stale`), and :meth:`Network.close`
always removes everything it made: it kills every process left in each namespace, deletes the
namespaces (their veth pairs go with them) and the bridge, also after a failed setup.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import random
import re
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Self

from mcpq.ops.runtime.processes import pid_alive

NETNS_PREFIX = "mcpq-mh"
"""Namespaces are ``mcpq-mh-<pid of the test process>-<tag>-<host>``."""
SUBNET_BASE = "10.213"
"""The /16 the per-run /24 is taken from (rarely used: no VPN, cloud or container default)."""
_NAME = re.compile(rf"^{NETNS_PREFIX}-(\d+)-([0-9a-f]{{6}})-")


class NetnsUnavailable(RuntimeError):
    """This machine cannot run the multi-host tests (the reason is the message)."""


class NetworkError(RuntimeError):
    """An ``ip`` command failed while building or changing the network."""


def ip(*args: str, check: bool = True) -> str:
    """Run ``ip <args>``; its stdout. :class:`NetworkError` with its stderr when it fails."""
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, check=False)
    if check and done.returncode != 0:
        raise NetworkError(f"ip {' '.join(args)}: {done.stderr.strip() or done.returncode}")
    return done.stdout


def unavailable_reason() -> str | None:
    """Why network namespaces cannot be used here (a skip reason), or ``None``."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "needs root (network namespaces, veth pairs and a bridge)"
    if shutil.which("ip") is None:
        return "needs iproute2's `ip` command"
    probe = f"{NETNS_PREFIX}-probe-{os.getpid()}-{secrets.token_hex(3)}"
    try:
        ip("netns", "add", probe)
    except NetworkError as exc:
        return f"cannot create a network namespace (CAP_SYS_ADMIN/CAP_NET_ADMIN?): {exc}"
    try:
        ip("-n", probe, "link", "add", "mqprobe0", "type", "veth", "peer", "name", "mqprobe1")
    except NetworkError as exc:
        return f"cannot create a veth pair (CAP_NET_ADMIN?): {exc}"
    finally:
        ip("netns", "del", probe, check=False)
    return None


@dataclass(frozen=True)
class Host:
    """One host: its namespace, its address on the bridge's /24 and its bridge port."""

    name: str
    netns: str
    address: str
    port: str
    """The veth end in the root namespace, attached to the bridge (the host's "switch port")."""


class Network:
    """A bridge with an address and hosts (namespaces) on it; see the module docstring."""

    def __init__(self) -> None:
        self.tag = secrets.token_hex(3)
        self.bridge = f"mqb{self.tag}"  # interface names are at most 15 characters
        self.prefix = f"{NETNS_PREFIX}-{os.getpid()}-{self.tag}"
        self.subnet = ""
        self.hosts: list[Host] = []

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> Self:
        """Make the bridge (its address: ``<subnet>.1``); removes it again if that fails."""
        try:
            ip("link", "add", self.bridge, "type", "bridge")
            # Bridged frames must not go through iptables (br_netfilter, e.g. under Docker,
            # whose FORWARD policy is DROP): best effort, older kernels lack the option.
            ip("link", "set", self.bridge, "type", "bridge", "nf_call_iptables", "0", check=False)
            self.subnet = self._claim_subnet()
            ip("link", "set", self.bridge, "up")
        except BaseException:
            self.close()
            raise
        return self

    @property
    def gateway(self) -> str:
        """The bridge's address: where the test process meets the hosts."""
        return f"{self.subnet}.1"

    def add_host(self, name: str) -> Host:
        """A namespace with ``lo`` and ``eth0`` up, ``eth0`` on the bridge at the next address."""
        if not self.subnet:
            raise NetworkError("start() the network first")
        number = len(self.hosts) + 2
        address, port = f"{self.subnet}.{number}", f"mq{self.tag}h{number}"
        host = Host(name, f"{self.prefix}-{name}", address, port)
        ip("netns", "add", host.netns)
        self.hosts.append(host)  # listed at once: close() deletes it whatever fails next
        ip("link", "add", host.port, "type", "veth", "peer", "name", "eth0", "netns", host.netns)
        ip("link", "set", host.port, "master", self.bridge)
        ip("link", "set", host.port, "up")
        ip("-n", host.netns, "addr", "add", f"{host.address}/24", "dev", "eth0")
        ip("-n", host.netns, "link", "set", "eth0", "up")
        ip("-n", host.netns, "link", "set", "lo", "up")
        return host

    def close(self) -> list[str]:
        """Kill every process in every host, delete the namespaces, the veth pairs and the
        bridge. Returns what could not be removed (nothing, when all went well)."""
        problems: list[str] = []
        for host in self.hosts:
            left = kill_namespace(host.netns)
            if left:
                problems.append(f"{host.name}: processes still alive: {left}")
            with contextlib.suppress(NetworkError):
                ip("netns", "del", host.netns)
            # Deleting the namespace deletes its veth end and with it the pair; be sure.
            ip("link", "del", host.port, check=False)
        ip("link", "del", self.bridge, check=False)
        leftovers = [h.netns for h in self.hosts if h.netns in namespaces()]
        if leftovers:
            problems.append(f"namespaces not deleted: {leftovers}")
        if link_exists(self.bridge):
            problems.append(f"bridge not deleted: {self.bridge}")
        self.hosts = []
        return problems

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- processes ------------------------------------------------------------------------------
    @staticmethod
    def argv(host: Host, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside ``host`` (``ip netns exec`` execs it: same pid)."""
        return ["ip", "netns", "exec", host.netns, *argv]

    @staticmethod
    def pids(host: Host) -> list[int]:
        """Every process in the host's namespace."""
        return namespace_pids(host.netns)

    @staticmethod
    def kill_host(host: Host) -> float:
        """SIGKILL every process in ``host`` at once (a power loss); returns when, as
        ``time.monotonic()``."""
        at = time.monotonic()
        pids = namespace_pids(host.netns)
        if not pids:
            raise NetworkError(f"nothing runs on {host.name}")
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return at

    # -- links ----------------------------------------------------------------------------------
    @staticmethod
    def cut(host: Host) -> float:
        """Take the host's bridge port down: it can reach nobody, nobody can reach it. Returns
        when, as ``time.monotonic()``."""
        ip("link", "set", host.port, "down")
        return time.monotonic()

    @staticmethod
    def restore(host: Host) -> float:
        """Bring the host's bridge port up again."""
        ip("link", "set", host.port, "up")
        return time.monotonic()

    # -- internals ------------------------------------------------------------------------------
    def _claim_subnet(self) -> str:
        """Give the bridge ``10.213.<n>.1/24`` for an ``n`` that nothing here uses. Another run
        may pick the same ``n`` at the same moment: the check after the assignment sees both
        addresses, and this run moves on to another ``n``."""
        candidates = list(range(1, 255))
        random.shuffle(candidates)
        for n in candidates[:20]:
            subnet = f"{SUBNET_BASE}.{n}"
            network = ipaddress.ip_network(f"{subnet}.0/24")
            if any(network.overlaps(used) for used in used_networks()):
                continue
            ip("addr", "add", f"{subnet}.1/24", "dev", self.bridge)
            others = [u for u in used_networks(exclude=self.bridge) if network.overlaps(u)]
            if not others:
                return subnet
            ip("addr", "del", f"{subnet}.1/24", "dev", self.bridge, check=False)
        raise NetworkError(f"no free /24 in {SUBNET_BASE}.0.0/16 after 20 tries")


def used_networks(exclude: str = "") -> list[ipaddress.IPv4Network]:
    """The IPv4 networks of every address and route of the root namespace (but ``exclude``'s)."""
    found: list[ipaddress.IPv4Network] = []
    for entry in json.loads(ip("-j", "-4", "addr", "show") or "[]"):
        if entry.get("ifname") == exclude:
            continue
        for info in entry.get("addr_info", []):
            local = f"{info['local']}/{info['prefixlen']}"
            found.append(ipaddress.IPv4Network(local, strict=False))
    for route in json.loads(ip("-j", "-4", "route", "show", "table", "all") or "[]"):
        dst = route.get("dst", "")
        if route.get("dev") == exclude or dst in {"", "default"}:
            continue
        with contextlib.suppress(ValueError):
            found.append(ipaddress.IPv4Network(dst if "/" in dst else f"{dst}/32", strict=False))
    return found


def namespaces() -> list[str]:
    """Names of the named network namespaces (``ip netns list``)."""
    return [line.split()[0] for line in ip("netns", "list").splitlines() if line.strip()]


def namespace_pids(netns: str) -> list[int]:
    """Processes in namespace ``netns`` (none once it is gone)."""
    out = ip("netns", "pids", netns, check=False)
    return [int(word) for word in out.split() if word.isdigit()]


def kill_namespace(netns: str, timeout: float = 5.0) -> list[int]:
    """SIGKILL every process in ``netns`` until none is left (a process may fork meanwhile);
    returns those still alive after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        pids = [pid for pid in namespace_pids(netns) if pid_alive(pid)]
        if not pids or time.monotonic() >= deadline:
            return pids
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)


def link_exists(name: str) -> bool:
    shown = subprocess.run(
        ["ip", "link", "show", name], capture_output=True, timeout=30, check=False
    )
    return shown.returncode == 0


def sweep_stale() -> list[str]:
    """Remove the namespaces (and bridges) of runs whose test process is gone (a run killed
    before its clean-up); returns the namespaces removed."""
    removed: list[str] = []
    for netns in namespaces():
        match = _NAME.match(netns)
        if match is None or pid_alive(int(match.group(1))):
            continue
        kill_namespace(netns)
        ip("netns", "del", netns, check=False)
        ip("link", "del", f"mqb{match.group(2)}", check=False)
        removed.append(netns)
    return removed
