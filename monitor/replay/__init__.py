"""Scoring history (`relevancy-monitor replay`): a time range of the topics, or text already stored, scored through
the same decode, sample, judge and sink path as live traffic, bounded by money, with rows marked by their run."""
