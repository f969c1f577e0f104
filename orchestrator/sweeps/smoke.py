"""A smoke sweep's files: the tiny model and prompts its backend makes
(:mod:`orchestrator.backends.verl.smoke`) and its spec, rendered from the template (read as
any spec is: bounded, its problems located) with the template's ``${KAPPA_SMOKE_DIR}``
naming the folder; and each cell's verl command line, for ``kappa smoke verl --dry-run``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.backends.verl.settings import SMOKE_PLACEHOLDER as SMOKE_VAR
from orchestrator.backends.verl.smoke import TEMPLATE, usable_out_dir, write_prompts
from orchestrator.errors import Problem, UserInputError
from orchestrator.paths import kappa_home
from orchestrator.runs.atomic import write_atomic
from orchestrator.runs.layout import cell_folder


@dataclass(frozen=True)
class SmokeFiles:
    """What :func:`prepare_smoke` wrote."""

    out_dir: Path
    model: Path
    train: Path
    val: Path
    spec: Path


def _fill(value: Any, out_dir: str) -> Any:
    if isinstance(value, str):
        return value.replace(SMOKE_VAR, out_dir)
    if isinstance(value, list):
        return [_fill(v, out_dir) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, out_dir) for k, v in value.items()}
    return value


def spec_text(out_dir: Path, template: Path = TEMPLATE,
              base: Mapping[str, Any] | None = None) -> str:
    """``template`` with ``${KAPPA_SMOKE_DIR}`` = ``out_dir`` (absolute) in every string
    and ``base`` merged into its ``base:`` settings, as YAML (nothing is written)."""
    import yaml

    from orchestrator.spec.block_file import read_mapping

    if not template.is_file():
        raise UserInputError("the smoke spec template is missing", [Problem(
            "--spec", "no such file", found=str(template),
            fix="pass --spec experiments/verl/smoke.yaml of a kappa checkout")])
    doc = read_mapping(template, "--spec", "spec keys", "name: ..., base: ..., axes: ...")
    data = _fill(doc.data, str(out_dir.resolve()))
    data["base"] = {**data.get("base", {}), **dict(base or {})}
    # One sweep per rendered spec: two folders (or machines sharing a registry) or two
    # versions of the template never mix their cells, and a rerun reruns exactly these.
    digest = hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode())
    data["name"] = f"{data.get('name', 'verl-smoke')}-{digest.hexdigest()[:8]}"
    header = (f"# Rendered by `kappa smoke verl` from {template.name}; "
              f"{SMOKE_VAR} = {out_dir.resolve()}\n")
    return header + yaml.safe_dump(data, sort_keys=False, width=100, allow_unicode=True)


def render_spec(out_dir: Path, template: Path = TEMPLATE,
                base: Mapping[str, Any] | None = None) -> Path:
    """Write :func:`spec_text` to ``out_dir/smoke.yaml`` and return its path."""
    text = spec_text(out_dir, template, base)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "smoke.yaml"
    write_atomic(path, text, mode=0o644)
    return path


def prepare_smoke(out_dir: Path | None = None, template: Path = TEMPLATE,
                  base: Mapping[str, Any] | None = None) -> SmokeFiles:
    """Build the model, write the prompts and render the spec under ``out_dir`` (default:
    ``$KAPPA_HOME/smoke/verl``)."""
    from orchestrator.backends.verl.tiny_model import build_tiny_model

    out = usable_out_dir(out_dir or kappa_home() / "smoke" / "verl")
    model = build_tiny_model(out / "model")
    train, val = write_prompts(out / "data")
    spec = render_spec(out, template, base)
    return SmokeFiles(out, model, train, val, spec)


def smoke_commands(spec: Path, runs: Path | None = None) -> list[tuple[str, list[str]]]:
    """Each cell of the smoke ``spec`` (validated, nothing written) with the argv of its
    verl launch in its run folder (``runs/<sweep>/<cell id>`` under ``runs`` when given),
    without the scheduler's MLflow variables."""
    from orchestrator.backends.verl.command import verl_command
    from orchestrator.backends.verl.settings import VerlSettings
    from orchestrator.sweeps.submission import prepare

    prepared = prepare(spec)
    return [(cell.describe(), verl_command(
        VerlSettings.model_validate(cell.settings),
        cell_folder(prepared.name, cell.cell_id) if runs is None
        else runs / prepared.name / cell.cell_id)) for cell in prepared.cells]
