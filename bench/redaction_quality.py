"""Redaction quality on the labelled sets of `tests.pii_corpus`: recall per kind, look-alikes kept and
µs per text of the built-in redactor, and how far redaction moves relevancy scores (lexical judge), with the
targets of issue 12 next to each figure. Then the fail-closed set of issue 27 (`fail_closed_texts`): items valid
under their kind's international check that a national or secondary rule rejects, which must be redacted all the
same, beside look-alikes failing the international check, which must be kept. Then the locale set of issue 40
(`bench.locale_pii`): e-mail addresses, phone numbers, cards and national ids as nine European locales write them,
with the phone regions of those locales configured, beside their order numbers, dates, prices, tracking numbers and
versions. Run: `python -m bench.redaction_quality`.
"""

from __future__ import annotations

import asyncio
import random
import statistics
from collections.abc import Callable, Sequence

import phonenumbers
from stdnum import iban as stdnum_iban
from stdnum import luhn, verhoeff
from stdnum.be import iban as be_iban
from stdnum.de import idnr as de_idnr
from stdnum.es import ccc as es_ccc
from stdnum.fr import nir as fr_nir
from stdnum.in_ import aadhaar as in_aadhaar
from stdnum.iso7064 import mod_11_10
from stdnum.it import codicefiscale as it_codicefiscale
from stdnum.me import iban as me_iban
from stdnum.no import kontonr as no_kontonr

from bench.locale_pii import LOCALES, locale_regions, locale_texts
from monitor.devtools.pii_samples import Planted
from monitor.devtools.redaction_eval import Evaluation, LabelledText, evaluate, format_evaluation
from monitor.judges.lexical import LexicalJudge
from monitor.privacy.kinds import CARD, IBAN, NATIONAL_ID, PHONE
from monitor.privacy.redactor import build_redactor
from monitor.privacy.settings import DEFAULT_PHONE_REGIONS, RedactionSettings
from monitor.privacy.spans import Redactor
from tests.pii_corpus import labelled_texts, relevancy_cases

RECALL_TARGET, PER_KIND_TARGET, BENIGN_TARGET = 0.98, 0.95, 0.98
LOCALE_PER_KIND_TARGET, LOCALE_BENIGN_TARGET = 0.95, 0.95  # issue 40
FAIL_CLOSED_PER_FORMAT = 61  # items per format of the fail-closed set (the Spanish sample had 61)


async def score_shift() -> tuple[float, float, dict[str, tuple[float, float]]]:
    """(mean absolute shift, largest shift, {label: (mean before, mean after)}) of lexical scores on the relevancy
    set."""
    judge, redactor = LexicalJudge(), build_redactor(RedactionSettings())
    shifts: list[float] = []
    by_label: dict[str, list[tuple[float, float]]] = {}
    for case in relevancy_cases(0):
        before = (await judge.judge(case.question, case.response)).score
        after = (await judge.judge(redactor.redact(case.question).text, redactor.redact(case.response).text)).score
        shifts.append(abs(after - before))
        by_label.setdefault(case.label, []).append((before, after))
    means = {
        label: (statistics.fmean(b for b, _ in pairs), statistics.fmean(a for _, a in pairs))
        for label, pairs in by_label.items()
    }
    return statistics.fmean(shifts), max(shifts), means


# ---- the fail-closed set ---------------------------------------------------------------------------------------
# Written from the specifications (ISO 13616, ISO/IEC 7812, E.164 and the national rules), not from the recognizers.

_Gen = Callable[[random.Random], str]


def _digits(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("0123456789") for _ in range(n))


def _with_iban_check(cc: str, bban: str) -> str:
    """`cc` and `bban` with the ISO 13616 check digits that make them pass mod 97."""
    return cc + stdnum_iban.calc_check_digits(cc + "00" + bban) + bban


def _iban_style(rng: random.Random, number: str) -> str:
    """Compact, in groups of four, or lower case, as people paste them."""
    return rng.choice((number, stdnum_iban.format(number), stdnum_iban.format(number), number.lower()))


def _rib_key(bank: str, branch: str, account: str) -> int:
    return 97 - (89 * int(bank) + 15 * int(branch) + 3 * int(account)) % 97


_CIN_ODD = (1, 0, 5, 7, 9, 13, 15, 17, 19, 21, 2, 4, 18, 20, 11, 3, 6, 8, 12, 14, 16, 10, 22, 25, 24, 23)


