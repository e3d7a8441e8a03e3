"""The built-in recognizers: a cheap pattern finds candidates, a validator keeps only real items.

Candidates are found in the forms people write them in, not only in one country's: e-mail addresses as RFC 6531 and
IDNA allow (any script in the local part and the domain), national ids in their usual written forms with their
separators (`WRITTEN_IDS`: 12.345.678-Z, 1234.56.782, 85.07.30-033.28, 880320-0016 ...), cards grouped by any one
separator, and phone numbers by phonenumbers' own matcher (libphonenumber's) for the configured regions.

Validators, not bare patterns, so that order numbers, dates, prices, versions, ports and status codes survive:
cards need the Luhn check and a length their network uses, IBANs the country's length and format and mod 97
(python-stdnum), phone numbers written with + a full length their country uses and others the numbering plan of
their country (phonenumbers, Google's libphonenumber), SSNs the issued ranges, national ids their check digit
(python-stdnum's `is_valid`), IP addresses the address grammar (ipaddress). Digit-only ids whose check digit
passes one random number in ten (Dutch BSN, German tax id, unseparated SSN or SIN) count only right after their
name. Names and street addresses are not recognised: that needs a trained model (see docs/privacy.md).

Redaction fails closed: an item that passes its kind's own check (mod 97, Luhn and its network's length, a check
digit, a + number's length) is redacted even when a national or secondary rule would reject it (a national check
digit inside an IBAN, a bank or issuer registry, a numbering-plan range, a birth date inside a tax code). Those rules
decide whether a bank would accept the number, not whether it is somebody's, and a library's registries go stale:
python-stdnum's list of Belgian banks lacks the usual example BE68 5390 0754 7034."""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from types import ModuleType

import phonenumbers
from stdnum import iban as stdnum_iban
from stdnum import luhn, numdb, verhoeff
from stdnum.be import nn as be_nn
from stdnum.ca import sin as ca_sin
from stdnum.ch import ssn as ch_ssn
from stdnum.cz import rc as cz_rc
from stdnum.de import idnr as de_idnr
from stdnum.es import dni as es_dni
from stdnum.es import nie as es_nie
from stdnum.fi import hetu as fi_hetu
from stdnum.fr import nir as fr_nir
from stdnum.ie import pps as ie_pps
from stdnum.iso7064 import mod_11_10
from stdnum.it import codicefiscale as it_codicefiscale
from stdnum.nl import bsn as nl_bsn
from stdnum.no import fodselsnummer as no_fodselsnummer
from stdnum.pl import nip as pl_nip
from stdnum.pl import pesel as pl_pesel
from stdnum.pt import cc as pt_cc
from stdnum.ro import cnp as ro_cnp
from stdnum.se import personnummer as se_personnummer
from stdnum.us import ssn as us_ssn

from monitor.privacy.gates import Gates
from monitor.privacy.kinds import CARD, EMAIL, IBAN, IP, NATIONAL_ID, PHONE, SECRET, SSN, URL_CREDENTIALS
from monitor.privacy.spans import Recognizer, Span
from schemas.errors import ConfigError


def _first_digit(first: str = r"\d") -> str:
    """`first` (one digit of the class given) with no digit right before it, not even across one separator. The
    digit comes first and the look-behinds after it, so the regex engine skips ahead to digits instead of testing
    the look-behinds at every character (twice as fast on prose)."""
    return rf"{first}(?<!\d{first})(?<!\d[ \-.]{first})"


# No digit right after, not even across one space or dash (`_first_digit` says the same of before): "4539 1488 0343"
# inside a card number is no Aadhaar number, and a number inside a longer one is not an item of its own.
_NO_DIGIT_AFTER = r"(?![ \-.]?\d)"


def _digits(text: str) -> str:
    return "".join(c for c in text if c.isdigit())


@dataclass(frozen=True, slots=True)
class ValidatedPattern:
    """Candidates of `pattern` (the whole match, or its group `item`) kept when `valid(candidate)` is true."""

    kind: str
    pattern: re.Pattern[str]
    valid: Callable[[str], bool]
    needs: tuple[str, ...] = ()  # a cheap guard: skip the pattern unless one of these occurs (case-insensitive)

    def find(self, text: str) -> Iterator[Span]:
        """The validated candidates in `text`."""
        if self.needs and not self.wanted(text.casefold()):
            return
        yield from self.scan(text)

    def wanted(self, folded: str) -> bool:
        """Whether the lower-cased text has one of the `needs` (always, without any)."""
        return not self.needs or any(n in folded for n in self.needs)

    def scan(self, text: str) -> Iterator[Span]:
        """The validated candidates, without the `needs` guard."""
        group = "item" if "item" in self.pattern.groupindex else 0
        for m in self.pattern.finditer(text):
            start, end = m.span(group)
            if start < end and self.valid(m.group(group)):
                yield Span(start, end, self.kind)


# ---- cards -----------------------------------------------------------------------------------------------------

