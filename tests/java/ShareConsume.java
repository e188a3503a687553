// A KafkaShareConsumer (KIP-932) for tests/integration/test_share_groups.py.
//
//   java -cp 'tests/.deps/kafka-libs/*' ShareConsume BOOTSTRAP GROUP TOPIC MODE [ARG]
// MODE says what it does with each record it gets:
//   implicit      acknowledged by the next poll (share.acknowledgement.mode=implicit)
//   accept [MS]   explicit ACCEPT of each record, commitSync after each poll (MS: sleep that
//                 long first, as if processing them)
//   reject        explicit REJECT of each record
//   release       explicit RELEASE of each record
//   hold          never acknowledged, never polled again after the first records (the test
//                 kills it: its records are delivered again once their locks expire)
//   renew MS      RENEW each record on every poll (about one a second) until MS milliseconds
//                 after it was first got, then ACCEPT it; a renewed record, which the next
//                 poll returns again, is printed once
// Prints one line per event, fields separated by single spaces:
//   "READY" after the first poll returned,
//   "REC partition offset deliveryCount value" for each record got,
//   "ACKED" after a commitSync that reported no error,
//   "RENEWED" for each renewal asked for,
//   "ERROR <exception class> <message>" when a poll or commit fails (then exits with status 2).
// Runs until killed (SIGTERM closes the consumer, leaving the group).

import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.StringDeserializer;

public class ShareConsume {
    public static void main(String[] args) throws Exception {
        String mode = args[3];
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, args[1]);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.SHARE_ACKNOWLEDGEMENT_MODE_CONFIG, mode.equals("implicit") ? "implicit" : "explicit");
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "50");
        KafkaShareConsumer<String, String> consumer = new KafkaShareConsumer<>(p);
        Thread main = Thread.currentThread();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            consumer.wakeup();
            try {
                main.join(10_000);
            } catch (InterruptedException e) {
                // exiting anyway
            }
        }));
        consumer.subscribe(List.of(args[2]));
        boolean ready = false;
        boolean held = false;
        Map<Long, Long> renewUntil = new HashMap<>();
        try {
            while (true) {
                if (mode.equals("hold") && held) {
                    Thread.sleep(1000);
                    continue;
                }
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(500));
                if (!ready) {
                    System.out.println("READY");
                    ready = true;
                }
                for (ConsumerRecord<String, String> r : records) {
                    if (mode.equals("renew")) {
                        if (renewUntil.containsKey(r.offset())) {
                            continue;  // got again after a renewal
                        }
                        renewUntil.put(r.offset(), System.currentTimeMillis() + Long.parseLong(args[4]));
                    }
                    System.out.println("REC " + r.partition() + " " + r.offset() + " "
                        + r.deliveryCount().orElse((short) -1) + " " + r.value());
                }
                System.out.flush();
                if (records.isEmpty()) {
                    continue;
                }
                switch (mode) {
                    case "implicit":
                        break;
                    case "hold":
                        held = true;
                        break;
                    case "renew":
                        // Renewed records come back from the next poll; each is renewed
                        // until ARG ms after it was first got, then accepted.
                        boolean accepted = false;
                        for (ConsumerRecord<String, String> r : records) {
                            if (System.currentTimeMillis() < renewUntil.get(r.offset())) {
                                consumer.acknowledge(r, AcknowledgeType.RENEW);
                                System.out.println("RENEWED");
                            } else {
                                consumer.acknowledge(r, AcknowledgeType.ACCEPT);
                                accepted = true;
                            }
                        }
                        if (accepted) {
                            commit(consumer);
                        }
                        System.out.flush();
                        Thread.sleep(1000);
                        break;
                    default:
                        if (args.length > 4) {
                            Thread.sleep(Long.parseLong(args[4]));  // processing time
                        }
                        AcknowledgeType t = AcknowledgeType.valueOf(mode.toUpperCase());
                        for (ConsumerRecord<String, String> r : records) {
                            consumer.acknowledge(r, t);
                        }
                        commit(consumer);
                }
            }
        } catch (WakeupException e) {
            // closing
        } catch (Exception e) {
            System.out.println("ERROR " + e.getClass().getName() + " " + e.getMessage());
            System.out.flush();
            consumer.close();
            System.exit(2);
        }
        consumer.close();
    }

    private static void commit(KafkaShareConsumer<String, String> consumer) {
        Map<TopicIdPartition, Optional<KafkaException>> result = consumer.commitSync();
        for (Map.Entry<TopicIdPartition, Optional<KafkaException>> e : result.entrySet()) {
            if (e.getValue().isPresent()) {
                throw e.getValue().get();
            }
        }
        System.out.println("ACKED");
        System.out.flush();
    }
}
