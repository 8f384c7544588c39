import java.util.Arrays;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.TopicPartitionInfo;

/**
 * AdminClient.describeTopics, which the 4.0 client sends as DescribeTopicPartitions when the
 * broker offers it (paging with its cursor), for kwire's tests.
 *
 *   FetchDescribe BOOTSTRAP PAGE_SIZE TOPIC...
 *
 * Prints one line per topic: "NAME TOPIC_ID PARTITIONS LEADER_OF_PARTITION_0", sorted by name.
 */
public final class FetchDescribe {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        // the client's page size for DescribeTopicPartitions (AdminClientConfig, KIP-966)
        props.put("default.api.timeout.ms", "30000");
        int pageSize = Integer.parseInt(args[1]);
        try (Admin admin = Admin.create(props)) {
            var options = new org.apache.kafka.clients.admin.DescribeTopicsOptions().partitionSizeLimitPerResponse(pageSize);
            Map<String, TopicDescription> described = admin.describeTopics(
                Arrays.asList(args).subList(2, args.length), options).allTopicNames().get();
            described.keySet().stream().sorted().forEach(name -> {
                TopicDescription d = described.get(name);
                TopicPartitionInfo p0 = d.partitions().get(0);
                System.out.println(name + " " + d.topicId() + " " + d.partitions().size() + " " + p0.leader().id());
            });
        }
    }
}
