"""``kappa stop-check --rules FILE``'s file, read as a spec is read
(:func:`orchestrator.spec.block_file.read_stop_rules`): a bare ``stop:`` block or a file
holding one, every problem a located ``UserInputError`` with its fix, and no file that
could hang or exhaust the reader is read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from orchestrator import limits
from orchestrator.errors import Problem, UserInputError
from orchestrator.spec.block_file import read_stop_rules

PLATEAU = "plateau: {metric: score, min_steps: 4, patience: 2}\n"


def refused(path: Path) -> list[Problem]:
    with pytest.raises(UserInputError) as exc:
        read_stop_rules(path)
    problems = list(exc.value.problems)
    assert problems and all(p.fix for p in problems), problems  # each says how to fix it
    return problems


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "rules.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_bare_block_and_a_stop_block_read_alike(tmp_path: Path) -> None:
    bare = read_stop_rules(write(tmp_path, PLATEAU + "together: [arm]\n"))
    wrapped = read_stop_rules(write(tmp_path, "stop:\n  " + PLATEAU + "  together: [arm]\n"))
    assert bare == wrapped
    assert bare.plateau is not None and bare.plateau.patience == 2 and bare.together == ("arm",)


def test_a_duplicate_key_is_refused_at_its_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path, "stop:\n  " + PLATEAU + "  together: [arm]\n  together: [seed]\n")
    (problem,) = refused(path)
    assert (problem.file, problem.line, problem.column) == (str(path), 4, 3)
    assert "duplicate key (first given on line 3)" in problem.message


@pytest.mark.parametrize("text", [PLATEAU + "patiense: 3\n",
                                  "stop:\n  " + PLATEAU + "  patiense: 3\n"])
def test_an_unknown_key_is_named_with_the_keys_allowed(tmp_path: Path, text: str) -> None:
    (problem,) = refused(write(tmp_path, text))
    assert problem.location == "stop.patiense" and problem.message == "unknown key"
    assert problem.line == text.count("\n") and problem.column == (1 if text[0] == "p" else 3)
    assert "plateau" in (problem.allowed or "") and "together" in (problem.allowed or "")


def test_an_invalid_rule_is_located_inside_the_block(tmp_path: Path) -> None:
    (problem,) = refused(write(tmp_path, PLATEAU + "threshold:\n  metric: score\n"
                                                   "  at_least: 0.6\n  at_most: 1\n"))
    assert problem.location == "stop.threshold" and problem.line == 2
    assert "exactly one of at_least" in problem.message


def test_a_file_over_the_size_limit_is_refused_unread(tmp_path: Path) -> None:
    path = write(tmp_path, PLATEAU + "#" * limits.MAX_FILE_BYTES + "\n")
    (problem,) = refused(path)
    assert problem.location == "--rules" and "larger than" in problem.message


def test_nesting_past_the_depth_limit_is_refused(tmp_path: Path) -> None:
    depth = limits.MAX_YAML_DEPTH + 1
    path = write(tmp_path, "together: " + "[" * depth + "arm" + "]" * depth + "\n")
    (problem,) = refused(path)
    assert f"nested more than {limits.MAX_YAML_DEPTH} levels" in problem.message
    assert problem.file == str(path) and problem.line == 1


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    path = tmp_path / "rules.fifo"
    os.mkfifo(path)
    (problem,) = refused(path)  # a blocking read would wait here forever
    assert problem.location == "--rules" and "named pipe (FIFO)" in problem.message


def test_a_folder_is_refused(tmp_path: Path) -> None:
    (problem,) = refused(tmp_path)
    assert problem.location == "--rules" and "folder" in problem.message


def test_a_missing_file_and_a_list_are_refused(tmp_path: Path) -> None:
    (missing,) = refused(tmp_path / "nope.yaml")
    assert missing.location == "--rules" and missing.file == str(tmp_path / "nope.yaml")
    (listed,) = refused(write(tmp_path, "- plateau\n"))
    assert "expected a mapping" in listed.message and listed.found == "list"
