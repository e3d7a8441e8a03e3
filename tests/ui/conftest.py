"""The web UI as a person uses it: a filled store, `relevancy-monitor ui` serving it in a process of its own, and
Debian's Chromium driven by Selenium through Debian's chromedriver (`make browser` installs both).

One store, one server and one browser serve the whole module (module fixtures; the module is one `xdist_group`)."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.service import Service

from tests.harness import CLI, monitor_env

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
REPO = Path(__file__).resolve().parents[2]
START_S = 60.0  # generous: the whole suite may run beside it on 2 cores


def _installed(path: str) -> str:
    """`path` when executable; else fails the test (never skips it), naming `make browser`."""
    if not os.access(path, os.X_OK):
        pytest.fail(
            f"{path} not found: run `make browser` (installs Debian's chromium and chromium-driver as root)",
            pytrace=False,
        )
    return path


@dataclass(frozen=True)
class Filled:
    """The store the server reads, and what `tests.ui.fill_store` wrote into it."""

    url: str
    database: str
    facts: dict[str, Any]


@dataclass(frozen=True)
class Server:
    """A running `relevancy-monitor ui` and where it answers."""

    base: str
    process: subprocess.Popen[str]
    log: Path

    def url(self, path: str) -> str:
        """The absolute URL of `path` on this server."""
        return self.base + path


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> Filled:
    """A store of its own directory, migrated and filled by `tests.ui.fill_store` in a process of its own."""
    url = f"chdb://{tmp_path_factory.mktemp('ui-store')}"
    database = f"ui_{uuid.uuid4().hex[:10]}"
    done = subprocess.run(
        [sys.executable, "-m", "tests.ui.fill_store", url, database],
        cwd=REPO,
        env=monitor_env(),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return Filled(url, database, json.loads(done.stdout.strip().splitlines()[-1]))


def _first_line(process: subprocess.Popen[str], log: Path, timeout_s: float) -> str:
    """The first line the server prints on stdout, waiting on the pipe (not a sleep) until `timeout_s`."""
    assert process.stdout is not None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        ready, _, _ = select.select([process.stdout], [], [], 0.5)
        if ready:
            return process.stdout.readline().strip()
        if process.poll() is not None:
            break
    process.kill()
    raise AssertionError(f"`relevancy-monitor ui` printed no address: {log.read_text(errors='replace')[-3000:]}")


def _healthy(base: str) -> bool:
    try:
        with urllib.request.urlopen(base + "/healthz", timeout=2) as answer:
            return bool(answer.status == 200 and answer.read().strip() == b"ok")
    except (urllib.error.URLError, OSError):
        return False


@pytest.fixture(scope="module")
def server(filled: Filled, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """`relevancy-monitor ui --port 0 --reviewer alice` on the filled store, answering /healthz."""
    log = tmp_path_factory.mktemp("ui-server") / "stderr.log"
    env = monitor_env(MONITOR_CLICKHOUSE_URL=filled.url, MONITOR_CLICKHOUSE_DATABASE=filled.database)
    with log.open("w") as err:
        process = subprocess.Popen(
            [CLI, "ui", "--port", "0", "--reviewer", "alice"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
    try:
        line = _first_line(process, log, START_S)
        assert line.startswith("serving http://127.0.0.1:"), line
        base = line.removeprefix("serving ").rstrip("/")
        deadline = time.monotonic() + START_S
        while not _healthy(base):
            assert process.poll() is None, f"the server stopped: {log.read_text(errors='replace')[-3000:]}"
            assert time.monotonic() < deadline, f"/healthz never answered: {log.read_text(errors='replace')[-3000:]}"
            time.sleep(0.1)  # polling interval of the condition above
        yield Server(base, process, log)
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[webdriver.Chrome]:
    """Headless Chromium with a profile of its own, 1280×1000, through Debian's chromedriver."""
    options = webdriver.ChromeOptions()
    options.binary_location = _installed(CHROMIUM)
    for argument in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root, where Chromium's sandbox cannot start
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--no-first-run",
        "--window-size=1280,1000",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}",
    ):
        options.add_argument(argument)
    try:
        driver = webdriver.Chrome(service=Service(executable_path=_installed(CHROMEDRIVER)), options=options)
    except WebDriverException as e:
        pytest.fail(f"chromedriver could not start {options.binary_location}: {e.msg}", pytrace=False)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the pages' screenshots go: $UI_SCREENSHOTS, else a temporary directory."""
    wanted = os.environ.get("UI_SCREENSHOTS")
    path = Path(wanted) if wanted else tmp_path_factory.mktemp("ui-screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


def keep_shot(driver: webdriver.Chrome, shots: Path, name: str) -> Path:
    """Save the whole page (its full height) as `name`.png in `shots`."""
    height = int(driver.execute_script("return document.documentElement.scrollHeight"))
    driver.set_window_size(1280, min(max(height, 800), 4000))
    path = shots / f"{name}.png"
    assert driver.save_screenshot(str(path)), path
    driver.set_window_size(1280, 1000)
    return path
