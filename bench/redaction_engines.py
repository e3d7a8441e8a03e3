"""Redaction engines side by side on the same labelled set: ours (`monitor.privacy`), Presidio's analyzer with its
pattern recognizers and no NLP model, and datafog's regex engine.

Each engine runs in its own interpreter; Presidio and datafog never go into the project's venv. From /work/main:

    python3 -m venv /tmp/venv-presidio
    /tmp/venv-presidio/bin/pip install -c bench/requirements-compare.txt presidio-analyzer
    python3 -m venv /tmp/venv-datafog
    /tmp/venv-datafog/bin/pip install -c bench/requirements-compare.txt datafog

    .venv/bin/python -m bench.redaction_engines --engines ours --dump-corpus /tmp/pii.json --json /tmp/ours.json
    /tmp/venv-presidio/bin/python -m bench.redaction_engines --engines presidio --corpus /tmp/pii.json \
        --json /tmp/presidio.json                       # add --presidio-recognizers en-defaults for Presidio's own set
    /tmp/venv-datafog/bin/python -m bench.redaction_engines --engines datafog --corpus /tmp/pii.json \
        --json /tmp/datafog.json
    .venv/bin/python -m bench.redaction_engines --table /tmp/ours.json /tmp/presidio.json /tmp/datafog.json

Run from /work/main, `python -m` puts the project on sys.path, so the engine venvs need nothing of the project's
(this module imports only `monitor.privacy.spans` and `kinds`, which use the standard library). Without
`--corpus` the set is `tests.pii_corpus.labelled_texts(0)`, which needs the project's dependencies;
`--dump-corpus` writes it as JSON so every engine sees the very same texts. `--by-format` gives a row per format.

Metrics, the same for every engine, computed from `Redacted.text` alone (the redacted text is aligned with the
original to see which stretch each placeholder replaced):
- removed: the planted value no longer appears in the redacted text;
- whole: removed, and every character of every occurrence lies under some placeholder (no fragment left);
- typed: whole, and those placeholders are of the value's own kind;
- benign kept: the benign look-alike is still verbatim in the redacted text;
- spurious: placeholders that cover neither a planted nor a benign value (ordinary words redacted);
- µs per text: a warm-up pass, then 3 timed passes over the whole set (median and mean per text);
- build: import and construction of the engine, in this process, before the corpus is loaded.
Every socket connect and name lookup is refused and recorded while engines build and run (`--allow-network`
lifts that); the JSON also has the looser `typed_anywhere` (value gone, its kind's placeholder anywhere in the
text) and the values missed, mistyped and wrongly replaced."""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import importlib.util
import inspect
import json
import os
import re
import socket
import statistics
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from monitor.privacy.kinds import BUILTIN_KINDS, CARD, EMAIL, IBAN, IP, NATIONAL_ID, PHONE, SSN
from monitor.privacy.spans import Redacted, Span, replace_spans

REPEATS = 3
ENGINES = ("ours", "presidio", "datafog")

# Presidio entity types that are one of our kinds. NATIONAL_ID takes the numbers that identify a person to a state:
# national identity, social security or insurance, personal tax and national health-service numbers. Document
# numbers (passports, ID cards, driving licences), company and VAT numbers, vehicle plates, postcodes, bank and
# routing numbers, provider and claim numbers have no counterpart and are dropped, as are DATE_TIME, URL, CRYPTO,
# MAC_ADDRESS, UUID and the NER types (PERSON, LOCATION, NRP, ORGANIZATION: they need a model).
PRESIDIO_KINDS: Mapping[str, str] = {
    "EMAIL_ADDRESS": EMAIL,
    "PHONE_NUMBER": PHONE,
    "ZA_MOBILE_NUMBER": PHONE,
    "ZA_TELEPHONE_NUMBER": PHONE,
    "CREDIT_CARD": CARD,
    "IBAN_CODE": IBAN,
    "US_SSN": SSN,
    "IP_ADDRESS": IP,
    **dict.fromkeys(
        (
            "UK_NHS",
            "UK_NINO",
            "ES_NIF",
            "ES_NIE",
            "IT_FISCAL_CODE",
            "PL_PESEL",
            "FI_PERSONAL_IDENTITY_CODE",
            "SE_PERSONNUMMER",
            "DE_TAX_ID",
            "DE_SOCIAL_SECURITY",
            "DE_HEALTH_INSURANCE",
            "IN_AADHAAR",
            "IN_PAN",
            "SG_NRIC_FIN",
            "AU_TFN",
            "AU_MEDICARE",
            "KR_RRN",
            "KR_FRN",
            "TH_TNIN",
            "TR_NATIONAL_ID",
            "ZA_ID_NUMBER",
            "NG_NIN",
            "CA_SIN",
            "PH_TIN",
            "PH_UMID",
            "US_ITIN",
        ),
        NATIONAL_ID,
    ),
}

