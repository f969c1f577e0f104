"""The spec's ``notify:`` block (or ``kappa submit --notify URL``): where kappa posts a chat
message (Slack's incoming-webhook JSON) when a sweep ends, a cell fails for good, a canary
fails or a ``diverged`` rule fires (docs/spec.md#notifications). A webhook URL is a secret:
it is shown masked everywhere (:func:`mask_url`, validation errors included), and ``url:
${NAME}`` reads it from the environment at submit, so the stored spec need not hold it."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, StrictStr, field_validator, model_validator

from orchestrator.spec.stop_block import Block

Event = Literal["sweep_end", "cell_failed", "canary_failed", "diverged"]
EVENTS: tuple[Event, ...] = ("sweep_end", "cell_failed", "canary_failed", "diverged")
MAX_URL = 2000
ENV_REFERENCE = re.compile(r"^\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]{0,199})\}$")


def mask_url(url: str) -> str:
    """``https://hooks.slack.com/***``: scheme, host and port kept, the rest (where webhook
    tokens live) replaced by ``***``; ``${NAME}`` shown as it is (it holds no secret)."""
    if ENV_REFERENCE.match(url.strip()):
        return url.strip()
    try:
        parts = urlsplit(url.strip())
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "***"
    if not parts.scheme or not host:
        return "***"
    secret = (parts.username or parts.password or parts.path.strip("/") or parts.query
              or parts.fragment)
    return f"{parts.scheme}://{host}{port}" + ("/***" if secret else "")


def url_problem(url: str) -> str | None:
    """Why ``url`` cannot take a JSON POST (``None``: it can). Never quotes the URL."""
    if len(url) > MAX_URL:
        return f"longer than {MAX_URL} characters"
    if re.search(r"\s", url):
        return "contains whitespace"
    try:
        parts = urlsplit(url)
        _ = parts.port  # a port that is no number raises here
    except ValueError as exc:
        return f"not a URL ({exc})"
    if parts.scheme not in ("http", "https"):
        return "must start with https:// (or http://), or be ${NAME} (an environment variable)"
    if not parts.hostname:
        return "has no host"
    return None


class _Masked(str):
    """The URL while it is validated: pydantic quotes a field's input in its errors."""

    __slots__ = ()

    def __repr__(self) -> str:
        return repr(mask_url(self))


class NotifySpec(Block):
    """Where and when kappa posts messages about a sweep."""

    url: StrictStr = Field(description=(
        "The webhook to POST to (https or http), e.g. a Slack incoming webhook; or "
        "${NAME}: the URL is the environment variable NAME's value at submit."))
    events: tuple[Event, ...] = Field(EVENTS, min_length=1, description=(
        "What to post about: sweep_end, cell_failed, canary_failed, diverged (default: all)."))

    @model_validator(mode="before")
    @classmethod
    def _mask_input(cls, data: Any) -> Any:
        if isinstance(data, dict) and type(data.get("url")) is str:
            data = {**data, "url": _Masked(data["url"])}
        return data

    @field_validator("url")
    @classmethod
    def _valid_url(cls, url: str) -> str:
        url = str(url)
        if not ENV_REFERENCE.match(url) and (why := url_problem(url)) is not None:
            raise ValueError(f"the URL {why}")
        return url

    @field_validator("events")
    @classmethod
    def _distinct(cls, events: tuple[Event, ...]) -> tuple[Event, ...]:
        if len(set(events)) != len(events):
            raise ValueError("an event is listed twice")
        return events

    def __repr_args__(self) -> Any:
        return [("url", mask_url(self.url)), ("events", self.events)]

    @property
    def env_name(self) -> str | None:
        """``NAME`` of ``url: ${NAME}`` (``None`` for a literal URL)."""
        found = ENV_REFERENCE.match(self.url)
        return found["name"] if found else None

    def resolved(self) -> NotifySpec:
        """This block with ``${NAME}`` replaced by the variable's value now; a ``ValueError``
        (naming the variable, never quoting its value) if it is unset or not a URL."""
        name = self.env_name
        if name is None:
            return self
        value = os.environ.get(name, "").strip()
        if not value:
            raise ValueError(f"notify.url: the environment variable {name} is not set")
        if (why := url_problem(value)) is not None:
            raise ValueError(f"notify.url: the value of {name} {why}")
        return NotifySpec(url=value, events=self.events)

    def masked(self) -> str:
        """For display: the URL masked."""
        return mask_url(self.url)


def shareable(text: str, overrides: Sequence[str],
              block: NotifySpec | None) -> tuple[str, tuple[str, ...]]:
    """The spec's YAML ``text`` and command-line ``overrides`` as kappa stores and shows them
    (registry, MLflow, the report), a literal webhook URL of ``block`` masked (schedulers
    read it from the sweep's owner-only ``notify.json``). An override of ``notify`` that
    spells the URL otherwise shows ``***``; a body that does not hold the URL literally
    (YAML escapes) is dumped again masked, comments lost."""
    masked = None if block is None or block.env_name is not None else mask_url(block.url)
    if block is None or masked is None or masked == block.url:
        return text, tuple(overrides)
    from orchestrator.spec.yaml_source import dump_yaml, load_yaml

    url = block.url
    shown = tuple(o.replace(url, masked) if url in o
                  else o.split("=", 1)[0] + "=***" if _sets_notify(o) else o
                  for o in overrides)
    if url in text:
        return text.replace(url, masked), shown
    data = load_yaml(text, "<stored spec>").data
    if isinstance(data, dict) and isinstance(data.get("notify"), dict):
        data["notify"]["url"] = masked
    return dump_yaml(data), shown


def _sets_notify(override: str) -> bool:
    """Whether ``override`` (Hydra grammar) sets ``notify`` or a key under it."""
    key = override.lstrip("+~").split("=", 1)[0].strip()
    return "=" in override and key.split(".")[0] == "notify"
