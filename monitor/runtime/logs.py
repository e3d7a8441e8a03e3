"""Structured logging: JSON lines by default, key=value console output on a TTY."""

from __future__ import annotations

import importlib
import importlib.util
import logging
import sys
import time
from collections.abc import Callable

# structlog imports rich at its own import (with pygments and attrs: 2-3.5 MB resident in the built service), only
# to render exceptions in the console renderer; JSON logs never use it. So it is imported with rich hidden, and the
# console renderer brings rich back (`_console_renderer`). Where something imported structlog or rich before, this
# changes nothing.
_HIDE_RICH = "structlog" not in sys.modules and "rich" not in sys.modules
if _HIDE_RICH:  # `import rich` raises ImportError, as when rich is not installed
    sys.modules["rich"] = None  # type: ignore[assignment]
try:
    import structlog
finally:
    if _HIDE_RICH:
        del sys.modules["rich"]

# Library loggers whose connection errors repeat many times a second while a broker is away.
_CHATTY = ("aiokafka", "kafka")


class RepeatLimiter(logging.Filter):
    """Lets the first record of each message template through, then at most one per `every_s`, annotated with
    how many like it were held back. A lost broker made aiokafka log ~60 lines a second; the monitor logs the
    state change itself (`kafka_unreachable`), so the library's repeats add nothing but noise."""

    def __init__(self, every_s: float = 30.0, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.every_s = every_s
        self._clock = clock
        self._seen: dict[tuple[str, int, str], tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        """True to emit `record`."""
        if not record.name.startswith(_CHATTY):
            return True
        key, now = (record.name, record.levelno, str(record.msg)), self._clock()
        last, held = self._seen.get(key, (-self.every_s, 0))
        if now - last < self.every_s:
            self._seen[key] = (last, held + 1)
            return False
        self._seen[key] = (now, 0)
        if held:
            record.msg = f"{record.msg} [{held} more like this in the last {self.every_s:g}s]"
        return True


def configure_logging(fmt: str = "auto", level: str = "info") -> None:
    """Configure structlog and the stdlib root logger (aiokafka logs through it) once, at start-up."""
    use_console = fmt == "console" or (fmt == "auto" and sys.stderr.isatty())
    renderer: structlog.typing.Processor = (
        _console_renderer(colors=sys.stderr.isatty()) if use_console else structlog.processors.JSONRenderer()
    )
    shared: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    structlog.configure(
        processors=[*shared, structlog.processors.format_exc_info, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelNamesMapping()[level.upper()]),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(RepeatLimiter())
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(processor=renderer, foreign_pre_chain=shared))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    # Library chatter (aiokafka's group coordinator is verbose) only from warning up.
    root.setLevel(max(logging.WARNING, logging.getLevelNamesMapping()[level.upper()]))


def _console_renderer(colors: bool) -> structlog.dev.ConsoleRenderer:
    """structlog's console renderer, with rich's tracebacks where rich is installed, as structlog renders exceptions
    when it imports rich itself (its module is loaded again, now that rich can be imported)."""
    if getattr(structlog.dev, "rich", None) is None and importlib.util.find_spec("rich") is not None:
        importlib.reload(structlog.dev)
    return structlog.dev.ConsoleRenderer(colors=colors)
