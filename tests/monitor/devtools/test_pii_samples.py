"""The labelled personal-data corpus: deterministic, large and varied enough, every planted value valid under its
real-world validator, every checksum look-alike really failing it, and no item overlapping another."""

from __future__ import annotations

import base64
import binascii
import ipaddress
import json
import random
import re
from collections import Counter
from urllib.parse import urlsplit

import phonenumbers
import pytest
from stdnum import iban as stdnum_iban
from stdnum import luhn
from stdnum.ca import sin as ca_sin
from stdnum.de import idnr as de_idnr
from stdnum.es import dni as es_dni
from stdnum.es import nie as es_nie
from stdnum.fr import nir as fr_nir
from stdnum.in_ import aadhaar as in_aadhaar
from stdnum.it import codicefiscale as it_codicefiscale
from stdnum.nl import bsn as nl_bsn
from stdnum.us import ssn as us_ssn

from monitor.privacy.kinds import BUILTIN_KINDS, CARD, EMAIL, IBAN, IP, NATIONAL_ID, PHONE, SECRET, SSN, URL_CREDENTIALS
from tests.pii_corpus import (
    LabelledText,
    Planted,
    RelevancyCase,
    benign_value,
    labelled_texts,
    planted_value,
    relevancy_cases,
)

EMAIL_RE = re.compile(r"[A-Za-z0-9._%+-]+@(?:[A-Za-z0-9-]+\.)+[A-Za-z]{2,}")
NEW_TLDS = (".io", ".co.uk", ".museum", ".dev", ".app", ".travel", ".tech", ".studio")
PHONE_REGION = {"us": "US", "uk": "GB", "de": "DE", "fr": "FR"}


@pytest.fixture(scope="module")
def corpus() -> list[LabelledText]:
    """The default corpus, built once for the module."""
    return labelled_texts()


@pytest.fixture(scope="module")
def cases() -> list[RelevancyCase]:
    """The default relevancy cases, built once for the module."""
    return relevancy_cases()


# --- validators, written from the specifications, not from the generator -------------------------------------


def _digits(value: str) -> str:
    return re.sub(r"[\s.-]", "", value)


def _check_email(p: Planted) -> None:
    assert EMAIL_RE.fullmatch(p.value), p
    local, domain = p.value.split("@")
    assert not local.startswith(".") and not local.endswith(".") and ".." not in local
    if p.fmt == "plus":
        assert "+" in local
    elif p.fmt == "subdomain":
        assert domain.count(".") >= 2
    elif p.fmt == "dotted":
        assert local.count(".") >= 2
    elif p.fmt == "upper":
        assert any(c.isupper() for c in p.value)
    elif p.fmt == "new-tld":
        assert domain.lower().endswith(NEW_TLDS)
    else:
        assert p.fmt == "plain"


def _check_phone(p: Planted) -> None:
    region = PHONE_REGION.get(p.fmt.split("-")[0], "GB")  # GB dials abroad with 00, so it parses the idd-00 form too
    number = phonenumbers.parse(p.value, region)
    assert phonenumbers.is_valid_number(number), p
    shapes = {
        "e164": r"\+[1-9]\d{7,14}",
        "intl-spaced": r"\+\d{1,3}( \d+)+",
        "intl-dashed": r"\+\d{1,3}(-\d+)+",
        "idd-00": r"00\d{1,3}( \d+)+",
        "us-paren": r"\(\d{3}\) \d{3}-\d{4}",
        "us-dashed": r"\d{3}-\d{3}-\d{4}",
        "us-dotted": r"\d{3}\.\d{3}\.\d{4}",
        "uk-national": r"0\d{2,4} \d{3,4} ?\d{3,4}",
        "de-national": r"0\d{2,4} \d{5,9}",
        "fr-national": r"0\d( \d\d){4}",
    }
    assert re.fullmatch(shapes[p.fmt], p.value), p
    digits = re.sub(r"\D", "", p.value)
    if p.fmt.startswith("us-"):
        assert not (digits[3:6] == "555" and digits[6:8] == "01"), p  # no 555-01xx fiction numbers


