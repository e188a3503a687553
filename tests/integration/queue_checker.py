"""The queue checker of the fault-injection suite (issue 17), in the spirit of Jepsen's Kafka
workload.

Producers send unique values ``WORKLOAD:INSTANCE:SEQ`` (INSTANCE: one producer object, SEQ
increasing, sent to partition ``SEQ % partitions``) and record every acknowledgement with its
offset; consumers record every record they read; at the end a final read takes every partition
from its start to its end. :class:`History` collects all of it (thread-safe) and
:meth:`History.check` reports, per workload:

- ``lost``: acknowledged, and not in the final read at any offset;
- ``duplicated``: one value at two or more offsets (in any observation: acknowledgements,
  reads during the run, the final read);
- ``reordered``: in the final read of a partition, a value of one producer instance at a higher
  offset than a later value of the same instance (the producer sends in SEQ order);
- ``inconsistent offsets``: one offset of a partition seen holding two different values (an
  acknowledgement or a read during the run against another read, or the final read);
- ``vanished``: read by a consumer during the run, and not in the final read;
- ``group missed``: acknowledged, and never read by the group consumer (which commits its
  offsets and is restarted from them now and then) by the end of its drain.

Nothing here talks to a broker.
"""

from __future__ import annotations

import threading
from collections import Counter, defaultdict
from typing import Dict, List, Optional, Tuple

CHECKS = ("lost", "duplicated", "reordered", "inconsistent_offsets", "vanished", "group_missed",
          "uncounted", "group_offset_regressed")


def parse_value(value: str) -> Optional[Tuple[str, int, int]]:
    try:
        wl, inst, seq = value.rsplit(":", 2)
        return wl, int(inst), int(seq)
    except ValueError:
        return None


