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
from kit.cli import process
from kit.kappa_main import KAPPA_SCRIPT

from orchestrator.cli.app import unwrap_help


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
