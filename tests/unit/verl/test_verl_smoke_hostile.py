"""``kappa smoke verl`` and the smoke spec against a hostile user (issue 11, 4).

The template submitted as it is, placeholders left in paths, ``--out`` that is a file,
paths with spaces and quotes on verl's command line, and builders racing into one
folder. Thread interleavings are the OS's; nothing here is seeded.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import sys
import threading
from pathlib import Path

import pytest
from kit.cli import kappa
from pydantic import ValidationError
from verl_test_cells import REWARD_FILE

from orchestrator.backends.verl import smoke, tiny_model
from orchestrator.backends.verl.settings import VerlSettings
from orchestrator.errors import UserInputError
from orchestrator.sweeps import smoke as smoke_spec
from orchestrator.sweeps.smoke import smoke_commands

BASE = {"train_files": "/d/train.parquet", "val_files": "/d/val.parquet"}


def test_submitting_the_template_is_a_validation_error_naming_kappa_smoke(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Its literal ${KAPPA_SMOKE_DIR} paths would only fail on the GPU node."""
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path / "home"))
    code, out = kappa(capsys, "validate", str(smoke.TEMPLATE))
    assert code == 2 and "Traceback" not in out, out
    for setting in ("model_path", "train_files", "val_files"):
        assert f"base.{setting}" in out, out
    assert "run `kappa smoke verl`" in out, out


@pytest.mark.parametrize(("field", "value"), [
    ("model_path", "${MODEL_DIR}/qwen"), ("train_files", ["/ok.parquet", "${DATA}/t.parquet"]),
    ("val_files", "${DATA}/v.parquet"), ("eval_files", ["${EVAL}"]),
    ("reward_function_path", "${HOME}/rewards.py")])
def test_a_placeholder_in_a_path_setting_is_refused_with_the_fix(
        field: str, value: str | list[str]) -> None:
    with pytest.raises(ValidationError) as info:
        VerlSettings.model_validate({"model_path": "/m", **BASE, field: value})
    (error,) = info.value.errors()
    assert error["loc"] == (field,), error
    assert "unexpanded placeholder ${" in error["msg"] and "replace the placeholder" \
        in error["msg"], error


def test_dollar_signs_that_are_no_placeholder_are_paths() -> None:
    settings = VerlSettings.model_validate({"model_path": "/m/$weird/{x}", **BASE})
    assert settings.model_path == "/m/$weird/{x}"


