// Transactional produce throughput and commit latency, for bench/txn-compare.
//
//   java -cp 'tests/.deps/kafka-libs/*' tests/java/TxnBench.java BOOTSTRAP TOPIC PARTITIONS RECORD_BYTES
//        RECORDS MAX_TXNS SIZES
//
// For each transaction size in SIZES (comma-separated; 0 = no transactions: an idempotent
// acks=all producer, the baseline), one producer (a fresh transactional.id per size) writes
// min(RECORDS, MAX_TXNS x size) records of RECORD_BYTES bytes round-robin over PARTITIONS,
// `size` records per transaction, after a warm-up of 5 transactions (not counted). The time
// of each commitTransaction() is recorded, and of each whole transaction (beginTransaction to
// the return of commitTransaction: sends included); the baseline, size 0, has neither: NaN.
// One line per size:
//   RESULT size=<n> records=<n> txns=<n> seconds=<s> records_s=<r> mb_s=<MiB/s>
//          commit_p50_ms=<ms> commit_p99_ms=<ms> commit_max_ms=<ms> txn_p50_ms=<ms> txn_p99_ms=<ms>
// then "DONE". MB/s counts the values only (RECORD_BYTES per record).

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Properties;
import java.util.Random;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class TxnBench {
    static double percentile(long[] sortedNanos, double q) {
        if (sortedNanos.length == 0) {
            return Double.NaN;
        }
        int i = (int) Math.ceil(q * sortedNanos.length) - 1;
        return sortedNanos[Math.max(0, Math.min(sortedNanos.length - 1, i))] / 1e6;
    }

    public static void main(String[] a) throws Exception {
        String bootstrap = a[0], topic = a[1];
        int partitions = Integer.parseInt(a[2]);
        int recordBytes = Integer.parseInt(a[3]);
        long records = Long.parseLong(a[4]);
        long maxTxns = Long.parseLong(a[5]);
        int[] sizes = Arrays.stream(a[6].split(",")).mapToInt(Integer::parseInt).toArray();
        byte[][] values = new byte[64][recordBytes];
        Random rnd = new Random(1);
        for (byte[] v : values) {
            rnd.nextBytes(v);
        }
        for (int size : sizes) {
            boolean txn = size > 0;
            Properties p = new Properties();
            p.put("bootstrap.servers", bootstrap);
            p.put("acks", "all");
            p.put("enable.idempotence", "true");
            p.put("linger.ms", "5");
            p.put("batch.size", "131072");
            p.put("max.block.ms", "60000");
            if (txn) {
                p.put("transactional.id", "txn-bench-" + topic + "-" + size);
                p.put("transaction.timeout.ms", "60000");
            }
            long n = txn ? Math.min(records, maxTxns * size) : records;
            int perTxn = txn ? size : 1000;
            List<Long> commits = new ArrayList<>();
            List<Long> whole = new ArrayList<>();
            long sent = 0;
            double seconds;
            try (KafkaProducer<byte[], byte[]> prod = new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer())) {
                if (txn) {
                    prod.initTransactions();
                }
                // warm-up: 5 transactions (or 5 x 1000 records), not counted
                for (int w = 0; w < 5; w++) {
                    if (txn) {
                        prod.beginTransaction();
                    }
                    for (int i = 0; i < perTxn; i++) {
                        prod.send(new ProducerRecord<>(topic, i % partitions, null, values[i & 63]));
                    }
                    if (txn) {
                        prod.commitTransaction();
                    } else {
                        prod.flush();
                    }
                }
                long t0 = System.nanoTime();
                while (sent < n) {
                    long inThis = Math.min(perTxn, n - sent);
                    long b0 = System.nanoTime();
                    if (txn) {
                        prod.beginTransaction();
                    }
                    for (long i = 0; i < inThis; i++) {
                        long k = sent + i;
                        prod.send(new ProducerRecord<>(topic, (int) (k % partitions), null, values[(int) (k & 63)]));
                    }
                    sent += inThis;
                    if (txn) {
                        long c0 = System.nanoTime();
                        prod.commitTransaction();
                        long end = System.nanoTime();
                        commits.add(end - c0);
                        whole.add(end - b0);
                    }
                }
                prod.flush();
                seconds = (System.nanoTime() - t0) / 1e9;
            }
            long[] c = commits.stream().mapToLong(Long::longValue).sorted().toArray();
            long[] w = whole.stream().mapToLong(Long::longValue).sorted().toArray();
            System.out.printf("RESULT size=%d records=%d txns=%d seconds=%.3f records_s=%.1f mb_s=%.2f "
                    + "commit_p50_ms=%.2f commit_p99_ms=%.2f commit_max_ms=%.2f txn_p50_ms=%.2f txn_p99_ms=%.2f%n",
                    size, sent, c.length, seconds, sent / seconds, sent * (double) recordBytes / (1 << 20) / seconds,
                    percentile(c, 0.50), percentile(c, 0.99), percentile(c, 1.0), percentile(w, 0.50),
                    percentile(w, 0.99));
            System.out.flush();
        }
        System.out.println("DONE");
        System.exit(0);
    }
}
