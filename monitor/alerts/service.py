"""The alert evaluator's composition root: its store, notifiers, canary and `AlertRunner`, built from settings slices
(the alert settings, the store's, and the live judge's, flow's and redaction's for the canary), run once or until
stopped. The command line (`monitor.cli.alerts`) parses arguments and prints; what it runs is built here."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

import httpx2
import structlog

from monitor.alerts.engine import AlertRunner, RoundReport
from monitor.alerts.notifiers import AlertmanagerNotifier, Notifier, SlackNotifier, WebhookNotifier
from monitor.alerts.poster import JsonPoster
from monitor.alerts.rules import RuleSet
from monitor.store.connection import ClickHouseStore
from monitor.store.migrations import Migrations

if TYPE_CHECKING:
    from monitor.alerts.settings import AlertSettings
    from monitor.canary.service import Canary
    from monitor.judges.settings import JudgeSettings
    from monitor.judging.settings import FlowSettings
    from monitor.privacy.settings import RedactionSettings
    from monitor.store.settings import StoreSettings


@dataclass(frozen=True, slots=True)
class ServiceSettings:
    """The slices the alert evaluator is built from; `judge`, `flow` and `redaction` are the canary's."""

    alert: AlertSettings
    store: StoreSettings
    judge: JudgeSettings
    flow: FlowSettings
    redaction: RedactionSettings | None = None  # None: the canary judges the text as written (MONITOR_REDACT=false)


def open_store(settings: StoreSettings, *tables: str, writes: bool = False) -> ClickHouseStore:
    """The existing store, with the scores table and `tables` present and its schema current; creates nothing and
    issues no DDL. Read-only (the engine refuses writes) unless `writes` (the alert service's state and leases). A
    schema behind this release is one line naming `migrate`: the rules read its newer tables."""
    store = ClickHouseStore.from_settings(settings)
    try:
        if writes:
            Migrations(store).ensure(migrate=False)
        else:
            store.open_for_reads(*tables)
            Migrations(store).require_current()
    except BaseException:
        store.close()
        raise
    return store


def build_notifiers(alert: AlertSettings, transport: httpx2.AsyncBaseTransport | None = None) -> list[Notifier]:
    """The notifiers the alert settings name, posting over `transport` (None: the network)."""
    poster = JsonPoster(timeout_s=alert.notify_timeout_s, transport=transport)
    out: list[Notifier] = []
    if alert.webhook_url:
        out.append(WebhookNotifier(alert.webhook_url, poster=poster))
    if alert.slack_webhook_url:
        out.append(SlackNotifier(alert.slack_webhook_url, poster=poster))
    if alert.alertmanager_url:
        # endsAt a few rounds ahead: a stopped evaluator's alerts expire by themselves in Alertmanager.
        ttl = max(alert.interval * 4, timedelta(minutes=3))
        url, generator = alert.alertmanager_url, alert.generator_url
        out.append(AlertmanagerNotifier(url, resend_ttl=ttl, generator_url=generator, poster=poster))
    return out


def build_canary(settings: ServiceSettings, store: ClickHouseStore, *, background: bool) -> Canary:
    """The canary: the live judge's slices on ALERTS_CANARY_FILE or the shipped golden set; raises `ConfigError`
    (no API key) or `UsageError` (the labels file)."""
    # Imported here: the canary builds a judge (the provider's SDK), which an evaluator without one never loads.
    from monitor.calibration.labels import golden_path
    from monitor.canary.service import Canary, CanarySettings

    alert = settings.alert
    canary_settings = CanarySettings(
        interval=alert.canary_interval,
        labels_file=alert.canary_file or golden_path(),
        judge=settings.judge,
        flow=settings.flow,
        redaction=settings.redaction,
    )
    canary = Canary(store, canary_settings, background=background)
    structlog.get_logger("monitor.canary").info(
        "canary on",
        judge_id=canary.judge.judge_id,
        labels=canary.labelled.name,
        pairs=len(canary.labelled.pairs),
        interval_s=alert.canary_interval.total_seconds(),
    )
    return canary


class AlertService:
    """The alert evaluator, built: the store it writes, its notifiers and canary, and the runner; `close` (or the
    end of a `with` block) stops the canary and closes the store."""

    def __init__(self, alert: AlertSettings, store: ClickHouseStore, runner: AlertRunner) -> None:
        self.alert, self.store, self.runner = alert, store, runner

    @classmethod
    def build(
        cls,
        settings: ServiceSettings,
        rules: RuleSet,
        *,
        once: bool = False,
        lease: bool = True,
        transport: httpx2.AsyncBaseTransport | None = None,
    ) -> AlertService:
        """The service of `settings` and `rules`. `once`: a canary run due is judged within the round (else in the
        background); `lease`: take the lease in alert_leases (off only when exactly one evaluator runs)."""
        alert = settings.alert
        notifiers = build_notifiers(alert, transport)
        store = open_store(settings.store, writes=True)
        try:
            canary = build_canary(settings, store, background=not once) if alert.canary_on else None
        except BaseException:
            store.close()
            raise
        lease_ttl = alert.interval * 3 if lease else None
        runner = AlertRunner(
            store,
            rules,
            notifiers,
            traffic_table=alert.traffic_table,
            replica=alert.replica_id,
            lease_ttl=lease_ttl,
            canary=canary,
            ui_url=alert.ui_url or "",
        )
        return cls(alert, store, runner)

    @property
    def replica(self) -> str:
        """This replica's name in the lease and state tables."""
        return self.runner.state_store.writer

    @property
    def notifier_names(self) -> list[str]:
        """The configured notifiers, in their order."""
        return [n.name for n in self.runner.notifiers]

    def run_once(self) -> RoundReport:
        """One round now."""
        return self.runner.run_once()

    def run_until(self, stop: threading.Event) -> None:
        """Rounds every ALERTS_INTERVAL until `stop` is set, serving the metrics port if one is set."""
        self.runner.run_forever(self.alert.interval, stop, metrics_port=self.alert.metrics_port)

    def close(self) -> None:
        """Stop a canary run in progress and close the store."""
        try:
            if self.runner.canary is not None:
                self.runner.canary.close()
        finally:
            self.store.close()

    def __enter__(self) -> AlertService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