@pytest.mark.parametrize("where", ["file", "file/under"])
def test_out_that_is_a_file_is_a_user_error_before_anything_is_built(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        where: str) -> None:
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path / "home"))
    (tmp_path / "file").write_text("x")
    with pytest.raises(UserInputError, match="cannot write its files"):
        smoke.usable_out_dir(tmp_path / where)
    code, out = kappa(capsys, "smoke", "verl", "--dry-run", "--out", str(tmp_path / where))
    assert code == 2 and "--out" in out and "Traceback" not in out, out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_paths_with_spaces_and_quotes_reach_verl_as_they_are(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The golden command lines quote for Hydra and then for the shell: both parsers give
    back the exact path (a comma or bracket unquoted would be a Hydra sweep or list)."""
    parser_module = pytest.importorskip("hydra.core.override_parser.overrides_parser")
    monkeypatch.setenv("KAPPA_VERL_PREFLIGHT", "off")
    out = Path("/tmp/kappa smoke/it's \"quoted\", [x] = y")
    spec = tmp_path / "smoke.yaml"
    spec.write_text(smoke_spec.spec_text(out, base={"reward_function_path": REWARD_FILE}))
    parser = parser_module.OverridesParser.create()
    runs = Path("/runs/with space's")
    (_, argv), *_ = smoke_commands(spec, runs)
    assert shlex.split(shlex.join(argv)) == argv
    values = {o.key_or_group: o.value() for o in parser.parse_overrides(argv[3:])}
    assert values["actor_rollout_ref.model.path"] == str(out / "model")
    assert values["data.train_files"] == [str(out / "data" / "train.parquet")]
    assert str(values["trainer.default_local_dir"]).startswith(str(runs))


def _tree_digest(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _race(workers: int, work: object) -> list[str]:
    """Run ``work()`` in ``workers`` threads released at once; the errors they raised."""
    barrier = threading.Barrier(workers)
    errors: list[str] = []

    def run() -> None:
        barrier.wait()
        try:
            work()  # type: ignore[operator]
        except Exception as exc:
            errors.append(repr(exc))

    threads = [threading.Thread(target=run) for _ in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def test_writers_racing_into_one_folder_never_crash_nor_mix(tmp_path: Path) -> None:
    """Prompts and spec written by 4 writers at once, 4 times: each file is whole and
    the same bytes as a lone writer's (a shared temporary name crashed 27 of 60)."""
    alone = tmp_path / "alone"
    smoke.write_prompts(alone / "data")
    smoke_spec.render_spec(alone)
    shared = tmp_path / "shared"

    def write() -> None:
        for _ in range(4):
            smoke.write_prompts(shared / "data")
            smoke_spec.render_spec(shared)

    assert _race(4, write) == []
    for name in ("data/train.parquet", "data/val.parquet"):
        assert (shared / name).read_bytes() == (alone / name).read_bytes()
    assert sorted(p.name for p in shared.rglob("*")) == [
        "data", "smoke.yaml", "train.parquet", "val.parquet"]


@pytest.mark.parametrize("existing", ["none", "same", "older", "file"])
def test_model_builders_racing_publish_one_build(tmp_path: Path, existing: str) -> None:
    """4 finished builds published into one folder at once, over nothing, the same
    build, an older build or a stray file: no error, one build there, nothing left over."""
    out = tmp_path / "model"
    record = {"kind": "model", "format": tiny_model.FORMAT, "layers": 2}
    if existing in ("same", "older"):
        out.mkdir()
        (out / "weights").write_text(existing)
        old = record if existing == "same" else {**record, "layers": 1}
        (out / tiny_model.MARKER).write_text(json.dumps(old))
    elif existing == "file":
        out.write_text("stray")
    pending = [tmp_path / f".model.{i}" for i in range(4)]
    for build in pending:
        build.mkdir()
        (build / "weights").write_text("new")
    lock = threading.Lock()

    def publish() -> None:
        with lock:
            build = pending.pop()
        tiny_model._publish(build, out, record)

    assert _race(4, publish) == []
    assert tiny_model._is_built(out, record)
    assert (out / "weights").read_text() == ("same" if existing == "same" else "new")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]


@pytest.mark.slow
def test_concurrent_smoke_builds_give_one_identical_model(tmp_path: Path) -> None:
    """3 processes build the smoke files into one folder at once (slow: torch and
    transformers in each, about a minute on 2 busy cores): all succeed and the model is
    byte for byte a lone build's."""
    import subprocess

    code = ("import sys; from pathlib import Path; from orchestrator.sweeps import smoke; "
            "smoke.prepare_smoke(Path(sys.argv[1]))")
    shared = tmp_path / "shared folder"
    procs = [subprocess.Popen([sys.executable, "-c", code, str(shared)],
                              stderr=subprocess.PIPE, text=True) for _ in range(3)]
    alone = subprocess.run([sys.executable, "-c", code, str(tmp_path / "alone")],
                           capture_output=True, text=True, check=False)
    results = [(p.wait(), p.stderr.read() if p.stderr else "") for p in procs]
    assert alone.returncode == 0, alone.stderr
    assert all(rc == 0 for rc, _ in results), results
    assert _tree_digest(shared / "model") == _tree_digest(tmp_path / "alone" / "model")
    assert sorted(p.name for p in shared.iterdir()) == ["data", "model", "smoke.yaml"]
