"""KIP-848 regular expression subscriptions (ConsumerGroupHeartbeat SubscribedTopicRegex).

The Java client's `subscribe(SubscriptionPattern)` with group.protocol=consumer sends the
expression to the broker, which resolves it against its topics: the member gets the matching
topics (whole-name matches, internal topics included), a topic created later that matches
joins the subscription, and an invalid expression is refused (INVALID_REGULAR_EXPRESSION).
"""

from __future__ import annotations

import harness
from harness import JavaProgram, create_topic, produce_all, producer

TIMEOUT = 90


def produce(bootstrap: str, topic: str, n: int) -> None:
    produce_all(producer(bootstrap), topic, [{"value": f"{topic}-{i}".encode()} for i in range(n)])


def assigned(prog: JavaProgram) -> set:
    last = prog.words("ASSIGNED")
    return set(last[-1][1].split(",")) if last and len(last[-1]) > 1 else set()


def records(prog: JavaProgram, topic: str) -> set:
    return {w[4] for w in prog.words("REC") if w[1] == topic}


def test_regex_subscription_follows_new_topics(broker, tmp_path, topic):
    a, b, other = f"{topic}-rx-a", f"{topic}-rx-b", f"{topic}-other"
    create_topic(broker.bootstrap, a, partitions=2)
    create_topic(broker.bootstrap, other, partitions=1)
    produce(broker.bootstrap, a, 4)
    produce(broker.bootstrap, other, 2)
    prog = JavaProgram(tmp_path, "regex", "RegexConsumer", broker.bootstrap, f"{topic}-g",
                       f"{topic}-rx-.*")
    try:
        prog.wait_for(lambda _: assigned(prog) == {f"{a}-0", f"{a}-1"}, TIMEOUT,
                      f"the partitions of {a} and nothing else")
        prog.wait_for(lambda _: records(prog, a) == {f"{a}-{i}" for i in range(4)}, TIMEOUT,
                      f"every record of {a}")
        # A topic created after subscribing joins the subscription.
        create_topic(broker.bootstrap, b, partitions=1)
        produce(broker.bootstrap, b, 3)
        prog.wait_for(lambda _: assigned(prog) == {f"{a}-0", f"{a}-1", f"{b}-0"}, TIMEOUT,
                      f"{b}, created later, assigned too")
        prog.wait_for(lambda _: records(prog, b) == {f"{b}-{i}" for i in range(3)}, TIMEOUT,
                      f"every record of {b}")
        assert not records(prog, other), prog.describe()
    finally:
        prog.terminate()


def test_regex_subscription_includes_internal_topics(broker, tmp_path, topic):
    create_topic(broker.bootstrap, topic, partitions=1)
    # The group's own heartbeats create __consumer_offsets if need be.
    prog = JavaProgram(tmp_path, "internal", "RegexConsumer", broker.bootstrap, f"{topic}-g",
                       f"__consumer_offsets|{topic}")
    try:
        prog.wait_for(
            lambda _: f"{topic}-0" in assigned(prog)
            and any(tp.startswith("__consumer_offsets-") for tp in assigned(prog)),
            TIMEOUT, "the internal topic's partitions and the topic's")
    finally:
        prog.terminate()


def test_invalid_regex_is_refused(broker, tmp_path, topic):
    create_topic(broker.bootstrap, topic, partitions=1)
    prog = JavaProgram(tmp_path, "invalid", "RegexConsumer", broker.bootstrap, f"{topic}-g", f"{topic}-(")
    try:
        prog.wait_for(lambda _: prog.words("ERROR"), TIMEOUT, "the consumer's error")
        assert prog.words("ERROR")[0][1].endswith("InvalidRegularExpression"), prog.describe()
        assert not prog.words("ASSIGNED") or assigned(prog) == set(), prog.describe()
    finally:
        prog.kill()


def test_librdkafka_regex_subscription(broker, topic):
    """librdkafka (group.protocol=consumer) sends a `^`-prefixed subscription as the regex."""
    from confluent_kafka import Consumer

    t = f"{topic}-lr"
    create_topic(broker.bootstrap, t, partitions=2)
    produce(broker.bootstrap, t, 5)
    c = Consumer({
        "bootstrap.servers": broker.bootstrap, "broker.address.family": "v4",
        "group.id": f"{topic}-lrg", "group.protocol": "consumer",
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
    })
    try:
        c.subscribe([f"^{topic}-l.*"])
        seen = set()

        def got_all():
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                seen.add(m.value().decode())
            return len(seen) == 5

        harness.wait_until(got_all, TIMEOUT, "librdkafka reading every record through its regex", interval=0)
        assert seen == {f"{t}-{i}" for i in range(5)}
    finally:
        c.close()
