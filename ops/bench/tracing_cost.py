"""What tracing costs in throughput: ``python -m mcpq.ops.bench.tracing_cost``.

Three deployments of mcpq, each as ``mcpq.ops.bench.throughput`` runs one (``mcpq web`` with 2
gunicorn workers, ``mcpq worker``, a private redis-server), all up at once:

- **baseline**: the build without tracing, the tree of ``--baseline-ref`` (default ``9e75498``,
  the commit before tracing landed) exported with ``git archive`` and imported instead of the
  repository's (``mcpq.ops.bench.builds``);
- **off**: this tree (the working tree, or ``--head-ref``'s), tracing off (no ``OTEL_*``);
- **on**: the same tree, tracing on and every trace sampled (``OTEL_TRACES_SAMPLER=always_on``),
  exporting OTLP/HTTP to a real receiver this benchmark runs on a thread
  (``mcpq.ops.harness.otlp_receiver``, counting only: each export decoded, its spans counted).
  The batch span processor keeps the SDK's defaults (``OTEL_BSP_SCHEDULE_DELAY`` 5000 ms, a
  queue of 2048, batches of 512) unless ``--bsp-delay-ms`` says otherwise.

Measured: **completed/s**, ``--clients`` clients each creating a task of the no-op tool and
polling it (every 10 ms) to completion, again and again, for ``--seconds`` (the throughput
benchmark's phase, by its load generator), in ``--rounds`` rounds; in each round every deployment
in turn, the order changing from round to round (over every 6 rounds, each first as often as
the others, each pair either way round as often). Reported: each deployment's median and spread
(min-max, and the quartiles) over the rounds; **off / baseline** and **on / off** as ratios of
the medians, and round by round (the same round's figures, close in time: a drift of the shared
host cancels); the spans the receiver got (none: the "on" figure means nothing, the run fails).

Measured too, in the same run (``mcpq.ops.bench.span_floor``): each deployment's **server CPU
per completed task** (user + system of its web's gunicorn master and workers, its worker, its
private redis-server, over each of its rounds, divided by that round's tasks; the median of the
rounds, web / worker / redis / total, in ms) and ``on - off``; the **spans per task** (the
receiver's spans / on's tasks) and from them the **in-situ cost per span** (on's CPU per task
minus off's, over the spans per task, in µs); **the SDK alone**: once the deployments are down, a
child process (the tracing SDK is never imported in this one) makes ``--sdk-spans`` spans shaped
like mcpq's, in its mix per task, through ``BatchSpanProcessor`` + ``OTLPSpanExporter`` to the
same receiver, and reports its CPU per span (create + end, export); and **the floor**:
``off / (off + spans per task * SDK alone's µs)``, the best on / off any code could reach at this
span count with this SDK (in CPU), printed with the same at the in-situ cost (= off's CPU per
task / on's) and the measured on / off.

Checked, else the run fails: no request failed; every deployment imported mcpq from its own build
and from no other, seen from the bytecode its processes wrote; the tracing SDK was imported by
"on" and by neither of the others (under load: nothing made a span where tracing is off); the
receiver got every span the SDK alone made. Any ``OTEL_*`` variable of the caller's is dropped
first (it would turn tracing on everywhere).

Run it from a checkout, its venv active::

    python -m mcpq.ops.bench.tracing_cost                   # 12 rounds of 3 s, 20 clients: ~4 min
    python -m mcpq.ops.bench.tracing_cost --rounds 18 --seconds 5
    python -m mcpq.ops.bench.tracing_cost --head-ref HEAD   # the last commit, not the working tree

``--json`` prints one JSON object. A smoke test runs it tiny in CI (correctness only:
``tests/ops/test_bench_tracing_cost.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mcpq.ops.bench.builds import Build, export
from mcpq.ops.bench.loadgen import Target, spread, steal_s
from mcpq.ops.bench.span_floor import PARTS, cpu_reading, cpu_spent, floor, sdk_cost
from mcpq.ops.bench.throughput import mcpq_target
from mcpq.ops.harness.children import REPO
from mcpq.ops.harness.otlp_receiver import OtlpReceiver

BASELINE_REF = "9e75498"
TARGET_ON_OFF = 0.85
NAMES = ("baseline", "off", "on")


@dataclass
class Side:
    """One deployment's completed/s, round by round (in the order of the rounds)."""

    name: str
    build: str
    mcpq_file: str
    per_round: list[float] = field(default_factory=list)
    tasks: int = 0
    failures: int = 0
    steal_s: float = 0.0
    imports: dict[str, Any] = field(default_factory=dict)
    #: Server CPU per completed task (ms), round by round, by part and in total.
    cpu_ms: dict[str, list[float]] = field(
        default_factory=lambda: {part: [] for part in (*PARTS, "total")}
    )

    def summary(self) -> dict[str, float]:
        values = self.per_round or [0.0]
        q1, _, q3 = (
            statistics.quantiles(values, n=4, method="inclusive") if len(values) > 1 else values * 3
        )
        return {
            "median": round(statistics.median(values), 1),
            "min": round(min(values), 1),
            "max": round(max(values), 1),
            "q1": round(q1, 1),
            "q3": round(q3, 1),
        }

    def add_cpu(self, spent: dict[str, float], tasks: int) -> None:
        """One round's CPU seconds by part, for ``tasks`` completed tasks."""
        for part, seconds in (*spent.items(), ("total", sum(spent.values()))):
            self.cpu_ms[part].append(seconds * 1000 / tasks)

    def cpu_medians(self) -> dict[str, float]:
        """Server CPU per task (ms), the median over the rounds, by part and in total."""
        return {part: round(statistics.median(v or [0.0]), 3) for part, v in self.cpu_ms.items()}


