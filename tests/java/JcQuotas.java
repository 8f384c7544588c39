import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.common.quota.ClientQuotaAlteration;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.quota.ClientQuotaFilter;
import org.apache.kafka.common.quota.ClientQuotaFilterComponent;

/**
 * Client quotas through the AdminClient (KIP-546), for tests/integration/test_client_quotas.py.
 *
 * Usage: JcQuotas bootstrap user
 *
 * Checks: "alter" sets producer_byte_rate for (user, client-id jq-client) and consumer_byte_rate
 * for the default client id; "alter_invalid" an unknown key and an empty user (each entity's
 * error); "validate_only"; "describe_all", "describe_user_strict", "describe_default_clients"
 * (entity -> values, entities as "type=name" joined with ","); "remove" deletes them again.
 */
public final class JcQuotas {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String user = args[1];
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        Map<String, String> userClient = new TreeMap<>();
        userClient.put(ClientQuotaEntity.USER, user);
        userClient.put(ClientQuotaEntity.CLIENT_ID, "jq-client");
        ClientQuotaEntity pair = new ClientQuotaEntity(userClient);
        Map<String, String> defaultClientMap = new TreeMap<>();
        defaultClientMap.put(ClientQuotaEntity.CLIENT_ID, null);
        ClientQuotaEntity defaultClient = new ClientQuotaEntity(defaultClientMap);
        try (Admin admin = Admin.create(props)) {
            JcOut.run("alter", () -> {
                admin.alterClientQuotas(List.of(
                        new ClientQuotaAlteration(pair, List.of(new ClientQuotaAlteration.Op("producer_byte_rate", 4096.0))),
                        new ClientQuotaAlteration(defaultClient,
                                List.of(new ClientQuotaAlteration.Op("consumer_byte_rate", 8192.0))))).all().get();
                return JcOut.map();
            });
            JcOut.run("alter_invalid", () -> {
                ClientQuotaEntity bob = new ClientQuotaEntity(Map.of(ClientQuotaEntity.USER, user + "-bob"));
                ClientQuotaEntity empty = new ClientQuotaEntity(Map.of(ClientQuotaEntity.USER, ""));
                var result = admin.alterClientQuotas(List.of(
                        new ClientQuotaAlteration(bob, List.of(new ClientQuotaAlteration.Op("bogus_rate", 1.0))),
                        new ClientQuotaAlteration(empty, List.of(new ClientQuotaAlteration.Op("producer_byte_rate", 1.0)))));
                return JcOut.map("bob", JcOut.thrown(() -> result.values().get(bob).get()),
                                 "empty", JcOut.thrown(() -> result.values().get(empty).get()));
            });
            JcOut.run("validate_only", () -> {
                ClientQuotaEntity carol = new ClientQuotaEntity(Map.of(ClientQuotaEntity.USER, user + "-carol"));
                admin.alterClientQuotas(List.of(new ClientQuotaAlteration(carol,
                        List.of(new ClientQuotaAlteration.Op("request_percentage", 50.0)))),
                        new org.apache.kafka.clients.admin.AlterClientQuotasOptions().validateOnly(true)).all().get();
                return JcOut.map("described", flatten(admin.describeClientQuotas(ClientQuotaFilter.contains(
                        List.of(ClientQuotaFilterComponent.ofEntity(ClientQuotaEntity.USER, user + "-carol"))))
                        .entities().get()));
            });
            JcOut.run("describe_all", () -> JcOut.map("entities",
                    flatten(admin.describeClientQuotas(ClientQuotaFilter.all()).entities().get())));
            JcOut.run("describe_user_strict", () -> JcOut.map("entities", flatten(admin.describeClientQuotas(
                    ClientQuotaFilter.containsOnly(List.of(ClientQuotaFilterComponent.ofEntity(ClientQuotaEntity.USER, user),
                            ClientQuotaFilterComponent.ofEntityType(ClientQuotaEntity.CLIENT_ID)))).entities().get())));
            JcOut.run("describe_default_clients", () -> JcOut.map("entities", flatten(admin.describeClientQuotas(
                    ClientQuotaFilter.containsOnly(List.of(ClientQuotaFilterComponent.ofDefaultEntity(ClientQuotaEntity.CLIENT_ID))))
                    .entities().get())));
            JcOut.run("remove", () -> {
                admin.alterClientQuotas(List.of(
                        new ClientQuotaAlteration(pair, List.of(new ClientQuotaAlteration.Op("producer_byte_rate", null))),
                        new ClientQuotaAlteration(defaultClient,
                                List.of(new ClientQuotaAlteration.Op("consumer_byte_rate", null))))).all().get();
                return JcOut.map("entities", flatten(admin.describeClientQuotas(ClientQuotaFilter.all()).entities().get()));
            });
        }
        JcOut.run("done", () -> JcOut.map());
    }

    static Map<String, Object> flatten(Map<ClientQuotaEntity, Map<String, Double>> entities) {
        Map<String, Object> out = new TreeMap<>();
        for (var e : entities.entrySet()) {
            List<String> parts = new ArrayList<>();
            for (var c : new TreeMap<>(e.getKey().entries()).entrySet()) {
                parts.add(c.getKey() + "=" + (c.getValue() == null ? "<default>" : c.getValue()));
            }
            out.put(String.join(",", parts), new TreeMap<String, Object>(e.getValue()));
        }
        return out;
    }
}
