"""relevancy-monitor: settings (`config`) and the rooms `judges`, `privacy`, `store`, `judging`, `runtime`, `alerts`,
`replay`, `calibration`, `canary`, `compare`, `report`, `cli` and `devtools`. Each Protocol lives beside the types
it speaks of (`judges.base.Judge`, `privacy.spans.Recognizer` and `Redactor`)."""

__version__ = "0.1.0"
