"""Personal data as written in continental Europe (issue 40): e-mail addresses with accented local parts and
internationalised domains, national ids in their usual forms with separators, phone numbers found by
libphonenumber's matcher in the configured regions, cards with any single separator; and the look-alikes of the
same locales (order numbers, dates, prices, tracking numbers, versions) kept. The values come from a seeded
generator written from the specifications (`bench.locale_pii`), not from a list tuned to the recognizers."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from stdnum import luhn, verhoeff

from bench.locale_pii import LOCALES, locale_regions, locale_texts
from monitor.devtools.redaction_eval import evaluate
from monitor.privacy.redactor import build_redactor
from monitor.privacy.settings import RedactionSettings

EUROPE = build_redactor(RedactionSettings(redact_phone_regions=locale_regions()))
DEFAULT = build_redactor(RedactionSettings())


@pytest.mark.parametrize("seed", [0, 3])
def test_every_kind_of_every_locale_meets_the_targets(seed: int) -> None:
    """Per kind and per locale, typed recall is at least 0.95; at least 0.95 of the look-alikes are kept."""
    texts = locale_texts(seed, per_format=12)
    for locale in LOCALES:
        e = evaluate(EUROPE, [t.text for t in texts if t.locale == locale], timing_runs=0)
        assert all(k.typed_share >= 0.95 for k in e.per_kind), (locale, e.missed[:5])
        assert e.benign_share >= 0.95, (locale, e.harmed[:5])
    e = evaluate(EUROPE, [t.text for t in texts], timing_runs=0)
    assert {k.kind for k in e.per_kind} == {"EMAIL", "PHONE", "CARD", "NATIONAL_ID"}
    assert all(k.typed_share >= 0.95 for k in e.per_kind), e.missed[:10]


@pytest.mark.parametrize(
    "address", ["josé.garcía@correo.españa.es", "müller@bücher.de", "łukasz@xn--kraw-7oa.pl", "zoé@société.fr"]
)
def test_addresses_with_utf8_local_parts_and_idn_domains_are_emails(address: str) -> None:
    """RFC 6531 local parts and IDNA domains (Unicode or A-label) are whole e-mail addresses."""
    assert EUROPE.redact(f"Escríbeme a {address}, gracias.").text == "Escríbeme a [EMAIL], gracias."


_LETTERS = st.text(st.sampled_from("abcdeéèëíïñóöøüúçßłżåä"), min_size=1, max_size=12)


@settings(max_examples=150, deadline=None)
@given(local=_LETTERS, label=_LETTERS, tld=st.sampled_from(["de", "es", "pl", "com", "xn--p1ai"]))
def test_any_accented_address_is_one_email(local: str, label: str, tld: str) -> None:
    """Whatever letters the local part and the domain hold, the address becomes one [EMAIL] and nothing else."""
    assert DEFAULT.redact(f"mail {local}@{label}.{tld} now").text == "mail [EMAIL] now"


@pytest.mark.parametrize(
    "value",
    [
        "12345678-Z",  # ES DNI
        "12.345.678-Z",
        "X-1234567-L",  # ES NIE
        "1234.56.782",  # NL BSN
        "856-734-62-15",  # PL NIP
        "85.07.30-033.28",  # BE rijksregisternummer
        "000000000 ZZ4".replace("000000000 ", "00000000 0 "),  # PT Cartão de Cidadão
        "880320-0016",  # SE personnummer
        "131052-308T",  # FI henkilötunnus
        "756.9217.0769.85",  # CH AHV
    ],
)
def test_national_ids_in_their_written_forms_are_redacted(value: str) -> None:
    """An id with separators in its country's usual form, whose python-stdnum check passes, is a national id."""
    assert DEFAULT.redact(f"Mi número: {value}.").text == "Mi número: [NATIONAL_ID]."


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("PESEL 44051401359", "PESEL [NATIONAL_ID]"),
        ("Mijn rijksregisternummer is 85073003328.", "Mijn rijksregisternummer is [NATIONAL_ID]."),
        ("fødselsnummer: 15108695088", "fødselsnummer: [NATIONAL_ID]"),
        ("CNP 1630615123457", "CNP [NATIONAL_ID]"),
    ],
)
def test_a_bare_run_of_digits_is_an_id_after_its_name(text: str, expected: str) -> None:
    """An 11- or 13-digit id written without separators is an id after its name, and not without it (it may still
    read as something else, 15108695088 as a US phone number): a check digit and a birth date pass one random
    number in fifty."""
    assert DEFAULT.redact(text).text == expected
    bare = text.split()[-1].rstrip(".")
    assert "[NATIONAL_ID]" not in DEFAULT.redact(f"Order {bare} shipped").text


def test_a_national_id_with_a_wrong_check_digit_is_kept() -> None:
    """The same forms with a wrong check character are left alone."""
    text = "Refs 12345678-A, 1234.56.783, PESEL 44051401358, 85.07.30-033.29, 880320-0017 are not ids."
    assert DEFAULT.redact(text).text == text


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), sep=st.sampled_from([" ", "-", "."]), length=st.sampled_from([15, 16]))
def test_a_card_with_any_single_separator_is_a_card(seed: int, sep: str, length: int) -> None:
    """A Luhn-valid number of its network's length is a card whether its groups are split by spaces, dashes or dots."""
    rng = random.Random(seed)
    prefix = "37" if length == 15 else rng.choice(("4", "51", "55", "6011"))
    body = prefix + "".join(rng.choice("0123456789") for _ in range(length - 1 - len(prefix)))
    number = body + luhn.calc_check_digit(body)
    groups = [number[:4], number[4:10], number[10:]] if length == 15 else [number[i : i + 4] for i in range(0, 16, 4)]
    assert DEFAULT.redact(f"Karte {sep.join(groups)} belastet").text == "Karte [CARD] belastet"