# The lengths of the card numbers of each network, by their leading digits (the first match applies). No issuer
# sub-range is checked (Mastercard's 2221-2720, JCB's 3528-3589, a national scheme's BIN): a Luhn-valid number of a
# length its network uses is a card, whoever issued it. Lengths still tell networks apart: a 15-digit number starting
# 27 is no Mastercard (a French NIR may be), a 17-digit one starting 4 no Visa; one starting 0 or 7 is no network's.
_CARD_LENGTHS: tuple[tuple[re.Pattern[str], frozenset[int]], ...] = (
    (re.compile(r"^3[47]"), frozenset({15})),  # American Express
    (re.compile(r"^5[1-5]"), frozenset({16})),  # Mastercard
    (re.compile(r"^4"), frozenset({13, 16, 19})),  # Visa
    (re.compile(r"^2"), frozenset(range(16, 20))),  # Mastercard 2-series (16), Mir 2200-2204 (16 to 19)
    (re.compile(r"^1"), frozenset({15})),  # UATP
    (re.compile(r"^8"), frozenset(range(16, 20))),  # UnionPay 81, RuPay 81 and 82, Uzcard 8600
    (re.compile(r"^9"), frozenset({16})),  # national schemes: Troy 9792, Humo 9860
    (re.compile(r"^[356]"), frozenset(range(13, 20))),  # Diners, JCB, Maestro (12 to 19), Discover, UnionPay, RuPay
)

# A French NIR after its first digit (1 or 2): year, month, department (2A and 2B are Corsica), commune, order, key.
_NIR_REST = r" ?\d{2} ?\d{2} ?(?:\d{2}|2[AaBb]) ?\d{3} ?\d{3} ?\d{2}"
_NIR_SHAPE = re.compile("[12]" + _NIR_REST)


def _is_card(candidate: str) -> bool:
    number = _digits(candidate)
    lengths = next((lengths for prefix, lengths in _CARD_LENGTHS if prefix.match(number)), frozenset())
    if len(number) not in lengths:
        return False
    separators = {c for c in candidate if not c.isdigit()}
    if len(separators) > 1:
        return False  # one separator throughout (4539.1488.0343.6467): a mix is no way of writing one number
    groups = re.split(r"[ \-.]", candidate)
    # Written in groups: each of 3 to 6 digits (4-4-4-4, Amex 4-6-5), never "1 2 3 ..." or a date-like 2-2-4.
    if len(groups) > 1 and not all(3 <= len(g) <= 6 for g in groups):
        return False
    if not luhn.is_valid(number):
        return False
    # 15 digits starting 1: a UATP card or a man's French NIR. One with the NIR's key and shape is left to the NIR
    # recognizer (after this one in priority, and finding every such text), so that it counts as the id it is.
    return not (number[0] == "1" and _NIR_SHAPE.fullmatch(candidate) and fr_nir.is_valid(number))


# Not glued to letters either: "BE25001068140051" is a (bad) IBAN, not a card after "BE". Groups are separated by
# spaces, dashes or dots.
CARD_NUMBERS = ValidatedPattern(
    CARD, re.compile(_first_digit() + r"(?<![A-Za-z]\d)(?:[ \-.]?\d){12,18}(?![A-Za-z])" + _NO_DIGIT_AFTER), _is_card
)

# ---- IBAN ------------------------------------------------------------------------------------------------------

_IBAN_REGISTRY = numdb.get("iban")
_IBAN_CANDIDATE = re.compile(r"(?<![A-Za-z0-9])[A-Za-z]{2}\d{2}(?:[ ]?[A-Za-z0-9]){11,30}(?![A-Za-z0-9])")


@functools.cache
def _iban_length(country: str) -> int | None:
    """The length of the IBANs of `country` (two letters, upper case) from python-stdnum's IBAN registry, or None
    for a country without IBANs."""
    info = _IBAN_REGISTRY.info(country)[0][1]
    structure = info.get("bban") if info else None
    return 4 + sum(int(n) for n in re.findall(r"\d+", structure)) if structure else None


def _end_after(raw: str, length: int) -> int | None:
    """The index just after the `length`-th character of `raw` that is not a space, or None if it has fewer."""
    seen = 0
    for i, char in enumerate(raw):
        if char != " ":
            seen += 1
            if seen == length:
                return i + 1
    return None


def _iban_spans(text: str) -> Iterator[Span]:
    for m in _IBAN_CANDIDATE.finditer(text):
        raw = m.group()
        length = _iban_length(raw[:2].upper())
        if length is None:
            continue
        # The greedy candidate may run into the next word ("... 0130 00 is mine" is fine): take exactly the
        # country's length of characters, spaces not counted, and only if it ends where a group of the text ends.
        end = _end_after(raw, length)
        if end is None or (end < len(raw) and raw[end] != " "):
            continue
        # ISO 13616 only (the registry's length and format, mod 97): python-stdnum's national checks (the Spanish
        # "DC" digits, the Belgian key and bank list, the Norwegian and Montenegrin keys) would keep a mistyped or
        # unlisted account in the text, and the bank's opinion of an account does not make it less personal.
        if stdnum_iban.is_valid(raw[:end].upper(), check_country=False):
            yield Span(m.start(), m.start() + end, IBAN)


@dataclass(frozen=True, slots=True)
class IbanRecognizer:
    """IBANs of any country in the IBAN registry, spaced or not, upper or lower case."""

    def find(self, text: str) -> Iterator[Span]:
        """The valid IBANs in `text`."""
        if any(c.isdigit() for c in text):
            yield from _iban_spans(text)


# ---- SSN and national ids --------------------------------------------------------------------------------------


