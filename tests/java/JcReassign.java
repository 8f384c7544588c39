import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.PartitionReassignment;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;

/**
 * Admin.alterPartitionReassignments and listPartitionReassignments (APIs 45 and 46), for
 * tests/cluster/test_reassignment.py.
 *
 * Usage: JcReassign bootstrap topic partition replica,replica,...
 *
 * Prints JcOut lines: "cancelNothing" (cancelling a partition with no reassignment: the
 * exception's class), "alter" (the move of the partition to the replicas given), "list"
 * (polled until the partition is no longer being reassigned: how many polls saw it moving),
 * "describe" (the partition's replicas and ISR afterwards, from describeTopics).
 */
public final class JcReassign {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        TopicPartition tp = new TopicPartition(args[1], Integer.parseInt(args[2]));
        List<Integer> target = new ArrayList<>();
        for (String r : args[3].split(",")) {
            target.add(Integer.parseInt(r));
        }
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, 15000);
        try (Admin admin = Admin.create(props)) {
            JcOut.run("cancelNothing", () -> {
                try {
                    admin.alterPartitionReassignments(Collections.singletonMap(tp, Optional.empty())).all().get();
                    return JcOut.map("error", null);
                } catch (Exception e) {
                    return JcOut.map("error", JcOut.describe(e).split(":")[0]);
                }
            });
            JcOut.run("alter", () -> {
                admin.alterPartitionReassignments(Collections.singletonMap(
                    tp, Optional.of(new NewPartitionReassignment(target)))).all().get();
                return null;
            });
            JcOut.run("list", () -> {
                int moving = 0;
                long deadline = System.currentTimeMillis() + 60_000;
                while (System.currentTimeMillis() < deadline) {
                    Map<TopicPartition, PartitionReassignment> now = admin.listPartitionReassignments().reassignments().get();
                    if (!now.containsKey(tp)) {
                        return JcOut.map("moving_polls", moving, "done", true);
                    }
                    moving++;
                    Thread.sleep(200);
                }
                return JcOut.map("moving_polls", moving, "done", false);
            });
            JcOut.run("describe", () -> {
                TopicDescription d = admin.describeTopics(Collections.singleton(tp.topic())).allTopicNames().get()
                    .get(tp.topic());
                TopicPartitionInfo p = d.partitions().get(tp.partition());
                List<Integer> replicas = new ArrayList<>();
                p.replicas().forEach(n -> replicas.add(n.id()));
                List<Integer> isr = new ArrayList<>();
                p.isr().forEach(n -> isr.add(n.id()));
                return JcOut.map("replicas", replicas, "isr", isr, "leader", p.leader().id());
            });
        }
    }
}
