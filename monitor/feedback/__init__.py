"""Users' feedback (thumbs and ratings): its rows and rollup, the segment it counts in, the answers read back from
Kafka to judge what users disliked, and how well the judge predicts users' verdicts."""
