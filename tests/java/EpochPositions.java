// Consumer positions that the Java client validates or re-adds, for
// tests/integration/test_consumer_positions.py.
//
//   java -cp 'tests/.deps/kafka-libs/*' tests/java/EpochPositions.java BOOTSTRAP TOPIC CASE
//
// TOPIC has two partitions, each holding records "p<partition>-<i>" for i in 0..99 (the test
// produced them). CASE:
//
//   seek-epoch      assign both partitions, read partition 0 to learn the leader epoch of its
//                   records, then a new consumer seeks partition 0 to offset 50 with that epoch
//                   (seek(tp, OffsetAndMetadata(50, Optional.of(epoch), ""))): the client
//                   validates the position with OffsetForLeaderEpoch and reads offsets 50..99.
//                   Then a seek with an epoch older than any in the log (epoch - 1, when the
//                   records' epoch is above 0): the answer is the start of the oldest epoch,
//                   below 50, so the client resumes there (truncation detected, reset policy).
//   pause-resume    read both partitions to their end; pause partition 0 and keep polling (its
//                   fetch session forgets it); the test's records 100..149 arrive in the meantime
//                   (the program prints "WAITING" and waits for them on partition 1); resume:
//                   partition 0's new records arrive.
//   assign-back     the same with assign([p1]) then assign([p0, p1]) and seek(p0, 100) instead
//                   of pause/resume.
//   resubscribe     a group member (subscribe) reads both partitions, commits, unsubscribes,
//                   then subscribes again: it reads the new records of both partitions.
//
// Output lines: "EPOCH <leader epoch of partition 0's records>", "WAITING", "GOT <partition>
// <first offset> <last offset> <count>" per case step, "OK", or "ERROR <text>" and exit 1.

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

public class EpochPositions {
    static void out(String line) {
        System.out.println(line);
        System.out.flush();
    }

    static String bootstrap, topic;

    static KafkaConsumer<String, String> consumer(String group) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("auto.offset.reset", "earliest");
        p.put("enable.auto.commit", "false");
        if (group != null) p.put("group.id", group);
        return new KafkaConsumer<>(p, new StringDeserializer(), new StringDeserializer());
    }

    /** Poll until every partition in `want` reached its end offset; the records read, by partition. */
    static Map<Integer, List<ConsumerRecord<String, String>>> readTo(KafkaConsumer<String, String> c,
            Map<Integer, Long> want, long timeoutMs) {
        Map<Integer, List<ConsumerRecord<String, String>>> got = new TreeMap<>();
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        while (true) {
            boolean done = true;
            for (Map.Entry<Integer, Long> w : want.entrySet()) {
                List<ConsumerRecord<String, String>> l = got.get(w.getKey());
                long next = (l == null || l.isEmpty()) ? -1 : l.get(l.size() - 1).offset() + 1;
                if (next < w.getValue()) done = false;
            }
            if (done) return got;
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("timed out reading " + want + "; got " + summary(got));
            }
            for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                got.computeIfAbsent(r.partition(), k -> new ArrayList<>()).add(r);
            }
        }
    }

    static String summary(Map<Integer, List<ConsumerRecord<String, String>>> got) {
        StringBuilder b = new StringBuilder();
        for (Map.Entry<Integer, List<ConsumerRecord<String, String>>> e : got.entrySet()) {
            List<ConsumerRecord<String, String>> l = e.getValue();
            b.append(e.getKey()).append(":").append(l.get(0).offset()).append("-").append(l.get(l.size() - 1).offset()).append(" ");
        }
        return b.toString();
    }

    static void report(Map<Integer, List<ConsumerRecord<String, String>>> got) {
        for (Map.Entry<Integer, List<ConsumerRecord<String, String>>> e : got.entrySet()) {
            List<ConsumerRecord<String, String>> l = e.getValue();
            out("GOT " + e.getKey() + " " + l.get(0).offset() + " " + l.get(l.size() - 1).offset() + " " + l.size());
        }
    }

    static Map<Integer, Long> ends(long p0, long p1) {
        Map<Integer, Long> m = new TreeMap<>();
        if (p0 >= 0) m.put(0, p0);
        if (p1 >= 0) m.put(1, p1);
        return m;
    }

    public static void main(String[] a) throws Exception {
        bootstrap = a[0];
        topic = a[1];
        String mode = a[2];
        TopicPartition p0 = new TopicPartition(topic, 0), p1 = new TopicPartition(topic, 1);
        long timeout = 30000;
        try {
            switch (mode) {
                case "seek-epoch": {
                    int epoch;
                    try (KafkaConsumer<String, String> c = consumer(null)) {
                        c.assign(List.of(p0));
                        Map<Integer, List<ConsumerRecord<String, String>>> got = readTo(c, ends(100, -1), timeout);
                        epoch = got.get(0).get(50).leaderEpoch().orElseThrow();
                        out("EPOCH " + epoch);
                    }
                    List<Integer> epochs = new ArrayList<>(List.of(epoch));
                    if (epoch > 0) epochs.add(epoch - 1);
                    for (int e : epochs) {
                        try (KafkaConsumer<String, String> c = consumer(null)) {
                            c.assign(List.of(p0));
                            c.seek(p0, new OffsetAndMetadata(50, Optional.of(e), ""));
                            Map<Integer, List<ConsumerRecord<String, String>>> got = readTo(c, ends(100, -1), timeout);
                            report(got);
                        }
                    }
                    break;
                }
                case "pause-resume":
                case "assign-back": {
                    try (KafkaConsumer<String, String> c = consumer(null)) {
                        c.assign(List.of(p0, p1));
                        report(readTo(c, ends(100, 100), timeout));
                        if (mode.equals("pause-resume")) {
                            c.pause(List.of(p0));
                        } else {
                            c.assign(List.of(p1));
                        }
                        // Fetch a while without partition 0 (its session forgets it).
                        for (int i = 0; i < 5; i++) c.poll(Duration.ofMillis(200));
                        out("WAITING");
                        report(readTo(c, ends(-1, 150), timeout));
                        if (mode.equals("pause-resume")) {
                            c.resume(List.of(p0));
                        } else {
                            c.assign(List.of(p0, p1));
                            c.seek(p0, 100); // assign() forgot the position
                        }
                        report(readTo(c, ends(150, -1), timeout));
                    }
                    break;
                }
                case "resubscribe": {
                    try (KafkaConsumer<String, String> c = consumer(topic + "-group")) {
                        c.subscribe(List.of(topic));
                        report(readTo(c, ends(100, 100), timeout));
                        c.commitSync();
                        c.unsubscribe();
                        out("WAITING");
                        // The test produces 100..149 to both partitions once it sees WAITING.
                        Thread.sleep(3000);
                        c.subscribe(List.of(topic));
                        report(readTo(c, ends(150, 150), timeout));
                    }
                    break;
                }
                default:
                    throw new IllegalArgumentException("unknown case " + mode);
            }
            out("OK");
        } catch (Exception e) {
            out("ERROR " + e);
            System.exit(1);
        }
    }
}