def _cin(rest: str) -> str:
    """The Italian CIN letter of ABI + CAB + account (digits only here)."""
    total = sum(_CIN_ODD[int(c)] if i % 2 == 0 else int(c) for i, c in enumerate(rest))
    return chr(ord("A") + total % 26)


def _es_bad_dc(rng: random.Random) -> str:
    ccc = rng.choice(("2100", "0049", "0182", "0081", "2085")) + _digits(rng, 4) + "00" + _digits(rng, 10)
    right = es_ccc.calc_check_digits(ccc)
    dc = rng.choice([f"{n:02d}" for n in range(100) if f"{n:02d}" != right])
    return _with_iban_check("ES", ccc[:8] + dc + ccc[10:])


def _fr_bad_key(rng: random.Random) -> str:
    bank, branch, account = rng.choice(("30004", "30003", "20041", "30002", "10278")), _digits(rng, 5), _digits(rng, 11)
    right = _rib_key(bank, branch, account)
    key = rng.choice([n for n in range(1, 98) if n != right])
    return _with_iban_check("FR", f"{bank}{branch}{account}{key:02d}")


def _it_bad_cin(rng: random.Random) -> str:
    rest = rng.choice(("03069", "02008", "05034", "01030", "03062")) + _digits(rng, 5) + _digits(rng, 12)
    right = _cin(rest)
    return _with_iban_check("IT", rng.choice([c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if c != right]) + rest)


def _be_bad_key(rng: random.Random) -> str:
    first = rng.choice(("001", "063", "068", "310", "363", "539", "735", "751")) + _digits(rng, 7)
    right = int(first) % 97 or 97
    return _with_iban_check("BE", first + f"{rng.choice([n for n in range(1, 98) if n != right]):02d}")


def _be_unlisted_bank(rng: random.Random) -> str:
    """A Belgian IBAN right in every check digit, of a bank code missing from python-stdnum's list of banks."""
    while True:
        first = _digits(rng, 10)
        number = _with_iban_check("BE", first + f"{int(first) % 97 or 97:02d}")
        if not be_iban.info(number):
            return number


def _no_bad_kontonr(rng: random.Random) -> str:
    while True:
        account = _digits(rng, 11)
        if not no_kontonr.is_valid(account):
            return _with_iban_check("NO", account)


def _me_bad_key(rng: random.Random) -> str:
    while True:
        number = _with_iban_check("ME", _digits(rng, 18))
        if not me_iban.is_valid(number):
            return number


def _mod97_wrong(gen: _Gen) -> _Gen:
    """An IBAN of `gen` with its national digits as they were and other ISO 13616 check digits (02 to 98)."""

    def draw(rng: random.Random) -> str:
        while True:
            number = gen(rng)
            wrong = rng.choice([f"{n:02d}" for n in range(2, 99) if f"{n:02d}" != number[2:4]])
            number = number[:2] + wrong + number[4:]
            if not stdnum_iban.is_valid(number, check_country=False):
                return number

    return draw


def _es_right_dc(rng: random.Random) -> str:
    ccc = rng.choice(("2100", "0049", "0182")) + _digits(rng, 4) + "00" + _digits(rng, 10)
    return _with_iban_check("ES", ccc[:8] + es_ccc.calc_check_digits(ccc) + ccc[10:])


def _fr_right_key(rng: random.Random) -> str:
    bank, branch, account = rng.choice(("30004", "20041", "10278")), _digits(rng, 5), _digits(rng, 11)
    return _with_iban_check("FR", f"{bank}{branch}{account}{_rib_key(bank, branch, account):02d}")


def _it_right_cin(rng: random.Random) -> str:
    rest = rng.choice(("03069", "02008", "05034")) + _digits(rng, 5) + _digits(rng, 12)
    return _with_iban_check("IT", _cin(rest) + rest)


def _be_right_key(rng: random.Random) -> str:
    first = rng.choice(("001", "063", "068", "310", "363", "735", "751")) + _digits(rng, 7)
    return _with_iban_check("BE", first + f"{int(first) % 97 or 97:02d}")


def _iban_planted(gen: _Gen) -> _Gen:
    return lambda rng: _iban_style(rng, gen(rng))


def _card_style(rng: random.Random, number: str) -> str:
    """Compact, or in groups with spaces or dashes: of four, 4-6-5 for 15 digits (Amex) and 4-6-4 for 14 (Diners)."""
    if rng.random() < 0.3:
        return number
    sep = rng.choice((" ", " ", "-"))
    if len(number) in (14, 15):
        return sep.join((number[:4], number[4:10], number[10:]))
    return sep.join(number[i : i + 4] for i in range(0, len(number), 4))


