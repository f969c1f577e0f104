"""A replica of a study is judged by the study's own rule, and the page says whether the
verdict holds; every section says what made its numbers."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

import findings_replicas as replicas
import findings_studies as fs


def _section(verdict: str, result: str) -> str:
    return "\n".join(["### 1b. x", "text",
                      fs.summary("1b", "claim", "paper", result, verdict, "why", "table2_300")])


def test_a_replica_that_agrees_holds_and_one_that_differs_flips() -> None:
    original = replicas.summary_rows(_section("reproduces", "+0.76 [+0.43, +1.09] (n=18)"))
    same = replicas.summary_rows(_section("reproduces", "+0.50 [+0.10, +0.90] (n=18)"))
    other = replicas.summary_rows(_section("inconclusive", "+0.04 [−0.37, +0.45] (n=18)"))
    assert replicas.compare(original, same) == {"1b": "holds (reproduces), "
                                                      "+0.50 [+0.10, +0.90] (n=18)"}
    assert replicas.compare(original, other)["1b"].startswith(
        "flips: reproduces → inconclusive, +0.04")


def test_replications_reach_the_summary_table_of_their_finding_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import findings

    doc = tmp_path / "findings.md"
    doc.write_text(f"intro\n{findings.BEGIN}\nold\n{findings.END}\n")
    monkeypatch.setattr(findings, "DOC", doc)
    one_b = "\n".join([
        "<!-- study:table2_300 -->", _section("reproduces", "+0.76"),
        replicas.block("AVX2 kernels", "toy-table2-300-avx2", "1 environment (AVX2)",
                       {"1b": "flips: reproduces → inconclusive, +0.04"})])
    three = "<!-- study:kappa -->\n" + fs.summary("3", "c", "p", "+2", "inconclusive", "w",
                                                 "kappa")
    findings.rewrite_doc({"table2_300": one_b, "kappa": three})
    text = doc.read_text()
    assert "| replications (same rule) |" in text
    assert "| AVX2 kernels: flips: reproduces → inconclusive, +0.04 |" in text
    assert text.count("| — |") == 1  # finding 3 has none
    assert "**Replication, AVX2 kernels** (`toy-table2-300-avx2`, made by: 1 environment" \
        in text


def test_a_replicas_figures_never_replace_the_pages(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fs, "FIGURES", tmp_path / "figures")
    with replicas.figures_aside():
        fs.FIGURES.mkdir(parents=True)
        (fs.FIGURES / "entropy.png").write_bytes(b"x")
    assert tmp_path / "figures" == fs.FIGURES and not (tmp_path / "figures" / ".replica").exists()
