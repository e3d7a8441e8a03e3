"""Secure connections (issue 11): Kafka over TLS (a CA of the test's own, mutual TLS, hostname checking) and SASL,
and ClickHouse over https with credentials from the settings. Certificates are made in the test (trustme); the
Kafka TLS endpoint is an asyncio TLS proxy in front of the test's tansu broker, which advertises the proxy; the
ClickHouse one is a TLS HTTP server of the test that records each request and answers as ClickHouse refusing it.
Last, the dead-letter topic's creation (partitions, replication, MONITOR_DLQ_CREATE), which goes through the same
admin client."""

from __future__ import annotations

import base64
import os
import ssl
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import clickhouse_connect
import pytest
import trustme
from aiokafka.admin import AIOKafkaAdminClient

from consumers.client_start import start_client
from consumers.clients import client_kwargs, make_producer
from consumers.settings import KafkaSettings
from consumers.topics import ensure_dlq_topic, ensure_topics
from monitor.config import load_settings
from monitor.devtools.localbroker import LocalBroker
from monitor.store.connection import ClickHouseStore
from schemas.errors import ConfigError, KafkaUnavailable, StoreError
from tests.tcp_proxy import ProxiedBroker, TcpProxy


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for k in list(os.environ):
        if k.startswith(("MONITOR_", "ALERTS_", "ANTHROPIC_")):
            monkeypatch.delenv(k)


class Pki:
    """A test CA, a server certificate for 127.0.0.1 (or only `localhost`) and a client certificate, as PEM files."""

    def __init__(self, directory: Path, *server_names: str) -> None:
        self.ca = trustme.CA()
        self.server = self.ca.issue_cert(*(server_names or ("127.0.0.1", "localhost")))
        self.client = self.ca.issue_cert("relevancy-monitor@test")
        self.ca_file = directory / "ca.pem"
        self.ca.cert_pem.write_to_path(str(self.ca_file))
        self.client_cert = directory / "client.pem"
        self.client_key = directory / "client.key"
        for blob in self.client.cert_chain_pems:
            blob.write_to_path(str(self.client_cert), append=True)
        self.client.private_key_pem.write_to_path(str(self.client_key))
        self.other_ca_file = directory / "other-ca.pem"  # a CA that signed nothing here
        trustme.CA().cert_pem.write_to_path(str(self.other_ca_file))

    def server_context(self, require_client_cert: bool = False) -> ssl.SSLContext:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.server.configure_cert(ctx)
        if require_client_cert:
            self.ca.configure_trust(ctx)
            ctx.verify_mode = ssl.CERT_REQUIRED
        return ctx


class TlsProxy(TcpProxy):
    """`TcpProxy` that ends TLS: clients speak TLS to it, it speaks plain TCP to the broker."""

    def __init__(self, target_port: int, context: ssl.SSLContext) -> None:
        super().__init__(target_port)
        self.context = context

    def _tls(self) -> ssl.SSLContext | None:
        return self.context


class TlsBroker(ProxiedBroker):
    """tansu on a private port advertising a `TlsProxy` in front of it: every client connection is TLS."""

    def __init__(self, context: ssl.SSLContext) -> None:
        super().__init__(lambda port: TlsProxy(port, context))


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """The module's CA and certificates."""
    return Pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def tls_broker(pki: Pki) -> Iterator[TlsBroker]:
    """tansu behind a TLS proxy with the test CA's server certificate."""
    with TlsBroker(pki.server_context()) as b:
        yield b


@pytest.fixture(scope="module")
def mtls_broker(pki: Pki) -> Iterator[TlsBroker]:
    """tansu behind a TLS proxy that requires a client certificate signed by the test CA."""
    with TlsBroker(pki.server_context(require_client_cert=True)) as b:
        yield b


def _kafka(bootstrap: str, **kw: Any) -> KafkaSettings:
    return KafkaSettings(
        kafka_bootstrap_servers=bootstrap, kafka_security_protocol="SSL", **{"kafka_connect_timeout_s": 10.0, **kw}
    )