# datafog regex labels that are one of our kinds, by the same rule. DOB, ZIP, DE_POSTAL_CODE, DE_VAT_ID (a
# company's), DE_PASSPORT_NUMBER and DE_RESIDENCE_PERMIT_NUMBER (documents) have no counterpart. It has nothing for
# SECRET, URL_CREDENTIALS, and no IBAN but the German one.
DATAFOG_KINDS: Mapping[str, str] = {
    "EMAIL": EMAIL,
    "PHONE": PHONE,
    "CREDIT_CARD": CARD,
    "SSN": SSN,
    "IP_ADDRESS": IP,
    "DE_IBAN": IBAN,
    "DE_TAX_ID": NATIONAL_ID,
    "DE_SOCIAL_SECURITY_NUMBER": NATIONAL_ID,
}

_PLACEHOLDER = re.compile(r"\[[A-Z][A-Z0-9_]{0,31}\]")


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "?"


# ---------------------------------------------------------------------------------------------------- adapters


class PresidioRedactor:
    """Presidio's AnalyzerEngine on the no-op NLP engine (no spaCy model). `recognizers="all"`: every shipped local
    recognizer whose entity maps to one of our kinds, each instantiated for "en" so that the non-English and the
    off-by-default ones run too; `"en-defaults"`: only those Presidio itself loads for "en"."""

    def __init__(self, score_threshold: float | None = None, recognizers: str = "all") -> None:
        _tldextract_offline()
        from presidio_analyzer import AnalyzerEngine, RecognizerRegistry  # type: ignore[import-not-found, unused-ignore]
        from presidio_analyzer.nlp_engine import NoOpNlpEngine  # type: ignore[import-not-found, unused-ignore]

        registry = RecognizerRegistry(supported_languages=["en"])
        self.recognizers = _presidio_recognizers() if recognizers == "all" else _presidio_en_defaults()
        self._which = recognizers
        for recognizer in self.recognizers:
            registry.add_recognizer(recognizer)
        nlp = NoOpNlpEngine(models=[{"lang_code": "en", "model_name": "no_op"}])
        self._engine = AnalyzerEngine(registry=registry, nlp_engine=nlp, supported_languages=["en"])
        self._entities = sorted({e for r in self.recognizers for e in r.supported_entities})
        self._threshold = score_threshold

    @property
    def name(self) -> str:
        """Version, NLP engine, recognizer count and threshold."""
        threshold = "default" if self._threshold is None else f"{self._threshold:g}"
        count = f"{len(self.recognizers)} recognizers ({self._which})"
        return f"presidio-analyzer {_version('presidio-analyzer')}, no-op nlp, {count}, threshold {threshold}"

    def redact(self, text: str) -> Redacted:
        """Analyze, map to our kinds, replace."""
        results = self._engine.analyze(text, language="en", entities=self._entities, score_threshold=self._threshold)
        # Highest score first: replace_spans keeps the first of two equal spans, so the likelier type names it.
        results.sort(key=lambda r: -r.score)
        return replace_spans(text, (Span(r.start, r.end, PRESIDIO_KINDS[r.entity_type]) for r in results))


