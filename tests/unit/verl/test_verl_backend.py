"""VerlBackend: registry entry, launch spec, GPUs, progress, and lazy imports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from verl_test_cells import cell

from orchestrator.backends import BACKENDS, LaunchSpec, get_backend
from orchestrator.backends.verl.backend import VerlBackend
from orchestrator.backends.verl.command import TRACKER_FILE, checkpoint_dir
from orchestrator.backends.verl.settings import VerlSettings


def _launch(s: VerlSettings, run_dir: Path) -> LaunchSpec:
    """The launch a scheduler makes of a cell with these settings: from the stored
    mapping and the demand judged at submit."""
    backend = get_backend("verl")
    return backend.launch(s.model_dump(mode="json", exclude_unset=True), run_dir,
                          backend.demand(s))


def test_registered_under_verl() -> None:
    assert "verl" in BACKENDS
    assert isinstance(get_backend("verl"), VerlBackend)


def test_launch_is_the_phase_driver_with_the_settings(tmp_path: Path) -> None:
    s = cell(nnodes=2, n_gpus_per_node=8)
    spec = _launch(s, tmp_path / "sweep" / "cell")
    assert spec.argv[1:3] == ("-m", "orchestrator.backends.verl.run_phases")
    assert Path(spec.argv[3]).is_absolute()
    assert VerlSettings.model_validate_json(spec.argv[spec.argv.index("--settings-json") + 1]) == s
    assert spec.gpus == 16 and get_backend("verl").gpus(s) == 16
    assert spec.env["VERL_USE_EXTERNAL_MODULES"] == "kappa_verl"
    assert not any(k.startswith("MLFLOW_") for k in spec.env)  # the scheduler's business
    assert not (tmp_path / "sweep").exists()  # launch is pure


def test_entropy_reward_cell_carries_its_switch_in_the_launch_env(tmp_path: Path) -> None:
    """A Ray job's runtime_env is the launch env: it must carry the hook's variables."""
    s = cell(entropy_intervention="entropy_reward", entropy_coef=0.01, intervention_steps=500,
             max_steps=1000)
    env = _launch(s, tmp_path / "sweep" / "cell").env
    assert (env["KAPPA_ENTROPY_REWARD_COEF"], env["KAPPA_ENTROPY_REWARD_STEPS"]) == \
        ("0.01", "500")
    for other in (cell(), cell(entropy_intervention="entropy_loss", intervention_steps=500)):
        assert not any(k.startswith("KAPPA_ENTROPY") for k in
                       _launch(other, tmp_path / "s" / "c").env)


def test_progress_from_driver_file_else_checkpoint_tracker(tmp_path: Path) -> None:
    backend = get_backend("verl")
    assert backend.read_progress(tmp_path) is None
    checkpoint_dir(tmp_path).mkdir(parents=True)
    (checkpoint_dir(tmp_path) / TRACKER_FILE).write_text("40")
    assert backend.read_progress(tmp_path) == (40, 0)
    (tmp_path / "progress.json").write_text(json.dumps({"step": 42, "total_steps": 100}))
    assert backend.read_progress(tmp_path) == (42, 100)


def test_building_commands_never_imports_verl_hydra_or_torch() -> None:
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from orchestrator.backends import get_backend\n"
        "from orchestrator.backends.verl.command import verl_command\n"
        "from orchestrator.backends.verl.settings import VerlSettings\n"
        "s = VerlSettings(model_path='m', train_files='/t', val_files='/v')\n"
        "verl_command(s, Path('/r/s/c'))\n"
        "b = get_backend('verl')\n"
        "b.launch(s.model_dump(mode='json'), Path('/r/s/c'), b.demand(s))\n"
        "print(sorted({'verl', 'hydra', 'torch', 'ray'} & set(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_planning_composes_free_settings_once_per_value(tmp_path: Path) -> None:
    """Seeds and learning rates do not multiply verl preflights; baselines and group sizes
    (which meet verl's batch rules and bundles) are composed in every combination."""
    from orchestrator.backends.verl.backend import FREE_SETTINGS
    from orchestrator.grid.assignments import assignments, axis_values
    from orchestrator.grid.validation import cells_to_validate, coupled_axes
    from orchestrator.spec import load_spec

    spec_path = tmp_path / "s.yaml"
    spec_path.write_text(
        "name: s\nbackend: verl\n"
        "base: {model_path: m, train_files: /t.parquet, val_files: /v.parquet}\n"
        "axes:\n  baseline: [grpo, dapo]\n  seed: [0, 1, 2, 3, 4]\n"
        "  learning_rate: [1.0e-6, 2.0e-6]\n  group_size: [8, 16]\n")
    spec = load_spec(spec_path)
    table = axis_values(spec)
    order, problems = assignments(spec, table)
    assert not problems and len(order) == 40
    coupled = coupled_axes(spec, table, VerlBackend.coupled_settings)
    assert [list(spec.axes)[i] for i in coupled] == ["baseline", "group_size"]
    assert len(cells_to_validate(order, coupled, len(spec.axes))) < 10
    # Everything a cross-field rule reads stays coupled.
    assert VerlBackend.coupled_settings is not None
    for name in ("group_size", "prompts_per_step", "ppo_mini_batch_size", "nnodes",
                 "n_gpus_per_node", "kl_coef", "max_steps", "extra_overrides"):
        assert name in VerlBackend.coupled_settings and name not in FREE_SETTINGS
    assert set(VerlSettings.model_fields) >= FREE_SETTINGS