def _luhn_number(rng: random.Random, prefix: str, length: int, *, valid: bool = True) -> str:
    body = prefix + _digits(rng, length - 1 - len(prefix))
    check = luhn.calc_check_digit(body)
    if not valid:
        check = rng.choice([d for d in "0123456789" if d != check])
    return body + check


# Unusual prefixes of networks that use them, each with a length its network uses (ISO/IEC 7812: Luhn-valid PANs).
_UNUSUAL_CARDS: dict[str, tuple[tuple[Callable[[random.Random], str], tuple[int, ...]], ...]] = {
    "mir-2200-2204": ((lambda r: f"220{r.randint(0, 4)}", (16, 16, 19)),),
    "2-series-off-range": (
        (lambda r: str(r.randint(2000, 2220)), (16,)),
        (lambda r: str(r.randint(2721, 2999)), (16,)),
    ),
    "3-off-list": (
        (lambda r: str(r.randint(3500, 3527)), (16,)),  # below JCB's 3528
        (lambda r: str(r.randint(3590, 3599)), (16,)),  # above JCB's 3589
        (lambda r: r.choice(("3088", "3096", "3112", "3158", "3337")), (16,)),  # JCB's older ranges
        (lambda r: f"39{r.randint(0, 9)}", (14, 16)),  # Diners Club International
        (lambda r: f"30{r.randint(6, 9)}", (14, 16)),
    ),
    "uatp-1": ((lambda r: "1", (15,)),),
    "unionpay-rupay-8": ((lambda r: r.choice(("81", "82", "8600")), (16, 16, 19)),),
    "troy-9792": ((lambda r: "9792", (16,)),),
    "visa-any-bin": ((lambda r: "4" + _digits(r, 5), (16,)),),  # in the old list too: a control
}


def _unusual_card(fmt: str, *, valid: bool = True) -> _Gen:
    def gen(rng: random.Random) -> str:
        prefix_of, lengths = rng.choice(_UNUSUAL_CARDS[fmt])
        while True:
            number = _luhn_number(rng, prefix_of(rng), rng.choice(lengths), valid=valid)
            if not (len(number) == 15 and fr_nir.is_valid(number)):  # a NIR is a national id: not this set's
                return _card_style(rng, number)

    return gen


def _card_wrong_length(rng: random.Random) -> str:
    """Luhn-valid, of a length its network never uses: Visa 14/15/17/18, Amex 14/16, Mastercard 15/17, 2-series 15."""
    prefix, length = rng.choice(
        (("4", 14), ("4", 15), ("4", 17), ("4", 18), ("34", 16), ("37", 14), ("52", 15), ("55", 17), ("27", 15))
    )
    while True:
        number = _luhn_number(rng, prefix + _digits(rng, 2), length)
        if not fr_nir.is_valid(number):
            return _card_style(rng, number) if length in (15, 16) else number


def _card_no_network(rng: random.Random) -> str:
    """Luhn-valid, 16 to 19 digits, starting 0 or 7: no card network has those (nor a phone, at that length)."""
    return _card_style(rng, _luhn_number(rng, rng.choice("07"), rng.choice((16, 16, 19))))


_INTL_REGIONS = ("US", "GB", "DE", "FR", "ES", "IT", "NL", "IN", "AU", "JP", "BR", "MX")


def _unlisted_number(rng: random.Random) -> tuple[int, str]:
    """(country code, national number) of a full length its country uses, at most E.164's 15 digits in all, outside
    the ranges python-phonenumbers lists."""
    while True:
        metadata = phonenumbers.PhoneMetadata.metadata_for_region(rng.choice(_INTL_REGIONS))
        assert metadata is not None
        assert metadata.general_desc is not None
        code = metadata.country_code
        length = rng.choice(metadata.general_desc.possible_length)
        if code is None or len(str(code)) + length > 15:
            continue
        nsn = rng.choice("123456789") + _digits(rng, length - 1)
        number = phonenumbers.PhoneNumber(country_code=code, national_number=int(nsn))
        possible = phonenumbers.is_possible_number_with_reason(number) == phonenumbers.ValidationResult.IS_POSSIBLE
        if possible and not phonenumbers.is_valid_number(number):
            return code, nsn


