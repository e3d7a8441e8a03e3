"""Personal data as people in nine European locales write it, and the look-alikes around it that must be kept.

Written from the specifications (python-stdnum's check digits, libphonenumber's numbering plans, ISO/IEC 7812,
RFC 6531 and IDNA), not from the recognizers: every value is drawn at random and then given its check digits, and
written in several real-world formats per locale (with separators, compact, with and without the id's name).
Look-alikes are order numbers, dates, prices, tracking numbers, postcodes, versions and invoice numbers in the same
locales. Deterministic for a seed; `locale_texts` is what `bench.redaction_quality` measures and what
`tests/monitor/privacy/test_locales.py` checks.
"""

from __future__ import annotations

import random
import string
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

import phonenumbers
from stdnum import luhn
from stdnum.de import idnr as de_idnr
from stdnum.es import dni as es_dni
from stdnum.es import nie as es_nie
from stdnum.fr import nir as fr_nir
from stdnum.iso7064 import mod_11_10
from stdnum.it import codicefiscale as it_codicefiscale
from stdnum.pl import pesel as pl_pesel
from stdnum.pt import cc as pt_cc

from monitor.devtools.pii_samples import Planted
from monitor.devtools.redaction_eval import LabelledText
from monitor.privacy.kinds import CARD, EMAIL, NATIONAL_ID, PHONE

LOCALES: tuple[str, ...] = ("ES", "IT", "PL", "NL", "FR", "DE", "BE", "PT", "SE")

_Gen = Callable[[random.Random], str]


def _digits(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(string.digits) for _ in range(n))


def _date(rng: random.Random) -> tuple[int, int, int]:
    return rng.randint(1940, 2012), rng.randint(1, 12), rng.randint(1, 28)


# ---- e-mail addresses (RFC 6531 local parts, IDNA domains) -----------------------------------------------------

_NAMES = {
    "ES": (("josé", "garcía"), ("maría", "núñez"), ("íñigo", "ibáñez"), ("raúl", "peña")),
    "IT": (("niccolò", "rossi"), ("lucia", "de angelis"), ("mattia", "fabbrì"), ("chiara", "esposito")),
    "PL": (("łukasz", "wójcik"), ("małgorzata", "kowalczyk"), ("zofia", "żak"), ("paweł", "górski")),
    "NL": (("daniëlle", "de vries"), ("jeroen", "bakker"), ("anouk", "van dijk"), ("joëlle", "smit")),
    "FR": (("françois", "lefèvre"), ("hélène", "dubois"), ("zoé", "garçon"), ("jérôme", "moreau")),
    "DE": (("jürgen", "müller"), ("björn", "schröder"), ("lena", "weiß"), ("käthe", "fuchs")),
    "BE": (("léa", "peeters"), ("noé", "janssens"), ("thibaut", "dupré"), ("eloïse", "maes")),
    "PT": (("joão", "conceição"), ("inês", "simões"), ("andré", "gonçalves"), ("maría", "araújo")),
    "SE": (("åsa", "öberg"), ("björn", "ängström"), ("märta", "nyström"), ("linnéa", "åkesson")),
}
_IDN_DOMAINS = {
    "ES": ("correo.españa.es", "peñarroya.es", "mañana.com"),
    "IT": ("però.it", "città.it", "caffè.example.it"),
    "PL": ("żółw.pl", "poczta.łódź.pl", "kraków.com.pl"),
    "NL": ("café.nl", "reünie.nl", "ëxample.nl"),
    "FR": ("société.fr", "café-crème.fr", "élysée.fr"),
    "DE": ("bücher.de", "müller-straße.de", "grüße.de"),
    "BE": ("bière.be", "société.be", "brüssel.be"),
    "PT": ("correio.conceição.pt", "pão.pt", "açores.pt"),
    "SE": ("räksmörgås.se", "åre.se", "mölndal.se"),
}
_ASCII_DOMAINS = ("gmail.com", "outlook.com", "proton.me", "web.de", "orange.fr", "libero.it", "wp.pl", "sapo.pt")


