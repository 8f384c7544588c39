import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeReplicaLogDirsResult.ReplicaLogDirInfo;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionReplica;

/**
 * Admin.describeLogDirs and describeReplicaLogDirs (DescribeLogDirs, API 35) against a broker,
 * for tests/integration/test_describe_log_dirs.py.
 *
 * Usage: JcLogDirs bootstrap broker-id topic
 *
 * Prints two JcOut lines: "describeLogDirs" (every dir of the broker: error, total and usable
 * bytes, and each replica's size, offset lag and future flag) and "describeReplicaLogDirs"
 * (partition 0 of the topic: its dir and offset lag).
 */
public final class JcLogDirs {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        int brokerId = Integer.parseInt(args[1]);
        String topic = args[2];
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, 15000);
        try (Admin admin = Admin.create(props)) {
            JcOut.run("describeLogDirs", () -> {
                Map<String, LogDirDescription> dirs = admin.describeLogDirs(Collections.singleton(brokerId))
                    .allDescriptions().get().get(brokerId);
                List<Object> out = new ArrayList<>();
                for (Map.Entry<String, LogDirDescription> e : new TreeMap<>(dirs).entrySet()) {
                    LogDirDescription d = e.getValue();
                    Map<String, Object> replicas = new TreeMap<>();
                    for (Map.Entry<TopicPartition, ReplicaInfo> r : d.replicaInfos().entrySet()) {
                        replicas.put(r.getKey().toString(), JcOut.map(
                            "size", r.getValue().size(), "offset_lag", r.getValue().offsetLag(),
                            "future", r.getValue().isFuture()));
                    }
                    out.add(JcOut.map("path", e.getKey(),
                        "error", d.error() == null ? null : d.error().getClass().getSimpleName(),
                        "total_bytes", d.totalBytes().isPresent() ? d.totalBytes().getAsLong() : null,
                        "usable_bytes", d.usableBytes().isPresent() ? d.usableBytes().getAsLong() : null,
                        "replicas", replicas));
                }
                return JcOut.map("dirs", out);
            });
            JcOut.run("describeReplicaLogDirs", () -> {
                TopicPartitionReplica replica = new TopicPartitionReplica(topic, 0, brokerId);
                ReplicaLogDirInfo info = admin.describeReplicaLogDirs(Collections.singleton(replica))
                    .all().get().get(replica);
                return JcOut.map("dir", info.getCurrentReplicaLogDir(),
                                 "offset_lag", info.getCurrentReplicaOffsetLag(),
                                 "future_dir", info.getFutureReplicaLogDir());
            });
        }
    }
}
