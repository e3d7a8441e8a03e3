"""A labelled corpus for measuring the redaction recognizers: personal data that is valid under its real validators,
and look-alikes that must survive, in support, coding and travel chat text (deterministic for a seed).

Test data, kept out of the product (issue 40): the tests, `bench.redaction_quality` and `bench.redaction_engines`
read it from here. The one part a shipped command needs, the values `produce --pii-share` weaves into synthetic
traffic, is written from this generator into the package's `monitor/devtools/pii_values.jsonl` (`python -m
tests.pii_corpus` rewrites it; `tests/monitor/devtools/test_pii_samples.py` checks that the two agree)."""

from __future__ import annotations

import argparse
import base64
import importlib.resources
import ipaddress
import itertools
import json
import random
import re
import string
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import phonenumbers
from stdnum import iban as stdnum_iban
from stdnum import isbn as stdnum_isbn
from stdnum import luhn, verhoeff
from stdnum.ca import sin as ca_sin
from stdnum.de import idnr as de_idnr
from stdnum.es import ccc as es_ccc
from stdnum.es import dni as es_dni
from stdnum.es import nie as es_nie
from stdnum.fr import nir as fr_nir
from stdnum.in_ import aadhaar as in_aadhaar
from stdnum.iso7064 import mod_11_10
from stdnum.it import codicefiscale as it_codicefiscale
from stdnum.nl import bsn as nl_bsn
from stdnum.us import ssn as us_ssn

from monitor.devtools.pii_samples import PACKAGED_VALUES, Planted
from monitor.devtools.redaction_eval import LabelledText
from monitor.privacy.kinds import BUILTIN_KINDS, CARD, EMAIL, IBAN, IP, NATIONAL_ID, PHONE, SECRET, SSN, URL_CREDENTIALS
from monitor.privacy.settings import DEFAULT_PHONE_REGIONS

__all__ = ["LabelledText", "Planted", "RelevancyCase", "benign_value", "labelled_texts", "planted_value"]


@dataclass(frozen=True, slots=True)
class RelevancyCase:
    """A question and a response labelled for relevancy, with the personal data inside them."""

    question: str
    response: str
    label: Literal["relevant", "padded", "off_topic"]
    planted: tuple[Planted, ...]


_Gen = Callable[[random.Random], str]

_UPPER = string.ascii_uppercase
_ALNUM = string.ascii_letters + string.digits
_UPPER_ALNUM = _UPPER + string.digits
_B64URL = _ALNUM + "-_"
_B64 = _ALNUM + "+/"