_NO_DECOMPOSITION = str.maketrans({"ł": "l", "Ł": "L", "ß": "ss", "ø": "o", "æ": "ae"})


def _ascii(text: str) -> str:
    """`text` without its accents, as an address chosen before IDNA was common spells the name."""
    return unicodedata.normalize("NFKD", text.translate(_NO_DECOMPOSITION)).encode("ascii", "ignore").decode()


def _email(locale: str) -> _Gen:
    def gen(rng: random.Random) -> str:
        first, last = rng.choice(_NAMES[locale])
        last = last.replace(" ", "")
        local = rng.choice((f"{first}.{last}", f"{first}{last}", f"{first}_{last}", f"{first[0]}.{last}"))
        if rng.random() < 0.2:
            local += str(rng.randint(1, 99))
        style = rng.choice(("utf8@ascii", "utf8@idn", "ascii@idn", "utf8@punycode", "upper", "nfd"))
        idn = rng.choice(_IDN_DOMAINS[locale])
        if style == "utf8@ascii":
            return f"{local}@{rng.choice(_ASCII_DOMAINS)}"
        if style == "ascii@idn":
            return f"{_ascii(local)}@{idn}"
        if style == "utf8@punycode":
            return f"{local}@{idn.encode('idna').decode()}"
        if style == "upper":
            return f"{local.capitalize()}@{idn.upper()}"
        if style == "nfd":  # decomposed accents, as some keyboards and macOS file names produce them
            return unicodedata.normalize("NFD", f"{local}@{idn}")
        return f"{local}@{idn}"

    return gen


# ---- phone numbers ----------------------------------------------------------------------------------------------

_PHONE_TYPES = (phonenumbers.PhoneNumberType.MOBILE, phonenumbers.PhoneNumberType.FIXED_LINE)


def _valid_number(rng: random.Random, region: str) -> phonenumbers.PhoneNumber:
    """A valid number of `region`: its example number of a type, with the last digits drawn until it is valid."""
    example = phonenumbers.example_number_for_type(region, rng.choice(_PHONE_TYPES))
    assert example is not None
    nsn = str(example.national_number)
    while True:
        keep = max(2, len(nsn) - rng.randint(4, 6))
        candidate = phonenumbers.PhoneNumber(
            country_code=example.country_code,
            national_number=int(nsn[:keep] + _digits(rng, len(nsn) - keep)),
            italian_leading_zero=example.italian_leading_zero,  # Italian fixed lines keep their 0 after +39
        )
        if phonenumbers.is_valid_number(candidate):
            return candidate


def _phone(locale: str) -> _Gen:
    def gen(rng: random.Random) -> str:
        number = _valid_number(rng, locale)
        national = phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.NATIONAL)
        international = phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.INTERNATIONAL)
        compact = "".join(c for c in national if c.isdigit())
        style = rng.choice(("national", "international", "e164", "dashes", "dots", "compact", "00", "trunk-0"))
        if style == "international":
            return international
        if style == "e164":
            return phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)
        if style == "dashes":
            return national.replace(" ", "-")
        if style == "dots":
            return national.replace(" ", ".")
        if style == "compact":
            return compact
        if style == "00":
            return "00" + international[1:]
        if style == "trunk-0" and compact.startswith("0"):  # +31 (0)20 123 4567, as Dutch, German, Belgian write it
            cc, rest = international.split(" ", 1)
            return f"{cc} (0){rest}"
        return national

    return gen


# ---- cards ------------------------------------------------------------------------------------------------------

_NETWORKS = (("4", 16), ("51", 16), ("55", 16), ("2221", 16), ("37", 15), ("6011", 16), ("4", 19), ("5019", 16))


