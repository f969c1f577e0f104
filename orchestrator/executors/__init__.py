"""Executors: where a launch runs (local processes, Ray, SLURM, plug-ins): :data:`EXECUTORS`,
the entry points of group ``kappa.executors`` (read on first use). A job id starts with its
executor's ``job_id_prefix``: :func:`executor_for_job` finds the one that reattaches it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orchestrator.entry_points import PluginRegistry
from orchestrator.errors import Problem, UserInputError
from orchestrator.executors.base import Executor, ExecutorOptions, JobHandle, JobResources

EXECUTORS = PluginRegistry("kappa.executors", "executor")
# How a ``kappa`` process gets executor options from the one that started it (JSON):
# never on its command line, since an option may hold a password (a cluster URL).
OPTIONS_ENV = "KAPPA_EXECUTOR_OPTIONS"


def executor_class(name: str) -> type[Executor]:
    """The executor class registered under ``name`` (checked to be a proper one)."""
    cls = EXECUTORS.load(name)
    source = EXECUTORS.source(name)
    if not (isinstance(cls, type) and issubclass(cls, Executor)):
        raise EXECUTORS.broken(source, "is not an Executor subclass")
    if getattr(cls, "name", None) != name:
        raise EXECUTORS.broken(source, f"declares name {getattr(cls, 'name', None)!r}, "
                                       f"not {name!r}")
    if not cls.job_id_prefix:
        raise EXECUTORS.broken(source, "declares no job_id_prefix")
    return cls


def validate_options(name: str, options: Mapping[str, Any]) -> ExecutorOptions:
    """``options`` checked against executor ``name``'s ``Options`` (every problem at once;
    ``None``, an unset CLI shortcut, means the option's default)."""
    from pydantic import ValidationError

    model = executor_class(name).Options
    try:
        return model.model_validate({k: v for k, v in options.items() if v is not None})
    except ValidationError as exc:
        raise _bad_options(name, model, exc.errors()) from None


def _bad_options(name: str, model: type[ExecutorOptions], errors: Any) -> UserInputError:
    return UserInputError(f"bad options for executor {name}",
                          [_problem(name, model, error) for error in errors])


def _problem(name: str, model: type[ExecutorOptions], error: Any) -> Problem:
    loc = ".".join(str(part) for part in error.get("loc", ()))
    option = str(error["loc"][0]) if error.get("loc") else ""
    field = model.model_fields.get(option)
    extra = getattr(field, "json_schema_extra", None)
    fix = extra.get("fix") if isinstance(extra, dict) else None
    if error["type"] == "extra_forbidden":
        return Problem(f"executor.{loc}", f"the {name} executor has no option {option!r}",
                       allowed=", ".join(model.model_fields) or "(none)",
                       fix="`kappa executors` lists each executor's options")
    if fix is None and field is not None:
        fix = f"-E {option}=VALUE: {field.description or 'see `kappa executors`'}"
    found = None if error["type"] == "missing" else repr(error.get("input"))
    allowed = _range(field) if field is not None and "than" in error["type"] else None
    return Problem(f"executor.{loc}" if loc else "executor", str(error["msg"]), found=found,
                   allowed=allowed, fix=str(fix) if fix is not None else None)


def _range(field: Any) -> str | None:
    """An option's bounds (its ``ge``/``gt``/``le``/``lt``) as ``1 .. 1,000,000``."""
    def num(value: float) -> str:
        return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"

    bounds = {type(m).__name__.lower(): num(getattr(m, type(m).__name__.lower()))
              for m in field.metadata if type(m).__name__ in ("Ge", "Gt", "Le", "Lt")}
    low = bounds.get("ge") or (f"> {bounds['gt']}" if "gt" in bounds else None)
    high = bounds.get("le") or (f"< {bounds['lt']}" if "lt" in bounds else None)
    if low is not None and high is not None:
        return f"{low} .. {high}"
    if high is not None:
        return f"<= {high}" if "le" in bounds else high
    return f">= {low}" if "ge" in bounds else low


