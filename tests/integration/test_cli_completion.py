"""``kappa completion bash|zsh|fish`` (issue 18, 6): each script is printed, and bash's
script, loaded into a real bash, completes commands, options and choices through the
variables click reads (COMP_WORDS, COMP_CWORD, _KAPPA_COMPLETE) in a new ``kappa``
process, as it does on a user's Tab."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from kit.cells import make_cells
from kit.cli import process
from kit.kappa_main import KAPPA_SCRIPT

from orchestrator.cli.app import unwrap_help
from orchestrator.registry import Registry


@pytest.fixture(scope="module")
def kappa_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ``kappa`` executable (this interpreter, this checkout) for the shell to call."""
    path = tmp_path_factory.mktemp("bin") / "kappa"
    path.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{KAPPA_SCRIPT}" "$@"\n')
    path.chmod(0o755)
    return path


@pytest.mark.parametrize(("shell", "marks"), [
    ("bash", ("complete -o default -F _kappa_completion kappa",
              "_KAPPA_COMPLETE=complete_bash")),
    ("zsh", ("#compdef kappa", "compdef _kappa_completion kappa",
             "_KAPPA_COMPLETE=complete_zsh")),
    ("fish", ("complete --command kappa", "_KAPPA_COMPLETE=complete_fish")),
])
def test_each_shell_gets_its_script(shell: str, marks: tuple[str, ...]) -> None:
    script = process("completion", shell).stdout
    for mark in marks:
        assert mark in script, script
    assert "python" not in script and "orchestrator" not in script, script  # the command


def test_an_unknown_shell_is_refused() -> None:
    ran = process("completion", "csh", code=2)
    assert "bash" in ran.stderr and "fish" in ran.stderr


def _bash_complete(script: str, kappa_bin: Path, *words: str) -> list[str]:
    """What bash offers for ``words`` (the last one being typed) with ``script`` loaded:
    the script's completion function, called as bash calls it on Tab."""
    if shutil.which("bash") is None:
        pytest.skip("bash is not installed")
    array = " ".join(f"'{w}'" for w in words)
    probe = (f"{script}\nCOMP_WORDS=({array}); COMP_CWORD={len(words) - 1}\n"
             f"_kappa_completion '{kappa_bin}'\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"\n")
    proc = subprocess.run(["bash", "--norc", "--noprofile", "-c", probe], capture_output=True,
                          text=True, timeout=180, check=False,
                          env={k: v for k, v in os.environ.items() if k != "_KAPPA_COMPLETE"})
    assert proc.returncode == 0, proc.stderr
    return [line for line in proc.stdout.splitlines() if line]


def test_bash_script_completes_commands_options_and_choices(kappa_bin: Path) -> None:
    script = process("completion", "bash").stdout
    assert _bash_complete(script, kappa_bin, "kappa", "subm") == ["submit"]
    assert {"schema", "search", "status", "submit", "smoke"} <= set(
        _bash_complete(script, kappa_bin, "kappa", "s"))
    assert "--wait" in _bash_complete(script, kappa_bin, "kappa", "submit", "--wa")
    assert _bash_complete(script, kappa_bin, "kappa", "completion", "") == [
        "bash", "zsh", "fish"]


def _record_sweeps(home: Path) -> dict[str, list[str]]:
    """Two recorded sweeps (their cells' ids by sweep) in a registry under ``home``."""
    made = {"alpha-run": make_cells(2, "a"), "beta-run": make_cells(1, "b")}
    with Registry.open(f"sqlite:///{home / 'registry.db'}") as reg:
        for name, cells in made.items():
            reg.upsert_sweep(name, backend="embedded", spec_text=f"name: {name}\n")
            reg.add_cells(name, cells, max_retries=0)
    return {name: [c.cell_id for c in cells] for name, cells in made.items()}


def test_bash_completes_sweep_names_cell_ids_and_option_values(
        kappa_bin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = process("completion", "bash").stdout
    home = tmp_path / "home"
    monkeypatch.setenv("KAPPA_HOME", str(home))
    # No registry yet: nothing offered, nothing created, no error.
    assert _bash_complete(script, kappa_bin, "kappa", "status", "") == []
    assert not home.exists()
    home.mkdir()
    ids = _record_sweeps(home)
    assert sorted(_bash_complete(script, kappa_bin, "kappa", "status", "")) == [
        "alpha-run", "beta-run"]
    assert _bash_complete(script, kappa_bin, "kappa", "table", "alpha-run", "b") == ["beta-run"]
    assert _bash_complete(script, kappa_bin, "kappa", "resume", "al") == ["alpha-run"]
    assert sorted(_bash_complete(script, kappa_bin, "kappa", "logs", "a")) == sorted(
        ids["alpha-run"])
    assert sorted(_bash_complete(script, kappa_bin, "kappa", "cancel", "b")) == sorted(
        ["beta-run", *ids["beta-run"]])
    # --registry typed before the Tab is the registry read.
    other = tmp_path / "other"
    other.mkdir()
    assert _bash_complete(script, kappa_bin, "kappa", "status", "--registry",
                          f"sqlite:///{other / 'registry.db'}", "") == []
    assert list(other.iterdir()) == []
    assert _bash_complete(script, kappa_bin, "kappa", "export", "--format", "") == [
        "csv", "parquet", "json"]
    assert _bash_complete(script, kappa_bin, "kappa", "table", "--scale", "p") == ["points"]
    assert _bash_complete(script, kappa_bin, "kappa", "table", "--format", "l") == ["latex"]
    assert _bash_complete(script, kappa_bin, "kappa", "seed-check", "--spending", "p") == [
        "pocock"]
    assert "local" in _bash_complete(script, kappa_bin, "kappa", "submit", "--executor", "")


def test_a_broken_registry_completes_nothing(kappa_bin: Path, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "registry.db").write_bytes(b"not a database")
    monkeypatch.setenv("KAPPA_HOME", str(home))
    script = process("completion", "bash").stdout
    assert _bash_complete(script, kappa_bin, "kappa", "logs", "") == []
    assert sorted(p.name for p in home.iterdir()) == ["registry.db"]


def test_zsh_and_fish_answers_name_the_command() -> None:
    zsh = process(env={"_KAPPA_COMPLETE": "complete_zsh",
                       "_TYPER_COMPLETE_ARGS": "kappa subm"}).stdout
    assert '"submit"' in zsh, zsh
    fish = process(env={"_KAPPA_COMPLETE": "complete_fish", "_TYPER_COMPLETE_ARGS": "kappa subm",
                        "_TYPER_COMPLETE_FISH_ACTION": "get-args"}).stdout
    assert fish.startswith("submit"), fish


def test_help_paragraphs_are_unwrapped_but_examples_keep_their_lines() -> None:
    doc = ("First line.\n\nA sentence broken\nin the middle. Another\none.\n\n"
           "Example: run this,\n# then this line\n- and a list item\n\n\b\nkept\nas is")
    assert unwrap_help(doc) == (
        "First line.\n\nA sentence broken in the middle. Another one.\n\n"
        "Example: run this,\n# then this line\n- and a list item\n\n\b\nkept\nas is")


def test_ui_help_keeps_its_sentences_whole() -> None:
    """``kappa ui --help`` broke "the UI's Model / training mode" at any width."""
    out = process("ui", "--help", env={"COLUMNS": "200"}).stdout
    assert "in the UI's Model training mode" in out, out