def _card(rng: random.Random) -> str:
    prefix, length = rng.choice(_NETWORKS)
    body = prefix + _digits(rng, length - 1 - len(prefix))
    number = body + luhn.calc_check_digit(body)
    sep = rng.choice((" ", "-", ".", ""))
    if length == 15:
        return sep.join((number[:4], number[4:10], number[10:]))
    return sep.join(number[i : i + 4] for i in range(0, length, 4))


# ---- national ids (python-stdnum's check digits) ----------------------------------------------------------------


def _dni(rng: random.Random) -> str:
    body = _digits(rng, 8)
    letter = es_dni.calc_check_digit(body)
    return rng.choice(
        (f"{body}{letter}", f"{body}-{letter}", f"{body[:2]}.{body[2:5]}.{body[5:]}-{letter}", f"{body} {letter}")
    )


def _nie(rng: random.Random) -> str:
    first, body = rng.choice("XYZ"), _digits(rng, 7)
    letter = es_nie.calc_check_digit(first + body)
    return rng.choice((f"{first}{body}{letter}", f"{first}-{body}-{letter}", f"{first}{body}-{letter}"))


_CF_MONTHS = "ABCDEHLMPRST"


def _codice_fiscale(rng: random.Random) -> str:
    year, month, day = _date(rng)
    day += rng.choice((0, 40))  # women's codes add 40 to the day
    letters = "".join(rng.choice("BCDFGHLMNPRSTVZ") for _ in range(3)) + "".join(
        rng.choice("BCDFGLMNPRSTVAEIO") for _ in range(3)
    )
    town = rng.choice("ABCDEFGHILMZ") + _digits(rng, 3)
    code = f"{letters}{year % 100:02d}{_CF_MONTHS[month - 1]}{day:02d}{town}"
    code += it_codicefiscale.calc_check_digit(code)
    return code if rng.random() < 0.8 else code.lower()


def _pesel(rng: random.Random) -> str:
    year, month, day = _date(rng)
    month += 20 if year >= 2000 else 0
    body = f"{year % 100:02d}{month:02d}{day:02d}{_digits(rng, 4)}"
    return body + pl_pesel.calc_check_digit(body)


def _nip(rng: random.Random) -> str:
    while True:
        body = rng.choice("123456789") + _digits(rng, 8)
        check = sum(w * int(d) for w, d in zip((6, 5, 7, 2, 3, 4, 5, 6, 7), body, strict=True)) % 11
        if check < 10:
            n = body + str(check)
            return rng.choice((f"{n[:3]}-{n[3:6]}-{n[6:8]}-{n[8:]}", f"{n[:3]}-{n[3:5]}-{n[5:7]}-{n[7:]}"))


def _bsn_digits(rng: random.Random) -> str:
    while True:
        body = rng.choice("123456789") + _digits(rng, 7)
        total = sum((9 - i) * int(d) for i, d in enumerate(body))
        check = total % 11
        if check < 10:
            return body + str(check)


def _bsn(rng: random.Random) -> str:
    n = _bsn_digits(rng)
    return rng.choice((f"{n[:4]}.{n[4:6]}.{n[6:]}", f"{n[:4]} {n[4:6]} {n[6:]}"))


def _nir(rng: random.Random) -> str:
    year, month, _ = _date(rng)
    dept = rng.choice((f"{rng.randint(1, 95):02d}", "2A", "2B"))
    body = f"{rng.choice('12')}{year % 100:02d}{month:02d}{dept}{_digits(rng, 3)}{_digits(rng, 3)}"
    n = body + fr_nir.calc_check_digits(body)
    return rng.choice((n, f"{n[0]} {n[1:3]} {n[3:5]} {n[5:7]} {n[7:10]} {n[10:13]} {n[13:]}"))


def _idnr_digits(rng: random.Random) -> str:
    while True:
        body = rng.choice("123456789") + _digits(rng, 9)
        number = body + mod_11_10.calc_check_digit(body)
        if de_idnr.is_valid(number):
            return number


