"""How the waiting-runs benchmark tells the lease keeper's renewal rounds apart in what MONITOR
saw (``mcpq.ops.bench.renewals._rounds``): by a pause of half a period, or by a run renewed again
when a late keeper sends its rounds back to back."""

from __future__ import annotations

from mcpq.ops.bench.renewals import Renewal, _rounds


def renewals(start: float, refs: list[bytes], step: float = 0.001) -> list[Renewal]:
    return [(start + i * step, b"127.0.0.1:5000", ref) for i, ref in enumerate(refs)]


def test_rounds_apart_by_a_pause_are_told_apart() -> None:
    seen = renewals(0.0, [b"a", b"b", b"c"]) + renewals(0.5, [b"a", b"b", b"c"])
    rounds = _rounds(seen, gap=0.25)
    assert [[ref for _, _, ref in r] for r in rounds] == [[b"a", b"b", b"c"]] * 2


def test_rounds_back_to_back_are_told_apart_by_a_run_renewed_again() -> None:
    # A keeper late for its period: its next round follows at once, no pause between.
    seen = renewals(0.0, [b"a", b"b", b"c", b"a", b"b", b"c", b"a", b"b"])
    rounds = _rounds(seen, gap=0.25)
    assert [len(r) for r in rounds] == [3, 3, 2]
    assert all(len({ref for _, _, ref in r}) == len(r) for r in rounds)