async def _round_trip(kafka: KafkaSettings) -> None:
    """Create the dead-letter topic and produce one record to it: the admin client and the producer both connect."""
    assert await ensure_dlq_topic(kafka) == [kafka.dlq_topic]
    producer = make_producer(kafka)
    await start_client(producer, kafka)
    try:
        await producer.send_and_wait(kafka.dlq_topic, b"x")
    finally:
        await producer.stop()


async def test_a_client_trusting_the_test_ca_connects_over_tls(tls_broker: TlsBroker, pki: Pki) -> None:
    """With MONITOR_KAFKA_SSL_CAFILE naming the CA of the broker's certificate, the admin client and producer
    connect."""
    s = load_settings(
        kafka_bootstrap_servers=tls_broker.bootstrap, kafka_security_protocol="SSL", kafka_ssl_cafile=str(pki.ca_file)
    )
    kafka = _kafka(tls_broker.bootstrap, kafka_ssl_cafile=s.kafka.ssl_cafile, dlq_topic=f"dlq-{uuid.uuid4().hex[:8]}")
    await _round_trip(kafka)


@pytest.mark.parametrize("cafile", ["none", "other"])
async def test_a_client_not_trusting_the_broker_fails_with_one_line(
    tls_broker: TlsBroker, pki: Pki, cafile: str
) -> None:
    """Without the broker's CA (system CAs, or another CA) start-up fails with one KafkaUnavailable line saying TLS
    failed."""
    kafka = _kafka(tls_broker.bootstrap, kafka_ssl_cafile=None if cafile == "none" else pki.other_ca_file)
    with pytest.raises(KafkaUnavailable) as info:
        await ensure_dlq_topic(kafka)
    msg = str(info.value)
    assert "\n" not in msg and "TLS handshake failed" in msg and "certificate verify failed" in msg, msg
    assert "MONITOR_KAFKA_SSL_CAFILE" in msg, msg


async def test_hostname_checking_follows_its_setting(tmp_path: Path) -> None:
    """A certificate for `localhost` only, reached as 127.0.0.1: refused by default, accepted with hostname checks
    off."""
    pki = Pki(tmp_path, "localhost")
    with TlsBroker(pki.server_context()) as broker:
        with pytest.raises(KafkaUnavailable) as info:
            await ensure_dlq_topic(_kafka(broker.bootstrap, kafka_ssl_cafile=pki.ca_file))
        assert "TLS handshake failed" in str(info.value) and "\n" not in str(info.value)
        await _round_trip(
            _kafka(broker.bootstrap, kafka_ssl_cafile=pki.ca_file, kafka_ssl_check_hostname=False, dlq_topic="dlq-host")
        )


async def test_mutual_tls_sends_the_client_certificate(mtls_broker: TlsBroker, pki: Pki) -> None:
    """A broker requiring client certificates accepts MONITOR_KAFKA_SSL_CERTFILE/KEYFILE and refuses a client
    without."""
    await _round_trip(
        _kafka(
            mtls_broker.bootstrap,
            kafka_ssl_cafile=pki.ca_file,
            kafka_ssl_certfile=pki.client_cert,
            kafka_ssl_keyfile=pki.client_key,
        )
    )
    with pytest.raises(KafkaUnavailable) as info:
        await ensure_dlq_topic(_kafka(mtls_broker.bootstrap, kafka_ssl_cafile=pki.ca_file, kafka_connect_timeout_s=5.0))
    assert "\n" not in str(info.value)


def test_the_tls_context_carries_the_settings(pki: Pki) -> None:
    """client_kwargs builds one TLS context from the CA, the client certificate and the hostname setting."""
    kw = client_kwargs(
        _kafka(
            "b:9093",
            kafka_ssl_cafile=pki.ca_file,
            kafka_ssl_certfile=pki.client_cert,
            kafka_ssl_keyfile=pki.client_key,
            kafka_ssl_check_hostname=False,
        )
    )
    ctx = kw["ssl_context"]
    assert isinstance(ctx, ssl.SSLContext) and ctx.check_hostname is False and ctx.verify_mode == ssl.CERT_REQUIRED
    assert any("relevancy-monitor" not in str(c) for c in ctx.get_ca_certs())  # the test CA, loaded from the file
    assert client_kwargs(_kafka("b:9093"))["ssl_context"].check_hostname is True


