"""`relevancy-monitor ui`: the web pages over the store (overview, alert, explore, answer, review, agreement)."""
