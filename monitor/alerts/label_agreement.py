"""Pure: a judge against the reviewers on the review queue's control slice, as the `control_kappa` rules read it.

The control slice is the queue's uniform random sample of judged rows (route 'control', `monitor.review.routing`):
unlike the other routes (judges that disagree, borderline scores, firing segments), it is not picked for being hard,
so κ on it estimates the judge's agreement on the traffic itself. κ is quadratic-weighted on the rubric's five levels:
a reviewer's label 0–4 against the judge's score in its rubric level (`monitor.calibration.agreement.bucket`), the
same statistic as `calibrate` and the UI's agreement page."""

from __future__ import annotations

from collections.abc import Sequence

from monitor.calibration.agreement import BUCKETS, Statistic, bucket, weighted_kappa

LABELS_TABLE = "labels"  # the reviewers' labels (schemas/sql/045_labels.sql)
CONTROL_ROUTE = "control"


def control_kappa(labels: Sequence[int], scores: Sequence[float]) -> Statistic:
    """Quadratic-weighted κ of reviewers' labels (0–4) against one judge's scores (0..1) of the same items, pair by
    pair (an item labelled by two reviewers is two pairs)."""
    levels = [min(max(int(label), 0), BUCKETS - 1) for label in labels]
    return weighted_kappa(levels, [bucket(score) for score in scores])
