"""`python -m mcpq.ops.ci.audit`: its verdict from pip-audit's and npm audit's JSON reports."""

from __future__ import annotations

from mcpq.ops.ci.audit import Findings, read_npm_audit, read_pip_audit, read_project_json, verdict

PIP_REPORT = {
    "dependencies": [
        {"name": "celery", "version": "5.7.0", "vulns": []},
        {
            "name": "requests",
            "version": "2.25.0",
            "vulns": [{"id": "GHSA-j8r2-6x86-q33q", "fix_versions": ["2.31.0"], "aliases": []}],
        },
        {"name": "vine", "skip_reason": "Dependency not found on PyPI: vine (5.1.0)"},
    ],
    "fixes": [],
}


def test_a_known_vulnerability_fails_and_names_its_fix() -> None:
    found = read_pip_audit(PIP_REPORT)
    assert found.checked == 2
    assert found.vulnerable == ["requests==2.25.0: GHSA-j8r2-6x86-q33q (fixed in 2.31.0)"]
    assert found.unchecked == ["Dependency not found on PyPI: vine (5.1.0)"]
    assert verdict(found, require=False) == 1


def test_unchecked_packages_pass_only_when_not_required() -> None:
    found = read_pip_audit({"dependencies": [PIP_REPORT["dependencies"][2]]})  # type: ignore[list-item]
    found.merge(
        read_npm_audit(
            "ops/harness/conformance",
            {"message": "405 Method Not Allowed", "error": {"summary": ""}},
        )
    )
    assert len(found.unchecked) == 2 and "405 Method Not Allowed" in found.unchecked[1]
    assert verdict(found, require=False) == 0
    assert verdict(found, require=True) == 2


def test_npm_vulnerabilities_fail() -> None:
    report = {
        "vulnerabilities": {"vite": {"severity": "high"}},
        "metadata": {"dependencies": {"total": 120}},
    }
    found = read_npm_audit("tests/clients/node", report)
    assert found.checked == 120 and found.vulnerable == ["tests/clients/node: vite (high)"]
    assert verdict(found, require=False) == 1
    assert verdict(Findings(checked=5), require=True) == 0


def test_pypis_project_document_answers_for_the_latest_release_only() -> None:
    project = {
        "info": {"version": "2.0.1"},
        "vulnerabilities": [
            {"id": "PYSEC-2026-1", "fixed_in": ["2.0.2"], "withdrawn": None},
            {"id": "PYSEC-2026-2", "fixed_in": [], "withdrawn": "2026-06-01T00:00:00Z"},
        ],
    }
    found = read_project_json("pkg", "2.0.1", project)
    assert found.checked == 1
    assert found.vulnerable == ["pkg==2.0.1: PYSEC-2026-1 (fixed in 2.0.2)"]  # not the withdrawn
    assert verdict(found, require=False) == 1
    older = read_project_json("pkg", "1.9", project)
    assert older.checked == 0 and older.unchecked == ["pkg==1.9: PyPI's data covers 2.0.1 only"]
