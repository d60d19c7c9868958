"""`mcpq flower` binds loopback unless told otherwise, refuses any other address without Flower's
login in one line naming the setting, and says where it really listens (the processes
themselves, and the socket table, are checked in tests/ops/test_flower_private.py)."""

from __future__ import annotations

import sys

import pytest

from mcpq.ops.cli import main as cli

PY = sys.executable
FLOWER = [PY, "-m", "celery", "-A", "mcpq.workers.entry", "flower"]


def _run(
    argv: list[str], environ: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> tuple[list[str], str]:
    calls: list[list[str]] = []
    assert cli.main(argv, execute=lambda _f, a: calls.append(list(a)), environ=environ) == 0
    [args] = calls
    return args, capsys.readouterr().err


def _refusal(argv: list[str], environ: dict[str, str], capsys: pytest.CaptureFixture[str]) -> str:
    calls: list[list[str]] = []
    with pytest.raises(SystemExit) as exited:
        cli.main(argv, execute=lambda _f, a: calls.append(list(a)), environ=environ)
    assert exited.value.code == 2 and calls == []
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err.strip().splitlines()[-1]


def test_loopback_by_default_and_the_line_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    args, err = _run(["flower"], {}, capsys)
    assert args == [*FLOWER, "--port=5555", "--address=127.0.0.1"]
    assert err.strip() == (
        "mcpq flower: listening on 127.0.0.1:5555 (127.0.0.1); "
        "no login: reachable from this machine only"
    )


@pytest.mark.parametrize("address", ["0.0.0.0", "::", "10.1.2.3", "flower.internal"])
@pytest.mark.parametrize("how", ["flag", "setting"])
def test_a_public_address_without_a_login_is_refused(
    address: str, how: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv, env = ["flower"], {}
    if how == "flag":
        argv += ["--address", address]
    else:
        env["MCPQ_FLOWER_ADDRESS"] = address
    line = _refusal(argv, env, capsys)
    assert f"refusing to run Flower on {address} without a login" in line
    assert "FLOWER_BASIC_AUTH" in line and "MCPQ_FLOWER_ADDRESS" in line


@pytest.mark.parametrize("address", ["127.0.0.1", "::1", "localhost"])
def test_any_loopback_address_needs_no_login(
    address: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args, _err = _run(["flower", "--address", address], {}, capsys)
    assert args[-1] == f"--address={address}"


def test_basic_auth_opens_a_public_address_and_is_never_printed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    env = {"PORT": "6001", "MCPQ_FLOWER_ADDRESS": "0.0.0.0", "FLOWER_BASIC_AUTH": "ops:s3cr3t-pw"}
    args, err = _run(["flower"], env, capsys)
    assert args == [*FLOWER, "--port=6001", "--address=0.0.0.0"]
    assert "listening on 0.0.0.0:6001 (every IPv4 interface); login: basic auth" in err
    assert "s3cr3t-pw" not in err and "s3cr3t-pw" not in " ".join(args)


def test_flower_oauth_opens_a_public_address(capsys: pytest.CaptureFixture[str]) -> None:
    env = {"FLOWER_AUTH": r".*@example\.com"}
    args, err = _run(["flower", "--address", "::"], env, capsys)
    assert args[-1] == "--address=::"
    assert "listening on [::]:5555 (every IPv6 interface); login: OAuth" in err


@pytest.mark.parametrize("value", ["justauser", "ops:", ":pw", "a:b,broken"])
def test_a_malformed_basic_auth_is_refused_without_echoing_it(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    line = _refusal(["flower"], {"FLOWER_BASIC_AUTH": value}, capsys)
    assert line.endswith("FLOWER_BASIC_AUTH must be user:password pairs, comma-separated")
    assert value not in line
