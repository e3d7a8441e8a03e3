"""How a benchmark hands over its figures: the table on stdout, and the same figures as JSON for comparing runs."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def emit(lines: Sequence[str], result: dict[str, Any], json_path: Path | None) -> None:
    """Print `lines`; write `result` to `json_path` (its folder created) and say where, unless it is None."""
    print("\n".join(lines))
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        print(f"\nwritten to {json_path}")
