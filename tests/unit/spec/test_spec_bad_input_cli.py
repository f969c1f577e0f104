"""Bad input through the real CLI: exit 2, located problems, no traceback, nothing stored."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from orchestrator.paths import kappa_home

BAD_SPECS: dict[str, bytes] = {
    # One variant sets an unknown top-level setting next to a valid variant: this crashed
    # with a KeyError while the valid cells' ids were computed.
    "unknown-in-one-variant": b"name: x\naxes:\n  model:\n    small: {d_model: 32}\n"
    b"    big: {model.d_model: 128}\n",
    "not-utf8": b"name: x\ndescription: caf\xe9\n",
    "key-not-a-name": b"name: x\nbase: {1: 2}\n",
    "nan-clip-ratio": b"name: x\naxes:\n  clip_ratio: [.nan, 0.2]\n",
    "bool-seed": b"name: x\naxes:\n  seed: [true]\n",
    "set-twice": b"name: x\nbase: {model: {n_heads: 4}, model.n_heads: 2}\n",
}


def _rows(db: Path) -> int:
    """Rows in every table of a SQLite file (0 when it does not exist)."""
    if not db.exists():
        return 0
    with sqlite3.connect(db) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        skip = {"alembic_version"}
        return sum(
            conn.execute(f'SELECT COUNT(*) FROM "{t}"').fetchone()[0]
            for t in tables
            if t not in skip
        )


CASES = [(command, case) for command in ("validate", "plan", "submit")
         for case in sorted(BAD_SPECS)]


@pytest.mark.parametrize(("command", "case"), CASES)
def test_bad_spec_exits_2_with_located_problems_and_stores_nothing(
    tmp_path: Path, kappa: Any, command: str, case: str
) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_bytes(BAD_SPECS[case])
    code, out, err = kappa([command, str(spec)])
    assert code == 2, out + err
    assert "Traceback" not in out + err
    assert f"{spec}:" in err  # file:line:col of at least one problem
    home = kappa_home()
    assert _rows(home / "registry.db") == 0
    assert _rows(home / "mlflow.db") == 0
    assert not (home / "runs").exists() or not any((home / "runs").iterdir())


def test_over_budget_points_at_resources_in_the_file(tmp_path: Path, kappa: Any) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text("name: x\naxes:\n  seed: [0, 1]\nresources: {gpus: 8, hours: 2}\n")
    code, out, err = kappa(["plan", str(spec), "--json", "--max-gpu-hours", "31"])
    assert code == 2 and out == ""
    assert f"{spec}:4:1: resources: 2 cells × 8 GPUs × 1 node × 2 h = 32 GPU-hours" in err


def test_validate_checks_a_rules_file_as_rules(tmp_path: Path, kappa: Any) -> None:
    shipped = Path(__file__).resolve().parents[3] / "experiments/toy/seeds_8_stop.yaml"
    code, out, err = kappa(["validate", str(shipped)])
    assert code == 0 and out.startswith("ok: stopping rules"), out + err
    rules = tmp_path / "rules.yaml"
    rules.write_text("stop:\n  plateau: {metric: m, patience: -3}\n")
    code, out, err = kappa(["validate", str(rules)])
    assert code == 2 and f"{rules}:2:24: stop.plateau.patience" in err, err
    # Anything besides the stop: block makes it a spec, checked as one.
    rules.write_text("name: x\nstop:\n  plateau: {metric: actor/entropy, patience: 3}\n")
    code, out, err = kappa(["validate", str(rules)])
    assert code == 0 and out.startswith("ok: 1 cells"), out + err


@pytest.mark.parametrize("seed", range(4))
def test_an_error_shows_a_hostile_name_never_obeys_it(
        seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """An axis name, a sweep name or a value quoted in an error prints as its escapes: the
    location (``axes.<name>``) used to reach the terminal as it was written."""
    import random

    from kit.cli import run_kappa

    rng = random.Random(seed)
    print(f"seed={seed}")
    acts = ["\\e]0;pwned\\a", "\\e[2J", "\\u202e", "\\x9b6n", "\\e]52;c;eA==\\a"]
    hostile = "".join(rng.sample(acts, 2))
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path / "home"))
    spec = tmp_path / "spec.yaml"
    spec.write_text(f'name: "x{hostile}"\nbackend: embedded\n'
                    f'axes: {{"a{hostile}b": [0], seed: [0]}}\n', encoding="utf-8")
    ran = run_kappa(capsys, "validate", str(spec))
    assert ran.code == 2, ran.output
    for act in ("\x1b", "\x07", "\u202e", "\x9b"):
        assert act not in ran.output, (act, ran.output)
    assert "axes.a\\x1b" in ran.output or "axes.a\\u202e" in ran.output or (
        "axes.a\\x9b" in ran.output), ran.output