def _check_card(p: Planted) -> None:
    brand, length, style = p.fmt.split("-")
    digits = _digits(p.value)
    assert digits.isdigit() and len(digits) == int(length) and luhn.is_valid(digits), p
    if brand == "visa":
        assert digits[0] == "4"
    elif brand == "mc":
        assert 51 <= int(digits[:2]) <= 55
    elif brand == "mc2":
        assert 2221 <= int(digits[:4]) <= 2720
    elif brand == "amex":
        assert digits[:2] in ("34", "37")
    else:
        assert brand == "discover" and (digits.startswith(("6011", "65")) or 644 <= int(digits[:3]) <= 649)
    if style == "compact":
        assert p.value == digits
    else:
        sizes = [4, 6, 5] if brand == "amex" else [4, 4, 4, 4]
        assert [len(g) for g in p.value.split(" " if style == "spaced" else "-")] == sizes, p


def _check_iban(p: Planted) -> None:
    _, cc, style = p.fmt.split("-")
    assert stdnum_iban.is_valid(p.value), p
    assert p.value[:2].lower() == cc
    compact = p.value.replace(" ", "")
    assert stdnum_iban.compact(p.value) == compact.upper()
    if style == "compact":
        assert p.value == compact and p.value.isupper()
    elif style == "spaced":
        assert re.fullmatch(r"[A-Z0-9]{4}( [A-Z0-9]{4})*( [A-Z0-9]{1,3})?", p.value), p
    else:
        assert p.value == p.value.lower()


def _check_ssn(p: Planted) -> None:
    shape = {"ssn-dashed": r"\d{3}-\d{2}-\d{4}", "ssn-spaced": r"\d{3} \d{2} \d{4}", "ssn-compact": r"\d{9}"}[p.fmt]
    assert re.fullmatch(shape, p.value), p
    d = _digits(p.value)
    area, group, serial = int(d[:3]), int(d[3:5]), int(d[5:])
    assert area not in (0, 666) and area < 900 and group != 0 and serial != 0, p
    assert us_ssn.is_valid(f"{d[:3]}-{d[3:5]}-{d[5:]}")


_NINO_RE = re.compile(r"(?!BG|GB|KN|NK|NT|TN|ZZ)[A-CEGHJ-PR-TW-Z][A-CEGHJ-NPR-TW-Z] ?\d{2} ?\d{2} ?\d{2} ?[A-D]")
_NID_VALIDATORS = {
    "dni": es_dni.is_valid,
    "nie": es_nie.is_valid,
    "codice": it_codicefiscale.is_valid,
    "nir": fr_nir.is_valid,
    "sin": ca_sin.is_valid,
    "aadhaar": in_aadhaar.is_valid,
    "bsn": nl_bsn.is_valid,
    "steuer": de_idnr.is_valid,
}


def _check_national_id(p: Planted) -> None:
    family = p.fmt.split("-")[0]
    if family == "nino":
        assert _NINO_RE.fullmatch(p.value), p
        assert (" " in p.value) == (p.fmt == "nino-spaced")
        return
    assert _NID_VALIDATORS[family](p.value), p
    shapes = {
        "dni": r"\d{8}[A-Z]",
        "dni-dashed": r"\d{8}-[A-Z]",
        "nie": r"[XYZ]\d{7}[A-Z]",
        "nie-dashed": r"[XYZ]-\d{7}-[A-Z]",
        "codice-fiscale": r"[A-Z]{6}\d{2}[A-Z]\d{2}[A-Z]\d{3}[A-Z]",
        "nir-spaced": r"[12] \d{2} \d{2} \d{2} \d{3} \d{3} \d{2}",
        "nir-compact": r"[12]\d{14}",
        "sin-dashed": r"\d{3}-\d{3}-\d{3}",
        "sin-spaced": r"\d{3} \d{3} \d{3}",
        "aadhaar-spaced": r"[2-9]\d{3} \d{4} \d{4}",
        "aadhaar-compact": r"[2-9]\d{11}",
        "bsn": r"\d{9}",
        "steuer-id-spaced": r"\d{2} \d{3} \d{3} \d{3}",
        "steuer-id-compact": r"\d{11}",
    }
    assert re.fullmatch(shapes[p.fmt], p.value), p


