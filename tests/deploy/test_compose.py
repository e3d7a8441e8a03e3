"""The Docker Compose stack in compose/, checked without a container runtime: the files parse and match the
compose-spec schema, images and the Grafana plugin are pinned, bind mounts exist in the repository, Grafana's
provisioning matches the shipped dashboard, every MONITOR_* / ALERTS_* name is a real setting with a value that
loads, every command parses with the real CLI parser, and the start order holds.

Each check is a function returning a list of problems. The tests assert that the real stack has none, and
`test_checks_catch_a_broken_copy` edits a copy of the files one defect at a time and asserts that the matching
check reports it, so no check can pass vacuously."""

from __future__ import annotations

import argparse
import contextlib
import importlib.resources
import io
import json
import os
import re
import shlex
import shutil
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any
from unittest import mock
from urllib.parse import urlsplit

import jsonschema
import pytest
import yaml
from pydantic.fields import FieldInfo

from monitor.alerts.settings import AlertSettings, load_alert_settings
from monitor.cli import alerts as alerts_cli
from monitor.cli import commands
from monitor.cli import produce as produce_cli
from monitor.cli.main import build_parser
from monitor.config import FIELDS, load_settings
from schemas.errors import MonitorError
from schemas.settings import variables

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILE = PurePosixPath("compose/compose.yaml")
DASHBOARD = PurePosixPath("dashboards/relevancy.json")
CLICKHOUSE_PLUGIN = "grafana-clickhouse-datasource"
GRAFANA_PROVISIONING = PurePosixPath("/etc/grafana/provisioning")
PLUGIN_ENV = ("GF_PLUGINS_PREINSTALL_SYNC", "GF_PLUGINS_PREINSTALL", "GF_INSTALL_PLUGINS")
# An exact release: 1.2.3 or 1.2.3.4 (ClickHouse), optionally pinned further by digest. Not latest, not 12 or 12.2.
EXACT_TAG = re.compile(r"^[0-9]+\.[0-9]+\.[0-9]+(\.[0-9]+)?$")
INTERPOLATION = re.compile(
    r"\$(?:\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?+])(?P<arg>[^}]*))?\}|(?P<bare>[A-Za-z_][A-Za-z0-9_]*))"
)


# ---- loading ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Stack:
    """The compose file of a checkout (the real one or a broken copy), parsed, with the root it resolves against."""

    root: Path
    compose: dict[str, Any]

    @property
    def compose_dir(self) -> Path:
        """The directory relative paths in the compose file start from."""
        return (self.root / COMPOSE_FILE).parent

    @property
    def services(self) -> dict[str, dict[str, Any]]:
        """The services by name."""
        return dict(self.compose.get("services") or {})

    def built(self) -> dict[str, dict[str, Any]]:
        """The services whose image is built from the repository's Dockerfile (migrate, run, alerts, produce)."""
        return {name: svc for name, svc in self.services.items() if "build" in svc}

    def grafana(self) -> tuple[str, dict[str, Any]]:
        """The Grafana service (by image)."""
        found = [
            (n, s)
            for n, s in self.services.items()
            if str(s.get("image", "")).startswith(("grafana/grafana", "grafana/grafana-oss"))
        ]
        assert len(found) == 1, f"expected one Grafana service, found {[n for n, _ in found]}"
        return found[0]

    def resolve(self, source: str) -> Path:
        """A bind mount's or build context's host path, as compose resolves it (relative to the compose file)."""
        return (self.compose_dir / os.path.expanduser(source)).resolve()


def load_stack(root: Path = REPO) -> Stack:
    """The compose file under `root`, parsed."""
    return Stack(root.resolve(), yaml.safe_load((root / COMPOSE_FILE).read_text(encoding="utf-8")))


@dataclass(frozen=True)
class Mount:
    """One volume entry of a service: a bind mount (source is a host path) or a named volume."""

    source: str
    target: str
    bind: bool


def mounts(service: dict[str, Any]) -> list[Mount]:
    """A service's volume entries, short (`src:dst[:mode]`) or long syntax."""
    out = []
    for entry in service.get("volumes") or []:
        if isinstance(entry, dict):
            out.append(Mount(str(entry.get("source", "")), str(entry["target"]), entry.get("type") == "bind"))
            continue
        parts = str(entry).split(":")
        if len(parts) == 1:  # an anonymous volume
            continue
        source, target = parts[0], parts[1]
        out.append(Mount(source, target, source.startswith((".", "/", "~"))))
    return out


def environment(service: dict[str, Any]) -> dict[str, str | None]:
    """A service's environment as a mapping; None is a name without a value (passed through from the shell if set)."""
    env = service.get("environment") or {}
    if isinstance(env, list):
        pairs = (str(item).partition("=") for item in env)
        return {k: (v if sep else None) for k, sep, v in pairs}
    return {str(k): (None if v is None else str(v)) for k, v in env.items()}


def interpolate(value: str) -> str:
    """`value` as compose interpolates it with none of the variables set in the shell: `${X:-d}` and `${X-d}` give
    d, `${X}` and `$X` give '', `$$` is a literal `$`."""

    def sub(m: re.Match[str]) -> str:
        op, arg = m.group("op"), m.group("arg")
        return arg if op in (":-", "-") else ""

    parts = value.split("$$")
    return "$".join(INTERPOLATION.sub(sub, part) for part in parts)


