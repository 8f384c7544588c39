import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Reads every partition of a topic from the beginning in assign mode (no group) until it has
 * seen EXPECTED records or TIMEOUT_S passes, for kwire's fetch-session tests and benchmark.
 *
 *   FetchConsumer BOOTSTRAP TOPIC EXPECTED TIMEOUT_S [key=value ...]
 *
 * Prints "count N" on stdout whenever the count grows (so a test can act between batches),
 * then "done N SECONDS" (from assign to the last record) and exits 0, or "timeout N" and
 * exits 1.  Extra arguments are consumer properties.
 */
public final class FetchConsumer {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("enable.auto.commit", "false");
        props.put("fetch.max.wait.ms", "200");
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        for (int i = 4; i < args.length; i++) {
            String[] kv = args[i].split("=", 2);
            props.put(kv[0], kv[1]);
        }
        String topic = args[1];
        long expected = Long.parseLong(args[2]);
        long deadline = System.nanoTime() + Long.parseLong(args[3]) * 1_000_000_000L;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            List<TopicPartition> partitions = new ArrayList<>();
            for (PartitionInfo p : consumer.partitionsFor(topic, Duration.ofSeconds(30))) {
                partitions.add(new TopicPartition(topic, p.partition()));
            }
            long start = System.nanoTime();
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            long count = 0;
            long last = start;
            while (count < expected && System.nanoTime() < deadline) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
                if (records.isEmpty()) {
                    continue;
                }
                count += records.count();
                last = System.nanoTime();
                System.out.println("count " + count);
                System.out.flush();
            }
            if (count < expected) {
                System.out.println("timeout " + count);
                System.exit(1);
            }
            System.out.println("done " + count + " " + (last - start) / 1e9);
        }
    }
}