def _check_ip(p: Planted) -> None:
    addr = ipaddress.ip_address(p.value)
    if p.fmt == "ipv4-public":
        assert addr.version == 4 and addr.is_global, p
    elif p.fmt == "ipv4-private":
        assert addr.version == 4 and addr.is_private, p
    elif p.fmt == "ipv4-port":
        assert addr.version == 4
    elif p.fmt == "ipv6-full":
        assert addr.version == 6 and p.value.count(":") == 7 and "::" not in p.value
    elif p.fmt == "ipv6-compressed":
        assert addr.version == 6 and "::" in p.value
    elif p.fmt == "ipv6-link-local":
        assert addr.version == 6 and addr.is_link_local
    else:
        assert p.fmt == "ipv6-port" and addr.version == 6


_SECRET_SHAPES = {
    "anthropic": r"sk-ant-api03-[A-Za-z0-9_-]{90,}AA",
    "openai-proj": r"sk-proj-[A-Za-z0-9_-]{100,}",
    "openai-legacy": r"sk-[A-Za-z0-9]{48}",
    "aws-key-id": r"AKIA[A-Z0-9]{16}",
    "aws-secret": r"[A-Za-z0-9/+]{40}",
    "github-classic": r"ghp_[A-Za-z0-9]{36}",
    "github-fine": r"github_pat_[A-Za-z0-9]{22}_[A-Za-z0-9]{59}",
    "slack-bot": r"xoxb-\d{10,13}-\d{10,13}-[A-Za-z0-9]{24}",
    "stripe-secret": r"sk_live_[A-Za-z0-9]{24,}",
    "stripe-restricted": r"rk_live_[A-Za-z0-9]{24,}",
    "google-api-key": r"AIza[A-Za-z0-9_-]{35}",
    "jwt": r"eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+",
    "bearer-opaque": r"[A-Za-z0-9][A-Za-z0-9._~+/-]{20,}[A-Za-z0-9]",
}
_PEM_LABELS = {
    "pem-rsa": "RSA PRIVATE KEY",
    "pem-pkcs8": "PRIVATE KEY",
    "pem-ec": "EC PRIVATE KEY",
    "pem-openssh": "OPENSSH PRIVATE KEY",
}


def _b64url_json(part: str) -> dict:
    return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))


def _check_secret(p: Planted) -> None:
    if p.fmt in _PEM_LABELS:
        label = _PEM_LABELS[p.fmt]
        m = re.fullmatch(rf"-----BEGIN {label}-----\n([A-Za-z0-9+/=\n]+)\n-----END {label}-----", p.value)
        assert m, p.fmt
        lines = m.group(1).split("\n")
        assert len(lines) >= 2 and all(len(line) <= 70 for line in lines)
        try:
            base64.b64decode("".join(lines), validate=True)
        except binascii.Error:  # pragma: no cover - the assertion below says what went wrong
            pytest.fail(f"{p.fmt} body is not base64")
        return
    assert re.fullmatch(_SECRET_SHAPES[p.fmt], p.value), p
    if p.fmt == "jwt":
        header, claims, _ = p.value.split(".")
        assert "alg" in _b64url_json(header) and "exp" in _b64url_json(claims)
    if p.fmt == "bearer-opaque":
        assert not p.value.startswith("eyJ")


def _check_url_credentials(p: Planted, text: str | None) -> None:
    user, _, password = p.value.partition(":")
    assert user and password and "@" not in p.value and "/" not in p.value and p.value.count(":") == 1, p
    if text is None:
        return
    scheme = {"mongodb-srv": "mongodb+srv"}.get(p.fmt, p.fmt)
    m = re.search(rf"{re.escape(scheme)}://{re.escape(p.value)}@[^\s'\"]+", text)
    assert m, (p, text)
    url = urlsplit(m.group(0))
    assert url.scheme == scheme and f"{url.username}:{url.password}" == p.value and url.hostname


