import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.admin.ShareGroupListing;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Share groups (KIP-932) from the Java client's KafkaShareConsumer (the 4.0 snapshot speaks the
 * share APIs' version 0), for tests/java_client/test_share_consumer.py.
 *
 * Usage: JcShareConsumer bootstrap name-prefix
 *
 * One JSON line per check (see JcOut):
 *   share_group        share.auto.offset.reset=earliest set on the group with Admin
 *                      incrementalAlterConfigs (resource type GROUP); three KafkaShareConsumers,
 *                      one per thread, subscribe to a 1-partition topic; once Admin
 *                      describeShareGroups shows the three members (and listShareGroups the
 *                      group), records are produced in bursts of 10: at least 300, and on until
 *                      each consumer has received some (a member counts in describe before its
 *                      first ShareFetch, and one fetch may acquire every record available), at
 *                      most 3000.  Each consumer polls (implicit acknowledgement) until every
 *                      value produced has been seen by one of them, a second more, then commits
 *                      and closes.
 *   share_release      explicit acknowledgement: a record acknowledged RELEASE comes back; one
 *                      acknowledged REJECT never does
 */
public final class JcShareConsumer {
    static final long WAIT_MS = 40_000;
    static final int CONSUMERS = 3;
    static final int TOTAL = 300;
    static final int MAX_TOTAL = 3_000;

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String prefix = args[1];
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(ap)) {
            JcOut.run("share_group", () -> shareGroup(admin, bootstrap, prefix + "-share"));
            JcOut.run("share_release", () -> shareRelease(admin, bootstrap, prefix + "-release"));
        }
    }

    // -- KIP-932 -----------------------------------------------------------------------------

    static KafkaShareConsumer<String, String> shareConsumer(String bootstrap, String group) {
        Properties c = new Properties();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        c.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        return new KafkaShareConsumer<>(c);
    }

    static void earliest(Admin admin, String group) throws Exception {
        ConfigResource resource = new ConfigResource(ConfigResource.Type.GROUP, group);
        AlterConfigOp op = new AlterConfigOp(new ConfigEntry("share.auto.offset.reset", "earliest"),
                                             AlterConfigOp.OpType.SET);
        admin.incrementalAlterConfigs(Map.of(resource, List.of(op))).all().get();
    }

    /** One consumer's share of the records: polls until {@code seen} holds every value produced
     *  ({@code produced} is final once positive), then a second more; {@code got} counts them. */
    static List<String> consume(String bootstrap, String group, String topic, Set<String> seen,
                                AtomicInteger produced, AtomicInteger got) {
        List<String> mine = new ArrayList<>();
        try (KafkaShareConsumer<String, String> consumer = shareConsumer(bootstrap, group)) {
            consumer.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + WAIT_MS;
            long quietUntil = Long.MAX_VALUE;
            while (System.currentTimeMillis() < Math.min(deadline, quietUntil)) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(100))) {
                    mine.add(r.value());
                    seen.add(r.value());
                    got.incrementAndGet();
                }
                int total = produced.get();
                if (total > 0 && seen.size() >= total && quietUntil == Long.MAX_VALUE) {
                    quietUntil = System.currentTimeMillis() + 1_000;   // anything redelivered shows now
                }
            }
            consumer.commitSync();
        }
        return mine;
    }

    static ShareGroupDescription describe(Admin admin, String group) throws Exception {
        return admin.describeShareGroups(List.of(group)).all().get().get(group);
    }

    static Map<String, Object> shareGroup(Admin admin, String bootstrap, String topic) throws Exception {
        admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
        String group = topic + "-group";
        earliest(admin, group);
        Set<String> seen = ConcurrentHashMap.newKeySet();
        AtomicInteger produced = new AtomicInteger();        // 0 while producing
        List<AtomicInteger> got = new ArrayList<>();
        ExecutorService pool = Executors.newFixedThreadPool(CONSUMERS);
        List<Future<List<String>>> futures = new ArrayList<>();
        Map<String, Object> described;
        try {
            for (int i = 0; i < CONSUMERS; i++) {
                AtomicInteger mine = new AtomicInteger();
                got.add(mine);
                futures.add(pool.submit(() -> consume(bootstrap, group, topic, seen, produced, mine)));
            }
            must(() -> {
                try {
                    return describe(admin, group).members().size() == CONSUMERS;
                } catch (Exception e) {
                    return false;
                }
            }, "the group never had " + CONSUMERS + " members");
            ShareGroupDescription d = describe(admin, group);
            List<Integer> idLengths = new ArrayList<>();
            List<Integer> assigned = new ArrayList<>();
            for (MemberDescription m : d.members()) {
                idLengths.add(m.consumerId().length());
                assigned.add(m.assignment().topicPartitions().size());
            }
            String listed = null;
            for (ShareGroupListing g : admin.listShareGroups().all().get()) {
                if (g.groupId().equals(group)) {
                    listed = g.state().map(Object::toString).orElse("listed without a state");
                }
            }
            described = JcOut.map("state", d.state().toString(), "member_id_lengths", idLengths,
                                  "assigned_partitions", assigned, "listed_state", listed);
            int sent = 0;
            try (KafkaProducer<String, String> p = producer(bootstrap)) {
                while (sent < MAX_TOTAL && (sent < TOTAL || got.stream().anyMatch(n -> n.get() == 0))) {
                    p.send(new ProducerRecord<>(topic, "v" + sent));
                    if (++sent % 10 == 0) {       // bursts: every consumer's long poll gets its chance
                        p.flush();
                        Thread.sleep(20);
                    }
                }
            } finally {
                produced.set(Math.max(sent, 1));
            }
        } finally {
            pool.shutdown();
        }
        List<Integer> counts = new ArrayList<>();
        Map<String, Integer> times = new HashMap<>();
        for (Future<List<String>> f : futures) {
            List<String> mine = f.get(WAIT_MS + 20_000, TimeUnit.MILLISECONDS);
            counts.add(mine.size());
            mine.forEach(v -> times.merge(v, 1, Integer::sum));
        }
        List<String> missing = new ArrayList<>();
        for (int i = 0; i < produced.get(); i++) {
            if (!times.containsKey("v" + i)) {
                missing.add("v" + i);
            }
        }
        List<String> twice = new ArrayList<>();
        times.forEach((v, n) -> {
            if (n > 1) {
                twice.add(v);
            }
        });
        Collections.sort(twice);
        int empty = describe(admin, group).members().size();
        return JcOut.map("produced", produced.get(), "received", counts.stream().mapToInt(Integer::intValue).sum(),
                         "per_consumer", counts, "missing", missing, "twice", twice,
                         "described", described, "members_after_close", empty);
    }

    static Map<String, Object> shareRelease(Admin admin, String bootstrap, String topic) throws Exception {
        admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
        String group = topic + "-group";
        earliest(admin, group);
        try (KafkaProducer<String, String> p = producer(bootstrap)) {
            for (String v : List.of("keep", "again", "drop")) {
                p.send(new ProducerRecord<>(topic, v));
            }
            p.flush();
        }
        Map<String, Integer> deliveries = new ConcurrentHashMap<>();
        try (KafkaShareConsumer<String, String> consumer = shareConsumer(bootstrap, group)) {
            consumer.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + WAIT_MS;
            // a poll waits for records (it returns as soon as they come): the 4.0 client decides the
            // acknowledgement mode on its second poll, implicit unless acknowledge() came first, so
            // the first one must not come back empty
            while (System.currentTimeMillis() < deadline && deliveries.getOrDefault("again", 0) < 2) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(10_000))) {
                    int n = deliveries.merge(r.value(), 1, Integer::sum);
                    AcknowledgeType type = AcknowledgeType.ACCEPT;
                    if (r.value().equals("again") && n == 1) {
                        type = AcknowledgeType.RELEASE;
                    } else if (r.value().equals("drop")) {
                        type = AcknowledgeType.REJECT;
                    }
                    consumer.acknowledge(r, type);
                }
                consumer.commitSync();
            }
            // a last look: nothing else may come back
            long quiet = System.currentTimeMillis() + 2_000;
            while (System.currentTimeMillis() < quiet) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                    deliveries.merge(r.value(), 1, Integer::sum);
                    consumer.acknowledge(r, AcknowledgeType.ACCEPT);
                }
                consumer.commitSync();
            }
        }
        return JcOut.map("keep", deliveries.getOrDefault("keep", 0), "again", deliveries.getOrDefault("again", 0),
                         "drop", deliveries.getOrDefault("drop", 0));
    }

    // -- shared ------------------------------------------------------------------------------

    static KafkaProducer<String, String> producer(String bootstrap) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        return new KafkaProducer<>(p);
    }

    static void must(BooleanSupplier condition, String why) throws Exception {
        long deadline = System.currentTimeMillis() + WAIT_MS;
        while (!condition.getAsBoolean()) {
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException(why);
            }
            Thread.sleep(50);
        }
    }
}
