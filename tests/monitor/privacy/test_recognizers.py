"""The built-in recognizers: each kind found in its usual formats, and the look-alikes that validation must keep."""

from __future__ import annotations

import pytest

from monitor.privacy.redactor import build_redactor
from monitor.privacy.settings import RedactionSettings

REDACTOR = build_redactor(RedactionSettings())


def redacted(text: str) -> str:
    """`text` as the default redactor leaves it."""
    return REDACTOR.redact(text).text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("My card 4539 1488 0343 6467 was charged twice", "My card [CARD] was charged twice"),
        ("Amex 3782-822463-10005 declined", "Amex [CARD] declined"),
        ("card:5555555555554444.", "card:[CARD]."),
        ("IBAN DE89 3704 0044 0532 0130 00 is mine", "IBAN [IBAN] is mine"),
        ("pay to gb82west12345698765432 today", "pay to [IBAN] today"),
        ("mail John.Doe+spam@mail.example.co.uk now", "mail [EMAIL] now"),
        ("call +44 20 7946 0958 or (415) 555-2671", "call [PHONE] or [PHONE]"),
        ("ring 0049 30 901820 tomorrow", "ring [PHONE] tomorrow"),
        ("UK: 020 7946 0958.", "UK: [PHONE]."),
        ("SSN 123-45-6789 on file", "SSN [SSN] on file"),
        ("my social security number is 123456789", "my social security number is [SSN]"),
        ("NINO QQ 12 34 56 C", "NINO [NATIONAL_ID]"),
        ("DNI 12345678Z, NIE X1234567L", "DNI [NATIONAL_ID], NIE [NATIONAL_ID]"),
        ("my BSN is 111222333", "my BSN is [NATIONAL_ID]"),
        ("server 203.0.113.7:8443 and fe80::1ff:fe23:4567:890a", "server [IP]:8443 and [IP]"),
        ("postgres://admin:hunter2@db.internal:5432/app", "postgres://[URL_CREDENTIALS]@db.internal:5432/app"),
        ("key sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789 leaked", "key [SECRET] leaked"),
        ("AWS AKIAIOSFODNN7EXAMPLE", "AWS [SECRET]"),
        ("Authorization: Bearer abcdefghijklmnop1234567890", "Authorization: Bearer [SECRET]"),
        ("password=hunter22", "password=[SECRET]"),
        ("my password is Summer2024! and my PIN is 4821", "my password is [SECRET] and my PIN is [SECRET]"),
    ],
)
def test_each_kind_is_replaced_by_its_placeholder(text: str, expected: str) -> None:
    """Every kind is found in a usual format and only the item itself becomes its placeholder."""
    assert redacted(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "Order A17 shipped on 2024-03-03 for $12.50; HTTP 404, then 503.",
        "Upgrade to v1.2.3.4 or version 1.2.3.4; build 10.0.19045.3803 on localhost:8080.",
        "Tracking 1Z999AA10123456784, ISBN 978-3-16-148410-0, uuid 550e8400-e29b-41d4-a716-446655440000.",
        "Order 4539 1488 0343 6468 failed Luhn; IBAN-like DE89 3704 0044 0532 0130 01 fails mod 97.",
        "Invalid SSNs: 000-12-3456, 666-12-3456, 912-34-5678; US number 123-456-7890 has no area code 123.",
        "std::vector, time 14:05:33, mac 00:1A:2B:3C:4D:5E, 1,000,000 users, 192.168 and 1.2.3.4.5",
        "Use sk-learn, it is risk-free; the bearer of bad news; token: none; @mention me; my password is incorrect",
        "Pin 3 of the connector; the PIN was wrong twice",
        "postgres://db.internal:5432/app and https://example.com/path?x=1",
    ],
)
def test_look_alikes_survive(text: str) -> None:
    """Order numbers, dates, prices, versions, ports, status codes and failed checksums are left as they are."""
    assert redacted(text) == text


def test_an_item_inside_a_longer_item_is_replaced_once_by_the_stronger_kind() -> None:
    """Where items overlap, the kind earlier in priority wins: URL credentials over the email-like password@host."""
    result = REDACTOR.redact("mysql://root:s3cret@db.example.com/x")
    assert result.text == "mysql://[URL_CREDENTIALS]@db.example.com/x" and result.counts == {"URL_CREDENTIALS": 1}


def test_a_private_key_block_is_one_secret() -> None:
    """A PEM private key, header to footer, becomes one [SECRET]."""
    pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA1234\nabcd==\n-----END RSA PRIVATE KEY-----"
    assert redacted(f"here:\n{pem}\nthanks") == "here:\n[SECRET]\nthanks"


def test_national_phone_formats_follow_the_configured_regions() -> None:
    """A national number is recognised only for a configured region; a +country number always is."""
    indian = "call 98765 43210 or +91 98765 43210"
    assert build_redactor(RedactionSettings()).redact(indian).text == "call 98765 43210 or [PHONE]"
    assert (
        build_redactor(RedactionSettings(redact_phone_regions=("IN",))).redact(indian).text == "call [PHONE] or [PHONE]"
    )
