"""The service's arguments and their spec, through both front doors (issue 26): the command line of
``codesearch serve`` and a Serve config's ``args`` (``serve run`` / ``serve deploy``) become the same
`ServiceArgs`, and `spec_from` makes one `ServiceSpec` of them. Each argument's default and
override, and each environment variable the spec reads, give the same spec through either door
(a differential test: the command line against the Serve args that say the same). Bad values are
refused naming the argument as its door spells it; a bad variable before anything is written.

No Ray here: specs are made in this process, and Serve's typed builder builds an application
without deploying it."""

from __future__ import annotations

import inspect
import json
import logging
import os
import stat
from pathlib import Path

import pytest

from codesearch import cli
from codesearch.cli.serve import service_args
from codesearch.errors import ConfigError, InvalidEnvironmentVariable
from codesearch.serving import app_builder, launcher
from codesearch.serving.bootstrap import ServiceSpec
from codesearch.serving.spec import ServiceArgs, spec_from

#: The config of every case unless it says otherwise: one local git connection (never synced here).
CONFIG = {"connections": {"local": {"type": "git", "url": "file:///nonexistent/repos/*"}}}


class World:
    """A temporary home, data directory and config files; `environ` is the base environment of a
    case (``DATA_DIR`` and ``CONFIG_PATH`` there), with `{tmp}`, `{home}` and `{config}` in values
    and paths filled in (`fill`)."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.home = tmp / "home"
        self.home.mkdir()
        self.config = self.write_config("config.json", CONFIG)
        self.other = self.write_config("other.json", CONFIG)

    def write_config(self, name: str, doc: dict) -> Path:
        path = self.tmp / name
        path.write_text(json.dumps(doc))
        return path

    def fill(self, value):
        if isinstance(value, str):
            return value.format(tmp=self.tmp, home=self.home, config=self.config, other=self.other)
        if isinstance(value, list):
            return [self.fill(v) for v in value]
        if isinstance(value, dict):
            return {k: self.fill(v) for k, v in value.items()}
        return value

    def environ(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        return self.fill({"DATA_DIR": "{tmp}/base", "CONFIG_PATH": "{config}", **(extra or {})})


@pytest.fixture
def world(tmp_path, monkeypatch) -> World:
    w = World(tmp_path)
    monkeypatch.setenv("HOME", str(w.home))  # `~` in a path (expanduser reads the process's HOME)
    return w


def via_cli(argv: list[str], environ: dict[str, str], said: list[str] | None = None) -> ServiceSpec:
    """The spec `codesearch serve ARGV` serves in `environ` (what `launcher.run` makes)."""
    ns = cli.build_parser().parse_args(["serve", *argv])
    say = (said if said is not None else []).append
    return launcher.service_spec(service_args(ns), host=ns.host, port=ns.port, environ=environ, say=say)


def via_serve(args: dict, environ: dict[str, str]) -> ServiceSpec:
    """The spec a Serve config's `args` give in `environ` (what `app_builder.app` builds)."""
    return spec_from(ServiceArgs.of(args), environ)


# --- the same spec through both doors -----------------------------------------------------------

DEFAULTS = {
    "config_path": "{config}", "data_dir": "{tmp}/base/.codesearch", "prefix": "codesearch", "searchers": 2,
    "searcher_copies": 1, "replicas": 1, "max_ongoing_requests": None, "public_url": "http://localhost:3000",
    "anonymous_access": False, "database_url": None, "syncers": None, "indexers": None, "runtime_resources": None,
    "searcher_resources": None, "searcher_cpus": 0.0, "searcher_data_dir": None, "drain_timeout_s": 30.0,
    "max_matches": 10000,
}

