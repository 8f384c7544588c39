import java.io.PrintStream;
import java.time.Duration;
import java.util.Collections;
import java.util.Properties;
import java.util.UUID;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * Reads a topic from the beginning for the cluster fault tests (tests/cluster/test_java_client.py).
 *
 * Usage: ClusterConsumer bootstrap topic expected timeout-seconds [pause-ms [key=value ...]]
 *
 * A fresh group, auto.offset.reset=earliest, no commits.  Prints "REC partition offset value"
 * per record until it has read `expected` records or the time is up, then "DONE read N".
 * pause-ms sleeps between polls and the key=value pairs override consumer properties
 * (e.g. max.partition.fetch.bytes=1024), so that a test can keep it reading across a failure.
 */
public final class ClusterConsumer {
    public static void main(String[] args) throws InterruptedException {
        if (args.length < 4) {
            System.err.println("usage: ClusterConsumer bootstrap topic expected timeout-seconds [pause-ms [key=value ...]]");
            System.exit(2);
        }
        String topic = args[1];
        long expected = Long.parseLong(args[2]);
        long deadline = System.nanoTime() + Long.parseLong(args[3]) * 1_000_000_000L;
        long pauseMs = args.length > 4 ? Long.parseLong(args[4]) : 0;

        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, "java-reader-" + UUID.randomUUID());
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.METADATA_MAX_AGE_CONFIG, "1000");
        props.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "5000");
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, "kwire-cluster-consumer");
        for (int i = 5; i < args.length; i++) {
            String[] kv = args[i].split("=", 2);
            props.put(kv[0], kv[1]);
        }

        PrintStream out = System.out;
        long read = 0;
        try (KafkaConsumer<String, String> consumer =
                     new KafkaConsumer<>(props, new StringDeserializer(), new StringDeserializer())) {
            consumer.subscribe(Collections.singletonList(topic));
            while (read < expected && System.nanoTime() < deadline) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(500));
                for (ConsumerRecord<String, String> r : records) {
                    out.println("REC " + r.partition() + " " + r.offset() + " " + r.value());
                    read++;
                }
                out.flush();
                if (pauseMs > 0 && !records.isEmpty()) {
                    Thread.sleep(pauseMs);
                }
            }
        }
        out.println("DONE read " + read);
        out.flush();
    }
}