def _idnr(rng: random.Random) -> str:
    n = _idnr_digits(rng)
    return f"{n[:2]} {n[2:5]} {n[5:8]} {n[8:]}"


def _nn(rng: random.Random) -> str:
    year, month, day = _date(rng)
    body = f"{year % 100:02d}{month:02d}{day:02d}{rng.randint(1, 997):03d}"
    check = 97 - int(("2" if year >= 2000 else "") + body) % 97
    n = f"{body}{check:02d}"
    return rng.choice((f"{n[:2]}.{n[2:4]}.{n[4:6]}-{n[6:9]}.{n[9:]}", f"{n[:6]}-{n[6:9]}-{n[9:]}", n))


def _cc(rng: random.Random) -> str:
    """A Cartão de Cidadão number: the civil id (9 digits), two letters of the card's version, the check digit."""
    body = _digits(rng, 9) + "".join(rng.choice(string.ascii_uppercase) for _ in range(2))
    n = body + pt_cc.calc_check_digit(body)
    return rng.choice((n, f"{n[:8]} {n[8]} {n[9:]}"))


def _personnummer(rng: random.Random) -> str:
    year, month, day = _date(rng)
    body = f"{year % 100:02d}{month:02d}{day:02d}{_digits(rng, 3)}"
    n = body + luhn.calc_check_digit(body)
    return rng.choice((f"{n[:6]}-{n[6:]}", f"{year // 100}{n[:6]}-{n[6:]}"))


# Per locale, the id formats: (format name, generator, label written before it or "" when the form speaks for itself).
_IDS: dict[str, tuple[tuple[str, _Gen, str], ...]] = {
    "ES": (("dni", _dni, ""), ("nie", _nie, "")),
    "IT": (("codice-fiscale", _codice_fiscale, ""),),
    "PL": (("pesel", _pesel, "PESEL"), ("nip", _nip, "")),
    "NL": (("bsn-dotted", _bsn, ""), ("bsn-compact", _bsn_digits, "BSN")),
    "FR": (("nir", _nir, ""),),
    "DE": (("steuer-id-spaced", _idnr, ""), ("steuer-id-compact", _idnr_digits, "Steuer-ID")),
    "BE": (("rijksregisternummer", _nn, ""),),
    "PT": (("cartao-de-cidadao", _cc, ""),),
    "SE": (("personnummer", _personnummer, ""),),
}

# ---- sentences in each locale's language --------------------------------------------------------------------------