_CHECKS = {
    EMAIL: _check_email,
    PHONE: _check_phone,
    CARD: _check_card,
    IBAN: _check_iban,
    SSN: _check_ssn,
    NATIONAL_ID: _check_national_id,
    IP: _check_ip,
    SECRET: _check_secret,
}

# Formats that are plain numbers or strings without their name (or the syntax around them): they must come right
# after it in the text.
_CONTEXT = {
    "ssn-compact": r"(?:SSN|[Ss]ocial [Ss]ecurity (?:number|no\.))(?::| #| is)? ?",
    "bsn": r"(?:BSN|BSN-nummer|burgerservicenummer):? ",
    "steuer-id-spaced": (
        r"(?:Steuer-ID|Steuer-IdNr\.|steuerliche Identifikationsnummer|Steuerliche Identifikationsnummer|"
        r"IdNr):? "
    ),
    "steuer-id-compact": (
        r"(?:Steuer-ID|Steuer-IdNr\.|steuerliche Identifikationsnummer|Steuerliche Identifikationsnummer|"
        r"IdNr):? "
    ),
    "aadhaar-compact": r"Aadhaar(?: number| no\.)?:? ",
    "nir-compact": r"(?:NIR|[Nn]uméro de sécurité sociale|French social security number):? ",
    "aws-secret": r"(?i:aws_secret_access_key) ?= ?",
    "bearer-opaque": r"(?i:authorization): (?i:bearer) ",
    "ipv6-port": r"\[",
}
_FOLLOWED_BY = {"ipv4-port": r":\d{2,5}", "ipv6-port": r"\]:\d{2,5}"}


def check_planted(p: Planted, text: str | None = None) -> None:
    """Assert `p` is valid personal data of its kind and format (and, given its text, that its context is there)."""
    assert p.kind in BUILTIN_KINDS
    if p.kind == URL_CREDENTIALS:
        _check_url_credentials(p, text)
    else:
        _CHECKS[p.kind](p)
    if text is None:
        return
    assert p.value in text
    if p.fmt in _CONTEXT:
        assert re.search(_CONTEXT[p.fmt] + re.escape(p.value), text), (p.fmt, text)
    if p.fmt in _FOLLOWED_BY:
        assert re.search(re.escape(p.value) + _FOLLOWED_BY[p.fmt], text), (p.fmt, text)


# --- the tests -------------------------------------------------------------------------------------------------


def test_the_same_seed_gives_the_same_corpus(corpus: list[LabelledText]) -> None:
    """labelled_texts and relevancy_cases are pure functions of the seed, and another seed gives other data."""
    assert labelled_texts(0) == corpus
    assert relevancy_cases(0) == relevancy_cases(0)
    assert labelled_texts(1) != corpus
    assert relevancy_cases(1) != relevancy_cases(0)


def test_planted_value_and_benign_value_are_deterministic_for_an_rng() -> None:
    """planted_value and benign_value draw only from the rng they are given."""
    a, b = random.Random(5), random.Random(5)
    assert [planted_value(a, k) for k in BUILTIN_KINDS * 5] == [planted_value(b, k) for k in BUILTIN_KINDS * 5]
    assert [benign_value(a) for _ in range(50)] == [benign_value(b) for _ in range(50)]


def test_there_are_enough_items_of_every_kind_in_several_formats(corpus: list[LabelledText]) -> None:
    """At least 600 planted items, 50 of each kind, and at least 3 formats per kind, each seen a few times."""
    planted = [p for t in corpus for p in t.planted]
    assert len(planted) >= 600
    per_kind = Counter(p.kind for p in planted)
    assert set(per_kind) == set(BUILTIN_KINDS)
    assert min(per_kind.values()) >= 50, per_kind
    formats: dict[str, Counter[str]] = {k: Counter() for k in BUILTIN_KINDS}
    for p in planted:
        formats[p.kind][p.fmt] += 1
    for kind, fmts in formats.items():
        assert len(fmts) >= 3, (kind, fmts)
    assert min(n for fmts in formats.values() for n in fmts.values()) >= 2, formats


