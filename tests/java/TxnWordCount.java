// A Kafka Streams word count with processing.guarantee=exactly_once_v2, for
// tests/integration/test_transactions.py.
//
//   java -cp 'tests/.deps/kafka-libs/*' tests/java/TxnWordCount.java BOOTSTRAP IN OUT APP_ID STATE_DIR
//
// Splits each value of IN on spaces, counts words (a repartition topic and a changelog-backed
// store, both created by Streams), and writes word -> count (String key, Long value) to OUT.
// Prints "STATE <new state>" at every state change ("STATE RUNNING" once it processes) and
// exits 0 on SIGTERM after closing the application (or 1 if Streams dies).

import java.time.Duration;
import java.util.Arrays;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Produced;

public class TxnWordCount {
    public static void main(String[] a) throws Exception {
        String bootstrap = a[0], in = a[1], out = a[2], appId = a[3], stateDir = a[4];
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        p.put(StreamsConfig.consumerPrefix("session.timeout.ms"), 10000);
        p.put(StreamsConfig.consumerPrefix("heartbeat.interval.ms"), 1000);
        p.put(StreamsConfig.producerPrefix("transaction.timeout.ms"), 20000);

        StreamsBuilder b = new StreamsBuilder();
        b.stream(in, Consumed.with(Serdes.String(), Serdes.String()))
            .flatMapValues(v -> Arrays.asList(v.trim().split(" +")))
            .map((k, word) -> KeyValue.pair(word, word))
            .groupByKey(Grouped.with("words", Serdes.String(), Serdes.String()))
            .count()
            .toStream()
            .to(out, Produced.with(Serdes.String(), Serdes.Long()));

        KafkaStreams streams = new KafkaStreams(b.build(), p);
        CountDownLatch stopped = new CountDownLatch(1);
        int[] rc = {0};
        streams.setStateListener((next, prev) -> {
            System.out.println("STATE " + next);
            System.out.flush();
            if (next == KafkaStreams.State.ERROR) {
                rc[0] = 1;
                stopped.countDown();
            }
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(Duration.ofSeconds(20));
            stopped.countDown();
        }));
        streams.start();
        stopped.await();
        streams.close(Duration.ofSeconds(20));
        System.exit(rc[0]);
    }
}
