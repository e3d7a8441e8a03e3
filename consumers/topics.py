"""Creating missing topics (the dead-letter topic at start, `produce`'s target) with an admin client."""

from __future__ import annotations

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError, for_code

from consumers.client_start import start_client
from consumers.clients import client_kwargs
from consumers.settings import KafkaSettings
from schemas.errors import KafkaUnavailable

# Replicas of a created topic when none is configured: Kafka's usual 3, or every broker of a smaller cluster.
DEFAULT_REPLICATION = 3


async def ensure_dlq_topic(kafka: KafkaSettings) -> list[str]:
    """Create the dead-letter topic if it is missing (see `ensure_topics`); returns it if it was created."""
    return await ensure_topics(kafka, {kafka.dlq_topic: kafka.dlq_partitions})


async def ensure_topics(kafka: KafkaSettings, topics: dict[str, int]) -> list[str]:
    """Create missing topics ({name: partitions}); returns those created.

    Each is created with `kafka.dlq_replication_factor` replicas, by default min(3, brokers in the cluster) (aiokafka
    speaks CreateTopics v0-v3, which cannot ask for the broker's default with -1). The dead-letter topic
    (`kafka.dlq_topic`) always gets `kafka.dlq_partitions`, whatever `topics` says, and is skipped when
    `kafka.dlq_create` is false (MONITOR_DLQ_CREATE=false: clusters where the app may not create topics). A broker
    refusing to create a topic is a one-line `KafkaUnavailable` naming it."""
    wanted = {name: (kafka.dlq_partitions if name == kafka.dlq_topic else n) for name, n in topics.items()}
    if not kafka.dlq_create:
        wanted.pop(kafka.dlq_topic, None)
    if not wanted:
        return []  # no admin client at all: it may lack even the right to list topics
    admin = AIOKafkaAdminClient(**client_kwargs(kafka))
    try:
        await start_client(admin, kafka)
        existing = set(await admin.list_topics())
        names = [name for name in wanted if name not in existing]
        if not names:
            return []
        replication = kafka.dlq_replication_factor or min(
            DEFAULT_REPLICATION, len((await admin.describe_cluster())["brokers"]) or 1
        )
        missing = [NewTopic(name, num_partitions=wanted[name], replication_factor=replication) for name in names]
        try:
            response = await admin.create_topics(missing)
        except TopicAlreadyExistsError:
            return []  # a replica created it at the same time
        created = []
        for topic, code, *message in response.topic_errors:
            if code == 0:
                created.append(topic)
            elif code != TopicAlreadyExistsError.errno:  # else a replica created it at the same time
                error = for_code(code)
                detail = f": {message[0]}" if message and message[0] else ""
                hint = " (or create it and set MONITOR_DLQ_CREATE=false)" if topic == kafka.dlq_topic else ""
                raise KafkaUnavailable(
                    f"Kafka refused to create topic {topic} with {wanted[topic]} partitions x {replication} replicas: "
                    f"{error.__name__}{detail}{hint}"
                )
        return created
    finally:
        await admin.close()