#: (case, command line, Serve args, environment over the base, what the spec holds besides `DEFAULTS`)
BOTH_DOORS = [
    ("defaults", [], {}, {}, {}),
    ("searchers", ["--searchers", "3"], {"searchers": 3}, {}, {"searchers": 3}),
    ("searchers as `serve run k=v` gives them", ["--searchers", "3"], {"searchers": "3"}, {}, {"searchers": 3}),
    ("searcher copies", ["--searcher-copies", "2"], {"searcher_copies": 2}, {}, {"searcher_copies": 2}),
    ("replicas", ["--replicas", "4"], {"replicas": 4}, {}, {"replicas": 4}),
    ("config", ["--config", "{other}"], {"config": "{other}"}, {}, {"config_path": "{other}"}),
    ("config under ~", ["--config", "~/../other.json"], {"config": "~/../other.json"}, {},
     {"config_path": "{other}"}),
    ("data dir", ["--data-dir", "{tmp}/dd"], {"data_dir": "{tmp}/dd"}, {}, {"data_dir": "{tmp}/dd"}),
    ("data dir under ~", ["--data-dir", "~/dd"], {"data_dir": "~/dd"}, {}, {"data_dir": "{home}/dd"}),
    ("data dir: DATA_CACHE_DIR", [], {}, {"DATA_CACHE_DIR": "{tmp}/cache"}, {"data_dir": "{tmp}/cache"}),
    ("where it listens is the public URL", ["--port", "8080"], {"public_url": "http://localhost:8080"}, {},
     {"public_url": "http://localhost:8080"}),
    ("a named host too", ["--host", "10.0.0.5", "--port", "8080"], {"public_url": "http://10.0.0.5:8080"}, {},
     {"public_url": "http://10.0.0.5:8080"}),
    ("AUTH_URL over where it listens", ["--port", "8080"], {}, {"AUTH_URL": "https://code.example.com"},
     {"public_url": "https://code.example.com"}),
    ("DATABASE_URL", [], {}, {"DATABASE_URL": " postgresql://cs@db/cs "}, {"database_url": "postgresql://cs@db/cs"}),
    ("FORCE_ENABLE_ANONYMOUS_ACCESS", [], {}, {"FORCE_ENABLE_ANONYMOUS_ACCESS": "TRUE"}, {"anonymous_access": True}),
    ("CODESEARCH_DRAIN_TIMEOUT_S", [], {}, {"CODESEARCH_DRAIN_TIMEOUT_S": "5"}, {"drain_timeout_s": 5.0}),
    ("DEFAULT_MAX_MATCH_COUNT", [], {}, {"DEFAULT_MAX_MATCH_COUNT": "50"}, {"max_matches": 50}),
]


@pytest.mark.parametrize("argv,args,extra,expected", [c[1:] for c in BOTH_DOORS], ids=[c[0] for c in BOTH_DOORS])
def test_both_doors_make_the_same_spec(world, argv, args, extra, expected):
    environ = world.environ(extra)
    by_cli = via_cli(world.fill(argv), environ)
    by_serve = via_serve(world.fill(args), environ)
    assert by_cli == by_serve
    want = world.fill({**DEFAULTS, **expected})
    assert {name: getattr(by_cli, name) for name in want} == want


def _override(value) -> dict:
    kind = "boolean" if isinstance(value, bool) else "number" if isinstance(value, int) else "string"
    return {"type": kind, "value": value}


#: (case, config beside its connections, environment over the base, what the spec holds besides `DEFAULTS`)
CONFIG_CASES = [
    ("override: AUTH_URL", {"environmentOverrides": {"AUTH_URL": _override("https://o.example")}}, {},
     {"public_url": "https://o.example"}),
    ("override: DATABASE_URL", {"environmentOverrides": {"DATABASE_URL": _override("postgresql://o@db/cs")}}, {},
     {"database_url": "postgresql://o@db/cs"}),
    ("override: DEFAULT_MAX_MATCH_COUNT", {"environmentOverrides": {"DEFAULT_MAX_MATCH_COUNT": _override(25)}}, {},
     {"max_matches": 25}),
    ("override: CODESEARCH_DRAIN_TIMEOUT_S", {"environmentOverrides": {"CODESEARCH_DRAIN_TIMEOUT_S": _override(7)}},
     {}, {"drain_timeout_s": 7.0}),
    ("override over the variable", {"environmentOverrides": {"AUTH_URL": _override("https://o.example")}},
     {"AUTH_URL": "https://env.example"}, {"public_url": "https://o.example"}),
    ("override: FORCE_ENABLE_ANONYMOUS_ACCESS",
     {"environmentOverrides": {"FORCE_ENABLE_ANONYMOUS_ACCESS": _override(True)}}, {}, {"anonymous_access": True}),
    ("enablePublicAccess", {"settings": {"enablePublicAccess": True}}, {}, {"anonymous_access": True}),
    # the deprecated setting stands for the variable only when that is unset (`apply_environment_overrides`)
    ("enablePublicAccess, the variable says false", {"settings": {"enablePublicAccess": True}},
     {"FORCE_ENABLE_ANONYMOUS_ACCESS": "false"}, {"anonymous_access": False}),
]