def _grouped(nsn: str) -> str:
    return " ".join(nsn[i : i + 3] for i in range(0, len(nsn), 3))


def _plus_unlisted(rng: random.Random) -> str:
    code, nsn = _unlisted_number(rng)
    return f"+{code} {_grouped(nsn)}" if rng.random() < 0.7 else f"+{code}{nsn}"


def _idd_unlisted(rng: random.Random) -> str:
    code, nsn = _unlisted_number(rng)
    return f"00{code} {_grouped(nsn)}"


def _national_phone(text: str) -> bool:
    for region in DEFAULT_PHONE_REGIONS:
        try:
            if phonenumbers.is_valid_number(phonenumbers.parse(text, region)):
                return True
        except phonenumbers.NumberParseException:
            continue
    return False


def _zero_padded_order(rng: random.Random) -> str:
    """An order number padded with zeros ("0049123456"): "00" alone is no international prefix."""
    while True:
        value = "00" + rng.choice("123456789") + _digits(rng, rng.randint(5, 9))
        if not _national_phone(value):
            return value


_CF_MONTHS = "ABCDEHLMPRST"


def _cf_impossible_date(rng: random.Random) -> str:
    """A codice fiscale whose check letter is right and whose day (32-40, or 72-79 for women) is no date."""
    letters = "".join(rng.choice("BCDFGLMNPRSTVZ") for _ in range(6))
    day = rng.choice((*range(32, 41), *range(72, 80)))
    town = rng.choice("ABCDEFGHLMZ") + _digits(rng, 3)
    code = f"{letters}{_digits(rng, 2)}{rng.choice(_CF_MONTHS)}{day:02d}{town}"
    return code + it_codicefiscale.calc_check_digit(code)


def _cf_bad_check(rng: random.Random) -> str:
    letters = "".join(rng.choice("BCDFGLMNPRSTVZ") for _ in range(6))
    code = f"{letters}{_digits(rng, 2)}{rng.choice(_CF_MONTHS)}{rng.randint(1, 28):02d}H501"
    right = it_codicefiscale.calc_check_digit(code)
    return code + rng.choice([c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if c != right])


def _idnr_off_rule(rng: random.Random) -> str:
    """A Steuer-ID whose check digit is right but whose digits break the issuing rule (exactly one digit repeated)."""
    while True:
        body = rng.choice("123456789") + _digits(rng, 9)
        number = body + mod_11_10.calc_check_digit(body)
        if not de_idnr.is_valid(number):
            return f"{number[:2]} {number[2:5]} {number[5:8]} {number[8:]}" if rng.random() < 0.5 else number


def _idnr_bad_check(rng: random.Random) -> str:
    while True:
        body = rng.choice("123456789") + _digits(rng, 9)
        right = mod_11_10.calc_check_digit(body)
        number = body + rng.choice([d for d in "0123456789" if d != right])
        if not _national_phone(number):  # "16584972221" is a valid US number: no look-alike of a Steuer-ID only
            return number


def _aadhaar_palindrome(rng: random.Random) -> str:
    """A 12-digit palindrome starting 2-9 whose Verhoeff check digit is right."""
    while True:
        half = rng.choice("23456789") + _digits(rng, 5)
        number = half + half[::-1]
        if verhoeff.is_valid(number):
            return " ".join(number[i : i + 4] for i in range(0, 12, 4))


def _aadhaar_bad_check(rng: random.Random) -> str:
    while True:
        number = rng.choice("23456789") + _digits(rng, 11)
        if not in_aadhaar.is_valid(number) and not verhoeff.is_valid(number):
            return " ".join(number[i : i + 4] for i in range(0, 12, 4))


_TEMPLATES = {
    IBAN: ("Please send the refund to {v}, thanks.", "My IBAN is {v}.", "Transfer to {v} bounced, why?"),
    CARD: ("My card {v} was charged twice.", "Card number: {v}", "The payment with {v} failed at checkout."),
    PHONE: ("Call me on {v} after six.", "My number is {v}.", "WhatsApp: {v}"),
    NATIONAL_ID: ("{v}",),
}
_BENIGN_TEMPLATES = ("Our test suite uses {v} as a value that must be rejected.", "The form says {v} is invalid.")

