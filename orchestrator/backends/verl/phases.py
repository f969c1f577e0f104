"""Phases: a cell whose settings change at a step boundary runs as consecutive launches
resuming from one checkpoint folder (docs/verl.md#launch-and-phases); a phase is complete
when verl's checkpoint tracker has reached its end."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from orchestrator.backends.verl.settings import VerlSettings

# verl writes this beside the global_step_<N>/ folders after each save.
TRACKER_FILE = "latest_checkpointed_iteration.txt"


@dataclass(frozen=True)
class Phase:
    """One launch of a cell: steps ``start_step`` .. ``end_step`` (verl's total_training_steps)."""

    index: int
    name: str
    start_step: int
    end_step: int
    intervention: bool
    evaluation: bool = False

    @property
    def resumes(self) -> bool:
        """Whether this phase continues from an earlier phase's checkpoint."""
        return self.start_step > 0


def phases(settings: VerlSettings) -> list[Phase]:
    """The launches that make up a cell, in order: one training launch, or two when an
    intervention ends before ``max_steps``; then, with ``eval_files``, a final evaluation
    launch (verl's ``val_only`` on the final checkpoint)."""
    n = settings.intervention_steps
    total = settings.max_steps
    if settings.entropy_intervention == "none" or n == 0:
        out = [Phase(0, "run", 0, total, intervention=False)]
    elif n is None or n >= total:
        out = [Phase(0, "run", 0, total, intervention=True)]
    else:
        out = [Phase(0, "intervention", 0, n, intervention=True),
               Phase(1, "after_intervention", n, total, intervention=False)]
    if settings.eval_files:
        out.append(Phase(len(out), "eval", total, total, intervention=False, evaluation=True))
    return out


def checkpoint_dir(run_dir: Path) -> Path:
    """The absolute folder verl saves to and resumes from (shared by every phase)."""
    return run_dir.resolve() / "checkpoints"


def checkpointed_step(run_dir: Path) -> int:
    """The last step verl saved a checkpoint for in ``run_dir`` (0 if none)."""
    try:
        return int((checkpoint_dir(run_dir) / TRACKER_FILE).read_text().strip())
    except (OSError, ValueError):
        return 0


def eval_marker(run_dir: Path) -> Path:
    """Written by the phase driver once the final evaluation succeeded."""
    return run_dir.resolve() / "eval_done.json"


def pending_phases(settings: VerlSettings, run_dir: Path) -> list[Phase]:
    """The phases still to run: not checkpointed to their end, or an evaluation not done."""
    done = checkpointed_step(run_dir)
    return [p for p in phases(settings)
            if (not eval_marker(run_dir).exists() if p.evaluation else done < p.end_step)]
