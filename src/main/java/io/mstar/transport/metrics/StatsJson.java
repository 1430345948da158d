package io.mstar.transport.metrics;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.RecordComponent;
import java.util.List;
import java.util.Locale;

/**
 * The stats records as JSON, for machines: built from the records' components, not from a log line. Every
 * duration (a component named {@code ...Ns}) is written in microseconds under its name without the suffix,
 * so a document says its unit once ({@link #DURATION_UNIT}); counts are integers, ratios decimals, text
 * strings, a nested record an object, and null stays null.
 */
public final class StatsJson {
    /** The unit of every duration in these documents. */
    public static final String DURATION_UNIT = "microseconds";

    private StatsJson() {
    }

    /** {@code record} as one JSON object. */
    public static String of(Record record) {
        StringBuilder b = new StringBuilder("{");
        for (RecordComponent c : record.getClass().getRecordComponents()) {
            Object value;
            try {
                value = c.getAccessor().invoke(record);
            } catch (IllegalAccessException | InvocationTargetException e) {
                throw new IllegalStateException("stats record component not readable: " + c, e);
            }
            if (b.length() > 1) {
                b.append(',');
            }
            String name = c.getName();
            if (name.endsWith("Ns") && value instanceof Long ns) {
                b.append(quote(name.substring(0, name.length() - 2))).append(':')
                    .append(String.format(Locale.ROOT, "%.3f", ns / 1000.0));
            } else {
                b.append(quote(name)).append(':').append(value(value));
            }
        }
        return b.append('}').toString();
    }

    /** {@code record}'s numeric components as {@code prefix+name=value} fields of a log line. */
    public static String logFields(String prefix, Record record) {
        StringBuilder b = new StringBuilder();
        for (RecordComponent c : record.getClass().getRecordComponents()) {
            try {
                Object value = c.getAccessor().invoke(record);
                if (value instanceof Number) {
                    b.append(b.isEmpty() ? "" : " ").append(prefix).append(c.getName()).append('=').append(value);
                }
            } catch (IllegalAccessException | InvocationTargetException e) {
                throw new IllegalStateException("stats record component not readable: " + c, e);
            }
        }
        return b.toString();
    }

    private static String value(Object value) {
        return switch (value) {
            case null -> "null";
            case Record r -> of(r);
            case Double d -> String.format(Locale.ROOT, "%.6f", d);
            case Number n -> n.toString();
            case Boolean z -> z.toString();
            default -> quote(value.toString());
        };
    }

    /** A JSON array of strings. */
    public static String strings(List<String> values) {
        return "[" + String.join(",", values.stream().map(StatsJson::quote).toList()) + "]";
    }

    /** A JSON string. */
    public static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                default -> {
                    if (c < 0x20) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
                }
            }
        }
        return b.append('"').toString();
    }
}