@pytest.mark.parametrize("doc,extra,expected", [c[1:] for c in CONFIG_CASES], ids=[c[0] for c in CONFIG_CASES])
def test_the_configs_overrides_count_the_same_through_both_doors(world, doc, extra, expected):
    config = world.write_config("overridden.json", {**CONFIG, **doc})
    environ = world.environ({**extra, "CONFIG_PATH": str(config)})
    before = dict(environ), dict(os.environ)
    by_cli = via_cli([], environ)
    by_serve = via_serve({}, environ)
    assert by_cli == by_serve
    want = world.fill({**DEFAULTS, "config_path": str(config), **expected})
    assert {name: getattr(by_cli, name) for name in want} == want
    # handed to the replicas and runtime actors; neither the given environment nor this process's changed
    assert set(doc.get("environmentOverrides", {})) <= set(by_cli.env.names())
    assert (dict(environ), dict(os.environ)) == before


#: (case, Serve args, environment over the base, what the spec holds besides `DEFAULTS`): the
#: arguments `codesearch serve` has no option for (it runs with their defaults)
SERVE_ONLY = [
    ("prefix", {"prefix": "cs-b"}, {}, {"prefix": "cs-b"}),
    ("max_ongoing_requests", {"max_ongoing_requests": 64}, {}, {"max_ongoing_requests": 64}),
    ("anonymous_access", {"anonymous_access": True}, {}, {"anonymous_access": True}),
    ("anonymous_access as text", {"anonymous_access": "yes"}, {}, {"anonymous_access": True}),
    ("anonymous_access over the variable", {"anonymous_access": "false"}, {"FORCE_ENABLE_ANONYMOUS_ACCESS": "true"},
     {"anonymous_access": False}),
    ("database_url over the variable", {"database_url": "postgresql://a@db/cs"},
     {"DATABASE_URL": "postgresql://env@db/cs"}, {"database_url": "postgresql://a@db/cs"}),
    ("public_url over AUTH_URL", {"public_url": "https://p.example"}, {"AUTH_URL": "https://env.example"},
     {"public_url": "https://p.example"}),
    ("syncers and indexers", {"syncers": 1, "indexers": 0}, {}, {"syncers": 1, "indexers": 0}),
    ("runtime_resources", {"runtime_resources": {"codesearch_data": 0.01}}, {},
     {"runtime_resources": {"codesearch_data": 0.01}}),
    ("searcher_resources", {"searcher_resources": {"codesearch_searcher": 1}}, {},
     {"searcher_resources": {"codesearch_searcher": 1.0}}),
    ("searcher_cpus", {"searcher_cpus": 1}, {}, {"searcher_cpus": 1.0}),
    ("searcher_data_dir", {"searcher_data_dir": "/var/cs"}, {}, {"searcher_data_dir": "/var/cs"}),
    ("empty values are not given", {"config": "", "data_dir": None, "prefix": "", "public_url": None}, {}, {}),
]


@pytest.mark.parametrize("args,extra,expected", [c[1:] for c in SERVE_ONLY], ids=[c[0] for c in SERVE_ONLY])
def test_serve_only_arguments(world, args, extra, expected):
    spec = via_serve(args, world.environ(extra))
    want = world.fill({**DEFAULTS, **expected})
    assert {name: getattr(spec, name) for name in want} == want
    if "database_url" in args:  # the runtime actors open the same database
        assert "DATABASE_URL" in spec.env.names()


