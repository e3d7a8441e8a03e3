"""TLS and SASL of the Kafka clients: the TLS context from the MONITOR_KAFKA_SSL_* files, and the check that the
security settings work together. An incomplete or contradictory combination, or a file that is not what its variable
says, is a one-line `ConfigError` naming the variables."""

from __future__ import annotations

import ssl
from pathlib import Path

from aiokafka.helpers import create_ssl_context

from consumers.settings import KafkaSettings
from schemas.errors import ConfigError

_TLS_FILES = (
    ("ssl_cafile", "MONITOR_KAFKA_SSL_CAFILE"),
    ("ssl_certfile", "MONITOR_KAFKA_SSL_CERTFILE"),
    ("ssl_keyfile", "MONITOR_KAFKA_SSL_KEYFILE"),
)


def _file_error(variable: str, path: Path, e: Exception) -> ConfigError:
    reason = (
        e.strerror
        if isinstance(e, OSError) and e.strerror
        else (getattr(e, "reason", None) or str(e) or type(e).__name__)
    )
    return ConfigError(f"invalid setting {variable}: cannot use {path} ({reason})")


def _holds_certificates(path: Path) -> bool:
    try:
        ssl.create_default_context().load_verify_locations(cafile=path)
    except (OSError, ssl.SSLError, ValueError):
        return False
    return True


def ssl_context(kafka: KafkaSettings) -> ssl.SSLContext:
    """The TLS context of the Kafka clients: the CA of MONITOR_KAFKA_SSL_CAFILE (else the system's), the client
    certificate and key for mutual TLS, hostname checking per MONITOR_KAFKA_SSL_CHECK_HOSTNAME. A file that cannot
    be read or is not PEM of its kind is a one-line `ConfigError` naming its variable."""
    try:
        context: ssl.SSLContext = create_ssl_context(cafile=kafka.ssl_cafile)
    except (OSError, ssl.SSLError, ValueError) as e:
        assert kafka.ssl_cafile is not None  # the system's CAs load without error
        raise _file_error("MONITOR_KAFKA_SSL_CAFILE", kafka.ssl_cafile, e) from None
    if kafka.ssl_certfile is not None:
        try:
            context.load_cert_chain(kafka.ssl_certfile, kafka.ssl_keyfile)
        except (OSError, ssl.SSLError, ValueError) as e:
            bad_key = kafka.ssl_keyfile is not None and _holds_certificates(kafka.ssl_certfile)
            variable, path = (
                ("MONITOR_KAFKA_SSL_KEYFILE", kafka.ssl_keyfile)
                if bad_key
                else ("MONITOR_KAFKA_SSL_CERTFILE", kafka.ssl_certfile)
            )
            assert path is not None
            raise _file_error(variable, path, e) from None
    context.check_hostname = kafka.ssl_check_hostname
    return context


def check_security(kafka: KafkaSettings) -> None:
    """Refuse, in one line naming the variables, security settings that cannot work together: TLS files without a
    TLS protocol, a SASL mechanism without a SASL protocol, SASL without both username and password."""
    tls = kafka.security_protocol in ("SSL", "SASL_SSL")
    sasl = kafka.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")
    for attr, variable in _TLS_FILES:
        if getattr(kafka, attr) is not None and not tls:
            raise ConfigError(
                f"invalid setting {variable}: needs MONITOR_KAFKA_SECURITY_PROTOCOL=SSL or SASL_SSL (it is "
                f"{kafka.security_protocol})"
            )
    if kafka.sasl_mechanism and not sasl:
        raise ConfigError(
            f"invalid setting MONITOR_KAFKA_SASL_MECHANISM: needs MONITOR_KAFKA_SECURITY_PROTOCOL=SASL_SSL or "
            "SASL_PLAINTEXT "
            f"(it is {kafka.security_protocol})"
        )
    if sasl:
        missing = [
            v
            for v, given in (
                ("MONITOR_KAFKA_SASL_USERNAME", kafka.sasl_username),
                ("MONITOR_KAFKA_SASL_PASSWORD", kafka.sasl_password),
            )
            if not given
        ]
        if missing:
            mechanism = kafka.sasl_mechanism or "PLAIN"
            raise ConfigError(
                f"invalid setting MONITOR_KAFKA_SASL_MECHANISM: SASL {mechanism} needs MONITOR_KAFKA_SASL_USERNAME and "
                f"MONITOR_KAFKA_SASL_PASSWORD ({' and '.join(missing)} not set)"
            )
