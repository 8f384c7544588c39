import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.FeatureMetadata;
import org.apache.kafka.clients.admin.FeatureUpdate;
import org.apache.kafka.clients.admin.UpdateFeaturesOptions;

/**
 * Feature levels through the AdminClient (KIP-584), for tests/java_client/test_features.py.
 *
 * Usage: JcFeatures bootstrap prefix
 *
 * Checks: "describe" (Admin.describeFeatures, which reads ApiVersions: supported ranges as
 * "min-max", finalized levels, the epoch); "dry_run" (transaction.version to 2, validateOnly);
 * "refused" (transaction.version to 3: the exception's class and message).
 */
public final class JcFeatures {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        try (Admin admin = Admin.create(props)) {
            JcOut.run("describe", () -> {
                FeatureMetadata m = admin.describeFeatures().featureMetadata().get();
                Map<String, Object> supported = new TreeMap<>();
                m.supportedFeatures().forEach((k, v) -> supported.put(k, v.minVersion() + "-" + v.maxVersion()));
                Map<String, Object> finalized = new TreeMap<>();
                m.finalizedFeatures().forEach((k, v) -> finalized.put(k, (int) v.maxVersionLevel()));
                return JcOut.map("supported", supported, "finalized", finalized,
                                 "epoch", m.finalizedFeaturesEpoch().orElse(-1L));
            });
            JcOut.run("dry_run", () -> {
                admin.updateFeatures(Map.of("transaction.version",
                        new FeatureUpdate((short) 2, FeatureUpdate.UpgradeType.UPGRADE)),
                        new UpdateFeaturesOptions().validateOnly(true)).all().get();
                return JcOut.map();
            });
            JcOut.run("refused", () -> {
                String thrown = JcOut.thrown(() -> admin.updateFeatures(Map.of("transaction.version",
                        new FeatureUpdate((short) 3, FeatureUpdate.UpgradeType.UPGRADE)),
                        new UpdateFeaturesOptions()).all().get());
                return JcOut.map("thrown", thrown);
            });
        }
    }
}
