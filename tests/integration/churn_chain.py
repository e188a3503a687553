"""A chain of consumer groups under membership churn with librdkafka (confluent_kafka), the
Python twin of tests/java/ChurnChain.java, for bench/churn-compare and test_group_churn.py.

Topics PREFIX-0 .. PREFIX-STAGES; group PREFIX-g<s> consumes PREFIX-<s> and produces every
record on to PREFIX-<s+1>, committing after the producer's flush (at least once). RECORDS
records are produced to PREFIX-0 (t0); every group starts with one member and, once it is
stable, members are added one at a time up to MAX_MEMBERS, then removed one at a time; after
each step it waits until every group is stable (its live members' assignments cover its input's
partitions once, every member has one, the shares differ by at most one, and a member that left
has closed: until then the partitions it holds are still its own). A reader assigned the last
topic counts what comes out.

    python churn_chain.py BOOTSTRAP VARIANT PREFIX RECORDS STAGES PARTITIONS MAX_MEMBERS POLL_PAUSE_MS TIMEOUT_S [CLIENT]

CLIENT: librdkafka (default) or kafka-python (its consumers; the classic variants only; the
producers stay librdkafka's).

VARIANT: eager (range), cooperative (cooperative-sticky), static (range, group.instance.id),
consumer-uniform / consumer-range (group.protocol=consumer, group.remote.assignor).
Prints the same lines as ChurnChain.java: STABLE <step> <join|leave> <members> <ms>,
DRAINED <ms>, RESULT ..., DONE (or ERROR ... and exit 1).
"""

from __future__ import annotations

import sys
import threading
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def out(line: str) -> None:
    print(line, flush=True)