def _presidio_recognizers() -> list[Any]:
    """One "en" instance of every generic and country-specific local recognizer that maps to our kinds."""
    import presidio_analyzer.predefined_recognizers as predefined  # type: ignore[import-not-found, unused-ignore]
    from presidio_analyzer import LocalRecognizer, PatternRecognizer, RecognizerRegistry  # type: ignore[import-not-found, unused-ignore]

    # Presidio's registry gives every pattern recognizer it loads the registry's flags (IGNORECASE among them);
    # instances made by hand keep their class defaults (IbanRecognizer's are case-sensitive), so do as it does.
    flags = RecognizerRegistry().global_regex_flags
    chosen = []
    for name in predefined.__all__:
        cls: Any = getattr(predefined, name)
        if not inspect.isclass(cls) or not issubclass(cls, LocalRecognizer):
            continue
        if ".generic." not in cls.__module__ and ".country_specific." not in cls.__module__:
            continue  # NER, NLP-engine, remote and LLM recognizers: they need a model or a service
        make: Callable[..., Any] = cls  # presidio has no type hints: keep mypy from narrowing to `object`
        recognizer = make(supported_language="en")
        if isinstance(recognizer, PatternRecognizer):
            recognizer.global_regex_flags = flags
        if all(e in PRESIDIO_KINDS for e in recognizer.supported_entities):
            chosen.append(recognizer)
    return chosen


def _presidio_en_defaults() -> list[Any]:
    """The recognizers Presidio's own default configuration loads for "en", those that map to our kinds."""
    from presidio_analyzer import RecognizerRegistry  # type: ignore[import-not-found, unused-ignore]

    registry = RecognizerRegistry(supported_languages=["en"])
    registry.load_predefined_recognizers(languages=["en"])
    return [r for r in registry.recognizers if all(e in PRESIDIO_KINDS for e in r.supported_entities)]


def _tldextract_offline() -> None:
    """Presidio's email check calls `tldextract.extract`, whose default extractor fetches the public suffix list
    over HTTPS on first use (and caches it under ~/.cache); this one reads the bundled snapshot and writes nothing."""
    import tldextract.tldextract as tld  # type: ignore[import-not-found, unused-ignore]

    tld.TLD_EXTRACTOR = tld.TLDExtract(cache_dir=None, suffix_list_urls=(), fallback_to_snapshot=True)


class DatafogRedactor:
    """datafog's regex engine (`datafog.scan(engine="regex")`, the pure-Python backend) with the labels that map to
    our kinds, German ones included (naming them in `entity_types` turns them on)."""

    def __init__(self) -> None:
        # Telemetry is opt-in in 4.9; forcing it off keeps a stray DATAFOG_TELEMETRY=1 from posting anything.
        os.environ["DATAFOG_NO_TELEMETRY"] = "1"
        import datafog  # type: ignore[import-not-found, unused-ignore]

        self._scan = datafog.scan
        self._labels = list(DATAFOG_KINDS)

    @property
    def name(self) -> str:
        """Version and engine."""
        return f"datafog {_version('datafog')} regex engine, python backend"

    def redact(self, text: str) -> Redacted:
        """Scan, map to our kinds, replace."""
        found = self._scan(text, engine="regex", entity_types=self._labels).entities
        return replace_spans(
            text, (Span(e.start, e.end, DATAFOG_KINDS[e.type]) for e in found if e.type in DATAFOG_KINDS)
        )


def _build_ours() -> Any:
    """The project's redactor with default settings, from whichever module offers `build_redactor`."""
    from monitor.privacy.settings import RedactionSettings

    for module in ("monitor.privacy.factory", "monitor.privacy.redactor"):
        try:
            factory = importlib.import_module(module)
        except ModuleNotFoundError as missing:
            if missing.name != module:
                raise  # the module is there but a dependency of it is not
            continue
        if hasattr(factory, "build_redactor"):
            return factory.build_redactor(RedactionSettings())
    raise ModuleNotFoundError("no build_redactor in monitor.privacy.factory or monitor.privacy.redactor")


BUILDERS: Mapping[str, Callable[..., Any]] = {
    "ours": _build_ours,
    "presidio": PresidioRedactor,
    "datafog": DatafogRedactor,
}
MODULES: Mapping[str, str] = {"ours": "monitor.privacy", "presidio": "presidio_analyzer", "datafog": "datafog"}


