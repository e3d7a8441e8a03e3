"""The `relevancy-monitor` command line: every subcommand, the table printer, and in `main` the one place where a
`MonitorError` becomes the single line an operator sees."""
