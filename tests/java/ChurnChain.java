// A chain of consumer groups under membership churn, for bench/churn-compare and
// tests/integration/test_group_churn.py.
//
//   java -cp 'tests/.deps/kafka-libs/*' tests/java/ChurnChain.java BOOTSTRAP VARIANT PREFIX RECORDS
//        STAGES PARTITIONS MAX_MEMBERS POLL_PAUSE_MS TIMEOUT_S
//
// Topics PREFIX-0 .. PREFIX-STAGES (PARTITIONS each) are created. Group PREFIX-g<s> consumes
// PREFIX-<s> and produces every record on to PREFIX-<s+1> (same key and value; acks=all,
// idempotent); it commits its offsets after the producer's flush (at least once) after each poll
// and when partitions are revoked. A reader assigned every partition of the last topic counts
// what comes out of the chain.
//
// VARIANT: eager (classic protocol, RangeAssignor), cooperative (classic, CooperativeStickyAssignor),
// static (classic, RangeAssignor, group.instance.id; members leave with
// CloseOptions.GroupMembershipOperation.LEAVE_GROUP), consumer-uniform / consumer-range
// (group.protocol=consumer, group.remote.assignor uniform / range).
//
// RECORDS records are produced to PREFIX-0 (that instant is t0); every group starts with one
// member, then the churn: once it is stable, one member is added to every group at a time
// up to MAX_MEMBERS, then removed one at a time down to one; after each step the program waits
// until every group is stable again (its live members' assignments cover every partition of
// its input once, each member has one, the shares differ by at most one, and a member that left
// has closed: until then the partitions it holds are its own) and prints how long
// that took. Members pause POLL_PAUSE_MS after each poll that returned records (so the churn
// happens while the chain consumes). Finally it waits until the reader has every key.
//
// Output lines: "START", "STABLE <step> <join|leave> <members> <ms>" (ms from the change to
// stable), "DRAINED <ms since t0>", "RESULT variant=.. records=.. distinct=.. read=..
// stable_ms=<sum of the steps> stable_max_ms=.. drain_ms=..", "DONE"; "ERROR <text>" and exit 1
// if TIMEOUT_S passes first.

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class ChurnChain {
    static void out(String line) {
        synchronized (System.out) {
            System.out.println(line);
            System.out.flush();
        }
    }

    static String bootstrap, variant, prefix;
    static int partitions;
    static long pollPauseMs;
    static final AtomicBoolean failed = new AtomicBoolean();

    static Properties producerProps() {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("acks", "all");
        p.put("linger.ms", "5");
        return p;
    }

    /** One member of one stage's group, on a thread of its own. */
    static final class Member implements Runnable {
        final int stage, index;
        final KafkaProducer<String, String> producer;
        final Set<TopicPartition> owned = ConcurrentHashMap.newKeySet();
        final AtomicBoolean stop = new AtomicBoolean();
        final Thread thread;
        volatile boolean closed;
        KafkaConsumer<String, String> consumer;

        Member(int stage, int index, KafkaProducer<String, String> producer) {
            this.stage = stage;
            this.index = index;
            this.producer = producer;
            this.thread = new Thread(this, "member-" + stage + "-" + index);
        }

        Properties props() {
            Properties p = new Properties();
            p.put("bootstrap.servers", bootstrap);
            p.put("group.id", prefix + "-g" + stage);
            p.put("enable.auto.commit", "false");
            p.put("auto.offset.reset", "earliest");
            p.put("max.poll.records", "500");
            switch (variant) {
                case "eager":
                    p.put("partition.assignment.strategy", "org.apache.kafka.clients.consumer.RangeAssignor");
                    break;
                case "cooperative":
                    p.put("partition.assignment.strategy", "org.apache.kafka.clients.consumer.CooperativeStickyAssignor");
                    break;
                case "static":
                    p.put("partition.assignment.strategy", "org.apache.kafka.clients.consumer.RangeAssignor");
                    p.put("group.instance.id", prefix + "-g" + stage + "-m" + index);
                    break;
                case "consumer-uniform":
                case "consumer-range":
                    p.put("group.protocol", "consumer");
                    p.put("group.remote.assignor", variant.substring("consumer-".length()));
                    break;
                default:
                    throw new IllegalArgumentException("unknown variant " + variant);
            }
            if (!variant.startsWith("consumer-")) {
                p.put("session.timeout.ms", "10000");
                p.put("heartbeat.interval.ms", "1000");
            }
            return p;
        }

        void commit(Map<TopicPartition, OffsetAndMetadata> offsets) {
            if (offsets.isEmpty()) return;
            producer.flush();
            try {
                consumer.commitSync(offsets);
            } catch (RuntimeException e) {
                // A rebalance took the partitions: the next owner reads them again (at least once).
            }
            offsets.clear();
        }

        public void run() {
            Map<TopicPartition, OffsetAndMetadata> pending = new HashMap<>();
            String next = prefix + "-" + (stage + 1);
            try {
                consumer = new KafkaConsumer<>(props(), new StringDeserializer(), new StringDeserializer());
                consumer.subscribe(List.of(prefix + "-" + stage), new ConsumerRebalanceListener() {
                    public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                        commit(pending);
                        owned.removeAll(parts);
                    }

                    public void onPartitionsLost(Collection<TopicPartition> parts) {
                        pending.clear();
                        owned.removeAll(parts);
                    }

                    public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                        owned.addAll(parts);
                    }
                });
                while (!stop.get()) {
                    ConsumerRecords<String, String> recs;
                    try {
                        recs = consumer.poll(Duration.ofMillis(100));
                    } catch (WakeupException e) {
                        break;
                    }
                    for (ConsumerRecord<String, String> r : recs) {
                        producer.send(new ProducerRecord<>(next, r.key(), r.value()));
                        pending.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                    }
                    commit(pending);
                    if (!recs.isEmpty() && pollPauseMs > 0) Thread.sleep(pollPauseMs);
                }
                commit(pending);
                // close() revokes (onPartitionsRevoked) and leaves the group: what this member
                // holds is its own until then.
                if (variant.equals("static")) {
                    consumer.close(CloseOptions.groupMembershipOperation(CloseOptions.GroupMembershipOperation.LEAVE_GROUP));
                } else {
                    consumer.close();
                }
            } catch (Throwable e) {
                out("ERROR member " + stage + "/" + index + " " + e);
                failed.set(true);
            } finally {
                owned.clear();
                closed = true;
            }
        }
    }

    /** The group's live members own every partition once, each at least one, shares within
     *  one of each other; and every member of {@code leaving} has closed: until it has, the
     *  partitions it still holds count as its own (not yet handed over). */
    static boolean stable(List<Member> members, List<Member> leaving) {
        for (Member m : leaving) if (!m.closed) return false;
        int[] counts = new int[partitions];
        int min = Integer.MAX_VALUE, max = 0;
        for (Member m : members) {
            Set<TopicPartition> own = new HashSet<>(m.owned);
            for (TopicPartition tp : own) counts[tp.partition()]++;
            min = Math.min(min, own.size());
            max = Math.max(max, own.size());
        }
        for (int c : counts) if (c != 1) return false;
        return min >= 1 && max - min <= 1;
    }

    static boolean allStable(List<List<Member>> groups, List<List<Member>> leaving) {
        for (int s = 0; s < groups.size(); s++) {
            if (!stable(groups.get(s), leaving.get(s))) return false;
        }
        return true;
    }

    public static void main(String[] a) throws Exception {
        bootstrap = a[0];
        variant = a[1];
        prefix = a[2];
        int records = Integer.parseInt(a[3]);
        int stages = Integer.parseInt(a[4]);
        partitions = Integer.parseInt(a[5]);
        int maxMembers = Integer.parseInt(a[6]);
        pollPauseMs = Long.parseLong(a[7]);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(Long.parseLong(a[8]));
        out("START");

        try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
            List<NewTopic> topics = new ArrayList<>();
            for (int s = 0; s <= stages; s++) topics.add(new NewTopic(prefix + "-" + s, partitions, (short) 1));
            admin.createTopics(topics).all().get(60, TimeUnit.SECONDS);
        }

        // The reader of the chain's end.
        Set<String> seen = ConcurrentHashMap.newKeySet();
        AtomicLong read = new AtomicLong();
        AtomicBoolean readerStop = new AtomicBoolean();
        Thread reader = new Thread(() -> {
            Properties p = new Properties();
            p.put("bootstrap.servers", bootstrap);
            p.put("auto.offset.reset", "earliest");
            try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p, new StringDeserializer(), new StringDeserializer())) {
                List<TopicPartition> tps = new ArrayList<>();
                for (int i = 0; i < partitions; i++) tps.add(new TopicPartition(prefix + "-" + stages, i));
                c.assign(tps);
                c.seekToBeginning(tps);
                while (!readerStop.get()) {
                    for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(100))) {
                        seen.add(r.value());
                        read.incrementAndGet();
                    }
                }
            } catch (Throwable e) {
                out("ERROR reader " + e);
                failed.set(true);
            }
        }, "reader");
        reader.start();

        List<KafkaProducer<String, String>> producers = new ArrayList<>();
        List<List<Member>> groups = new ArrayList<>();
        int[] nextIndex = new int[stages];
        for (int s = 0; s < stages; s++) {
            producers.add(new KafkaProducer<>(producerProps(), new StringSerializer(), new StringSerializer()));
            groups.add(new ArrayList<>());
        }
        int code = 0;
        try {
            long stableTotal = 0, stableMax = 0;
            int step = 0;
            // The records are produced before the first member of each group joins, so that every
            // counted step begins right after the previous one became stable, whatever the
            // broker's produce time (a step's length depends on when it begins in the members'
            // heartbeat intervals).
            long t0;
            try (KafkaProducer<String, String> p = new KafkaProducer<>(producerProps(), new StringSerializer(), new StringSerializer())) {
                t0 = System.nanoTime();
                for (int i = 0; i < records; i++) {
                    String k = Integer.toString(i);
                    p.send(new ProducerRecord<>(prefix + "-0", k, k));
                }
                p.flush();
            }
            out("PRODUCED " + records + " " + TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0));
            List<String> plan = new ArrayList<>();
            plan.add("join");
            for (int m = 1; m < maxMembers; m++) plan.add("join");
            for (int m = 1; m < maxMembers; m++) plan.add("leave");
            for (String change : plan) {
                long began = System.nanoTime();
                List<List<Member>> leaving = new ArrayList<>(); // this step's leavers, per group
                for (int s = 0; s < stages; s++) {
                    List<Member> g = groups.get(s);
                    leaving.add(new ArrayList<>());
                    if (change.equals("join")) {
                        Member m = new Member(s, nextIndex[s]++, producers.get(s));
                        g.add(m);
                        m.thread.start();
                    } else {
                        Member m = g.remove(0); // the oldest member leaves
                        m.stop.set(true);
                        leaving.get(s).add(m);
                    }
                }
                while (!allStable(groups, leaving)) {
                    if (failed.get() || System.nanoTime() > deadline) {
                        throw new IllegalStateException("not stable after step " + step + " (" + change + ")");
                    }
                    Thread.sleep(5);
                }
                long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - began);
                if (step > 0) {
                    stableTotal += ms;
                    stableMax = Math.max(stableMax, ms);
                }
                int members = groups.get(0).size();
                out("STABLE " + step + " " + change + " " + members + " " + ms);
                step++;
            }
            while (seen.size() < records) {
                if (failed.get() || System.nanoTime() > deadline) {
                    throw new IllegalStateException("drained " + seen.size() + " of " + records);
                }
                Thread.sleep(5);
            }
            long drainMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
            out("DRAINED " + drainMs);
            Thread.sleep(500); // duplicates still on the way show in read=
            out("RESULT variant=" + variant + " records=" + records + " distinct=" + seen.size() + " read=" + read.get()
                    + " stable_ms=" + stableTotal + " stable_max_ms=" + stableMax + " drain_ms=" + drainMs);
        } catch (Exception e) {
            out("ERROR " + e.getMessage() + " seen=" + seen.size());
            code = 1;
        }
        for (List<Member> g : groups) for (Member m : g) m.stop.set(true);
        for (List<Member> g : groups) for (Member m : g) m.thread.join(30000);
        readerStop.set(true);
        reader.join(10000);
        for (KafkaProducer<String, String> p : producers) p.close(Duration.ofSeconds(10));
        if (code == 0) out("DONE");
        System.exit(code);
    }
}