def test_every_format_of_every_kind_appears(corpus: list[LabelledText]) -> None:
    """The corpus covers the formats the redaction stage must handle, by name."""
    seen = {p.fmt for t in corpus for p in t.planted}
    required = {
        "plus", "subdomain", "dotted", "upper", "new-tld",
        "e164", "intl-spaced", "idd-00", "us-paren", "us-dashed", "us-dotted", "uk-national",
        "visa-16-spaced", "mc-16-compact", "mc2-16-dashed", "amex-15-spaced", "discover-16-spaced",
        "iban-de-spaced", "iban-gb-compact", "iban-fr-spaced", "iban-es-compact", "iban-nl-lower", "iban-it-spaced",
        "iban-be-compact",
        "iban-ch-spaced",
        "ssn-dashed", "ssn-spaced", "ssn-compact",
        "nino-spaced", "nino-compact", "dni", "nie", "codice-fiscale", "nir-spaced", "sin-dashed", "aadhaar-spaced",
        "bsn",
        "steuer-id-spaced", "steuer-id-compact",
        "ipv4-public", "ipv4-private", "ipv6-full", "ipv6-compressed", "ipv6-link-local", "ipv4-port",
        "anthropic", "openai-proj", "openai-legacy", "aws-key-id", "aws-secret", "github-classic", "github-fine",
        "slack-bot",
        "stripe-secret", "stripe-restricted", "google-api-key", "jwt", "bearer-opaque", "pem-rsa",
        "postgres", "mysql", "redis", "https", "amqp", "mongodb-srv",
    }  # fmt: skip
    assert required <= seen, required - seen
    phones = {p.value[:3] for t in corpus for p in t.planted if p.fmt in ("e164", "intl-spaced", "intl-dashed")}
    assert len(phones) >= 6 and {"+44", "+49", "+33"} <= phones, phones  # several countries, not only +1


def test_every_value_occurs_in_its_text(corpus: list[LabelledText]) -> None:
    """Each planted value and each benign look-alike is a verbatim substring of its text."""
    for t in corpus:
        for value in [p.value for p in t.planted] + list(t.benign):
            assert value and value in t.text, (value, t.text)


def test_every_planted_value_passes_its_real_validator(corpus: list[LabelledText]) -> None:
    """Cards pass Luhn, IBANs mod 97, phones libphonenumber, ids their stdnum check, IPs ipaddress, and so on."""
    for t in corpus:
        for p in t.planted:
            check_planted(p, t.text)


def test_planted_value_draws_valid_values_of_every_kind() -> None:
    """planted_value, the public building block, only returns valid values in a known format of the kind."""
    rng = random.Random(11)
    for kind in BUILTIN_KINDS:
        for _ in range(40):
            value, fmt = planted_value(rng, kind)
            check_planted(Planted(kind, value, fmt))


def test_no_item_overlaps_another(corpus: list[LabelledText]) -> None:
    """No occurrence of a planted or benign value overlaps an occurrence of another item of the same text."""
    for t in corpus:
        values = [p.value for p in t.planted] + list(t.benign)
        assert len(set(values)) == len(values), t
        spans = []
        for i, v in enumerate(values):
            start = t.text.find(v)
            while start >= 0:
                spans.append((start, start + len(v), i))
                start = t.text.find(v, start + 1)
        for a in spans:
            for b in spans:
                if a[2] != b[2]:
                    assert a[1] <= b[0] or b[1] <= a[0], (values[a[2]], values[b[2]], t.text)


