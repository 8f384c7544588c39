import java.io.PrintStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.UUID;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Kafka transactions through the Java client, for tests/integration/test_java_transactions.py.
 *
 * Usage:
 *   TxnPipeline pipeline bootstrap input output group transactional-id count abort-at timeout-s
 *   TxnPipeline read bootstrap topic read_committed|read_uncommitted timeout-s
 *   TxnPipeline committed bootstrap group topic
 *
 * pipeline: consume-transform-produce, exactly once.  A read_committed consumer in `group`
 * (subscribe, no auto commit) reads `input`; each poll is one transaction of a transactional
 * producer that writes value.toUpperCase() to the same partition of `output` and adds the
 * consumer's positions with sendOffsetsToTransaction(offsets, consumer.groupMetadata()).
 * The first transaction that starts at or after input offset `abort-at` fails once: its
 * records are flushed to the log, then it is aborted and the consumer rewinds to the group's
 * committed offsets (as a failed step would) and does the work again.  Prints
 * "COMMIT records next-offset" and "ABORT records first-offset next-offset" per transaction,
 * then "DONE processed N commits C aborts A" once `count` input records are committed.
 *
 * read: every record from the start of each partition until its position reaches the end
 * offset taken when it starts (under read_committed the last stable offset), as
 * "REC partition offset value" (a record past the end is printed too, for the test to see),
 * the ends as "END partition offset", then "DONE read N".
 *
 * committed: the group's committed offset of each partition as "COMMITTED partition offset"
 * (-1 for none), asked by a read_committed consumer, so that the fetch requires stable
 * offsets (KIP-447), then "DONE".
 */
public final class TxnPipeline {
    private static final PrintStream OUT = System.out;

    private static void say(String line) {
        OUT.println(line);
        OUT.flush();
    }

    public static void main(String[] args) throws Exception {
        String mode = args.length > 0 ? args[0] : "";
        switch (mode) {
            case "pipeline":
                need(args, 9);
                pipeline(args[1], args[2], args[3], args[4], args[5], Long.parseLong(args[6]),
                         Long.parseLong(args[7]), Long.parseLong(args[8]));
                break;
            case "read":
                need(args, 5);
                read(args[1], args[2], args[3], Long.parseLong(args[4]));
                break;
            case "committed":
                need(args, 4);
                committed(args[1], args[2], args[3]);
                break;
            default:
                need(args, -1);
        }
    }

    private static void need(String[] args, int count) {
        if (args.length != count) {
            System.err.println("usage: TxnPipeline pipeline bootstrap input output group transactional-id count"
                               + " abort-at timeout-s | read bootstrap topic isolation timeout-s"
                               + " | committed bootstrap group topic");
            System.exit(2);
        }
    }

