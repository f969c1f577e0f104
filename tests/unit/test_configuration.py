"""The ``KAPPA_*`` variables: read through one table (``orchestrator.configuration``), each
value parsed when read, a bad one an error (exit 2) naming the variable, never a default."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from kit.cli import run_kappa

from orchestrator import configuration
from orchestrator.configuration import VARIABLES, Kind, check_environment, read
from orchestrator.errors import UserInputError

ROOT = Path(__file__).resolve().parents[2]

#: Bad values of every kind: not a number, negative, nan, inf, huge, odd Unicode, ...
BAD: dict[Kind, tuple[str, ...]] = {
    Kind.NUMBER: ("fast", "-1", "nan", "inf", "-inf", "1e400", "1e12", "１０", "²", "5 s",
                  "0x10"),
    Kind.WHOLE: ("many", "-5", "nan", "inf", "1e6", "99999999999", "１０", "²", "2.5", "_1",
                 "12abc"),
    Kind.FLAG: ("maybe", "2", "-1", "nan", "inf", "ｏｎ", "on!", "oui"),
    Kind.TEXT: ("line\nbreak", "\x1b[31mred", "tab\there", "\udcff", "del\x7f"),
    Kind.COMMAND: ("python 'unclosed", 'python "unclosed', "trailing\\"),
    Kind.JSON: ("[1, 2]", "not json", "NaN", '"text"', "{", "[" * 10_000, "1e400"),
}


def _bad_values(variable: configuration.Variable) -> tuple[str, ...]:
    """:data:`BAD` for its kind, and just outside its bounds where it has some."""
    if variable.kind is Kind.NUMBER:
        below = variable.low if variable.low_open else variable.low - 0.25
        return (*BAD[Kind.NUMBER], f"{below:g}", f"{variable.high * 1.5:g}")
    if variable.kind is Kind.WHOLE:
        return (*BAD[Kind.WHOLE], str(int(variable.low) - 1), str(int(variable.high) + 1))
    return BAD[variable.kind]


BAD_CASES = [pytest.param(name, value, id=f"{name}-{i}")
             for name, variable in VARIABLES.items()
             for i, value in enumerate(_bad_values(variable))]


@pytest.mark.parametrize(("name", "value"), BAD_CASES)
def test_a_bad_value_is_an_error_naming_the_variable(name: str, value: str) -> None:
    with pytest.raises(UserInputError) as caught:
        read(name, {name: value})
    (problem,) = caught.value.problems
    assert problem.location == name and name in caught.value.render()
    assert problem.allowed == VARIABLES[name].allowed and problem.fix
    assert problem.found is not None


def test_every_variable_has_bad_values_to_test() -> None:
    counted = {name for name, *_ in (case.values for case in BAD_CASES)}
    assert counted == set(VARIABLES)


#: What each variable meant unset before the table existed (scattered reads' defaults).
DEFAULTS_BEFORE = {
    "KAPPA_HOME": ".kappa", "KAPPA_MAX_CELLS": 100_000, "KAPPA_FULL_ERROR": False,
    "KAPPA_POLL_INTERVAL": 0.5, "KAPPA_RETRY_BACKOFF": 5.0, "KAPPA_LEASE_SECONDS": 30.0,
    "KAPPA_RUN_LOCK_WAIT": 600.0, "KAPPA_NOTIFY_TIMEOUT": 5.0, "KAPPA_NOTIFY_WAIT": 10.0,
    "KAPPA_STORE_RETRY_SECONDS": 300.0, "KAPPA_METRICS_FLUSH_SECONDS": 60.0,
    "KAPPA_MLFLOW_SUMMARY": True,
    "KAPPA_VERL_PREFLIGHT": True, "KAPPA_VERL_POLL_SECONDS": 5.0}


@pytest.mark.parametrize("unset", [{}, "", "   "])
def test_unset_or_empty_is_the_default_as_before(unset: dict[str, str] | str) -> None:
    environ = unset if isinstance(unset, dict) else dict.fromkeys(VARIABLES, unset)
    got = {name: read(name, environ) for name in VARIABLES}
    assert got == {name: DEFAULTS_BEFORE.get(name) for name in VARIABLES}


@pytest.mark.parametrize(("name", "value", "expected"), [
    ("KAPPA_POLL_INTERVAL", " 0.05 ", 0.05),
    ("KAPPA_LEASE_SECONDS", "0.5", 0.5),
    ("KAPPA_RETRY_BACKOFF", "0", 0.0),
    ("KAPPA_MAX_CELLS", "1_000_000", 1_000_000),
    ("KAPPA_MAX_CELLS", "2147483647", 2**31 - 1),
    ("KAPPA_FULL_ERROR", "1", True),
    ("KAPPA_FULL_ERROR", "Yes", True),
    ("KAPPA_VERL_PREFLIGHT", "off", False),
    ("KAPPA_VERL_PREFLIGHT", "FALSE", False),
    ("KAPPA_HOME", "state dir/é", "state dir/é"),
    ("KAPPA_CLI", "python -m 'my kappa'", ["python", "-m", "my kappa"]),
    ("KAPPA_EXECUTOR_OPTIONS", '{"max_parallel": 2}', {"max_parallel": 2}),
])
def test_good_values_are_read(name: str, value: str, expected: object) -> None:
    assert read(name, {name: value}) == expected


def test_the_environment_is_read_at_each_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAPPA_POLL_INTERVAL", "1")
    assert read("KAPPA_POLL_INTERVAL") == 1.0
    monkeypatch.setenv("KAPPA_POLL_INTERVAL", "2")
    assert read("KAPPA_POLL_INTERVAL") == 2.0
    monkeypatch.setenv("KAPPA_POLL_INTERVAL", "soon")
    with pytest.raises(UserInputError, match="KAPPA_POLL_INTERVAL"):
        read("KAPPA_POLL_INTERVAL")


def test_a_name_outside_the_table_is_a_bug() -> None:
    with pytest.raises(KeyError):
        read("KAPPA_NOT_A_VARIABLE", {})


def test_the_check_lists_every_bad_variable() -> None:
    check_environment({"KAPPA_HOME": "ok", "KAPPA_X": "anything"})  # others are not ours
    with pytest.raises(UserInputError) as caught:
        check_environment({"KAPPA_POLL_INTERVAL": "nan", "KAPPA_CLI": "'", "KAPPA_HOME": "ok"})
    assert [p.location for p in caught.value.problems] == ["KAPPA_POLL_INTERVAL", "KAPPA_CLI"]


def test_a_password_in_a_bad_value_never_shows() -> None:
    url = "postgresql://kappa:s3cret-" + "x" * 80 + "@db:5432/reg\n"
    with pytest.raises(UserInputError) as caught:
        read("KAPPA_REGISTRY", {"KAPPA_REGISTRY": url})
    assert "s3cret" not in caught.value.render()


def test_bad_values_reach_the_command_line_as_exit_2(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Two variables that a bad value used to leave at their default (poll interval) or
    crash at import (verl's poll): both refused, in one message, before anything runs;
    a bad ``KAPPA_FULL_ERROR`` is reported too, and prints no traceback."""
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KAPPA_POLL_INTERVAL", "fast")
    monkeypatch.setenv("KAPPA_VERL_POLL_SECONDS", "-1")
    monkeypatch.setenv("KAPPA_FULL_ERROR", "maybe")
    ran = run_kappa(capsys, "status")
    assert ran.code == 2, ran.output
    for words in ("KAPPA_POLL_INTERVAL", "'fast'", "KAPPA_VERL_POLL_SECONDS", "'-1'",
                  "a number > 0 and <= 86,400", "KAPPA_FULL_ERROR", "unset it"):
        assert words in ran.err, ran.err
    assert "Traceback" not in ran.err
    assert not (tmp_path / "home").exists()  # nothing created
    monkeypatch.delenv("KAPPA_FULL_ERROR")
    monkeypatch.delenv("KAPPA_VERL_POLL_SECONDS")
    monkeypatch.setenv("KAPPA_POLL_INTERVAL", "0.5")
    monkeypatch.setenv("KAPPA_MAX_CELLS", "lots")
    ran = run_kappa(capsys, "validate", str(ROOT / "experiments" / "toy" / "table2.yaml"))
    assert ran.code == 2 and "KAPPA_MAX_CELLS" in ran.err and "'lots'" in ran.err, ran.output


def test_verl_driver_reads_its_poll_without_failing_at_import(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from orchestrator.backends.verl import run_phases

    monkeypatch.setenv("KAPPA_VERL_POLL_SECONDS", "soon")
    importlib.reload(run_phases)  # it used to raise ValueError here
    assert run_phases.main([str(tmp_path / "run"), "--settings-json", "{}"]) == 2
    assert "KAPPA_VERL_POLL_SECONDS" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()  # refused before anything ran