def test_a_card_with_mixed_separators_is_not_one_number() -> None:
    """Groups joined by two different separators (a date-like 4539-1488.0343-6467) are not read as one card."""
    assert DEFAULT.redact("ref 4539-1488.0343-6467").text == "ref 4539-1488.0343-6467"


@pytest.mark.parametrize(
    ("region", "value"),
    [
        ("ES", "612 34 56 78"),
        ("ES", "912.345.678"),
        ("IT", "333 123 4567"),
        ("IT", "06 1234 5678"),
        ("PL", "512 345 678"),
        ("PL", "12 345 67 89"),
        ("NL", "06-12345678"),
        ("NL", "020 123 4567"),
        ("ES", "612.12.50.23"),  # dotted, as Spanish, Polish and Belgian writers also group them
        ("PL", "12.343.19.19"),
        ("BE", "012.37.32.57"),
        ("PL", "512-328-626"),  # its digits pass the Canadian SIN's Luhn check: a valid phone stays a phone
    ],
)
def test_national_phone_numbers_of_a_configured_region_are_found_by_the_matcher(region: str, value: str) -> None:
    """A national number of a configured region, in the groupings people use there (spaces, dashes, dots), is a
    phone number."""
    configured = build_redactor(RedactionSettings(redact_phone_regions=(region,)))
    assert configured.redact(f"Tel. {value} bitte").text == "Tel. [PHONE] bitte"


@pytest.mark.parametrize("text", ["Total 612345678€ TTC", "Saldo $0612345678", "Rabatt 0612345678% heute"])
def test_digits_glued_to_a_currency_or_a_percent_sign_are_no_phone(text: str) -> None:
    """The matcher reads the characters around a number: an amount or a share glued to its sign is kept."""
    assert build_redactor(RedactionSettings(redact_phone_regions=("FR", "ES", "DE"))).redact(text).text == text


def test_the_matcher_finds_no_number_inside_a_longer_one() -> None:
    """The matcher splits long runs of digits; a number it finds inside one (078-1595 in "(999) 078-1595", a German
    number) is no item of its own, while a number on a line of its own after another number is."""
    text = "the form accepts (999) 078-1595?"
    assert DEFAULT.redact(text).text == text
    assert (
        DEFAULT.redact("Total: CHF 270.18\n917.651.5843 is my mobile").text == "Total: CHF 270.18\n[PHONE] is my mobile"
    )


def test_a_plus_number_with_the_trunk_zero_in_brackets_is_one_phone() -> None:
    """+31 (0)20 ..., as Dutch, German and Belgian writers add the trunk prefix, is one phone number."""
    assert DEFAULT.redact("Bel +31 (0)20 123 4567 morgen").text == "Bel [PHONE] morgen"


@pytest.mark.parametrize(
    "text",
    [
        "Commande n° 2024 0613 5521 expédiée le 13/06/2024.",
        "Pedido nº 2025 1102 3345, total 1.234,56 €.",
        "Bestellung 4711-2024-0815 vom 13.06.2024 um 14:05, Version 10.0.19045.3803.",
        "Przesyłka RR123456785PL, kod 00-950 Warszawa.",
    ],
)
def test_order_numbers_dates_prices_and_tracking_numbers_are_kept_in_every_region(text: str) -> None:
    """With all nine locales' phone regions configured, the look-alikes of those locales stay as they are."""
    assert EUROPE.redact(text).text == text


@pytest.mark.parametrize("seed", range(5))
def test_a_reference_starting_with_a_year_is_no_aadhaar_number_unless_named(seed: int) -> None:
    """Four-four-four digits starting with a year, whose Verhoeff check digit happens to pass, are a dated reference
    ("Commande n° 2024 0613 5521") and kept; after the name "Aadhaar" they are redacted."""
    rng = random.Random(seed)
    body = str(rng.randint(2019, 2026)) + "".join(rng.choice("0123456789") for _ in range(7))
    number = body + verhoeff.calc_check_digit(body)
    written = f"{number[:4]} {number[4:8]} {number[8:]}"
    assert EUROPE.redact(f"Commande n° {written} expédiée").text == f"Commande n° {written} expédiée"
    assert DEFAULT.redact(f"Aadhaar {written}").text == "Aadhaar [NATIONAL_ID]"


def test_the_locale_generator_is_deterministic_and_varied() -> None:
    """The same seed gives the same texts; every locale has several id and phone formats; another seed differs."""
    first = locale_texts(5, per_format=6)
    assert first == locale_texts(5, per_format=6)
    assert {t.text.text for t in first} != {t.text.text for t in locale_texts(6, per_format=6)}
    formats = Counter(p.fmt.split("-", 1)[0] for t in first for p in t.text.planted)
    assert set(formats) == set(LOCALES)
    phones = {t.text.planted[0].value for t in first if t.text.planted and t.text.planted[0].kind == "PHONE"}
    assert any(v.startswith("+") for v in phones) and any(v[0].isdigit() for v in phones)
