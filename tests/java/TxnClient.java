// Transactional producer and read_committed reader for tests/integration/test_transactions.py.
//
// A single-file program for Java's source launcher (no build step):
//   java -cp 'tests/.deps/kafka-libs/*' tests/java/TxnClient.java MODE ARGS...
// (harness.java_program_cmd builds that command). Every result is one line on stdout
// starting with an upper-case word (COMMIT, ABORT, OPEN, FENCED, OFFSETS, REC, DONE, ...),
// fields separated by single spaces; the Kafka client logs warnings on stderr.
//
// Modes:
//   produce BOOTSTRAP TOPIC PARTITIONS PRODUCERS TXNS PER_TXN
//       PRODUCERS threads, each its own transactional.id (txn-client-<topic>-<k>), run TXNS
//       transactions of PER_TXN records at once, so committed and aborted batches interleave
//       in every partition. Transaction i of producer k is aborted when i % 3 == 1. Record j of
//       a transaction goes to partition j % PARTITIONS; key "p<k>-t<i>-r<j>", value
//       "<commit|abort>-p<k>-t<i>-r<j>". Prints "COMMIT k i" / "ABORT k i" once each
//       transaction has ended, then "DONE".
//   hang BOOTSTRAP TOPIC PARTITION TXN_ID TIMEOUT_MS COMMITTED OPEN
//       Commits one transaction of COMMITTED records ("before-<n>"), then begins one with OPEN
//       records ("open-<n>"), flushes it (the records are in the log), prints "OPEN" and waits
//       to be killed (transaction.timeout.ms TIMEOUT_MS).
//   hold BOOTSTRAP TOPIC PARTITION TXN_ID TIMEOUT_MS OPEN GO_FILE
//       Begins a transaction of OPEN records ("held-<n>"), flushes it, prints "OPEN", waits
//       (up to 5 minutes) for GO_FILE to exist, then commits: "COMMIT" or, if the commit
//       fails, "COMMIT_FAILED <exception class> <message>" followed by "ABORT" when the
//       transaction could be aborted. Then one more transaction of 2 records ("next-<n>"):
//       "NEXT_COMMIT", "DONE" (or "NEXT_FAILED <exception class>").
//   init BOOTSTRAP TOPIC PARTITION TXN_ID COUNT
//       initTransactions with TXN_ID (fencing any earlier producer of it), prints
//       "INIT <ms>", then commits COUNT records ("after-<n>") and prints "COMMIT", "DONE".
//   fence BOOTSTRAP TOPIC TXN_ID COUNT
//       Producer A begins a transaction of COUNT records ("zombie-<n>") and flushes it;
//       producer B with the same TXN_ID calls initTransactions; A's commitTransaction must
//       fail: "FENCED commit <exception class> <message>"; A's next send too:
//       "FENCED send <exception class>". B then commits COUNT records ("live-<n>"); "DONE".
//   offsets BOOTSTRAP TOPIC PARTITION
//       "OFFSETS admin_committed=<n> admin_uncommitted=<n> consumer_committed=<n>
//       consumer_uncommitted=<n>": the end offset by ListOffsets (AdminClient with
//       IsolationLevel) and by KafkaConsumer.endOffsets with isolation.level each way.
//   consume BOOTSTRAP TOPIC ISOLATION
//       Reads every partition (assign) from the beginning to its end offset under ISOLATION
//       (read_committed | read_uncommitted): "REC <partition> <offset> <key> <value>", "DONE".

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class TxnClient {
    static synchronized void out(String line) {
        System.out.println(line);
        System.out.flush();
    }

    static KafkaProducer<String, String> producer(String bootstrap, String txnId, int timeoutMs) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("transactional.id", txnId);
        p.put("transaction.timeout.ms", Integer.toString(timeoutMs));
        p.put("max.block.ms", "60000");
        p.put("linger.ms", "5");
        return new KafkaProducer<>(p, new StringSerializer(), new StringSerializer());
    }

    static KafkaConsumer<String, String> consumer(String bootstrap, String isolation) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("isolation.level", isolation);
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", "earliest");
        return new KafkaConsumer<>(p, new StringDeserializer(), new StringDeserializer());
    }

    static void produce(String bootstrap, String topic, int partitions, int producers, int txns, int perTxn)
            throws Exception {
        List<Thread> threads = new ArrayList<>();
        List<Throwable> failures = new ArrayList<>();
        for (int k = 0; k < producers; k++) {
            final int pk = k;
            Thread t = new Thread(() -> {
                try (KafkaProducer<String, String> prod = producer(bootstrap, "txn-client-" + topic + "-" + pk, 60000)) {
                    prod.initTransactions();
                    for (int i = 0; i < txns; i++) {
                        boolean abort = i % 3 == 1;
                        prod.beginTransaction();
                        for (int j = 0; j < perTxn; j++) {
                            String id = "p" + pk + "-t" + i + "-r" + j;
                            prod.send(new ProducerRecord<>(topic, j % partitions, id, (abort ? "abort-" : "commit-") + id));
                        }
                        if (abort) {
                            prod.flush(); // the aborted records really reach the log first
                            prod.abortTransaction();
                            out("ABORT " + pk + " " + i);
                        } else {
                            prod.commitTransaction();
                            out("COMMIT " + pk + " " + i);
                        }
                    }
                } catch (Throwable e) {
                    synchronized (failures) {
                        failures.add(e);
                    }
                }
            });
            threads.add(t);
            t.start();
        }
        for (Thread t : threads) {
            t.join();
        }
        if (!failures.isEmpty()) {
            failures.get(0).printStackTrace();
            out("ERROR " + failures.get(0));
            System.exit(1);
        }
        out("DONE");
    }

    static void hang(String bootstrap, String topic, int partition, String txnId, int timeoutMs, int committed,
                     int open) throws Exception {
        KafkaProducer<String, String> prod = producer(bootstrap, txnId, timeoutMs);
        prod.initTransactions();
        if (committed > 0) {
            prod.beginTransaction();
            for (int n = 0; n < committed; n++) {
                prod.send(new ProducerRecord<>(topic, partition, "before-" + n, "before-" + n));
            }
            prod.commitTransaction();
            out("COMMIT");
        }
        prod.beginTransaction();
        for (int n = 0; n < open; n++) {
            prod.send(new ProducerRecord<>(topic, partition, "open-" + n, "open-" + n));
        }
        prod.flush();
        out("OPEN");
        Thread.sleep(TimeUnit.HOURS.toMillis(1)); // until SIGKILLed
    }

    static void hold(String bootstrap, String topic, int partition, String txnId, int timeoutMs, int open,
                     String goFile) throws Exception {
        KafkaProducer<String, String> prod = producer(bootstrap, txnId, timeoutMs);
        prod.initTransactions();
        prod.beginTransaction();
        for (int n = 0; n < open; n++) {
            prod.send(new ProducerRecord<>(topic, partition, "held-" + n, "held-" + n));
        }
        prod.flush();
        out("OPEN");
        java.nio.file.Path go = java.nio.file.Path.of(goFile);
        long deadline = System.nanoTime() + TimeUnit.MINUTES.toNanos(5);
        while (!java.nio.file.Files.exists(go)) {
            if (System.nanoTime() > deadline) {
                out("ERROR no " + goFile);
                System.exit(1);
            }
            Thread.sleep(50);
        }
        try {
            prod.commitTransaction();
            out("COMMIT");
        } catch (Exception e) {
            out("COMMIT_FAILED " + e.getClass().getName() + " " + String.valueOf(e.getMessage()).replace('\n', ' '));
            try {
                prod.abortTransaction();
                out("ABORT");
            } catch (Exception e2) {
                out("ABORT_FAILED " + e2.getClass().getName());
                System.exit(0);
            }
        }
        try {
            prod.beginTransaction();
            for (int n = 0; n < 2; n++) {
                prod.send(new ProducerRecord<>(topic, partition, "next-" + n, "next-" + n));
            }
            prod.commitTransaction();
            out("NEXT_COMMIT");
        } catch (Exception e) {
            out("NEXT_FAILED " + e.getClass().getName());
        }
        prod.close(Duration.ofSeconds(10));
        out("DONE");
    }

    static void init(String bootstrap, String topic, int partition, String txnId, int count) throws Exception {
        try (KafkaProducer<String, String> prod = producer(bootstrap, txnId, 60000)) {
            long t0 = System.nanoTime();
            prod.initTransactions();
            out("INIT " + TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0));
            prod.beginTransaction();
            for (int n = 0; n < count; n++) {
                prod.send(new ProducerRecord<>(topic, partition, "after-" + n, "after-" + n));
            }
            prod.commitTransaction();
            out("COMMIT");
        }
        out("DONE");
    }

    static void fence(String bootstrap, String topic, String txnId, int count) throws Exception {
        KafkaProducer<String, String> zombie = producer(bootstrap, txnId, 60000);
        zombie.initTransactions();
        zombie.beginTransaction();
        for (int n = 0; n < count; n++) {
            zombie.send(new ProducerRecord<>(topic, 0, "zombie-" + n, "zombie-" + n));
        }
        zombie.flush();
        out("ZOMBIE_OPEN");
        try (KafkaProducer<String, String> live = producer(bootstrap, txnId, 60000)) {
            live.initTransactions();
            out("LIVE_INIT");
            try {
                zombie.commitTransaction();
                out("NOT_FENCED commit");
            } catch (Exception e) {
                out("FENCED commit " + e.getClass().getName() + " " + String.valueOf(e.getMessage()).replace('\n', ' '));
            }
            try {
                zombie.send(new ProducerRecord<>(topic, 0, "zombie-late", "zombie-late")).get(30, TimeUnit.SECONDS);
                out("NOT_FENCED send");
            } catch (Exception e) {
                Throwable c = e instanceof java.util.concurrent.ExecutionException ? e.getCause() : e;
                out("FENCED send " + c.getClass().getName());
            }
            zombie.close(Duration.ofSeconds(5));
            live.beginTransaction();
            for (int n = 0; n < count; n++) {
                live.send(new ProducerRecord<>(topic, 0, "live-" + n, "live-" + n));
            }
            live.commitTransaction();
            out("COMMIT");
        }
        out("DONE");
    }

    static void offsets(String bootstrap, String topic, int partition) throws Exception {
        TopicPartition tp = new TopicPartition(topic, partition);
        Properties ap = new Properties();
        ap.put("bootstrap.servers", bootstrap);
        long adminCommitted;
        long adminUncommitted;
        try (Admin admin = Admin.create(ap)) {
            adminCommitted = admin.listOffsets(Map.of(tp, OffsetSpec.latest()),
                    new ListOffsetsOptions(IsolationLevel.READ_COMMITTED)).partitionResult(tp).get(30, TimeUnit.SECONDS).offset();
            adminUncommitted = admin.listOffsets(Map.of(tp, OffsetSpec.latest()),
                    new ListOffsetsOptions(IsolationLevel.READ_UNCOMMITTED)).partitionResult(tp).get(30, TimeUnit.SECONDS).offset();
        }
        long consumerCommitted;
        long consumerUncommitted;
        try (KafkaConsumer<String, String> c = consumer(bootstrap, "read_committed")) {
            consumerCommitted = c.endOffsets(List.of(tp), Duration.ofSeconds(30)).get(tp);
        }
        try (KafkaConsumer<String, String> c = consumer(bootstrap, "read_uncommitted")) {
            consumerUncommitted = c.endOffsets(List.of(tp), Duration.ofSeconds(30)).get(tp);
        }
        out("OFFSETS admin_committed=" + adminCommitted + " admin_uncommitted=" + adminUncommitted
                + " consumer_committed=" + consumerCommitted + " consumer_uncommitted=" + consumerUncommitted);
    }

    static void consume(String bootstrap, String topic, String isolation) throws Exception {
        try (KafkaConsumer<String, String> c = consumer(bootstrap, isolation)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (PartitionInfo pi : c.partitionsFor(topic, Duration.ofSeconds(30))) {
                tps.add(new TopicPartition(topic, pi.partition()));
            }
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> end = new HashMap<>(c.endOffsets(tps, Duration.ofSeconds(30)));
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (true) {
                boolean done = true;
                for (TopicPartition tp : tps) {
                    if (c.position(tp, Duration.ofSeconds(30)) < end.get(tp)) {
                        done = false;
                    }
                }
                if (done) {
                    break;
                }
                if (System.nanoTime() > deadline) {
                    out("ERROR timed out reading to " + end);
                    System.exit(1);
                }
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                    out("REC " + r.partition() + " " + r.offset() + " " + r.key() + " " + r.value());
                }
            }
        }
        out("DONE");
    }

    public static void main(String[] a) throws Exception {
        switch (a[0]) {
            case "produce":
                produce(a[1], a[2], Integer.parseInt(a[3]), Integer.parseInt(a[4]), Integer.parseInt(a[5]),
                        Integer.parseInt(a[6]));
                break;
            case "hang":
                hang(a[1], a[2], Integer.parseInt(a[3]), a[4], Integer.parseInt(a[5]), Integer.parseInt(a[6]),
                        Integer.parseInt(a[7]));
                break;
            case "hold":
                hold(a[1], a[2], Integer.parseInt(a[3]), a[4], Integer.parseInt(a[5]), Integer.parseInt(a[6]), a[7]);
                break;
            case "init":
                init(a[1], a[2], Integer.parseInt(a[3]), a[4], Integer.parseInt(a[5]));
                break;
            case "fence":
                fence(a[1], a[2], a[3], Integer.parseInt(a[4]));
                break;
            case "offsets":
                offsets(a[1], a[2], Integer.parseInt(a[3]));
                break;
            case "consume":
                consume(a[1], a[2], a[3]);
                break;
            default:
                throw new IllegalArgumentException("unknown mode " + a[0]);
        }
        System.exit(0);
    }
}
