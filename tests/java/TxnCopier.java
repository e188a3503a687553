// A consume-transform-produce loop for tests/integration/test_transactions.py (exactly once).
//
//   java -cp 'tests/.deps/kafka-libs/*' tests/java/TxnCopier.java BOOTSTRAP IN OUT GROUP TXN_ID BATCH PAUSE_MS
//
// A read_committed consumer in GROUP (subscribe, no auto-commit, max.poll.records BATCH) reads
// IN; for each poll one transaction sends every record to OUT, same partition and key, value
// "out:" + input value, adds the consumer's positions with sendOffsetsToTransaction(offsets,
// groupMetadata()) and commits; then it sleeps PAUSE_MS (so a test can kill it mid-way).
// A failed transaction (the broker restarting, say) is aborted when it can be, or else the
// producer and the consumer are closed and made again with the same transactional.id (its
// initTransactions fences and aborts what the old one left): either way reading resumes from
// the group's committed offsets, so nothing is lost or written twice. The program exits when
// its positions reach the read_committed end offsets of every partition of IN.
//
// Output lines: "START", "COMMIT <records in the transaction> <records committed by this process>",
// "RETRY <exception class> <message>", "DONE <records committed by this process>".

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class TxnCopier {
    static void out(String line) {
        System.out.println(line);
        System.out.flush();
    }

    public static void main(String[] a) throws Exception {
        String bootstrap = a[0], in = a[1], outTopic = a[2], group = a[3], txnId = a[4];
        int batch = Integer.parseInt(a[5]);
        long pauseMs = Long.parseLong(a[6]);
        long total = 0;
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(240);
        out("START");
        while (true) {
            if (System.nanoTime() > deadline) {
                out("ERROR not done in 240 s");
                System.exit(1);
            }
            Properties cp = new Properties();
            cp.put("bootstrap.servers", bootstrap);
            cp.put("group.id", group);
            cp.put("isolation.level", "read_committed");
            cp.put("enable.auto.commit", "false");
            cp.put("auto.offset.reset", "earliest");
            cp.put("max.poll.records", Integer.toString(batch));
            // The broker's group.min.session.timeout.ms (6 s): a SIGKILLed member leaves soon.
            cp.put("session.timeout.ms", "6000");
            cp.put("heartbeat.interval.ms", "500");
            Properties pp = new Properties();
            pp.put("bootstrap.servers", bootstrap);
            pp.put("transactional.id", txnId);
            pp.put("transaction.timeout.ms", "30000");
            pp.put("max.block.ms", "30000");
            pp.put("delivery.timeout.ms", "30000");
            pp.put("request.timeout.ms", "10000");
            pp.put("linger.ms", "5");
            KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cp, new StringDeserializer(), new StringDeserializer());
            KafkaProducer<String, String> producer = new KafkaProducer<>(pp, new StringSerializer(), new StringSerializer());
            boolean done = false;
            try {
                producer.initTransactions();
                consumer.subscribe(List.of(in));
                List<TopicPartition> all = new ArrayList<>();
                for (PartitionInfo pi : consumer.partitionsFor(in, Duration.ofSeconds(30))) {
                    all.add(new TopicPartition(in, pi.partition()));
                }
                while (!done) {
                    if (System.nanoTime() > deadline) {
                        out("ERROR not done in 240 s");
                        System.exit(1);
                    }
                    ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(500));
                    if (records.isEmpty()) {
                        // Done once this member holds every partition and has read each to its end.
                        if (consumer.assignment().size() == all.size()) {
                            Map<TopicPartition, Long> end = consumer.endOffsets(all, Duration.ofSeconds(30));
                            boolean caughtUp = true;
                            for (TopicPartition tp : all) {
                                if (consumer.position(tp, Duration.ofSeconds(30)) < end.get(tp)) {
                                    caughtUp = false;
                                }
                            }
                            done = caughtUp;
                        }
                        continue;
                    }
                    producer.beginTransaction();
                    Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                    for (ConsumerRecord<String, String> r : records) {
                        producer.send(new ProducerRecord<>(outTopic, r.partition(), r.key(), "out:" + r.value()));
                        offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                    }
                    producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                    producer.commitTransaction();
                    total += records.count();
                    out("COMMIT " + records.count() + " " + total);
                    if (pauseMs > 0) {
                        Thread.sleep(pauseMs);
                    }
                }
            } catch (ProducerFencedException e) {
                // Another process took over this transactional.id: this one must stop.
                out("FENCED " + e.getClass().getName());
                System.exit(2);
            } catch (KafkaException e) {
                out("RETRY " + e.getClass().getName() + " " + String.valueOf(e.getMessage()).replace('\n', ' '));
            } finally {
                // Closing without committing aborts nothing by itself; the next initTransactions
                // with this transactional.id does, and the group's offsets were not moved.
                producer.close(Duration.ofSeconds(5));
                consumer.close(Duration.ofSeconds(5));
            }
            if (done) {
                break;
            }
        }
        out("DONE " + total);
        System.exit(0);
    }
}
