// The `java` column of `kwire compat`: Apache Kafka's Java client (Producer, Consumer,
// Admin) driven one operation per process by compat_tests/java.py.
//
//   java CompatClient OP BOOTSTRAP ARGS...
//
// Records come in on stdin, one per line: partition, timestamp (-1: none), key, value,
// headers, tab-separated; key and value are base64 or "-" for null; headers are
// "name=base64" (or "name=-") joined by ",".  The answer is the last stdout line:
// {"ok":true,"result":...} or {"ok":false,"code":N|null,"type":"...","message":"..."},
// code being Kafka's error code when the broker sent one (null: the client's own error).
// `member` instead prints {"assigned":[...]} and {"record":{...}} lines until stdin closes.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.*;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.ApiException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class CompatClient {
    static final Base64.Encoder B64 = Base64.getEncoder();
    static final Base64.Decoder UNB64 = Base64.getDecoder();

    public static void main(String[] args) {
        String op = args[0];
        String bootstrap = args[1];
        String[] rest = Arrays.copyOfRange(args, 2, args.length);
        try {
            String result;
            switch (op) {
                case "produce": result = produce(bootstrap, rest); break;
                case "fetch": result = fetch(bootstrap, rest); break;
                case "offset": result = offset(bootstrap, rest); break;
                case "member": member(bootstrap, rest); return;
                case "consume_in_group": result = consumeInGroup(bootstrap, rest); break;
                case "create": result = create(bootstrap, rest); break;
                case "describe": result = describe(bootstrap, rest); break;
                case "delete": result = delete(bootstrap, rest); break;
                case "list": result = list(bootstrap); break;
                default: throw new IllegalArgumentException("unknown op " + op);
            }
            System.out.println("{\"ok\":true,\"result\":" + result + "}");
        } catch (Throwable t) {
            Throwable cause = t;
            while ((cause instanceof ExecutionException || (cause instanceof KafkaException
                    && !(cause instanceof ApiException))) && cause.getCause() != null) {
                cause = cause.getCause();
            }
            String code = cause instanceof ApiException ? Integer.toString(Errors.forException(cause).code()) : "null";
            if (cause instanceof OffsetOutOfRangeException) {
                code = "1";     // the consumer's own exception for the broker's OFFSET_OUT_OF_RANGE
            }
            System.out.println("{\"ok\":false,\"code\":" + code + ",\"type\":" + str(cause.getClass().getSimpleName())
                    + ",\"message\":" + str(String.valueOf(cause.getMessage())) + "}");
        }
        System.out.flush();
        System.exit(0);     // do not wait for the client's non-daemon threads
    }

    // ------------------------------------------------------------------ JSON out, records in
    static String str(String s) {
        if (s == null) return "null";
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }

    static String b64(byte[] b) { return b == null ? "null" : "\"" + B64.encodeToString(b) + "\""; }

    static byte[] unb64(String s) { return s.equals("-") ? null : UNB64.decode(s); }

    static String record(ConsumerRecord<byte[], byte[]> r) {
        StringBuilder h = new StringBuilder("[");
        for (Header header : r.headers()) {
            if (h.length() > 1) h.append(',');
            h.append('[').append(str(header.key())).append(',').append(b64(header.value())).append(']');
        }
        return "{\"key\":" + b64(r.key()) + ",\"value\":" + b64(r.value()) + ",\"headers\":" + h + "]"
                + ",\"timestamp\":" + r.timestamp() + ",\"partition\":" + r.partition() + ",\"offset\":" + r.offset() + "}";
    }

    static String records(List<ConsumerRecord<byte[], byte[]>> rs) {
        StringJoiner j = new StringJoiner(",", "[", "]");
        for (ConsumerRecord<byte[], byte[]> r : rs) j.add(record(r));
        return j.toString();
    }

    static List<String> stdinLines() throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        List<String> out = new ArrayList<>();
        for (String line; (line = in.readLine()) != null; ) if (!line.isEmpty()) out.add(line);
        return out;
    }

    // ------------------------------------------------------------------ producer
    // produce TOPIC COMPRESSION(none|gzip|snappy|lz4|zstd) IDEMPOTENT(default|true|false)
    static String produce(String bootstrap, String[] a) throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, a[1]);
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "10000");
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "15000");
        if (!a[2].equals("default")) {
            p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, a[2]);
            if (a[2].equals("false")) p.put(ProducerConfig.ACKS_CONFIG, "1");
        }
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer())) {
            for (String line : stdinLines()) {
                String[] f = line.split("\t", -1);
                Integer partition = f[0].equals("-1") ? null : Integer.valueOf(f[0]);
                Long ts = f[1].equals("-1") ? null : Long.valueOf(f[1]);
                List<Header> headers = new ArrayList<>();
                if (!f[4].isEmpty()) {
                    for (String kv : f[4].split(",")) {
                        int eq = kv.indexOf('=');
                        headers.add(new RecordHeader(kv.substring(0, eq), unb64(kv.substring(eq + 1))));
                    }
                }
                sent.add(producer.send(new ProducerRecord<>(a[0], partition, ts, unb64(f[2]), unb64(f[3]), headers)));
            }
            producer.flush();
            StringJoiner j = new StringJoiner(",", "[", "]");
            for (Future<RecordMetadata> f : sent) {
                RecordMetadata m = f.get(15, TimeUnit.SECONDS);
                j.add("[" + m.partition() + "," + m.offset() + "]");
            }
            return j.toString();
        }
    }

    // ------------------------------------------------------------------ consumers
    static Properties consumerProps(String bootstrap, String group, String reset) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        if (group != null) p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, reset);
        p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "15000");
        return p;
    }

    static KafkaConsumer<byte[], byte[]> consumer(Properties p) {
        return new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    // fetch TOPIC COUNT PARTITIONS(a,b|all) OFFSET(-1: beginning) RESET TIMEOUT_MS
    static String fetch(String bootstrap, String[] a) throws Exception {
        String topic = a[0];
        int count = Integer.parseInt(a[1]);
        long offset = Long.parseLong(a[3]);
        try (KafkaConsumer<byte[], byte[]> c = consumer(consumerProps(bootstrap, null, a[4]))) {
            List<TopicPartition> tps = new ArrayList<>();
            if (a[2].equals("all")) {
                for (var info : c.partitionsFor(topic)) tps.add(new TopicPartition(topic, info.partition()));
            } else {
                for (String s : a[2].split(",")) tps.add(new TopicPartition(topic, Integer.parseInt(s)));
            }
            c.assign(tps);
            if (offset < 0) c.seekToBeginning(tps);
            else for (TopicPartition tp : tps) c.seek(tp, offset);
            List<ConsumerRecord<byte[], byte[]>> out = new ArrayList<>();
            long deadline = System.currentTimeMillis() + Long.parseLong(a[5]);
            while (out.size() < count && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) out.add(r);
            }
            return records(out);
        }
    }

    // offset TOPIC PARTITION earliest|latest|TIMESTAMP
    static String offset(String bootstrap, String[] a) {
        TopicPartition tp = new TopicPartition(a[0], Integer.parseInt(a[1]));
        try (KafkaConsumer<byte[], byte[]> c = consumer(consumerProps(bootstrap, null, "earliest"))) {
            if (a[2].equals("earliest")) return c.beginningOffsets(List.of(tp)).get(tp).toString();
            if (a[2].equals("latest")) return c.endOffsets(List.of(tp)).get(tp).toString();
            OffsetAndTimestamp found = c.offsetsForTimes(Map.of(tp, Long.parseLong(a[2]))).get(tp);
            return found == null ? "-1" : Long.toString(found.offset());
        }
    }

    // member GROUP TOPIC: a group member until stdin closes
    static void member(String bootstrap, String[] a) throws Exception {
        AtomicBoolean done = new AtomicBoolean();
        Thread reader = new Thread(() -> {
            try { while (System.in.read() >= 0) { } } catch (Exception ignored) { }
            done.set(true);
        });
        reader.setDaemon(true);
        reader.start();
        Properties p = consumerProps(bootstrap, a[0], "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "true");
        p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "300");
        p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
        p.put(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, "30000");
        try (KafkaConsumer<byte[], byte[]> c = consumer(p)) {
            c.subscribe(List.of(a[1]));
            List<Integer> last = null;
            while (!done.get()) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(100))) {
                    System.out.println("{\"record\":" + record(r) + "}");
                }
                List<Integer> now = new ArrayList<>();
                for (TopicPartition tp : c.assignment()) now.add(tp.partition());
                Collections.sort(now);
                if (!now.equals(last)) {
                    System.out.println("{\"assigned\":" + now.toString().replace(" ", "") + "}");
                    last = now;
                }
                System.out.flush();
            }
        }
        System.exit(0);
    }

    // consume_in_group GROUP TOPIC N: read N records in the group, commit after the last
    static String consumeInGroup(String bootstrap, String[] a) {
        int n = Integer.parseInt(a[2]);
        Properties p = consumerProps(bootstrap, a[0], "earliest");
        p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
        try (KafkaConsumer<byte[], byte[]> c = consumer(p)) {
            c.subscribe(List.of(a[1]));
            List<ConsumerRecord<byte[], byte[]>> out = new ArrayList<>();
            long deadline = System.currentTimeMillis() + 15000;
            while (out.size() < n && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) out.add(r);
            }
            if (out.size() > n) out = out.subList(0, n);
            if (!out.isEmpty()) {
                ConsumerRecord<byte[], byte[]> lastRec = out.get(out.size() - 1);
                c.commitSync(Map.of(new TopicPartition(a[1], 0), new OffsetAndMetadata(lastRec.offset() + 1)));
            }
            return records(out);
        }
    }

    // ------------------------------------------------------------------ admin
    static Admin admin(String bootstrap) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "15000");
        return Admin.create(p);
    }

    // create NAME PARTITIONS [key=value...]
    static String create(String bootstrap, String[] a) throws Exception {
        Map<String, String> configs = new HashMap<>();
        for (int i = 2; i < a.length; i++) {
            int eq = a[i].indexOf('=');
            configs.put(a[i].substring(0, eq), a[i].substring(eq + 1));
        }
        try (Admin admin = admin(bootstrap)) {
            NewTopic t = new NewTopic(a[0], Integer.parseInt(a[1]), (short) 1).configs(configs);
            admin.createTopics(List.of(t)).all().get(15, TimeUnit.SECONDS);
            return "null";
        }
    }

    // describe NAME: [partitions, {config: value}]
    static String describe(String bootstrap, String[] a) throws Exception {
        try (Admin admin = admin(bootstrap)) {
            TopicDescription d = admin.describeTopics(List.of(a[0])).allTopicNames().get(15, TimeUnit.SECONDS).get(a[0]);
            ConfigResource r = new ConfigResource(ConfigResource.Type.TOPIC, a[0]);
            Config cfg = admin.describeConfigs(List.of(r)).all().get(15, TimeUnit.SECONDS).get(r);
            StringJoiner j = new StringJoiner(",", "{", "}");
            for (ConfigEntry e : cfg.entries()) j.add(str(e.name()) + ":" + str(e.value()));
            return "[" + d.partitions().size() + "," + j + "]";
        }
    }

    static String delete(String bootstrap, String[] a) throws Exception {
        try (Admin admin = admin(bootstrap)) {
            admin.deleteTopics(List.of(a[0])).all().get(15, TimeUnit.SECONDS);
            return "null";
        }
    }

    static String list(String bootstrap) throws Exception {
        try (Admin admin = admin(bootstrap)) {
            StringJoiner j = new StringJoiner(",", "[", "]");
            for (String name : admin.listTopics().names().get(15, TimeUnit.SECONDS)) j.add(str(name));
            return j.toString();
        }
    }
}