def get_executor(name: str = "local", **options: Any) -> Executor:
    """The executor registered under ``name``, made with ``options`` (validated)."""
    return make_executor(name, validate_options(name, options))


def make_executor(name: str, valid: ExecutorOptions) -> Executor:
    """The executor registered under ``name``, made with options already validated."""
    cls = executor_class(name)
    owners = _prefix_owners().get(cls.job_id_prefix, [name])
    if len(owners) > 1:  # its jobs could not be told from another executor's
        raise _prefix_clash(cls.job_id_prefix, owners)
    return cls.from_options(valid)


def with_option(name: str, valid: ExecutorOptions, key: str, value: Any) -> ExecutorOptions:
    """``valid`` with option ``key`` set to ``value``, that value validated alone."""
    from typing import Annotated

    from pydantic import TypeAdapter, ValidationError

    model = type(valid)
    info = model.model_fields[key]
    adapter: TypeAdapter[Any] = TypeAdapter(Annotated[info.annotation, *info.metadata])  # type: ignore[arg-type]
    try:
        checked = adapter.validate_python(value, strict=isinstance(value, bool))
    except ValidationError as exc:
        raise _bad_options(name, model, [{**error, "loc": (key, *error.get("loc", ()))}
                                         for error in exc.errors()]) from None
    return valid.model_copy(update={key: checked})


def executor_options(name: str, **options: Any) -> dict[str, Any]:
    """The non-``None`` ``options`` executor ``name`` takes (``--max-parallel`` is offered to
    whichever executor has it)."""
    fields = executor_class(name).Options.model_fields
    return {k: v for k, v in options.items() if k in fields and v is not None}


def _prefix_owners() -> dict[str, list[str]]:
    """Each job id prefix -> the executors declaring it (broken plug-ins left out)."""
    owners: dict[str, list[str]] = {}
    for name in EXECUTORS:
        try:
            owners.setdefault(executor_class(name).job_id_prefix, []).append(name)
        except UserInputError:
            continue
    return owners


def job_id_prefixes() -> dict[str, str]:
    """Each executor's job id prefix -> its name (a prefix two declare is neither's)."""
    return {prefix: names[0] for prefix, names in _prefix_owners().items() if len(names) == 1}


def _prefix_clash(prefix: str, names: list[str]) -> UserInputError:
    return UserInputError(f"executors {', '.join(names)} declare one job id prefix", [Problem(
        "executor", "two executors declare the same job_id_prefix, so a job of one could "
        "be reattached or cancelled by the other", found=f"{prefix!r}: {', '.join(names)}",
        fix="uninstall the plug-in that copies another executor's prefix (`kappa executors` "
            "shows each one's)")])


def executor_name_for_job(job_id: str) -> str:
    """The executor that handed out ``job_id``, by prefix (never a guess: else refused)."""
    owners = _prefix_owners()
    # The longest matching prefix: a plug-in's ``ray-jobs-x:`` is not ``ray-jobs:``.
    for prefix in sorted(owners, key=len, reverse=True):
        if job_id.startswith(prefix):
            if len(owners[prefix]) > 1:
                raise _prefix_clash(prefix, owners[prefix])
            return owners[prefix][0]
    raise UserInputError(f"no executor knows job '{job_id}'", [Problem(
        "job_id", "the job id has no known executor prefix", found=job_id,
        allowed=", ".join(sorted(owners)),
        fix="install the executor plug-in that ran it (`kappa executors` lists those "
            "installed), or cancel the job by hand")])


def executor_for_job(job_id: str, **options: Any) -> Executor:
    """The executor that can reattach (and cancel) ``job_id``, made with those of
    ``options`` it takes (:func:`executor_options`)."""
    name = executor_name_for_job(job_id)
    return get_executor(name, **executor_options(name, **options))


__all__ = ["EXECUTORS", "OPTIONS_ENV", "Executor", "ExecutorOptions", "JobHandle", "JobResources",
           "executor_class", "executor_for_job", "executor_name_for_job", "executor_options",
           "get_executor", "job_id_prefixes", "make_executor", "validate_options", "with_option"]
