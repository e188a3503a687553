// Share-group consume throughput and redelivery latency, for bench/share-compare.
//
//   java -cp 'tests/.deps/kafka-libs/*' tests/java/ShareBench.java BOOTSTRAP TOPIC RECORDS RECORD_BYTES
//        CONSUMERS ROUNDS
//
// 1. Produces RECORDS records of RECORD_BYTES random bytes (acks=all, idempotent, spread over
//    the topic's partitions), then prints "PHASE consume".
// 2. Throughput: CONSUMERS KafkaShareConsumer threads of a new group (share.auto.offset.reset
//    earliest, set with the Admin client; implicit acknowledgement: a poll acknowledges what
//    the previous one returned) consume until the distinct records they got are RECORDS; each
//    closes (acknowledging its last poll). Prints
//      RESULT phase=consume records=<n> deliveries=<n> seconds=<s> records_s=<r> mb_s=<MiB/s>
//    (deliveries: records got, counting redeliveries) then "PHASE redeliver".
// 3. Redelivery latency: one consumer of another group (explicit acknowledgement, at most 10
//    records a poll, which a broker acquiring whole batches exceeds), ROUNDS times: poll records, RELEASE them all and commitSync(); then poll
//    until the first released record comes back (its delivery count one higher), the time from
//    the commitSync's return counted; what the polls meanwhile returned is accepted. Prints
//      RESULT phase=redeliver rounds=<n> p50_ms=<ms> p99_ms=<ms> max_ms=<ms>
// then "DONE". MB/s counts the values only (RECORD_BYTES per record).

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class ShareBench {
    static double percentile(long[] sortedNanos, double q) {
        int i = (int) Math.ceil(q * sortedNanos.length) - 1;
        return sortedNanos[Math.max(0, Math.min(sortedNanos.length - 1, i))] / 1e6;
    }

    static void earliest(String bootstrap, String group) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(p)) {
            ConfigResource r = new ConfigResource(ConfigResource.Type.GROUP, group);
            admin.incrementalAlterConfigs(Map.of(r, List.of(new AlterConfigOp(
                new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET)))).all().get();
        }
    }

    static KafkaShareConsumer<byte[], byte[]> consumer(String bootstrap, String group, boolean explicit, int maxPoll) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.SHARE_ACKNOWLEDGEMENT_MODE_CONFIG, explicit ? "explicit" : "implicit");
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, String.valueOf(maxPoll));
        return new KafkaShareConsumer<>(p);
    }

    public static void main(String[] a) throws Exception {
        String bootstrap = a[0], topic = a[1];
        long records = Long.parseLong(a[2]);
        int recordBytes = Integer.parseInt(a[3]);
        int consumers = Integer.parseInt(a[4]);
        int rounds = Integer.parseInt(a[5]);

        Properties pp = new Properties();
        pp.put("bootstrap.servers", bootstrap);
        pp.put("acks", "all");
        pp.put("linger.ms", "5");
        pp.put("batch.size", String.valueOf(128 * 1024));
        pp.put("key.serializer", ByteArraySerializer.class.getName());
        pp.put("value.serializer", ByteArraySerializer.class.getName());
        byte[] value = new byte[recordBytes];
        new Random(1).nextBytes(value);
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(pp)) {
            for (long i = 0; i < records; i++) {
                producer.send(new ProducerRecord<>(topic, null, value));
            }
            producer.flush();
        }
        System.out.println("PHASE consume");
        System.out.flush();

        String group = "sharebench-" + System.nanoTime();
        earliest(bootstrap, group);
        Set<String> seen = ConcurrentHashMap.newKeySet();
        AtomicLong deliveries = new AtomicLong();
        List<Thread> threads = new ArrayList<>();
        long start = System.nanoTime();
        for (int c = 0; c < consumers; c++) {
            Thread t = new Thread(() -> {
                try (KafkaShareConsumer<byte[], byte[]> consumer = consumer(bootstrap, group, false, 500)) {
                    consumer.subscribe(List.of(topic));
                    while (seen.size() < records) {
                        ConsumerRecords<byte[], byte[]> got = consumer.poll(Duration.ofMillis(200));
                        for (ConsumerRecord<byte[], byte[]> r : got) {
                            deliveries.incrementAndGet();
                            seen.add(r.partition() + ":" + r.offset());
                        }
                    }
                }
            });
            t.start();
            threads.add(t);
        }
        for (Thread t : threads) {
            t.join();
        }
        double seconds = (System.nanoTime() - start) / 1e9;
        System.out.printf("RESULT phase=consume records=%d deliveries=%d seconds=%.3f records_s=%.1f mb_s=%.3f%n",
            records, deliveries.get(), seconds, records / seconds, records * (double) recordBytes / seconds / (1 << 20));
        System.out.println("PHASE redeliver");
        System.out.flush();

        String group2 = "sharebench-redeliver-" + System.nanoTime();
        earliest(bootstrap, group2);
        long[] waits = new long[rounds];
        try (KafkaShareConsumer<byte[], byte[]> consumer = consumer(bootstrap, group2, true, 10)) {
            consumer.subscribe(List.of(topic));
            for (int round = 0; round < rounds; round++) {
                ConsumerRecords<byte[], byte[]> got = consumer.poll(Duration.ofSeconds(5));
                for (int empty = 1; got.isEmpty(); empty++) {
                    if (empty == 3) {
                        // Each round accepts what it got meanwhile (whole batches): the topic
                        // ran out of records to release.
                        throw new IllegalStateException("no records left to release at round " + round
                            + " of " + rounds + ": more records or fewer rounds");
                    }
                    got = consumer.poll(Duration.ofSeconds(5));
                }
                ConsumerRecord<byte[], byte[]> first = got.iterator().next();
                int count = first.deliveryCount().orElse((short) 1);
                for (ConsumerRecord<byte[], byte[]> r : got) {
                    consumer.acknowledge(r, AcknowledgeType.RELEASE);
                }
                consumer.commitSync();
                long released = System.nanoTime();
                boolean back = false;
                while (!back) {
                    if (System.nanoTime() - released > 60_000_000_000L) {
                        throw new IllegalStateException("the released record " + first.partition() + ":"
                            + first.offset() + " was not delivered again within 60 s");
                    }
                    got = consumer.poll(Duration.ofSeconds(5));
                    for (ConsumerRecord<byte[], byte[]> r : got) {
                        if (!back && r.partition() == first.partition() && r.offset() == first.offset()
                                && r.deliveryCount().orElse((short) 0) > count) {
                            back = true;
                            waits[round] = System.nanoTime() - released;
                        }
                        consumer.acknowledge(r, AcknowledgeType.ACCEPT);
                    }
                }
                consumer.commitSync();
            }
        }
        Arrays.sort(waits);
        System.out.printf("RESULT phase=redeliver rounds=%d p50_ms=%.2f p99_ms=%.2f max_ms=%.2f%n",
            rounds, percentile(waits, 0.5), percentile(waits, 0.99), waits[waits.length - 1] / 1e6);
        System.out.println("DONE");
    }
}
