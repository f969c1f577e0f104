"""README.md stays what a newcomer reads in two minutes, and stays true.

At most 1,200 words (as ``wc -w`` counts them); the spec it shows, early, is the one
``make demo`` runs; its tour reads the sweep that spec makes; its test command is the one
CI runs.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
MAX_WORDS = 1200
SPEC_BY_LINE = 60


def _make_target(target: str) -> str:
    """The command of a Makefile target's recipe ``$(VENV)/bin/kappa ...``, expanded."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    recipe = re.search(rf"^{target}:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    assert recipe, f"the Makefile has no {target} target"
    return recipe.group(1)


def _first_yaml_block() -> tuple[int, str]:
    match = re.search(r"^```yaml\n(.*?)^```", README, re.MULTILINE | re.DOTALL)
    assert match, "README.md shows no spec (a ```yaml block)"
    return README[: match.start()].count("\n") + 1, match.group(1)


def test_readme_is_short() -> None:
    words = len(README.split())
    assert words <= MAX_WORDS, (
        f"README.md has {words} words (at most {MAX_WORDS}): move detail into docs/ and link it")


def test_the_spec_shown_early_is_the_one_make_demo_runs() -> None:
    line, block = _first_yaml_block()
    assert line <= SPEC_BY_LINE, f"README.md's first spec starts at line {line}"
    demo = shlex.split(_make_target("demo").strip())[-1]
    shown, ran = yaml.safe_load(block), yaml.safe_load((ROOT / demo).read_text(encoding="utf-8"))
    assert shown == ran, f"README.md's spec is not {demo}"


def test_the_tour_reads_the_sweep_the_demo_made() -> None:
    _, block = _first_yaml_block()
    sweep = yaml.safe_load(block)["name"]
    tour = re.search(r"^## A tour.*?```bash\n(.*?)```", README, re.MULTILINE | re.DOTALL)
    assert tour, "README.md has no tour"
    named = set(re.findall(r"kappa (?:status|table|report|ui) ([\w.-]+)", tour.group(1)))
    assert named == {sweep}, f"the tour names {sorted(named)}; the demo makes {sweep}"


def test_ci_runs_the_readmes_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "make test" in ci.splitlines()[-1]
    assert re.search(r"^make test\b", README, re.MULTILINE), "README.md names no `make test`"
    assert re.search(r"^make demo\b", README, re.MULTILINE), "README.md names no `make demo`"
