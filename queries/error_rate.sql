-- Judge error rate per hour and app over the last 24 hours, with the most common error reason (the part of the
-- error before the first colon: unavailable, invalid_reply, timeout).
SELECT
    toStartOfHour(event_time) AS hour,
    app,
    judge,
    count() AS rows,
    countIf(status = 'error') AS errors,
    round(countIf(status = 'error') / count(), 4) AS error_rate,
    topKIf(1)(splitByChar(':', error)[1], status = 'error') AS top_reason
FROM {table} FINAL
WHERE event_time >= now() - INTERVAL 24 HOUR
GROUP BY hour, app, judge
ORDER BY hour DESC, app, judge
