"""Starting a Kafka client: within the connect timeout, and with a failure to reach the brokers turned into one
line for the operator (`KafkaUnavailable`) saying why, in words, rather than aiokafka's reprs."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from collections.abc import Iterator
from typing import Protocol

from aiokafka.errors import KafkaConnectionError, KafkaError

from consumers.security import ssl_context
from consumers.settings import KafkaSettings
from schemas.errors import KafkaUnavailable


class _Startable(Protocol):
    async def start(self) -> None: ...


async def start_client(client: _Startable, kafka: KafkaSettings) -> None:
    """`client.start()` within `connect_timeout_s`, with a failure to reach the brokers raised as `KafkaUnavailable`.

    A failed start closes the client (no "Unclosed AIOKafka..." warning later) and holds back aiokafka's own log
    line about it: the one-line error says the same, with the reason found by `unreachable_reason`."""
    try:
        with _library_quiet():
            await asyncio.wait_for(client.start(), timeout=kafka.connect_timeout_s)
    except BaseException as e:
        await _close_quietly(client)
        if not isinstance(e, KafkaError | TimeoutError):
            raise  # a cancel or a bug, not the brokers
        raise _start_failure(e, kafka, await unreachable_reason(kafka)) from e


def _start_failure(e: KafkaError | TimeoutError, kafka: KafkaSettings, reason: str | None) -> KafkaUnavailable:
    """The operator's one line for a failed start, from the probe's `reason` rather than aiokafka's message (which
    ends in Python reprs such as `<AddressFamily.AF_UNSPEC: 0>`)."""
    servers, hint = kafka.bootstrap_servers, "(check MONITOR_KAFKA_BOOTSTRAP_SERVERS)"
    if not isinstance(e, TimeoutError | KafkaConnectionError):
        return KafkaUnavailable(f"Kafka error: {type(e).__name__}: {e}")
    if reason is not None and reason.startswith("TLS"):
        hint = "(check MONITOR_KAFKA_SSL_CAFILE, MONITOR_KAFKA_SSL_CERTFILE and MONITOR_KAFKA_SSL_CHECK_HOSTNAME)"
    elif reason is None and isinstance(e, TimeoutError):
        return KafkaUnavailable(
            f"no answer from Kafka at {servers} within {kafka.connect_timeout_s:g}s "
            "(check MONITOR_KAFKA_BOOTSTRAP_SERVERS, or raise MONITOR_KAFKA_CONNECT_TIMEOUT_S)"
        )
    elif reason is None:  # the port answers, but not as a Kafka broker speaking this protocol
        reason = "the server accepts connections but did not answer as a Kafka broker"
        hint = "(check the port in MONITOR_KAFKA_BOOTSTRAP_SERVERS and MONITOR_KAFKA_SECURITY_PROTOCOL)"
    return KafkaUnavailable(f"cannot reach Kafka at {servers}: {reason} {hint}")


class _LibraryQuiet(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return False


_QUIET_LOGGERS = ("aiokafka", "aiokafka.conn", "aiokafka.client")


@contextlib.contextmanager
def _library_quiet() -> Iterator[None]:
    """Hold back aiokafka's records while a client starts: a failure is reported once, by `start_client`."""
    quiet = _LibraryQuiet()
    loggers = [logging.getLogger(name) for name in _QUIET_LOGGERS]
    for logger in loggers:
        logger.addFilter(quiet)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeFilter(quiet)


async def _close_quietly(client: _Startable) -> None:
    # Consumers and producers stop; the admin client has close() instead, which its caller already calls.
    stop = getattr(client, "stop", None)
    if stop is not None:
        with contextlib.suppress(Exception):
            await stop()


async def unreachable_reason(kafka: KafkaSettings) -> str | None:
    """Why the first bootstrap server cannot be reached, in words (refused, not resolved, TLS), or None when a
    connection (and TLS handshake, with TLS) succeeds: aiokafka reports only "Unable to bootstrap", with reprs."""
    host, _, port = kafka.bootstrap_servers.split(",")[0].strip().rpartition(":")
    host, port = (host, port) if host else (port, "9092")
    tls = kafka.security_protocol in ("SSL", "SASL_SSL")
    try:
        _, writer = await asyncio.wait_for(
            asyncio.open_connection(host.strip("[]"), int(port), ssl=ssl_context(kafka) if tls else None),
            timeout=min(5.0, kafka.connect_timeout_s),
        )
    except ssl.SSLCertVerificationError as e:
        return f"TLS handshake failed: certificate verify failed: {e.verify_message}"
    except ssl.SSLError as e:
        return f"TLS handshake failed: {e.reason or e}"
    except ConnectionRefusedError:
        return "connection refused"
    except socket.gaierror:
        return f"host name {host} not resolved"
    except TimeoutError:
        return "no answer"
    except OSError as e:
        return f"{host}:{port}: {e.strerror or type(e).__name__}"
    except ValueError:
        return None
    writer.close()
    return None
