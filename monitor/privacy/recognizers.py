"""The built-in recognizers: a cheap pattern finds candidates, a validator keeps only real items.

Validators, not bare patterns, so that order numbers, dates, prices, versions, ports and status codes survive:
cards need a known issuer prefix and the Luhn check, IBANs the country's length and format and mod 97 (python-stdnum),
phone numbers the numbering plan of their country (phonenumbers, Google's libphonenumber), SSNs the issued ranges,
national ids their check digit (python-stdnum), IP addresses the address grammar (ipaddress). Digit-only ids whose
check digit passes one random number in ten (Dutch BSN, German tax id, unseparated SSN or SIN) count only right
after their name. Names and street addresses are not recognised: that needs a trained model (see the README)."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import phonenumbers
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

from monitor.privacy.kinds import CARD, EMAIL, IBAN, IP, NATIONAL_ID, PHONE, SECRET, SSN, URL_CREDENTIALS
from monitor.privacy.spans import Span
from monitor.protocols import Recognizer
from schemas.errors import ConfigError

# No digit right before or after, not even across one space or dash: "4539 1488 0343" inside a card number is no
# Aadhaar number, and a number inside a longer one is not an item of its own.
_NO_DIGIT_BEFORE = r"(?<!\d)(?<!\d[ \-.])"
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
        if self.needs:
            folded = text.casefold()
            if not any(n in folded for n in self.needs):
                return
        for m in self.pattern.finditer(text):
            group = "item" if "item" in self.pattern.groupindex else 0
            start, end = m.span(group)
            if start < end and self.valid(m.group(group)):
                yield Span(start, end, self.kind)


# ---- cards -----------------------------------------------------------------------------------------------------

# Issuer prefixes (IIN ranges) of the card networks: a Luhn-valid number without one is an order or tracking number.
_CARD_PREFIX = re.compile(
    r"^(?:4|5[1-5]|2(?:2[2-9][1-9]|2[3-9]\d|[3-6]\d\d|7[01]\d|720)|3[47]|3(?:0[0-5]|[68])|6(?:011|4[4-9]|5)|35(?:2[89]|[3-8])|62|5[06-9]|6[0-9])"
)


# Lengths per network where they are fixed: a 15-digit number starting 27 is no Mastercard (a French NIR may be).
_CARD_LENGTHS: tuple[tuple[re.Pattern[str], frozenset[int]], ...] = (
    (re.compile(r"^3[47]"), frozenset({15})),  # American Express
    (re.compile(r"^(?:5[1-5]|2[2-7])"), frozenset({16})),  # Mastercard
    (re.compile(r"^4"), frozenset({13, 16, 19})),  # Visa
)


def _is_card(candidate: str) -> bool:
    number = _digits(candidate)
    if not 13 <= len(number) <= 19 or not _CARD_PREFIX.match(number):
        return False
    for prefix, lengths in _CARD_LENGTHS:
        if prefix.match(number):
            if len(number) not in lengths:
                return False
            break
    groups = re.split(r"[ \-]", candidate)
    # Written in groups: each of 3 to 6 digits (4-4-4-4, Amex 4-6-5), never "1 2 3 ..." or a date-like 2-2-4.
    if len(groups) > 1 and not all(3 <= len(g) <= 6 for g in groups):
        return False
    return bool(luhn.is_valid(number))


# Not glued to letters either: "BE25001068140051" is a (bad) IBAN, not a card after "BE".
CARD_NUMBERS = ValidatedPattern(
    CARD, re.compile(r"(?<![A-Za-z])" + _NO_DIGIT_BEFORE + r"\d(?:[ \-]?\d){12,18}(?![A-Za-z])" + _NO_DIGIT_AFTER), _is_card
)

# ---- IBAN ------------------------------------------------------------------------------------------------------

_IBAN_CANDIDATE = re.compile(r"(?<![A-Za-z0-9])[A-Za-z]{2}\d{2}(?:[ ]?[A-Za-z0-9]){11,30}(?![A-Za-z0-9])")


def _iban_spans(text: str) -> Iterator[Span]:
    for m in _IBAN_CANDIDATE.finditer(text):
        raw = m.group()
        # The greedy candidate may run into the next word ("... 0130 00 is mine" is fine, "...00 DE" is not):
        # try the longest prefix that validates, cut at a character boundary of the original.
        for end in range(len(raw), 14, -1):
            piece = raw[:end]
            if piece.endswith(" ") or (end < len(raw) and raw[end].isalnum()):
                continue
            if stdnum_iban.is_valid(piece.upper()):
                yield Span(m.start(), m.start() + end, IBAN)
                break


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


SSN_FORMATTED = ValidatedPattern(SSN, re.compile(_NO_DIGIT_BEFORE + r"\d{3}([- ])\d{2}\1\d{4}" + _NO_DIGIT_AFTER), _is_ssn)
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
    r"(?<![A-Za-z0-9])(?:QQ|(?!(?:BG|GB|KN|NK|NT|TN|ZZ))[A-CEGHJ-PR-TW-Z][A-CEGHJ-NPR-TW-Z]) ?\d{2} ?\d{2} ?\d{2} ?[A-D](?![A-Za-z0-9])"
)
_OMOCODE = "0-9LMNPQRSTUV"  # codice fiscale digits may be replaced by these letters (omocodia)

NATIONAL_IDS_NUMERIC: tuple[ValidatedPattern, ...] = (
    ValidatedPattern(NATIONAL_ID, _NINO, lambda _: True),
    ValidatedPattern(NATIONAL_ID, re.compile(r"(?<![A-Za-z0-9])\d{8}-?[A-Za-z](?![A-Za-z0-9])"), _stdnum(es_dni)),
    ValidatedPattern(NATIONAL_ID, re.compile(r"(?<![A-Za-z0-9])[XYZxyz]-?\d{7}-?[A-Za-z](?![A-Za-z0-9])"), _stdnum(es_nie)),
    ValidatedPattern(
        NATIONAL_ID,
        re.compile(_NO_DIGIT_BEFORE + r"[12] ?\d{2} ?\d{2} ?(?:\d{2}|2[AaBb]) ?\d{3} ?\d{3} ?\d{2}" + _NO_DIGIT_AFTER),
        _stdnum(fr_nir),
    ),
    ValidatedPattern(NATIONAL_ID, re.compile(_NO_DIGIT_BEFORE + r"\d{3}([- ])\d{3}\1\d{3}" + _NO_DIGIT_AFTER), _stdnum(ca_sin)),
    ValidatedPattern(NATIONAL_ID, re.compile(_NO_DIGIT_BEFORE + r"[2-9]\d{3}([- ])\d{4}\1\d{4}" + _NO_DIGIT_AFTER), _stdnum(in_aadhaar)),
)
NATIONAL_IDS_ALPHA: tuple[ValidatedPattern, ...] = (
    ValidatedPattern(
        NATIONAL_ID,
        re.compile(rf"\b[A-Za-z]{{6}}[{_OMOCODE}]{{2}}[A-Za-z][{_OMOCODE}]{{2}}[A-Za-z][{_OMOCODE}]{{3}}[A-Za-z]\b"),
        lambda c: bool(it_codicefiscale.is_valid(c.upper())),
    ),
)
# Digit-only ids: only right after their name.
NATIONAL_IDS_NAMED: tuple[ValidatedPattern, ...] = (
    ValidatedPattern(
        NATIONAL_ID,
        re.compile(
            r"(?i:\b(?:BSN(?:[- ]?(?:nummer|number|nr\.?))?|burgerservicenummer)\b)\W{0,4}(?:is\W{1,3})?(?P<item>\d{4}\.?\d{2}\.?\d{3}|\d{9})(?!\d)"
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
        lambda c: bool(de_idnr.is_valid(_digits(c))),
        ("steuer", "idnr", "identifikationsnummer"),
    ),
    ValidatedPattern(
        NATIONAL_ID,
        re.compile(r"(?i:\b(?:SIN(?:[- ]?(?:number|no\.?|nr\.?))?|social\s+insurance(?:\s+number)?)\b)\W{0,4}(?:is\W{1,3})?(?P<item>\d{9})(?!\d)"),
        lambda c: bool(ca_sin.is_valid(c)),
        ("sin", "insurance"),
    ),
    ValidatedPattern(
        NATIONAL_ID,
        re.compile(r"(?i:\baadhaar(?:\s+(?:number|no\.?))?)\W{0,4}(?:is\W{1,3})?(?P<item>[2-9]\d{11})(?!\d)"),
        _stdnum(in_aadhaar),
        ("aadhaar",),
    ),
)

# ---- email, IP -------------------------------------------------------------------------------------------------

EMAIL_ADDRESSES = ValidatedPattern(
    EMAIL,
    re.compile(
        r"(?<![\w.%+\-])[A-Za-z0-9](?:[A-Za-z0-9._%+\-]{0,62}[A-Za-z0-9_%+\-])?@"
        r"(?:[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,63}(?![\w\-]|\.[A-Za-z0-9])"
    ),
    lambda _: True,
    ("@",),
)

_V4_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
# Not part of a longer dotted number, and not a version ("v1.2.3.4", "version 1.2.3.4").
_IPV4 = re.compile(rf"(?<![\w.])(?<!\bv)(?<![Vv]ersion )(?<![Rr]elease )(?<![Bb]uild )(?:{_V4_OCTET}\.){{3}}{_V4_OCTET}(?![\w]|\.\d)")
_IPV6 = re.compile(r"(?<![\w:.])\[?(?P<item>(?:[0-9A-Fa-f]{0,4}:){2,7}(?:[0-9A-Fa-f]{1,4}|(?:\d{1,3}\.){3}\d{1,3})?)(?![\w:])")


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
    (("-----begin",), r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]{0,10000}?-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"),
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
        ("pass",),
        r"(?i:\b(?:password|passwd|passcode|passphrase)\s+(?:is|was)\s+)[\"']?(?P<item>(?=[^\s\"']*[\d!@#$%^&*?_~+\-])[^\s\"',;]{4,64})",
    ),
    (("pin",), r"(?i:\bpin(?:\s+(?:code|number))?(?:\s+(?:is|was)\s+|\s*[:=]\s*))(?P<item>\d{4,8})(?!\d)"),
    # key = value assignments of credentials; the value needs a digit and a letter, so "token: none" survives
    (
        ("key", "secret", "token", "pass", "pwd"),
        r"(?i:\b(?:api[_\-]?key|secret[_\-]?key|client[_\-]?secret|access[_\-]?token|auth[_\-]?token|password|passwd|pwd)\b)"
        r"[\"']?\s*[=:]\s*[\"']?(?P<item>(?=[^\s\"']*\d)(?=[^\s\"']*[A-Za-z])[^\s\"',;]{6,})",
    ),
)


@dataclass(frozen=True, slots=True)
class SecretRecognizer:
    """API keys and tokens of well-known providers, JWTs, bearer tokens, PEM private keys, credential assignments."""

    patterns: tuple[tuple[tuple[str, ...], re.Pattern[str]], ...] = tuple((n, re.compile(p)) for n, p in _SECRET_PATTERNS)

    def find(self, text: str) -> Iterator[Span]:
        """The secrets in `text`."""
        folded = text.casefold()
        for needles, pattern in self.patterns:
            if not any(n in folded for n in needles):
                continue
            group = "item" if "item" in pattern.groupindex else 0
            for m in pattern.finditer(text):
                start, end = m.span(group)
                yield Span(start, end, SECRET)


URL_CREDENTIAL_PAIRS = ValidatedPattern(
    URL_CREDENTIALS,
    re.compile(r"\b[A-Za-z][A-Za-z0-9+.\-]{1,20}://(?P<item>[^\s/@:\[\]]+:[^\s/@]+)@[\w\[]"),
    lambda _: True,
    ("://",),
)

# ---- phone numbers ---------------------------------------------------------------------------------------------

# A phone-shaped run: an optional + or 00 and 7 to 15 digits with single separators. phonenumbers then decides,
# on that short window only (its matcher over the whole text costs ~100 µs).
_PHONE_CANDIDATE = re.compile(r"(?<![\w+.\-/])(?:\+|\(\+?)?\d(?:(?:[ .\-/]|\) ?| \()?\d){6,16}(?![\w]|[.\-/]\d)")


def check_phone_regions(regions: Sequence[str]) -> None:
    """Raise `ConfigError` naming a region code the phone-number library does not know."""
    known = phonenumbers.SUPPORTED_REGIONS
    unknown = [r for r in regions if r not in known]
    if unknown:
        raise ConfigError(f"unknown phone region(s) {', '.join(unknown)}: use ISO 3166 two-letter codes such as US, GB, DE")


# Dates, and dotted quads (IP addresses, recognised as such; versions)
_NOT_A_PHONE = re.compile(r"^(?:\d{4}[-/. ]\d{1,2}[-/. ]\d{1,2}|\d{1,2}[-/. ]\d{1,2}[-/. ]\d{2,4}|\d{1,3}(?:\.\d{1,5}){3})$")


# Regions with a trunk prefix 0 whose mobile numbers are usually written without it (98765 43210 in India).
_WRITTEN_WITHOUT_TRUNK = frozenset({"IN"})


def _national_prefix(region: str) -> str:
    metadata = phonenumbers.PhoneMetadata.metadata_for_region(region)
    return (metadata.national_prefix or "") if metadata is not None else ""


@dataclass(frozen=True, slots=True)
class PhoneRecognizer:
    """Phone numbers valid in their country's numbering plan: international ones (+ or 00) for any country,
    national ones for `regions` (written with the region's trunk prefix where it has one: 020 ..., 030 ...)."""

    regions: tuple[str, ...]

    def find(self, text: str) -> Iterator[Span]:
        """The valid phone numbers in `text`."""
        # Digits inside an IBAN-shaped run ("NL26 TRIO 0327 3500 75", valid or not) are an account, not a phone.
        accounts = [m.span() for m in _IBAN_CANDIDATE.finditer(text)]
        for m in _PHONE_CANDIDATE.finditer(text):
            if any(start <= m.start() < end for start, end in accounts):
                continue
            candidate = m.group()
            if not 7 <= sum(c.isdigit() for c in candidate) <= 15 or _NOT_A_PHONE.match(candidate):
                continue  # E.164 allows 15 digits at most: a 16-digit run is a card or an id, not a phone
            span = self._validate(candidate)
            if span is not None:
                yield Span(m.start() + span[0], m.start() + span[1], PHONE)

    def _validate(self, candidate: str) -> tuple[int, int] | None:
        """The span of the valid number within `candidate`, or None."""
        international = candidate.startswith(("+", "(+", "00"))
        window = "+" + candidate[2:] if candidate.startswith("00") else candidate
        digits = _digits(candidate)
        for region in ("ZZ",) if international else self.regions:
            if not international and region not in _WRITTEN_WITHOUT_TRUNK and _national_prefix(region) == "0" and not digits.startswith("0"):
                continue  # "415 555 2671" is no German number: national formats there start with the trunk 0
            try:
                # parse is ~4x cheaper than the matcher; the matcher then rules out dates, times and bad grouping.
                if not phonenumbers.is_valid_number(phonenumbers.parse(window, region)):
                    continue
            except phonenumbers.NumberParseException:
                continue
            found = next(iter(phonenumbers.PhoneNumberMatcher(window, region)), None)
            if found is None:
                continue
            start, end = found.start, found.end
            if window is not candidate:  # "+" stands for the two characters "00" of the text
                start, end = (start + 1 if start else 0), end + 1
            return start, end
        return None


@dataclass(frozen=True, slots=True)
class GatedGroup:
    """Recognizers run only when `gate` occurs in the text: most text has no long digit run, and a dozen patterns
    scanning it for nothing would cost more than the judge call's bookkeeping."""

    gate: re.Pattern[str]
    members: tuple[Recognizer, ...]

    def find(self, text: str) -> Iterator[Span]:
        """The members' spans, if the gate opens."""
        if self.gate.search(text) is None:
            return
        for member in self.members:
            yield from member.find(text)


# Six digits with at most two separator characters between them: every number-shaped kind has such a run.
_DIGIT_RUN = re.compile(r"\d(?:[ \-.()/]{0,2}\d){5}")


_DOTTED_NUMBER = re.compile(r"\d\.\d{1,3}\.\d")
_COLON_HEX = re.compile(r"[0-9A-Fa-f]:[0-9A-Fa-f:]|::")


def builtin_recognizers(phone_regions: Sequence[str]) -> list[Recognizer]:
    """Every built-in recognizer, in priority order (where two items overlap, the earlier kind wins)."""
    numbers: tuple[Recognizer, ...] = (IbanRecognizer(), CARD_NUMBERS, SSN_FORMATTED, *NATIONAL_IDS_NUMERIC, PhoneRecognizer(tuple(phone_regions)))
    return [
        SecretRecognizer(),
        URL_CREDENTIAL_PAIRS,
        EMAIL_ADDRESSES,
        # An id right after its name is stronger evidence than the shape of a number: named ones come first.
        SSN_NAMED,
        *NATIONAL_IDS_NAMED,
        GatedGroup(_DIGIT_RUN, numbers),
        *NATIONAL_IDS_ALPHA,
        GatedGroup(_DOTTED_NUMBER, (IPV4_ADDRESSES,)),
        GatedGroup(_COLON_HEX, (IPV6_ADDRESSES,)),
    ]
