"""The service's arguments, typed once, and the one function that turns them into a `ServiceSpec`.

Two front doors start the service: ``codesearch serve`` (its command line, `codesearch.cli.serve`)
and ``serve run`` / ``serve deploy`` (the Serve config's ``args``, `app_builder.app`). Both hand a
`ServiceArgs` to `spec_from`, which decides everything else from the environment of the process
that builds the application, so the two cannot drift apart: the same arguments and environment
give the same `ServiceSpec` through either door (tests/service/test_service_spec.py checks it).

`ServiceArgs` is a pydantic model, the way Ray Serve's typed application builders take their
arguments: Serve validates the config's ``args`` into the model the builder's parameter is
annotated with (`app_builder.app`). Its fields, all optional:

==========================  =====================================================================
``config``                  the config file (a path on the nodes), default ``CONFIG_PATH`` or the
                            offline demo of `codesearch.serving.demo`
``data_dir``                the data directory, default ``DATA_CACHE_DIR``, ``$DATA_DIR/.codesearch``
                            or ``~/.codesearch`` (`codesearch.environment.data_dir`); made private (0700)
``searchers``               shard searchers: partitions of the index (2)
``searcher_copies``         copies of every partition, each search going to one copy (1)
``replicas``                Serve replicas of the API (1; a Serve config's ``num_replicas`` wins)
``max_ongoing_requests``    per API replica (1000; a Serve config's value wins)
``public_url``              the URL links point to, default ``AUTH_URL``, else where the service
                            listens (``codesearch serve``: ``http://HOST:PORT``; a Serve config:
                            http://localhost:3000)
``anonymous_access``        true/false; default ``FORCE_ENABLE_ANONYMOUS_ACCESS`` (which the config's
                            deprecated ``enablePublicAccess: true`` sets when it is unset)
``database_url``            the state database, default ``DATABASE_URL`` or SQLite in the data dir
``prefix``                  actor name prefix (``codesearch``; two applications on one cluster need
                            two prefixes)
``syncers``, ``indexers``   worker counts (default from the config's concurrency settings)
``runtime_resources``       custom resources for the runtime replica, the scheduler and workers
``searcher_resources``      custom resources for the searchers, e.g. ``{"codesearch_searcher": 1}``
``searcher_cpus``           CPUs each searcher reserves (0)
``searcher_data_dir``       a directory on the searchers' nodes where they keep copies of their
                            shards, fetched through Ray from the node that builds the index (default:
                            none, the searchers read the data directory)
==========================  =====================================================================

An empty value (``null``, ``""``) means "not given". An unknown argument or a bad value is refused
with a `ConfigError` naming it as its front door spells it (``serachers: unknown argument``,
``--searchers: Input should be greater than or equal to 1``): a typo would otherwise be ignored.

What `spec_from` reads from the environment it is given, after the config's
``environmentOverrides`` are laid over a copy of it (the environment itself is never changed:
`codesearch serve` applies the result to its own process, `launcher.run` says why):
``CONFIG_PATH``, the data directory's variables, ``DATABASE_URL``, ``AUTH_URL``,
``FORCE_ENABLE_ANONYMOUS_ACCESS``, ``CODESEARCH_DRAIN_TIMEOUT_S`` (how long running requests may
take at a stop), ``DEFAULT_MAX_MATCH_COUNT`` (the cap on a search's ``matches``), and the variables
forwarded to the replicas and runtime actors (`bootstrap.forwarded_environment`). A bad value of
any variable `codesearch.environment` checks is refused here, before anything is written or
started.

What stays with each front door, because only it has it: ``codesearch serve`` listens on
``--host``/``--port`` (its default public URL: `launcher.listening_url`), starts or joins Ray,
prints what happens and waits for the first sync; a Serve config's ``http_options`` say where
Serve listens, and its ``deployments`` entry overrides the API's replicas.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    ValidationError,
    ValidationInfo,
    model_validator,
)

from codesearch import defaults, environment
from codesearch.errors import ConfigError, InvalidEnvironmentVariable
from codesearch.serving.bootstrap import DEFAULT_PREFIX, ServiceSpec

log = logging.getLogger(__name__)

__all__ = ["DRAIN_TIMEOUT_ENV", "SERVE_ARGS", "ServiceArgs", "drain_timeout_s", "spec_from"]

#: How a Serve config's ``args`` are named in errors (the source of their `ConfigError`).
SERVE_ARGS = "serve config args"
#: Arguments earlier versions took that mean nothing now (a warning, not an error).
RETIRED = {"first_sync_timeout_s": "HTTP comes up at once; the home page shows the first sync"}

DRAIN_TIMEOUT_ENV = "CODESEARCH_DRAIN_TIMEOUT_S"

#: A custom resource amount, as Ray takes it (0 or more).
Resource = Annotated[float, Field(ge=0)]


class ServiceArgs(BaseModel):
    """What a front door says about the service it starts (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    config: str | None = None
    data_dir: str | None = None
    searchers: int = Field(default=defaults.SEARCHERS, ge=1)
    searcher_copies: int = Field(default=defaults.SEARCHER_COPIES, ge=1)
    replicas: int = Field(default=defaults.REPLICAS, ge=1)
    max_ongoing_requests: int | None = Field(default=None, ge=1)
    public_url: str | None = None
    anonymous_access: bool | None = None
    #: may hold a password: never in the repr
    database_url: str | None = Field(default=None, repr=False)
    prefix: str = Field(default=DEFAULT_PREFIX, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    syncers: int | None = Field(default=None, ge=0)
    indexers: int | None = Field(default=None, ge=0)
    runtime_resources: dict[str, Resource] | None = None
    searcher_resources: dict[str, Resource] | None = None
    searcher_cpus: float = Field(default=0.0, ge=0)
    searcher_data_dir: str | None = None

    @classmethod
    def of(cls, values: ServiceArgs | Mapping[str, Any] | None) -> ServiceArgs:
        """`values` as `ServiceArgs`: a Serve config's ``args`` (a mapping, or None for none) are
        validated, errors named as that config names them; a `ServiceArgs` is taken as it is."""
        if isinstance(values, ServiceArgs):
            return values
        return cls.model_validate(dict(values or {}))

    @model_validator(mode="wrap")
    @classmethod
    def _refuse_clearly(cls, data: Any, handler: ModelWrapValidatorHandler[Self], info: ValidationInfo) -> Self:
        """Validate `data`, turning pydantic's errors into one `ConfigError` that names each bad
        argument as its front door spells it (validation context ``source`` and ``names``: field →
        name; the Serve config's own by default). `ConfigError` is no `ValueError`, so pydantic lets it
        through as it is, also when Serve validates the config's ``args`` itself."""
        context: Mapping[str, Any] = info.context or {}
        source = str(context.get("source") or SERVE_ARGS)
        names: Mapping[str, str] = context.get("names") or {}
        if isinstance(data, Mapping):
            data = _given(data)
        try:
            return handler(data)
        except ValidationError as e:
            problems = []
            for error in e.errors():
                field = str(error["loc"][0]) if error["loc"] else ""
                where = ".".join([names.get(field, field), *(str(part) for part in error["loc"][1:])])
                if error["type"] == "extra_forbidden":
                    known = ", ".join(names.get(f, f) for f in sorted(cls.model_fields))
                    problems.append(f"{where}: unknown argument (known: {known})")
                elif field in cls.model_fields and cls.model_fields[field].repr is False:  # a password, maybe
                    problems.append(f"{where}: {error['msg']}")
                else:
                    problems.append(f"{where}: {error['msg']} (given: {error['input']!r})")
            raise ConfigError(source, problems) from None


def _given(data: Mapping[Any, Any]) -> dict[Any, Any]:
    """`data` without the arguments that are not given (None, an empty string) and without the
    retired ones (each a warning)."""
    given = {}
    for key, value in data.items():
        if key in RETIRED:
            log.warning("%s: %s is ignored: %s", SERVE_ARGS, key, RETIRED[key])
        elif value is not None and value != "":
            given[key] = value
    return given


def _path(path: str) -> str:
    return os.path.abspath(os.path.expanduser(path))


def drain_timeout_s(environ: Mapping[str, str] | None = None) -> float:
    """``CODESEARCH_DRAIN_TIMEOUT_S``: seconds the requests running at a stop may take (default
    `deployment.DRAIN_TIMEOUT_S`); anything but a number ≥ 0 is refused before anything starts."""
    from codesearch.serving.deployment import DRAIN_TIMEOUT_S

    return environment.seconds(environ, DRAIN_TIMEOUT_ENV, DRAIN_TIMEOUT_S, zero_allowed=True)


def _checked(environ: Mapping[str, str]) -> tuple[float, int]:
    """Refuse a bad value of a variable the service reads (`codesearch.environment.check`); the
    drain bound (``CODESEARCH_DRAIN_TIMEOUT_S``) and the cap on ``matches``
    (``DEFAULT_MAX_MATCH_COUNT``) of `environ`."""
    from codesearch.app.search import MAX_MATCH_COUNT_ENV, max_match_count

    environment.check(environ)
    drain_s = drain_timeout_s(environ)
    try:
        max_matches = max_match_count(environ)
    except ValueError:
        raise InvalidEnvironmentVariable(
            MAX_MATCH_COUNT_ENV, environ.get(MAX_MATCH_COUNT_ENV, ""), "expected a positive integer"
        ) from None
    return drain_s, max_matches


def spec_from(
    args: ServiceArgs,
    environ: Mapping[str, str],
    *,
    default_public_url: str = defaults.PUBLIC_URL,
    say: Callable[[str], None] = log.warning,
) -> ServiceSpec:
    """The `ServiceSpec` of `args` in `environ` (never changed; see the module docstring), with
    the data directory made private and the config loaded (its problems raise `ConfigError`).
    `default_public_url`: where the service listens, the public URL when neither `args` nor
    ``AUTH_URL`` name one. `say` tells the operator what was chosen for them (the demo config) and
    what the config warns of."""
    from codesearch.config import apply_environment_overrides, load_config
    from codesearch.sealed_env import SealedEnv
    from codesearch.service.auth import anonymous_access_enabled
    from codesearch.serving.bootstrap import forwarded_environment
    from codesearch.serving.demo import demo_config
    from codesearch.store.files import private_dir

    drain_s, max_matches = _checked(environ)  # before anything is written: a bad variable is refused as it is
    data_dir = private_dir(_path(args.data_dir) if args.data_dir else environment.data_dir(environ))
    config_path = args.config or environ.get("CONFIG_PATH")
    if not config_path:
        config_path = demo_config(data_dir)
        say(f"no config given: serving the offline demo ({config_path})")
    config_path = _path(config_path)
    config = load_config(config_path, environ=environ)
    for w in config.warnings:
        say(f"config warning: {w}")
    resolved = dict(environ)
    overridden = apply_environment_overrides(config, resolved)
    database_url = args.database_url or environment.database_url(resolved)
    if database_url:
        resolved["DATABASE_URL"] = database_url  # the runtime actors open the same database
    if overridden:  # the overrides count as if they had been set (and are checked as such)
        drain_s, max_matches = _checked(resolved)
    # `enablePublicAccess: true` is in `resolved` already, as FORCE_ENABLE_ANONYMOUS_ACCESS=true when that was unset
    anonymous = anonymous_access_enabled(resolved) if args.anonymous_access is None else args.anonymous_access
    return ServiceSpec(
        config_path=config_path,
        data_dir=data_dir,
        prefix=args.prefix,
        searchers=args.searchers,
        searcher_copies=args.searcher_copies,
        replicas=args.replicas,
        max_ongoing_requests=args.max_ongoing_requests,
        public_url=args.public_url or resolved.get("AUTH_URL") or default_public_url,
        anonymous_access=anonymous,
        database_url=database_url,
        syncers=args.syncers,
        indexers=args.indexers,
        runtime_resources=dict(args.runtime_resources) if args.runtime_resources else None,
        searcher_resources=dict(args.searcher_resources) if args.searcher_resources else None,
        searcher_cpus=args.searcher_cpus,
        searcher_data_dir=args.searcher_data_dir,
        env=SealedEnv.of(forwarded_environment(resolved, overridden)),
        drain_timeout_s=drain_s,
        max_matches=max_matches,
    )
