"""relevancy-monitor: settings (`config`), the Protocols between parts (`protocols`), and the rooms `judges`,
`runtime`, `alerts`, `cli` and `devtools`."""

__version__ = "0.1.0"
