// A classic-protocol consumer with `client.rack` and the range assignor, for
// tests/integration/test_racks.py.
//
// A single-file program for Java's source launcher (no build step):
//   java -cp 'tests/.deps/kafka-libs/*' tests/java/RackConsumer.java BOOTSTRAP GROUP TOPIC RACK
// With `client.rack` set, the Java client's RangeAssignor is rack-aware (KIP-881): it matches
// consumers with partitions that have a replica in their rack, from the brokers' racks in the
// Metadata answer. Prints one line per event, fields separated by single spaces:
//   "ASSIGNED p,p,..." after every assignment change (partition numbers, sorted),
//   "REC partition offset" for each record read,
//   "ERROR <exception class>" when poll fails, then exits with status 2.
// Runs until killed (SIGTERM closes the consumer, leaving the group).

import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Properties;
import java.util.TreeSet;
import java.util.stream.Collectors;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

public class RackConsumer {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, args[1]);
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
        p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, RangeAssignor.class.getName());
        p.put(ConsumerConfig.CLIENT_RACK_CONFIG, args[3]);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p);
        Thread main = Thread.currentThread();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            consumer.wakeup();
            try {
                main.join(10_000);
            } catch (InterruptedException e) {
                // exiting anyway
            }
        }));
        TreeSet<Integer> owned = new TreeSet<>();
        consumer.subscribe(List.of(args[2]), new ConsumerRebalanceListener() {
            public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                parts.forEach(tp -> owned.remove(tp.partition()));
            }

            public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                parts.forEach(tp -> owned.add(tp.partition()));
                System.out.println("ASSIGNED " + owned.stream().map(String::valueOf).collect(Collectors.joining(",")));
            }
        });
        try {
            while (true) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                    System.out.println("REC " + r.partition() + " " + r.offset());
                }
                System.out.flush();
            }
        } catch (org.apache.kafka.common.errors.WakeupException e) {
            consumer.close(Duration.ofSeconds(5));
        } catch (Exception e) {
            System.out.println("ERROR " + e.getClass().getName());
            System.out.flush();
            System.exit(2);
        }
    }
}