_SAY: dict[str, dict[str, tuple[str, ...]]] = {
    "ES": {
        EMAIL: ("Mi correo es {v}.", "Escríbeme a {v}, gracias."),
        PHONE: ("Llámame al {v} por la tarde.", "Mi móvil: {v}"),
        CARD: ("Pagué con la tarjeta {v} y me cobraron dos veces.",),
        NATIONAL_ID: ("Mi documento es {v}.", "Adjunto {v} para verificar."),
    },
    "IT": {
        EMAIL: ("La mia email è {v}.", "Scrivetemi a {v}."),
        PHONE: ("Chiamatemi al {v} dopo le sei.", "Cellulare: {v}"),
        CARD: ("Ho pagato con la carta {v} ieri.",),
        NATIONAL_ID: ("Il mio codice fiscale è {v}.", "CF: {v}"),
    },
    "PL": {
        EMAIL: ("Mój e-mail to {v}.", "Proszę pisać na {v}."),
        PHONE: ("Proszę dzwonić pod numer {v}.", "Tel. {v}"),
        CARD: ("Zapłaciłem kartą {v} dwa razy.",),
        NATIONAL_ID: ("Mój numer to {v}.", "Dane do faktury: {v}"),
    },
    "NL": {
        EMAIL: ("Mijn e-mailadres is {v}.", "Mail me op {v}."),
        PHONE: ("Bel me op {v} na zessen.", "Telefoon: {v}"),
        CARD: ("Ik heb met kaart {v} betaald.",),
        NATIONAL_ID: ("Mijn nummer is {v}.", "Ter controle: {v}"),
    },
    "FR": {
        EMAIL: ("Mon adresse est {v}.", "Écrivez-moi à {v}."),
        PHONE: ("Appelez-moi au {v} après 18h.", "Tél. : {v}"),
        CARD: ("J'ai payé avec la carte {v} deux fois.",),
        NATIONAL_ID: ("Mon numéro de sécurité sociale est {v}.", "NIR : {v}"),
    },
    "DE": {
        EMAIL: ("Meine E-Mail ist {v}.", "Schreiben Sie an {v}."),
        PHONE: ("Rufen Sie mich unter {v} an.", "Tel.: {v}"),
        CARD: ("Ich habe mit der Karte {v} bezahlt.",),
        NATIONAL_ID: ("Meine Nummer ist {v}.", "Zur Prüfung: {v}"),
    },
    "BE": {
        EMAIL: ("Mon adresse : {v}.", "Mijn e-mail is {v}."),
        PHONE: ("Bel me op {v}.", "Appelez le {v}."),
        CARD: ("Betaald met kaart {v}.",),
        NATIONAL_ID: ("Mijn rijksregisternummer is {v}.", "Numéro national : {v}"),
    },
    "PT": {
        EMAIL: ("O meu email é {v}.", "Escreva para {v}."),
        PHONE: ("Ligue-me para o {v}.", "Telemóvel: {v}"),
        CARD: ("Paguei com o cartão {v} duas vezes.",),
        NATIONAL_ID: ("O meu cartão de cidadão é {v}.", "Documento: {v}"),
    },
    "SE": {
        EMAIL: ("Min e-post är {v}.", "Mejla mig på {v}."),
        PHONE: ("Ring mig på {v}.", "Mobil: {v}"),
        CARD: ("Jag betalade med kortet {v}.",),
        NATIONAL_ID: ("Mitt personnummer är {v}.", "Personnr: {v}"),
    },
}

# ---- look-alikes that must be kept -------------------------------------------------------------------------------


def _order_grouped(rng: random.Random) -> str:
    return f"{rng.randint(2019, 2026)} {_digits(rng, 4)} {_digits(rng, 4)}"  # 2024 0613 5521


def _order_dashed(rng: random.Random) -> str:
    return f"{rng.choice(('FA', 'INV', 'PED', 'ORD', 'BE'))}-{rng.randint(2019, 2026)}-{_digits(rng, 6)}"


def _date_text(rng: random.Random) -> str:
    year, month, day = rng.randint(2019, 2026), rng.randint(1, 12), rng.randint(1, 28)
    return rng.choice(
        (f"{day:02d}.{month:02d}.{year}", f"{day:02d}/{month:02d}/{year}", f"{year}-{month:02d}-{day:02d}")
    )


def _price(rng: random.Random) -> str:
    whole, cents = rng.randint(1, 99999), rng.randint(0, 99)
    grouped = f"{whole:,}".replace(",", rng.choice((".", " ", "\u202f")))
    return rng.choice(
        (f"{grouped},{cents:02d} €", f"€ {grouped},{cents:02d}", f"{grouped},{cents:02d} zł", f"{grouped} kr")
    )


def _tracking(rng: random.Random) -> str:
    return rng.choice(
        (
            f"{rng.choice(('RR', 'LX', 'CP', 'EE'))}{_digits(rng, 9)}{rng.choice(('ES', 'IT', 'PL', 'NL', 'DE'))}",
            f"1Z{''.join(rng.choice(string.ascii_uppercase + string.digits) for _ in range(16))}",
            f"JJD{_digits(rng, 18)}",
            f"3S{''.join(rng.choice(string.ascii_uppercase) for _ in range(4))}{_digits(rng, 7)}",
        )
    )