@pytest.mark.parametrize(
    ("files", "variable"),
    [
        ({"kafka_ssl_cafile": "garbage"}, "MONITOR_KAFKA_SSL_CAFILE"),
        ({"kafka_ssl_certfile": "garbage"}, "MONITOR_KAFKA_SSL_CERTFILE"),
        ({"kafka_ssl_certfile": "cert", "kafka_ssl_keyfile": "garbage"}, "MONITOR_KAFKA_SSL_KEYFILE"),
    ],
)
def test_an_unusable_tls_file_is_one_line_naming_its_variable(
    tmp_path: Path, pki: Pki, files: dict[str, str], variable: str
) -> None:
    """A CA, certificate or key file that is not PEM of its kind is a one-line ConfigError naming its variable."""
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    paths = {"garbage": garbage, "cert": pki.client_cert}
    with pytest.raises(ConfigError) as info:
        client_kwargs(_kafka("b:9093", **{k: paths[v] for k, v in files.items()}))
    assert str(info.value).startswith(f"invalid setting {variable}: ") and "\n" not in str(info.value), str(info.value)


def test_an_unreadable_tls_file_names_its_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A CA file the process may not read is refused at load, naming MONITOR_KAFKA_SSL_CAFILE (or the ClickHouse
    one)."""
    locked = tmp_path / "ca.pem"
    locked.write_text("x")
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    for setting in ("kafka_ssl_cafile", "clickhouse_ca_file"):
        with pytest.raises(ConfigError) as info:
            load_settings(**{setting: str(locked)})
        assert str(info.value).startswith(f"invalid setting MONITOR_{setting.upper()}: cannot read"), str(info.value)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_without_credentials_is_one_line_naming_the_variables(mechanism: str) -> None:
    """A SASL mechanism without a username or password is a ConfigError naming both variables; with them it is passed
    on."""
    partial: list[dict[str, Any]] = [{"kafka_sasl_username": "u"}, {"kafka_sasl_password": "p"}, {}]
    for missing in partial:
        kafka = KafkaSettings(
            kafka_bootstrap_servers="b:9093",
            kafka_security_protocol="SASL_SSL",
            kafka_sasl_mechanism=mechanism,
            **missing,
        )
        with pytest.raises(ConfigError) as info:
            client_kwargs(kafka)
        msg = str(info.value)
        assert (
            "MONITOR_KAFKA_SASL_USERNAME" in msg
            and "MONITOR_KAFKA_SASL_PASSWORD" in msg
            and mechanism in msg
            and "\n" not in msg
        ), msg
    kw = client_kwargs(
        KafkaSettings(
            kafka_bootstrap_servers="b:9093",
            kafka_security_protocol="SASL_PLAINTEXT",
            kafka_sasl_mechanism=mechanism,
            kafka_sasl_username="u",
            kafka_sasl_password="p",
        )
    )
    assert (kw["sasl_mechanism"], kw["sasl_plain_username"], kw["sasl_plain_password"]) == (mechanism, "u", "p")


@pytest.mark.parametrize(
    ("kafka", "variable"),
    [
        (
            KafkaSettings(
                kafka_bootstrap_servers="b:9092",
                kafka_sasl_mechanism="PLAIN",
                kafka_sasl_username="u",
                kafka_sasl_password="p",
            ),
            "MONITOR_KAFKA_SASL_MECHANISM",
        ),
        (KafkaSettings(kafka_bootstrap_servers="b:9092", kafka_ssl_cafile=Path(__file__)), "MONITOR_KAFKA_SSL_CAFILE"),
    ],
)
def test_security_settings_the_protocol_would_ignore_are_refused(kafka: KafkaSettings, variable: str) -> None:
    """SASL or TLS settings with MONITOR_KAFKA_SECURITY_PROTOCOL=PLAINTEXT are refused in one line rather than
    ignored."""
    with pytest.raises(ConfigError) as info:
        client_kwargs(kafka)
    assert str(info.value).startswith(f"invalid setting {variable}: ") and "MONITOR_KAFKA_SECURITY_PROTOCOL" in str(
        info.value
    )


# ---- ClickHouse over https ----------------------------------------------------------------------------------


class FakeClickHouse:
    """An https server with the test's certificate that records each request's credentials and answers as a
    ClickHouse refusing the user (HTTP 516), so a client that got through TLS fails with ClickHouse's message."""

    def __init__(self, context: ssl.SSLContext) -> None:
        self.seen: list[tuple[str | None, str | None]] = []
        seen = self.seen

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                user, password = self.headers.get("X-ClickHouse-User"), self.headers.get("X-ClickHouse-Key")
                auth = self.headers.get("Authorization", "")
                if auth.startswith("Basic "):
                    user, _, password = base64.b64decode(auth[6:]).decode().partition(":")
                seen.append((user, password))
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                body = b"Code: 516. DB::Exception: fake-clickhouse: Authentication failed. (AUTHENTICATION_FAILED)\n"
                self.send_response(401)
                self.send_header("X-ClickHouse-Exception-Code", "516")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _answer

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> FakeClickHouse:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def fake_clickhouse(pki: Pki) -> Iterator[FakeClickHouse]:
    """A fresh fake https ClickHouse with the test CA's certificate."""
    with FakeClickHouse(pki.server_context()) as server:
        yield server


