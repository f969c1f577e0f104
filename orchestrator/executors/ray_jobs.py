"""The Ray Jobs executor: each launch is a Ray job's *driver* (verl's ``main_ppo`` calls
``ray.init`` itself) on an existing cluster (placement: :mod:`.ray_placement`, docs/ray.md).
``env``, ``MLFLOW_*`` and ``VERL_USE_EXTERNAL_MODULES=kappa_verl`` go into the runtime_env (secrets
do not: :mod:`.job_secrets`); ``RAY_OVERRIDE_JOB_RUNTIME_ENV=1`` lets the driver's
``ray.init(runtime_env=...)`` repeat its keys. A cluster that does not answer when the executor is
made is a :class:`RayAddressError` (exit 2); later a :class:`RayUnreachableError`, "unknown" to the
scheduler: a job still runs, ``capacity`` is 0, a submit costs no retry."""

from __future__ import annotations

import logging
import os
import secrets
import shlex
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import AfterValidator, BeforeValidator, Field, model_validator
from pydantic_core import PydanticCustomError

from orchestrator.errors import Problem
from orchestrator.executors.base import Executor, ExecutorOptions, JobResources
from orchestrator.executors.job_secrets import (
    SECRET_ENV_FILE_VAR,
    split_secrets,
    wrapped,
    write_secret_env,
)
from orchestrator.executors.ray_client import (
    JOB_ID_PREFIX,
    REQUEST_TIMEOUT_S,
    RayAddressError,
    RayJob,
    RayJobsError,
    RayUnreachableError,
    ask,
    bounded_client,
    dashboard_url,
    no_answer,
    status_name,
)
from orchestrator.executors.ray_placement import (
    RayNode,
    alive_nodes,
    entrypoint_options,
    free_slots,
    why_not,
)
from orchestrator.limits import MAX_PARALLEL, MAX_WAIT_S

LOG = logging.getLogger(__name__)
FORWARDED_PREFIXES = ("MLFLOW_",)
DEFAULT_ENV = {"VERL_USE_EXTERNAL_MODULES": "kappa_verl", "RAY_OVERRIDE_JOB_RUNTIME_ENV": "1"}
METADATA_KEY = "kappa"
# What a head whose job agent has not registered yet (a fresh or busy cluster) refuses with.
TRANSIENT_REFUSALS = ("No available agent to submit job",)
SUBMIT_RETRY_S = 120.0
SUBMIT_RETRY_INTERVAL_S = 2.0
# A submit that got no answer is sent once more under the same submission id: if the
# first one reached Ray, Ray says the id exists and the job is the one already running.
SUBMIT_UNANSWERED_RETRIES = 1
# Nodes join and leave (autoscaling, failures); their list is read again after this.
NODES_TTL_S = 30.0
# Ray's limits (ray._private.ray_constants), restated: importing ray would slow `kappa --help`.
MIN_RESOURCE_GRANULARITY = 0.0001
MAX_RESOURCE_QUANTITY = 100e12
RAY_OWN_RESOURCES = ("CPU", "GPU", "memory", "object_store_memory")
SCHEMES = ("http", "https")


def _refuse(message: str, **context: object) -> PydanticCustomError:
    return PydanticCustomError("ray_option", message, dict(context))


def _has_control(text: str) -> bool:
    return any(ch.isspace() or not ch.isprintable() for ch in text)


def check_address(address: str) -> str:
    """``address`` if it names a Ray dashboard: ``http(s)://host[:port][/path]``, ``host:port``
    or ``auto``. Ray's client *imports* any other ``scheme://`` as a module (``file:///x``),
    ``ray://`` opens a Ray Client session, and a control character reaches request lines."""
    if _has_control(address):
        raise _refuse("a Ray dashboard address has no spaces, line breaks or control characters")
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
    if isinstance(value, bool):  # the base model's rule, one level down
        raise _refuse("a resource amount is a number, not a boolean")
    return value


def check_resources(resources: dict[str, float]) -> dict[str, float]:
    """``resources`` if each is a custom resource (CPUs and GPUs come from the spec) with a
    positive amount Ray can represent (zero reserves nothing while looking like a limit)."""
    for name, amount in resources.items():
        if not name or name != name.strip() or _has_control(name.replace(" ", "")):
            raise _refuse("resource name {name}: not empty, no surrounding spaces or "
                          "control characters", name=repr(name))
        if name in RAY_OWN_RESOURCES:
            raise _refuse("{name} is one of Ray's own resources, not a custom one: a cell's "
                          "CPUs and GPUs come from the spec's resources (cpus, gpus)", name=name)
        if not MIN_RESOURCE_GRANULARITY <= amount <= MAX_RESOURCE_QUANTITY:  # NaN is not
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


def is_transient_refusal(exc: BaseException) -> bool:
    """Whether Ray refused a submission only because the cluster is still starting."""
    return any(text in str(exc) for text in TRANSIENT_REFUSALS)


