import java.util.Collections;
import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeReplicaLogDirsResult.ReplicaLogDirInfo;
import org.apache.kafka.common.TopicPartitionReplica;

/**
 * Admin.alterReplicaLogDirs (AlterReplicaLogDirs, API 34), followed with describeReplicaLogDirs,
 * for tests/integration/test_alter_replica_log_dirs.py.
 *
 * Usage: JcMoveLogDir bootstrap broker-id topic partition destination-dir
 *
 * Prints JcOut lines: "alter" (the request's outcome), "moved" (polled until the replica's
 * current dir is the destination: whether a future dir was seen on the way, and where the
 * replica ended up).
 */
public final class JcMoveLogDir {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        TopicPartitionReplica replica = new TopicPartitionReplica(args[2], Integer.parseInt(args[3]),
                                                                  Integer.parseInt(args[1]));
        String destination = args[4];
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, 15000);
        try (Admin admin = Admin.create(props)) {
            JcOut.run("alter", () -> {
                admin.alterReplicaLogDirs(Collections.singletonMap(replica, destination)).all().get();
                return null;
            });
            JcOut.run("moved", () -> {
                String futureSeen = null;
                long deadline = System.currentTimeMillis() + 60_000;
                while (System.currentTimeMillis() < deadline) {
                    ReplicaLogDirInfo info = admin.describeReplicaLogDirs(Collections.singleton(replica)).all().get()
                        .get(replica);
                    if (info.getFutureReplicaLogDir() != null) {
                        futureSeen = info.getFutureReplicaLogDir();
                    }
                    if (destination.equals(info.getCurrentReplicaLogDir()) && info.getFutureReplicaLogDir() == null) {
                        return JcOut.map("future_seen", futureSeen, "current", info.getCurrentReplicaLogDir());
                    }
                    Thread.sleep(100);
                }
                return JcOut.map("future_seen", futureSeen, "current", null);
            });
        }
    }
}
