"""The toy's base model ships with kappa (issue 26, 4): the demo's cells load one shipped
file whatever the CPU kernels; a damaged one is refused (at load, by preflight, by the
doctor), never rebuilt; the build script writes the same bytes twice."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from kit.cli import run_kappa
from kit.home import use_home

from orchestrator.backends.embedded import shipped
from orchestrator.backends.embedded.settings import EmbeddedSettings
from orchestrator.backends.embedded.warmstart import build, cache_key, load_or_build
from orchestrator.errors import UserInputError
from orchestrator.grid.plan import load_plan
from orchestrator.registry import Registry

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "experiments" / "toy" / "demo.yaml"

_LOAD = """
import hashlib, json, torch
from orchestrator.backends.embedded.settings import EmbeddedSettings
from orchestrator.backends.embedded.warmstart import load_or_build
warm = load_or_build(EmbeddedSettings.model_validate(json.loads({settings!r})), torch.device("cpu"))
digest = hashlib.sha256()
for name, tensor in warm.model.state_dict().items():
    digest.update(name.encode())
    digest.update(tensor.numpy().tobytes())
print(json.dumps({{"capability": torch.backends.cpu.get_cpu_capability(), "source": warm.source,
                  "sha256": warm.sha256, "weights": digest.hexdigest()}}))
"""


def _demo_settings() -> list[EmbeddedSettings]:
    return [EmbeddedSettings.model_validate(c.settings) for c in load_plan(DEMO).grid.cells]


def _weights_digest(model: torch.nn.Module) -> str:
    digest = hashlib.sha256()
    for name, tensor in model.state_dict().items():
        digest.update(name.encode())
        digest.update(tensor.numpy().tobytes())
    return digest.hexdigest()


def _damaged_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the shipped folder, one byte of its model flipped; kappa reads it."""
    folder = tmp_path / "base_models"
    shutil.copytree(shipped.FOLDER, folder)
    [entry] = json.loads((folder / shipped.MANIFEST).read_text())["models"].values()
    path = folder / entry["file"]
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    monkeypatch.setattr(shipped, "FOLDER", folder)
    return path


def test_the_demo_has_one_base_model_and_kappa_ships_it() -> None:
    keys = {shipped.base_key(s) for s in _demo_settings()}
    assert len(keys) == 1
    [entry] = [shipped.manifest()[key] for key in keys]
    assert entry["sha256"] == shipped.sha256_file(shipped.FOLDER / entry["file"])
    assert entry["settings"] == shipped.key_content(_demo_settings()[0])


def test_the_shipped_key_leaves_out_torch_and_keeps_what_the_weights_depend_on(
        monkeypatch: pytest.MonkeyPatch) -> None:
    demo = _demo_settings()[0]
    key, cached = shipped.base_key(demo), cache_key(demo)
    monkeypatch.setattr(torch, "__version__", "2.99.0+cpu")
    assert shipped.base_key(demo) == key and cache_key(demo) != cached
    same = demo.model_copy(update={"seed": 7, "max_steps": 3})
    assert shipped.base_key(same) == key
    for change in ({"val_size": 64}, {"task": "addition"},
                   {"warm_start": {"seed": 1}}, {"model": {"d_model": 32}}):
        other = EmbeddedSettings.model_validate({**demo.model_dump(), **change})
        assert shipped.base_key(other) != key, change
        assert shipped.lookup(other) is None, change


