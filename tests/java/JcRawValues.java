import java.util.HexFormat;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * KafkaProducer (its defaults: idempotent, acks=all) sending values given in hex, one record
 * per batch, each waited for; for tests whose topics check records at the broker.
 *
 * Usage: JcRawValues bootstrap topic label=hex [label=hex ...]
 *
 * Prints "label TAB ok TAB offset" or "label TAB error TAB exception class TAB message" per
 * value, then "done".
 */
public final class JcRawValues {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "20000");
        props.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            for (int i = 2; i < args.length; i++) {
                String[] labelled = args[i].split("=", 2);
                byte[] value = HexFormat.of().parseHex(labelled[1]);
                try {
                    RecordMetadata m = producer.send(new ProducerRecord<>(args[1], 0, null, value))
                        .get(30, TimeUnit.SECONDS);
                    System.out.println(labelled[0] + "\tok\t" + m.offset());
                } catch (ExecutionException e) {
                    Throwable cause = e.getCause();
                    System.out.println(labelled[0] + "\terror\t" + cause.getClass().getSimpleName() + "\t"
                                       + cause.getMessage());
                }
            }
        }
        System.out.println("done");
    }
}