# (format, kind, generator, text template); kind None: a look-alike that must be kept.
_FAIL_CLOSED: tuple[tuple[str, str | None, _Gen, Sequence[str]], ...] = (
    ("iban-es-bad-dc", IBAN, _iban_planted(_es_bad_dc), _TEMPLATES[IBAN]),
    ("iban-fr-bad-rib-key", IBAN, _iban_planted(_fr_bad_key), _TEMPLATES[IBAN]),
    ("iban-it-bad-cin", IBAN, _iban_planted(_it_bad_cin), _TEMPLATES[IBAN]),
    ("iban-be-bad-key", IBAN, _iban_planted(_be_bad_key), _TEMPLATES[IBAN]),
    ("iban-be-unlisted-bank", IBAN, _iban_planted(_be_unlisted_bank), _TEMPLATES[IBAN]),
    ("iban-no-bad-kontonr", IBAN, _iban_planted(_no_bad_kontonr), _TEMPLATES[IBAN]),
    ("iban-me-bad-key", IBAN, _iban_planted(_me_bad_key), _TEMPLATES[IBAN]),
    *((f"card-{fmt}", CARD, _unusual_card(fmt), _TEMPLATES[CARD]) for fmt in _UNUSUAL_CARDS),
    ("phone-plus-unlisted-range", PHONE, _plus_unlisted, _TEMPLATES[PHONE]),
    ("phone-00-unlisted-range", PHONE, _idd_unlisted, _TEMPLATES[PHONE]),  # kept by design: see the recognizer
    (
        "nid-cf-impossible-date",
        NATIONAL_ID,
        _cf_impossible_date,
        ("My codice fiscale is {v}.", "CF {v} please update it"),
    ),
    ("nid-idnr-off-rule", NATIONAL_ID, _idnr_off_rule, ("Meine Steuer-ID ist {v}.", "Steuer-ID: {v}")),
    ("nid-aadhaar-palindrome", NATIONAL_ID, _aadhaar_palindrome, ("My Aadhaar is {v}.", "Aadhaar number {v}")),
    ("benign-iban-es-bad-mod97", None, lambda r: _iban_style(r, _mod97_wrong(_es_right_dc)(r)), _BENIGN_TEMPLATES),
    ("benign-iban-fr-bad-mod97", None, lambda r: _iban_style(r, _mod97_wrong(_fr_right_key)(r)), _BENIGN_TEMPLATES),
    ("benign-iban-it-bad-mod97", None, lambda r: _iban_style(r, _mod97_wrong(_it_right_cin)(r)), _BENIGN_TEMPLATES),
    ("benign-iban-be-bad-mod97", None, lambda r: _iban_style(r, _mod97_wrong(_be_right_key)(r)), _BENIGN_TEMPLATES),
    (
        "benign-card-bad-luhn",
        None,
        lambda r: _unusual_card(r.choice(tuple(_UNUSUAL_CARDS)), valid=False)(r),
        _BENIGN_TEMPLATES,
    ),
    ("benign-card-wrong-length", None, _card_wrong_length, _BENIGN_TEMPLATES),
    ("benign-card-no-network", None, _card_no_network, _BENIGN_TEMPLATES),
    ("benign-zero-padded-order", None, _zero_padded_order, ("Order {v} shipped yesterday.", "Invoice {v} is unpaid.")),
    ("benign-cf-bad-check", None, _cf_bad_check, ("codice fiscale {v} is rejected", "CF {v} fails the check")),
    ("benign-idnr-bad-check", None, _idnr_bad_check, ("Steuer-ID {v} ist ungültig.",)),
    ("benign-aadhaar-bad-check", None, _aadhaar_bad_check, ("Aadhaar {v} fails Verhoeff.",)),
)


def fail_closed_texts(seed: int = 0, per_format: int = FAIL_CLOSED_PER_FORMAT) -> dict[str, list[LabelledText]]:
    """`per_format` one-item texts of each format of the fail-closed set, by format (the same for a seed)."""
    rng = random.Random(seed)
    texts: dict[str, list[LabelledText]] = {}
    for fmt, kind, gen, templates in _FAIL_CLOSED:
        for _ in range(per_format):
            value = gen(rng)
            text = rng.choice(templates).format(v=value)
            planted = (Planted(kind, value, fmt),) if kind else ()
            texts.setdefault(fmt, []).append(LabelledText(text, planted, () if kind else (value,)))
    return texts


