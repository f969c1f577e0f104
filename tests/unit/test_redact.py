"""Passwords never shown: URL and key/value masking, log records, rendered errors."""

from __future__ import annotations

import logging
import random
import string
import sys
from pathlib import Path

import pytest
from kit.cells import make_cell
from kit.cli import run_kappa

from orchestrator.errors import Problem, UserInputError
from orchestrator.redact import MASK, has_credentials, install_log_redaction, redact

FUZZ_CASES = 2000


@pytest.mark.parametrize(("text", "expected"), [
    ("postgresql://kappa:s3cret@db:5432/reg", "postgresql://kappa:***@db:5432/reg"),
    ("postgresql+psycopg://u:p%40ss@h/db", "postgresql+psycopg://u:***@h/db"),
    ("http://u:p@ss@mlflow.example:5000", "http://u:***@mlflow.example:5000"),
    ("https://:tok3n@host/api", "https://:***@host/api"),
    ("error at 'postgresql://a:b@h/d' and http://c:d@e/f.", "error at 'postgresql://a:***@h/d'"
                                                           " and http://c:***@e/f."),
    ("host=db user=kappa password=s3cret dbname=reg", "host=db user=kappa password=*** dbname=reg"),
    ("...?sslmode=require&password=x&user=u", "...?sslmode=require&password=***&user=u"),
    # No scheme, as Ray takes its address: the port marks it as one.
    ("ray at kappa:s3cret@head:8265 is down", "ray at kappa:***@head:8265 is down"),
    ("RAY_ADDRESS=u:p@ss@10.0.0.1:8265/", "RAY_ADDRESS=u:***@10.0.0.1:8265/"),
    ("('u:x:y@[::1]:8265', :tok@h:1.)", "('u:***@[::1]:8265', :***@h:1.)"),
    # Nothing to hide: left as it is.
    ("postgresql://kappa@db/reg", "postgresql://kappa@db/reg"),
    ("sqlite:////tmp/home/registry.db", "sqlite:////tmp/home/registry.db"),
    ("http://127.0.0.1:5000/#/experiments/1/runs?searchFilter=a", None),
    ("mean@8 = 0.5, user@example.org", None),
    # Not credentials, though near the scheme-less form: left as they are.
    ("git@github.com:org/repo.git and ssh git@host:22", None),
    ("mailto:someone@example.org, a.b+c@d.org:", None),
    ("head:8265, [::1]:8265, 10.0.0.1:6379", None),
    ("at 12:30@room:4 and 10:00:01@node:6379; 12:30@lunch", None),
    ("ratio 3:2@host:80ms and u:p@h:80.5", None),
    ("{'key':'v@h:1'}", None),
])
def test_redact_masks_passwords_only(text: str, expected: str | None) -> None:
    assert redact(text) == (text if expected is None else expected)
    assert has_credentials(text) == (expected is not None and expected != text)


def test_fuzzed_passwords_never_survive() -> None:
    """Random passwords (URL-safe and percent-encoded characters) in random URL shapes."""
    seed = random.randrange(2**32)
    print(f"seed={seed}")
    rng = random.Random(seed)
    alphabet = string.ascii_letters + string.digits + "-._~!$&()*+,;%=@"
    for _ in range(FUZZ_CASES):
        password = "Z" + "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 24))) + "Q"
        user = "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(0, 8)))
        scheme = rng.choice(["postgresql", "postgresql+psycopg", "http", "https", "mysql"])
        host = rng.choice(["db", "127.0.0.1", "db.example.org:5432", "[::1]:5000"])
        url = f"{scheme}://{user}:{password}@{host}/" + rng.choice(["reg", "", "a/b?x=1"])
        text = rng.choice(["{}", "cannot reach {}: refused", "'{}'", "({})"]).format(url)
        masked = redact(text)
        assert password not in masked, (seed, text, masked)
        assert f"{user}:{MASK}@{host}" in masked, (seed, text, masked)


def test_fuzzed_passwords_in_addresses_without_a_scheme_never_survive() -> None:
    """Ray's ``user:password@host:port`` form, random passwords, in random contexts."""
    seed = random.randrange(2**32)
    print(f"seed={seed}")
    rng = random.Random(seed)
    alphabet = string.ascii_letters + string.digits + "-._~!$&()*+,;%=@:"
    for _ in range(FUZZ_CASES):
        password = "Z" + "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 24))) + "Q"
        user = "".join(rng.choice(string.ascii_lowercase + "_") for _ in range(rng.randint(0, 8)))
        host = rng.choice(["head:8265", "127.0.0.1:8265", "head.example.org:1", "[::1]:5000"])
        address = f"{user}:{password}@{host}" + rng.choice(["", "/", "/api/jobs"])
        text = rng.choice(["{}", "cannot reach {}: refused", "'{}'", "({})", "address={}",
                           "{}.", "a {}, b"]).format(address)
        masked = redact(text)
        assert password not in masked, (seed, text, masked)
        assert f"{user}:{MASK}@{host}" in masked, (seed, text, masked)
        assert has_credentials(address), (seed, address)


def test_user_input_errors_render_masked() -> None:
    err = UserInputError("cannot use postgresql://u:s3cret@h/db", [Problem(
        "registry", "bad", found="postgresql://u:s3cret@h/db")])
    assert "s3cret" not in err.render() and "s3cret" not in str(err)
    assert "postgresql://u:***@h/db" in err.render()


def test_log_records_and_tracebacks_are_masked(caplog: pytest.LogCaptureFixture) -> None:
    install_log_redaction()
    install_log_redaction()  # idempotent
    log = logging.getLogger("kappa.test.redact")
    with caplog.at_level(logging.INFO):
        log.warning("connecting to %s", "postgresql://u:s3cret@h/db")
        try:
            raise RuntimeError("failed: http://u:s3cret@mlflow/")
        except RuntimeError:
            log.exception("store error")
    assert "s3cret" not in caplog.text
    assert "postgresql://u:***@h/db" in caplog.text and "http://u:***@mlflow/" in caplog.text


def test_cli_output_is_masked_even_when_it_quotes_stored_text(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A cell's last error quoting a URL (as a driver's message may) shows masked in
    ``kappa status``, table and JSON alike; the streams are restored afterwards."""
    from orchestrator.grid.plan import SweepPlan
    from orchestrator.registry import CellState, Registry

    monkeypatch.setenv("KAPPA_HOME", str(tmp_path))
    cell = make_cell("c0ffee", 0, axes={"seed": 0}, settings={"seed": 0})
    with Registry.open() as reg:
        reg.upsert_sweep("toy", backend="embedded", spec_text="name: toy\n",
                         plan=SweepPlan(name="toy", backend="embedded").to_json())
        reg.add_cells("toy", [cell])
        assert reg.transition(("toy", "c0ffee"), CellState.PENDING, CellState.QUEUED)
        assert reg.start_attempt(("toy", "c0ffee")) is not None
        assert reg.finish_attempt(("toy", "c0ffee"), CellState.FAILED, exit_code=1,
                                  last_error="store at http://ml:s3cret@mlflow:5000 refused")
    stdout = sys.stdout
    for args in (["status", "toy"], ["status", "toy", "--json"]):
        code, out, _ = run_kappa(capsys, *args)
        assert code == 0
        assert "http://ml:***@mlflow:5000" in out, out
        assert "s3cret" not in out
    assert sys.stdout is stdout