def test_the_demo_is_chosen_alike_and_said(world):
    environ = world.environ()
    del environ["CONFIG_PATH"]
    said: list[str] = []
    by_cli = via_cli([], environ, said)
    assert by_cli == via_serve({}, environ)
    assert by_cli.config_path == str(world.tmp / "base" / ".codesearch" / "demo-config.json")
    assert said == [f"no config given: serving the offline demo ({by_cli.config_path})"]


@pytest.mark.parametrize("door", ["cli", "serve"])
def test_the_data_directory_is_made_private(world, door):
    data = world.tmp / "shared"
    data.mkdir(mode=0o755)
    os.chmod(data, 0o755)
    spec = via_cli(["--data-dir", str(data)], world.environ()) if door == "cli" else via_serve(
        {"data_dir": str(data)}, world.environ())
    assert spec.data_dir == str(data) and stat.S_IMODE(data.stat().st_mode) == 0o700


def test_a_retired_argument_is_ignored_with_a_warning(world, caplog):
    with caplog.at_level(logging.WARNING, logger="codesearch.serving.spec"):
        spec = via_serve({"first_sync_timeout_s": 60}, world.environ())
    assert spec == via_serve({}, world.environ())
    assert "first_sync_timeout_s is ignored" in caplog.text


# --- bad values ---------------------------------------------------------------------------------

#: (Serve args, what the one problem says)
SERVE_BAD = [
    ({"serachers": 3}, "serachers: unknown argument (known: anonymous_access, config, data_dir, database_url,"),
    ({"searchers": 0}, "searchers: Input should be greater than or equal to 1 (given: 0)"),
    ({"searchers": "many"}, "searchers: Input should be a valid integer, unable to parse string as an integer "
                            "(given: 'many')"),
    ({"searcher_copies": 1.5}, "searcher_copies: Input should be a valid integer, got a number with a fractional part"),
    ({"replicas": -1}, "replicas: Input should be greater than or equal to 1 (given: -1)"),
    ({"max_ongoing_requests": 0}, "max_ongoing_requests: Input should be greater than or equal to 1"),
    ({"anonymous_access": "maybe"}, "anonymous_access: Input should be a valid boolean"),
    ({"prefix": "my app"}, "prefix: String should match pattern"),
    ({"syncers": -1}, "syncers: Input should be greater than or equal to 0"),
    ({"runtime_resources": {"codesearch_data": -1}},
     "runtime_resources.codesearch_data: Input should be greater than or equal to 0"),
    ({"searcher_resources": "codesearch_searcher"}, "searcher_resources: Input should be a valid dictionary"),
    ({"searcher_cpus": "lots"}, "searcher_cpus: Input should be a valid number"),
    ({"config": 3}, "config: Input should be a valid string (given: 3)"),
]


@pytest.mark.parametrize("args,says", SERVE_BAD, ids=[next(iter(a)) for a, _ in SERVE_BAD])
def test_a_bad_serve_argument_is_named(args, says):
    with pytest.raises(ConfigError) as e:
        ServiceArgs.of(args)
    assert str(e.value).startswith("serve config args: 1 problem:\n  ") and says in str(e.value), str(e.value)


def test_a_bad_database_url_is_named_but_not_shown():
    with pytest.raises(ConfigError) as e:
        ServiceArgs.of({"database_url": {"postgresql": "cs:s3cr3t@db"}})
    assert e.value.problems == ["database_url: Input should be a valid string"]
    assert "s3cr3t" not in repr(ServiceArgs.of({"database_url": "postgresql://cs:s3cr3t@db/cs"}))


def test_every_bad_serve_argument_is_named_at_once():
    with pytest.raises(ConfigError) as e:
        ServiceArgs.of({"searchers": 0, "replicas": "x", "serachers": 1})
    assert [p.split(":")[0] for p in e.value.problems] == ["searchers", "replicas", "serachers"]