def _is_ssn(candidate: str) -> bool:
    return bool(us_ssn.is_valid(_digits(candidate)))


SSN_FORMATTED = ValidatedPattern(
    SSN, re.compile(_first_digit() + r"\d{2}([- ])\d{2}\1\d{4}" + _NO_DIGIT_AFTER), _is_ssn
)
SSN_NAMED = ValidatedPattern(
    SSN,
    re.compile(r"(?i:\b(?:SSN|social\s+security(?:\s+(?:number|no\.?|#))?))\W{0,4}(?:is\W{1,3})?(?P<item>\d{9})(?!\d)"),
    _is_ssn,
    ("ssn", "social"),
)


def _stdnum(module: object) -> Callable[[str], bool]:
    is_valid: Callable[[str], bool] = module.is_valid  # type: ignore[attr-defined]
    return lambda candidate: bool(is_valid(candidate))


# The UK National Insurance number: two prefix letters (D, F, I, Q, U, V never; O never second; some pairs never
# issued; QQ is HMRC's specimen, often pasted), six digits, a suffix A-D. No check digit: its shape is the test.
_NINO = re.compile(
    r"(?<![A-Za-z0-9])(?:QQ|(?!(?:BG|GB|KN|NK|NT|TN|ZZ))[A-CEGHJ-PR-TW-Z][A-CEGHJ-NPR-TW-Z]) ?\d{2} ?\d{2} ?\d{2} ?[A-"
    r"D](?![A-Za-z0-9])"
)
_OMOCODE = "0-9LMNPQRSTUV"  # codice fiscale digits may be replaced by these letters (omocodia)


def _is_steuer_id(candidate: str) -> bool:
    """The German tax id's check digit (ISO 7064 mod 11,10) on 11 digits not starting 0. Not python-stdnum's rule on
    how often a digit may repeat: a number after the id's name with the right check digit is the id."""
    number = _digits(candidate)
    return len(number) == 11 and number[0] != "0" and bool(mod_11_10.is_valid(number))


def _is_aadhaar(candidate: str) -> bool:
    """Twelve digits, the first 2 to 9, with the Verhoeff check digit. Not python-stdnum's ban on palindromes, a
    plausibility rule on top of the check digit."""
    number = _digits(candidate)
    return len(number) == 12 and number[0] in "23456789" and bool(verhoeff.is_valid(number))


# Unnamed, four-four-four digits whose first group is a recent year (1990-2039) read as a dated reference ("Commande
# n° 2024 0613 5521"), not as an Aadhaar number: its check digit passes one such number in ten. After its name (or
# starting 2040 and later) it is one.
_YEAR_FIRST = re.compile(r"(?:199|20[0-3])\d\D")
NATIONAL_IDS_NUMERIC: tuple[ValidatedPattern, ...] = (ValidatedPattern(NATIONAL_ID, _NINO, lambda _: True),)
# Digit groups whose check digit passes one number in ten, and whose shape phone numbers share ("512-328-626" is a
# Polish mobile): after the phone numbers in priority, so that a valid number in a configured region stays a phone.
NATIONAL_IDS_AFTER_PHONES: tuple[ValidatedPattern, ...] = (
    ValidatedPattern(
        NATIONAL_ID, re.compile(_first_digit() + r"\d{2}([- ])\d{3}\1\d{3}" + _NO_DIGIT_AFTER), _stdnum(ca_sin)
    ),
    ValidatedPattern(
        NATIONAL_ID,
        re.compile(_first_digit("[2-9]") + r"\d{3}([- ])\d{4}\1\d{4}" + _NO_DIGIT_AFTER),
        lambda c: _is_aadhaar(c) and not _YEAR_FIRST.match(c),
    ),
)


def _letters_and_digits(candidate: str) -> str:
    return "".join(c for c in candidate if c.isalnum()).upper()


@dataclass(frozen=True, slots=True)
class WrittenId:
    """A national id in the forms people write it: `shape` (its letters, digits and usual separators; plain enough
    for RE2, since it is the id's gate too), valid when python-stdnum's `module.is_valid` accepts its letters and
    digits. Forms whose shape or separators say "id" stand on their own; a bare run of digits (`names` given) counts
    only right after one of the id's names: even a check digit and a birth date pass one random number in fifty, and
    11- or 13-digit order and account numbers are common."""

    name: str
    shape: str
    module: ModuleType
    names: tuple[str, ...] = ()  # lower case

    def recognizer(self) -> ValidatedPattern:
        """The shape, not glued to a letter or a digit (not even across one separator), checked by the module; after
        one of `names` when there are any."""
        is_valid: Callable[[str], bool] = self.module.is_valid
        item = rf"(?<![\w+])(?<!\d[ .\-/])(?:{self.shape})(?!\w)(?![ .\-/]\d)"
        if self.names:
            named = "|".join(re.escape(n) for n in self.names)
            item = rf"(?i:\b(?:{named})\b)\W{{0,4}}(?:(?:is|ist|es|est|to|er|är)\W{{1,3}})?(?P<item>{item})"
        pattern = re.compile(item)
        # As written first (python-stdnum's own `compact` knows its separators, and the Finnish one is the century),
        # then with every separator gone (it does not strip them all: the Spanish DNI's dots stay).
        return ValidatedPattern(
            NATIONAL_ID, pattern, lambda c: bool(is_valid(c.upper()) or is_valid(_letters_and_digits(c))), self.names
        )