def _open(url: str, **settings: Any) -> str:
    s = load_settings(clickhouse_url=url, **settings)
    with pytest.raises(StoreError) as info:
        ClickHouseStore.from_settings(s.store).open()
    assert "\n" not in str(info.value)
    return str(info.value)


def test_clickhouse_https_trusts_the_configured_ca_and_sends_the_configured_credentials(
    fake_clickhouse: FakeClickHouse, pki: Pki
) -> None:
    """With MONITOR_CLICKHOUSE_CA_FILE the TLS handshake succeeds (the server answers) and
    MONITOR_CLICKHOUSE_USER/PASSWORD are sent over those in the URL; the password never appears in the error."""
    url = fake_clickhouse.url.replace("https://", "https://urluser:urlpw@")
    msg = _open(url, clickhouse_ca_file=str(pki.ca_file), clickhouse_user="monitor", clickhouse_password="s3cret")
    assert "fake-clickhouse: Authentication failed" in msg and "s3cret" not in msg and "urlpw" not in msg, msg
    assert fake_clickhouse.seen and set(fake_clickhouse.seen) == {("monitor", "s3cret")}


def test_clickhouse_https_without_the_ca_fails_on_the_certificate(fake_clickhouse: FakeClickHouse, pki: Pki) -> None:
    """Without the CA (or with another one) the client refuses the server's certificate; MONITOR_CLICKHOUSE_VERIFY=false
    skips the check, and the request reaches the server."""
    for extra in ({}, {"clickhouse_ca_file": str(pki.other_ca_file)}):
        msg = _open(fake_clickhouse.url, **extra)
        assert "CERTIFICATE_VERIFY_FAILED" in msg or "certificate verify failed" in msg, msg
    assert fake_clickhouse.seen == []
    assert "fake-clickhouse" in _open(fake_clickhouse.url, clickhouse_verify=False)


