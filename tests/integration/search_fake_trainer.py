"""The trainer process of search_fixtures.py (standard library + PyYAML).

``python search_fake_trainer.py CONFIG RUN_DIR``: logs ``val/score`` at every step,
rising to ``1 - (x - 0.3)^2 + (0.1 if shape == "b")`` (with ``fall_after: K``, falling
again after step K); resumes from its checkpoint;
honours ``stop-request.json`` (checkpoint, summary with ``stopped``, exit 0).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import yaml


def _write(path: Path, data: object) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data))
    tmp.replace(path)


def score(config: dict[str, object], step: int, steps: int) -> float:
    """The score at ``step`` of ``steps``."""
    x = float(config.get("x", 0.5))  # type: ignore[arg-type]
    top = 1 - (x - 0.3) ** 2 + (0.1 if config.get("shape") == "b" else 0.0)
    fall = config.get("fall_after")
    if isinstance(fall, int) and step > fall:  # rises to the peak, then falls back
        return round(top * max(0.0, 2 * fall - step) / steps, 6)
    return round(top * step / steps, 6)


def main() -> int:
    config = yaml.safe_load(Path(sys.argv[1]).read_text())
    out = Path(sys.argv[2])
    steps = int(config.get("steps", 6))
    ckpt = out / "ckpt.json"
    start = json.loads(ckpt.read_text())["step"] if ckpt.exists() else 0
    last, stop = start, None
    for step in range(start + 1, steps + 1):
        if (out / "stop-request.json").exists():
            stop = json.loads((out / "stop-request.json").read_text())
            break
        time.sleep(float(config.get("step_seconds", 0.01)))
        while config.get("hold_while") and Path(config["hold_while"]).exists():
            if (out / "stop-request.json").exists():
                break
            time.sleep(0.05)
        with open(out / "metrics.jsonl", "a") as fh:
            fh.write(json.dumps({"step": step, "metrics": {
                "val/score": score(config, step, steps)}}) + "\n")
        _write(ckpt, {"step": step})
        _write(out / "progress.json", {"step": step, "total_steps": steps})
        last = step
    summary: dict[str, object] = {"status": "succeeded", "steps": last,
                                  "final": {"val/score": score(config, last, steps)}}
    if stop is not None:
        summary.update(status=stop.get("outcome", "succeeded"), stopped={**stop, "at_step": last})
    _write(out / "summary.json", summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