def interpolated_names(text: str) -> set[str]:
    """The variables a compose file reads from the shell (`${NAME...}` or `$NAME`, `$$` being a literal dollar)."""
    names = set()
    for part in text.split("$$"):
        for m in INTERPOLATION.finditer(part):
            names.add(m.group("braced") or m.group("bare"))
    return names


def resolved_env(service: dict[str, Any]) -> dict[str, str]:
    """The environment a container of `service` gets when the shell sets none of the compose file's variables."""
    return {k: interpolate(v) for k, v in environment(service).items() if v is not None}


def command(service: dict[str, Any]) -> list[str]:
    """A service's command as an argument list, interpolated (the image's ENTRYPOINT is `relevancy-monitor`)."""
    cmd = service.get("command") or []
    return [interpolate(c) for c in (shlex.split(cmd) if isinstance(cmd, str) else [str(c) for c in cmd])]


ROLES = {"migrate": ["migrate"], "run": ["run"], "alerts": ["alerts", "run"], "produce": ["produce"]}


def roles(stack: Stack) -> dict[str, str]:
    """The built services by what they run: migrate, run, alerts (alerts run) and produce (the traffic)."""
    out = {}
    for name, svc in stack.built().items():
        cmd = command(svc)
        for role, prefix in ROLES.items():
            if cmd[: len(prefix)] == prefix:
                out[role] = name
    return out


