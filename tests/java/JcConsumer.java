import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BooleanSupplier;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RebalanceInProgressException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * KafkaConsumer against a broker, for tests/java_client/test_consumer.py.
 *
 * Usage: JcConsumer bootstrap name-prefix
 *
 * One JSON line per check (see JcOut):
 *   assign_seek        assign + seek / seekToBeginning / seekToEnd, position, beginning and end
 *                      offsets, offsetsForTimes, a seek past the end with auto.offset.reset=none
 *   commits            commitSync (all positions, and given offsets with metadata), commitAsync
 *                      with a callback, committed(), position(), and a second consumer of the
 *                      group resuming from the committed offsets
 *   group_range        two consumers, classic protocol, RangeAssignor: A alone, B joins, new
 *                      records each reach exactly one owner, B leaves and A gets everything back
 *   group_cooperative  the same with CooperativeStickyAssignor: A gives up only what B gets
 *   group_static       static membership (group.instance.id): a member restarted within its
 *                      session timeout gets its partitions back with no rebalance of the other
 *   read_committed     isolation.level=read_committed against a Java transactional producer
 *                      (committed, aborted, non-transactional and open transactions)
 *
 * Group members poll on threads of their own (Member, also used by JcConsumerProtocol for
 * group.protocol=consumer) and commitSync after every poll that returned records and on
 * revocation; a check waits for a condition on what the members saw, at most WAIT_MS.
 */