def ratio(top: Side, bottom: Side) -> dict[str, Any]:
    """``top / bottom``: of the medians, and round by round (median, min, max)."""
    medians = statistics.median(top.per_round or [0.0]), statistics.median(bottom.per_round or [1])
    rounds = [a / b for a, b in zip(top.per_round, bottom.per_round, strict=True) if b]
    return {
        "of_medians": round(medians[0] / medians[1], 3) if medians[1] else 0.0,
        "by_round": [round(r, 3) for r in rounds],
        "by_round_median": round(statistics.median(rounds or [0.0]), 3),
        "by_round_min": round(min(rounds or [0.0]), 3),
        "by_round_max": round(max(rounds or [0.0]), 3),
    }


def orders(count: int) -> list[tuple[int, ...]]:
    """The rounds' orders, in turn: every rotation, then every rotation of the reverse (for 2
    or 3 deployments: each first as often, each pair either way round as often)."""
    ahead = list(range(count))
    behind = ahead[::-1]
    rotations = [tuple(ahead[i:] + ahead[:i]) for i in range(count)]
    return rotations + [tuple(behind[i:] + behind[:i]) for i in range(count)]


def measure(
    targets: list[Target], sides: list[Side], clients: int, seconds: float, rounds: int, procs: int
) -> None:
    """A warm-up of each, then ``rounds`` rounds of completed/s on each in turn."""
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(procs, mp_context=context) as pool:
        for target, side in zip(targets, sides, strict=True):
            warm = spread(pool, procs, target.url, "cycle", clients, 0.0)  # about 1 s
            side.tasks += warm["done"]
            side.failures += warm["failures"]
        for order in itertools.islice(itertools.cycle(orders(len(targets))), rounds):
            for i in order:
                stolen, started, cpu = steal_s(), time.time(), cpu_reading(targets[i])
                cycled = spread(pool, procs, targets[i].url, "cycle", clients, seconds)
                sides[i].per_round.append(cycled["done"] / (time.time() - started))
                if cycled["done"]:
                    sides[i].add_cpu(cpu_spent(cpu, cpu_reading(targets[i])), cycled["done"])
                sides[i].tasks += cycled["done"]
                sides[i].failures += cycled["failures"]
                sides[i].steal_s += steal_s() - stolen
        # (per_round is in the order of the rounds, whichever deployment went first)


def settled(receiver: OtlpReceiver, quiet_s: float, timeout: float = 60.0) -> tuple[int, int, int]:
    """The receiver's counts once nothing more arrived for ``quiet_s`` (the last batches of a
    span processor leave within its schedule delay)."""
    last, changed = receiver.counts(), time.monotonic()
    deadline = changed + timeout
    while time.monotonic() < deadline:
        time.sleep(0.2)
        now = receiver.counts()
        if now != last:
            last, changed = now, time.monotonic()
        elif time.monotonic() - changed >= quiet_s and last[0] > 0:
            break
    return last


