"""Build the base models kappa ships (orchestrator/backends/embedded/base_models/).

One warm start per distinct warm-start key among the cells of the given specs (default:
experiments/toy/*.yaml, which `make demo` and the findings use), trained on CPU with this
machine's kernels, one thread, as a demo cell trains; then manifest.json, which lists each
file with its checksum, the settings it was built from and what built it. Files of the
folder that the new manifest does not list are removed. Deterministic: the same machine,
kernels and torch build write the same bytes.

    python scripts/build_base_models.py            # or: make base-models
    python scripts/build_base_models.py --out /tmp/bm experiments/toy/demo.yaml
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing it

from orchestrator.backends.embedded import shipped  # noqa: E402
from orchestrator.backends.embedded.settings import EmbeddedSettings  # noqa: E402


def warm_start_settings(specs: list[Path]) -> dict[str, EmbeddedSettings]:
    """One cell's settings per distinct base-model key among the specs' embedded cells."""
    from orchestrator.grid.plan import parse_plan
    from orchestrator.spec.yaml_limits import read_yaml_file

    found: dict[str, EmbeddedSettings] = {}
    for spec in specs:
        # Without preflight: it refuses a damaged shipped file, which this script replaces.
        plan = parse_plan(read_yaml_file(spec), str(spec), spec, preflight=False)
        if plan.grid.spec.backend != "embedded":
            continue
        for cell in plan.grid.cells:
            settings = EmbeddedSettings.model_validate(cell.settings)
            found.setdefault(shipped.base_key(settings), settings)
    return found


def main() -> None:
    """Build, write the manifest, print what was written."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("specs", nargs="*", type=Path,
                        default=sorted((ROOT / "experiments" / "toy").glob("*.yaml")))
    parser.add_argument("--out", type=Path, default=shipped.FOLDER)
    args = parser.parse_args()

    import torch

    from orchestrator.backends.embedded.warmstart import build

    torch.set_num_threads(1)
    args.out.mkdir(parents=True, exist_ok=True)
    models = {}
    for key, settings in warm_start_settings(args.specs).items():
        path = args.out / f"{key}.pt"
        warm = build(settings, path, torch.device("cpu"))
        models[key] = {
            "file": path.name, "sha256": warm.sha256, "bytes": path.stat().st_size,
            "settings": shipped.key_content(settings), "steps": warm.steps,
            "probe_accuracy": warm.probe_accuracy, "torch": torch.__version__,
            "cpu_capability": torch.backends.cpu.get_cpu_capability(), "threads": 1,
        }
        print(f"{path}  {models[key]['bytes']:,} bytes  sha256 {warm.sha256}  "
              f"steps {warm.steps}  probe accuracy {warm.probe_accuracy:.3f}")
    manifest = args.out / shipped.MANIFEST
    manifest.write_text(json.dumps({"format": 1, "models": models}, indent=2, sort_keys=True)
                        + "\n")
    print(f"{manifest}  {len(models)} model(s)")
    built = {args.out / m["file"] for m in models.values()}
    for stale in sorted(set(args.out.glob("*.pt")) - built):
        stale.unlink()
        print(f"{stale}  removed (not in the manifest)")


if __name__ == "__main__":
    main()
