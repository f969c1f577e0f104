"""``kappa validate | plan | schema`` through the real entry point, with golden files.

Regenerate the golden files after an intended change with
``KAPPA_REGEN_GOLDEN=1 .venv/bin/pytest tests/unit/spec/test_spec_cli.py``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[3]
GOLDEN = REPO / "tests/golden/plan"
TOY = REPO / "experiments/toy/table2.yaml"

BIG = """\
name: big
backend: embedded
axes:
  baseline: [grpo, dapo]
  kappa:
    k5000: {reward_correct: 5, kl_coef: 0.001}
    k200: {reward_correct: 1, kl_coef: 0.005}
  seed: [0, 1, 2]
exclude:
  - {baseline: dapo, kappa: k200}
include:
  - {baseline: dapo, kappa: k200, seed: 9}
resources: {gpus: 8, nodes: 2, hours: 12}
retries: 2
"""


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("KAPPA_REGEN_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"missing golden file {path}; run with KAPPA_REGEN_GOLDEN=1"
    assert text == path.read_text(), f"{name} differs from the golden file"


@pytest.fixture
def big_spec(tmp_path: Path) -> Path:
    path = tmp_path / "big.yaml"
    path.write_text(BIG)
    return path


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    monkeypatch.setenv("NO_COLOR", "1")


def test_validate_ok(kappa: Any) -> None:
    code, out, _ = kappa(["validate", str(TOY)])
    assert (code, out) == (0, "ok: 36 cells\n")


def test_validate_bad_spec_exits_2_with_located_problems(tmp_path: Path, kappa: Any) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nbase:\n  kl_coef: -1\naxes:\n  baselin: [grpo]\n")
    code, out, err = kappa(["validate", str(bad)])
    assert code == 2 and out == ""
    assert f"{bad}:5:3: axes.baselin: unknown axis" in err
    assert "found:   'baselin'" in err and "allowed:" in err
    assert "did you mean 'baseline'?" in err
    bad.write_text("name: bad\nbase:\n  kl_coef: -1\naxes:\n  baseline: [grpo]\n")
    code, _, err = kappa(["validate", str(bad)])
    assert code == 2
    assert f"{bad}:3:3: base.kl_coef:" in err and "found:   -1" in err


def test_plan_table_golden(kappa: Any, big_spec: Path) -> None:
    code, out, _ = kappa(["plan", str(TOY)])
    assert code == 0
    check_golden("toy_table2.txt", out)
    code, out, _ = kappa(["plan", str(big_spec)])
    assert code == 0
    check_golden("big.txt", out)
    assert "10 cells × 8 GPUs × 2 nodes × 12 h = 1,920 GPU-hours" in out


def test_plan_json_golden(kappa: Any, big_spec: Path) -> None:
    code, out, _ = kappa(["plan", str(big_spec), "--json"])
    assert code == 0
    data = json.loads(out)
    assert data["count"] == 10 and data["gpu_hours"] == 1920
    assert data["cells"][-1]["axes"] == {"baseline": "dapo", "kappa": "k200", "seed": 9}
    check_golden("big.json", out)


def test_plan_over_budget_refuses(kappa: Any, big_spec: Path) -> None:
    code, out, err = kappa(["plan", str(big_spec), "--max-gpu-hours", "1000"])
    assert code == 2 and out == ""
    assert "plan needs 1,920 GPU-hours, 920 over the limit of 1,000" in err
    code, _, _ = kappa(["plan", str(big_spec), "--max-gpu-hours", "1920"])
    assert code == 0


@pytest.mark.parametrize("limit", ["nan", "inf", "-1", "-inf"])
def test_plan_refuses_a_gpu_hour_limit_that_is_none(kappa: Any, big_spec: Path,
                                                     limit: str) -> None:
    """``nan`` compared false with every plan, so it meant no limit (issue 19, 6)."""
    code, out, err = kappa(["plan", str(big_spec), "--max-gpu-hours", limit])
    assert code == 2 and out == "" and "Traceback" not in err, err
    assert "--max-gpu-hours" in err and "allowed: >= 0, finite" in err, err


def test_schema_has_backend_settings_for_base(kappa: Any) -> None:
    code, out, _ = kappa(["schema"])
    assert code == 0
    schema = json.loads(out)
    assert "axes" in schema["properties"] and schema["additionalProperties"] is False
    branch = schema["allOf"][0]
    assert branch["if"]["properties"]["backend"]["const"] == "embedded"
    ref = branch["then"]["properties"]["base"]["$ref"].split("/")[-1]
    assert "kl_coef" in schema["$defs"][ref]["properties"]