def available(engine: str) -> bool:
    """Whether this interpreter can import the engine at all."""
    try:
        return importlib.util.find_spec(MODULES[engine]) is not None
    except ModuleNotFoundError:
        return False


# ---------------------------------------------------------------------------------------------------- network


@dataclass
class NetGuard:
    """Refuses and records every socket connect and name lookup made while installed (Unix sockets pass)."""

    attempts: list[str] = field(default_factory=list)
    _saved: dict[str, Any] = field(default_factory=dict)

    def _refuse(self, what: str, target: object) -> NoReturn:
        self.attempts.append(f"{what} {target!r}")
        raise OSError(f"network refused by the benchmark: {what} {target!r}")

    def install(self) -> None:
        """Patch the socket module."""
        guard = self
        original_connect = socket.socket.connect
        original_connect_ex = socket.socket.connect_ex
        self._saved = {
            "connect": original_connect,
            "connect_ex": original_connect_ex,
            "create_connection": socket.create_connection,
            "getaddrinfo": socket.getaddrinfo,
            "gethostbyname": socket.gethostbyname,
        }

        def connect(sock: socket.socket, address: Any) -> None:
            if sock.family == socket.AF_UNIX:
                return original_connect(sock, address)
            guard._refuse("connect", address)

        def connect_ex(sock: socket.socket, address: Any) -> int:
            if sock.family == socket.AF_UNIX:
                return original_connect_ex(sock, address)
            guard._refuse("connect_ex", address)

        socket.socket.connect = connect  # type: ignore[method-assign, assignment]
        socket.socket.connect_ex = connect_ex  # type: ignore[method-assign, assignment]
        socket.create_connection = lambda address, *a, **k: guard._refuse("create_connection", address)
        socket.getaddrinfo = lambda host, *a, **k: guard._refuse("getaddrinfo", host)
        socket.gethostbyname = lambda host: guard._refuse("gethostbyname", host)

    def uninstall(self) -> None:
        """Put the socket module back."""
        for name, original in self._saved.items():
            owner = socket.socket if name.startswith("connect") else socket
            setattr(owner, name, original)

    @contextmanager
    def watching(self) -> Iterator[list[str]]:
        """The attempts made inside the block."""
        start = len(self.attempts)
        found: list[str] = []
        try:
            yield found
        finally:
            found.extend(self.attempts[start:])


# ---------------------------------------------------------------------------------------------------- corpus


@dataclass(frozen=True, slots=True)
class Plant:
    """One planted item: its kind, its text as written, and the format it was written in."""

    kind: str
    value: str
    fmt: str


@dataclass(frozen=True, slots=True)
class Case:
    """One labelled text."""

    text: str
    planted: tuple[Plant, ...]
    benign: tuple[str, ...]


def corpus_from_samples(seed: int) -> list[Case]:
    """`labelled_texts(seed)` from the project's test data, as plain cases."""
    from tests.pii_corpus import labelled_texts  # type: ignore[import-not-found, unused-ignore]

    return [
        Case(t.text, tuple(Plant(p.kind, p.value, p.fmt) for p in t.planted), tuple(t.benign))
        for t in labelled_texts(seed)
    ]


def corpus_from_json(path: Path) -> list[Case]:
    """Cases written by `--dump-corpus`."""
    rows = json.loads(path.read_text(encoding="utf-8"))
    return [Case(r["text"], tuple(Plant(**p) for p in r["planted"]), tuple(r["benign"])) for r in rows]


def dump_corpus(cases: Sequence[Case], path: Path) -> None:
    """Write cases as JSON."""
    path.write_text(json.dumps([asdict(c) for c in cases], ensure_ascii=False, indent=0), encoding="utf-8")


# ---------------------------------------------------------------------------------------------------- scoring


@dataclass(frozen=True, slots=True)
class Region:
    """A stretch of the original text that the redacted text shows as placeholders of `kinds`."""

    start: int
    end: int
    kinds: frozenset[str]


