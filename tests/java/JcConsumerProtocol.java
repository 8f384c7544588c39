import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
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

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;

/**
 * KafkaConsumer with group.protocol=consumer (KIP-848) against a broker, for
 * tests/java_client/test_consumer_protocol.py.
 *
 * Usage: JcConsumerProtocol bootstrap name-prefix
 *
 * One JSON line per check (see JcOut):
 *   uniform / range   two consumers with group.remote.assignor set: A alone, B joins and the
 *                     four partitions are split without overlap, new records each reach
 *                     exactly one owner, the group described through the Admin client,
 *                     B leaves and A gets everything back
 *
 * Members poll on threads of their own and commitSync after every poll that returned records
 * and when partitions are revoked.
 */
public final class JcConsumerProtocol {
    static final long WAIT_MS = 30_000;

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String prefix = args[1];
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(ap)) {
            JcOut.run("uniform", () -> twoMembers(admin, bootstrap, prefix + "-uniform", "uniform"));
            JcOut.run("range", () -> twoMembers(admin, bootstrap, prefix + "-range", "range"));
        }
        JcOut.emit(JcOut.map("check", "done", "ok", true));
    }

    static final class Member implements Runnable {
        final KafkaConsumer<String, String> consumer;
        final Set<TopicPartition> owned = ConcurrentHashMap.newKeySet();
        final List<Object> events = new CopyOnWriteArrayList<>();
        final List<ConsumerRecord<String, String>> records = new CopyOnWriteArrayList<>();
        final Thread thread;
        volatile boolean running = true;
        volatile String error;

        Member(String bootstrap, String name, String group, String topic, String assignor) {
            Map<String, String> cfg = new HashMap<>();
            cfg.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            cfg.put(ConsumerConfig.CLIENT_ID_CONFIG, name);
            cfg.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
            cfg.put(ConsumerConfig.GROUP_REMOTE_ASSIGNOR_CONFIG, assignor);
            consumer = JcConsumer.consumer(bootstrap, cfg);
            consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> tps) {
                    if (!tps.isEmpty()) {
                        events.add(List.of("revoked", JcConsumer.sorted(tps)));
                        consumer.commitSync();
                    }
                    owned.removeAll(tps);
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> tps) {
                    if (!tps.isEmpty()) {
                        events.add(List.of("assigned", JcConsumer.sorted(tps)));
                    }
                    owned.addAll(tps);
                }

                @Override
                public void onPartitionsLost(Collection<TopicPartition> tps) {
                    events.add(List.of("lost", JcConsumer.sorted(tps)));
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
                        consumer.commitSync();
                    }
                }
            } catch (Exception e) {
                error = JcOut.describe(e);
            } finally {
                consumer.close(Duration.ofSeconds(5));
            }
        }

        void stop() throws InterruptedException {
            running = false;
            thread.join(15_000);
        }

        List<Integer> owns() {
            return JcConsumer.sorted(owned);
        }

        Map<String, Object> report() {
            Map<String, List<Long>> offsets = new TreeMap<>();
            for (ConsumerRecord<String, String> r : records) {
                offsets.computeIfAbsent(String.valueOf(r.partition()), k -> new ArrayList<>()).add(r.offset());
            }
            return JcOut.map("owns", owns(), "events", new ArrayList<>(events), "records", offsets, "error", error);
        }
    }

    static boolean covers(Member a, Member b, int partitions) {
        Set<Integer> union = new TreeSet<>(a.owns());
        union.addAll(b.owns());
        Set<Integer> both = new HashSet<>(a.owns());
        both.retainAll(b.owns());
        return !a.owned.isEmpty() && !b.owned.isEmpty() && union.size() == partitions && both.isEmpty();
    }

    static int total(Member a, Member b) {
        return a.records.size() + b.records.size();
    }

    static Map<String, Object> twoMembers(Admin admin, String bootstrap, String name, String assignor) throws Exception {
        String topic = name;
        JcConsumer.create(admin, topic, 4);
        JcConsumer.produce(bootstrap, topic, 4, 5, "before");
        Map<String, Object> out = new HashMap<>();
        Member a = new Member(bootstrap, "a", name, topic, assignor);
        Member b = null;
        try {
            out.put("a_alone", JcConsumer.waitFor(() -> a.owned.size() == 4 && a.records.size() == 20));
            b = new Member(bootstrap, "b", name, topic, assignor);
            Member bb = b;
            out.put("shared", JcConsumer.waitFor(() -> covers(a, bb, 4)));
            out.put("group_description", describe(admin, name));
            JcConsumer.produce(bootstrap, topic, 4, 10, "after");
            JcConsumer.waitFor(() -> total(a, bb) >= 60);
            Thread.sleep(300);                  // room for a duplicate to show up
            out.put("total_records", total(a, bb));
            out.put("a_after_join", a.report());
            out.put("b_after_join", b.report());
            b.stop();
            out.put("a_regains_all", JcConsumer.waitFor(() -> a.owned.size() == 4));
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
            members.add(JcOut.map("client_id", m.clientId(),
                                  "assignment", JcConsumer.sorted(m.assignment().topicPartitions()),
                                  "target", m.targetAssignment().map(t -> JcConsumer.sorted(t.topicPartitions()))
                                      .orElse(null)));
        }
        members.sort((x, y) -> String.valueOf(((Map<?, ?>) x).get("client_id"))
                .compareTo(String.valueOf(((Map<?, ?>) y).get("client_id"))));
        return JcOut.map("type", String.valueOf(d.type()), "state", String.valueOf(d.state()),
                         "assignor", d.partitionAssignor(),
                         "members", members);
    }
}