    private static Properties consumerProps(String bootstrap, String group, String isolation) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, "kwire-txn-" + isolation);
        return props;
    }

    private static void pipeline(String bootstrap, String input, String output, String group, String transactionalId,
                                 long count, long abortAt, long timeoutS) {
        long deadline = System.nanoTime() + timeoutS * 1_000_000_000L;
        Properties cprops = consumerProps(bootstrap, group, "read_committed");
        cprops.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "40");
        Properties pprops = new Properties();
        pprops.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        pprops.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        pprops.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "30000");
        pprops.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        pprops.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        pprops.put(ProducerConfig.CLIENT_ID_CONFIG, "kwire-txn-pipeline");

        long processed = 0, commits = 0, aborts = 0;
        boolean failed = false;
        try (KafkaConsumer<String, String> consumer =
                     new KafkaConsumer<>(cprops, new StringDeserializer(), new StringDeserializer());
             KafkaProducer<String, String> producer =
                     new KafkaProducer<>(pprops, new StringSerializer(), new StringSerializer())) {
            producer.initTransactions();
            consumer.subscribe(Collections.singletonList(input));
            while (processed < count && System.nanoTime() < deadline) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(500));
                if (records.isEmpty()) {
                    continue;
                }
                long first = Long.MAX_VALUE;
                Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
                producer.beginTransaction();
                for (ConsumerRecord<String, String> r : records) {
                    first = Math.min(first, r.offset());
                    producer.send(new ProducerRecord<>(output, r.partition(), r.key(), r.value().toUpperCase()));
                    next.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                }
                producer.sendOffsetsToTransaction(next, consumer.groupMetadata());
                long upTo = Collections.max(next.values(), (a, b) -> Long.compare(a.offset(), b.offset())).offset();
                if (!failed && first >= abortAt) {
                    failed = true;
                    producer.flush();                  // the aborted records are in the log
                    producer.abortTransaction();
                    aborts++;
                    say("ABORT " + records.count() + " " + first + " " + upTo);
                    rewind(consumer);
                    continue;
                }
                producer.commitTransaction();
                commits++;
                processed += records.count();
                say("COMMIT " + records.count() + " " + upTo);
            }
        }
        say("DONE processed " + processed + " commits " + commits + " aborts " + aborts);
        if (processed != count) {
            System.exit(1);
        }
    }

    /** Back to the group's committed offsets, or the beginning where none is committed. */
    private static void rewind(KafkaConsumer<String, String> consumer) {
        Set<TopicPartition> assigned = consumer.assignment();
        Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(assigned, Duration.ofSeconds(10));
        List<TopicPartition> none = new ArrayList<>();
        for (TopicPartition tp : assigned) {
            OffsetAndMetadata at = committed.get(tp);
            if (at == null) {
                none.add(tp);
            } else {
                consumer.seek(tp, at);
            }
            say("REWIND " + tp.partition() + " " + (at == null ? -1 : at.offset()));
        }
        if (!none.isEmpty()) {
            consumer.seekToBeginning(none);            // an empty list would mean every partition
        }
    }

    private static void read(String bootstrap, String topic, String isolation, long timeoutS) {
        long deadline = System.nanoTime() + timeoutS * 1_000_000_000L;
        long read = 0;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(
                consumerProps(bootstrap, "txn-reader-" + UUID.randomUUID(), isolation),
                new StringDeserializer(), new StringDeserializer())) {
            List<TopicPartition> tps = new ArrayList<>();
            for (PartitionInfo p : consumer.partitionsFor(topic, Duration.ofSeconds(10))) {
                tps.add(new TopicPartition(topic, p.partition()));
            }
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            Map<TopicPartition, Long> end = consumer.endOffsets(tps, Duration.ofSeconds(10));
            for (TopicPartition tp : tps) {
                say("END " + tp.partition() + " " + end.get(tp));
            }
            Set<TopicPartition> open = new HashSet<>(tps);
            while (!open.isEmpty() && System.nanoTime() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(300))) {
                    OUT.println("REC " + r.partition() + " " + r.offset() + " " + r.value());
                    read++;
                }
                OUT.flush();
                open.removeIf(tp -> consumer.position(tp) >= end.get(tp));
            }
            if (!open.isEmpty()) {
                say("UNFINISHED " + open);
            }
        }
        say("DONE read " + read);
    }

    private static void committed(String bootstrap, String group, String topic) {
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(
                consumerProps(bootstrap, group, "read_committed"), new StringDeserializer(), new StringDeserializer())) {
            Set<TopicPartition> tps = new HashSet<>();
            for (PartitionInfo p : consumer.partitionsFor(topic, Duration.ofSeconds(10))) {
                tps.add(new TopicPartition(topic, p.partition()));
            }
            Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(tps, Duration.ofSeconds(10));
            for (TopicPartition tp : tps) {
                OffsetAndMetadata at = committed.get(tp);
                say("COMMITTED " + tp.partition() + " " + (at == null ? -1 : at.offset()));
            }
        }
        say("DONE");
    }
}
