"""Regenerate docs/findings.md: run the miniature studies, read them back, judge them.

    .venv/bin/python bench/findings.py                 # every study, from scratch
    .venv/bin/python bench/findings.py --only kappa    # one study (others keep their text)
    .venv/bin/python bench/findings.py --home DIR      # reuse DIR's finished sweeps
    .venv/bin/python bench/findings.py --replicas      # and rerun 1b, 3b, 4 under AVX2 etc.

Every study is an ordinary spec under ``experiments/toy/``, run with ``kappa submit
--wait`` in a fresh ``KAPPA_HOME`` (so nothing is reused from an earlier run); the numbers
come back through ``kappa export`` and ``kappa convergence`` and the cells' curves. The
verdict rules are ``bench/findings_rules.py``; what they mean is docs/findings.md.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import findings_replicas as replicas  # noqa: E402
from findings_kappa import write_kappa, write_kappa_scaled  # noqa: E402
from findings_replicas import Replica  # noqa: E402
from findings_studies import (  # noqa: E402
    SUMMARY,
    Study,
    write_entropy,
    write_spurious,
    write_spurious_pressure,
    write_table2,
    write_table2_300,
    write_table3,
)

DOC = ROOT / "docs" / "findings.md"
KAPPA = str(Path(sys.executable).parent / "kappa")
BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"


STUDIES: tuple[Study, ...] = (
    Study("table2", ROOT / "experiments/toy/table2.yaml", "toy-table2", write_table2),
    Study("table2_300", ROOT / "experiments/toy/table2_300.yaml", "toy-table2-300",
          write_table2_300),
    Study("table3", ROOT / "experiments/toy/table3.yaml", "toy-table3", write_table3),
    Study("kappa", ROOT / "experiments/toy/kappa_study.yaml", "toy-kappa", write_kappa),
    Study("kappa_scaled", ROOT / "experiments/toy/kappa_scaled.yaml", "toy-kappa-scaled",
          write_kappa_scaled),
    Study("entropy", ROOT / "experiments/toy/entropy_study.yaml", "toy-entropy",
          write_entropy),
    Study("spurious", ROOT / "experiments/toy/spurious_rewards.yaml", "toy-spurious",
          write_spurious),
    Study("spurious_pressure", ROOT / "experiments/toy/spurious_pressure.yaml",
          "toy-spurious-pressure", write_spurious_pressure),
)

# The same spec run again where the verdict should not change: the other CPU kernel set
# (ATEN_CPU_CAPABILITY=avx2) and seeds no run had used. Run with --replicas (after their
# study) into the study's KAPPA_HOME; a replica the home lacks is left out of the page.
AVX2 = (("ATEN_CPU_CAPABILITY", "avx2"),)
REPLICAS: dict[str, tuple[Replica, ...]] = {
    "table2_300": (Replica("AVX2 kernels", "toy-table2-300-avx2",
                           ("name=toy-table2-300-avx2",), AVX2),
                   Replica("seeds 31–33", "toy-table2-300-heldout",
                           ("name=toy-table2-300-heldout", "axes.seed=[31,32,33]"))),
    "entropy": (Replica("AVX2 kernels", "toy-entropy-avx2", ("name=toy-entropy-avx2",), AVX2),),
    "kappa_scaled": (Replica("AVX2 kernels", "toy-kappa-scaled-avx2",
                             ("name=toy-kappa-scaled-avx2",), AVX2),),
    "spurious_pressure": (Replica("seeds 53–55", "toy-spurious-pressure-heldout",
                                  ("name=toy-spurious-pressure-heldout",
                                   "axes.seed=[53,54,55]")),),
}


@dataclass(frozen=True)
class Sweep:
    """A finished study's numbers, read through kappa's own commands."""

    name: str
    cells: pd.DataFrame  # kappa export: one row per cell, axis.* and metric.* columns
    env: dict[str, str]

    def convergence(self) -> pd.DataFrame:
        """``kappa convergence`` of the sweep, one row per cell."""
        return pd.read_csv(io.StringIO(kappa(["convergence", self.name, "-f", "csv"],
                                             self.env)))

    def table(self, *args: str) -> str:
        """``kappa table`` of the sweep (markdown)."""
        return kappa(["table", self.name, *args], self.env)

    def curves(self, patterns: list[str]) -> pd.DataFrame:
        """Per-step curves of every cell (long form), as ``kappa report`` plots them."""
        from orchestrator.analysis.curves import load_curves
        from orchestrator.analysis.sources import results

        with home(self.env):
            return load_curves(results(self.name), patterns)


class home:
    """Point kappa's in-process readers at a study's ``KAPPA_HOME`` for a while."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.saved: dict[str, str | None] = {}

    def __enter__(self) -> None:
        for key in ("KAPPA_HOME",):
            self.saved[key] = os.environ.get(key)
            os.environ[key] = self.env[key]

    def __exit__(self, *exc: object) -> None:
        for key, value in self.saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def kappa(args: list[str], env: dict[str, str]) -> str:
    """Run a kappa command; its standard output, or exit with its error."""
    done = subprocess.run([KAPPA, *args], env=env, capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        sys.exit(f"kappa {' '.join(args)} failed ({done.returncode}):\n{done.stderr}")
    return done.stdout


def run_study(study: Study, env: dict[str, str], index: int, total: int,
              replica: Replica | None = None) -> None:
    """Submit one study (or its ``replica``) and wait for it; kappa's live progress shows
    the cells."""
    overrides = list(replica.overrides) if replica else []
    env = {**env, **dict(replica.env)} if replica else env
    name = replica.sweep if replica else study.sweep
    cells = kappa(["validate", str(study.spec), *overrides], env).strip()
    print(f"\n[findings] study {index}/{total}: {name} ({cells}), {total - index} after it",
          flush=True)
    started = time.monotonic()
    done = subprocess.run([KAPPA, "submit", str(study.spec), *overrides, "--wait"], env=env,
                          cwd=ROOT)
    if done.returncode != 0:
        sys.exit(f"[findings] {name}: kappa submit exited {done.returncode}")
    print(f"[findings] {name} done in {(time.monotonic() - started) / 60:.1f} min", flush=True)


def read_sweep(name: str, env: dict[str, str]) -> Sweep:
    """A sweep's results frame through ``kappa export``."""
    text = kappa(["export", name, "-f", "csv"], env)
    return Sweep(name, pd.read_csv(io.StringIO(text)), env)


def finished(name: str, env: dict[str, str]) -> bool:
    """Whether the home has the sweep and none of its cells is still to run."""
    done = subprocess.run([KAPPA, "status", name, "--json"], env=env, capture_output=True,
                          text=True, cwd=ROOT)
    if done.returncode != 0:
        return False
    counts = json.loads(done.stdout)["counts"]
    return not any(counts.get(state) for state in ("pending", "running", "queued"))


def write_section(study: Study, env: dict[str, str]) -> str:
    """The study's section: its writer's text, what made the numbers, and each replica
    found in the home judged by the same writer."""
    def run(args: list[str]) -> str:
        return kappa(args, env)

    text = study.write(read_sweep(study.sweep, env))
    lines = [f"<!-- study:{study.key} -->", text, "",
             f"Made by: {replicas.made_by(run, study.sweep)}.", ""]
    for replica in REPLICAS.get(study.key, ()):
        if not finished(replica.sweep, env):
            print(f"[findings] {replica.sweep}: not finished in this home, so the "
                  f"replication '{replica.label}' is left out", flush=True)
            continue
        with replicas.figures_aside():
            again = study.write(read_sweep(replica.sweep, env))
        verdicts = replicas.compare(replicas.summary_rows(text), replicas.summary_rows(again))
        lines.append(replicas.block(replica.label, replica.sweep,
                                    replicas.made_by(run, replica.sweep), verdicts))
    return "\n".join(lines)


def rewrite_doc(sections: dict[str, str]) -> None:
    """Replace the results section of docs/findings.md, keeping sections not rerun."""
    text = DOC.read_text()
    head, rest = text.split(BEGIN, 1)
    old, tail = rest.split(END, 1)
    kept = _split_sections(old)
    kept.update(sections)
    parts = [kept[s.key] for s in STUDIES if s.key in kept]
    body = "\n\n".join([_summary_table(parts), *parts])
    DOC.write_text(f"{head}{BEGIN}\n{body}\n{END}{tail}")


def _summary_table(sections: list[str]) -> str:
    """One row per finding, collected from the hidden rows the studies' sections carry."""
    rows = [line.removeprefix(SUMMARY).removesuffix("-->").strip()
            for part in sections for line in part.splitlines() if line.startswith(SUMMARY)]
    again = replicas.replications(sections)
    head = ("| # | claim | where | toy result (95% CI, n) | verdict | why | regenerate "
            "| replications (same rule) |\n| --- | --- | --- | --- | --- | --- | --- | --- |")
    return "### Summary\n\n" + "\n".join(
        [head, *(f"| {row} | {again.get(row.split(' | ', 1)[0].strip(), '—')} |"
                 for row in rows)])


def _split_sections(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for study in STUDIES:
        marker = f"<!-- study:{study.key} -->"
        if marker in text:
            part = text.split(marker, 1)[1].split("<!-- study:", 1)[0]
            out[study.key] = (marker + part).strip()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="",
                        help="comma-separated study keys: " + ", ".join(s.key for s in STUDIES))
    parser.add_argument("--home", type=Path, default=None,
                        help="KAPPA_HOME whose finished sweeps to read (no new runs)")
    parser.add_argument("--replicas", action="store_true",
                        help="also run each study's replicas (AVX2 kernels, held-out seeds)")
    args = parser.parse_args(argv)
    chosen = [s for s in STUDIES if not args.only or s.key in args.only.split(",")]
    unknown = set(filter(None, args.only.split(","))) - {s.key for s in STUDIES}
    if unknown:
        parser.error(f"unknown study {', '.join(sorted(unknown))}; "
                     f"known: {', '.join(s.key for s in STUDIES)}")
    if args.home is None:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        kappa_home = (ROOT / ".kappa" / "findings" / stamp).resolve()
    else:
        kappa_home = args.home.resolve()
    env = {**os.environ, "KAPPA_HOME": str(kappa_home)}
    env.pop("KAPPA_REGISTRY", None)
    env.pop("KAPPA_MLFLOW_URI", None)
    print(f"[findings] KAPPA_HOME={kappa_home}", flush=True)
    sections: dict[str, str] = {}
    for i, study in enumerate(chosen, 1):
        if args.home is None:
            run_study(study, env, i, len(chosen))
            for replica in REPLICAS.get(study.key, ()) if args.replicas else ():
                run_study(study, env, i, len(chosen), replica)
        sections[study.key] = write_section(study, env)
        rewrite_doc(sections)  # after each study, so a long run shows its progress
    print(f"[findings] wrote {DOC.relative_to(ROOT)}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