def replaced_regions(original: str, redacted: str) -> list[Region] | None:
    """Where each placeholder of `redacted` stands in `original`; None when `redacted` is not `original` with
    stretches replaced by placeholders. Placeholders with nothing between them share one region."""
    pieces = _PLACEHOLDER.split(redacted)
    kinds = [m.group()[1:-1] for m in _PLACEHOLDER.finditer(redacted)]
    if not kinds:
        return [] if original == redacted else None
    tail = len(original) - len(pieces[-1])
    if not (original.startswith(pieces[0]) and original.endswith(pieces[-1])) or tail < len(pieces[0]):
        return None
    regions: list[Region] = []
    at = len(pieces[0])
    group: set[str] = set()
    for i, kind in enumerate(kinds):
        group.add(kind)
        piece = pieces[i + 1]
        if i == len(kinds) - 1:
            found = tail
        elif not piece:
            continue  # nothing between this placeholder and the next: one stretch of text stands for both
        else:
            # Placing each literal piece leftmost (after at least one replaced character) decides the match.
            found = original.find(piece, at + 1, tail)
        if found <= at:
            return None
        if original[at:found] != f"[{kind}]" or len(group) > 1:  # a bracketed word the engine left alone is no region
            regions.append(Region(at, found, frozenset(group)))
        group = set()
        at = found + len(piece)
    return regions


def _occurrences(text: str, value: str) -> list[tuple[int, int]]:
    spans, at = [], text.find(value)
    while value and at >= 0:
        spans.append((at, at + len(value)))
        at = text.find(value, at + 1)
    return spans


def _covered_by(start: int, end: int, kind: str | None, regions: Sequence[Region]) -> bool:
    """Every character of `start:end` lies in a region (naming `kind`, unless it is None)."""
    at = start
    for region in regions:
        if region.start <= at < region.end:
            if kind is not None and kind not in region.kinds:
                return False
            at = region.end
            if at >= end:
                return True
    return False


def _overlapping(start: int, end: int, regions: Sequence[Region]) -> list[Region]:
    return [r for r in regions if r.start < end and start < r.end]


@dataclass
class Tally:
    """Counts for one engine over the whole set."""

    planted: Counter[str] = field(default_factory=Counter)
    removed: Counter[str] = field(default_factory=Counter)
    whole: Counter[str] = field(default_factory=Counter)
    typed: Counter[str] = field(default_factory=Counter)
    typed_anywhere: Counter[str] = field(default_factory=Counter)
    by_format: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0, 0, 0]))
    missed: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    mistyped: Counter[str] = field(default_factory=Counter)
    benign: int = 0
    benign_kept: int = 0
    benign_hit_by: Counter[str] = field(default_factory=Counter)
    benign_examples: list[str] = field(default_factory=list)
    spurious: Counter[str] = field(default_factory=Counter)
    spurious_examples: list[str] = field(default_factory=list)
    unaligned: int = 0
    not_in_text: int = 0
    not_idempotent: int = 0


def score_case(case: Case, redacted: str, tally: Tally) -> None:
    """Add one text's outcome to `tally`."""
    regions = replaced_regions(case.text, redacted)
    if regions is None:
        tally.unaligned += 1
    claimed: set[Region] = set()
    for plant in case.planted:
        _score_plant(case.text, redacted, plant, regions, claimed, tally)
    for value in case.benign:
        _score_benign(case.text, redacted, value, regions, claimed, tally)
    for region in regions or ():
        if region not in claimed:
            kind = "/".join(sorted(region.kinds))
            tally.spurious[kind] += 1
            if len(tally.spurious_examples) < 40:
                tally.spurious_examples.append(f"{kind}: {case.text[region.start : region.end]!r}")


