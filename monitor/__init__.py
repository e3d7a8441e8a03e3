"""relevancy-monitor: configuration, pipeline wiring, judges, the ClickHouse sink, metrics and the CLI."""

__version__ = "0.1.0"
