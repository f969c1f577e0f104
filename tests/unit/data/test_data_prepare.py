"""`kappa data prepare` on small local files built here (nothing is downloaded)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from kit.cli import run_kappa, user_error

from orchestrator.data.adapters import DATASETS
from orchestrator.data.prepare import approximate_tokens, build_rows, prepare
from orchestrator.data.records import normalise_answer
from orchestrator.errors import UserInputError

VERL_COLUMNS = ["data_source", "prompt", "ability", "reward_model", "extra_info"]


def _dapo_rows(n: int) -> list[dict[str, object]]:
    rows = []
    for i in range(n):
        answer = f"{i}" if i % 4 else f"\\frac{{{i}}}{{7}}"  # every 4th answer not an integer
        question = f"Problem {i}: compute the thing." + (" word" * 2000 if i % 10 == 3 else "")
        row = {"data_source": "math_dapo", "prompt": [{"role": "user", "content": question}],
               "ability": "MATH",
               "reward_model": {"ground_truth": answer, "style": "rule-lighteval/MATH_v2"},
               "extra_info": {"index": f"uuid-{i}"}}
        rows.extend([row, row])  # the hub copy repeats prompts
    return rows


def test_dapo_filter_dedup_and_split_sizes() -> None:
    spec = DATASETS["dapo-math-17k"]
    raw = _dapo_rows(17_000)
    kept = spec.problems(raw, approximate_tokens)
    expected = [i for i in range(17_000) if i % 4 and i % 10 != 3]
    assert [p for p, _ in kept[:3]] == [f"Problem {i}: compute the thing." for i in expected[:3]]
    rows = build_rows(spec, raw)
    assert len(rows["train"]) == 10_000 and len(rows["val"]) == 1_000
    first_val = rows["val"][0]
    assert first_val["reward_model"] == {"style": "rule", "ground_truth": str(expected[10_000])}
    assert first_val["extra_info"] == {"index": 0, "split": "val"}
    assert all(r["data_source"] == "math_dapo" for r in rows["train"])


def test_amc23_jsonl_to_verl_parquet(tmp_path: Path) -> None:
    src = tmp_path / "amc.jsonl"
    src.write_text("\n".join(json.dumps({"id": i, "question": f"Q{i}?", "answer": float(i) + 0.0})
                             for i in range(5)) + "\n")
    written = prepare("amc23", tmp_path / "out", "local", src)
    assert [(w.name, w.rows) for w in written] == [("test", 5)]
    frame = pd.read_parquet(tmp_path / "out" / "amc23" / "test.parquet")
    assert list(frame.columns) == VERL_COLUMNS
    row = frame.iloc[2]
    assert row["data_source"] == "amc23"
    assert row["prompt"][0]["role"] == "user" and "Q2?" in row["prompt"][0]["content"]
    assert "Answer:" in row["prompt"][0]["content"]
    assert row["reward_model"] == {"style": "rule", "ground_truth": "2"}
    assert row["extra_info"] == {"index": 2, "split": "test"}


@pytest.mark.parametrize(("name", "row", "answer"), [
    ("aime24", {"problem": "P", "answer": "204"}, "204"),
    ("aime25", {"problem": "P", "answer": 70}, "70"),
    ("math500", {"problem": "P", "answer": "\\frac{1}{2}"}, "\\frac{1}{2}"),
    ("olympiadbench", {"question": "P", "context": "C", "final_answer": ["$3 m/s$"]}, "$3 m/s$"),
])
def test_each_eval_adapter_reads_its_fields(tmp_path: Path, name: str, row: dict[str, object],
                                            answer: str) -> None:
    src = tmp_path / "in.parquet"
    pd.DataFrame([row, row]).to_parquet(src)
    prepare(name, tmp_path, "local", src)
    frame = pd.read_parquet(tmp_path / name / "test.parquet")
    assert len(frame) == 2
    assert frame.iloc[0]["reward_model"]["ground_truth"] == answer
    content = frame.iloc[0]["prompt"][0]["content"]
    assert content.startswith("C\n\nP") if name == "olympiadbench" else "P" in content


def test_normalise_answer() -> None:
    assert normalise_answer(72.0) == "72"
    assert normalise_answer("72.00") == "72"
    assert normalise_answer(["1", 2.0]) == "1, 2"
    assert normalise_answer(" x^2 ") == "x^2"


def test_unknown_dataset_and_missing_path(tmp_path: Path) -> None:
    with pytest.raises(UserInputError, match="known: aime24, aime25, amc23"):
        prepare("aime2024", tmp_path, "local", tmp_path)
    with pytest.raises(UserInputError, match="does not exist"):
        prepare("amc23", tmp_path, "local", tmp_path / "nope.jsonl")
    with pytest.raises(UserInputError, match="needs --local-path"):
        prepare("amc23", tmp_path, "local", None)


def test_cli_prepare_and_user_error_exit_code(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "m.jsonl"
    src.write_text(json.dumps({"problem": "P", "answer": "1"}) + "\n")
    ok = run_kappa(capsys, "data", "prepare", "--dataset", "math500", "--out", str(tmp_path),
                   "--source", "local", "--local-path", str(src))
    assert ok.code == 0, ok.output
    assert "test: 1 rows" in ok.output
    user_error(capsys, "data", "prepare", "--dataset", "nope", "--out", str(tmp_path),
               "--source", "local", "--local-path", str(src))  # exit 2, a UserInputError
