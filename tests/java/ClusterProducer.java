import java.io.PrintStream;
import java.util.Properties;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Counted acks=all load for the cluster fault tests (tests/cluster/test_java_client.py).
 *
 * Usage: ClusterProducer bootstrap topic count partitions
 *
 * Record i has value "i", goes to partition i % partitions and has that partition number as key.
 * Prints one line per outcome: "ACK partition value" or "ERR value exception-class message",
 * then "DONE" once every record has an outcome.  A flush every 100 records paces the load so
 * that it lasts through a broker failure.
 */
public final class ClusterProducer {
    private static final PrintStream OUT = System.out;

    private static void say(String line) {
        synchronized (OUT) {
            OUT.println(line);
            OUT.flush();
        }
    }

    public static void main(String[] args) {
        if (args.length != 4) {
            System.err.println("usage: ClusterProducer bootstrap topic count partitions");
            System.exit(2);
        }
        String topic = args[1];
        int count = Integer.parseInt(args[2]);
        int partitions = Integer.parseInt(args[3]);

        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "90000");
        props.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "5000");
        props.put(ProducerConfig.METADATA_MAX_AGE_CONFIG, "1000");
        props.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        props.put(ProducerConfig.RETRY_BACKOFF_MS_CONFIG, "100");
        props.put(ProducerConfig.CLIENT_ID_CONFIG, "kwire-cluster-producer");

        try (KafkaProducer<String, String> producer =
                     new KafkaProducer<>(props, new StringSerializer(), new StringSerializer())) {
            for (int i = 0; i < count; i++) {
                final String value = Integer.toString(i);
                int partition = i % partitions;
                producer.send(new ProducerRecord<>(topic, partition, Integer.toString(partition), value),
                        (metadata, exception) -> {
                            if (exception == null) {
                                say("ACK " + metadata.partition() + " " + value);
                            } else {
                                say("ERR " + value + " " + exception.getClass().getName() + " "
                                        + String.valueOf(exception.getMessage()).replace('\n', ' '));
                            }
                        });
                if (i % 100 == 99) {
                    producer.flush();
                }
            }
            producer.flush();
        }
        say("DONE");
    }
}