def _score_plant(
    text: str, redacted: str, plant: Plant, regions: list[Region] | None, claimed: set[Region], tally: Tally
) -> None:
    spots = _occurrences(text, plant.value)
    if not spots:
        tally.not_in_text += 1
        return
    removed = plant.value not in redacted
    if regions is None:  # not a plain replacement: fall back to "some placeholder of the kind is there"
        whole = removed
        typed = removed and f"[{plant.kind}]" in redacted
    else:
        whole = removed and all(_covered_by(s, e, None, regions) for s, e in spots)
        typed = whole and all(_covered_by(s, e, plant.kind, regions) for s, e in spots)
        for s, e in spots:
            claimed.update(_overlapping(s, e, regions))
    tally.planted[plant.kind] += 1
    tally.removed[plant.kind] += removed
    tally.whole[plant.kind] += whole
    tally.typed[plant.kind] += typed
    # The looser reading, as in monitor.devtools.redaction_eval: value gone and its kind's placeholder anywhere.
    tally.typed_anywhere[plant.kind] += removed and f"[{plant.kind}]" in redacted
    row = tally.by_format[f"{plant.kind}/{plant.fmt}"]
    for i, hit in enumerate((True, removed, whole, typed)):
        row[i] += hit
    if not removed and len(tally.missed[plant.kind]) < 8:
        tally.missed[plant.kind].append(plant.value)
    if removed and not typed and regions is not None:
        names = {k for s, e in spots for r in _overlapping(s, e, regions) for k in r.kinds}
        tally.mistyped[f"{plant.kind}->{'/'.join(sorted(names))}"] += 1


def _score_benign(
    text: str, redacted: str, value: str, regions: list[Region] | None, claimed: set[Region], tally: Tally
) -> None:
    spots = _occurrences(text, value)
    if not spots:
        tally.not_in_text += 1
        return
    tally.benign += 1
    kept = value in redacted
    tally.benign_kept += kept
    if regions is None:
        return
    hits = {r for s, e in spots for r in _overlapping(s, e, regions)}
    claimed.update(hits)
    if not kept:
        kinds = "/".join(sorted({k for r in hits for k in r.kinds}))
        tally.benign_hit_by[kinds] += 1
        if len(tally.benign_examples) < 40:
            tally.benign_examples.append(f"{kinds}: {value!r}")


# ---------------------------------------------------------------------------------------------------- running


@dataclass
class Result:
    """One engine's numbers, as written to JSON."""

    engine: str
    name: str
    python: str
    build_s: float
    network: list[str]
    texts: int
    us_median: float
    us_mean: float
    recall: dict[str, dict[str, float | int]]
    by_format: dict[str, dict[str, float | int]]
    benign: dict[str, Any]
    spurious: dict[str, Any]
    missed: dict[str, list[str]]
    mistyped: dict[str, int]
    checks: dict[str, int]


def build(
    engine: str, guard: NetGuard, presidio_threshold: float | None, presidio_recognizers: str
) -> tuple[Any, float, list[str]]:
    """The engine, its import+build seconds, and the network attempts made meanwhile."""
    kwargs = (
        {"score_threshold": presidio_threshold, "recognizers": presidio_recognizers} if engine == "presidio" else {}
    )
    with guard.watching() as attempts:
        started = time.perf_counter()
        redactor = BUILDERS[engine](**kwargs)
        seconds = time.perf_counter() - started
    return redactor, seconds, attempts


def time_engine(redactor: Any, cases: Sequence[Case]) -> tuple[float, float]:
    """Median and mean µs per text over REPEATS passes, after one warm-up pass."""
    for case in cases:
        redactor.redact(case.text)
    samples: list[int] = []
    clock = time.perf_counter_ns
    for _ in range(REPEATS):
        for case in cases:
            started = clock()
            redactor.redact(case.text)
            samples.append(clock() - started)
    return statistics.median(samples) / 1000, statistics.fmean(samples) / 1000


def _pct(part: int, whole: int) -> float:
    return round(100 * part / whole, 1) if whole else 0.0


def _rates(n: int, removed: int, whole: int, typed: int) -> dict[str, float | int]:
    return {"n": n, "removed": _pct(removed, n), "whole": _pct(whole, n), "typed": _pct(typed, n)}


