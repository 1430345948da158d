package io.mstar.transport.cli;

import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** The little JSON the commands print for machines (their {@code --json} option). */
final class Json {
    private static final Pattern PAIR = Pattern.compile("(\\w+)=(\"[^\"]*\"|\\S+)");
    private static final Pattern NUMBER = Pattern.compile("-?[0-9]+(\\.[0-9]+)?");

    private Json() {
    }

    static String quote(String s) {
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

    static String strings(List<String> values) {
        return "[" + String.join(",", values.stream().map(Json::quote).toList()) + "]";
    }

    /**
     * The fields of a {@code key=value} log line as JSON members (no braces): numbers as numbers, the rest as
     * strings, and {@code segmentMap} (comma-separated bars) as an array of strings.
     */
    static String members(String logLine) {
        StringBuilder b = new StringBuilder();
        Matcher pair = PAIR.matcher(logLine);
        while (pair.find()) {
            String key = pair.group(1);
            String value = pair.group(2).replace("\"", "");
            if (!b.isEmpty()) {
                b.append(',');
            }
            b.append(quote(key)).append(':');
            if (key.equals("segmentMap")) {
                b.append(strings(List.of(value.split(","))));
            } else {
                b.append(NUMBER.matcher(value).matches() ? value : quote(value));
            }
        }
        return b.toString();
    }
}
