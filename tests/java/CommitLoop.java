// A group's offsets committed one by one with commitSync, for
// tests/integration/test_failed_fsync.py.
//
//   java -cp 'tests/.deps/kafka-libs/*' tests/java/CommitLoop.java BOOTSTRAP TOPIC GROUP COUNT PAUSE_MS
//
// The consumer is assigned partition 0 of TOPIC (manual assignment, group GROUP for the
// offsets) and commits offsets 1..COUNT with commitSync, PAUSE_MS apart. Retriable errors are
// the client's to retry (commitSync retries them until default.api.timeout.ms); what reaches
// the program is a failed commit.
//
// Output lines: "COMMITTED <offset>" per commit, then "OK"; or "ERROR <offset> <exception>" and
// exit 1.

import java.time.Duration;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

public class CommitLoop {
    static void out(String line) {
        System.out.println(line);
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2];
        int count = Integer.parseInt(args[3]);
        long pauseMs = Long.parseLong(args[4]);
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("enable.auto.commit", "false");
        TopicPartition tp = new TopicPartition(topic, 0);
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p, new StringDeserializer(), new StringDeserializer())) {
            c.assign(java.util.List.of(tp));
            for (long offset = 1; offset <= count; offset++) {
                try {
                    c.commitSync(Map.of(tp, new OffsetAndMetadata(offset)), Duration.ofSeconds(60));
                } catch (Exception e) {
                    out("ERROR " + offset + " " + e);
                    System.exit(1);
                }
                out("COMMITTED " + offset);
                Thread.sleep(pauseMs);
            }
        }
        out("OK");
    }
}