def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    baseline_tree = (workdir / "baseline-tree").resolve()
    baseline = Build(baseline_tree, export(args.baseline_ref, baseline_tree), workdir / "pyc-b")
    head_tree, head_commit = REPO, ""
    if args.head_ref:
        head_tree = (workdir / "head-tree").resolve()
        head_commit = export(args.head_ref, head_tree)
    off = Build(head_tree, head_commit, workdir / "pyc-off")
    on = Build(head_tree, head_commit, workdir / "pyc-on")
    builds = dict(zip(NAMES, (baseline, off, on), strict=True))
    sides = [Side(name, b.label, b.mcpq_file()) for name, b in builds.items()]
    for side, build in zip(sides, builds.values(), strict=True):
        if not side.mcpq_file.startswith(str(build.tree) + os.sep):
            raise RuntimeError(f"{side.name} would import {side.mcpq_file}, not {build.tree}")
    otel = {"OTEL_TRACES_SAMPLER": "always_on"}
    if args.bsp_delay_ms is not None:
        otel["OTEL_BSP_SCHEDULE_DELAY"] = str(args.bsp_delay_ms)
    with OtlpReceiver(keep=False) as receiver:
        otel["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver.endpoint
        envs = {"baseline": {}, "off": {}, "on": otel}
        with contextlib.ExitStack() as up:
            targets = [
                up.enter_context(mcpq_target(workdir / n, envs[n], builds[n], n)) for n in NAMES
            ]
            measure(targets, sides, args.clients, args.seconds, args.rounds, args.procs)
            quiet_s = (args.bsp_delay_ms if args.bsp_delay_ms is not None else 5000) / 1000 + 1.0
            spans, exports, received = settled(receiver, quiet_s)
            receiver_cpu_s = receiver.cpu_s
        # The SDK alone, on the same host once the deployments are down, to the same receiver.
        on_tasks = sides[NAMES.index("on")].tasks
        per_task = spans / on_tasks if on_tasks else 0.0
        before = receiver.counts()[0]
        sdk = sdk_cost(receiver.endpoint, args.sdk_spans, per_task or 8.0, args.bsp_delay_ms)
        sdk["received"] = receiver.counts()[0] - before
    problems: list[str] = []
    trees = sorted({REPO, baseline.tree, head_tree})
    for side, build in zip(sides, builds.values(), strict=True):
        side.imports, wrong = build.check(trees, tracing=side.name == "on")
        problems += [f"{side.name}: {p}" for p in wrong]
        if side.failures:
            problems.append(f"{side.name}: {side.failures} failed requests")
        if not all(side.per_round):
            problems.append(f"{side.name}: a round completed no task ({side.per_round})")
    if spans == 0:
        problems.append("on: the receiver got no span (the on figure would mean nothing)")
    if sdk["received"] < sdk["exported"]:
        problems.append(f"SDK alone: {sdk['exported']} spans made, {sdk['received']} received")
    by_name = {side.name: side for side in sides}
    on_off = ratio(by_name["on"], by_name["off"])
    on_off.update(target=TARGET_ON_OFF, met=on_off["of_medians"] >= TARGET_ON_OFF)
    cpu: dict[str, dict[str, float]] = {side.name: side.cpu_medians() for side in sides}
    cpu["on_minus_off"] = {k: round(v - cpu["off"][k], 3) for k, v in cpu["on"].items()}
    in_situ_us = cpu["on_minus_off"]["total"] * 1000 / per_task if per_task else 0.0
    off_ms = cpu["off"]["total"]
    return {
        "clients": args.clients,
        "seconds": args.seconds,
        "rounds": args.rounds,
        "baseline_ref": args.baseline_ref,
        "otel": {k: v for k, v in otel.items() if k != "OTEL_EXPORTER_OTLP_ENDPOINT"},
        "deployments": {s.name: {**asdict(s), **s.summary()} for s in sides},
        "off_vs_baseline": ratio(by_name["off"], by_name["baseline"]),
        "on_vs_off": on_off,
        "spans": {
            "received": spans,
            "exports": exports,
            "bytes": received,
            "receiver_cpu_s": round(receiver_cpu_s, 2),
            "per_task": round(per_task, 2),
            "in_situ_us_per_span": round(in_situ_us, 1),
        },
        "cpu_per_task_ms": cpu,
        "sdk": sdk,
        "floor": {
            "sdk": floor(off_ms, per_task, sdk["us_per_span"]),
            "in_situ": floor(off_ms, per_task, in_situ_us),
            "measured_on_off": on_off["of_medians"],
        },
        "problems": problems,
    }


def lines(found: dict[str, Any]) -> list[str]:
    out = [
        f"completed/s ({found['clients']} clients each creating a no-op task and polling it to"
        f" the end), {found['rounds']} rounds of {found['seconds']:g} s, the order alternating"
    ]
    labels = {"baseline": "no tracing", "off": "tracing off", "on": "tracing on, always_on"}
    for name, side in found["deployments"].items():
        out.append(
            f"  {name:<9}{side['build']:<13} {labels[name]:<22} median {side['median']:7.1f}"
            f"  IQR {side['q1']:.1f}-{side['q3']:.1f}  min-max {side['min']:.1f}-{side['max']:.1f}"
            f"  ({side['tasks']} tasks, {side['failures']} failed, steal {side['steal_s']:.2f} s)"
        )
        out.append("           by round: " + ", ".join(f"{v:.1f}" for v in side["per_round"]))
    for key, title in (("off_vs_baseline", "off / baseline"), ("on_vs_off", "on / off")):
        r = found[key]
        out.append(
            f"  {title:<16}{r['of_medians']:6.3f} (of the medians); by round median"
            f" {r['by_round_median']:.3f}, min-max {r['by_round_min']:.3f}-{r['by_round_max']:.3f}"
        )
    met = "met" if found["on_vs_off"]["met"] else "NOT met"
    out[-1] += f"  [target >= {TARGET_ON_OFF}: {met}]"
    spans = found["spans"]
    out.append(
        f"  spans received  {spans['received']} in {spans['exports']} exports"
        f" ({spans['bytes'] / 2**20:.1f} MiB; receiver CPU {spans['receiver_cpu_s']:.1f} s),"
        f" {spans['per_task']} per task of on;"
        f" {', '.join(f'{k}={v}' for k, v in found['otel'].items())}"
        f"{'' if 'OTEL_BSP_SCHEDULE_DELAY' in found['otel'] else ', BSP defaults'}"
    )
    out += cpu_lines(found)
    for name, side in found["deployments"].items():
        imports = side["imports"]
        out.append(
            f"  {name:<9}imported mcpq from {Path(side['mcpq_file']).parent.parent}"
            f" ({imports['modules_from_build']} modules; elsewhere:"
            f" {imports['modules_from_elsewhere'] or 'none'}); tracer SDK: {imports['tracer_sdk']}"
        )
    out += [f"  PROBLEM: {p}" for p in found["problems"]]
    return out


def cpu_lines(found: dict[str, Any]) -> list[str]:
    """Server CPU per task, the cost per span in situ and of the SDK alone, the floors."""
    cpu, spans, sdk, floors = (found[k] for k in ("cpu_per_task_ms", "spans", "sdk", "floor"))
    columns = (*PARTS, "total")
    out = [
        "  server CPU per completed task, ms (median of the rounds; redis: its private server)",
        "              " + "".join(f"{part:>9}" for part in columns),
    ]
    for name, parts in cpu.items():
        sign = "+" if name == "on_minus_off" else ""
        out.append(
            f"    {name.replace('_minus_', ' - '):<10}"
            + "".join(f"{parts[part]:{sign}9.3f}" for part in columns)
        )
    out += [
        f"  in situ         {spans['in_situ_us_per_span']:.1f} us of server CPU per span:"
        f" (on - off) / {spans['per_task']} spans per task",
        f"  SDK alone       {sdk['us_per_span']:.1f} us of CPU per span (create + end"
        f" {sdk['create_end_us']:.1f}, export {sdk['export_us']:.1f}): a child process,"
        f" {sdk['spans']} spans in mcpq's mix ({sdk['spans_per_task']} per task),"
        " BatchSpanProcessor + OTLP/HTTP to the same receiver",
        f"  floor on/off    {floors['sdk']:.3f} (CPU): off / (off + spans per task x SDK alone),"
        " the best any code could reach at this span count with this SDK",
        f"  in situ on/off  {floors['in_situ']:.3f} (CPU): off / (off + spans per task x in situ)"
        " = off's CPU per task / on's",
        f"  measured on/off {floors['measured_on_off']:.3f} (completed/s, of the medians)",
    ]
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m mcpq.ops.bench.tracing_cost", description=(__doc__ or "").split("\n")[0]
    )
    parser.add_argument("--clients", type=int, default=20, help="concurrent clients (20)")
    parser.add_argument("--seconds", type=float, default=3.0, help="per round and side (3)")
    parser.add_argument("--rounds", type=int, default=12, help="rounds (12)")
    parser.add_argument("--procs", type=int, default=2, help="load-generator processes (2)")
    parser.add_argument(
        "--baseline-ref", default=BASELINE_REF, help=f"the build without tracing ({BASELINE_REF})"
    )
    parser.add_argument(
        "--head-ref", default="", help="off and on from this commit (default: the working tree)"
    )
    parser.add_argument(
        "--bsp-delay-ms", type=int, default=None, help="OTEL_BSP_SCHEDULE_DELAY (SDK's: 5000)"
    )
    parser.add_argument(
        "--sdk-spans", type=int, default=20_000, help="spans the SDK alone makes (20000)"
    )
    parser.add_argument("--json", action="store_true", help="one JSON object")
    args = parser.parse_args(argv)
    for name in [k for k in os.environ if k.startswith("OTEL_")]:
        print(f"ignoring {name} of the environment", file=sys.stderr)
        del os.environ[name]
    with tempfile.TemporaryDirectory(prefix="mcpq-tracing-cost-") as tmp:
        found = run(args, Path(tmp))
    print(json.dumps(found) if args.json else "\n".join(lines(found)))
    for problem in found["problems"]:
        print(f"FAILED: {problem}", file=sys.stderr)
    return 1 if found["problems"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