class History:
    def __init__(self, workloads: List[str]):
        self.lock = threading.Lock()
        self.workloads = list(workloads)
        self.sent: Dict[str, int] = Counter()
        # value -> (partition, offset, monotonic time)
        self.acked: Dict[str, Dict[str, Tuple[int, int, float]]] = {w: {} for w in workloads}
        # value -> last error text (delivery failed: the record may or may not be in the log)
        self.failed: Dict[str, Dict[str, str]] = {w: {} for w in workloads}
        self.error_counts: Dict[str, Counter] = {w: Counter() for w in workloads}
        # (partition, offset) -> (value, source, time): the first observation of each offset
        self.at: Dict[str, Dict[Tuple[int, int], Tuple[str, str, float]]] = {w: {} for w in workloads}
        # value -> (partition, offset): the first offset a value was seen at
        self.where: Dict[str, Dict[str, Tuple[int, int]]] = {w: {} for w in workloads}
        self.offset_conflicts: Dict[str, list] = {w: [] for w in workloads}
        self.dup_values: Dict[str, Dict[str, set]] = {w: {} for w in workloads}
        # value -> (source, time) of its first read during the run
        self.read: Dict[str, Dict[str, Tuple[str, float]]] = {w: {} for w in workloads}
        self.group_read: Dict[str, set] = {w: set() for w in workloads}
        # a group member that started below an offset its coordinator had reported committed:
        # (partition, committed, started at). The member commits synchronously, one commit at
        # a time, so a committed offset it was told of is never overtaken by an older one.
        self.group_regressed: Dict[str, list] = {w: [] for w in workloads}
        self.group_rereads: Counter = Counter()
        self.final: Optional[Dict[str, Dict[Tuple[int, int], str]]] = None
        self.producer_fatal: List[Tuple[str, float, str]] = []
        self.consumer_errors: Counter = Counter()

    # ---- recording (any thread) --------------------------------------------
    def _observe(self, wl: str, p: int, o: int, value: str, source: str, t: float) -> None:
        at = self.at[wl]
        prev = at.get((p, o))
        if prev is None:
            at[(p, o)] = (value, source, t)
        elif prev[0] != value:
            self.offset_conflicts[wl].append(((p, o), prev, (value, source, t)))
        w = self.where[wl].get(value)
        if w is None:
            self.where[wl][value] = (p, o)
        elif w != (p, o):
            self.dup_values[wl].setdefault(value, {w}).add((p, o))

    def on_send(self, wl: str) -> None:
        with self.lock:
            self.sent[wl] += 1

    def on_ack(self, wl: str, value: str, p: int, o: Optional[int], t: float) -> None:
        with self.lock:
            # librdkafka acknowledges some records without an offset (None): those its
            # idempotent producer knows were written because the broker accepted later
            # sequence numbers after a response was lost. They are checked like the others,
            # except that there is no acknowledged offset to compare.
            if o is not None and o < 0:
                o = None
            self.acked[wl][value] = (p, o, t)
            self.failed[wl].pop(value, None)
            if o is not None:
                self._observe(wl, p, o, value, "ack", t)

    def on_group_regressed(self, wl: str, p: int, committed: int, started: int) -> None:
        with self.lock:
            self.group_regressed[wl].append((p, committed, started))

    def on_fail(self, wl: str, value: str, err: str) -> None:
        with self.lock:
            self.failed[wl][value] = err
            self.error_counts[wl][err.split(",")[0][:80]] += 1

    def on_read(self, wl: str, value: str, p: int, o: int, source: str, t: float) -> None:
        with self.lock:
            self._observe(wl, p, o, value, source, t)
            if value not in self.read[wl]:
                self.read[wl][value] = (source, t)
            if source == "group":
                if value in self.group_read[wl]:
                    self.group_rereads[wl] += 1
                else:
                    self.group_read[wl].add(value)

    def on_final(self, wl: str, records: List[Tuple[int, int, str]]) -> None:
        """The final read of workload ``wl``: (partition, offset, value) of every record."""
        with self.lock:
            if self.final is None:
                self.final = {}
            self.final[wl] = {(p, o): v for p, o, v in records}
            for p, o, v in records:
                self._observe(wl, p, o, v, "final", float("inf"))

    # ---- checking ----------------------------------------------------------
    def check(self, wl: str, examples: int = 10) -> dict:
        """Counts and examples of every anomaly of workload ``wl`` (after :meth:`on_final`)."""
        with self.lock:
            final = (self.final or {}).get(wl, {})
            final_values = {}
            for (p, o), v in final.items():
                final_values.setdefault(v, (p, o))
            acked = self.acked[wl]
            lost = sorted(((v, acked[v]) for v in acked if v not in final_values), key=lambda x: x[1][2])
            vanished = sorted(((v, self.read[wl][v]) for v in self.read[wl] if v not in final_values),
                              key=lambda x: x[1][1])
            vanished_acked = sum(1 for v, _ in vanished if v in acked)
            # reordered: per partition and producer instance, SEQ must grow with the offset
            reordered = []
            last: Dict[Tuple[int, int], Tuple[int, int, str]] = {}
            for (p, o) in sorted(final):
                v = final[(p, o)]
                parsed = parse_value(v)
                if parsed is None:
                    continue
                _, inst, seq = parsed
                prev = last.get((p, inst))
                if prev is not None and seq < prev[0]:
                    reordered.append({"partition": p, "offset": o, "value": v,
                                      "after": {"offset": prev[1], "value": prev[2]}})
                if prev is None or seq > prev[0]:
                    last[(p, inst)] = (seq, o, v)
            dups = sorted(self.dup_values[wl].items(), key=lambda x: x[0])
            conflicts = self.offset_conflicts[wl]
            # offsets that served two values, counted once per offset
            conflict_offsets = sorted({c[0] for c in conflicts})
            # A group consumer that read nothing missed everything acknowledged.
            group_missed = sorted((v for v in acked if v not in self.group_read[wl]),
                                  key=lambda v: acked[v][2])
            # Every record sent ends acknowledged or failed (a purge at the end, or of a
            # replaced producer, reports it failed); one with neither went uncounted.
            uncounted = self.sent[wl] - len(set(acked) | set(self.failed[wl]))
            return {
                "sent": self.sent[wl],
                "acked": len(acked),
                "failed": len(self.failed[wl]),
                "failed_but_present": sum(1 for v in self.failed[wl] if v in final_values),
                "final_records": len(final),
                "lost": len(lost),
                "lost_examples": [{"value": v, "partition": p, "offset": o, "acked_at": t}
                                  for v, (p, o, t) in lost[:examples]],
                "lost_by_partition": dict(Counter(a[1][0] for a in lost)),
                "duplicated": len(dups),
                "duplicated_examples": [{"value": v, "offsets": sorted(s)} for v, s in dups[:examples]],
                "reordered": len(reordered),
                "reordered_examples": reordered[:examples],
                "inconsistent_offsets": len(conflict_offsets),
                "inconsistent_examples": [
                    {"partition": po[0], "offset": po[1], "first": {"value": a[0], "source": a[1]},
                     "then": {"value": b[0], "source": b[1]}}
                    for po, a, b in conflicts[:examples]],
                "vanished": len(vanished),
                "vanished_acked": vanished_acked,
                "vanished_examples": [{"value": v, "read_by": s, "read_at": t, "acked": v in acked,
                                       "acked_as": acked.get(v)}
                                      for v, (s, t) in vanished[:examples]],
                "group_read": len(self.group_read[wl]),
                "group_rereads": self.group_rereads[wl],
                "group_missed": len(group_missed),
                "group_missed_examples": [{"value": v, "partition": acked[v][0], "offset": acked[v][1]}
                                          for v in group_missed[:examples]],
                "uncounted": uncounted,
                "group_offset_regressed": len(self.group_regressed[wl]),
                "group_offset_regressed_examples": self.group_regressed[wl][:examples],
                "errors": dict(self.error_counts[wl].most_common(8)),
            }