def _chars(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _digits(rng: random.Random, n: int) -> str:
    return _chars(rng, string.digits, n)


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


# ---------------------------------------------------------------------------------------------------------------
# EMAIL

_FIRST = (
    "jane", "maria", "wei", "priya", "ahmed", "sofia", "lukas", "chloe", "kenji", "fatima", "oliver", "ana", "mehmet",
    "emma",
    "rajesh", "lucia", "tom", "aisha", "noah", "ingrid", "pablo", "yuki", "olga", "samuel", "leila", "marco",
    "hannah", "diego",
)  # fmt: skip
_LAST = (
    "smith", "garcia", "chen", "patel", "khan", "rossi", "mueller", "dubois", "tanaka", "nguyen", "kowalski", "silva",
    "obrien",
    "jensen", "novak", "haddad", "okafor", "schmidt", "martin", "lopez", "fischer", "moreau", "sato", "kim",
    "bianchi", "murphy",
)  # fmt: skip
_PROVIDERS = (
    "gmail.com", "outlook.com", "yahoo.com", "hotmail.com", "icloud.com", "proton.me", "gmx.de", "web.de",
    "orange.fr", "live.com",
    "libero.it", "aol.com",
)  # fmt: skip
_ORG_SUBDOMAINS = (
    "mail.northwind-traders.com", "eng.tidewater-shipping.com", "students.uni-freiburg.de", "it.nordwind-reisen.de",
    "corp.mapleridge-insurance.ca", "dept.cs.univ-lyon2.fr", "ops.eu.bluepeak-logistics.com",
    "hr.intranet.oakfield-group.org",
)  # fmt: skip
_NEW_TLD_DOMAINS = (
    "brightpixel.io", "hendersonlaw.co.uk", "whitby.museum", "tanaka.dev", "lumen.app", "alpinetrails.travel",
    "quartzlabs.tech",
    "kitecloud.io", "oakwood-dental.co.uk", "natural-history.museum", "fernandstone.studio",
)  # fmt: skip
_PLUS_TAGS = ("orders", "travel", "github", "billing", "aws", "newsletter", "receipts", "support", "2fa", "stripe")


def _email_plain(rng: random.Random) -> str:
    first, last = rng.choice(_FIRST), rng.choice(_LAST)
    local = rng.choice(
        (f"{first}{last}", f"{first}_{last}", f"{first[0]}{last}", f"{first}{rng.randint(1, 99)}", f"{last}{first[0]}")
    )
    return f"{local}@{rng.choice(_PROVIDERS)}"


def _email_plus(rng: random.Random) -> str:
    first, last = rng.choice(_FIRST), rng.choice(_LAST)
    local = rng.choice((f"{first}.{last}", f"{first}{last}", first))
    return f"{local}+{rng.choice(_PLUS_TAGS)}@{rng.choice(('gmail.com', 'proton.me', 'fastmail.com', 'outlook.com'))}"


def _email_subdomain(rng: random.Random) -> str:
    first, last = rng.choice(_FIRST), rng.choice(_LAST)
    return f"{rng.choice((f'{first}.{last}', f'{first[0]}{last}', first))}@{rng.choice(_ORG_SUBDOMAINS)}"


def _email_dotted(rng: random.Random) -> str:
    first, last = rng.choice(_FIRST), rng.choice(_LAST)
    local = rng.choice(
        (
            f"{first}.{rng.choice(_UPPER).lower()}.{last}",
            f"{first}.{last}.{rng.randint(70, 99)}",
            f"{first[0]}.{last}.work",
        )
    )
    return f"{local}@{rng.choice(_PROVIDERS)}"


def _email_upper(rng: random.Random) -> str:
    first, last, provider = rng.choice(_FIRST), rng.choice(_LAST), rng.choice(_PROVIDERS)
    if rng.random() < 0.5:
        return f"{first}.{last}@{provider}".upper()
    return f"{first.capitalize()}.{last.capitalize()}@{provider.capitalize()}"


def _email_new_tld(rng: random.Random) -> str:
    first, last = rng.choice(_FIRST), rng.choice(_LAST)
    local = rng.choice((first, f"{first}.{last}", f"{first[0]}{last}", "bookings", "hello"))
    return f"{local}@{rng.choice(_NEW_TLD_DOMAINS)}"


# ---------------------------------------------------------------------------------------------------------------
# PHONE: national significant numbers drawn from real ranges, kept only when libphonenumber calls them valid.

_NSN_PATTERNS: dict[str, tuple[tuple[tuple[str, ...], int], ...]] = {
    "US": (
        (
            (
                "212",
                "213",
                "305",
                "312",
                "415",
                "503",
                "512",
                "617",
                "646",
                "702",
                "718",
                "202",
                "206",
                "303",
                "404",
                "469",
                "510",
            ),
            7,
        ),
        (("619", "720", "917", "773", "281", "602", "615", "801", "919"), 7),
    ),
    "CA": ((("416", "604", "514", "613", "403", "778", "647", "902"), 7),),
    "GB": (
        (("207", "203", "208"), 7),
        (("161", "131", "121", "113", "117", "141"), 7),
        (("74", "75", "77", "78", "79"), 8),
    ),
    "DE": (
        (("30", "40", "69", "221"), 8),
        (("89",), 8),
        (("151", "152", "157", "160", "170", "171", "172", "176", "179"), 8),
    ),
    "FR": ((("1", "2", "3", "4", "5"), 8), (("6", "7"), 8)),
    "AU": ((("2", "3", "7", "8"), 8), (("4",), 8)),
    "IN": ((("6", "7", "8", "9"), 9), (("11", "22", "80"), 8)),
    "JP": ((("3", "6"), 8), (("90", "80", "70"), 8)),
    "ES": ((("6",), 8), (("91", "93", "96"), 7)),
    "NL": ((("6",), 8), (("20", "10", "30"), 7)),
}
_INTL_REGIONS = ("US", "US", "GB", "GB", "DE", "DE", "FR", "AU", "IN", "JP", "CA", "ES", "NL")


def _phone_number(rng: random.Random, region: str) -> phonenumbers.PhoneNumber:
    code = phonenumbers.country_code_for_region(region)
    for _ in range(10_000):
        prefixes, rest = rng.choice(_NSN_PATTERNS[region])
        nsn = rng.choice(prefixes) + _digits(rng, rest)
        if region in ("US", "CA") and (nsn[3] in "01" or nsn[3:6] == "555" or nsn[4:6] == "11"):
            continue  # exchange codes start 2-9; 555 is the fiction block and N11 are service codes
        number = phonenumbers.PhoneNumber(country_code=code, national_number=int(nsn))
        if phonenumbers.is_valid_number(number) and phonenumbers.region_code_for_number(number) == region:
            return number
    raise RuntimeError(f"no valid number drawn for {region}")  # pragma: no cover - the patterns above are real ranges


def _phone(fmt: str) -> _Gen:
    def gen(rng: random.Random) -> str:
        pnf = phonenumbers.PhoneNumberFormat
        region = {"us": "US", "uk": "GB", "de": "DE", "fr": "FR"}.get(fmt.split("-")[0]) or rng.choice(_INTL_REGIONS)
        number = _phone_number(rng, region)
        intl = phonenumbers.format_number(number, pnf.INTERNATIONAL)
        if fmt == "e164":
            return phonenumbers.format_number(number, pnf.E164)
        if fmt == "intl-spaced":
            return intl.replace("-", " ")  # North American numbers come back as "+1 415-555-2671"
        if fmt == "intl-dashed":
            return phonenumbers.format_number(number, pnf.RFC3966).removeprefix("tel:")
        if fmt == "idd-00":
            return "00" + intl[1:].replace("-", " ")
        national = phonenumbers.format_number(number, pnf.NATIONAL)
        if fmt == "us-dashed":
            return national.replace("(", "").replace(") ", "-")
        if fmt == "us-dotted":
            return national.replace("(", "").replace(") ", ".").replace("-", ".")
        return national  # us-paren "(415) 555-2671", uk "020 7946 0958", de "030 12345678", fr "01 42 68 53 00"

    return gen


# ---------------------------------------------------------------------------------------------------------------
# CARD

_CARD_BRANDS: dict[str, tuple[Callable[[random.Random], str], int]] = {
    "visa": (lambda rng: "4", 16),
    "mc": (lambda rng: f"5{rng.randint(1, 5)}", 16),
    "mc2": (lambda rng: str(rng.randint(2221, 2720)), 16),
    "amex": (lambda rng: rng.choice(("34", "37")), 15),
    "discover": (lambda rng: rng.choice(("6011", "65", str(rng.randint(644, 649)))), 16),
}


def _card(brand: str, style: str) -> _Gen:
    def gen(rng: random.Random) -> str:
        prefix_of, length = _CARD_BRANDS[brand]
        body = prefix_of(rng)
        body += _digits(rng, length - 1 - len(body))
        number = body + luhn.calc_check_digit(body)
        if style == "compact":
            return number
        groups = (
            [number[:4], number[4:10], number[10:]] if length == 15 else [number[i : i + 4] for i in range(0, 16, 4)]
        )
        return (" " if style == "spaced" else "-").join(groups)

    return gen


# ---------------------------------------------------------------------------------------------------------------
# IBAN: a plausible national account (bank codes of real banks, national check digits where there are any).

_CIN_ODD = (1, 0, 5, 7, 9, 13, 15, 17, 19, 21, 2, 4, 18, 20, 11, 3, 6, 8, 12, 14, 16, 10, 22, 25, 24, 23)


def _italian_cin(rest: str) -> str:
    total = 0
    for i, ch in enumerate(rest):
        v = int(ch) if ch.isdigit() else ord(ch) - ord("A")
        total += _CIN_ODD[v] if i % 2 == 0 else v
    return chr(ord("A") + total % 26)


def _bban(rng: random.Random, cc: str) -> str:
    if cc == "DE":
        return rng.choice(
            ("37040044", "10070000", "50010517", "12030000", "20041133", "70150000", "43060967")
        ) + _digits(rng, 10)
    if cc in ("GB", "IE"):
        banks = {
            "GB": ("NWBK60", "BARC20", "LOYD30", "HBUK40", "MIDL40", "MONZ04"),
            "IE": ("AIBK93", "BOFI90", "IPBS99"),
        }[cc]
        bank = rng.choice(banks)
        return bank + _digits(rng, 4) + _digits(rng, 8)
    if cc == "FR":
        bank, branch, account = (
            rng.choice(("30004", "30003", "20041", "30002", "10278")),
            _digits(rng, 5),
            _digits(rng, 11),
        )
        key = 97 - (89 * int(bank) + 15 * int(branch) + 3 * int(account)) % 97
        return f"{bank}{branch}{account}{key:02d}"
    if cc == "ES":
        ccc = rng.choice(("2100", "0049", "0182", "0081", "2085")) + _digits(rng, 4) + "00" + _digits(rng, 10)
        return ccc[:8] + es_ccc.calc_check_digits(ccc) + ccc[10:]
    if cc == "NL":
        return rng.choice(("ABNA", "RABO", "INGB", "SNSB", "TRIO", "KNAB", "ASNB", "BUNQ")) + _digits(rng, 10)
    if cc == "IT":
        rest = rng.choice(("03069", "02008", "05034", "01030", "03062")) + _digits(rng, 5) + _digits(rng, 12)
        return _italian_cin(rest) + rest
    if cc == "BE":
        first = rng.choice(("001", "063", "068", "310", "363", "539", "735", "751")) + _digits(rng, 7)
        return first + f"{int(first) % 97 or 97:02d}"
    if cc == "CH":
        return rng.choice(("00230", "00700", "09000", "04835", "80808")) + _digits(rng, 12)
    if cc == "AT":
        return rng.choice(("20111", "12000", "14000", "32000")) + _digits(rng, 11)
    raise ValueError(cc)


_IBAN_COUNTRIES = ("DE", "GB", "FR", "ES", "NL", "IT", "BE", "CH", "AT", "IE")


def _valid_iban(rng: random.Random, cc: str) -> str:
    for _ in range(1000):
        bban = _bban(rng, cc)
        number = cc + stdnum_iban.calc_check_digits(cc + "00" + bban) + bban
        if stdnum_iban.is_valid(number):
            return number
    raise RuntimeError(f"no valid IBAN drawn for {cc}")  # pragma: no cover


def _iban(cc: str, style: str) -> _Gen:
    def gen(rng: random.Random) -> str:
        number = _valid_iban(rng, cc)
        if style == "compact":
            return number
        spaced = stdnum_iban.format(number)
        if style == "spaced":
            return spaced
        return spaced.lower() if rng.random() < 0.6 else number.lower()

    return gen


# ---------------------------------------------------------------------------------------------------------------
# SSN and the other national identity numbers


def _ssn_digits(rng: random.Random) -> str:
    while True:
        area = rng.randint(1, 899)
        number = f"{area:03d}{rng.randint(1, 99):02d}{rng.randint(1, 9999):04d}"
        if area != 666 and us_ssn.is_valid(number):
            return number


def _ssn(style: str) -> _Gen:
    def gen(rng: random.Random) -> str:
        d = _ssn_digits(rng)
        sep = {"dashed": "-", "spaced": " ", "compact": ""}[style]
        return sep.join((d[:3], d[3:5], d[5:]))

    return gen


# HMRC never issues D, F, I, Q, U or V as the first letter (nor O as the second) or these pairs.
_NINO_FIRST = "ABCEGHJKLMNOPRSTWXYZ"
_NINO_SECOND = "ABCEGHJKLMNPRSTWXYZ"
_NINO_NEVER = frozenset({"BG", "GB", "KN", "NK", "NT", "TN", "ZZ"})


def _nino(style: str) -> _Gen:
    def gen(rng: random.Random) -> str:
        prefix = "GB"
        while prefix in _NINO_NEVER:
            prefix = rng.choice(_NINO_FIRST) + rng.choice(_NINO_SECOND)
        d, suffix = _digits(rng, 6), rng.choice("ABCD")
        return f"{prefix} {d[:2]} {d[2:4]} {d[4:]} {suffix}" if style == "spaced" else f"{prefix}{d}{suffix}"

    return gen


def _dni(style: str) -> _Gen:
    def gen(rng: random.Random) -> str:
        d = f"{rng.randint(1_000_000, 99_999_999):08d}"
        return f"{d}{'-' if style == 'dashed' else ''}{es_dni.calc_check_digit(d)}"

    return gen


def _nie(style: str) -> _Gen:
    def gen(rng: random.Random) -> str:
        body = rng.choice("XYZ") + _digits(rng, 7)
        check = es_nie.calc_check_digit(body)
        return f"{body[0]}-{body[1:]}-{check}" if style == "dashed" else body + check

    return gen


_IT_SURNAMES = (
    "ROSSI",
    "RUSSO",
    "FERRARI",
    "ESPOSITO",
    "BIANCHI",
    "ROMANO",
    "COLOMBO",
    "RICCI",
    "MARINO",
    "GRECO",
    "BRUNO",
    "GALLO",
)
_IT_NAMES = {
    "M": ("MARIO", "LUCA", "MARCO", "ALESSANDRO", "MATTEO", "GIUSEPPE"),
    "F": ("GIULIA", "FRANCESCA", "CHIARA", "SARA", "ELENA"),
}
_IT_PLACES = (
    "H501",
    "F205",
    "F839",
    "L219",
    "G273",
    "D612",
    "A944",
    "L736",
    "A662",
    "C351",
    "Z112",
)  # Rome, Milan, ... Germany


def _cf_letters(name: str, *, first_name: bool) -> str:
    consonants = [c for c in name if c not in "AEIOU"]
    vowels = [c for c in name if c in "AEIOU"]
    if first_name and len(consonants) >= 4:
        consonants = [consonants[0], consonants[2], consonants[3]]  # the rule for first names with 4+ consonants
    return ("".join(consonants + vowels) + "XXX")[:3]


def _codice_fiscale(rng: random.Random) -> str:
    sex = rng.choice("MF")
    day = rng.randint(1, 28) + (40 if sex == "F" else 0)
    head = (
        _cf_letters(rng.choice(_IT_SURNAMES), first_name=False)
        + _cf_letters(rng.choice(_IT_NAMES[sex]), first_name=True)
        + f"{rng.randint(50, 99):02d}{rng.choice('ABCDEHLMPRST')}{day:02d}{rng.choice(_IT_PLACES)}"
    )
    return head + it_codicefiscale.calc_check_digit(head)


def _nir(style: str) -> _Gen:
    def gen(rng: random.Random) -> str:
        dept = rng.choice([d for d in range(1, 96) if d != 20])  # 20 became 2A/2B (Corsica)
        head = (
            f"{rng.randint(1, 2)}{rng.randint(0, 99):02d}{rng.randint(1, 12):02d}{dept:02d}{rng.randint(1, 990):03d}"
            f"{rng.randint(1, 999):03d}"
        )
        number = head + fr_nir.calc_check_digits(head)
        return fr_nir.format(number) if style == "spaced" else number

    return gen


def _sin(style: str) -> _Gen:
    def gen(rng: random.Random) -> str:
        body = rng.choice("12345679") + _digits(rng, 7)
        d = body + luhn.calc_check_digit(body)
        return ("-" if style == "dashed" else " ").join((d[:3], d[3:6], d[6:]))

    return gen


def _aadhaar(style: str) -> _Gen:
    def gen(rng: random.Random) -> str:
        while True:
            body = rng.choice("23456789") + _digits(rng, 10)
            d = body + verhoeff.calc_check_digit(body)
            if d != d[::-1]:
                break
        return in_aadhaar.format(d) if style == "spaced" else d

    return gen


def _bsn(rng: random.Random) -> str:
    while True:
        body = rng.choice("123456789") + _digits(rng, 7)
        check = sum((9 - i) * int(c) for i, c in enumerate(body)) % 11  # the "elfproef": weights 9..2, then -1
        if check < 10 and nl_bsn.is_valid(body + str(check)):
            return body + str(check)


def _steuer_id(style: str) -> _Gen:
    def gen(rng: random.Random) -> str:
        while True:
            # Nine distinct digits with one of them twice: the 2016 rules allow exactly one repeated digit.
            distinct = rng.sample(string.digits, 9)
            digits = [*distinct, rng.choice(distinct)]
            rng.shuffle(digits)
            body = "".join(digits)
            number = body + mod_11_10.calc_check_digit(body)
            if de_idnr.is_valid(number):
                return de_idnr.format(number) if style == "spaced" else number

    return gen


# ---------------------------------------------------------------------------------------------------------------
# IP


def _ipv4_public(rng: random.Random) -> str:
    while True:
        addr = ipaddress.IPv4Address(rng.getrandbits(32))
        if addr.is_global and not addr.is_multicast and 0 < int(str(addr).rsplit(".", 1)[1]) < 255:
            return str(addr)


def _ipv4_private(rng: random.Random) -> str:
    host = rng.randint(2, 254)
    return rng.choice(
        (
            f"10.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{host}",
            f"172.{rng.randint(16, 31)}.{rng.randint(0, 255)}.{host}",
            f"192.168.{rng.randint(0, 255)}.{host}",
        )
    )


def _ipv6_prefix(rng: random.Random) -> list[int]:
    return rng.choice(
        (
            [0x2001, 0x0DB8],
            [0x2A02, rng.randint(0x0100, 0x8FFF)],
            [0x2600, rng.randint(0x1000, 0x9FFF)],
            [0x2400, 0xCB00],
        )
    )


def _ipv6_full(rng: random.Random) -> str:
    groups = _ipv6_prefix(rng) + [rng.getrandbits(16) for _ in range(6)]
    addr = ipaddress.IPv6Address(":".join(f"{g:04x}" for g in groups))
    return addr.exploded if rng.random() < 0.5 else ":".join(f"{g:x}" for g in groups)


def _ipv6_compressed(rng: random.Random) -> str:
    head = _ipv6_prefix(rng) + [rng.randint(1, 0xFFFF) for _ in range(rng.randint(0, 1))]
    tail = rng.choice(([1], [rng.randint(1, 0xFFFF)], [rng.randint(1, 0xFFFF), rng.randint(1, 0xFFFF)]))
    # At least three zero groups in the middle, so the compressed form really has "::".
    full = head + [0] * (8 - len(head) - len(tail)) + tail
    return ipaddress.IPv6Address(":".join(f"{g:x}" for g in full)).compressed


def _ipv6_link_local(rng: random.Random) -> str:
    mac = [rng.getrandbits(8) for _ in range(6)]
    mac[0] ^= 0x02  # EUI-64 flips the universal/local bit
    groups = [0xFE80, 0, 0, 0, mac[0] << 8 | mac[1], mac[2] << 8 | 0xFF, 0xFE << 8 | mac[3], mac[4] << 8 | mac[5]]
    return ipaddress.IPv6Address(":".join(f"{g:x}" for g in groups)).compressed


def _ipv4_for_port(rng: random.Random) -> str:
    return rng.choice((_ipv4_public, _ipv4_private, _ipv4_documentation))(rng)


def _ipv4_documentation(rng: random.Random) -> str:
    return f"{rng.choice(('203.0.113', '198.51.100', '192.0.2'))}.{rng.randint(1, 254)}"  # the TEST-NET ranges docs use


def _ipv6_for_port(rng: random.Random) -> str:
    return rng.choice((_ipv6_compressed, _ipv6_full))(rng)


_PORTS = (22, 443, 3000, 5432, 6379, 8080, 8443, 9200, 27017, 3306)


# ---------------------------------------------------------------------------------------------------------------
# SECRET: the shape of each provider's credentials, with random bodies (never a real key).


def _openai_legacy(rng: random.Random) -> str:
    return f"sk-{_chars(rng, _ALNUM, 20)}T3BlbkFJ{_chars(rng, _ALNUM, 20)}"


def _stripe(prefix: str) -> _Gen:
    return lambda rng: prefix + ("51" + _chars(rng, _ALNUM, 97) if rng.random() < 0.6 else _chars(rng, _ALNUM, 24))


def _jwt(rng: random.Random) -> str:
    alg = rng.choice(("HS256", "RS256", "ES256"))
    header = _b64url(json.dumps({"alg": alg, "typ": "JWT"}, separators=(",", ":")).encode())
    iat = rng.randint(1_700_000_000, 1_760_000_000)
    claims = {"sub": f"usr_{rng.getrandbits(48):012x}", "iat": iat, "exp": iat + rng.choice((900, 3600, 86400))}
    if rng.random() < 0.5:
        claims["scope"] = rng.choice(("orders:read", "bookings:write", "openid profile"))
    payload = _b64url(json.dumps(claims, separators=(",", ":")).encode())
    signature = _b64url(rng.randbytes({"HS256": 32, "RS256": 256, "ES256": 64}[alg]))
    return f"{header}.{payload}.{signature}"


def _bearer_opaque(rng: random.Random) -> str:
    n = rng.randint(32, 64)
    return _chars(rng, _ALNUM, 1) + _chars(rng, _ALNUM + "-_", n - 2) + _chars(rng, _ALNUM, 1)


# (BEGIN/END label, DER prefix that real keys of this type start with, body bytes, line width)
_PEM_TYPES = {
    "pem-rsa": ("RSA PRIVATE KEY", "MIIEpAIBAAKCAQEA", (900, 1190), 64),
    "pem-pkcs8": ("PRIVATE KEY", "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC", (900, 1190), 64),
    "pem-ec": ("EC PRIVATE KEY", "MHcCAQEEI", (80, 81), 64),
    "pem-openssh": ("OPENSSH PRIVATE KEY", "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ", (300, 400), 70),
}


def _pem(fmt: str) -> _Gen:
    def gen(rng: random.Random) -> str:
        label, prefix, (lo, hi), width = _PEM_TYPES[fmt]
        body = prefix + base64.b64encode(rng.randbytes(rng.randint(lo, hi))).decode().rstrip("=")
        body = body[: len(body) // 4 * 4]  # whole base64 quanta, so the body decodes
        lines = [body[i : i + width] for i in range(0, len(body), width)]
        return f"-----BEGIN {label}-----\n" + "\n".join(lines) + f"\n-----END {label}-----"

    return gen


# ---------------------------------------------------------------------------------------------------------------
# URL_CREDENTIALS: the user:password of a connection URL (the URL around it is added by planted_snippet).

_URL_USERS = (
    "app",
    "admin",
    "postgres",
    "deploy",
    "svc_orders",
    "readonly",
    "etl_user",
    "root",
    "guest",
    "celery",
    "backend",
    "jenkins",
)
_URL_HOSTS = {
    "postgres": (
        "db.prod.internal:5432/orders",
        "orders-db.c9akciq32xyz.eu-west-1.rds.amazonaws.com:5432/app",
        "localhost:5432/dev",
    ),
    "mysql": ("mysql.internal:3306/shop", "db-primary.svc.cluster.local:3306/wordpress", "127-0-0-1.nip.io:3306/test"),
    "redis": ("cache.internal:6379/0", "redis-master.default.svc:6379/2", "eu1-redis.cloud-provider.net:12345"),
    "https": (
        "git.example-corp.com/platform/api.git",
        "nexus.internal.example.org/repository/pypi/simple",
        "registry.acme.dev/v2/",
    ),
    "amqp": ("rabbitmq.svc.cluster.local:5672/%2F", "mq.internal:5672/orders", "broker.example.net:5671/vhost"),
    "mongodb-srv": (
        "cluster0.ab1cd.mongodb.net/shop?retryWrites=true&w=majority",
        "prod.x7k2m.mongodb.net/?appName=orders",
    ),
    "ftp": ("ftp.example-supplier.com/outbox/", "files.partner-logistics.net:21/invoices/"),
}
_URL_SCHEMES = {
    "postgres": "postgres",
    "mysql": "mysql",
    "redis": "redis",
    "https": "https",
    "amqp": "amqp",
    "mongodb-srv": "mongodb+srv",
    "ftp": "ftp",
}


def _url_credentials(rng: random.Random) -> str:
    user = rng.choice(_URL_USERS)
    password = _chars(rng, _ALNUM, rng.randint(10, 20))
    if rng.random() < 0.3:
        # Real passwords carry punctuation; in a URL ':' '@' '/' must be percent-encoded.
        at = rng.randint(1, len(password) - 1)
        password = password[:at] + rng.choice(("%40", "%21", "-", "_", ".", "~", "%2F")) + password[at:]
    return f"{user}:{password}"


# ---------------------------------------------------------------------------------------------------------------
# The formats of each kind

_FORMATS: dict[str, dict[str, _Gen]] = {
    EMAIL: {
        "plain": _email_plain,
        "plus": _email_plus,
        "subdomain": _email_subdomain,
        "dotted": _email_dotted,
        "upper": _email_upper,
        "new-tld": _email_new_tld,
    },
    PHONE: {
        f: _phone(f)
        for f in (
            "e164",
            "intl-spaced",
            "intl-dashed",
            "idd-00",
            "us-paren",
            "us-dashed",
            "us-dotted",
            "uk-national",
            "de-national",
            "fr-national",
        )
    },
    CARD: {f"{b}-{_CARD_BRANDS[b][1]}-{s}": _card(b, s) for b in _CARD_BRANDS for s in ("compact", "spaced", "dashed")},
    IBAN: {f"iban-{cc.lower()}-{s}": _iban(cc, s) for cc in _IBAN_COUNTRIES for s in ("compact", "spaced", "lower")},
    SSN: {f"ssn-{s}": _ssn(s) for s in ("dashed", "spaced", "compact")},
    NATIONAL_ID: {
        "nino-spaced": _nino("spaced"),
        "nino-compact": _nino("compact"),
        "dni": _dni("plain"),
        "dni-dashed": _dni("dashed"),
        "nie": _nie("plain"),
        "nie-dashed": _nie("dashed"),
        "codice-fiscale": _codice_fiscale,
        "nir-spaced": _nir("spaced"),
        "nir-compact": _nir("compact"),
        "sin-dashed": _sin("dashed"),
        "sin-spaced": _sin("spaced"),
        "aadhaar-spaced": _aadhaar("spaced"),
        "aadhaar-compact": _aadhaar("compact"),
        "bsn": _bsn,
        "steuer-id-spaced": _steuer_id("spaced"),
        "steuer-id-compact": _steuer_id("compact"),
    },
    IP: {
        "ipv4-public": _ipv4_public,
        "ipv4-private": _ipv4_private,
        "ipv6-full": _ipv6_full,
        "ipv6-compressed": _ipv6_compressed,
        "ipv6-link-local": _ipv6_link_local,
        "ipv4-port": _ipv4_for_port,
        "ipv6-port": _ipv6_for_port,
    },
    SECRET: {
        "anthropic": lambda rng: f"sk-ant-api03-{_chars(rng, _B64URL, 93)}AA",
        "openai-proj": lambda rng: f"sk-proj-{_chars(rng, _B64URL, 74)}T3BlbkFJ{_chars(rng, _B64URL, 74)}",
        "openai-legacy": _openai_legacy,
        "aws-key-id": lambda rng: "AKIA" + _chars(rng, _UPPER + "234567", 16),
        "aws-secret": lambda rng: _chars(rng, _B64, 40),
        "github-classic": lambda rng: "ghp_" + _chars(rng, _ALNUM, 36),
        "github-fine": lambda rng: f"github_pat_11{_chars(rng, _UPPER_ALNUM, 20)}_{_chars(rng, _ALNUM, 59)}",
        "slack-bot": lambda rng: (
            f"xoxb-{rng.randint(10**10, 10**13 - 1)}-{rng.randint(10**12, 10**13 - 1)}-{_chars(rng, _ALNUM, 24)}"
        ),
        "stripe-secret": _stripe("sk_live_"),
        "stripe-restricted": _stripe("rk_live_"),
        "google-api-key": lambda rng: "AIza" + _chars(rng, _B64URL, 35),
        "jwt": _jwt,
        "bearer-opaque": _bearer_opaque,
        **{f: _pem(f) for f in _PEM_TYPES},
    },
    URL_CREDENTIALS: dict.fromkeys(_URL_HOSTS, _url_credentials),
}


def _planted(rng: random.Random, kind: str, fmts: Sequence[str] | None = None) -> tuple[str, str]:
    fmt = rng.choice(tuple(fmts or _FORMATS[kind]))
    return _FORMATS[kind][fmt](rng), fmt


def planted_value(rng: random.Random, kind: str) -> tuple[str, str]:
    """One valid value of `kind` in one of its formats, chosen at random: `(value, fmt)`."""
    return _planted(rng, kind)


def _kind_of(fmt: str) -> str:
    for kind, fmts in _FORMATS.items():
        if fmt in fmts:
            return kind
    raise ValueError(fmt)


# Labels that name an id right before its number. Digit-only ids (and 9 bare SSN digits) always get one: without
# their name they are just numbers, and no recognizer should redact every 9- or 11-digit number.
_ID_LABELS: dict[str, tuple[str, ...]] = {
    "ssn": ("SSN ", "SSN: ", "SSN #", "social security number ", "Social Security number: ", "SSN is "),
    "nino": ("National Insurance number ", "NI number ", "NINO: ", "NI no. "),
    "dni": ("DNI ", "DNI: ", "NIF "),
    "nie": ("NIE ", "NIE: ", "NIE number "),
    "codice": ("codice fiscale ", "C.F. ", "codice fiscale: "),
    "nir": ("numéro de sécurité sociale ", "NIR ", "French social security number "),
    "sin": ("SIN ", "SIN: ", "Social Insurance Number "),
    "aadhaar": ("Aadhaar ", "Aadhaar number ", "Aadhaar no. "),
    "bsn": ("BSN ", "BSN: ", "burgerservicenummer ", "BSN-nummer "),
    "steuer": ("Steuer-ID ", "Steuer-ID: ", "Steuer-IdNr. ", "steuerliche Identifikationsnummer ", "IdNr "),
}
_FORM_LABELS: dict[str, tuple[str, ...]] = {
    "ssn": ("SSN", "Social Security number"),
    "nino": ("National Insurance number", "NI number"),
    "dni": ("DNI",),
    "nie": ("NIE",),
    "codice": ("Codice fiscale",),
    "nir": ("NIR", "Numéro de sécurité sociale"),
    "sin": ("SIN", "Social Insurance Number"),
    "aadhaar": ("Aadhaar", "Aadhaar number"),
    "bsn": ("BSN",),
    "steuer": ("Steuer-ID", "Steuerliche Identifikationsnummer"),
}
_ALWAYS_LABELLED = frozenset(
    {"ssn-compact", "bsn", "steuer-id-spaced", "steuer-id-compact", "aadhaar-compact", "nir-compact"}
)


def _id_family(fmt: str) -> str | None:
    family = fmt.split("-")[0]
    return family if family in _ID_LABELS else None


def _structural(rng: random.Random, value: str, fmt: str) -> str:
    """The value with the syntax around it that its format implies (a URL, a port, a header, an assignment)."""
    if fmt in _URL_HOSTS:
        return f"{_URL_SCHEMES[fmt]}://{value}@{rng.choice(_URL_HOSTS[fmt])}"
    if fmt == "ipv4-port":
        return f"{value}:{rng.choice(_PORTS)}"
    if fmt == "ipv6-port":
        return f"[{value}]:{rng.choice(_PORTS)}"
    if fmt == "aws-secret":
        return rng.choice(("aws_secret_access_key=", "aws_secret_access_key = ", "AWS_SECRET_ACCESS_KEY=")) + value
    if fmt == "bearer-opaque":
        return rng.choice(("Authorization: Bearer ", "authorization: Bearer ", "Authorization: bearer ")) + value
    return value


def planted_snippet(rng: random.Random, value: str, fmt: str) -> str:
    """The text to weave into a sentence for a planted value: the value plus the context its format needs (the id's
    name before a digit-only id, the URL around user:password, the header before a bearer token...)."""
    snippet = _structural(rng, value, fmt)
    family = _id_family(fmt)
    if family is not None and (fmt in _ALWAYS_LABELLED or rng.random() < 0.5):
        snippet = rng.choice(_ID_LABELS[family]) + snippet
    return snippet


# ---------------------------------------------------------------------------------------------------------------
# Sentence templates: "{x}" is where the snippet goes. They vary the position (start, end, after a colon, in
# quotes or parentheses, before punctuation) and the domain.

_TEMPLATES: dict[str, tuple[str, ...]] = {
    EMAIL: (
        "Please send the invoice to {x} instead of my work address.",
        "I changed my email to {x} but the receipts still go to the old one.",
        "{x} is the address on the account.",
        "Reply to: {x}",
        'git config user.email "{x}" is set, but GitHub still shows the wrong author. Why?',
        "My login is '{x}' and the reset link never arrives.",
        "Hi, it's Maria ({x}), following up on my refund.",
        "The e-ticket should have gone to {x}; can you resend it?",
        "contact: {x}",
        'The error says "user {x} not found" when I sign in.',
        "Forward the boarding passes to {x}, please!",
        "Why does our SMTP relay reject mail to {x}?",
        "From: Jane Doe <{x}>",
        "Could you add {x} as a second contact on the booking?",
        "Unsubscribe {x} from the newsletter.",
    ),
    PHONE: (
        "You can reach me on {x} after six.",
        "My number is {x}.",
        "Call me back at {x}, the line dropped.",
        "{x} is the mobile on my booking, but the SMS with the gate change never came.",
        "The hotel's number ({x}) goes straight to voicemail.",
        "Please update the phone number on my account to {x}",
        "Twilio logs show From={x} but our validation rejects it. Why?",
        "phone: {x}",
        "Text me at {x} when the driver arrives.",
        "I'm on WhatsApp: {x}",
        'phonenumbers.parse("{x}") gives me a different region than I expect.',
        "Emergency contact (my sister): {x}.",
        "The courier tried to call {x} while I was out?",
    ),
    CARD: (
        "My card {x} was charged twice, why?",
        "I see a pending charge on {x} that I don't recognise.",
        "Card number: {x}",
        "Please refund it to {x} rather than giving me store credit.",
        "Stripe returns card_declined for {x} in live mode, what does that mean?",
        "{x} was declined at the hotel front desk.",
        'The booking used card "{x}"; can you change it?',
        "Why does my Luhn check fail on {x}? It's a real card.",
        "I paid with my credit card ({x}) but the receipt shows another card.",
        "Charge the upgrade to {x}.",
        "The car rental blocked a deposit on {x} and never released it.",
    ),
    IBAN: (
        "Please send the refund to IBAN {x}.",
        "My IBAN is {x}, the transfer bounced.",
        "{x} is the account for the deposit refund.",
        'Our SEPA export writes "{x}" and the bank rejects the file, why?',
        "Bank details: {x} (no BIC needed within SEPA, I think).",
        "I typed {x} into the payout form and it says invalid.",
        "Can you change my payout account to {x}?",
        "Account holder: Lukas Meier, IBAN: {x}",
        "The landlord wants the deposit paid to {x}; is that a Swiss or a German account?",
        "Is it safe to post {x} in the public issue tracker?",
    ),
    SSN: (
        "I filled in the W-9 with {x} and the portal says it doesn't match.",
        "Is it safe to give {x} to the leasing office over email?",
        "The background check came back with the wrong name for {x}.",
        "{x} is what I put on the credit application.",
        'My tax preparer typed "{x}" but the return was rejected.',
        "Please remove {x} from my profile, I never meant to store it.",
        "Verification: {x}",
        "The payroll export has {x} in plain text; how do I mask that column in pandas?",
        "Can you confirm the account is linked to {x}?",
        "For the rental application ({x}), do you also need a pay stub?",
    ),
    NATIONAL_ID: (
        "The check-in form rejects {x}, is the format wrong?",
        "I entered {x} for the ferry booking but the name doesn't match.",
        "My employer needs {x} for payroll; where do I find it in the app?",
        "Please update my traveller profile with {x}.",
        "The hotel photocopied my ID ({x}); can you ask them to delete it?",
        "Tax details: {x}",
        'Our KYC regex fails on "{x}"; what is the right pattern?',
        "{x} is what I gave at the border.",
        "I'm registering the SIM card with {x}.",
        "Do you need {x} for the car rental, or is my passport enough?",
        "The insurance claim form wants {x} again, even though I sent it last week.",
    ),
    URL_CREDENTIALS: (
        "My DATABASE_URL is {x} and the driver says password authentication failed.",
        "Connection string: {x}",
        "Why does SQLAlchemy choke on {x}?",
        "broker_url = '{x}'",
        "I set {x} in the .env file, but the container can't connect.",
        "The deploy log printed {x}, should I be worried?",
        'The URL "{x}" works from my laptop but not from CI.',
        "{x} stopped working after we rotated certificates.",
        "Is it fine to keep {x} in docker-compose.yml?",
    ),
}
_IP_ANY = (
    "The requests come from {x} and get a 403.",
    "nginx logs show {x} hammering /login every second.",
    "Our firewall blocked {x}; how do I allowlist it?",
    "Connecting to {x} from the container fails.",
    "Login attempt from {x}, was that you?",
    "The health check against {x} times out.",
    "target: {x}",
    "Why can't the app reach {x} when the VPN is on?",
    "Grafana shows most errors from {x} (our office, I think).",
)
_IP_BARE = (
    "I can't SSH into {x} since the last update.",
    "My public IP is {x}, please whitelist it for the API.",
    "ping {x} works, but HTTP requests time out.",
    "The VPN gives me {x}, but internal hosts don't resolve.",
    "{x} is listed on a spam blocklist, can you check?",
    "Why does Django need '{x}' in ALLOWED_HOSTS?",
)
_SECRET_ANY = (
    "I accidentally committed {x} to a public repo. How do I rotate it?",
    "My script fails with 401 even though I'm passing {x}.",
    "Here's what I send: {x}",
    "Is it OK to hard-code {x} in the frontend?",
    "{x} was in the logs we shared with the vendor, is that a problem?",
    "The CI output shows {x} in clear text (masking is off).",
    "Our secret scanner missed {x} in yesterday's commit.",
)
_SECRET_TEMPLATES: dict[str, tuple[str, ...]] = {
    "token": (
        *_SECRET_ANY,
        'export API_KEY="{x}"',
        'client = Client(api_key="{x}") raises an authentication error.',
        "The token {x} stopped working this morning.",
        "Can you check why {x} is rate limited?",
    ),
    "header": (
        *_SECRET_ANY,
        'curl -H "{x}" https://api.example.com/v2/orders returns 401.',
        "Postman sends {x} but the server says unauthorized.",
    ),
    "assign": (
        *_SECRET_ANY,
        "~/.aws/credentials has:\n[default]\n{x}\nand boto3 still fails.",
        "My config has {x} and the S3 upload says SignatureDoesNotMatch.",
    ),
    "block": (
        "Here's the key from my deploy box:\n{x}\nssh says 'invalid format'. Why?",
        "```\n{x}\n```\nIs this key encrypted? It doesn't ask for a passphrase.",
        "I pasted this into the CI secret:\n{x}\nbut the job says 'error in libcrypto'.",
        "{x}\nThat's the whole file; which format is it?",
    ),
}


def _templates_for(fmt: str) -> tuple[str, ...]:
    kind = _kind_of(fmt)
    if kind == IP:
        return _IP_ANY if fmt.endswith("-port") else _IP_ANY + _IP_BARE
    if kind == SECRET:
        shape = (
            "block" if fmt.startswith("pem-") else {"bearer-opaque": "header", "aws-secret": "assign"}.get(fmt, "token")
        )
        return _SECRET_TEMPLATES[shape]
    return _TEMPLATES[kind]


# ---------------------------------------------------------------------------------------------------------------
# Benign look-alikes: each generator returns (value, sentence with "{b}").

_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_NANP = ("US", "CA")
_ALL_REGIONS = ("US", "CA", "GB", "DE", "FR", "AU", "IN", "JP", "ES", "NL", "IT", "CH", "BE", "AT", "IE")


def _valid_phone_in(text: str, regions: Sequence[str]) -> bool:
    for region in regions:
        try:
            if phonenumbers.is_valid_number(phonenumbers.parse(text, region)):
                return True
        except phonenumbers.NumberParseException:
            continue
    return False


_EMAIL_RE = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")


def _passes_a_validator(value: str) -> bool:
    """Whether a numeric look-alike happens to be valid as personal data (then it is no look-alike: draw again)."""
    digits = re.sub(r"[\s.()-]", "", value)
    if _EMAIL_RE.search(value) or stdnum_iban.is_valid(value):
        return True
    if digits.isdigit():
        n = len(digits)
        if 12 <= n <= 19 and luhn.is_valid(digits):
            return True
        if n == 9 and (nl_bsn.is_valid(digits) or ca_sin.is_valid(digits) or luhn.is_valid(digits)):
            return True
        if n == 10 and luhn.is_valid(digits):
            return True
        if (n == 11 and de_idnr.is_valid(digits)) or (n == 12 and in_aadhaar.is_valid(digits)):
            return True
        if 7 <= n <= 15 and _valid_phone_in(value, _ALL_REGIONS):
            return True
    if re.fullmatch(r"\d{3}[- ]\d{2}[- ]\d{4}", value) and us_ssn.is_valid(value.replace(" ", "-")):
        return True
    try:
        ipaddress.ip_address(value)
        return True
    except ValueError:
        return False


def _checked(gen: Callable[[random.Random], str]) -> Callable[[random.Random], str]:
    def draw(rng: random.Random) -> str:
        while True:
            value = gen(rng)
            if not _passes_a_validator(value):
                return value

    return draw


def _b_order_short(rng: random.Random) -> tuple[str, str]:
    tpl = (
        "When did order {b} ship?",
        "Order {b} still says 'processing'.",
        "I'm asking about order {b}, not the older one.",
        "Order {b} arrived broken.",
    )
    return f"{rng.choice('ABCDEFGHJK')}{rng.randint(10, 99)}", rng.choice(tpl)


def _b_order_ref(rng: random.Random) -> tuple[str, str]:
    year = rng.randint(2021, 2025)
    value = rng.choice(
        (
            f"ORD-{year}-{rng.randint(1, 99999):05d}",
            f"#{rng.randint(100000, 999999)}",
            f"INV-{year}-{rng.randint(1, 9999):04d}",
            f"RMA-{rng.randint(10000, 99999)}",
            f"SUP-{rng.randint(1000, 99999)}",
            f"BK-{_chars(rng, _UPPER_ALNUM, 6)}",
        )
    )
    tpl = (
        "Ticket {b} was closed without a reply.",
        "Reference: {b}",
        "Please see {b} for the history.",
        "Invoice {b} shows the wrong VAT.",
        "(ref. {b})",
    )
    return value, rng.choice(tpl)


def _order_long(rng: random.Random) -> str:
    return str(rng.randint(10**8, 10**10 - 1))


def _amazon_order(rng: random.Random) -> str:
    return f"{rng.randint(111, 114)}-{rng.randint(10**6, 10**7 - 1)}-{rng.randint(10**6, 10**7 - 1)}"


def _b_order_long(rng: random.Random) -> tuple[str, str]:
    tpl = (
        "My order number is {b}.",
        "Order {b} was never delivered.",
        "order no. {b}: the parcel is missing an item",
        "Can you cancel order {b}?",
    )
    return _checked(_order_long)(rng), rng.choice(tpl)


def _b_order_amazon(rng: random.Random) -> tuple[str, str]:
    return _checked(_amazon_order)(rng), rng.choice(
        ("Amazon order {b} was refunded only partly.", "The marketplace order {b} never shipped.")
    )


def _date(rng: random.Random) -> str:
    y, m, d = rng.randint(2019, 2026), rng.randint(1, 12), rng.randint(1, 28)
    return rng.choice(
        (
            f"{y}-{m:02d}-{d:02d}",
            f"{m:02d}/{d:02d}/{y}",
            f"{d:02d}.{m:02d}.{y}",
            f"{d} {_MONTHS[m - 1]} {y}",
            f"{_MONTHS[m - 1]} {d}, {y}",
        )
    )


def _b_date(rng: random.Random) -> tuple[str, str]:
    tpl = (
        "It was delivered on {b}.",
        "The charge is dated {b}.",
        "I fly out on {b} and come back a week later.",
        "Since {b} the nightly job fails.",
    )
    return _date(rng), rng.choice(tpl)


def _b_timestamp(rng: random.Random) -> tuple[str, str]:
    day = f"{rng.randint(2022, 2025)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    value = f"{day}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}Z"
    return value, rng.choice(
        ("The errors started at {b}.", "last_seen={b}", "The export ran at {b} and produced nothing.")
    )


def _b_time(rng: random.Random) -> tuple[str, str]:
    h, m, s = rng.randint(0, 23), rng.randint(0, 59), rng.randint(0, 59)
    value = f"{h:02d}:{m:02d}:{s:02d}" if rng.random() < 0.6 else f"{h:02d}:{m:02d}"
    return value, rng.choice(
        ("The backup failed at {b} UTC.", "Check-in opens at {b}.", "The train leaves at {b}, is that right?")
    )


def _b_price(rng: random.Random) -> tuple[str, str]:
    euros, cents = rng.randint(1, 2999), rng.randint(0, 99)
    value = rng.choice(
        (
            f"${euros}.{cents:02d}",
            f"€{euros:,}.{cents:02d}",
            f"{euros:,}.{cents:02d} €".replace(",", "X").replace(".", ",").replace("X", "."),
            f"£{euros}.{cents:02d}",
            f"USD {euros:,}.{cents:02d}",
            f"CHF {euros}.{cents:02d}",
        )
    )
    tpl = (
        "I was charged {b} instead of the quoted price.",
        "The room is {b} per night.",
        "Why is the refund only {b}?",
        "Total: {b}",
    )
    return value, rng.choice(tpl)


def _b_version(rng: random.Random) -> tuple[str, str]:
    kind = rng.randint(0, 3)
    if kind == 3:
        return f"10.0.{rng.randint(19041, 22631)}.{rng.randint(1000, 4200)}", rng.choice(
            ("Windows build {b} breaks the VPN client.", "Since {b} the printer driver crashes.")
        )
    value = (
        f"v{rng.randint(0, 9)}.{rng.randint(0, 30)}.{rng.randint(0, 20)}",
        f"{rng.randint(0, 9)}.{rng.randint(0, 30)}.{rng.randint(0, 20)}",
        f"3.{rng.randint(9, 13)}.{rng.randint(0, 12)}",
    )[kind]
    tpl = (
        "After upgrading to {b} the build fails.",
        "We're pinned to {b} for now.",
        "Does {b} fix the memory leak?",
        "Python {b} is what the image has.",
    )
    return value, rng.choice(tpl)


def _b_version_4part(rng: random.Random) -> tuple[str, str]:
    # Four small parts read like an IPv4 address; only the word "version" says otherwise.
    value = f"{rng.randint(1, 9)}.{rng.randint(0, 20)}.{rng.randint(0, 20)}.{rng.randint(0, 200)}"
    return value, rng.choice(
        ("The installer says version {b} is already installed.", "Is version {b} of the driver compatible?")
    )


def _b_host_port(rng: random.Random) -> tuple[str, str]:
    value = rng.choice(
        ("localhost:8080", ":5432", "db:5432", "redis:6379", "api.internal:8443", "localhost:3000", ":443", "web:8000")
    )
    return value, rng.choice(
        (
            "The app listens on {b}.",
            "Postgres is exposed on {b} inside the network.",
            "Nothing answers on {b} after the restart.",
        )
    )


def _b_http_status(rng: random.Random) -> tuple[str, str]:
    value = rng.choice(("404", "503", "429", "500", "502", "401", "403"))
    return value, rng.choice(
        (
            "The endpoint returns {b} about once an hour.",
            "I get HTTP {b} when I upload a file.",
            "Why does the API answer {b}?",
        )
    )


def _b_year(rng: random.Random) -> tuple[str, str]:
    return str(rng.randint(1998, 2025)), rng.choice(
        ("We've been customers since {b}.", "The {b} edition of the guide is out of date.")
    )


def _b_percent(rng: random.Random) -> tuple[str, str]:
    value = rng.choice((f"{rng.randint(1, 99)}%", f"{rng.randint(1, 99)}.{rng.randint(1, 9)}%", "99.9%", "0.5%"))
    return value, rng.choice(
        ("CPU sits at {b} all day.", "Is the {b} discount still valid?", "Uptime was {b} last month.")
    )


def _count(rng: random.Random) -> str:
    return rng.choice(
        (f"{rng.randint(1, 999) * 1000:,}", f"{rng.randint(1, 99) * 1_000_000:,}", "1,000,000", "2,147,483,647")
    )


def _b_count(rng: random.Random) -> tuple[str, str]:
    return _checked(_count)(rng), rng.choice(
        ("The table has {b} rows.", "We handle about {b} requests a day.", "The export stops at {b} lines.")
    )


def _ups(rng: random.Random) -> str:
    body = _chars(rng, _UPPER_ALNUM, 6) + rng.choice(("01", "02", "03", "12")) + _digits(rng, 7)
    values = [int(c) if c.isdigit() else (ord(c) - 63) % 10 for c in body]  # UPS maps letters to digits like this
    total = sum(v * (2 if i % 2 else 1) for i, v in enumerate(values))
    return f"1Z{body}{(10 - total % 10) % 10}"


def _s10(rng: random.Random) -> str:
    serial = _digits(rng, 8)
    total = sum(int(c) * w for c, w in zip(serial, (8, 6, 4, 2, 3, 5, 9, 7), strict=True))
    check = {10: 0, 11: 5}.get(11 - total % 11, 11 - total % 11)
    return f"{rng.choice(('RR', 'RX', 'LX', 'CP'))}{serial}{check}{rng.choice(('GB', 'DE', 'FR', 'NL'))}"


def _b_tracking(rng: random.Random) -> tuple[str, str]:
    if rng.random() < 0.6:
        return _ups(rng), rng.choice(
            ("UPS tracking {b} hasn't moved since Monday.", "The parcel ({b}) shows as delivered but it isn't here.")
        )
    return _s10(rng), rng.choice(
        ("Royal Mail says {b} was delivered yesterday.", "Tracking number {b} is stuck in customs.")
    )


def _isbn(rng: random.Random) -> str:
    body = rng.choice(("9780", "9781", "9783")) + _digits(rng, 8)
    check = (10 - sum(int(c) * (3 if i % 2 else 1) for i, c in enumerate(body)) % 10) % 10
    number = f"{body}{check}"
    try:
        return stdnum_isbn.format(number)
    except Exception:  # stdnum cannot hyphenate numbers outside the ranges it knows: use the plain form then
        return number


def _b_isbn(rng: random.Random) -> tuple[str, str]:
    return _checked(_isbn)(rng), rng.choice(
        ("Do you have ISBN {b} in stock?", "The book ({b}) arrived damaged.", "ISBN: {b}")
    )


def _b_uuid(rng: random.Random) -> tuple[str, str]:
    value = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    return value, rng.choice(
        ("request_id={b}", "The trace id is {b}; can you look it up?", "Job {b} is stuck in 'pending'.")
    )


def _b_git_sha(rng: random.Random) -> tuple[str, str]:
    sha = f"{rng.getrandbits(160):040x}"
    return (sha if rng.random() < 0.5 else sha[:7]), rng.choice(
        ("The regression started at commit {b}.", "git revert {b} fails with conflicts.")
    )


def _b_hex_colour(rng: random.Random) -> tuple[str, str]:
    value = f"#{rng.getrandbits(24):06x}"
    return (value if rng.random() < 0.5 else value.upper()), rng.choice(
        ("Change the button colour to {b}.", "The brand colour is {b}, not teal.")
    )


_PACKAGES = (
    ("numpy==1.26.4", "pip install {b} fails on Apple silicon."),
    ("requests>=2.31.0", "Pinning {b} fixed the SSL error."),
    ("lodash@4.17.21", "npm i {b} still reports a vulnerability."),
    ("react@18.2.0", "We can't upgrade past {b} yet."),
    ("@types/node@20.11.5", "Installing {b} breaks the build."),
    ("python:3.11-slim", "FROM {b} fails since yesterday."),
    ("node:20-alpine", "Is {b} still maintained?"),
    ("django==5.0.3", "After bumping to {b} the admin looks broken."),
    ("anthropic>=0.39", "Does {b} support streaming tool use?"),
)
_SK_WORDS = (
    ("sk-learn", "Is {b} the same thing as scikit-learn?"),
    ("risk-free", "Is the {b} cancellation still available for this fare?"),
    ("task-runner", "Our {b} crashes on start."),
    ("desk-booking", "The {b} page is down again."),
    ("sk-SK", "Does the app support the {b} locale?"),
    ("kiosk-mode", "How do I exit {b} on the tablet?"),
)
_BEARER_PHRASES = (
    ("bearer of bad news", "Sorry to be the {b}, but the flight is overbooked."),
    ("Bearer token", "What's the difference between a {b} and an API key?"),
    ("bearer tokens", "Should {b} go in a header or a cookie?"),
    ("Bearer authentication", "Does the API support {b}?"),
    ("Bearer of Bad News", "The {b} is my favourite podcast."),
)
_NOT_EMAILS = (
    ("@oncall-sre", "Can someone ping {b} about the outage?"),
    ("@channel", "I posted in {b} but nobody answered."),
    ("@here", "Don't use {b} for every deploy message."),
    ("@support-team", "I tagged {b} on the ticket."),
    ("name at domain dot com", "Should I write my address as {b} so bots can't scrape it?"),
    ("@dependabot", "Why does {b} open so many pull requests?"),
)


def _b_from(pairs: tuple[tuple[str, str], ...]) -> Callable[[random.Random], tuple[str, str]]:
    return lambda rng: rng.choice(pairs)


def _card_like(rng: random.Random) -> str:
    while True:
        number = rng.choice("456") + _digits(rng, 15)
        if not luhn.is_valid(number):
            break
    return rng.choice(
        (
            number,
            " ".join(number[i : i + 4] for i in range(0, 16, 4)),
            "-".join(number[i : i + 4] for i in range(0, 16, 4)),
        )
    )


def _b_card_like(rng: random.Random) -> tuple[str, str]:
    tpl = (
        "The gift card code {b} is rejected at checkout.",
        "Our unit test expects {b} to fail the Luhn check.",
        "Voucher {b} says it has already been used.",
    )
    return _checked(_card_like)(rng), rng.choice(tpl)


def _iban_like(rng: random.Random) -> str:
    number = _valid_iban(rng, rng.choice(_IBAN_COUNTRIES))
    if rng.random() < 0.5:
        wrong = (int(number[2:4]) + rng.randint(1, 90)) % 100  # wrong check digits
        number = f"{number[:2]}{wrong:02d}{number[4:]}"
    else:
        i = rng.randint(4, len(number) - 2)  # a swapped pair of digits, the classic typo
        number = number[:i] + number[i + 1] + number[i] + number[i + 2 :]
    return stdnum_iban.format(number) if rng.random() < 0.5 else number


def _b_iban_like(rng: random.Random) -> tuple[str, str]:
    def draw(r: random.Random) -> str:
        while True:
            value = _iban_like(r)
            if not stdnum_iban.is_valid(value, check_country=False):
                return value

    tpl = (
        "Our test suite uses {b} as an IBAN that must be rejected.",
        "The bank says {b} is not a valid IBAN; did I mistype it?",
    )
    return draw(rng), rng.choice(tpl)


def _ssn_like(rng: random.Random) -> str:
    group, serial = rng.randint(1, 99), rng.randint(1, 9999)
    return rng.choice(
        (
            f"000-{group:02d}-{serial:04d}",
            f"666-{group:02d}-{serial:04d}",
            f"9{rng.randint(0, 99):02d}-{rng.randint(10, 49):02d}-{serial:04d}",  # 9xx but outside the ITIN groups
            f"{rng.randint(1, 665):03d}-00-{serial:04d}",
            f"{rng.randint(1, 665):03d}-{group:02d}-0000",
        )
    )


def _b_ssn_like(rng: random.Random) -> tuple[str, str]:
    tpl = (
        "The form's placeholder shows {b}; what format does it want?",
        "Our fixtures use {b} because it can never be issued.",
        "Is {b} a good test value for the SSN field?",
    )
    return _checked(_ssn_like)(rng), rng.choice(tpl)


_URLS = (
    ("https://example.com/path?x=1", "See {b} for the details."),
    ("postgres://db.internal:5432/app", "DATABASE_URL points to {b} and that works locally."),
    ("redis://cache.internal:6379/0", "The worker uses {b} as its broker."),
    ("https://docs.python.org/3/library/ipaddress.html", "I read {b} but I'm still confused."),
    ("https://status.example-airline.com/flights?date=today", "The link {b} is broken."),
    ("amqp://rabbitmq.svc.cluster.local:5672/%2F", "Celery can't reach {b} without a user."),
    ("mongodb+srv://cluster0.ab1cd.mongodb.net/shop", "Compass connects to {b} fine."),
    ("https://api.example.com/v2/orders?page=2&limit=50", "Paging through {b} returns duplicates."),
)
_PATHS = (
    ("/var/log/nginx/error.log", "The error log is at {b}."),
    ("C:\\Program Files\\Acme\\config.ini", "Where does the installer put {b}?"),
    ("~/.aws/config", "Should the region go in {b}?"),
    ("./src/app/main.py", "The traceback points at {b}."),
    ("/etc/ssl/private/server.key", "Permission denied: '{b}'"),
    ("/home/app/.cache/pip", "Can I delete {b} safely?"),
)


def _b_dots(rng: random.Random) -> tuple[str, str]:
    if rng.random() < 0.3:
        return "192.168", rng.choice(
            ("Our office subnet starts with {b}, right?", "Why does Python print {b} for that sum?")
        )
    value = ".".join(str(rng.randint(0, 20)) for _ in range(5))
    return value, rng.choice(("Section {b} of the spec covers retries.", "The config has {b}, is that even valid?"))


def _phone_invalid(rng: random.Random) -> str:
    while True:
        area = f"{rng.choice('01')}{_digits(rng, 2)}" if rng.random() < 0.7 else rng.choice(("555", "999", "911"))
        d = area + _digits(rng, 7)
        value = rng.choice((f"{d[:3]}-{d[3:6]}-{d[6:]}", f"({d[:3]}) {d[3:6]}-{d[6:]}", f"{d[:3]}.{d[3:6]}.{d[6:]}"))
        # NANP-shaped, so invalid where that shape is used, and in the regions whose national formats the monitor
        # recognises by default: (019) 238-3750 is a valid Paris number, whatever its punctuation.
        if not _valid_phone_in(value, (*_NANP, *DEFAULT_PHONE_REGIONS)):
            return value


def _b_phone_invalid(rng: random.Random) -> tuple[str, str]:
    if rng.random() < 0.25:
        value = "123-456-7890"
    else:
        value = _phone_invalid(rng)
    tpl = (
        "The phone field's example is {b}, what format does it want?",
        "Our test data uses {b} as a fake number.",
        "Why does the form accept {b}? That can't be a real number.",
    )
    return value, rng.choice(tpl)


def _b_travel(rng: random.Random) -> tuple[str, str]:
    flight = f"{rng.choice(('LH', 'BA', 'UA', 'AF', 'KL', 'IB'))}{rng.choice(('', ' '))}{rng.randint(10, 2999)}"
    pnr = _chars(rng, "ABCDEFGHJKLMNPQRSTUVWXYZ23456789", 6)
    return rng.choice(
        (
            (flight, "My flight {b} was delayed by three hours."),
            (flight, "Is {b} leaving from terminal one?"),
            (pnr, "Booking reference {b} doesn't show up in the app."),
            (f"{rng.randint(1, 45)}{rng.choice('ABCDEF')}", "Can I change to seat {b}?"),
        )
    )


def _b_cve(rng: random.Random) -> tuple[str, str]:
    value = f"CVE-{rng.randint(2014, 2025)}-{rng.randint(1000, 49999)}"
    return value, rng.choice(("Are we affected by {b}?", "The scanner flags {b} in our base image."))


_BENIGN: dict[str, Callable[[random.Random], tuple[str, str]]] = {
    "order-short": _b_order_short,
    "order-ref": _b_order_ref,
    "order-long": _b_order_long,
    "order-amazon": _b_order_amazon,
    "date": _b_date,
    "timestamp": _b_timestamp,
    "time": _b_time,
    "price": _b_price,
    "version": _b_version,
    "version-4part": _b_version_4part,
    "host-port": _b_host_port,
    "http-status": _b_http_status,
    "year": _b_year,
    "percent": _b_percent,
    "count": _b_count,
    "tracking": _b_tracking,
    "isbn": _b_isbn,
    "uuid": _b_uuid,
    "git-sha": _b_git_sha,
    "hex-colour": _b_hex_colour,
    "package": _b_from(_PACKAGES),
    "sk-word": _b_from(_SK_WORDS),
    "bearer-phrase": _b_from(_BEARER_PHRASES),
    "not-email": _b_from(_NOT_EMAILS),
    "card-like": _b_card_like,
    "iban-like": _b_iban_like,
    "ssn-like": _b_ssn_like,
    "url": _b_from(_URLS),
    "path": _b_from(_PATHS),
    "dots": _b_dots,
    "phone-invalid": _b_phone_invalid,
    "travel": _b_travel,
    "cve": _b_cve,
}
# The checksum look-alikes are what recognizers most need to leave alone: draw them more often.
_BENIGN_WEIGHTS = {
    name: 3 if name in ("card-like", "iban-like", "ssn-like", "phone-invalid", "order-long") else 1 for name in _BENIGN
}


def _benign(rng: random.Random) -> tuple[str, str]:
    name = rng.choices(tuple(_BENIGN), weights=tuple(_BENIGN_WEIGHTS.values()))[0]
    return _BENIGN[name](rng)


def benign_value(rng: random.Random) -> str:
    """One look-alike of personal data that must survive redaction verbatim (an order number, a version, a date...)."""
    return _benign(rng)[0]


# ---------------------------------------------------------------------------------------------------------------
# Texts


def _spans(text: str, value: str) -> list[tuple[int, int]]:
    found, start = [], text.find(value)
    while start >= 0:
        found.append((start, start + len(value)))
        start = text.find(value, start + 1)
    return found


def _well_formed(text: str, values: Sequence[str]) -> bool:
    """Every value occurs, the values are distinct, and no occurrence of one overlaps an occurrence of another."""
    if len(set(values)) < len(values):
        return False
    spans = [(s, e, i) for i, v in enumerate(values) for s, e in _spans(text, v)]
    if {i for _, _, i in spans} != set(range(len(values))):
        return False
    spans.sort()
    return all(a[1] <= b[0] or a[2] == b[2] for a, b in itertools.pairwise(spans))


_GREETINGS = ("Hi,", "Hello,", "Hey team,", "Good morning,", "Hi there.")
_CLOSINGS = ("Thanks!", "Thanks in advance.", "Cheers,\nSam", "Any help appreciated.", "Regards, Ana")


def _assemble(rng: random.Random, parts: list[str]) -> str:
    rng.shuffle(parts)
    sep = rng.choice((" ", " ", " ", "\n", "\n\n"))
    # A part without closing punctuation ("Reply to: ...", a log line) ends its line, as it would in a chat.
    text = "".join(
        part + ("" if i == len(parts) - 1 else sep if part[-1] in ".?!)'\"" else "\n") for i, part in enumerate(parts)
    )
    if rng.random() < 0.2:
        text = f"{rng.choice(_GREETINGS)}{rng.choice((' ', chr(10)))}{text}"
    if rng.random() < 0.2:
        text = f"{text}{rng.choice((' ', chr(10)))}{rng.choice(_CLOSINGS)}"
    return text


def _balanced(rng: random.Random, kind: str, fmts: Sequence[str], used: Counter[str]) -> tuple[str, str]:
    """A value in one of the least-used formats so far, so that every format of a kind is in the corpus a few times."""
    fewest = min(used[f] for f in fmts)
    return _planted(rng, kind, [f for f in fmts if used[f] == fewest])


def _sentence_text(rng: random.Random, kinds: Sequence[str], n_benign: int, used: Counter[str]) -> LabelledText | None:
    parts: list[str] = []
    planted: list[Planted] = []
    benign: list[str] = []
    for kind in kinds:
        value, fmt = _balanced(rng, kind, tuple(_FORMATS[kind]), used)
        parts.append(rng.choice(_templates_for(fmt)).replace("{x}", planted_snippet(rng, value, fmt)))
        planted.append(Planted(kind, value, fmt))
    for _ in range(n_benign):
        value, tpl = _benign(rng)
        parts.append(tpl.replace("{b}", value))
        benign.append(value)
    text = _assemble(rng, parts)
    if not _well_formed(text, [p.value for p in planted] + benign):
        return None
    return LabelledText(text, tuple(planted), tuple(benign))


_PEOPLE = (
    "Sofia Rossi",
    "Lukas Schmidt",
    "Priya Patel",
    "Ahmed Khan",
    "Chloe Dubois",
    "Kenji Tanaka",
    "Ana Silva",
    "Tom Murphy",
)
_FORM_FIELD: dict[str, tuple[str, ...]] = {
    EMAIL: ("Email", "E-mail", "Contact email"),
    PHONE: ("Phone", "Mobile", "Tel"),
    CARD: ("Card", "Card number", "Payment card"),
    IBAN: ("IBAN", "Bank account (IBAN)", "Refund to"),
    IP: ("IP", "Source IP"),
}
_ENV_VARS: dict[str, tuple[str, ...]] = {
    EMAIL: ("ADMIN_EMAIL", "SMTP_USER", "ALERT_EMAIL"),
    IP: ("DB_HOST", "REDIS_HOST", "ALLOWED_IP"),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "openai-proj": ("OPENAI_API_KEY",),
    "openai-legacy": ("OPENAI_API_KEY",),
    "aws-key-id": ("AWS_ACCESS_KEY_ID",),
    "github-classic": ("GITHUB_TOKEN",),
    "github-fine": ("GH_TOKEN",),
    "slack-bot": ("SLACK_BOT_TOKEN",),
    "stripe-secret": ("STRIPE_SECRET_KEY",),
    "stripe-restricted": ("STRIPE_API_KEY",),
    "google-api-key": ("GOOGLE_MAPS_KEY", "GOOGLE_API_KEY"),
    "jwt": ("SERVICE_TOKEN",),
    "postgres": ("DATABASE_URL",),
    "mysql": ("DATABASE_URL",),
    "redis": ("REDIS_URL",),
    "https": ("PIP_INDEX_URL", "GIT_REMOTE"),
    "amqp": ("BROKER_URL",),
    "mongodb-srv": ("MONGO_URI",),
    "ftp": ("FTP_URL",),
}
# (kinds a form may hold, the formats it can't hold)
_FORMS: dict[str, tuple[tuple[str, ...], frozenset[str]]] = {
    "ticket": ((EMAIL, PHONE, CARD, IBAN, SSN, NATIONAL_ID), frozenset()),
    "booking": ((EMAIL, PHONE, NATIONAL_ID, CARD), frozenset()),
    "env": ((EMAIL, IP, SECRET, URL_CREDENTIALS), frozenset({*_PEM_TYPES, "bearer-opaque"})),
    "log": ((EMAIL, IP), frozenset()),
}


def _form_text(rng: random.Random, form: str, kinds: Sequence[str], used: Counter[str]) -> LabelledText | None:
    excluded = _FORMS[form][1]
    planted: list[Planted] = []
    lines: list[str] = []
    benign: list[str] = []
    for kind in kinds:
        fmts = [f for f in _FORMATS[kind] if f not in excluded]
        value, fmt = _balanced(rng, kind, fmts, used)
        planted.append(Planted(kind, value, fmt))
        family = _id_family(fmt)
        if form == "env":
            structural = _structural(rng, value, fmt)
            # The AWS secret's structural form is an assignment already.
            lines.append(
                structural
                if fmt == "aws-secret"
                else f"{rng.choice(_ENV_VARS.get(fmt) or _ENV_VARS[kind])}={structural}"
            )
        elif form == "log":
            ts, _ = _b_timestamp(rng)
            benign.append(ts)
            what = "user" if kind == EMAIL else "src"
            lines.append(f"{ts} WARN auth: login failed {what}={_structural(rng, value, fmt)}")
        else:
            label = rng.choice(_FORM_LABELS[family]) if family else rng.choice(_FORM_FIELD[kind])
            lines.append(f"{label}: {_structural(rng, value, fmt)}")
    body = "\n".join(lines)
    if form == "ticket":
        message = rng.choice(
            (
                "I was charged twice for the same booking.",
                "Please update my details before the next invoice.",
                "I can't log in.",
            )
        )
        text = f"Name: {rng.choice(_PEOPLE)}\n{body}\nMessage: {message}"
    elif form == "booking":
        text = f"Passenger: {rng.choice(_PEOPLE)}\n{body}\nPlease confirm the booking and send the itinerary."
    elif form == "env":
        intro = rng.choice(
            ("Here's my .env, the app still can't connect:\n", "```\n", "docker compose ignores these variables:\n")
        )
        text = intro + body + ("\n```\nWhy is this not loaded?" if intro == "```\n" else "\nWhat am I missing?")
    else:
        text = "Seeing this in our auth logs, is it an attack?\n" + body
    if not _well_formed(text, [p.value for p in planted] + benign):
        return None
    return LabelledText(text, tuple(planted), tuple(benign))


# Items per kind: kinds with many formats get more, so each format is seen several times.
_TARGETS = {
    EMAIL: 70,
    PHONE: 90,
    CARD: 90,
    IBAN: 90,
    SSN: 70,
    NATIONAL_ID: 120,
    IP: 80,
    SECRET: 130,
    URL_CREDENTIALS: 70,
}
_BENIGN_ONLY_TEXTS = 60


def labelled_texts(seed: int = 0) -> list[LabelledText]:
    """The labelled corpus: texts with 1-3 planted items (or none) and the look-alikes in them; the same for a seed."""
    rng = random.Random(seed)
    counts: Counter[str] = Counter()
    used: Counter[str] = Counter()  # formats
    texts: list[LabelledText] = []
    benign_only = 0
    while True:
        needy = [k for k in BUILTIN_KINDS if counts[k] < _TARGETS[k]]
        if not needy and benign_only >= _BENIGN_ONLY_TEXTS:
            break
        roll = rng.random()
        text: LabelledText | None
        if not needy or (benign_only < _BENIGN_ONLY_TEXTS and roll < 0.1):
            text = _sentence_text(rng, (), rng.choice((1, 2, 2, 3)), used)
            benign_only += text is not None
        elif roll < 0.25:
            form = rng.choice(tuple(_FORMS))
            allowed = _FORMS[form][0]
            pool = [k for k in allowed if k in needy] or list(allowed)
            n = min(len(pool), rng.choice((2, 2, 3)))
            picked = rng.sample(pool, n)
            if n < 2:
                picked.append(rng.choice([k for k in allowed if k not in picked]))
            text = _form_text(rng, form, picked, used)
        else:
            n = min(len(needy), rng.choice((1, 1, 1, 2, 2, 3)))
            text = _sentence_text(rng, rng.sample(needy, n), rng.choice((0, 0, 1, 1, 2)), used)
        if text is not None:
            texts.append(text)
            counts.update(p.kind for p in text.planted)
            used.update(p.fmt for p in text.planted)
    return texts


# ---------------------------------------------------------------------------------------------------------------
# Relevancy cases

_SLOTS: dict[str, tuple[str, tuple[str, ...] | None]] = {
    "card": (CARD, None),
    "iban": (IBAN, None),
    "email": (EMAIL, None),
    "phone": (PHONE, None),
    "phone_nat": (PHONE, ("us-paren", "us-dashed", "us-dotted", "uk-national", "de-national", "fr-national")),
    "ssn": (SSN, None),
    "nid": (NATIONAL_ID, None),
    "ip": (IP, ("ipv4-public", "ipv4-private", "ipv6-full", "ipv6-compressed", "ipv6-link-local")),
    "secret": (SECRET, None),
    "jwt": (SECRET, ("jwt",)),
    "bearer": (SECRET, ("bearer-opaque",)),
    "aws_key": (SECRET, ("aws-key-id",)),
    "url": (URL_CREDENTIALS, None),
    "pg_url": (URL_CREDENTIALS, ("postgres",)),
}
_PLAIN_SLOTS: dict[str, Callable[[random.Random], str]] = {
    "order": lambda rng: rng.choice(
        (f"{rng.choice('ABCDEFG')}{rng.randint(10, 99)}", f"ORD-2024-{rng.randint(1, 99999):05d}")
    ),
    "date": lambda rng: f"{rng.randint(1, 28)} {rng.choice(_MONTHS)}",
    "flight": lambda rng: f"{rng.choice(('LH', 'BA', 'UA', 'AF', 'KL'))}{rng.randint(100, 999)}",
}
# (question, tight answer)
_SCENARIOS: tuple[tuple[str, str], ...] = (
    (
        "My card {card} was charged twice on {date}, why?",
        "The second charge on card {card} was a pre-authorisation; it is released within 5 days.",
    ),
    (
        "Can you send the refund for order {order} to {iban} instead of my card?",
        "Yes: the refund for order {order} will be paid to {iban} within 3 to 5 business days.",
    ),
    (
        "I changed my email to {email}, so why do receipts still go to my old address?",
        "Receipts follow the address saved on each order; orders placed from now on will be sent to {email}.",
    ),
    (
        "I'm not getting the verification SMS on {phone}. What can I do?",
        "Check that {phone} can receive texts from short codes, then request a new code after one minute.",
    ),
    (
        "The tax form says {ssn} is invalid. Is the format wrong?",
        "Enter the nine digits without spaces or dashes; the form rejects separators.",
    ),
    (
        "Please delete my account. The email on it is {email} and the phone is {phone}.",
        "Your account for {email} is scheduled for deletion; you will get a confirmation within 30 days.",
    ),
    (
        "Please replace {card} with my new card on the subscription.",
        "I can't change payment details in chat: add the new card under Settings > Billing, then remove the old one.",
    ),
    (
        "I pushed {secret} to a public GitHub repo by accident. What should I do?",
        "Revoke the key in the provider's console now, create a new one, and remove it from the history with git "
        "filter-repo.",
    ),
    (
        "psql fails with 'password authentication failed' for {pg_url}. Why?",
        "The password in the URL probably has special characters: percent-encode them, or pass the password in "
        "PGPASSWORD instead.",
    ),
    (
        "My app can't connect using {url}; the error is 'authentication failed'.",
        "The server rejects the user or password in the URL: check both, and percent-encode any special characters in "
        "the password.",
    ),
    (
        "I can't SSH into {ip} since the last update: connection refused.",
        "Connection refused means nothing listens on port 22 at {ip}: check that sshd is running and the firewall "
        "allows port 22.",
    ),
    (
        "How do I read the expiry of this JWT: {jwt}?",
        "Base64url-decode the middle part and read the exp claim; it is in seconds since the Unix epoch.",
    ),
    (
        "Why does my validator reject {iban}?",
        "Your validator probably runs the mod-97 check before stripping spaces; remove whitespace and upper-case the "
        "IBAN first.",
    ),
    (
        "My request sends {bearer} and still gets 401 from the API.",
        "A 401 with a token means it has expired or was issued for another audience; request a fresh token and check "
        "its scope.",
    ),
    (
        "Why does my regex reject {email}?",
        "Your pattern does not allow '+' or dots in the local part; use a library validator instead of a hand-written "
        "regex.",
    ),
    (
        'phonenumbers.parse("{phone_nat}") raises NumberParseException. Why?',
        "A number without a leading + needs a region: call phonenumbers.parse(number, region) with the country it "
        "belongs to.",
    ),
    (
        "The ferry check-in form rejects {nid}. What should I enter?",
        "Enter the number exactly as printed on your ID card, without spaces, and choose the matching document type.",
    ),
    (
        "My booking email is {email}. Do I need a visa to visit Japan for two weeks with a German passport?",
        "No: German passport holders can visit Japan visa-free for up to 90 days.",
    ),
    (
        "Can the hotel call me on {phone} when my room is ready?",
        "Yes: I've added {phone} to the booking, and the front desk will call you when the room is ready.",
    ),
    (
        "My flight {flight} was cancelled. Will the refund go back to {card}?",
        "Yes: the refund for flight {flight} goes back to the card you paid with, {card}, within 7 business days.",
    ),
    (
        "How early should I get to the port for the ferry from Piraeus to Santorini?",
        "Arrive at least 30 minutes before departure, or 60 minutes if you are taking a car.",
    ),
    (
        "How do I reverse a list in Python without modifying the original?",
        "Use slicing: items[::-1] returns a new, reversed list and leaves the original unchanged.",
    ),
    (
        "I lost my wallet in Lisbon with my card {card} and my ID ({nid}) in it. What should I do first?",
        "Block card {card} in your banking app right away, then report the lost ID to the police so you can get a "
        "replacement.",
    ),
    (
        "Our logs show {ip} sending thousands of requests a minute to /login. How do I block it in nginx?",
        "Add 'deny {ip};' to the server block and reload nginx; requests from that address will then get 403.",
    ),
    (
        "boto3 says InvalidClientTokenId for access key {aws_key}. Why?",
        "That access key id is wrong or deactivated: check it in IAM, and make sure an old AWS_ACCESS_KEY_ID variable "
        "is not overriding it.",
    ),
    (
        "Is it safe to send {ssn} to my landlord by email?",
        "No: email is not encrypted end to end, so give it over the phone or through the landlord's secure portal.",
    ),
    (
        "Why was my transfer from {iban} returned?",
        "Transfers from {iban} are returned when the account holder's name doesn't match; check the name on the payout "
        "form.",
    ),
    (
        "My IP {ip} got blocked after too many login attempts. How long does that last?",
        "The block on {ip} lifts automatically after 15 minutes; then you can sign in again.",
    ),
    (
        "Do you keep {nid} after I check out?",
        "No: we keep the ID number only until checkout, then it is deleted from the booking.",
    ),
    (
        "Which Python version should I use with Django 5?",
        "Django 5.0 supports Python 3.10 to 3.12; pick 3.12 for a new project.",
    ),
)
_FILLERS = (
    "Thanks for getting in touch. We also sell gift cards.",
    "We appreciate your patience. Have you tried our new app?",
    "Great question! Python is a popular language.",
    "I hope you're having a productive day.",
    "Travel is a wonderful way to learn. Check out our premium lounges.",
    "Thank you for being a valued customer.",
    "Did you know we now offer chat support around the clock?",
    "As always, we're here to help with anything else you need.",
)
_OFF_TOPIC = (
    "Our loyalty programme gives you double points this month!",
    "Gift cards never expire.",
    "JavaScript arrays have a sort method.",
    "Kubernetes schedules pods onto nodes.",
    "The lounge in terminal two opens at five in the morning.",
)
_SLOT_RE = re.compile(r"\{(\w+)\}")
_LABELS: tuple[Literal["relevant", "padded", "off_topic"], ...] = ("relevant", "padded", "off_topic")


def _fill(rng: random.Random, template: str, values: dict[str, tuple[str, Planted | None]]) -> str:
    for name in _SLOT_RE.findall(template):
        if name in values:
            continue
        if name in _PLAIN_SLOTS:
            values[name] = (_PLAIN_SLOTS[name](rng), None)
        else:
            kind, fmts = _SLOTS[name]
            value, fmt = _planted(rng, kind, fmts)
            values[name] = (planted_snippet(rng, value, fmt), Planted(kind, value, fmt))
    return _SLOT_RE.sub(lambda m: values[m.group(1)][0], template)


def relevancy_cases(seed: int = 0) -> list[RelevancyCase]:
    """About 200 question/response pairs labelled relevant, padded or off-topic, most carrying personal data."""
    rng = random.Random(seed)
    cases: list[RelevancyCase] = []
    while len(cases) < 201:
        label = _LABELS[len(cases) % 3]
        i = rng.randrange(len(_SCENARIOS))
        question_tpl, tight_tpl = _SCENARIOS[i]
        values: dict[str, tuple[str, Planted | None]] = {}
        question = _fill(rng, question_tpl, values)
        if label == "off_topic":
            if rng.random() < 0.5:
                response = rng.choice(_OFF_TOPIC)
            else:
                # An answer to another question, with that question's own personal data in it.
                other = rng.choice([j for j in range(len(_SCENARIOS)) if j != i])
                other_values: dict[str, tuple[str, Planted | None]] = {}
                response = _fill(rng, _SCENARIOS[other][1], other_values)
                values.update({f"off:{k}": v for k, v in other_values.items()})
        else:
            response = _fill(rng, tight_tpl, values)
            if label == "padded":
                filler = rng.sample(_FILLERS, 2)
                response = rng.choice(
                    (f"{filler[0]} {response}", f"{response} {filler[0]}", f"{filler[0]} {response} {filler[1]}")
                )
        planted: dict[str, Planted] = {}
        for _, item in values.values():
            if item is not None and (item.value in question or item.value in response):
                planted.setdefault(item.value, item)
        if not _well_formed(question + "\n" + response, list(planted)):
            continue
        cases.append(RelevancyCase(question, response, label, tuple(planted.values())))
    return cases


# ---------------------------------------------------------------------------------------------------------------
# The values shipped for `produce --pii-share`

PACKAGED_SEED, PACKAGED_PER_KIND, PACKAGED_SNIPPETS = 2026, 60, 3


def packaged_values(
    seed: int = PACKAGED_SEED, per_kind: int = PACKAGED_PER_KIND, snippets: int = PACKAGED_SNIPPETS
) -> list[dict[str, object]]:
    """`per_kind` distinct values of every kind, each with `snippets` ways of writing it into a sentence: the
    records of the package's values file, one per line (the same for a seed)."""
    rng = random.Random(seed)
    records: list[dict[str, object]] = []
    for kind in BUILTIN_KINDS:
        seen: set[str] = set()
        while len(seen) < per_kind:
            value, fmt = planted_value(rng, kind)
            if value in seen:
                continue
            seen.add(value)
            ways = sorted({planted_snippet(rng, value, fmt) for _ in range(snippets)})
            records.append({"kind": kind, "fmt": fmt, "value": value, "snippets": ways})
    return records


def packaged_lines(records: Sequence[dict[str, object]]) -> str:
    """The values file's text: one JSON record per line."""
    return "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in records)


def main() -> None:
    """Rewrite the package's values file from the generator."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.parse_args()
    target = Path(str(importlib.resources.files("monitor.devtools").joinpath(PACKAGED_VALUES)))
    target.write_text(packaged_lines(packaged_values()), encoding="utf-8")
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