# The usual written forms, separators included; python-stdnum's check digits (and birth dates, where the id holds
# one) decide. Ordered so that the likelier reading of a shape two ids share comes first.
WRITTEN_IDS: tuple[WrittenId, ...] = (
    WrittenId("es-dni", r"\d{8}[ \-]?[A-Za-z]|\d{2}\.\d{3}\.\d{3}[ \-]?[A-Za-z]", es_dni),  # 12345678-Z, 12.345.678 Z
    WrittenId("es-nie", r"[XYZxyz][ \-]?\d{7}[ \-]?[A-Za-z]|[XYZxyz][ \-]?\d{2}\.\d{3}\.\d{2}[ \-]?[A-Za-z]", es_nie),
    WrittenId("fr-nir", r"[12] ?\d{2} ?\d{2} ?(?:\d{2}|2[AaBb]) ?\d{3} ?\d{3} ?\d{2}", fr_nir),  # 1 85 05 78 006 084 36
    WrittenId("nl-bsn", r"\d{4}\.\d{2}\.\d{3}|\d{4} \d{2} \d{3}", nl_bsn),  # 1234.56.782
    WrittenId("pl-pesel", r"\d{11}", pl_pesel, ("pesel",)),  # a check digit and a birth date (with its century)
    WrittenId("pl-nip", r"\d{3}-\d{3}-\d{2}-\d{2}|\d{3}-\d{2}-\d{2}-\d{3}", pl_nip),  # 123-456-32-18
    WrittenId("de-idnr", r"\d{2} \d{3} \d{3} \d{3}", de_idnr),  # 12 345 678 903, with the issuing rule on digits
    # 85.07.30-033.28, 850730-033-28, 85073003328: a birth date and a mod 97 check
    WrittenId("be-nn", r"\d{2}\.\d{2}\.\d{2}[ \-]\d{3}\.\d{2}|\d{6}[ \-]\d{3}[ \-]?\d{2}", be_nn),
    WrittenId(
        "be-nn-bare", r"\d{11}", be_nn, ("rijksregisternummer", "numéro national", "national number", "niss", "insz")
    ),
    WrittenId("pt-cc", r"\d{8} ?\d ?[A-Za-z]{2}\d", pt_cc),  # 12345678 9 ZZ1
    WrittenId("se-personnummer", r"(?:\d{2})?\d{6}[\-+]\d{4}", se_personnummer),  # 880320-0016, 19880320-0016
    WrittenId("fi-hetu", r"\d{6}[\-+A-FU-Ya-fu-y]\d{3}[0-9A-Ya-y]", fi_hetu),  # 131052-308T
    WrittenId("no-fodselsnummer", r"\d{6} \d{5}", no_fodselsnummer),  # two check digits and a birth date
    WrittenId("no-fodselsnummer-bare", r"\d{11}", no_fodselsnummer, ("fødselsnummer", "fodselsnummer")),
    WrittenId("ch-ahv", r"756\.\d{4}\.\d{4}\.\d{2}", ch_ssn),  # 756.9217.0769.85
    WrittenId("cz-rc", r"\d{6}/\d{3,4}", cz_rc),  # 710319/2745
    WrittenId("ro-cnp", r"\d{13}", ro_cnp, ("cnp", "cod numeric personal")),
    WrittenId("ie-pps", r"\d{7}[A-Wa-w][ABHTWXZabhtwxz]?", ie_pps),  # 1234567T, 1234567TW
)
# (gate name, gate shape, recognizer) of the forms that stand on their own; the bare ones run with the named ids.
WRITTEN_IDS_UNNAMED = tuple((w.name, w.shape, w.recognizer()) for w in WRITTEN_IDS if not w.names)
WRITTEN_IDS_NAMED = tuple(w.recognizer() for w in WRITTEN_IDS if w.names)

# Anchored on the year's two digits (a look-behind to the six letters before them), so that prose is skipped at the
# speed of a digit search; omocodia replaces the year's digits last, so codes with letters there are not found.
_CODICE_FISCALE = re.compile(
    rf"\d\d(?<=\b[A-Za-z]{{6}}\d\d)[A-Za-z][{_OMOCODE}]{{2}}[A-Za-z][{_OMOCODE}]{{3}}[A-Za-z]\b"
)


# The letters and digits each position may hold (python-stdnum's format): the month is one of twelve letters.
_CODICE_FISCALE_FORMAT = re.compile(r"[A-Z]{6}[0-9L-NP-V]{2}[ABCDEHLMPRST][0-9L-NP-V]{2}[A-Z][0-9L-NP-V]{3}[A-Z]")


def _is_codice_fiscale(code: str) -> bool:
    """The format and the check letter. Not whether the birth date it encodes exists (python-stdnum checks that
    too), a plausibility rule on top of the check letter."""
    return bool(_CODICE_FISCALE_FORMAT.fullmatch(code)) and it_codicefiscale.calc_check_digit(code[:-1]) == code[-1]