def test_texts_vary_in_shape(corpus: list[LabelledText]) -> None:
    """Texts hold 0-3 items, several kinds together, multi-line text, and items at the very start and end."""
    sizes = Counter(len(t.planted) for t in corpus)
    assert set(sizes) == {0, 1, 2, 3}, sizes
    assert sizes[0] >= 30
    assert sum(1 for t in corpus if len({p.kind for p in t.planted}) >= 2) >= 100
    assert sum(1 for t in corpus if "\n" in t.text and t.planted) >= 50
    assert sum(1 for t in corpus if any(t.text.startswith(p.value) for p in t.planted)) >= 10
    assert sum(1 for t in corpus if any(t.text.endswith(p.value) for p in t.planted)) >= 10
    for before, after in (("(", ")"), ('"', '"'), ("'", "'")):
        assert any(f"{before}{p.value}{after}" in t.text for t in corpus for p in t.planted), before
    assert any(f": {p.value}" in t.text for t in corpus for p in t.planted)
    assert any(re.search(re.escape(p.value) + r"[.,;?!]", t.text) for t in corpus for p in t.planted)
    assert len({t.text for t in corpus}) == len(corpus)


def test_there_are_enough_varied_look_alikes(corpus: list[LabelledText]) -> None:
    """At least 250 benign look-alikes, of many different shapes."""
    benign = [b for t in corpus for b in t.benign]
    assert len(benign) >= 250
    shapes = Counter(_benign_shape(b) for b in benign)
    assert len(shapes) >= 15, shapes
    for shape in (
        "card-like",
        "iban-like",
        "ssn-like",
        "nanp-like",
        "order-number",
        "date",
        "version",
        "uuid",
        "url",
        "price",
    ):
        assert shapes[shape] >= 5, (shape, shapes)


def _benign_shape(b: str) -> str:
    if re.fullmatch(r"\d{4}([ -]?)\d{4}\1\d{4}\1\d{4}", b):
        return "card-like"
    if re.fullmatch(r"[A-Za-z]{2}\d{2}(?: ?[A-Za-z0-9]{1,4}){3,}", b):
        return "iban-like"
    if re.fullmatch(r"\d{3}-\d{2}-\d{4}", b):
        return "ssn-like"
    if re.fullmatch(r"\(?\d{3}\)?[ .-]\d{3}[.-]\d{4}", b):
        return "nanp-like"
    if re.fullmatch(r"\d{9,10}", b):
        return "order-number"
    if re.fullmatch(r"\d{4}-\d\d-\d\d|\d\d[/.]\d\d[/.]\d{4}|\d{1,2} [A-Z][a-z]+ \d{4}|[A-Z][a-z]+ \d{1,2}, \d{4}", b):
        return "date"
    if re.fullmatch(r"v?\d+(\.\d+){2,3}", b):
        return "version"
    if re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", b):
        return "uuid"
    if "://" in b:
        return "url"
    if re.search(r"[$€£]|USD|CHF", b):
        return "price"
    if re.fullmatch(r"[0-9a-f]{7}|[0-9a-f]{40}", b):
        return "git-sha"
    if re.fullmatch(r"#[0-9a-fA-F]{6}", b):
        return "hex-or-hash"
    return b if not any(c.isdigit() for c in b) else re.sub(r"\d", "9", b)[:6]


def test_checksum_look_alikes_really_fail_their_checksum(corpus: list[LabelledText]) -> None:
    """Card-shaped numbers fail Luhn, IBAN-shaped strings mod 97, SSN-shaped ones the issued ranges, NANP-shaped
    phone numbers libphonenumber, and long order numbers both Luhn and US phone validity."""
    seen: Counter[str] = Counter()
    for t in corpus:
        for b in t.benign:
            shape = _benign_shape(b)
            seen[shape] += 1
            if shape == "card-like":
                assert not luhn.is_valid(_digits(b)), b
            elif shape == "iban-like":
                assert not stdnum_iban.is_valid(b, check_country=False), b
            elif shape == "ssn-like":
                assert not us_ssn.is_valid(b), b
                area, group, serial = (int(x) for x in b.split("-"))
                assert area in (0, 666) or area >= 900 or group == 0 or serial == 0, b
            elif shape == "nanp-like":
                assert not phonenumbers.is_valid_number(phonenumbers.parse(b, "US")), b
            elif shape == "order-number":
                assert not luhn.is_valid(b), b
                assert not phonenumbers.is_valid_number(phonenumbers.parse(b, "US")), b
                if len(b) == 9:
                    assert not nl_bsn.is_valid(b) and not ca_sin.is_valid(b), b
    assert all(seen[s] >= 10 for s in ("card-like", "iban-like", "ssn-like", "nanp-like", "order-number")), seen