def measure(
    engine: str, redactor: Any, build_s: float, attempts: list[str], cases: Sequence[Case], guard: NetGuard
) -> Result:
    """Score and time one engine over the set."""
    tally = Tally()
    with guard.watching() as run_attempts:
        for case in cases:
            out = redactor.redact(case.text).text
            score_case(case, out, tally)
            tally.not_idempotent += redactor.redact(out).text != out
        us_median, us_mean = time_engine(redactor, cases)
    kinds = [k for k in BUILTIN_KINDS if tally.planted[k]] + sorted(k for k in tally.planted if k not in BUILTIN_KINDS)
    recall = {k: _rates(tally.planted[k], tally.removed[k], tally.whole[k], tally.typed[k]) for k in kinds}
    recall["ALL"] = _rates(*(sum(c.values()) for c in (tally.planted, tally.removed, tally.whole, tally.typed)))
    for k in kinds:
        recall[k]["typed_anywhere"] = _pct(tally.typed_anywhere[k], tally.planted[k])
    recall["ALL"]["typed_anywhere"] = _pct(sum(tally.typed_anywhere.values()), sum(tally.planted.values()))
    return Result(
        engine=engine,
        name=redactor.name,
        python=sys.executable,
        build_s=round(build_s, 3),
        network=attempts + run_attempts,
        texts=len(cases),
        us_median=round(us_median, 1),
        us_mean=round(us_mean, 1),
        recall=recall,
        by_format={f: _rates(*row) for f, row in sorted(tally.by_format.items())},
        benign={
            "n": tally.benign,
            "kept": _pct(tally.benign_kept, tally.benign),
            "hit_by": dict(tally.benign_hit_by.most_common()),
            "examples": tally.benign_examples,
        },
        spurious={
            "n": sum(tally.spurious.values()),
            "by_kind": dict(tally.spurious.most_common()),
            "examples": tally.spurious_examples,
        },
        missed=dict(tally.missed),
        mistyped=dict(tally.mistyped.most_common()),
        checks={"unaligned": tally.unaligned, "not_in_text": tally.not_in_text, "not_idempotent": tally.not_idempotent},
    )


# ---------------------------------------------------------------------------------------------------- printing


def table(results: Sequence[Mapping[str, Any]], by_format: bool = False) -> str:
    """Recall per kind (removed, whole, typed %), benign kept, spurious, µs per text and build time; one block of
    columns per engine, numbered as in the lines above the table."""
    rows_key = "by_format" if by_format else "recall"
    keys: list[str] = []
    for r in results:
        keys += [k for k in r[rows_key] if k not in keys and k != "ALL"]
    keys.append("ALL")
    label_w = max(12, *(len(k) for k in keys)) + 1
    lines = [f"{i + 1}. {r['engine']}: {r['name']}" for i, r in enumerate(results)]
    lines.append("recall %: removed = value gone; whole = every character under a placeholder; typed = of its kind")
    top = f"{'':{label_w + 4}}" + "".join(f"{f'-- {i + 1}. ' + r['engine'] + ' --':>20}" for i, r in enumerate(results))
    head = f"{'':{label_w}}{'n':>4}" + f"{'removed':>8}{'whole':>6}{'typed':>6}" * len(results)
    lines += ["", top, head, "-" * len(head)]
    for key in keys:
        cells = [r["recall" if key == "ALL" else rows_key].get(key) for r in results]
        n = next((c["n"] for c in cells if c), 0)
        text = "".join(
            f"{'-':>20}" if c is None else f"{c['removed']:>8.1f}{c['whole']:>6.1f}{c['typed']:>6.1f}" for c in cells
        )
        lines.append(f"{key:{label_w}}{n:>4}{text}")
    lines.append("-" * len(head))
    summary: tuple[tuple[str, Callable[[Mapping[str, Any]], str]], ...] = (
        ("benign kept %", lambda r: f"{r['benign']['kept']:.1f} of {r['benign']['n']}"),
        ("spurious", lambda r: str(r["spurious"]["n"])),
        ("µs/text median", lambda r: f"{r['us_median']:.0f}"),
        ("µs/text mean", lambda r: f"{r['us_mean']:.0f}"),
        ("build s", lambda r: f"{r['build_s']:.2f}"),
        ("net attempts", lambda r: str(len(r["network"]))),
    )
    for label, cell in summary:
        lines.append(f"{label:{label_w + 4}}" + "".join(f"{cell(r):>20}" for r in results))
    return "\n".join(lines)