def flag_value(cmd: list[str], flag: str) -> str | None:
    """The value given to `flag` in an argument list (`--flag value` or `--flag=value`)."""
    for i, arg in enumerate(cmd):
        if arg == flag and i + 1 < len(cmd):
            return cmd[i + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None


def grafana_file(stack: Stack, directory: str) -> list[tuple[Mount, Any]]:
    """The provisioning files mounted into Grafana's provisioning/<directory>/, each with its parsed content."""
    _, grafana = stack.grafana()
    out = []
    for m in mounts(grafana):
        if m.bind and PurePosixPath(m.target).parent == GRAFANA_PROVISIONING / directory:
            path = stack.resolve(m.source)
            out.append((m, yaml.safe_load(path.read_text(encoding="utf-8")) if path.is_file() else None))
    return out


def dashboard_mount(stack: Stack) -> Mount | None:
    """Grafana's mount of the shipped dashboard file, if there is one."""
    _, grafana = stack.grafana()
    for m in mounts(grafana):
        if m.bind and stack.resolve(m.source) == (stack.root / DASHBOARD).resolve():
            return m
    return None


# ---- what the monitor accepts -----------------------------------------------------------------------------------


def setting_names(fields: Mapping[str, FieldInfo], prefix: str) -> set[str]:
    """The environment variables of settings by name, formed as monitor.config forms them: the prefix and the
    setting's name in upper case (`check_unknown_env` rejects any other prefixed name)."""
    return {f"{prefix}{name.upper()}" for name in fields}


def unprefixed_aliases(fields: Mapping[str, FieldInfo]) -> set[str]:
    """Variables also read without a prefix (`also_env`, such as ANTHROPIC_API_KEY)."""
    return {v for name, field in fields.items() for v in variables("MONITOR_", name, field)[1:]}


MONITOR_NAMES = setting_names(FIELDS, "MONITOR_")
ALERTS_NAMES = setting_names(AlertSettings.model_fields, "ALERTS_")
MONITOR_ALIASES = unprefixed_aliases(FIELDS)


def strict_parser() -> argparse.ArgumentParser:
    """The real CLI parser, with abbreviated flags refused at every level (the compose file spells flags out)."""
    parser = build_parser()

    def walk(p: argparse.ArgumentParser) -> None:
        p.allow_abbrev = False
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    walk(sub)

    walk(parser)
    return parser


def parse(cmd: list[str]) -> tuple[argparse.Namespace | None, str]:
    """`cmd` parsed by the real CLI parser: the namespace (None if rejected) and the last line the parser wrote to
    stderr: argparse's error, or the note a former spelling of a flag prints (still accepted, on its way out)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            ns = strict_parser().parse_args(cmd)
        except SystemExit:
            ns = None
    lines = err.getvalue().strip().splitlines()
    return ns, lines[-1] if lines else ("" if ns is not None else "rejected")


@contextlib.contextmanager
def only_env(env: dict[str, str]) -> Iterator[None]:
    """os.environ holding exactly `env` (settings are read from the environment; nothing else may leak in)."""
    with mock.patch.dict(os.environ, env, clear=True):
        yield


# ---- the checks --------------------------------------------------------------------------------------------------


def compose_spec_schema() -> dict[str, Any]:
    """The compose-spec JSON schema vendored by check-jsonschema (the schema `docker compose config` follows)."""
    try:
        vendor = importlib.resources.files("check_jsonschema.builtin_schemas.vendor")
    except ModuleNotFoundError:
        pytest.fail(
            "check-jsonschema (PyPI) is not installed: it carries the compose-spec schema; add it to the dev extra"
        )
    schema: dict[str, Any] = json.loads((vendor / "compose-spec.json").read_text(encoding="utf-8"))
    return schema


def problems_schema(stack: Stack) -> list[str]:
    """Where the compose file breaks the compose-spec schema."""
    validator = jsonschema.Draft202012Validator(compose_spec_schema())
    return [f"{e.json_path}: {e.message}" for e in validator.iter_errors(stack.compose)]


def problems_parse(stack: Stack) -> list[str]:
    """Which of the compose file and the provisioning files do not parse as a YAML mapping of the expected kind."""
    out = []
    if not isinstance(stack.compose, dict) or not isinstance(stack.compose.get("services"), dict):
        return ["compose.yaml: not a mapping with `services`"]
    for path in sorted((stack.compose_dir / "grafana").rglob("*.y*ml")):
        try:
            doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        except yaml.YAMLError as e:
            out.append(f"{path.relative_to(stack.root)}: {e}")
            continue
        if not isinstance(doc, dict) or doc.get("apiVersion") != 1 or not ({"datasources", "providers"} & doc.keys()):
            out.append(
                f"{path.relative_to(stack.root)}: not a Grafana provisioning file (apiVersion 1, datasources or "
                "providers)"
            )
    if not list((stack.compose_dir / "grafana").rglob("*.y*ml")):
        out.append("no provisioning files under compose/grafana")
    return out


def _exact_version(version: str) -> bool:
    return bool(EXACT_TAG.match(version))


def problems_pins(stack: Stack) -> list[str]:
    """Images that are not pinned to an exact release, and Grafana plugins not pinned to an exact version."""
    out = []
    for name, svc in stack.services.items():
        image = str(svc.get("image", ""))
        if "$" in image:
            out.append(f"{name}: image {image!r} is interpolated")
            continue
        repo, _, digest = image.partition("@")
        _ref, colon, tag = repo.rpartition(":") if ":" in repo.rsplit("/", 1)[-1] else (repo, "", "")
        if "build" in svc:
            if image and (not colon or tag == "latest"):  # built here: a local name, but never an implicit latest
                out.append(f"{name}: built image {image!r} needs an explicit tag other than latest")
            continue
        if not image:
            out.append(f"{name}: no image and nothing to build")
        elif not colon or not _exact_version(tag):
            out.append(f"{name}: image {image!r} is not pinned to an exact release (x.y.z)")
        elif digest and not digest.startswith("sha256:"):
            out.append(f"{name}: image {image!r} has a malformed digest")
    _, grafana = stack.grafana()
    env = resolved_env(grafana)
    plugins: dict[str, str] = {}
    for var in PLUGIN_ENV:
        for entry in filter(None, (e.strip() for e in env.get(var, "").split(","))):
            plugin_id, _, version = entry.replace(" ", "@").partition("@")
            plugins[plugin_id] = version.split("@")[0]
    if CLICKHOUSE_PLUGIN not in plugins:
        out.append(f"Grafana does not install {CLICKHOUSE_PLUGIN} (set one of {', '.join(PLUGIN_ENV)})")
    for plugin_id, version in plugins.items():
        if not _exact_version(version):
            out.append(f"Grafana plugin {plugin_id} is not pinned to an exact version (got {version or 'none'!r})")
    return out


def problems_mounts(stack: Stack) -> list[str]:
    """Bind mounts whose source is missing from the repository (or outside it), undeclared named volumes, and a build
    context without its Dockerfile."""
    out = []
    declared = set((stack.compose.get("volumes") or {}).keys())
    for name, svc in stack.services.items():
        for m in mounts(svc):
            if not m.bind:
                if m.source not in declared:
                    out.append(f"{name}: named volume {m.source!r} is not declared under `volumes`")
                continue
            path = stack.resolve(m.source)
            if not path.is_relative_to(stack.root):
                out.append(f"{name}: bind mount {m.source} is outside the repository")
            elif not path.exists():
                out.append(f"{name}: bind mount {m.source} does not exist ({path.relative_to(stack.root)})")
            elif PurePosixPath(m.target).suffix and not path.is_file():
                out.append(f"{name}: bind mount {m.source} -> {m.target} should be a file")
        build = svc.get("build")
        if build is not None:
            context = stack.resolve(build if isinstance(build, str) else build.get("context", "."))
            dockerfile = "Dockerfile" if isinstance(build, str) else build.get("dockerfile", "Dockerfile")
            if not (context / dockerfile).is_file():
                out.append(f"{name}: no {dockerfile} in the build context {context}")
    return out


def problems_dashboard_provider(stack: Stack) -> list[str]:
    """Whether Grafana's dashboard provider loads the shipped dashboards/relevancy.json from where it is mounted."""
    out = []
    mount = dashboard_mount(stack)
    if mount is None:
        return [f"Grafana does not mount {DASHBOARD} from the repository"]
    copies = [p.relative_to(stack.root) for p in stack.compose_dir.rglob("*.json") if p.name == DASHBOARD.name]
    if copies:
        out.append(f"a copy of the dashboard under compose/ ({copies}): mount {DASHBOARD} instead")
    target = PurePosixPath(mount.target)
    providers = [(m, doc) for m, doc in grafana_file(stack, "dashboards") if doc]
    if not providers:
        return [*out, "no dashboard provider mounted into Grafana's provisioning/dashboards"]
    paths = []
    for _, doc in providers:
        for p in doc.get("providers") or []:
            path = (p.get("options") or {}).get("path")
            if p.get("type", "file") == "file" and path:
                paths.append(PurePosixPath(path))
    if not any(target == path or target.is_relative_to(path) for path in paths):
        out.append(f"the dashboard is mounted at {target}, but the providers read {[str(p) for p in paths]}")
    home = resolved_env(stack.grafana()[1]).get("GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH")
    if home is not None and PurePosixPath(home) != target:
        out.append(f"GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH is {home}, the dashboard is mounted at {target}")
    return out


def datasource_refs(node: Any) -> Iterator[Any]:
    """Every `datasource` value of the dashboard JSON (panels, targets, variables)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "datasource":
                yield value
            yield from datasource_refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from datasource_refs(item)


def problems_datasource(stack: Stack) -> list[str]:
    """Whether the provisioned data source is the one the dashboard's panels select, reachable and with the right
    database, so the panels work without a click."""
    mount = dashboard_mount(stack)
    if mount is None:
        return [f"Grafana does not mount {DASHBOARD}"]
    dashboard = json.loads(stack.resolve(mount.source).read_text(encoding="utf-8"))
    files = [doc for _, doc in grafana_file(stack, "datasources") if doc]
    provisioned = [ds for doc in files for ds in doc.get("datasources") or []]
    if not provisioned:
        return ["no data source provisioned into Grafana's provisioning/datasources"]
    out = []
    variables = {v["name"]: v for v in (dashboard.get("templating") or {}).get("list") or []}
    inputs = {i["name"] for i in dashboard.get("__inputs") or []}
    by_uid = {ds.get("uid"): ds for ds in provisioned}
    for ref in datasource_refs({k: v for k, v in dashboard.items() if k not in ("__inputs", "__requires")}):
        if not isinstance(ref, dict):
            out.append(f"datasource reference {ref!r} is a bare name: use {{type, uid}}")
            continue
        kind, uid = ref.get("type"), str(ref.get("uid", ""))
        m = re.fullmatch(r"\$\{?(\w+)\}?", uid)
        if m and m.group(1) in inputs:
            out.append(
                f"{uid} is an import input (__inputs): file provisioning does not replace it, use the datasource "
                "variable"
            )
        elif m:
            var = variables.get(m.group(1))
            if var is None or var.get("type") != "datasource":
                out.append(f"{uid} is not a datasource variable of the dashboard")
                continue
            if var.get("query") != kind:
                out.append(
                    f"the variable {var['name']} lists {var.get('query')!r} but the reference is of type {kind!r}"
                )
            candidates = [ds for ds in provisioned if ds.get("type") == var.get("query")]
            current = (var.get("current") or {}).get("value")
            if not candidates:
                out.append(f"no provisioned data source of type {var.get('query')!r} for the variable {var['name']}")
            elif current and current not in {c.get("uid") for c in candidates} | {c.get("name") for c in candidates}:
                out.append(f"the variable {var['name']} starts on {current!r}, which is not provisioned")
            elif not current and len(candidates) > 1 and not any(c.get("isDefault") for c in candidates):
                out.append(
                    f"several {kind} data sources and none is the default: the variable {var['name']} would pick any"
                )
        elif uid not in by_uid:
            out.append(f"the dashboard references uid {uid!r}, the provisioned uids are {sorted(map(str, by_uid))}")
        elif by_uid[uid].get("type") != kind:
            out.append(f"uid {uid!r} is provisioned as {by_uid[uid].get('type')!r}, the dashboard expects {kind!r}")
    _, grafana = stack.grafana()
    grafana_env = resolved_env(grafana)
    clickhouse = [ds for ds in provisioned if ds.get("type") == CLICKHOUSE_PLUGIN]
    for ds in clickhouse:
        data, secure = ds.get("jsonData") or {}, ds.get("secureJsonData") or {}
        missing = [k for k in ("host", "port", "protocol", "username") if k not in data] + [
            k for k in ("password",) if k not in secure
        ]
        if missing:
            out.append(f"data source {ds.get('name')!r} lacks {missing} (plugin v4 jsonData / secureJsonData)")
        if data.get("host") not in stack.services:
            out.append(f"data source host {data.get('host')!r} is not a service of the stack")
        if (data.get("protocol"), data.get("port")) not in {("http", 8123), ("native", 9000)}:
            out.append(
                f"data source protocol/port {data.get('protocol')}/{data.get('port')} is not ClickHouse's plain "
                "http/8123 or native/9000"
            )
        database = variables.get("database", {}).get("query")
        if database and data.get("defaultDatabase") not in (None, database):
            out.append(f"defaultDatabase {data.get('defaultDatabase')!r} but the dashboard reads {database!r}")
        for name, svc in stack.built().items():
            written = resolved_env(svc).get("MONITOR_CLICKHOUSE_DATABASE", FIELDS["clickhouse_database"].default)
            if database and command(svc)[:1] in (["run"], ["migrate"]) and written != database:
                out.append(f"{name} writes database {written!r}, the dashboard's `database` constant is {database!r}")
    for doc in files:
        for name in interpolated_names(json.dumps(doc)):
            if name not in grafana_env:
                out.append(f"the provisioning reads ${name}, which is not in Grafana's environment")
    return list(dict.fromkeys(out))  # one line per problem, not per panel


def problems_setting_names(stack: Stack) -> list[str]:
    """MONITOR_* / ALERTS_* names (keys anywhere in the file, and variables it reads from the shell) that are not
    settings of monitor.config, and other variables on the monitor's image that it does not read."""
    out = []
    for name, svc in stack.services.items():
        for var in environment(svc):
            if var.startswith("MONITOR_") and var not in MONITOR_NAMES:
                out.append(f"{name}: {var} is not a setting of monitor.config.Settings")
            elif var.startswith("ALERTS_") and var not in ALERTS_NAMES:
                out.append(f"{name}: {var} is not a setting of monitor.alerts.settings.AlertSettings")
            elif "build" in svc and not var.startswith(("MONITOR_", "ALERTS_")) and var not in MONITOR_ALIASES:
                out.append(f"{name}: {var} is read by nothing in the monitor (its aliases: {sorted(MONITOR_ALIASES)})")
    text = (stack.root / COMPOSE_FILE).read_text(encoding="utf-8")
    for var in sorted(interpolated_names(text)):
        if (var.startswith("MONITOR_") and var not in MONITOR_NAMES) or (
            var.startswith("ALERTS_") and var not in ALERTS_NAMES
        ):
            out.append(f"the file reads ${{{var}}} from the shell, which is not a setting")
    return out


def problems_setting_values(stack: Stack) -> list[str]:
    """Built services whose environment (with the file's defaults) does not load into the real settings."""
    out = []
    for name, svc in stack.built().items():
        env = resolved_env(svc)
        try:
            with only_env(env):
                load_settings()
                if command(svc)[:1] == ["alerts"]:
                    load_alert_settings()
        except MonitorError as e:
            out.append(f"{name}: {e}")
    return out


def problems_cli(stack: Stack) -> list[str]:
    """Commands that the real `relevancy-monitor` parser rejects, and roles of the stack that no service runs."""
    out = []
    dockerfile = (stack.root / "Dockerfile").read_text(encoding="utf-8")
    if not re.search(r'^ENTRYPOINT \["relevancy-monitor"\]', dockerfile, re.MULTILINE):
        out.append(
            'the image\'s ENTRYPOINT is no longer ["relevancy-monitor"]: the commands below would not reach the CLI'
        )
    ran = set()
    for name, svc in stack.built().items():
        if svc.get("entrypoint") not in (None, ["relevancy-monitor"]):
            out.append(f"{name}: entrypoint {svc['entrypoint']!r} bypasses the CLI")
        cmd = command(svc)
        ns, error = parse(cmd)
        if ns is None:
            out.append(f"{name}: `relevancy-monitor {shlex.join(cmd)}` is rejected by the CLI parser: {error}")
            continue
        if error:
            out.append(f"{name}: `relevancy-monitor {shlex.join(cmd)}` uses a former spelling: {error}")
        ran.add(ns.func)
    wanted = {
        commands.cmd_migrate: "migrate",
        commands.cmd_run: "run",
        alerts_cli.cmd_run: "alerts run",
        produce_cli.cmd_produce: "produce",
    }
    out += [f"no service runs `relevancy-monitor {label}`" for func, label in wanted.items() if func not in ran]
    return out


def _host_port(server: str) -> tuple[str, str]:
    host, _, port = server.strip().rpartition(":")
    return host, port


def problems_connections(stack: Stack) -> list[str]:
    """Addresses and credentials that do not meet: the monitor's ClickHouse URL and brokers are services of the stack
    (the brokers as the broker advertises itself), the traffic goes to the broker and topic the monitor consumes, and
    the monitor, Grafana and the ClickHouse server agree on the user and password."""
    out = []
    role = roles(stack)
    clickhouse_service = None
    for name in sorted({role[r] for r in ("migrate", "run", "alerts") if r in role}):
        env = resolved_env(stack.services[name])
        url = env.get("MONITOR_CLICKHOUSE_URL", "")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or parts.hostname not in stack.services:
            out.append(f"{name}: MONITOR_CLICKHOUSE_URL {url!r} is not a ClickHouse service of the stack")
            continue
        clickhouse_service = parts.hostname
        server = resolved_env(stack.services[parts.hostname])
        for var, ch_var in (
            ("MONITOR_CLICKHOUSE_USER", "CLICKHOUSE_USER"),
            ("MONITOR_CLICKHOUSE_PASSWORD", "CLICKHOUSE_PASSWORD"),
        ):
            if env.get(var) != server.get(ch_var, "default" if ch_var == "CLICKHOUSE_USER" else ""):
                out.append(f"{name}: {var} differs from the server's {ch_var}")
    if clickhouse_service:
        server, grafana = resolved_env(stack.services[clickhouse_service]), resolved_env(stack.grafana()[1])
        for var in ("CLICKHOUSE_USER", "CLICKHOUSE_PASSWORD"):
            if grafana.get(var) != server.get(var):
                out.append(f"Grafana's {var} (used by the data source) differs from the ClickHouse server's")
    if "run" not in role:
        return [*out, "no service runs `relevancy-monitor run`"]
    monitor = resolved_env(stack.services[role["run"]])
    brokers = monitor.get("MONITOR_KAFKA_BOOTSTRAP_SERVERS", str(FIELDS["kafka_bootstrap_servers"].default))
    topics = [
        t.strip() for t in monitor.get("MONITOR_KAFKA_TOPICS", ",".join(FIELDS["kafka_topics"].default)).split(",")
    ]
    for broker in brokers.split(","):
        host, port = _host_port(broker)
        advertised = resolved_env(stack.services.get(host, {})).get("KAFKA_ADVERTISED_LISTENERS", "")
        if host not in stack.services:
            out.append(f"the monitor's broker {broker} is not a service of the stack")
        elif f"//{host}:{port}" not in advertised:
            out.append(
                f"the broker service {host} does not advertise {host}:{port} "
                f"(KAFKA_ADVERTISED_LISTENERS={advertised!r})"
            )
    for name, svc in stack.services.items():
        cmd = command(svc)
        if cmd and cmd[0].endswith("kafka-topics.sh") and "--create" in cmd:
            if flag_value(cmd, "--topic") not in topics:
                out.append(f"{name} creates topic {flag_value(cmd, '--topic')!r}, the monitor consumes {topics}")
            if flag_value(cmd, "--bootstrap-server") != brokers:
                out.append(
                    f"{name} creates the topic at {flag_value(cmd, '--bootstrap-server')!r}, the monitor reads "
                    f"{brokers!r}"
                )
    if "produce" in role:
        # `produce` takes the flags, else MONITOR_KAFKA_BOOTSTRAP_SERVERS and the first of MONITOR_KAFKA_TOPICS.
        traffic = stack.services[role["produce"]]
        cmd, env = command(traffic), resolved_env(traffic)
        default_topic = env.get("MONITOR_KAFKA_TOPICS", FIELDS["kafka_topics"].default[0]).split(",")[0]
        topic = flag_value(cmd, "--kafka-topic") or default_topic
        sent_to = flag_value(cmd, "--kafka-bootstrap-servers") or env.get("MONITOR_KAFKA_BOOTSTRAP_SERVERS", "")
        if topic not in topics:
            out.append(f"the traffic goes to topic {topic!r}, the monitor consumes {topics}")
        if sent_to != brokers:
            out.append(f"the traffic goes to {sent_to!r}, the monitor reads {brokers!r}")
    return out


def problems_order(stack: Stack) -> list[str]:
    """Start-order conditions that cannot hold or are missing: healthy needs a healthcheck, completed needs a one-shot
    service; the schema is migrated before `run` and `alerts run` (a server store is not migrated by `run`), and
    ClickHouse and Kafka are healthy before what uses them starts."""
    out = []
    services = stack.services
    for name, svc in services.items():
        deps = svc.get("depends_on") or {}
        if isinstance(deps, list):
            out.append(f"{name}: depends_on is a list: give each dependency a condition")
            continue
        for dep, spec in deps.items():
            condition = (spec or {}).get("condition", "service_started")
            target = services.get(dep)
            if target is None:
                out.append(f"{name}: depends on {dep}, which is not a service")
            elif condition == "service_healthy" and (
                not target.get("healthcheck") or target["healthcheck"].get("disable")
            ):
                out.append(f"{name}: waits for {dep} to be healthy, but {dep} has no healthcheck")
            elif condition == "service_completed_successfully" and target.get("restart") not in (None, "no"):
                out.append(f"{name}: waits for {dep} to complete, but {dep} restarts ({target.get('restart')})")

    def needs(who: str | None, dep: str | None, condition: str) -> None:
        if who is None or dep is None:
            return
        got = (
            ((services[who].get("depends_on") or {}).get(dep) or {}).get("condition")
            if isinstance(services[who].get("depends_on"), dict)
            else None
        )
        if got != condition:
            out.append(f"{who}: should wait for {dep} with condition {condition} (has {got})")

    role = roles(stack)
    for missing in sorted(set(ROLES) - role.keys()):
        out.append(f"no service runs `relevancy-monitor {' '.join(ROLES[missing])}`")
    clickhouse = next(
        (urlsplit(resolved_env(s).get("MONITOR_CLICKHOUSE_URL", "")).hostname for s in stack.built().values()), None
    )
    clickhouse = clickhouse if clickhouse in services else None
    run = role.get("run")
    if run is not None:
        try:
            with only_env(resolved_env(services[run])):
                migrates_itself = load_settings().store.auto_migrates
        except MonitorError as e:
            out.append(f"{run}: {e}")
            migrates_itself = False
        if not migrates_itself:
            needs(run, role.get("migrate"), "service_completed_successfully")
        brokers = resolved_env(services[run]).get("MONITOR_KAFKA_BOOTSTRAP_SERVERS", "")
        needs(run, _host_port(brokers.split(",")[0])[0] if brokers else None, "service_healthy")
    needs(role.get("alerts"), role.get("migrate"), "service_completed_successfully")  # alerts never creates a store
    for who in (run, role.get("alerts"), role.get("migrate"), stack.grafana()[0]):
        needs(who, clickhouse, "service_healthy")
    if role.get("migrate") and services[role["migrate"]].get("restart") not in (None, "no"):
        out.append("the migrate job must not restart: it runs once")
    return out


CHECKS: dict[str, Callable[[Stack], list[str]]] = {
    "parse": problems_parse,
    "schema": problems_schema,
    "pins": problems_pins,
    "mounts": problems_mounts,
    "dashboard_provider": problems_dashboard_provider,
    "datasource": problems_datasource,
    "setting_names": problems_setting_names,
    "setting_values": problems_setting_values,
    "cli": problems_cli,
    "connections": problems_connections,
    "order": problems_order,
}


# ---- the real stack -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def stack() -> Stack:
    """The compose file of this checkout."""
    return load_stack()


def test_files_parse_as_yaml(stack: Stack) -> None:
    """compose.yaml and every Grafana provisioning file parse as YAML mappings of the expected kind."""
    assert problems_parse(stack) == []


def test_compose_file_matches_the_compose_spec_schema(stack: Stack) -> None:
    """compose.yaml validates against the compose-spec JSON schema (vendored by check-jsonschema)."""
    assert problems_schema(stack) == []


def test_images_and_grafana_plugin_are_pinned(stack: Stack) -> None:
    """Every pulled image has an exact x.y.z tag, built images an explicit tag, and the ClickHouse plugin an exact
    version."""
    assert problems_pins(stack) == []


def test_bind_mounts_exist_in_the_repository(stack: Stack) -> None:
    """Every bind-mounted path exists inside the repository, named volumes are declared, the build context has its
    Dockerfile."""
    assert problems_mounts(stack) == []


def test_dashboard_provider_reads_the_mounted_dashboard(stack: Stack) -> None:
    """The provider's path holds dashboards/relevancy.json as mounted from the repository (not a copy), also the home
    dashboard."""
    assert problems_dashboard_provider(stack) == []


def test_datasource_matches_the_dashboard(stack: Stack) -> None:
    """The provisioned data source has the type the dashboard's datasource variable lists, is its default, and reaches
    ClickHouse."""
    assert problems_datasource(stack) == []


def test_setting_names_are_real_settings(stack: Stack) -> None:
    """Every MONITOR_* / ALERTS_* name in the compose file is a field of Settings / AlertSettings."""
    assert problems_setting_names(stack) == []


def test_setting_values_load(stack: Stack) -> None:
    """Each built service's environment, with the file's defaults, loads into the real Settings (and AlertSettings)."""
    assert problems_setting_values(stack) == []


def test_commands_parse_with_the_real_cli(stack: Stack) -> None:
    """Each built service's command parses with monitor.cli.main.build_parser(), and migrate, run, alerts run and
    produce all run."""
    assert problems_cli(stack) == []


def test_services_connect_to_each_other(stack: Stack) -> None:
    """The monitor's ClickHouse and Kafka addresses are services of the stack, traffic goes where the monitor reads,
    credentials agree."""
    assert problems_connections(stack) == []


def test_start_order(stack: Stack) -> None:
    """migrate completes before run and alerts run, ClickHouse and Kafka are healthy first, and every condition can be
    met."""
    assert problems_order(stack) == []


def test_settings_names_are_derived_from_the_models() -> None:
    """The allowed names come from the pydantic models, as monitor.config forms them (a known name in, a made-up one
    out)."""
    assert {"MONITOR_KAFKA_BOOTSTRAP_SERVERS", "MONITOR_CLICKHOUSE_URL", "MONITOR_JUDGE"} <= MONITOR_NAMES
    assert {"ALERTS_INTERVAL", "ALERTS_METRICS_PORT"} <= ALERTS_NAMES
    assert "ANTHROPIC_API_KEY" in MONITOR_ALIASES
    assert "MONITOR_KAFKA_TOPIC" not in MONITOR_NAMES and "ALERTS_RULE" not in ALERTS_NAMES
    with (
        only_env({"MONITOR_KAFKA_TOPIC": "x"}),
        pytest.raises(MonitorError, match="unknown setting MONITOR_KAFKA_TOPIC"),
    ):
        load_settings()


def test_interpolation_as_compose_does() -> None:
    """The helper resolves ${X:-d}, ${X-d}, ${X} and $$ as compose does with nothing set in the shell."""
    assert interpolate("${A:-lexical}/${B-x}/${C}/$D/$$E") == "lexical/x///$E"
    assert interpolated_names("${A:-1} $B $$C ${D}") == {"A", "B", "D"}


# ---- each check against a broken copy ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Breakage:
    """One deliberate defect: in `file` (relative to the repository), `old` (which must occur) becomes `new`."""

    check: str
    file: str
    old: str
    new: str


BREAKAGES = {
    "yaml-syntax": Breakage(
        "parse", "compose/grafana/provisioning/dashboards/relevancy-monitor.yaml", "providers:", "providers: [oops"
    ),
    "unknown-service-key": Breakage(
        "schema", "compose/compose.yaml", "  read_only: true\n", "  read_only: true\n  restart_policy: always\n"
    ),
    "latest-tag": Breakage("pins", "compose/compose.yaml", "grafana/grafana:12.2.0", "grafana/grafana:latest"),
    "floating-major": Breakage("pins", "compose/compose.yaml", "apache/kafka:3.9.1", "apache/kafka:3"),
    "unpinned-plugin": Breakage("pins", "compose/compose.yaml", f"{CLICKHOUSE_PLUGIN}@4.20.0", CLICKHOUSE_PLUGIN),
    "missing-mount-source": Breakage(
        "mounts", "compose/compose.yaml", "datasources/clickhouse.yaml:/etc", "datasources/clickhouse.yml:/etc"
    ),
    "provider-path": Breakage(
        "dashboard_provider",
        "compose/grafana/provisioning/dashboards/relevancy-monitor.yaml",
        "path: /etc/grafana/dashboards/relevancy-monitor",
        "path: /var/lib/grafana/dashboards",
    ),
    "datasource-type": Breakage(
        "datasource",
        "compose/grafana/provisioning/datasources/clickhouse.yaml",
        f"type: {CLICKHOUSE_PLUGIN}",
        "type: vertamedia-clickhouse-datasource",
    ),
    "dashboard-input": Breakage(
        "datasource", "dashboards/relevancy.json", '"uid": "${datasource}"', '"uid": "${DS_CLICKHOUSE}"'
    ),
    "misspelt-setting": Breakage(
        "setting_names", "compose/compose.yaml", "MONITOR_KAFKA_TOPICS:", "MONITOR_KAFKA_TOPIC:"
    ),
    "misspelt-alert-setting": Breakage(
        "setting_names", "compose/compose.yaml", "ALERTS_INTERVAL:", "ALERTS_INTERVALS:"
    ),
    "misspelt-api-key": Breakage("setting_names", "compose/compose.yaml", "ANTHROPIC_API_KEY:", "ANTHROPIC_KEY:"),
    "bad-value": Breakage(
        "setting_values", "compose/compose.yaml", "${MONITOR_JUDGE:-lexical}", "${MONITOR_JUDGE:-lexicl}"
    ),
    "old-flag": Breakage("cli", "compose/compose.yaml", "- --kafka-bootstrap-servers\n", "- --bootstrap-server\n"),
    "former-flag": Breakage("cli", "compose/compose.yaml", "- --kafka-bootstrap-servers\n", "- --bootstrap-servers\n"),
    "unknown-subcommand": Breakage(
        "cli", "compose/compose.yaml", 'command: ["alerts", "run"]', 'command: ["alerts", "watch"]'
    ),
    "wrong-created-topic": Breakage(
        "connections",
        "compose/compose.yaml",
        "      - --create\n      - --if-not-exists\n      - --topic\n      - conversations\n",
        "      - --create\n      - --if-not-exists\n      - --topic\n      - other\n",
    ),
    "wrong-topic": Breakage(
        "connections",
        "compose/compose.yaml",
        "      - --kafka-topic\n      - conversations\n",
        "      - --kafka-topic\n      - conversation\n",
    ),
    "wrong-password": Breakage(
        "connections",
        "compose/compose.yaml",
        "MONITOR_CLICKHOUSE_PASSWORD: ${CLICKHOUSE_PASSWORD:-relevancy-local-only}",
        "MONITOR_CLICKHOUSE_PASSWORD: other",
    ),
    "run-before-migrate": Breakage(
        "order",
        "compose/compose.yaml",
        "      migrate:\n        condition: service_completed_successfully\n      clickhouse:\n        condition: "
        "service_healthy\n      kafka:",
        "      migrate:\n        condition: service_started\n      clickhouse:\n        condition: service_healthy\n   "
        "   kafka:",
    ),
    "no-healthcheck": Breakage(
        "order",
        "compose/compose.yaml",
        '    healthcheck:\n      test: ["CMD-SHELL", "/opt/kafka',
        '    x-healthcheck:\n      test: ["CMD-SHELL", "/opt/kafka',
    ),
}


def broken_copy(tmp_path: Path, breakage: Breakage) -> Stack:
    """A copy of the files the stack reads (compose/, the dashboard, the Dockerfile) with one defect in it."""
    shutil.copytree(REPO / "compose", tmp_path / "compose")
    (tmp_path / "dashboards").mkdir()
    shutil.copy2(REPO / DASHBOARD, tmp_path / DASHBOARD)
    shutil.copy2(REPO / "Dockerfile", tmp_path / "Dockerfile")
    path = tmp_path / breakage.file
    text = path.read_text(encoding="utf-8")
    assert breakage.old in text, f"{breakage.file} no longer contains {breakage.old!r}: update this breakage"
    path.write_text(text.replace(breakage.old, breakage.new), encoding="utf-8")
    return load_stack(tmp_path)


def test_every_check_has_a_breakage() -> None:
    """Each check is exercised by at least one deliberate defect below."""
    assert set(CHECKS) == {b.check for b in BREAKAGES.values()}


@pytest.mark.parametrize("name", sorted(BREAKAGES))
def test_checks_catch_a_broken_copy(tmp_path: Path, name: str) -> None:
    """The check named by each deliberate defect reports it on a broken copy of the files."""
    breakage = BREAKAGES[name]
    try:
        stack = broken_copy(tmp_path, breakage)
    except yaml.YAMLError:
        assert breakage.check == "parse"  # the compose file itself no longer parses: the parse check's job
        return
    problems = CHECKS[breakage.check](stack)
    assert problems, f"{breakage.check} missed {name}"
