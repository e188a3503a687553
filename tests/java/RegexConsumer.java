// A KIP-848 consumer subscribed by a broker-side regular expression, for
// tests/integration/test_regex_subscriptions.py.
//
// A single-file program for Java's source launcher (no build step):
//   java -cp 'tests/.deps/kafka-libs/*' tests/java/RegexConsumer.java BOOTSTRAP GROUP REGEX
// Subscribes with `subscribe(SubscriptionPattern)` and group.protocol=consumer: the client
// sends REGEX to the broker (ConsumerGroupHeartbeat SubscribedTopicRegex), which resolves it
// against its topics. Prints one line per event, fields separated by single spaces:
//   "ASSIGNED t-p,t-p,..." after every assignment change (sorted),
//   "REC topic partition offset value" for each record read,
//   "ERROR <exception class>" when poll fails, then exits with status 2.
// Runs until killed (SIGTERM closes the consumer, leaving the group).

import java.time.Duration;
import java.util.Collection;
import java.util.Properties;
import java.util.TreeSet;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.SubscriptionPattern;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

public class RegexConsumer {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, args[1]);
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
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
        TreeSet<String> owned = new TreeSet<>();
        consumer.subscribe(new SubscriptionPattern(args[2]), new ConsumerRebalanceListener() {
            public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                parts.forEach(tp -> owned.remove(tp.toString()));
                System.out.println("ASSIGNED " + String.join(",", owned));
            }

            public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                parts.forEach(tp -> owned.add(tp.toString()));
                System.out.println("ASSIGNED " + String.join(",", owned));
            }
        });
        try {
            while (true) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                    if (!r.topic().startsWith("__")) {
                        System.out.println("REC " + r.topic() + " " + r.partition() + " " + r.offset() + " " + r.value());
                    }
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
