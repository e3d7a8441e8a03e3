"""The kinds of personal data the built-in recognizers find, and the placeholder that replaces each item."""

from __future__ import annotations

import re

EMAIL = "EMAIL"
PHONE = "PHONE"
CARD = "CARD"
IBAN = "IBAN"
SSN = "SSN"  # United States social security number
NATIONAL_ID = "NATIONAL_ID"  # other national identity numbers with a check digit (see recognizers)
IP = "IP"
SECRET = "SECRET"  # API keys, tokens, JWTs, private keys
URL_CREDENTIALS = "URL_CREDENTIALS"  # the user:password of scheme://user:password@host

BUILTIN_KINDS: tuple[str, ...] = (EMAIL, PHONE, CARD, IBAN, SSN, NATIONAL_ID, IP, SECRET, URL_CREDENTIALS)

# A user's own kind names the placeholder too: upper case, so `[ORDER_REF]` reads like the built-in ones.
KIND_NAME = re.compile(r"^[A-Z][A-Z0-9_]{0,31}$")


def placeholder(kind: str) -> str:
    """The text that replaces one item of `kind`: `[EMAIL]`, `[CARD]`, ..."""
    return f"[{kind}]"
