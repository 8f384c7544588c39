import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;

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
 * Members are JcConsumer.Member: they poll on threads of their own and commitSync after every
 * poll that returned records and when partitions are revoked.
 */
public final class JcConsumerProtocol {

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

    static Map<String, Object> twoMembers(Admin admin, String bootstrap, String name, String assignor) throws Exception {
        String topic = name;
        JcConsumer.create(admin, topic, 4);
        JcConsumer.produce(bootstrap, topic, 4, 5, "before");
        Map<String, Object> out = new HashMap<>();
        Map<String, String> cfg = Map.of(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer",
                                         ConsumerConfig.GROUP_REMOTE_ASSIGNOR_CONFIG, assignor);
        JcConsumer.Member a = new JcConsumer.Member(bootstrap, "a", name, topic, cfg);
        JcConsumer.Member b = null;
        try {
            out.put("a_alone", JcConsumer.waitFor(() -> a.owned.size() == 4 && a.records.size() == 20));
            b = new JcConsumer.Member(bootstrap, "b", name, topic, cfg);
            JcConsumer.Member bb = b;
            out.put("shared", JcConsumer.waitFor(() -> JcConsumer.covers(a, bb, 4)));
            out.put("group_description", describe(admin, name));
            JcConsumer.produce(bootstrap, topic, 4, 10, "after");
            JcConsumer.waitFor(() -> JcConsumer.total(a, bb) >= 60);
            Thread.sleep(300);                  // room for a duplicate to show up
            out.put("total_records", JcConsumer.total(a, bb));
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
