"""A librdkafka group member, run as its own process so a test can SIGKILL it.

Usage: group_consumer.py BOOTSTRAP TOPIC GROUP PROTOCOL(classic|consumer)
Prints "ASSIGNED p1,p2,..." after every assignment change and "REC partition offset value"
for each record, after its offset was committed synchronously ("UNCOMMITTED partition offset
value" when the commit kept failing). Failed commits are told on stderr. SIGTERM closes
cleanly."""

import signal
import sys

from confluent_kafka import Consumer, KafkaException

bootstrap, topic, group, protocol = sys.argv[1:5]
conf = {
    "bootstrap.servers": bootstrap,
    "broker.address.family": "v4",
    "group.id": group,
    "enable.auto.commit": False,
    "auto.offset.reset": "earliest",
}
if protocol == "consumer":
    conf["group.protocol"] = "consumer"
else:
    conf.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
                 "partition.assignment.strategy": "cooperative-sticky"})
c = Consumer(conf)
owned = set()
stop = False


def show():
    print("ASSIGNED " + ",".join(str(p) for p in sorted(owned)), flush=True)


def on_assign(consumer, parts):
    owned.update(p.partition for p in parts)
    show()


def on_revoke(consumer, parts):
    owned.difference_update(p.partition for p in parts)
    show()


def on_term(*_):
    global stop
    stop = True


signal.signal(signal.SIGTERM, on_term)
c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
while not stop:
    m = c.poll(0.2)
    if m is None or m.error():
        continue
    committed = None
    for attempt in range(50):
        try:
            # A synchronous commit raises for the request; a partition's own error comes back
            # in its entry of the result.
            failed = [tp.error for tp in c.commit(message=m, asynchronous=False) if tp.error]
            if not failed:
                committed = True
                break
            committed = failed[0]
        except KafkaException as e:
            committed = e
        print(f"COMMIT-RETRY {m.partition()} {m.offset()} {committed}", file=sys.stderr, flush=True)
        if stop:
            break
    if committed is True:
        print(f"REC {m.partition()} {m.offset()} {m.value().decode()}", flush=True)
    else:
        # Consumed, but its commit failed: whoever owns the partition next reads it again.
        print(f"UNCOMMITTED {m.partition()} {m.offset()} {m.value().decode()}", flush=True)
c.close()
print("CLOSED", flush=True)