public final class JcConsumer {
    static final long BASE = 1_700_000_000_000L;
    static final long WAIT_MS = 30_000;

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String prefix = args[1];
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(ap)) {
            String seekTopic = prefix + "-seek";
            create(admin, seekTopic, 3);
            try (KafkaProducer<String, String> p = producer(bootstrap, Map.of())) {
                for (int part = 0; part < 3; part++) {
                    for (int i = 0; i < 10; i++) {
                        p.send(new ProducerRecord<>(seekTopic, part, BASE + i * 1000L, "k" + i, part + "-" + i));
                    }
                }
                p.flush();
            }
            JcOut.run("assign_seek", () -> assignSeek(bootstrap, seekTopic));
            JcOut.run("commits", () -> commits(bootstrap, seekTopic, prefix + "-commits"));
            JcOut.run("group_range", () -> twoMembers(admin, bootstrap, prefix + "-range",
                    "org.apache.kafka.clients.consumer.RangeAssignor"));
            JcOut.run("group_cooperative", () -> twoMembers(admin, bootstrap, prefix + "-coop",
                    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"));
            JcOut.run("group_static", () -> staticMembers(admin, bootstrap, prefix + "-static"));
            JcOut.run("read_committed", () -> readCommitted(admin, bootstrap, prefix + "-txn"));
        }
        JcOut.emit(JcOut.map("check", "done", "ok", true));
    }

    // ------------------------------------------------------------------ helpers
    static void create(Admin admin, String topic, int partitions) throws Exception {
        admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all().get();
    }

    static KafkaProducer<String, String> producer(String bootstrap, Map<String, String> extra) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.putAll(extra);
        return new KafkaProducer<>(p);
    }

    static KafkaConsumer<String, String> consumer(String bootstrap, Map<String, String> extra) {
        Properties c = new Properties();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        c.putAll(extra);
        return new KafkaConsumer<>(c);
    }

    static List<TopicPartition> partitions(String topic, int n) {
        List<TopicPartition> out = new ArrayList<>();
        for (int p = 0; p < n; p++) {
            out.add(new TopicPartition(topic, p));
        }
        return out;
    }

    static Map<String, Object> byPartition(Map<TopicPartition, ?> m) {
        Map<String, Object> out = new TreeMap<>();
        for (Map.Entry<TopicPartition, ?> e : m.entrySet()) {
            Object v = e.getValue();
            if (v instanceof OffsetAndMetadata) {
                v = JcOut.map("offset", ((OffsetAndMetadata) v).offset(), "metadata", ((OffsetAndMetadata) v).metadata());
            } else if (v instanceof OffsetAndTimestamp) {
                v = JcOut.map("offset", ((OffsetAndTimestamp) v).offset(), "timestamp", ((OffsetAndTimestamp) v).timestamp());
            }
            out.put(String.valueOf(e.getKey().partition()), v);
        }
        return out;
    }

    static List<Integer> sorted(Collection<TopicPartition> tps) {
        List<Integer> out = new ArrayList<>();
        for (TopicPartition tp : tps) {
            out.add(tp.partition());
        }
        Collections.sort(out);
        return out;
    }

    static boolean waitFor(BooleanSupplier condition) throws InterruptedException {
        long deadline = System.currentTimeMillis() + WAIT_MS;
        while (!condition.getAsBoolean()) {
            if (System.currentTimeMillis() > deadline) {
                return false;
            }
            Thread.sleep(50);
        }
        return true;
    }

    /** Poll ``consumer`` until ``count`` records came or WAIT_MS passed. */
    static List<ConsumerRecord<String, String>> pollFor(KafkaConsumer<String, String> consumer, int count) {
        List<ConsumerRecord<String, String>> out = new ArrayList<>();
        long deadline = System.currentTimeMillis() + WAIT_MS;
        while (out.size() < count && System.currentTimeMillis() < deadline) {
            consumer.poll(Duration.ofMillis(100)).forEach(out::add);
        }
        return out;
    }

    // ------------------------------------------------------------------ assign + seek
    static Map<String, Object> assignSeek(String bootstrap, String topic) throws Exception {
        Map<String, Object> out = new HashMap<>();
        List<TopicPartition> tps = partitions(topic, 3);
        TopicPartition p0 = tps.get(0), p1 = tps.get(1), p2 = tps.get(2);
        try (KafkaConsumer<String, String> c = consumer(bootstrap, Map.of())) {
            c.assign(tps);
            out.put("assignment", sorted(c.assignment()));
            out.put("beginning", byPartition(c.beginningOffsets(tps)));
            out.put("end", byPartition(c.endOffsets(tps)));
            c.seek(p0, 5);
            c.seekToEnd(List.of(p1));
            c.seekToBeginning(List.of(p2));
            out.put("positions_before_poll", JcOut.map("0", c.position(p0), "1", c.position(p1), "2", c.position(p2)));
            Map<String, List<Long>> offsets = new TreeMap<>();
            for (ConsumerRecord<String, String> r : pollFor(c, 15)) {
                offsets.computeIfAbsent(String.valueOf(r.partition()), k -> new ArrayList<>()).add(r.offset());
            }
            out.put("polled_offsets", offsets);
            Map<TopicPartition, OffsetAndTimestamp> times = c.offsetsForTimes(Map.of(
                    p0, BASE + 3500, p1, BASE, p2, BASE + 10_000_000));
            out.put("offsets_for_times", byPartition(times));
            c.seek(p0, times.get(p0).offset());
            c.pause(List.of(p1, p2));
            List<ConsumerRecord<String, String>> after = pollFor(c, 1);
            out.put("after_time_seek", after.isEmpty() ? null
                    : JcOut.map("offset", after.get(0).offset(), "timestamp", after.get(0).timestamp(),
                                "value", after.get(0).value()));
        }
        try (KafkaConsumer<String, String> c = consumer(bootstrap,
                Map.of(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "none"))) {
            c.assign(List.of(p0));
            c.seek(p0, 50);
            AtomicReference<String> error = new AtomicReference<>("none");
            long deadline = System.currentTimeMillis() + 10_000;
            while (error.get().equals("none") && System.currentTimeMillis() < deadline) {
                error.set(JcOut.thrown(() -> c.poll(Duration.ofMillis(200))));
            }
            out.put("past_end_reset_none", error.get());
        }
        return out;
    }

    // ------------------------------------------------------------------ commits
    static Map<String, Object> commits(String bootstrap, String topic, String group) throws Exception {
        Map<String, Object> out = new HashMap<>();
        List<TopicPartition> tps = partitions(topic, 3);
        Set<TopicPartition> all = new HashSet<>(tps);
        Map<String, String> cfg = Map.of(ConsumerConfig.GROUP_ID_CONFIG, group);
        try (KafkaConsumer<String, String> c = consumer(bootstrap, cfg)) {
            out.put("committed_new_group", byPartition(c.committed(all)));
            c.subscribe(List.of(topic));
            out.put("first_read", pollFor(c, 30).size());
            out.put("positions", JcOut.map("0", c.position(tps.get(0)), "1", c.position(tps.get(1)),
                                           "2", c.position(tps.get(2))));
            c.commitSync();
            out.put("after_commit_sync_all", byPartition(c.committed(all)));
            c.commitSync(Map.of(tps.get(0), new OffsetAndMetadata(4, "m4")));
            AtomicReference<String> callback = new AtomicReference<>();
            c.commitAsync(Map.of(tps.get(1), new OffsetAndMetadata(6, "m6")),
                    (offsets, e) -> callback.set(e == null ? "ok " + byPartition(offsets) : JcOut.describe(e)));
            long deadline = System.currentTimeMillis() + 10_000;
            while (callback.get() == null && System.currentTimeMillis() < deadline) {
                c.poll(Duration.ofMillis(50));          // callbacks run inside poll
            }
            out.put("commit_async_callback", callback.get());
            out.put("after_commits", byPartition(c.committed(all)));
        }
        try (KafkaConsumer<String, String> c = consumer(bootstrap, cfg)) {
            c.subscribe(List.of(topic));
            Map<String, List<Long>> offsets = new TreeMap<>();
            for (ConsumerRecord<String, String> r : pollFor(c, 10)) {
                offsets.computeIfAbsent(String.valueOf(r.partition()), k -> new ArrayList<>()).add(r.offset());
            }
            out.put("resumed_offsets", offsets);
            out.put("resumed_positions", JcOut.map("0", c.position(tps.get(0)), "1", c.position(tps.get(1)),
                                                   "2", c.position(tps.get(2))));
        }
        return out;
    }

    // ------------------------------------------------------------------ groups
    /** A group member polling on its own thread; it records its assignment changes and records. */
    static final class Member implements Runnable {
        final String name;
        final KafkaConsumer<String, String> consumer;
        final Set<TopicPartition> owned = ConcurrentHashMap.newKeySet();
        final List<Object> events = new CopyOnWriteArrayList<>();
        final List<ConsumerRecord<String, String>> records = new CopyOnWriteArrayList<>();
        final Thread thread;
        volatile boolean running = true;
        volatile int generation = -1;
        volatile String error;

        Member(String bootstrap, String name, String group, String topic, Map<String, String> extra) {
            this.name = name;
            Map<String, String> cfg = new HashMap<>(extra);
            cfg.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            cfg.put(ConsumerConfig.CLIENT_ID_CONFIG, name);
            // group.protocol=consumer (KIP-848): the broker sets the heartbeat interval and the
            // session timeout, and the client refuses both keys
            boolean classic = !"consumer".equals(cfg.get(ConsumerConfig.GROUP_PROTOCOL_CONFIG));
            if (classic) {
                cfg.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "300");
                cfg.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
            }
            this.consumer = consumer(bootstrap, cfg);
            this.consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> tps) {
                    if (!tps.isEmpty()) {
                        events.add(List.of("revoked", sorted(tps)));
                        commit("on_revoke");        // as applications do: the next owner starts here
                    }
                    owned.removeAll(tps);
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> tps) {
                    // a KIP-848 member is called with nothing new at every reconciliation
                    if (classic || !tps.isEmpty()) {
                        events.add(List.of("assigned", sorted(tps)));
                    }
                    owned.addAll(tps);
                }

                @Override
                public void onPartitionsLost(Collection<TopicPartition> tps) {
                    events.add(List.of("lost", sorted(tps)));
                    owned.removeAll(tps);
                }
            });
            thread = new Thread(this, name);
            thread.start();
        }

        @Override
        public void run() {
            try {
                while (running) {
                    var polled = consumer.poll(Duration.ofMillis(100));
                    polled.forEach(records::add);
                    if (!polled.isEmpty()) {
                        commit("after_poll");       // what it read is never read again by the group
                    }
                    generation = consumer.groupMetadata().generationId();
                }
            } catch (Exception e) {
                error = JcOut.describe(e);
            } finally {
                consumer.close(Duration.ofSeconds(5));
            }
        }

        /** commitSync of the positions; a commit refused because a rebalance is under way (the
         *  client says so while it rejoins, cooperative rounds included) is left to the next one. */
        void commit(String when) {
            try {
                consumer.commitSync();
            } catch (RebalanceInProgressException e) {
                events.add(List.of("commit_deferred", when));
            }
        }

        void stop() throws InterruptedException {
            running = false;
            thread.join(15_000);
        }

        List<Integer> owns() {
            return sorted(owned);
        }

        Map<String, Object> report() {
            Map<String, List<Long>> offsets = new TreeMap<>();
            for (ConsumerRecord<String, String> r : records) {
                offsets.computeIfAbsent(String.valueOf(r.partition()), k -> new ArrayList<>()).add(r.offset());
            }
            return JcOut.map("owns", owns(), "events", new ArrayList<>(events), "generation", generation,
                             "records", offsets, "error", error);
        }
    }

    static boolean covers(Member a, Member b, int partitions) {
        Set<Integer> union = new TreeSet<>(a.owns());
        union.addAll(b.owns());
        Set<Integer> both = new HashSet<>(a.owns());
        both.retainAll(b.owns());
        return !a.owned.isEmpty() && !b.owned.isEmpty() && union.size() == partitions && both.isEmpty();
    }

    static void produce(String bootstrap, String topic, int partitions, int perPartition, String label) {
        try (KafkaProducer<String, String> p = producer(bootstrap, Map.of())) {
            for (int part = 0; part < partitions; part++) {
                for (int i = 0; i < perPartition; i++) {
                    p.send(new ProducerRecord<>(topic, part, "k", label + "-" + part + "-" + i));
                }
            }
            p.flush();
        }
    }

    static int total(Member... members) {
        int n = 0;
        for (Member m : members) {
            n += m.records.size();
        }
        return n;
    }

    static Map<String, Object> twoMembers(Admin admin, String bootstrap, String name, String assignor) throws Exception {
        String topic = name;
        create(admin, topic, 4);
        produce(bootstrap, topic, 4, 5, "before");
        Map<String, String> cfg = Map.of(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, assignor);
        Map<String, Object> out = new HashMap<>();
        Member a = new Member(bootstrap, "a", name, topic, cfg);
        Member b = null;
        try {
            out.put("a_alone", waitFor(() -> a.owned.size() == 4 && a.records.size() == 20));
            out.put("a_alone_owns", a.owns());
            long joined = System.nanoTime();
            b = new Member(bootstrap, "b", name, topic, cfg);
            Member bb = b;
            out.put("shared", waitFor(() -> covers(a, bb, 4)));
            out.put("rebalance_ms", (System.nanoTime() - joined) / 1_000_000);
            out.put("group_description", describe(admin, name));
            produce(bootstrap, topic, 4, 10, "after");
            waitFor(() -> total(a, bb) >= 60);
            Thread.sleep(300);                  // room for a duplicate to show up
            out.put("total_records", total(a, bb));
            out.put("a_after_join", a.report());
            out.put("b_after_join", b.report());
            b.stop();
            out.put("a_regains_all", waitFor(() -> a.owned.size() == 4));
            out.put("a_final", a.report());
        } finally {
            if (b != null) {
                b.stop();
            }
            a.stop();
        }
        return out;
    }

    static Map<String, Object> describe(Admin admin, String group) throws Exception {
        List<Object> members = new ArrayList<>();
        var d = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
        for (MemberDescription m : d.members()) {
            members.add(JcOut.map("client_id", m.clientId(), "instance_id", m.groupInstanceId().orElse(null),
                                  "assignment", sorted(m.assignment().topicPartitions())));
        }
        members.sort((x, y) -> String.valueOf(((Map<?, ?>) x).get("client_id"))
                .compareTo(String.valueOf(((Map<?, ?>) y).get("client_id"))));
        return JcOut.map("state", String.valueOf(d.state()), "assignor", d.partitionAssignor(), "members", members);
    }

    static Map<String, Object> staticMembers(Admin admin, String bootstrap, String name) throws Exception {
        String topic = name;
        create(admin, topic, 4);
        Map<String, Object> out = new HashMap<>();
        Member a = new Member(bootstrap, "a", name, topic, Map.of(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, "instance-a"));
        Member b = new Member(bootstrap, "b", name, topic, Map.of(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, "instance-b"));
        Member a2 = null;
        try {
            out.put("stable", waitFor(() -> covers(a, b, 4)));
            Thread.sleep(1000);                 // let any second round settle before the restart
            out.put("group_description", describe(admin, name));
            List<Integer> aOwned = a.owns();
            int bEvents = b.events.size();
            int bGeneration = b.generation;
            out.put("a_owned", aOwned);
            out.put("b_generation_before", bGeneration);
            a.stop();                           // a static member's close() sends no LeaveGroup
            out.put("after_a_closed", describe(admin, name));
            long restarted = System.nanoTime();
            a2 = new Member(bootstrap, "a2", name, topic, Map.of(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, "instance-a"));
            Member a2f = a2;
            out.put("a2_assigned", waitFor(() -> !a2f.owned.isEmpty()));
            out.put("a2_rejoin_ms", (System.nanoTime() - restarted) / 1_000_000);
            Thread.sleep(1500);                 // several heartbeats of b: a rebalance would show
            out.put("a2", a2.report());
            out.put("b_events_during_restart", new ArrayList<>(b.events.subList(bEvents, b.events.size())));
            out.put("b_generation_after", b.generation);
            out.put("b", b.report());
            produce(bootstrap, topic, 4, 5, "after");
            waitFor(() -> total(a2f, b) >= 20);
            Thread.sleep(300);
            out.put("records_after_restart", total(a2f, b));
        } finally {
            if (a2 != null) {
                a2.stop();
            }
            a.stop();
            b.stop();
        }
        return out;
    }

    // ------------------------------------------------------------------ read_committed
    static List<String> readUntilEnd(KafkaConsumer<String, String> c, TopicPartition tp) {
        List<String> values = new ArrayList<>();
        long end = c.endOffsets(List.of(tp)).get(tp);
        long deadline = System.currentTimeMillis() + WAIT_MS;
        while (c.position(tp) < end && System.currentTimeMillis() < deadline) {
            c.poll(Duration.ofMillis(100)).forEach(r -> values.add(r.value()));
        }
        c.poll(Duration.ofMillis(300)).forEach(r -> values.add(r.value()));   // nothing past the end
        return values;
    }

    static Map<String, Object> readCommitted(Admin admin, String bootstrap, String topic) throws Exception {
        create(admin, topic, 1);
        TopicPartition tp = new TopicPartition(topic, 0);
        Map<String, Object> out = new HashMap<>();
        try (KafkaProducer<String, String> txn = producer(bootstrap,
                     Map.of(ProducerConfig.TRANSACTIONAL_ID_CONFIG, topic + "-tid"));
             KafkaProducer<String, String> plain = producer(bootstrap, Map.of())) {
            txn.initTransactions();
            String[][] steps = {{"c1", "commit"}, {"a2", "abort"}, {"plain", "none"}, {"c3", "commit"}, {"open", "open"}};
            for (String[] step : steps) {
                KafkaProducer<String, String> p = step[1].equals("none") ? plain : txn;
                if (p == txn) {
                    txn.beginTransaction();
                }
                for (int i = 0; i < 5; i++) {
                    p.send(new ProducerRecord<>(topic, 0, "k", step[0] + "-" + i));
                }
                p.flush();
                if (step[1].equals("commit")) {
                    txn.commitTransaction();
                } else if (step[1].equals("abort")) {
                    txn.abortTransaction();
                }
            }
            try (KafkaConsumer<String, String> committed = consumer(bootstrap,
                         Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed"));
                 KafkaConsumer<String, String> uncommitted = consumer(bootstrap,
                         Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_uncommitted"))) {
                committed.assign(List.of(tp));
                committed.seekToBeginning(List.of(tp));
                uncommitted.assign(List.of(tp));
                uncommitted.seekToBeginning(List.of(tp));
                out.put("committed_end_open", committed.endOffsets(List.of(tp)).get(tp));
                out.put("uncommitted_end_open", uncommitted.endOffsets(List.of(tp)).get(tp));
                out.put("committed_values_open", readUntilEnd(committed, tp));
                out.put("committed_position_open", committed.position(tp));
                out.put("uncommitted_values", readUntilEnd(uncommitted, tp));
                txn.commitTransaction();
                out.put("committed_end_after", committed.endOffsets(List.of(tp)).get(tp));
                out.put("committed_values_after", readUntilEnd(committed, tp));
            }
        }
        return out;
    }
}