def details(result: Mapping[str, Any]) -> str:
    """Where one engine went wrong: benign values replaced, spurious placeholders, misses and wrong kinds."""
    lines = [f"== {result['name']}  ({result['texts']} texts, {result['python']})"]
    if result["network"]:
        lines.append("network attempts: " + "; ".join(result["network"]))
    lines.append(f"benign replaced, by kind: {result['benign']['hit_by'] or 'none'}")
    lines += [f"  {e}" for e in result["benign"]["examples"][:12]]
    lines.append(f"spurious placeholders, by kind: {result['spurious']['by_kind'] or 'none'}")
    lines += [f"  {e}" for e in result["spurious"]["examples"][:8]]
    lines.append(f"removed with the wrong kind: {result['mistyped'] or 'none'}")
    for kind, values in result["missed"].items():
        lines.append(f"missed {kind}: " + ", ".join(repr(v) for v in values[:5]))
    lines.append(f"checks: {result['checks']}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------- main


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.redaction_engines", description=__doc__.split("\n\n")[0])
    parser.add_argument("--engines", default=",".join(ENGINES), help="comma-separated: ours,presidio,datafog")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--corpus", type=Path, help="cases written by --dump-corpus, instead of labelled_texts(seed)")
    parser.add_argument("--dump-corpus", type=Path, help="write the cases as JSON")
    parser.add_argument("--json", type=Path, help="write the numbers (one engine: an object; several: a list)")
    parser.add_argument(
        "--table", type=Path, nargs="+", help="print one table from JSON files of earlier runs, run nothing"
    )
    parser.add_argument("--by-format", action="store_true", help="rows per kind/format instead of per kind")
    parser.add_argument("--presidio-threshold", type=float, help="score threshold for Presidio (default: its own, 0)")
    parser.add_argument(
        "--presidio-recognizers",
        choices=("all", "en-defaults"),
        default="all",
        help="all: every recognizer that maps to our kinds, for en; en-defaults: those Presidio loads for en",
    )
    parser.add_argument("--allow-network", action="store_true", help="do not refuse socket connections")
    return parser.parse_args(argv)


def _load_results(paths: Sequence[Path]) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    for path in paths:
        data = json.loads(path.read_text(encoding="utf-8"))
        results += data if isinstance(data, list) else [data]
    return results


def main(argv: Sequence[str] | None = None) -> None:
    """Build each available engine, then score and time it over the same labelled set."""
    args = _parse(argv)
    if args.table:
        results = _load_results(args.table)
        print(table(results, args.by_format))
        return
    guard = NetGuard()
    if not args.allow_network:
        guard.install()
    wanted = [e.strip() for e in args.engines.split(",") if e.strip()]
    built = []
    for engine in wanted:  # built before the corpus is loaded, so its imports count towards build time
        if engine not in BUILDERS:
            sys.exit(f"unknown engine {engine!r}; known: {', '.join(ENGINES)}")
        if not available(engine):
            print(f"{engine}: not importable in {sys.executable}, skipped")
            continue
        try:
            built.append((engine, *build(engine, guard, args.presidio_threshold, args.presidio_recognizers)))
        except ImportError as missing:
            print(f"{engine}: cannot be built in {sys.executable} ({missing}), skipped")
    if not built and not args.dump_corpus:
        return
    try:
        cases = corpus_from_json(args.corpus) if args.corpus else corpus_from_samples(args.seed)
    except ModuleNotFoundError as missing:
        sys.exit(
            f"the labelled set needs the project's dependencies ({missing}): pass --corpus, written by --dump-corpus"
        )
    if args.dump_corpus:
        dump_corpus(cases, args.dump_corpus)
    results = [asdict(measure(engine, redactor, s, attempts, cases, guard)) for engine, redactor, s, attempts in built]
    guard.uninstall()
    if not results:
        return
    print(table(results, args.by_format))
    for result in results:
        print()
        print(details(result))
    if args.json:
        args.json.write_text(
            json.dumps(results[0] if len(results) == 1 else results, ensure_ascii=False, indent=1), encoding="utf-8"
        )


if __name__ == "__main__":
    main()