def test_look_alikes_are_not_emails_or_addresses(corpus: list[LabelledText]) -> None:
    """No benign value is an email address, and one that parses as an IP address is a version, said so in the text."""
    for t in corpus:
        for b in t.benign:
            assert not EMAIL_RE.search(b), b
            try:
                ipaddress.ip_address(b)
            except ValueError:
                continue
            assert f"version {b}" in t.text, (b, t.text)


def test_benign_value_returns_look_alikes() -> None:
    """benign_value returns non-empty strings that are not valid cards, IBANs or emails."""
    rng = random.Random(3)
    for _ in range(300):
        b = benign_value(rng)
        assert b and not EMAIL_RE.search(b)
        assert not stdnum_iban.is_valid(b)
        if _benign_shape(b) == "card-like":
            assert not luhn.is_valid(_digits(b))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_other_seeds_meet_the_same_bar(seed: int) -> None:
    """The corpus is big and valid for other seeds too, not only for the default one."""
    texts = labelled_texts(seed)
    per_kind = Counter(p.kind for t in texts for p in t.planted)
    assert sum(per_kind.values()) >= 600 and min(per_kind.values()) >= 50
    assert sum(len(t.benign) for t in texts) >= 250
    for t in texts:
        for p in t.planted:
            check_planted(p, t.text)


def test_relevancy_cases_have_all_three_labels(cases: list[RelevancyCase]) -> None:
    """About 200 cases, at least 50 of each label, with non-empty questions and responses."""
    assert 180 <= len(cases) <= 240
    labels = Counter(c.label for c in cases)
    assert set(labels) == {"relevant", "padded", "off_topic"}
    assert min(labels.values()) >= 50
    assert all(c.question.strip() and c.response.strip() for c in cases)


def test_most_relevancy_cases_carry_valid_personal_data(cases: list[RelevancyCase]) -> None:
    """Most cases carry planted items, each valid and present in the question or the response."""
    assert sum(1 for c in cases if c.planted) >= 0.75 * len(cases)
    assert sum(1 for c in cases if any(p.value in c.response for p in c.planted)) >= 50
    for c in cases:
        assert len({p.value for p in c.planted}) == len(c.planted)
        for p in c.planted:
            check_planted(p, c.question + "\n" + c.response)


def test_labels_read_like_their_meaning(cases: list[RelevancyCase]) -> None:
    """Padded responses are longer than relevant ones on average, and off-topic ones never echo the question's data."""

    def mean_length(label: str) -> float:
        lengths = [len(c.response) for c in cases if c.label == label]
        return sum(lengths) / len(lengths)

    assert mean_length("padded") > mean_length("relevant") + 30
    for c in cases:
        if c.label == "off_topic":
            assert not any(p.value in c.question and p.value in c.response for p in c.planted), c
    assert len({c.response for c in cases if c.label == "off_topic"}) >= 20


def test_the_packaged_values_are_the_generators() -> None:
    """The values file shipped for `produce --pii-share` is what `tests.pii_corpus` writes (regenerate it with
    `python -m tests.pii_corpus` after changing the generator), and every value in it is valid for its kind."""
    import importlib.resources

    from monitor.devtools import pii_samples
    from tests.pii_corpus import packaged_lines, packaged_values

    records = packaged_values()
    shipped = importlib.resources.files("monitor.devtools").joinpath(pii_samples.PACKAGED_VALUES)
    assert shipped.read_text(encoding="utf-8") == packaged_lines(records)
    rng = random.Random(0)
    for kind in BUILTIN_KINDS:
        for _ in range(30):
            value, fmt = pii_samples.planted_value(rng, kind)
            snippet = pii_samples.planted_snippet(rng, value, fmt)
            check_planted(Planted(kind, value, fmt), snippet)
