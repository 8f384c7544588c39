import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * KafkaProducer (its defaults: idempotent, acks=all) against a topic whose records a Python
 * validator checks (kwire.record.validator), for tests/schemas/test_validators_clients.py.
 *
 * Usage: JcValidatedProducer bootstrap topic
 *
 * Prints one line per record: "label TAB ok TAB offset" or
 * "label TAB error TAB exception class TAB message".  First three records one batch each
 * (good, bad, good), then one batch of three (good, bad, good) from a lingering producer
 * that flush() sends.
 */
public final class JcValidatedProducer {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        try (KafkaProducer<byte[], byte[]> producer = producer(bootstrap, "0")) {
            report("single-good-1", producer.send(record(topic, "hello from java")));
            report("single-bad", producer.send(record(topic, "mail jane@example.com")));
            report("single-good-2", producer.send(record(topic, "still going")));
        }
        try (KafkaProducer<byte[], byte[]> producer = producer(bootstrap, "10000")) {    // flush() sends it
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            sent.add(producer.send(record(topic, "batch good a")));
            sent.add(producer.send(record(topic, "card 4111 1111 1111 1111")));
            sent.add(producer.send(record(topic, "batch good b")));
            producer.flush();
            String[] labels = {"batch-good-a", "batch-bad", "batch-good-b"};
            for (int i = 0; i < labels.length; i++) {
                report(labels[i], sent.get(i));
            }
        }
        System.out.println("done");
    }

    static KafkaProducer<byte[], byte[]> producer(String bootstrap, String lingerMs) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.LINGER_MS_CONFIG, lingerMs);
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "20000");
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        return new KafkaProducer<>(p);
    }

    static ProducerRecord<byte[], byte[]> record(String topic, String value) {
        return new ProducerRecord<>(topic, 0, null, value.getBytes(StandardCharsets.UTF_8));
    }

    static void report(String label, Future<RecordMetadata> future) throws Exception {
        try {
            RecordMetadata metadata = future.get(30, TimeUnit.SECONDS);
            System.out.println(label + "\tok\t" + metadata.offset());
        } catch (ExecutionException e) {
            Throwable cause = e.getCause();
            String message = String.valueOf(cause.getMessage()).replace('\n', ' ').replace('\t', ' ');
            System.out.println(label + "\terror\t" + cause.getClass().getSimpleName() + "\t" + message);
        }
        System.out.flush();
    }
}