def test_the_demo_loads_the_same_weights_under_avx2_and_native_kernels(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ATEN_CPU_CAPABILITY is read when torch is imported: the AVX2 side is a process of
    its own, the native side this one. Neither builds anything."""
    monkeypatch.setenv("KAPPA_CACHE", str(tmp_path / "cache"))
    demo = _demo_settings()[0]
    native = load_or_build(demo, torch.device("cpu"))
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "avx2", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", _LOAD.format(settings=demo.model_dump_json())],
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    avx2 = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"native: {torch.backends.cpu.get_cpu_capability()}, other: {avx2['capability']}")
    assert avx2["capability"] == "AVX2"
    assert (native.source, avx2["source"]) == ("shipped", "shipped")
    assert native.sha256 == avx2["sha256"] == shipped.lookup(demo).sha256  # type: ignore[union-attr]
    assert _weights_digest(native.model) == avx2["weights"]
    assert not (tmp_path / "cache").exists()


def test_a_damaged_shipped_model_is_refused_at_load_not_rebuilt(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAPPA_CACHE", str(tmp_path / "cache"))
    path = _damaged_copy(tmp_path, monkeypatch)
    with pytest.raises(UserInputError) as caught:
        load_or_build(_demo_settings()[0], torch.device("cpu"))
    text = caught.value.render()
    assert str(path) in text and "fails its checksum" in text and "refused" in text
    assert "reinstall kappa" in text and shipped.BUILD_SCRIPT in text
    assert not (tmp_path / "cache").exists()  # nothing was built in its place
    path.unlink()  # a missing file is refused the same way
    with pytest.raises(UserInputError, match="no such file"):
        load_or_build(_demo_settings()[0], torch.device("cpu"))


@pytest.mark.parametrize("command", ["plan", "submit"])
def test_plan_and_submit_refuse_a_damaged_shipped_model_before_recording_anything(
        command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    use_home(tmp_path / "home", monkeypatch)
    path = _damaged_copy(tmp_path, monkeypatch)
    ran = run_kappa(capsys, command, str(DEMO))
    assert ran.code == 2, ran.output
    assert ran.output.count(str(path)) == 1  # one problem for the 12 cells that share it
    assert "base.warm_start" in ran.output and "reinstall kappa" in ran.output
    with Registry.open() as reg:
        assert reg.find_sweep("toy-demo") is None


def test_doctor_names_a_damaged_shipped_model(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrator.doctor import DoctorOptions, Status
    from orchestrator.doctor.environment import check_packages

    assert "base model" not in check_packages(DoctorOptions()).summary
    path = _damaged_copy(tmp_path, monkeypatch)
    result = check_packages(DoctorOptions())
    assert result.status is Status.PROBLEM
    assert str(path) in result.summary and "reinstall kappa" in (result.fix or "")


SPEC = """\
name: tiny-base
backend: embedded
base:
  task: addition
  val_size: 8
  model: {d_model: 16, n_layers: 1, n_heads: 2}
  warm_start: {steps: 2, batch_size: 8, target_accuracy: null}
axes:
  seed: [0, 1]
  warm_start.seed: [0, 1]
"""


def test_the_build_script_writes_the_same_files_twice(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    out = tmp_path / "out"
    out.mkdir()
    (out / "stale.pt").write_bytes(b"old")
    env = {**os.environ, "KAPPA_HOME": str(tmp_path / "home")}

    def run() -> dict[str, bytes]:
        proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "build_base_models.py"),
                               "--out", str(out), str(spec)], env=env, capture_output=True,
                              text=True, timeout=300, check=False)
        assert proc.returncode == 0, proc.stderr
        return {p.name: p.read_bytes() for p in out.iterdir()}

    first = run()
    assert run() == first
    models = json.loads(first[shipped.MANIFEST])["models"]
    assert len(models) == 2 and "stale.pt" not in first  # one per warm_start.seed
    for key, entry in models.items():
        assert entry["file"] == f"{key}.pt"
        assert entry["sha256"] == hashlib.sha256(first[entry["file"]]).hexdigest()
        assert entry["settings"]["warm_start"]["steps"] == 2


@pytest.mark.slow
def test_the_shipped_models_are_what_the_script_builds_here(tmp_path: Path) -> None:
    """The recipe and the shipped files agree: a change to the warm start that moves the
    weights must rebuild them (``make base-models``) or bump shipped.FORMAT_VERSION. Only
    on kernels and a torch build like the ones that built them."""
    for key, entry in shipped.manifest().items():
        if (entry["cpu_capability"], entry["torch"]) != (
                torch.backends.cpu.get_cpu_capability(), torch.__version__):
            pytest.skip(f"built on {entry['cpu_capability']}, torch {entry['torch']}")
        settings = EmbeddedSettings.model_validate(
            {k: entry["settings"][k] for k in ("task", "warm_start", "val_size")}
            | {"model": {k: v for k, v in entry["settings"]["model"].items()
                         if k != "vocab_size"}})
        assert shipped.base_key(settings) == key
        threads = torch.get_num_threads()
        torch.set_num_threads(entry["threads"])
        try:
            warm = build(settings, tmp_path / f"{key}.pt", torch.device("cpu"))
        finally:
            torch.set_num_threads(threads)
        assert warm.sha256 == entry["sha256"]
