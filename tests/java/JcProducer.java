import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * KafkaProducer against a broker, for tests/java_client/test_producer.py.
 *
 * Usage: JcProducer bootstrap name-prefix
 *
 * One JSON line per check (see JcOut); every check reads what it wrote back with a consumer
 * in assign mode and reports what came back:
 *   acks_all        acks=all without idempotence: COUNT records over 3 partitions
 *   idempotent      the default producer (idempotent, acks=all): its producer state on the
 *                   broker (DescribeProducers) and the records, in order, no duplicates
 *   compression_X   for X in none, gzip, snappy, lz4, zstd: COUNT compressible records
 *   headers         records with several headers (repeated keys, a null value, binary)
 *   large           records near max.request.size (1048576 by default): one just under
 *                   it, one just over (refused by the client), one the broker refuses
 *                   (max.request.size raised above the broker's message.max.bytes) and one
 *                   above a topic's max.message.bytes
 */
public final class JcProducer {
    static final int COUNT = 600;

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String prefix = args[1];
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(ap)) {
            JcOut.run("acks_all", () -> {
                String topic = prefix + "-acks";
                create(admin, topic, 3, Map.of());
                Map<String, Object> sent = send(bootstrap, topic, COUNT, 3,
                        Map.of(ProducerConfig.ACKS_CONFIG, "all", ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "false"));
                sent.put("read", summary(read(bootstrap, topic, COUNT)));
                return sent;
            });
            JcOut.run("idempotent", () -> {
                String topic = prefix + "-idem";
                create(admin, topic, 1, Map.of());
                Map<String, Object> sent = send(bootstrap, topic, COUNT, 1, Map.of());
                TopicPartition tp = new TopicPartition(topic, 0);
                List<Object> states = new ArrayList<>();
                for (ProducerState s : admin.describeProducers(List.of(tp)).partitionResult(tp).get().activeProducers()) {
                    states.add(JcOut.map("producer_id", s.producerId(), "epoch", s.producerEpoch(),
                                         "last_sequence", s.lastSequence()));
                }
                sent.put("producers", states);
                sent.put("read", summary(read(bootstrap, topic, COUNT)));
                return sent;
            });
            for (String codec : List.of("none", "gzip", "snappy", "lz4", "zstd")) {
                JcOut.run("compression_" + codec, () -> {
                    String topic = prefix + "-codec-" + codec;
                    create(admin, topic, 1, Map.of());
                    Map<String, Object> sent = send(bootstrap, topic, COUNT, 1,
                            Map.of(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec,
                                   ProducerConfig.LINGER_MS_CONFIG, "20"));
                    sent.put("read", summary(read(bootstrap, topic, COUNT)));
                    return sent;
                });
            }
            JcOut.run("headers", () -> headers(admin, bootstrap, prefix + "-headers"));
            JcOut.run("large", () -> large(admin, bootstrap, prefix + "-large"));
        }
        JcOut.emit(JcOut.map("check", "done", "ok", true));
    }

    static void create(Admin admin, String topic, int partitions, Map<String, String> configs) throws Exception {
        admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1).configs(configs))).all().get();
    }

    static KafkaProducer<byte[], byte[]> producer(String bootstrap, Map<String, String> extra) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.putAll(extra);
        return new KafkaProducer<>(p);
    }

    /** A compressible value: the record number in a repeated sentence. */
    static String value(int i) {
        return ("record " + i + " of the Java client test; ").repeat(4);
    }

    /** Send ``count`` records round-robin over ``partitions``; report the acknowledgements. */
    static Map<String, Object> send(String bootstrap, String topic, int count, int partitions,
                                    Map<String, String> extra) throws Exception {
        Map<String, Object> out = new HashMap<>();
        try (KafkaProducer<byte[], byte[]> producer = producer(bootstrap, extra)) {
            List<Future<RecordMetadata>> acks = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                acks.add(producer.send(new ProducerRecord<>(topic, i % partitions,
                        ("k" + i).getBytes(StandardCharsets.UTF_8), value(i).getBytes(StandardCharsets.UTF_8))));
            }
            Map<Integer, List<Long>> offsets = new HashMap<>();
            for (Future<RecordMetadata> f : acks) {
                RecordMetadata m = f.get();
                offsets.computeIfAbsent(m.partition(), k -> new ArrayList<>()).add(m.offset());
            }
            Map<String, Object> perPartition = new HashMap<>();
            for (Map.Entry<Integer, List<Long>> e : offsets.entrySet()) {
                List<Long> o = e.getValue();
                boolean contiguous = true;
                for (int i = 0; i < o.size(); i++) {
                    contiguous &= o.get(i) == i;
                }
                perPartition.put(String.valueOf(e.getKey()), JcOut.map("acked", o.size(), "contiguous_from_0", contiguous));
            }
            out.put("acked", perPartition);
            out.put("compression_rate_avg", metric(producer.metrics(), "compression-rate-avg"));
            out.put("record_error_total", metric(producer.metrics(), "record-error-total"));
            out.put("record_retry_total", metric(producer.metrics(), "record-retry-total"));
        }
        return out;
    }

    static Object metric(Map<MetricName, ? extends Metric> metrics, String name) {
        for (Map.Entry<MetricName, ? extends Metric> e : metrics.entrySet()) {
            if (e.getKey().name().equals(name) && e.getKey().group().equals("producer-metrics")) {
                return e.getValue().metricValue();
            }
        }
        return null;
    }

    static KafkaConsumer<byte[], byte[]> consumer(String bootstrap) {
        Properties c = new Properties();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        return new KafkaConsumer<>(c);
    }

    /** Every record of every partition of ``topic`` from the start, until ``count`` or 30 s. */
    static List<ConsumerRecord<byte[], byte[]>> read(String bootstrap, String topic, int count) {
        List<ConsumerRecord<byte[], byte[]>> out = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> consumer = consumer(bootstrap)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (PartitionInfo p : consumer.partitionsFor(topic)) {
                tps.add(new TopicPartition(topic, p.partition()));
            }
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            long deadline = System.currentTimeMillis() + 30_000;
            while (out.size() < count && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                    out.add(r);
                }
            }
            // a moment more, to see any record beyond ``count`` (a duplicate)
            for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(300))) {
                out.add(r);
            }
        }
        return out;
    }

    /** What a reader checks: how many, whether each value matches its key, in order, once. */
    static Map<String, Object> summary(List<ConsumerRecord<byte[], byte[]>> records) {
        int matching = 0;
        boolean ordered = true;
        Map<Integer, Long> last = new HashMap<>();
        Map<String, Integer> seen = new HashMap<>();
        for (ConsumerRecord<byte[], byte[]> r : records) {
            String k = new String(r.key(), StandardCharsets.UTF_8);
            int i = Integer.parseInt(k.substring(1));
            if (value(i).equals(new String(r.value(), StandardCharsets.UTF_8))) {
                matching++;
            }
            Long prev = last.put(r.partition(), r.offset());
            ordered &= prev == null || prev < r.offset();
            seen.merge(k, 1, Integer::sum);
        }
        long duplicates = seen.values().stream().filter(n -> n > 1).count();
        return JcOut.map("records", records.size(), "values_match", matching, "ordered", ordered,
                         "distinct_keys", seen.size(), "duplicates", duplicates);
    }

    static Map<String, Object> headers(Admin admin, String bootstrap, String topic) throws Exception {
        create(admin, topic, 1, Map.of());
        byte[] binary = new byte[256];
        for (int i = 0; i < binary.length; i++) {
            binary[i] = (byte) i;
        }
        try (KafkaProducer<byte[], byte[]> producer = producer(bootstrap, Map.of())) {
            for (int i = 0; i < 3; i++) {
                List<Header> hs = List.of(
                        new RecordHeader("trace-id", ("trace-" + i).getBytes(StandardCharsets.UTF_8)),
                        new RecordHeader("repeated", "one".getBytes(StandardCharsets.UTF_8)),
                        new RecordHeader("repeated", "two".getBytes(StandardCharsets.UTF_8)),
                        new RecordHeader("empty", new byte[0]),
                        new RecordHeader("null-value", null),
                        new RecordHeader("binary", binary),
                        new RecordHeader("ünïcødé", "✓".getBytes(StandardCharsets.UTF_8)));
                producer.send(new ProducerRecord<>(topic, 0, ("k" + i).getBytes(StandardCharsets.UTF_8),
                        value(i).getBytes(StandardCharsets.UTF_8), hs)).get();
            }
            // a record with no headers at all, after ones with headers
            producer.send(new ProducerRecord<>(topic, 0, "k3".getBytes(StandardCharsets.UTF_8),
                    value(3).getBytes(StandardCharsets.UTF_8))).get();
        }
        List<Object> got = new ArrayList<>();
        for (ConsumerRecord<byte[], byte[]> r : read(bootstrap, topic, 4)) {
            List<Object> hs = new ArrayList<>();
            for (Header h : r.headers()) {
                String v;
                if (h.value() == null) {
                    v = null;
                } else if (h.key().equals("binary")) {
                    v = Arrays.equals(h.value(), binary) ? "<256 bytes 0..255>" : "<binary mismatch>";
                } else {
                    v = new String(h.value(), StandardCharsets.UTF_8);
                }
                hs.add(Arrays.asList(h.key(), v));
            }
            got.add(JcOut.map("offset", r.offset(), "headers", hs,
                              "last_repeated", r.headers().lastHeader("repeated") == null ? null
                                      : new String(r.headers().lastHeader("repeated").value(), StandardCharsets.UTF_8)));
        }
        return JcOut.map("records", got);
    }

    static Map<String, Object> large(Admin admin, String bootstrap, String topic) throws Exception {
        create(admin, topic, 1, Map.of());
        String small = topic + "-small";
        create(admin, small, 1, Map.of("max.message.bytes", "500000"));
        int max = 1_048_576;                 // max.request.size's default
        int under = max - 1024;              // the record, its batch and request headers fit
        byte[] big = new byte[under];
        for (int i = 0; i < big.length; i++) {
            big[i] = (byte) (i * 31 + 7);
        }
        Map<String, Object> out = new HashMap<>();
        try (KafkaProducer<byte[], byte[]> producer = producer(bootstrap, Map.of())) {
            RecordMetadata m = producer.send(new ProducerRecord<>(topic, 0, "under".getBytes(), big)).get();
            out.put("under_offset", m.offset());
            out.put("under_value_size", m.serializedValueSize());
            out.put("over_client", JcOut.thrown(() ->
                    producer.send(new ProducerRecord<>(topic, 0, "over".getBytes(), new byte[max + 1])).get()));
            out.put("over_topic_limit", JcOut.thrown(() ->
                    producer.send(new ProducerRecord<>(small, 0, "big".getBytes(), new byte[600_000])).get()));
            RecordMetadata after = producer.send(new ProducerRecord<>(topic, 0, "after".getBytes(), new byte[10])).get();
            out.put("after_offset", after.offset());
        }
        try (KafkaProducer<byte[], byte[]> producer = producer(bootstrap,
                Map.of(ProducerConfig.MAX_REQUEST_SIZE_CONFIG, "4000000"))) {
            out.put("over_broker_limit", JcOut.thrown(() ->
                    producer.send(new ProducerRecord<>(topic, 0, "huge".getBytes(), new byte[1_500_000])).get()));
        }
        List<Object> got = new ArrayList<>();
        for (ConsumerRecord<byte[], byte[]> r : read(bootstrap, topic, 2)) {
            got.add(JcOut.map("offset", r.offset(), "key", new String(r.key()), "size", r.value().length,
                              "intact", r.value().length != big.length || Arrays.equals(r.value(), big)));
        }
        out.put("read", got);
        return out;
    }
}
