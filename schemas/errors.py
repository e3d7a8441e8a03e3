"""The one exception tree of relevancy-monitor. Every error the project raises on purpose is a `MonitorError`;
its message is the single line an operator should see, and the command line prints exactly that (in one place,
`monitor.cli.main`). Anything else that escapes is a bug and keeps its traceback.

    MonitorError
    ├── UsageError              bad command-line input (exit 2)
    │   ├── BacktestError       an invalid backtest range or step
    │   ├── LabelsError         a labelled set (calibrate, canaries) that cannot be read; names the line
    │   └── ReplayRefused       a replay stopped before judging (cost over the threshold, range past the retention, ...)
    ├── ConfigError             a setting is missing or invalid; names the environment variable (exit 2)
    │   ├── SamplingConfigError the sampling rules file
    │   ├── RulesError          the alert rules file
    │   └── PortInUse           a port the process must listen on is held by another process
    ├── DecodeError             a Kafka record that cannot be judged: dead-lettered with `reason`, never fatal
    │   └── RedactionFailed     the redactor raised on an event: dead-lettered as redaction_failed, never judged
    ├── KafkaUnavailable        the brokers cannot be reached
    ├── LocalBrokerError        the local tansu broker is missing or did not start
    ├── StoreError              ClickHouse cannot be opened, or a statement failed
    │   └── QueryError          an alert rule's data could not be read
    │       └── RuleError       one rule's data could not be read this round; names the rule
    ├── SinkClosed              the sink gave up a batch on shutdown (its offsets stay uncommitted)
    ├── NotifyError             an alert notification was not delivered after its retries
    └── JudgeError              a judge could not produce a score; `reason` is a stable code
        ├── JudgeReplyInvalid   the judge replied, but not with a valid verdict
        ├── JudgeUnavailable    unreachable or failing transiently; `kind` says how (rate_limited, ...)
        ├── JudgeApiError       the API refused the request for a reason retrying cannot fix
        └── ProviderCallFailed  one call to the judge's provider failed; the judge client retries or gives up

This module sits at the bottom of the import layers (schemas → consumers → monitor), so every layer can raise
from the same tree.
"""

from __future__ import annotations

import traceback
from typing import Generic, TypeVar

from schemas.usage import Usage

R = TypeVar("R")

EXIT_FAILURE = 1
EXIT_USAGE = 2


class MonitorError(Exception):
    """Root of the tree. `str(err)` is the one line for the operator; `exit_code` what the CLI exits with."""

    exit_code = EXIT_FAILURE


class UsageError(MonitorError):
    """Bad command-line input."""

    exit_code = EXIT_USAGE


class BacktestError(UsageError):
    """The backtest range or step is invalid."""


class LabelsError(UsageError):
    """The labelled set cannot be read or a line is not a valid labelled pair (exit 2); names the line."""


class ReplayRefused(UsageError):
    """A replay stopped before judging anything: an estimate above MONITOR_REPLAY_CONFIRM_USD without --yes, a range
    past the retention, a store that kept no text, or a cap the judge's price cannot enforce (exit 2)."""


class ConfigError(MonitorError):
    """A setting is missing or invalid; the message is one line naming the setting."""

    exit_code = EXIT_USAGE


class SamplingConfigError(ConfigError):
    """The sampling file is missing, not YAML, or invalid; the message names the field."""


class RulesError(ConfigError):
    """The alert rules file cannot be read or is invalid; the message names the field."""


class PortInUse(ConfigError):
    """A listening port is taken; the message names the port, its setting and how to choose another."""


class DecodeError(MonitorError):
    """An event that cannot be judged. `reason` is a short stable code (a metric label); `detail` explains."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


class RedactionFailed(DecodeError):
    """The redactor raised on a sampled event: the event fails closed, dead-lettered with reason `redaction_failed`
    and never judged or stored. The detail names the event, the exception's type and where it was raised, never its
    message (which could quote the text)."""

    def __init__(self, event_id: str, error: Exception) -> None:
        frames = traceback.extract_tb(error.__traceback__)
        at = f" at {frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno} ({frames[-1].name})" if frames else ""
        super().__init__("redaction_failed", f"event {event_id}: the redactor raised {type(error).__name__}{at}")
        self.error_type = type(error).__name__


class KafkaUnavailable(MonitorError):
    """The Kafka brokers cannot be reached."""


class LocalBrokerError(MonitorError):
    """The local broker is not installed or did not start."""


class StoreError(MonitorError):
    """The store cannot be opened or a statement failed."""


class QueryError(StoreError):
    """A rule's data could not be read (missing table, ClickHouse error)."""


class RuleError(QueryError, Generic[R]):
    """A rule whose data could not be read this round: the round reports it and keeps the rule's states as they
    were. `rule` is the rule (the alerting room's type), `error` the store's one line; `str()` names the rule too."""

    def __init__(self, rule: R, name: str, error: str) -> None:
        super().__init__(f"alert rule {name}: {error}")
        self.rule = rule
        self.error = error


class SinkClosed(MonitorError):
    """The sink gave up writing a batch because it is shutting down; its tickets were not acknowledged."""


class NotifyError(MonitorError):
    """A notification could not be delivered after its retries."""


class JudgeError(MonitorError):
    """A judge could not produce a score. `reason` is a short stable code (a metric label and the row's error);
    `usage` is what the failed attempts cost (a `schemas.usage.Usage`, None when nothing was spent)."""

    reason = "judge_error"

    def __init__(self, message: str, usage: Usage | None = None) -> None:
        super().__init__(message)
        self.usage = usage


class JudgeReplyInvalid(JudgeError):
    """The judge replied, but not with a valid structured verdict."""

    reason = "invalid_reply"


class JudgeUnavailable(JudgeError):
    """The judge could not be reached or kept failing with transient errors (after the bounded retries).
    `kind` is the last failure (`rate_limited`, `overloaded`, `server_error`, `timeout`, `connection`, ...)."""

    reason = "unavailable"

    def __init__(self, message: str, kind: str = "unknown", usage: Usage | None = None) -> None:
        super().__init__(message, usage)
        self.kind = kind


class JudgeApiError(JudgeError):
    """The API refused the request for a reason retrying cannot fix (bad request, auth, permission, not found)."""

    reason = "api_error"


class ProviderCallFailed(JudgeError):
    """One call to the judge's provider produced no reply: `kind` says why (rate_limited, overloaded, server_error,
    timeout, connection, request_timeout, bad_response, api_error), `retry_after_s` what the server asked us to wait,
    `status` the HTTP status when there was one. Raised beneath the judge client, which retries it or turns it into
    `JudgeUnavailable` / `JudgeApiError`; a judge's caller never sees it."""

    def __init__(self, kind: str, detail: str, retry_after_s: float | None = None, status: int | None = None) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.detail = detail
        self.retry_after_s = retry_after_s
        self.status = status

    @property
    def transient(self) -> bool:
        """Whether a later attempt may succeed."""
        return self.kind != "api_error"

    @property
    def mode_refused(self) -> bool:
        """Whether the server refused the request's shape (400, 422, 501): a structured-output mode it lacks, which the
        mode probe answers by trying the next one. 401, 403 and 404 are the configuration's and end the probe."""
        return self.status in (400, 422, 501)
