"""What the Ray Jobs executor accepts as its cluster address and custom resources.

Checked when the options are validated, before any connection (exit 2, nothing written):

* ``address`` is the dashboard's Jobs API: ``http(s)://host[:port][/path]``, a bare
  ``host:port`` or Ray's ``auto``. Ray's ``JobSubmissionClient`` reads any other
  ``scheme://`` as the name of a Python module to *import* (``file:///x`` imports
  ``file``), and ``ray://`` opens a Ray Client session inside kappa. A control character
  would end up in request lines and in messages.
* ``entrypoint_resources`` are *custom* resources (CPUs and GPUs come from the spec's
  resources), each a positive amount Ray can represent. A zero or negative amount
  reserves nothing while looking like a constraint.
"""

from __future__ import annotations

import math
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import AfterValidator, BeforeValidator
from pydantic_core import PydanticCustomError

from orchestrator.executors.ray_client import dashboard_url

# Ray's limits (ray._private.ray_constants), restated: importing ray here would make
# `kappa --help` slow.
MIN_RESOURCE_GRANULARITY = 0.0001
MAX_RESOURCE_QUANTITY = 100e12
RAY_OWN_RESOURCES = ("CPU", "GPU", "memory", "object_store_memory")
SCHEMES = ("http", "https")


def _refuse(message: str, **context: object) -> PydanticCustomError:
    return PydanticCustomError("ray_option", message, dict(context))


def _has_control(text: str) -> bool:
    return any(ch.isspace() or not ch.isprintable() for ch in text)


def check_address(address: str) -> str:
    """``address`` if it names a Ray dashboard (see the module docstring), else raise."""
    if _has_control(address):
        raise _refuse("a Ray dashboard address has no spaces, line breaks or control "
                      "characters")
    if address == "auto":
        return address
    address_url = dashboard_url(address)
    if "://" in address:
        scheme = address.split("://", 1)[0]  # Ray compares it as is: HTTP:// is a module
        if scheme == "ray":
            raise _refuse("ray:// is a Ray Client address, not the Jobs API: give the "
                          "dashboard's http://HEAD:8265")
        if scheme not in SCHEMES:
            raise _refuse("the Ray Jobs API is reached over http:// or https://, not "
                          "{scheme}://", scheme=scheme)
    try:
        parts = urlsplit(address_url)
        parts.port  # noqa: B018 - raises ValueError for a port out of range or not a number
    except ValueError as exc:
        raise _refuse("not a URL: {why}", why=str(exc)) from None
    if not parts.hostname:
        raise _refuse("a Ray dashboard address names a host, e.g. http://head:8265")
    if parts.query or parts.fragment or address_url.endswith(("?", "#")):
        raise _refuse("a Ray dashboard address has no ?query or #fragment (Ray appends "
                      "its API paths to it)")
    return address


def _amount(value: object) -> object:
    # A boolean is no amount (the base model's rule, one level down: ``{"a": true}``).
    if isinstance(value, bool):
        raise _refuse("a resource amount is a number, not a boolean")
    return value


def check_resources(resources: dict[str, float]) -> dict[str, float]:
    """``resources`` if each is a custom resource with an amount Ray can reserve, else
    raise naming the first bad one."""
    for name, amount in resources.items():
        if not name or name != name.strip() or _has_control(name.replace(" ", "")):
            raise _refuse("resource name {name}: not empty, no surrounding spaces or "
                          "control characters", name=repr(name))
        if name in RAY_OWN_RESOURCES:
            raise _refuse("{name} is one of Ray's own resources, not a custom one: a cell's "
                          "CPUs and GPUs come from the spec's resources (cpus, gpus)",
                          name=name)
        if not math.isfinite(amount) or not (
                MIN_RESOURCE_GRANULARITY <= amount <= MAX_RESOURCE_QUANTITY):
            raise _refuse("{name}: {amount} is no amount Ray can reserve (from 0.0001 to "
                          "1e14)", name=name, amount=amount)
        steps = amount / MIN_RESOURCE_GRANULARITY
        if abs(steps - round(steps)) > 1e-6 * max(1.0, steps):
            raise _refuse("{name}: {amount} is finer than Ray's granularity of 0.0001",
                          name=name, amount=amount)
    return resources


RayAddress = Annotated[str, AfterValidator(check_address)]
CustomResources = Annotated[dict[str, Annotated[float, BeforeValidator(_amount)]],
                            AfterValidator(check_resources)]