def format_fail_closed(redactor: Redactor, texts: dict[str, list[LabelledText]]) -> str:
    """Per format: planted items replaced by their own placeholder, or look-alikes kept verbatim, with counts."""
    lines = []
    for fmt, group in texts.items():
        e = evaluate(redactor, group, timing_runs=0)
        if e.per_kind:
            lines.append(f"  {fmt:<34} redacted {sum(k.typed for k in e.per_kind):>3}/{len(group)}")
        else:
            lines.append(f"  {fmt:<34} kept     {e.benign_kept:>3}/{e.benign}")
    return "\n".join(lines)


def locale_evaluation(redactor: Redactor, seed: int = 0) -> tuple[Evaluation, dict[str, Evaluation]]:
    """The locale set of `seed` as a whole and per locale."""
    texts = locale_texts(seed)
    whole = evaluate(redactor, [t.text for t in texts], timing_runs=3)
    per_locale = {loc: evaluate(redactor, [t.text for t in texts if t.locale == loc], timing_runs=0) for loc in LOCALES}
    return whole, per_locale


def format_locales(per_locale: dict[str, Evaluation]) -> str:
    """One row per locale: typed recall of each kind and the share of look-alikes kept."""
    kinds = sorted({k.kind for e in per_locale.values() for k in e.per_kind})
    lines = ["  " + f"{'locale':<8}" + "".join(f"{k:>13}" for k in kinds) + f"{'kept':>9}"]
    for loc, e in per_locale.items():
        shares = {k.kind: k.typed_share for k in e.per_kind}
        lines.append(
            "  " + f"{loc:<8}" + "".join(f"{shares.get(k, 1.0):>13.3f}" for k in kinds) + f"{e.benign_share:>9.3f}"
        )
    return "\n".join(lines)


def print_locales(seed: int = 0) -> None:
    """The locale set: the evaluation, per locale, against the targets, and what was missed or harmed."""
    redactor = build_redactor(RedactionSettings(redact_phone_regions=locale_regions()))
    whole, per_locale = locale_evaluation(redactor, seed)
    print(format_evaluation(f"locale set (issue 40), seed {seed}, phone regions {','.join(locale_regions())}", whole))
    print(format_locales(per_locale))
    worst = min(whole.per_kind, key=lambda k: k.typed_share)
    print(
        f"  targets: worst kind {worst.kind} {worst.typed_share:.3f} >= {LOCALE_PER_KIND_TARGET}, "
        f"look-alikes {whole.benign_share:.3f} >= {LOCALE_BENIGN_TARGET}"
    )
    for kind, fmt, value in whole.missed[:20]:
        print(f"  missed {kind:<12} {fmt:<26} {value[:50]!r}")
    for value in whole.harmed[:20]:
        print(f"  look-alike redacted: {value[:60]!r}")


def main() -> None:
    """Print the evaluation, the misses and the score shift, then the fail-closed set by kind and by format, then
    the locale set."""
    redactor = build_redactor(RedactionSettings())
    e = evaluate(redactor, labelled_texts(0), timing_runs=5)
    print(format_evaluation("built-in redactor (validated recognizers)", e))
    worst = min(e.per_kind, key=lambda k: k.typed_share)
    print(
        f"  targets: recall {e.recall:.3f} >= {RECALL_TARGET}, worst kind {worst.kind} {worst.typed_share:.3f} "
        f">= {PER_KIND_TARGET}, look-alikes {e.benign_share:.3f} >= {BENIGN_TARGET}"
    )
    for kind, fmt, value in e.missed[:20]:
        print(f"  missed {kind:<16} {fmt:<24} {value[:60]!r}")
    for value in e.harmed[:20]:
        print(f"  look-alike redacted: {value[:60]!r}")
    mean, largest, means = asyncio.run(score_shift())
    print(f"lexical score shift from redaction: mean |Δ| {mean:.4f}, largest {largest:.3f}")
    for label, (before, after) in sorted(means.items()):
        print(f"  {label:<10} mean score {before:.3f} -> {after:.3f}")
    texts = fail_closed_texts(0)
    closed = evaluate(redactor, [t for group in texts.values() for t in group], timing_runs=3)
    print(format_evaluation("fail-closed set (issue 27: valid internationally, failing a national rule)", closed))
    print(format_fail_closed(redactor, texts))
    for kind, fmt, value in closed.missed[:20]:
        print(f"  missed {kind:<12} {fmt:<30} {value[:40]!r}")
    for value in closed.harmed[:20]:
        print(f"  look-alike redacted: {value[:60]!r}")
    for seed in (0, 1):
        print_locales(seed)


if __name__ == "__main__":
    main()