class RayJobsOptions(ExecutorOptions):
    """What a user may set on the Ray Jobs executor."""

    address: RayAddress = Field(
        description="the cluster's dashboard (Jobs API), e.g. http://head:8265 "
                    "(default: RAY_ADDRESS)",
        json_schema_extra={"fix": "pass --ray-address URL (the Ray dashboard, e.g. "
                                  "http://head:8265), -E address=URL, or set RAY_ADDRESS"})
    max_parallel: int = Field(8, ge=1, le=MAX_PARALLEL,
                              description="kappa jobs pending or running at once")
    max_pending: int = Field(2, ge=0, le=MAX_PARALLEL,
                             description="kappa jobs that may wait in PENDING for resources "
                                         "the cluster's other work holds")
    entrypoint_resources: CustomResources = Field(
        default_factory=dict, description="custom Ray resources each embedded cell also "
        "reserves, e.g. {\"node_b\": 0.01} to run cells only on nodes started with "
        "--resources '{\"node_b\": 1}'",
        json_schema_extra={"fix": "-E 'entrypoint_resources={\"NAME\": AMOUNT}': custom "
                                  "resources only, each 0.0001 to 1e14 (CPUs and GPUs come "
                                  "from the spec's resources)"})
    autoscaling: bool = Field(False, description="the cluster adds nodes on demand: cells "
                                                 "today's nodes cannot hold are not refused")
    request_timeout_s: float = Field(
        REQUEST_TIMEOUT_S, gt=0, le=MAX_WAIT_S,
        description="seconds one Jobs API request may wait for the dashboard's answer")

    @model_validator(mode="before")
    @classmethod
    def _address_from_environment(cls, data: Any) -> Any:
        # Ray's own convention: RAY_ADDRESS names the cluster when nothing else does.
        if isinstance(data, dict) and data.get("address") is None and os.environ.get("RAY_ADDRESS"):
            return {**data, "address": os.environ["RAY_ADDRESS"]}
        return data


