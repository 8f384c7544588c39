import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * AdminClient against a broker, for tests/java_client/test_admin.py.
 *
 * Usage: JcAdmin bootstrap name-prefix
 *
 * Prints one JSON line per check (see JcOut): describeCluster, createTopics, describeTopics,
 * listOffsets (earliest, latest, forTimestamp, maxTimestamp), deleteRecords, createPartitions,
 * describeConfigs / incrementalAlterConfigs, dynamic broker configs (the cluster default and the
 * broker's own), then the group calls (listConsumerGroups,
 * describeConsumerGroups, listConsumerGroupOffsets, deleteConsumerGroups) around a consumer
 * of its own that subscribes and commits; "done" last.
 *
 * The timestamp topic gets TS_COUNT records, one batch each, record i stamped
 * BASE + i * 1000 except record MAX_AT, stamped BASE + 100000 (the max timestamp).
 */
public final class JcAdmin {
    static final long BASE = 1_700_000_000_000L;
    static final int TS_COUNT = 10;
    static final int MAX_AT = 5;

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String prefix = args[1];
        String topic = prefix + "-admin";
        String tsTopic = prefix + "-times";
        String group = prefix + "-group";
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        try (Admin admin = Admin.create(props)) {
            JcOut.run("describeCluster", () -> {
                DescribeClusterResult r = admin.describeCluster();
                List<Object> nodes = new ArrayList<>();
                for (Node n : r.nodes().get()) {
                    nodes.add(JcOut.map("id", n.id(), "host", n.host(), "port", n.port()));
                }
                Node controller = r.controller().get();
                return JcOut.map("cluster_id", r.clusterId().get(), "nodes", nodes,
                                 "controller", controller == null ? null : controller.id());
            });
            JcOut.run("createTopics", () -> {
                NewTopic t = new NewTopic(topic, 3, (short) 1)
                        .configs(Map.of("retention.ms", "3600000"));
                CreateTopicsResult r = admin.createTopics(List.of(t, new NewTopic(tsTopic, 1, (short) 1)));
                r.all().get();
                String again = JcOut.thrown(() -> admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1)))
                        .all().get());
                String invalid = JcOut.thrown(() -> admin.createTopics(List.of(new NewTopic("bad name!", 1, (short) 1)))
                        .all().get());
                Config config = r.config(topic).get();
                return JcOut.map("partitions", r.numPartitions(topic).get(),
                                 "replication_factor", (int) r.replicationFactor(topic).get(),
                                 "topic_id", String.valueOf(r.topicId(topic).get()),
                                 "retention_ms", config.get("retention.ms").value(),
                                 "again", again, "invalid_name", invalid,
                                 "listed", admin.listTopics().names().get().contains(topic));
            });
            JcOut.run("describeTopics", () -> describe(admin, topic));
            JcOut.run("describeTopics_unknown", () -> JcOut.map("error", JcOut.thrown(() ->
                    admin.describeTopics(List.of(prefix + "-nope")).allTopicNames().get())));
            JcOut.run("produce_timestamps", () -> produceTimestamps(bootstrap, tsTopic));
            TopicPartition ts = new TopicPartition(tsTopic, 0);
            JcOut.run("listOffsets", () -> JcOut.map(
                    "earliest", info(admin, ts, OffsetSpec.earliest()),
                    "latest", info(admin, ts, OffsetSpec.latest()),
                    "for_timestamp", info(admin, ts, OffsetSpec.forTimestamp(BASE + 3500)),
                    "for_timestamp_exact", info(admin, ts, OffsetSpec.forTimestamp(BASE + 2000)),
                    "for_timestamp_future", info(admin, ts, OffsetSpec.forTimestamp(BASE + 10_000_000)),
                    "max_timestamp", info(admin, ts, OffsetSpec.maxTimestamp())));
            JcOut.run("deleteRecords", () -> {
                long low = admin.deleteRecords(Map.of(ts, RecordsToDelete.beforeOffset(3)))
                        .lowWatermarks().get(ts).get().lowWatermark();
                String beyond = JcOut.thrown(() -> admin.deleteRecords(
                        Map.of(ts, RecordsToDelete.beforeOffset(TS_COUNT + 5))).all().get());
                return JcOut.map("low_watermark", low,
                                 "earliest_after", info(admin, ts, OffsetSpec.earliest()),
                                 "latest_after", info(admin, ts, OffsetSpec.latest()),
                                 "beyond_end", beyond);
            });
            JcOut.run("createPartitions", () -> {
                admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(5))).all().get();
                String decrease = JcOut.thrown(() -> admin.createPartitions(
                        Map.of(topic, NewPartitions.increaseTo(2))).all().get());
                Map<String, Object> d = waitPartitions(admin, topic, 5);
                d.put("decrease", decrease);
                return d;
            });
            ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            JcOut.run("describeConfigs", () -> {
                Config c = admin.describeConfigs(List.of(res)).all().get().get(res);
                ConfigResource broker = new ConfigResource(ConfigResource.Type.BROKER,
                        String.valueOf(admin.describeCluster().nodes().get().iterator().next().id()));
                Config b = admin.describeConfigs(List.of(broker)).all().get().get(broker);
                ConfigEntry numPartitions = b.get("num.partitions");
                return JcOut.map("retention_ms", entry(c.get("retention.ms")),
                                 "cleanup_policy", entry(c.get("cleanup.policy")),
                                 "max_message_bytes", entry(c.get("max.message.bytes")),
                                 "entries", c.entries().size(),
                                 "broker_entries", b.entries().size(),
                                 "broker_num_partitions", entry(numPartitions));
            });
            JcOut.run("incrementalAlterConfigs", () -> {
                admin.incrementalAlterConfigs(Map.of(res, List.of(
                        new AlterConfigOp(new ConfigEntry("retention.ms", "7200000"), AlterConfigOp.OpType.SET),
                        new AlterConfigOp(new ConfigEntry("max.message.bytes", "500000"), AlterConfigOp.OpType.SET)
                ))).all().get();
                Config c1 = admin.describeConfigs(List.of(res)).all().get().get(res);
                admin.incrementalAlterConfigs(Map.of(res, List.of(
                        new AlterConfigOp(new ConfigEntry("max.message.bytes", ""), AlterConfigOp.OpType.DELETE)
                ))).all().get();
                Config c2 = admin.describeConfigs(List.of(res)).all().get().get(res);
                String invalid = JcOut.thrown(() -> admin.incrementalAlterConfigs(Map.of(res, List.of(
                        new AlterConfigOp(new ConfigEntry("retention.ms", "abc"), AlterConfigOp.OpType.SET)
                ))).all().get());
                return JcOut.map("after_set", JcOut.map("retention_ms", entry(c1.get("retention.ms")),
                                                        "max_message_bytes", entry(c1.get("max.message.bytes"))),
                                 "after_delete", JcOut.map("retention_ms", entry(c2.get("retention.ms")),
                                                           "max_message_bytes", entry(c2.get("max.message.bytes"))),
                                 "invalid", invalid);
            });
            JcOut.run("brokerConfigs", () -> brokerConfigs(admin));
            groups(admin, bootstrap, tsTopic, group);
        }
        JcOut.emit(JcOut.map("check", "done", "ok", true));
    }

    static Map<String, Object> describe(Admin admin, String topic) throws Exception {
        TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
        List<Object> parts = new ArrayList<>();
        for (TopicPartitionInfo p : d.partitions()) {
            parts.add(JcOut.map("partition", p.partition(), "leader", p.leader() == null ? null : p.leader().id(),
                                "replicas", p.replicas().size(), "isr", p.isr().size()));
        }
        return JcOut.map("name", d.name(), "internal", d.isInternal(), "topic_id", String.valueOf(d.topicId()),
                         "partitions", parts);
    }

    /** Describe until the topic has ``count`` partitions (metadata may lag a moment), at most 10 s. */
    static Map<String, Object> waitPartitions(Admin admin, String topic, int count) throws Exception {
        long deadline = System.currentTimeMillis() + 10_000;
        while (true) {
            Map<String, Object> d = describe(admin, topic);
            if (((List<?>) d.get("partitions")).size() >= count || System.currentTimeMillis() > deadline) {
                return d;
            }
            Thread.sleep(100);
        }
    }

    static Map<String, Object> info(Admin admin, TopicPartition tp, OffsetSpec spec) throws Exception {
        ListOffsetsResultInfo i = admin.listOffsets(Map.of(tp, spec)).partitionResult(tp).get();
        return JcOut.map("offset", i.offset(), "timestamp", i.timestamp(),
                         "leader_epoch", i.leaderEpoch().orElse(null));
    }

    /** Dynamic broker configs: the cluster default ("") and this broker's own, then removed again
     *  (harmless values: the other checks share the broker). */
    static Map<String, Object> brokerConfigs(Admin admin) throws Exception {
        String id = String.valueOf(admin.describeCluster().nodes().get().iterator().next().id());
        ConfigResource own = new ConfigResource(ConfigResource.Type.BROKER, id);
        ConfigResource dflt = new ConfigResource(ConfigResource.Type.BROKER, "");
        admin.incrementalAlterConfigs(Map.of(
                dflt, List.of(new AlterConfigOp(new ConfigEntry("message.max.bytes", "1048600"), AlterConfigOp.OpType.SET)),
                own, List.of(new AlterConfigOp(new ConfigEntry("max.connections", "5000"), AlterConfigOp.OpType.SET))
        )).all().get();
        Config b = admin.describeConfigs(List.of(own)).all().get().get(own);
        Config d = admin.describeConfigs(List.of(dflt)).all().get().get(dflt);
        String refused = JcOut.thrown(() -> admin.incrementalAlterConfigs(Map.of(own, List.of(
                new AlterConfigOp(new ConfigEntry("log.dirs", "/elsewhere"), AlterConfigOp.OpType.SET)))).all().get());
        admin.incrementalAlterConfigs(Map.of(
                dflt, List.of(new AlterConfigOp(new ConfigEntry("message.max.bytes", ""), AlterConfigOp.OpType.DELETE)),
                own, List.of(new AlterConfigOp(new ConfigEntry("max.connections", ""), AlterConfigOp.OpType.DELETE))
        )).all().get();
        Config after = admin.describeConfigs(List.of(own)).all().get().get(own);
        return JcOut.map("message_max_bytes", entry(b.get("message.max.bytes")),
                         "max_connections", entry(b.get("max.connections")),
                         "default_entries", d.entries().size(),
                         "default_message_max_bytes", entry(d.get("message.max.bytes")),
                         "refused", refused,
                         "after", JcOut.map("message_max_bytes", entry(after.get("message.max.bytes")),
                                            "max_connections", entry(after.get("max.connections"))));
    }

    static Map<String, Object> entry(ConfigEntry e) {
        if (e == null) {
            return null;
        }
        return JcOut.map("value", e.value(), "source", String.valueOf(e.source()),
                         "default", e.isDefault(), "read_only", e.isReadOnly());
    }

    static Map<String, Object> produceTimestamps(String bootstrap, String topic) throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        List<Long> offsets = new ArrayList<>();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < TS_COUNT; i++) {
                long ts = i == MAX_AT ? BASE + 100_000 : BASE + i * 1000L;
                offsets.add(producer.send(new ProducerRecord<>(topic, 0, ts, "k" + i, "v" + i)).get().offset());
            }
        }
        return JcOut.map("offsets", offsets);
    }

    static KafkaConsumer<String, String> consumer(String bootstrap, String group) {
        Properties c = new Properties();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        c.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        return new KafkaConsumer<>(c);
    }

    static Map<String, Object> describeGroup(Admin admin, String group) throws Exception {
        ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
        List<Object> members = new ArrayList<>();
        for (MemberDescription m : d.members()) {
            List<String> tps = new ArrayList<>();
            for (TopicPartition tp : m.assignment().topicPartitions()) {
                tps.add(tp.toString());
            }
            Collections.sort(tps);
            members.add(JcOut.map("member_id", m.consumerId(), "client_id", m.clientId(),
                                  "host", m.host(), "assignment", tps));
        }
        return JcOut.map("state", String.valueOf(d.state()), "simple", d.isSimpleConsumerGroup(),
                         "assignor", d.partitionAssignor(), "members", members,
                         "coordinator", d.coordinator() == null ? null : d.coordinator().id());
    }

    static Map<String, Object> listed(Admin admin, String group) throws Exception {
        Collection<ConsumerGroupListing> all = admin.listConsumerGroups().all().get();
        for (ConsumerGroupListing l : all) {
            if (l.groupId().equals(group)) {
                return JcOut.map("found", true, "state", l.state().map(String::valueOf).orElse(null),
                                 "simple", l.isSimpleConsumerGroup(), "groups", all.size());
            }
        }
        return JcOut.map("found", false, "groups", all.size());
    }

    static void groups(Admin admin, String bootstrap, String topic, String group) throws Exception {
        TopicPartition tp = new TopicPartition(topic, 0);
        KafkaConsumer<String, String> consumer = consumer(bootstrap, group);
        try {
            JcOut.run("group_consume", () -> {
                consumer.subscribe(List.of(topic));
                int got = 0;
                long deadline = System.currentTimeMillis() + 30_000;
                while (got < TS_COUNT - 3 && System.currentTimeMillis() < deadline) {
                    got += consumer.poll(Duration.ofMillis(200)).count();
                }
                consumer.commitSync(Map.of(tp, new OffsetAndMetadata(8, "from JcAdmin")));
                return JcOut.map("records", got);
            });
            JcOut.run("listConsumerGroups_active", () -> listed(admin, group));
            JcOut.run("describeConsumerGroups_active", () -> describeGroup(admin, group));
            JcOut.run("deleteConsumerGroups_active", () -> JcOut.map("error", JcOut.thrown(() ->
                    admin.deleteConsumerGroups(List.of(group)).all().get())));
        } finally {
            consumer.close();
        }
        JcOut.run("listConsumerGroups", () -> listed(admin, group));
        JcOut.run("describeConsumerGroups", () -> describeGroup(admin, group));
        JcOut.run("listConsumerGroupOffsets", () -> {
            Map<String, Object> out = new TreeMap<>();
            for (Map.Entry<TopicPartition, OffsetAndMetadata> e :
                    admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get().entrySet()) {
                out.put(e.getKey().toString(), JcOut.map("offset", e.getValue().offset(),
                                                         "metadata", e.getValue().metadata()));
            }
            return JcOut.map("offsets", out);
        });
        JcOut.run("deleteConsumerGroups", () -> {
            admin.deleteConsumerGroups(List.of(group)).all().get();
            String again = JcOut.thrown(() -> admin.deleteConsumerGroups(List.of(group)).all().get());
            Map<String, Object> offsets = new TreeMap<>();
            for (Map.Entry<TopicPartition, OffsetAndMetadata> e :
                    admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get().entrySet()) {
                offsets.put(e.getKey().toString(), e.getValue() == null ? null : e.getValue().offset());
            }
            return JcOut.map("listed_after", listed(admin, group).get("found"), "again", again,
                             "offsets_after", offsets);
        });
    }
}