def _version(rng: random.Random) -> str:
    return rng.choice(
        (
            f"v{rng.randint(1, 20)}.{rng.randint(0, 30)}.{rng.randint(0, 99)}",
            f"{rng.randint(10, 12)}.0.{rng.randint(10000, 26000)}.{rng.randint(100, 5000)}",
        )
    )


def _postcode(rng: random.Random) -> str:
    return rng.choice(
        (f"{rng.randint(1000, 52999):05d}", f"{_digits(rng, 2)}-{_digits(rng, 3)}", f"{rng.randint(1000, 9999)} AB")
    )


def _time(rng: random.Random) -> str:
    return f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}"


_BENIGN: tuple[tuple[str, _Gen, tuple[str, ...]], ...] = (
    (
        "order-grouped",
        _order_grouped,
        ("Commande n° {v} expédiée.", "Pedido nº {v} enviado.", "Bestellung {v} ist da."),
    ),
    ("order-dashed", _order_dashed, ("Rechnung {v} ist offen.", "Factura {v} pendiente.", "Fattura {v} pagata.")),
    ("date", _date_text, ("Geliefert am {v}.", "Livré le {v}.", "Consegnato il {v}.", "Dostarczono {v}.")),
    ("price", _price, ("Totaal {v} incl. btw.", "Total : {v} TTC.", "Razem {v}.", "Summa {v}.")),
    ("tracking", _tracking, ("Sendungsnummer {v}.", "Número de seguimiento {v}.", "Track & trace: {v}")),
    ("version", _version, ("Bitte auf {v} aktualisieren.", "Aggiornare alla versione {v}.")),
    ("postcode", _postcode, ("Adres: ul. Długa 5, {v} Gdańsk.", "Código postal {v}.", "Postcode {v} klopt niet.")),
    ("time", _time, ("Abholung um {v} Uhr.", "Rendez-vous à {v}.")),
)


@dataclass(frozen=True, slots=True)
class LocaleText:
    """A labelled text and the locale it was written for."""

    locale: str
    text: LabelledText


def _kinds(locale: str) -> tuple[tuple[str, str, _Gen, str], ...]:
    """(kind, format, generator, label) of every planted format of `locale`."""
    return (
        (EMAIL, "email", _email(locale), ""),
        (PHONE, "phone", _phone(locale), ""),
        (CARD, "card", _card, ""),
        *((NATIONAL_ID, fmt, gen, label) for fmt, gen, label in _IDS[locale]),
    )


def locale_texts(seed: int = 0, per_format: int = 40) -> list[LocaleText]:
    """`per_format` one-item texts of every kind and id format of every locale, each followed by a look-alike in
    another sentence, then as many look-alike-only texts (the same for a seed)."""
    rng = random.Random(seed)
    out: list[LocaleText] = []
    for locale in LOCALES:
        for kind, fmt, gen, label in _kinds(locale):
            for _ in range(per_format):
                value = gen(rng)
                said = rng.choice(_SAY[locale][kind]).format(v=f"{label} {value}" if label else value)
                _, benign_gen, templates = rng.choice(_BENIGN)
                benign = benign_gen(rng)
                text = f"{said} {rng.choice(templates).format(v=benign)}"
                out.append(
                    LocaleText(locale, LabelledText(text, (Planted(kind, value, f"{locale}-{fmt}"),), (benign,)))
                )
        for _ in range(per_format):
            _, benign_gen, templates = rng.choice(_BENIGN)
            benign = benign_gen(rng)
            out.append(LocaleText(locale, LabelledText(rng.choice(templates).format(v=benign), (), (benign,))))
    return out


def locale_regions() -> tuple[str, ...]:
    """The phone regions a deployment serving these locales configures (MONITOR_REDACT_PHONE_REGIONS)."""
    return LOCALES