class RayJobsExecutor(Executor):
    """Submits launches as Ray jobs to the cluster whose dashboard is at ``address``."""

    name = "ray_jobs"
    job_id_prefix = JOB_ID_PREFIX
    Options = RayJobsOptions

    def __init__(self, address: str, *, max_parallel: int = 8, max_pending: int = 2,
                 entrypoint_resources: Mapping[str, float] | None = None,
                 autoscaling: bool = False, request_timeout_s: float = REQUEST_TIMEOUT_S,
                 forward_prefixes: tuple[str, ...] = FORWARDED_PREFIXES) -> None:
        self.address = dashboard_url(address)  # a password in it is masked in messages
        self.request_timeout_s = request_timeout_s
        self.max_parallel = max_parallel
        self.max_pending = max_pending
        self.entrypoint_resources = dict(entrypoint_resources or {})
        self.autoscaling = autoscaling
        self.forward_prefixes = forward_prefixes
        self._nodes: tuple[float, list[RayNode]] | None = None
        try:  # the client asks the dashboard for its version as it is made
            self._client = bounded_client(self.address, request_timeout_s)
        except Exception as exc:  # ConnectionError, Timeout, RuntimeError, ... (Ray version)
            why = (f"no answer within {request_timeout_s:g} s" if no_answer(exc) else
                   (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200])
            raise RayAddressError(f"cannot reach the Ray Jobs API at {self.address}", [Problem(
                "executor.address", f"the Ray dashboard did not answer: {why}",
                found=self.address, fix="start the cluster (`ray start --head`) and pass its "
                "dashboard address (--ray-address http://HEAD:8265, -E address=URL or "
                "RAY_ADDRESS); a slow dashboard: -E request_timeout_s=SECONDS")]) from exc

    def _ask(self, what: str, request: Any, *args: Any, **kwargs: Any) -> Any:
        return ask(self.address, self.request_timeout_s, what, request, *args, **kwargs)

    def job_env(self, env: Mapping[str, str]) -> dict[str, str]:
        """Every variable the job gets: forwarded ``MLFLOW_*``, defaults, then ``env``."""
        forwarded = {k: v for k, v in os.environ.items() if k.startswith(self.forward_prefixes)}
        return {**forwarded, **DEFAULT_ENV, **{str(k): str(v) for k, v in env.items()}}

    @staticmethod
    def entrypoint(argv: tuple[str, ...], cwd: Path | None) -> str:
        """``cd <cwd> && exec <argv>``, quoted; ``exec`` so the exit status reaches Ray as
        is (-9, not the shell's 137) and signals reach the command directly."""
        command = f"exec {shlex.join(argv)}"
        return f"cd {shlex.quote(str(cwd))} && {command}" if cwd is not None else command

    def submit(self, argv: tuple[str, ...], env: Mapping[str, str], cwd: Path, log_path: Path,
               resources: JobResources = JobResources()) -> RayJob:
        """Submit ``argv`` as a new Ray job; one the cluster can never hold raises."""
        if (why := self.fits(resources)) is not None:
            raise RayJobsError(f"the Ray cluster at {self.address} can never run this job: {why}")
        submission_id = f"kappa-{log_path.stem}-{secrets.token_hex(4)}"
        shown, secret = split_secrets(self.job_env(env))
        if secret:  # never in the runtime_env, which the dashboard shows
            shown[SECRET_ENV_FILE_VAR] = str(write_secret_env(cwd, secret))
            argv = wrapped(tuple(argv))
        # What the job holds, for capacity(): a verl driver holds nothing itself, but its
        # placement groups will hold the GPUs (and some CPUs) on every node it spans.
        metadata = {METADATA_KEY: "1", "gpus": str(resources.gpus),
                    "cpus": str(resources.cpus * resources.nodes), "log_path": str(log_path)}
        placement = entrypoint_options(resources, self.entrypoint_resources)
        entrypoint = self.entrypoint(tuple(argv), cwd)
        # Bounded: each request by request_timeout_s, refusals of a starting cluster by
        # SUBMIT_RETRY_S, unanswered requests by SUBMIT_UNANSWERED_RETRIES.
        deadline = time.monotonic() + SUBMIT_RETRY_S
        unanswered = 0
        while True:
            try:
                self._ask(f"the submission of job {submission_id}", self._client.submit_job,
                          entrypoint=entrypoint, runtime_env={"env_vars": shown},
                          submission_id=submission_id, metadata=metadata, **placement)
                break
            except RayUnreachableError:
                unanswered += 1
                if unanswered > SUBMIT_UNANSWERED_RETRIES:
                    raise
                time.sleep(SUBMIT_RETRY_INTERVAL_S)
            except Exception as exc:
                if unanswered and "already exists" in str(exc):
                    break  # the unanswered submit reached Ray: that job is this one
                if is_transient_refusal(exc) and time.monotonic() < deadline:
                    time.sleep(SUBMIT_RETRY_INTERVAL_S)
                    continue
                raise RayJobsError(f"Ray refused job {submission_id}: {exc}") from exc
        return self._handle(submission_id, log_path)

    def _handle(self, submission_id: str, log_path: Path | None) -> RayJob:
        return RayJob(self._client, submission_id, log_path, self.address, self.request_timeout_s)

    def nodes(self) -> list[RayNode]:
        """The cluster's alive nodes, re-read every ``NODES_TTL_S`` (empty: unknown)."""
        now = time.monotonic()
        if self._nodes is None or now - self._nodes[0] > NODES_TTL_S:
            try:
                self._nodes = (now, alive_nodes(self.address,
                                                max(1, round(self.request_timeout_s))))
            except Exception:  # an older or restricted dashboard: nothing known
                self._nodes = (now, [])
        return self._nodes[1]

    def capacity(self, gpus: int = 0) -> int:
        """How many more jobs needing ``gpus`` GPUs to submit now: within ``max_parallel``, what
        the cluster holds beyond kappa's active jobs plus ``max_pending`` waiting (none past
        its GPUs unless it autoscales, none while it does not answer)."""
        try:
            active = [job for job in self._ask("list_jobs", self._client.list_jobs)
                      if (job.metadata or {}).get(METADATA_KEY) == "1"
                      and status_name(job.status) in ("PENDING", "RUNNING")]
        except RayUnreachableError as exc:
            LOG.warning("%s; no job is submitted until it answers", exc)
            return 0
        slots = self.max_parallel - len(active)
        if nodes := self.nodes():
            if not self.autoscaling and gpus > sum(n.gpus for n in nodes):
                return 0
            pending = sum(1 for job in active if status_name(job.status) == "PENDING")
            room = free_slots(gpus, nodes, (job.metadata or {} for job in active))
            slots = min(slots, room + max(0, self.max_pending - pending))
        return max(0, slots)

    def fits(self, resources: JobResources) -> str | None:
        """Why the cluster could never run a job asking for ``resources`` (or ``None``)."""
        return None if self.autoscaling else why_not(resources, self.nodes(),
                                                     self.entrypoint_resources)

    def most_gpus(self) -> int | None:
        """Every GPU of the cluster (``None``: it autoscales, or its nodes are unknown)."""
        nodes = [] if self.autoscaling else self.nodes()
        return int(sum(n.gpus for n in nodes)) if nodes else None

    def reattach(self, job_id: str) -> RayJob | None:
        """A handle to an earlier job (any process); ``None`` if Ray does not know it."""
        submission_id = job_id.removeprefix(JOB_ID_PREFIX)
        try:
            info = self._ask(f"get_job_info for job {submission_id}", self._client.get_job_info,
                             submission_id)
        except RuntimeError:  # Ray: "Job ... does not exist"
            return None
        log_path = (info.metadata or {}).get("log_path")
        return self._handle(submission_id, Path(log_path) if log_path else None)