#: (command line, what the one problem says)
CLI_BAD = [
    (["--searchers", "0"], "--searchers: Input should be greater than or equal to 1 (given: 0)"),
    (["--searcher-copies", "0"], "--searcher-copies: Input should be greater than or equal to 1 (given: 0)"),
    (["--replicas", "-2"], "--replicas: Input should be greater than or equal to 1 (given: -2)"),
]


@pytest.mark.parametrize("argv,says", CLI_BAD, ids=[a[0] for a, _ in CLI_BAD])
def test_a_bad_option_is_named_as_the_command_line_spells_it(argv, says):
    with pytest.raises(ConfigError) as e:
        service_args(cli.build_parser().parse_args(["serve", *argv]))
    assert str(e.value) == f"codesearch serve: 1 problem:\n  {says}"


def test_the_command_refuses_a_bad_option_before_anything_starts(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DATA_DIR", str(tmp_path))
    assert cli.main(["serve", "--searchers", "0"]) == 2
    err = capsys.readouterr().err
    assert err == "codesearch: codesearch serve: 1 problem:\n  --searchers: Input should be greater than or equal to 1 " \
                  "(given: 0)\n"
    assert list(tmp_path.iterdir()) == []  # no data directory, no demo


#: (case, environment over the base, config beside its connections, the variable named)
BAD_ENVIRONMENT = [
    ("drain timeout", {"CODESEARCH_DRAIN_TIMEOUT_S": "abc"}, {}, "CODESEARCH_DRAIN_TIMEOUT_S='abc'"),
    ("negative drain timeout", {"CODESEARCH_DRAIN_TIMEOUT_S": "-1"}, {}, "CODESEARCH_DRAIN_TIMEOUT_S='-1'"),
    ("max match count", {"DEFAULT_MAX_MATCH_COUNT": "0"}, {}, "DEFAULT_MAX_MATCH_COUNT='0'"),
    ("log level", {"SOURCEBOT_LOG_LEVEL": "loud"}, {}, "SOURCEBOT_LOG_LEVEL='loud'"),
    ("AUTH_URL", {"AUTH_URL": "code.example.com"}, {}, "AUTH_URL='code.example.com'"),
    ("an override", {}, {"environmentOverrides": {"CODESEARCH_DRAIN_TIMEOUT_S": _override("soon")}},
     "CODESEARCH_DRAIN_TIMEOUT_S='soon'"),
]


@pytest.mark.parametrize("extra,doc,says", [c[1:] for c in BAD_ENVIRONMENT], ids=[c[0] for c in BAD_ENVIRONMENT])
@pytest.mark.parametrize("door", ["cli", "serve"])
def test_a_bad_variable_is_refused_through_both_doors(world, door, extra, doc, says):
    environ = world.environ({**extra, "CONFIG_PATH": str(world.write_config("bad.json", {**CONFIG, **doc}))})
    with pytest.raises(InvalidEnvironmentVariable) as e:
        via_cli([], environ) if door == "cli" else via_serve({}, environ)
    assert says in str(e.value)
    if not doc:  # refused before anything is written
        assert not (world.tmp / "base").exists()


# --- Serve's typed application builder ----------------------------------------------------------

def test_serve_validates_the_configs_args_into_the_builders_model(world, monkeypatch):
    """Serve (the installed version's own builder call) sees the builder's parameter typed as
    `ServiceArgs` and validates the config's args into it: a bad one is refused with our message,
    good ones build the application (nothing deployed)."""
    from ray.serve import Application
    from ray.serve._private.api import call_user_app_builder_with_args_if_necessary as serve_calls

    assert inspect.signature(app_builder.app).parameters["args"].annotation is ServiceArgs
    for name, value in world.environ().items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError, match="serachers: unknown argument"):
        serve_calls(app_builder.app, {"serachers": 3})
    assert isinstance(serve_calls(app_builder.app, {"searchers": "1", "prefix": "cs-typed"}), Application)
