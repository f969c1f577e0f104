"""The scripted trainer process of stopping_fixtures.py (standard library + PyYAML).

``python stopping_fake_trainer.py CONFIG RUN_DIR honour|ignore``
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

import yaml


def _write(path: Path, data: object) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data))
    tmp.replace(path)


def _line(step: int, value: float) -> str:
    row: dict[str, object] = {"step": step, "metrics": {"steps_done": float(step)}}
    if math.isfinite(value):
        row["metrics"]["score"] = value  # type: ignore[index]
    else:  # the run-folder contract: non-finite values in their own field
        row["nonfinite"] = {"score": "nan" if math.isnan(value) else "inf"}
    return json.dumps(row) + "\n"


def main() -> int:
    config = yaml.safe_load(Path(sys.argv[1]).read_text())
    out = Path(sys.argv[2])
    honour = sys.argv[3] == "honour"
    steps = int(config.get("steps", 20))
    values = [float(v) for v in config.get("values") or []] or [0.5]
    ckpt = out / "ckpt.json"
    start = json.loads(ckpt.read_text())["step"] if ckpt.exists() else 0
    with open(out / "launches.log", "a") as fh:
        fh.write(f"{start}\n")
    last, stop = start, None
    for step in range(start + 1, steps + 1):
        if 0 < int(config.get("hold_at", 0)) <= step:
            while not (out / "go").exists():
                time.sleep(0.02)
        if honour and (out / "stop-request.json").exists():
            stop = json.loads((out / "stop-request.json").read_text())
            break
        time.sleep(float(config.get("step_seconds", 0.01)))
        with open(out / "metrics.jsonl", "a") as fh:
            fh.write(_line(step, values[min(step, len(values)) - 1]))
        _write(ckpt, {"step": step})
        _write(out / "progress.json", {"step": step, "total_steps": steps})
        last = step
    final = {"eval/toy/mean@4": 0.25 + last / 1000}
    summary: dict[str, object] = {"status": "succeeded", "steps": last, "final": final}
    if stop is not None:
        summary.update(status=stop.get("outcome", "succeeded"), stopped={**stop, "at_step": last})
        print(f"stopped at step {last}: {stop['reason']}", flush=True)
    _write(out / "summary.json", summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
