package io.mstar.transport.cli;

import io.mstar.transport.metrics.StatsJson;

import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** The little JSON the commands print for machines (their {@code --json} option), beside {@link StatsJson}. */
final class Json {
    private static final Pattern PAIR = Pattern.compile("(\\w+)=(\"[^\"]*\"|\\S+)");
    private static final Pattern NUMBER = Pattern.compile("-?[0-9]+(\\.[0-9]+)?");

    private Json() {
    }

    static String quote(String s) {
        return StatsJson.quote(s);
    }

    static String strings(List<String> values) {
        return StatsJson.strings(values);
    }

    /**
     * The fields of a command's own {@code key=value} summary as JSON members (no braces): numbers as numbers,
     * the rest as strings. Stats snapshots are not read this way: {@link StatsJson} writes them from the records.
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
            b.append(quote(key)).append(':').append(NUMBER.matcher(value).matches() ? value : quote(value));
        }
        return b.toString();
    }
}