@dataclass(frozen=True, slots=True)
class CodiceFiscaleRecognizer:
    """Italian tax codes (codice fiscale), checked by their check letter."""

    def find(self, text: str) -> Iterator[Span]:
        """The valid codes in `text`."""
        for m in _CODICE_FISCALE.finditer(text):
            start = m.start() - 6
            if _is_codice_fiscale(text[start : m.end()].upper()):
                yield Span(start, m.end(), NATIONAL_ID)


# Digit-only ids: only right after their name.
NATIONAL_IDS_NAMED: tuple[ValidatedPattern, ...] = (
    ValidatedPattern(
        NATIONAL_ID,
        re.compile(
            r"(?i:\b(?:BSN(?:[- ]?(?:nummer|number|nr\.?))?|burgerservicenummer)\b)\W{0,4}(?:is\W{1,3})?(?P<item>\d{4"
            r"}\.?\d{2}\.?\d{3}|\d{9})(?!\d)"
        ),
        lambda c: bool(nl_bsn.is_valid(_digits(c))),
        ("bsn", "burgerservicenummer"),
    ),
    ValidatedPattern(
        NATIONAL_ID,
        re.compile(
            r"(?i:\b(?:steuer-?id(?:entifikationsnummer)?|steuerliche\s+identifikationsnummer|IdNr)\b)\W{0,4}(?:(?:is|ist)\W{1,3})?"
            r"(?P<item>\d{2} ?\d{3} ?\d{3} ?\d{3})(?!\d)"
        ),
        _is_steuer_id,
        ("steuer", "idnr", "identifikationsnummer"),
    ),
    ValidatedPattern(
        NATIONAL_ID,
        re.compile(
            r"(?i:\b(?:SIN(?:[- ]?(?:number|no\.?|nr\.?))?|social\s+insurance(?:\s+number)?)\b)\W{0,4}(?:is\W{1,3})?(?"
            r"P<item>\d{9})(?!\d)"
        ),
        lambda c: bool(ca_sin.is_valid(c)),
        ("sin", "insurance"),
    ),
    ValidatedPattern(
        NATIONAL_ID,
        re.compile(
            r"(?i:\baadhaar(?:\s+(?:number|no\.?))?)\W{0,4}(?:is\W{1,3})?(?P<item>[2-9]\d{3}([- ]?)\d{4}\2\d{4})(?!\d)"
        ),
        _is_aadhaar,
        ("aadhaar",),
    ),
)

# ---- email, IP -------------------------------------------------------------------------------------------------

# Addresses as RFC 6531 and IDNA allow them: the local part and the domain's labels in any script (josé.garcía@
# correo.españa.es, müller@bücher.de), a top-level domain of letters or its A-label (xn--...). Letters are \w
# (Unicode) and the combining accents of decomposed text; the rest of RFC 5322's atom characters (!#$&'*/=?^`{|}~)
# are left out: they are rare in real addresses and would glue an address to the punctuation around it.
_MARK = "\u0300-\u036f"
_EMAIL_CHAR = rf"[\w{_MARK}%+\-]"
_LABEL = rf"[^\W_](?:[\w{_MARK}\-]{{0,61}}[\w{_MARK}])?"
EMAIL_ADDRESSES = ValidatedPattern(
    EMAIL,
    re.compile(
        rf"(?<![\w{_MARK}.%+\-])[^\W_](?:(?:{_EMAIL_CHAR}|\.(?!\.)){{0,63}}{_EMAIL_CHAR})?@"
        rf"(?:{_LABEL}\.)+(?:[^\W\d_]{{2,63}}|[Xx][Nn]--[A-Za-z0-9\-]{{1,59}})(?![\w{_MARK}\-]|\.\w)"
    ),
    lambda _: True,
    ("@",),
)

_V4_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
# Not part of a longer dotted number, and not a version ("v1.2.3.4", "version 1.2.3.4").
_IPV4 = re.compile(
    rf"(?<![\w.])(?<!\bv)(?<![Vv]ersion )(?<![Rr]elease )(?<![Bb]uild )(?:{_V4_OCTET}\.){{3}}{_V4_OCTET}(?![\w]|\.\d)"
)
_IPV6 = re.compile(
    r"(?<![\w:.])\[?(?P<item>(?:[0-9A-Fa-f]{0,4}:){2,7}(?:[0-9A-Fa-f]{1,4}|(?:\d{1,3}\.){3}\d{1,3})?)(?![\w:])"
)


def _is_ipv6(candidate: str) -> bool:
    if len(candidate) < 3 or not any(c.isdigit() for c in candidate):
        return False  # "::" alone, or "ab::cd" in a C++ name, is no address worth redacting
    try:
        ipaddress.IPv6Address(candidate)
    except ValueError:
        return False
    return True


IPV4_ADDRESSES = ValidatedPattern(IP, _IPV4, lambda _: True)
IPV6_ADDRESSES = ValidatedPattern(IP, _IPV6, _is_ipv6)

# ---- secrets, URL credentials ----------------------------------------------------------------------------------

