import java.io.PrintStream;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.ExecutionException;

/**
 * JSON-lines output shared by the Jc* programs (tests/java_client/): one object per check.
 *
 * A check is a lambda that returns a map of results; run() prints
 * {"check": name, "ok": true, ...results} or, when it throws,
 * {"check": name, "ok": false, "error": "ExceptionClass: message"} (the cause of an
 * ExecutionException, which is what a user of the futures sees), so one failing check
 * never hides the others.  Values may be String, Number, Boolean, null, Map or Collection.
 */
final class JcOut {
    private static final PrintStream OUT = System.out;

    interface Check {
        Map<String, Object> run() throws Exception;
    }

    private JcOut() {}

    static Map<String, Object> map(Object... kv) {
        Map<String, Object> m = new LinkedHashMap<>();
        for (int i = 0; i + 1 < kv.length; i += 2) {
            m.put(String.valueOf(kv[i]), kv[i + 1]);
        }
        return m;
    }

    static synchronized void emit(Map<String, Object> line) {
        OUT.println(json(line));
        OUT.flush();
    }

    static void run(String name, Check check) {
        Map<String, Object> line = map("check", name);
        long started = System.nanoTime();
        try {
            Map<String, Object> result = check.run();
            line.put("ok", true);
            if (result != null) {
                line.putAll(result);
            }
        } catch (Throwable e) {
            line.put("ok", false);
            line.put("error", describe(e));
        }
        line.put("ms", (System.nanoTime() - started) / 1_000_000);
        emit(line);
    }

    /** "ExceptionClass: message" of the cause a caller of future.get() acts on. */
    static String describe(Throwable e) {
        Throwable t = e;
        while (t instanceof ExecutionException && t.getCause() != null) {
            t = t.getCause();
        }
        return t.getClass().getSimpleName() + ": " + t.getMessage();
    }

    /** The simple class name of what ``call`` throws (unwrapping ExecutionException), or "none". */
    static String thrown(java.util.concurrent.Callable<?> call) {
        try {
            call.call();
            return "none";
        } catch (Throwable e) {
            return describe(e).split(":", 2)[0];
        }
    }

    static String json(Object v) {
        StringBuilder sb = new StringBuilder();
        write(sb, v);
        return sb.toString();
    }

    private static void write(StringBuilder sb, Object v) {
        if (v == null) {
            sb.append("null");
        } else if (v instanceof Boolean || v instanceof Integer || v instanceof Long || v instanceof Short) {
            sb.append(v);
        } else if (v instanceof Number) {
            double d = ((Number) v).doubleValue();
            sb.append(Double.isFinite(d) ? String.valueOf(d) : "null");
        } else if (v instanceof Map) {
            sb.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
                if (!first) sb.append(',');
                first = false;
                quote(sb, String.valueOf(e.getKey()));
                sb.append(':');
                write(sb, e.getValue());
            }
            sb.append('}');
        } else if (v instanceof Collection) {
            sb.append('[');
            boolean first = true;
            for (Object o : (Collection<?>) v) {
                if (!first) sb.append(',');
                first = false;
                write(sb, o);
            }
            sb.append(']');
        } else {
            quote(sb, String.valueOf(v));
        }
    }

    private static void quote(StringBuilder sb, String s) {
        sb.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"': sb.append("\\\""); break;
                case '\\': sb.append("\\\\"); break;
                case '\n': sb.append("\\n"); break;
                case '\r': sb.append("\\r"); break;
                case '\t': sb.append("\\t"); break;
                default:
                    if (c < 0x20 || c > 0x7e) {     // ASCII out, whatever the JVM's charset
                        sb.append(String.format("\\u%04x", (int) c));
                    } else {
                        sb.append(c);
                    }
            }
        }
        sb.append('"');
    }
}
