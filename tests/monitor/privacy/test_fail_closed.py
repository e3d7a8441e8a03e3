"""Redaction fails closed (issue 27): an item valid under its kind's own international check is redacted even when
a national or secondary rule (a national check digit, a bank or issuer registry, a numbering-plan range, a birth
date) would reject it; what fails the international check itself is still kept."""

from __future__ import annotations

import pytest
from stdnum import iban as stdnum_iban
from stdnum import luhn

from monitor.privacy.redactor import build_redactor
from monitor.privacy.settings import RedactionSettings

REDACTOR = build_redactor(RedactionSettings())


def redacted(text: str) -> str:
    """`text` as the default redactor leaves it."""
    return REDACTOR.redact(text).text


# Each passes mod 97 with its country's length and format, and fails the national rule named beside it.
NATIONALLY_WRONG_IBANS = [
    "ES29 2100 0418 4602 0005 1332",  # Spanish CCC "DC" check digits 46 (45 is right)
    "es2921000418460200051332",
    "BE41 5390 0754 7035",  # Belgian national key 35 (34 is right)
    "BE68 5390 0754 7034",  # the usual Belgian example: its bank code 539 is not in python-stdnum's bank list
    "NO66 8601 1117 948",  # Norwegian kontonummer mod 11
    "ME95 5050 0001 2345 6789 52",  # Montenegrin national mod 97
    "FR27 3000 6000 0112 3456 7890 101",  # French RIB key 01 (89 is right)
    "IT64 Y054 2811 1010 0000 0123 456",  # Italian CIN Y (X is right)
]


@pytest.mark.parametrize("value", NATIONALLY_WRONG_IBANS)
def test_an_iban_valid_internationally_is_redacted_whatever_its_national_check_digits(value: str) -> None:
    """An IBAN with its country's length and format and a good mod 97 is redacted even if its national check fails."""
    assert stdnum_iban.is_valid(value, check_country=False)  # the fixture is what it says
    assert redacted(f"Please pay {value} by Friday.") == "Please pay [IBAN] by Friday."


# Each passes Luhn with a length its network uses; the old issuer list did not have its prefix.
UNUSUAL_CARDS = [
    "2200 1022 4807 8782",  # Mir (2200-2204), outside Mastercard's 2221-2720
    "2799 4183 3284 3874",  # a 16-digit 2-series number past 2720
    "2204053735906750693",  # Mir, 19 digits
    "3512 3573 5631 0937",  # JCB-length number below JCB's 3528
    "3900-8699-3834-0059",  # Diners-range 39
    "8171 7003 2547 5508",  # UnionPay 81
    "9792 4372 8754 4966",  # Troy (Turkey's national scheme)
    "1770 166400 08382",  # UATP, 15 digits
]


@pytest.mark.parametrize("value", UNUSUAL_CARDS)
def test_a_luhn_valid_number_of_its_network_length_is_a_card_whatever_its_issuer_range(value: str) -> None:
    """A Luhn-valid number of a length its network uses is redacted as a card without a known issuer sub-range."""
    assert luhn.is_valid(value.replace(" ", "").replace("-", ""))
    assert redacted(f"Card {value} was declined.") == "Card [CARD] was declined."


def test_a_visa_length_number_with_any_bin_is_a_card() -> None:
    """A Luhn-valid 16-digit number starting 4 is a card whatever bank or country its BIN would name."""
    assert redacted("charged on 4000 0000 0000 0002 twice") == "charged on [CARD] twice"


@pytest.mark.parametrize(
    "text",
    [
        "IBAN-like ES92 2100 0418 4502 0005 1332 fails mod 97 although its DC digits are right.",
        "Rejected: BE42 5390 0754 7034 and IT65 X054 2811 1010 0000 0123 456.",
        "Luhn fails on 2200 1022 4807 8783 and on 9792437287544967.",
        "Luhn passes but the lengths are no network's: 4294 1996 8255 096 (Visa 15) and 3782 8224 6310 0052 (Amex 16).",
        "No card network starts 0 or 7: 0514 5311 0363 4062, 7982 4378 5731 3242.",
        "Order 0049123456 is a zero-padded id: 00 alone does not make it an international number.",
        "The + alone does not either when the length is no country's: +1 415 555 26.",
    ],
)
def test_what_fails_the_international_check_is_kept(text: str) -> None:
    """A mod-97-invalid IBAN-looking string, a Luhn-invalid or wrong-length number, a short + number are kept."""
    assert redacted(text) == text


def test_a_french_nir_that_also_passes_luhn_stays_a_national_id() -> None:
    """A valid 15-digit NIR starting 1 is typed as a national id, not as a UATP card, even when it passes Luhn."""
    nir = "185057800622349"  # check key 49; the digits happen to pass Luhn too
    assert luhn.is_valid(nir)
    assert redacted(f"NIR {nir}") == "NIR [NATIONAL_ID]"


@pytest.mark.parametrize("value", ["+1 415 055 2671", "+34 500 123 456"])
def test_an_international_phone_number_of_a_possible_length_is_redacted(value: str) -> None:
    """A +country number of a length its country uses is redacted even outside the ranges the library knows."""
    assert redacted(f"call me on {value} tonight") == "call me on [PHONE] tonight"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("codice fiscale RSSMRA85T35A562G", "codice fiscale [NATIONAL_ID]"),  # day 35: no birth date
        ("Steuer-ID 12 345 678 903", "Steuer-ID [NATIONAL_ID]"),  # no digit repeated, against the issuing rule
        ("Aadhaar 2000 0990 0002", "Aadhaar [NATIONAL_ID]"),  # a palindrome
    ],
)
def test_a_national_id_with_a_good_check_digit_is_redacted_whatever_its_other_rules(text: str, expected: str) -> None:
    """A national id whose check character passes is redacted even if a plausibility rule beyond it fails."""
    assert redacted(text) == expected