def test_the_store_settings_reach_get_client(monkeypatch: pytest.MonkeyPatch, pki: Pki) -> None:
    """ClickHouseStore.from_settings passes user, password, CA and verify to clickhouse_connect.get_client; none for
    chdb."""
    calls: list[dict[str, Any]] = []

    def get_client(**kw: Any) -> object:
        calls.append(kw)
        return object()

    monkeypatch.setattr(clickhouse_connect, "get_client", get_client)
    s = load_settings(
        clickhouse_url="https://ch:8443",
        clickhouse_user="u",
        clickhouse_password="pw",
        clickhouse_ca_file=str(pki.ca_file),
    )
    ClickHouseStore.from_settings(s.store).open()
    want = {
        "dsn": "https://ch:8443",
        "interface": "https",
        "username": "u",
        "password": "pw",
        "verify": True,
        "ca_cert": str(pki.ca_file),
    }
    assert calls[-1] == want
    ClickHouseStore.from_settings(load_settings(clickhouse_url="chdb:///tmp/x", clickhouse_user="u").store).open()
    # The embedded engine gets no user or TLS, only its start-up configuration (monitor/store/embedded_engine.py)
    assert calls[-1].keys() == {"dsn", "chdb_options"} and calls[-1]["dsn"] == "chdb:///tmp/x"
    assert list(calls[-1]["chdb_options"]) == ["config-file"]


# ---- the dead-letter topic ----------------------------------------------------------------------------------


async def _partitions_and_replicas(bootstrap: str, topic: str) -> tuple[int, int] | None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        if topic not in await admin.list_topics():
            return None
        (described,) = await admin.describe_topics([topic])
        parts = described["partitions"]
        return len(parts), len(parts[0]["replicas"])
    finally:
        await admin.close()


async def test_the_dead_letter_topic_is_created_with_the_configured_partitions(broker: LocalBroker) -> None:
    """A missing DLQ is created with MONITOR_DLQ_PARTITIONS (not 1) and min(3, brokers) replicas, even when the caller
    (the service) asks for 1 partition; an existing one is left alone."""
    s = load_settings(
        kafka_bootstrap_servers=broker.bootstrap, dlq_topic=f"dlq-{uuid.uuid4().hex[:8]}", dlq_partitions=5
    )
    assert s.kafka.dlq_partitions == 5 and s.kafka.dlq_replication_factor is None
    assert await ensure_topics(s.kafka, {s.kafka.dlq_topic: 1}) == [s.kafka.dlq_topic]
    assert await _partitions_and_replicas(broker.bootstrap, s.kafka.dlq_topic) == (5, 1)  # one broker here
    assert await ensure_dlq_topic(s.kafka) == []


async def test_dlq_create_false_creates_nothing(broker: LocalBroker, monkeypatch: pytest.MonkeyPatch) -> None:
    """MONITOR_DLQ_CREATE=false: the DLQ is neither created nor even looked up (no admin client at all)."""
    s = load_settings(
        kafka_bootstrap_servers=broker.bootstrap, dlq_topic=f"dlq-{uuid.uuid4().hex[:8]}", dlq_create=False
    )
    assert await ensure_dlq_topic(s.kafka) == []
    assert await _partitions_and_replicas(broker.bootstrap, s.kafka.dlq_topic) is None
    monkeypatch.setattr(AIOKafkaAdminClient, "__init__", lambda *a, **k: pytest.fail("an admin client was made"))
    assert await ensure_topics(s.kafka, {s.kafka.dlq_topic: 1}) == []


async def test_a_broker_refusing_to_create_the_dlq_is_one_line(
    broker: LocalBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A CreateTopics error (no ACL to create) is one KafkaUnavailable line naming the topic and MONITOR_DLQ_CREATE."""

    class Refused:
        topic_errors: ClassVar = [("dlq-x", 29, "not allowed")]  # TOPIC_AUTHORIZATION_FAILED

    async def refuse(self: AIOKafkaAdminClient, topics: list[Any], *a: Any, **k: Any) -> Refused:
        return Refused()

    monkeypatch.setattr(AIOKafkaAdminClient, "create_topics", refuse)
    s = load_settings(kafka_bootstrap_servers=broker.bootstrap, dlq_topic="dlq-x", dlq_replication_factor=2)
    with pytest.raises(KafkaUnavailable) as info:
        await ensure_dlq_topic(s.kafka)
    msg = str(info.value)
    assert (
        "\n" not in msg and "dlq-x with 3 partitions x 2 replicas" in msg and "TopicAuthorizationFailedError" in msg
    ), msg
    assert "MONITOR_DLQ_CREATE=false" in msg, msg