# (needles, pattern): a pattern runs only when one of its needles occurs in the lower-cased text.
_SECRET_PATTERNS: tuple[tuple[tuple[str, ...], str], ...] = (
    (
        ("-----begin",),
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]{0,10000}?-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?---"
        r"--",
    ),
    (("sk-ant-",), r"\bsk-ant-[a-z]{3,8}\d{2}-[A-Za-z0-9_\-]{20,}"),  # Anthropic
    (("sk-",), r"\bsk-(?:proj|svcacct|admin)-[A-Za-z0-9_\-]{20,}"),  # OpenAI project and service keys
    (("sk-",), r"\bsk-[A-Za-z0-9]{32,}\b"),  # OpenAI legacy keys
    (("akia", "asia", "abia", "acca"), r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b"),  # AWS access key ids
    (("secret",), r"(?i:aws_?secret_?access_?key)[\"']?\s*[=:]\s*[\"']?(?P<item>[A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])"),
    (("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,255}\b"),  # GitHub tokens
    (("github_pat_",), r"\bgithub_pat_[A-Za-z0-9_]{22,255}\b"),
    (("glpat-",), r"\bglpat-[A-Za-z0-9_\-]{20,}\b"),  # GitLab
    (("xox",), r"\bxox[abposre]-[A-Za-z0-9\-]{10,}"),  # Slack
    (("_live_", "_test_"), r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}\b"),  # Stripe secret and restricted keys
    (("aiza",), r"\bAIza[0-9A-Za-z_\-]{35}(?![0-9A-Za-z_\-])"),  # Google API keys
    (("eyj",), r"\beyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]{5,}"),  # JWTs
    (("bearer",), r"(?i:\bbearer\s+)(?P<item>[A-Za-z0-9._~+/\-]{16,}=*)"),  # an opaque bearer token
    # "my password is Summer2024!": the value needs a digit or a symbol, so "my password is incorrect" survives
    (
        ("password", "passwd", "passcode", "passphrase"),
        r"(?i:\b(?:password|passwd|passcode|passphrase)\s+(?:is|was)\s+)[\"']?(?P<item>(?=[^\s\"']*[\d!@#$%^&*?_~+\-])[^\s\"',;]{4,64})",
    ),
    (("pin",), r"(?i:\bpin(?:\s+(?:code|number))?(?:\s+(?:is|was)\s+|\s*[:=]\s*))(?P<item>\d{4,8})(?!\d)"),
    # key = value assignments of credentials; the value needs a digit and a letter, so "token: none" survives
    (
        ("api", "secret", "token", "password", "passwd", "pwd"),
        r"(?i:\b(?:api[_\-]?key|secret[_\-]?key|client[_\-]?secret|access[_\-]?token|auth[_\-]?token|password|passwd|pwd)\b)"
        r"[\"']?\s*[=:]\s*[\"']?(?P<item>(?=[^\s\"']*\d)(?=[^\s\"']*[A-Za-z])[^\s\"',;]{6,})",
    ),
)


URL_CREDENTIAL_PAIRS = ValidatedPattern(
    URL_CREDENTIALS,
    re.compile(r"\b[A-Za-z][A-Za-z0-9+.\-]{1,20}://(?P<item>[^\s/@:\[\]]+:[^\s/@]+)@[\w\[]"),
    lambda _: True,
    ("://",),
)

# ---- phone numbers ---------------------------------------------------------------------------------------------

# Where phonenumbers' matcher looks: runs of at least seven digits with what numbers are written with between them
# (spaces, dots, dashes, slashes, brackets, a +), and a few characters either side, which the matcher reads to tell
# a number from a word or an amount. Only a bound on its work (~75 µs per run and region, against ~250 µs over a
# whole text): inside a run, the matcher decides what is a number and where it starts and ends.
_PHONE_RUN = re.compile(r"[+(]*\d(?:[ .\-/()+]{0,4}\d)+\)?")
_PHONE_CONTEXT = 3
_GLUED_BEFORE = re.compile(r"\d(?:[ .\-/]|\) ?)?\Z")  # "(999) 078-1595" holds no number 078-1595
_GLUED_AFTER = re.compile(r"[ .\-/]?\d")
_TWO_SEPARATORS = re.compile(r"[ .\-/()+]{2}")


def check_phone_regions(regions: Sequence[str]) -> None:
    """Raise `ConfigError` naming a region code the phone-number library does not know."""
    known = phonenumbers.SUPPORTED_REGIONS
    unknown = [r for r in regions if r not in known]
    if unknown:
        raise ConfigError(
            f"unknown phone region(s) {', '.join(unknown)}: use ISO 3166 two-letter codes such as US, GB, DE"
        )


# Dates, and dotted quads that are versions (a group of four digits or more: 10.0.19045.3803) or IPv4 addresses
# (recognised as such); not "612.12.50.23", a Spanish number written with dots.
_NOT_A_PHONE = re.compile(
    r"^(?:\d{4}[-/. ]\d{1,2}[-/. ]\d{1,2}|\d{1,2}[-/. ]\d{1,2}[-/. ]\d{2,4}|(?=[\d.]*\d{4})\d{1,3}(?:\.\d{1,5}){3}"
    r"|(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d))$"
)


# Regions with a trunk prefix 0 whose mobile numbers are usually written without it (98765 43210 in India).
_WRITTEN_WITHOUT_TRUNK = frozenset({"IN"})


def _national_prefix(region: str) -> str:
    metadata = phonenumbers.PhoneMetadata.metadata_for_region(region)
    return (metadata.national_prefix or "") if metadata is not None else ""


def _possible_lengths(region: str) -> frozenset[int]:
    """Lengths a national number of `region` can have, with its trunk prefix written or not."""
    metadata = phonenumbers.PhoneMetadata.metadata_for_region(region)
    if metadata is None or metadata.general_desc is None:
        return frozenset(range(4, 18))
    lengths = set(metadata.general_desc.possible_length or ())
    prefix = len(metadata.national_prefix or "")
    return frozenset(lengths | {n + prefix for n in lengths})


def _valid_in(run: str, region: str) -> bool:
    """Whether `run`, read whole, is a valid number of `region`: what the matcher needs to find it, at a fraction of
    its cost (most runs are no phone number, and fail here)."""
    try:
        return bool(phonenumbers.is_valid_number(phonenumbers.parse(run, region)))
    except phonenumbers.NumberParseException:
        return False


def _possible_international(number: phonenumbers.PhoneNumber) -> bool:
    """Whether `number` (written with + and a country code) has a full length its country uses. Not whether its
    range is in the numbering plan as libphonenumber knows it: the + says it is a phone number, and a range the
    library does not list (new, or missing from its data) is somebody's all the same."""
    return phonenumbers.is_possible_number_with_reason(number) == phonenumbers.ValidationResult.IS_POSSIBLE


@dataclass(frozen=True, slots=True)
class PhoneRecognizer:
    """Phone numbers as phonenumbers' matcher (libphonenumber's) finds them: written with + and a country code, of
    a full length that country uses; otherwise valid in the numbering plan of one of `regions` (00 and a country
    code where the region dials abroad with 00; national formats written with the region's trunk prefix where it
    has one: 020 ..., 030 ...). The matcher's own leniency VALID keeps what is no number in context: a date, a
    time stamp, digits glued to letters or to a currency, an order number that is no valid number."""

    regions: tuple[str, ...]
    trunk_zero: frozenset[str] = field(default_factory=frozenset, compare=False)
    lengths: dict[str, frozenset[int]] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(
            self,
            "trunk_zero",
            frozenset(r for r in self.regions if _national_prefix(r) == "0" and r not in _WRITTEN_WITHOUT_TRUNK),
        )
        self.lengths.update({region: _possible_lengths(region) for region in self.regions})

    def find(self, text: str) -> Iterator[Span]:
        """The phone numbers in `text`."""
        # Digits inside an IBAN-shaped run ("NL26 TRIO 0327 3500 75", valid or not) are an account, not a phone.
        accounts = [m.span() for m in _IBAN_CANDIDATE.finditer(text)]
        found: set[Span] = set()
        for run in _PHONE_RUN.finditer(text):
            if sum(c.isdigit() for c in run.group()) < 7 or any(s <= run.start() < e for s, e in accounts):
                continue
            at = max(0, run.start() - _PHONE_CONTEXT)
            window = text[at : run.end() + _PHONE_CONTEXT]
            plus = "+" in run.group()
            for start, end in self._matches(window, self._regions_for(run.group()), plus=plus):
                span = Span(at + start, at + end, PHONE)
                if _GLUED_BEFORE.search(text, max(0, span.start - 3), span.start) or _GLUED_AFTER.match(text, span.end):
                    continue  # the matcher splits long runs; a number inside a longer one is not an item of its own
                if span not in found:
                    found.add(span)
                    yield span

    def _regions_for(self, run: str) -> tuple[str, ...]:
        """The regions whose matcher can find a number in `run` that `find` keeps. A run without two separator
        characters in a row holds one number or none (a number inside it would be glued to the rest, and is
        dropped), so a region whose national numbers cannot have its length, or must start with the trunk 0 it
        lacks, has nothing to find there: a cheap test, since the matcher costs ~75 µs per region."""
        if _TWO_SEPARATORS.search(run) or run.startswith("00"):
            return self.regions
        if run.startswith(("+", "(+")):
            return ()  # the "ZZ" pass finds it: a possible length, which every valid number has
        digits = _digits(run)
        return tuple(
            r
            for r in self.regions
            if len(digits) in self.lengths[r]
            and (r not in self.trunk_zero or digits.startswith("0"))
            and _valid_in(run, r)
        )

    def _matches(self, window: str, regions: Sequence[str], *, plus: bool) -> Iterator[tuple[int, int]]:
        if plus:
            # Region "ZZ": only numbers written with + parse; of those, a possible length is enough (see above).
            for m in phonenumbers.PhoneNumberMatcher(window, "ZZ", leniency=phonenumbers.Leniency.POSSIBLE):
                if m.raw_string.startswith(("+", "(+")) and _possible_international(m.number):
                    yield m.start, m.end
        for region in regions:
            for m in phonenumbers.PhoneNumberMatcher(window, region, leniency=phonenumbers.Leniency.VALID):
                raw = m.raw_string
                if _NOT_A_PHONE.match(raw) or len(_digits(raw)) > 15:
                    continue  # E.164 allows 15 digits at most: a 16-digit run is a card or an id, not a phone
                national = not raw.lstrip("(").startswith(("+", "00"))
                if national and region in self.trunk_zero and not _digits(raw).startswith("0"):
                    continue  # "415 555 2671" is no German number: national formats there start with the trunk 0
                yield m.start, m.end


# Necessary conditions, not sufficient ones: each only opens the recognizers behind it (see `gates.Gates`). A phone
# number has seven digits with at most two separator characters between them.
_PHONE_SHAPE = r"\d(?:[ .\-/()]{0,2}\d){6}"
_DOTTED_NUMBER = r"\d\.\d{1,3}\.\d"
_COLON_HEX = r"[0-9a-f]{1,4}:[0-9a-f:]*:|::[0-9a-f]"  # two colons between hex digits, or "::1" (not "[::-1]")
_SIX_LETTERS_TWO_DIGITS = r"[a-z]{6}\d\d[a-z]"  # the start of a codice fiscale
# The rough shape of each number kind, in the order of `BuiltinRecognizers`' numbers (IBAN, card, SSN, then
# `NATIONAL_IDS_NUMERIC`: NINO): only a text with the shape gets the exact pattern. The ids of `WRITTEN_IDS` are
# gated by their own shapes.
_NUMBER_SHAPES = (
    r"[a-z]{2}\d{2} ?[a-z0-9]{4}",
    r"\d(?:[ \-.]?\d){12}",
    r"\d{3}[- ]\d{2}[- ]\d{4}",
    r"[a-z]{2} ?\d{2} ?\d{2} ?\d{2} ?[a-d]",
)
_SHAPES_AFTER_PHONES = (r"\d{3}[- ]\d{3}[- ]\d{3}", r"[2-9]\d{3}[- ]\d{4}[- ]\d{4}")  # SIN, Aadhaar


class BuiltinRecognizers:
    """Every built-in recognizer, yielding spans in priority order (where two items overlap, the earlier one wins).
    One RE2 pass over the text says which recognizers it can need; most text needs none, so redaction stays cheap
    beside the pipeline's own work."""

    def __init__(self, phone_regions: Sequence[str]) -> None:
        self._secrets = tuple((re.compile(pattern), f"secret{i}") for i, (_, pattern) in enumerate(_SECRET_PATTERNS))
        named = (SSN_NAMED, *NATIONAL_IDS_NAMED, *WRITTEN_IDS_NAMED)
        self._named = tuple((pattern, f"named{i}") for i, pattern in enumerate(named))
        numbers: tuple[Recognizer, ...] = (IbanRecognizer(), CARD_NUMBERS, SSN_FORMATTED, *NATIONAL_IDS_NUMERIC)
        self._numbers = (
            *((recognizer, f"number{i}") for i, recognizer in enumerate(numbers)),
            *((recognizer, name) for name, _, recognizer in WRITTEN_IDS_UNNAMED),
        )
        self._after_phones = tuple((recognizer, f"late{i}") for i, recognizer in enumerate(NATIONAL_IDS_AFTER_PHONES))
        self._phones = PhoneRecognizer(tuple(phone_regions))
        self._codice_fiscale = CodiceFiscaleRecognizer()
        self._gates = Gates(
            [
                *((f"secret{i}", re.escape(n)) for i, (needles, _) in enumerate(_SECRET_PATTERNS) for n in needles),
                *((name, re.escape(n)) for pattern, name in self._named for n in pattern.needs),
                ("url", "://"),
                ("email", "@"),
                *((f"number{i}", shape) for i, shape in enumerate(_NUMBER_SHAPES)),
                *((name, shape) for name, shape, _ in WRITTEN_IDS_UNNAMED),
                *((f"late{i}", shape) for i, shape in enumerate(_SHAPES_AFTER_PHONES)),
                ("phone", _PHONE_SHAPE),
                ("codice_fiscale", _SIX_LETTERS_TWO_DIGITS),
                ("ipv4", _DOTTED_NUMBER),
                ("ipv6", _COLON_HEX),
            ]
        )

    def find(self, text: str) -> Iterator[Span]:
        """Every item in `text`, in priority order: secrets, URL credentials, emails, named ids, then the other numbers,
        IP addresses, phone numbers, and the national ids whose shape phone numbers share."""
        if len(text) < 7 and (len(text) < 3 or not any(c.isdigit() or c in "@:" for c in text)):
            return  # a label such as "web" or "en-GB": no item is that short or lacks all of a digit, @ and :
        gates = self._gates.open(text)
        if not gates:
            return
        for pattern, name in self._secrets:
            if name in gates:
                group = "item" if "item" in pattern.groupindex else 0
                for m in pattern.finditer(text):
                    yield Span(*m.span(group), SECRET)
        if "url" in gates:
            yield from URL_CREDENTIAL_PAIRS.scan(text)
        if "email" in gates:
            yield from EMAIL_ADDRESSES.scan(text)
        for named, name in self._named:  # an id after its name is stronger evidence than the shape of a number
            if name in gates:
                yield from named.scan(text)
        for numbers, name in self._numbers:
            if name in gates:
                yield from numbers.find(text)
        if "codice_fiscale" in gates:
            yield from self._codice_fiscale.find(text)
        if "ipv4" in gates:
            yield from IPV4_ADDRESSES.scan(text)
        if "ipv6" in gates:
            yield from IPV6_ADDRESSES.scan(text)
        if "phone" in gates:
            yield from self._phones.find(text)
        for numbers, name in self._after_phones:
            if name in gates:
                yield from numbers.find(text)


def builtin_recognizers(phone_regions: Sequence[str]) -> list[Recognizer]:
    """The built-in recognizers (one `BuiltinRecognizers`), for the redactor to run before the user's own."""
    return [BuiltinRecognizers(phone_regions)]