class Member(threading.Thread):
    def __init__(self, chain: "Chain", stage: int, index: int, producer: Producer):
        super().__init__(name=f"member-{stage}-{index}", daemon=True)
        self.chain, self.stage, self.index, self.producer = chain, stage, index, producer
        self.owned: set = set()
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.closed = threading.Event()
        self.pending: dict = {}

    def conf(self) -> dict:
        c = self.chain
        conf = {
            "bootstrap.servers": c.bootstrap,
            "broker.address.family": "v4",
            "group.id": f"{c.prefix}-g{self.stage}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
        v = c.variant
        if v == "eager":
            conf["partition.assignment.strategy"] = "range"
        elif v == "cooperative":
            conf["partition.assignment.strategy"] = "cooperative-sticky"
        elif v == "static":
            conf["partition.assignment.strategy"] = "range"
            conf["group.instance.id"] = f"{c.prefix}-g{self.stage}-m{self.index}"
        elif v.startswith("consumer-"):
            conf["group.protocol"] = "consumer"
            conf["group.remote.assignor"] = v[len("consumer-"):]
        else:
            raise ValueError(f"unknown variant {v}")
        if not v.startswith("consumer-"):
            conf["session.timeout.ms"] = 10000
            conf["heartbeat.interval.ms"] = 1000
        return conf

    def commit(self, consumer: Consumer) -> None:
        if not self.pending:
            return
        self.producer.flush(30)
        offsets = [TopicPartition(t, p, o) for (t, p), o in self.pending.items()]
        self.pending.clear()
        try:
            consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException:
            pass  # a rebalance took them: the next owner reads them again (at least once)

    def run(self) -> None:
        c = self.chain
        nxt = f"{c.prefix}-{self.stage + 1}"
        try:
            consumer = Consumer(self.conf())

            def on_assign(cons, parts):
                with self.lock:
                    self.owned |= {p.partition for p in parts}

            def on_revoke(cons, parts):
                self.commit(cons)
                with self.lock:
                    self.owned -= {p.partition for p in parts}

            def on_lost(cons, parts):
                self.pending.clear()
                with self.lock:
                    self.owned -= {p.partition for p in parts}

            consumer.subscribe([f"{c.prefix}-{self.stage}"], on_assign=on_assign, on_revoke=on_revoke,
                               on_lost=on_lost)
            while not self.stop.is_set():
                msgs = consumer.consume(num_messages=500, timeout=0.1)
                for m in msgs:
                    if m.error() is not None:
                        continue
                    while True:
                        try:
                            self.producer.produce(nxt, key=m.key(), value=m.value())
                            break
                        except BufferError:
                            self.producer.poll(0.05)
                    self.pending[(m.topic(), m.partition())] = m.offset() + 1
                self.producer.poll(0)
                self.commit(consumer)
                if msgs and c.poll_pause_s > 0:
                    time.sleep(c.poll_pause_s)
            self.commit(consumer)
            consumer.close()  # revokes (on_revoke) and leaves the group
        except Exception as e:  # noqa: BLE001 - reported, the chain fails
            out(f"ERROR member {self.stage}/{self.index} {e!r}")
            c.failed.set()
        finally:
            # Its partitions were its own until now: it owns none once closed.
            with self.lock:
                self.owned.clear()
            self.closed.set()

    def owned_now(self) -> set:
        with self.lock:
            return set(self.owned)


class KafkaPythonMember(Member):
    """The same member with kafka-python (classic protocol only)."""

    def run(self) -> None:
        from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition as KTP
        from kafka.consumer.subscription_state import ConsumerRebalanceListener
        from kafka.coordinator.assignors.cooperative_sticky import StickyPartitionAssignor
        from kafka.coordinator.assignors.range import RangePartitionAssignor
        try:
            from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyPartitionAssignor
        except ImportError:  # older kafka-python
            CooperativeStickyPartitionAssignor = StickyPartitionAssignor

        c = self.chain
        nxt = f"{c.prefix}-{self.stage + 1}"
        member = self
        conf = dict(bootstrap_servers=c.bootstrap, group_id=f"{c.prefix}-g{self.stage}", enable_auto_commit=False,
                    auto_offset_reset="earliest", session_timeout_ms=10000, heartbeat_interval_ms=1000,
                    partition_assignment_strategy=[RangePartitionAssignor])
        if c.variant == "cooperative":
            conf["partition_assignment_strategy"] = [CooperativeStickyPartitionAssignor]
        elif c.variant == "static":
            conf["group_instance_id"] = f"{c.prefix}-g{self.stage}-m{self.index}"
        elif c.variant != "eager":
            raise ValueError(f"kafka-python has no variant {c.variant}")
        try:
            consumer = KafkaConsumer(**conf)

            def commit():
                if not member.pending:
                    return
                member.producer.flush(30)
                offsets = {KTP(t, p): OffsetAndMetadata(o, "", -1) for (t, p), o in member.pending.items()}
                member.pending.clear()
                try:
                    consumer.commit(offsets)
                except Exception:  # noqa: BLE001 - a rebalance took them (at least once)
                    pass

            class Listener(ConsumerRebalanceListener):
                def on_partitions_revoked(self, revoked):
                    commit()
                    with member.lock:
                        member.owned -= {tp.partition for tp in revoked}

                def on_partitions_assigned(self, assigned):
                    with member.lock:
                        member.owned |= {tp.partition for tp in assigned}

                def on_partitions_lost(self, lost):
                    member.pending.clear()
                    with member.lock:
                        member.owned -= {tp.partition for tp in lost}

            consumer.subscribe([f"{c.prefix}-{self.stage}"], listener=Listener())
            while not self.stop.is_set():
                batches = consumer.poll(timeout_ms=100, max_records=500)
                n = 0
                for tp, records in batches.items():
                    for r in records:
                        member.kp_send(nxt, r.key, r.value)
                        self.pending[(tp.topic, tp.partition)] = r.offset + 1
                        n += 1
                commit()
                if n and c.poll_pause_s > 0:
                    time.sleep(c.poll_pause_s)
            commit()
            consumer.close()
        except Exception as e:  # noqa: BLE001
            out(f"ERROR member {self.stage}/{self.index} {e!r}")
            c.failed.set()
        finally:
            with self.lock:
                self.owned.clear()
            self.closed.set()

    def kp_send(self, topic, key, value) -> None:
        while True:
            try:
                self.producer.produce(topic, key=key, value=value)
                return
            except BufferError:
                self.producer.poll(0.05)


class Chain:
    def __init__(self, bootstrap, variant, prefix, records, stages, partitions, max_members, poll_pause_ms, timeout_s,
                 client="librdkafka"):
        self.member_class = KafkaPythonMember if client == "kafka-python" else Member
        self.bootstrap, self.variant, self.prefix = bootstrap, variant, prefix
        self.records, self.stages, self.partitions = records, stages, partitions
        self.max_members = max_members
        self.poll_pause_s = poll_pause_ms / 1000
        self.deadline = time.monotonic() + timeout_s
        self.failed = threading.Event()
        self.seen: set = set()
        self.read = 0

    def stable(self, members, leaving=()) -> bool:
        """``members`` (the group's live members) own every partition once, each at least one,
        shares within one of each other; and every member of ``leaving`` has closed: until it
        has, the partitions it still holds count as its own (not yet handed over)."""
        if not all(m.closed.is_set() for m in leaving):
            return False
        counts = [0] * self.partitions
        sizes = []
        for m in members:
            own = m.owned_now()
            sizes.append(len(own))
            for p in own:
                counts[p] += 1
        return all(c == 1 for c in counts) and min(sizes) >= 1 and max(sizes) - min(sizes) <= 1

    def reader(self, stop: threading.Event) -> None:
        c = Consumer({"bootstrap.servers": self.bootstrap, "broker.address.family": "v4",
                      "group.id": f"{self.prefix}-reader", "enable.auto.commit": False,
                      "auto.offset.reset": "earliest"})
        try:
            from confluent_kafka import OFFSET_BEGINNING
            c.assign([TopicPartition(f"{self.prefix}-{self.stages}", p, OFFSET_BEGINNING)
                      for p in range(self.partitions)])
            while not stop.is_set():
                for m in c.consume(num_messages=1000, timeout=0.1):
                    if m.error() is None:
                        self.seen.add(m.value())
                        self.read += 1
        except Exception as e:  # noqa: BLE001
            out(f"ERROR reader {e!r}")
            self.failed.set()
        finally:
            c.close()

    def run(self) -> int:
        out("START")
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "broker.address.family": "v4"})
        futs = admin.create_topics([NewTopic(f"{self.prefix}-{s}", num_partitions=self.partitions,
                                             replication_factor=1) for s in range(self.stages + 1)],
                                   operation_timeout=60)
        for f in futs.values():
            f.result(timeout=60)
        reader_stop = threading.Event()
        reader = threading.Thread(target=self.reader, args=(reader_stop,), daemon=True)
        reader.start()
        producers = [Producer({"bootstrap.servers": self.bootstrap, "broker.address.family": "v4",
                               "acks": "all", "linger.ms": 5}) for _ in range(self.stages)]
        groups: list = [[] for _ in range(self.stages)]
        next_index = [0] * self.stages
        code = 0
        try:
            plan = ["join"] * self.max_members + ["leave"] * (self.max_members - 1)
            stable_total = stable_max = 0
            # The records are produced before the first member of each group joins, so that every
            # counted step begins right after the previous one became stable, whatever the broker's
            # produce time (a step's length depends on when it begins in the heartbeat intervals).
            p = Producer({"bootstrap.servers": self.bootstrap, "broker.address.family": "v4",
                          "acks": "all", "linger.ms": 5})
            t0 = time.monotonic()
            for i in range(self.records):
                k = str(i).encode()
                while True:
                    try:
                        p.produce(f"{self.prefix}-0", key=k, value=k)
                        break
                    except BufferError:
                        p.poll(0.05)
            p.flush(60)
            out(f"PRODUCED {self.records} {int((time.monotonic() - t0) * 1000)}")
            for step, change in enumerate(plan):
                began = time.monotonic()
                leaving: list = [[] for _ in range(self.stages)]  # this step's leavers, per group
                for s in range(self.stages):
                    if change == "join":
                        m = self.member_class(self, s, next_index[s], producers[s])
                        next_index[s] += 1
                        groups[s].append(m)
                        m.start()
                    else:
                        m = groups[s].pop(0)  # the oldest member leaves
                        m.stop.set()
                        leaving[s].append(m)
                while not all(self.stable(g, leaving[s]) for s, g in enumerate(groups)):
                    if self.failed.is_set() or time.monotonic() > self.deadline:
                        raise RuntimeError(f"not stable after step {step} ({change})")
                    time.sleep(0.005)
                ms = int((time.monotonic() - began) * 1000)
                if step > 0:
                    stable_total += ms
                    stable_max = max(stable_max, ms)
                out(f"STABLE {step} {change} {len(groups[0])} {ms}")
            while len(self.seen) < self.records:
                if self.failed.is_set() or time.monotonic() > self.deadline:
                    raise RuntimeError(f"drained {len(self.seen)} of {self.records}")
                time.sleep(0.005)
            drain_ms = int((time.monotonic() - t0) * 1000)
            out(f"DRAINED {drain_ms}")
            time.sleep(0.5)
            out(f"RESULT variant={self.variant} records={self.records} distinct={len(self.seen)} read={self.read} "
                f"stable_ms={stable_total} stable_max_ms={stable_max} drain_ms={drain_ms}")
        except Exception as e:  # noqa: BLE001
            out(f"ERROR {e} seen={len(self.seen)}")
            code = 1
        for g in groups:
            for m in g:
                m.stop.set()
        for g in groups:
            for m in g:
                m.closed.wait(30)
        reader_stop.set()
        reader.join(10)
        for p in producers:
            p.flush(10)
        if code == 0:
            out("DONE")
        return code


def main(argv: list) -> int:
    bootstrap, variant, prefix = argv[0], argv[1], argv[2]
    nums = [int(x) for x in argv[3:9]]
    return Chain(bootstrap, variant, prefix, *nums, *argv[9:10]).run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
