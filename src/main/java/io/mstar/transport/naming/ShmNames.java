package io.mstar.transport.naming;

import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Names of the files the library creates in the shared-memory directory. Every name starts with
 * {@code mstar_<ns>_<kind>_}; what follows the entity has a fixed shape, so a name parses from both
 * ends. {@code <nonce>} (8 hex digits) names one owner: a transport's segments, spill files and stats
 * file share it.
 *
 * <pre>
 *   segment: mstar_&lt;ns&gt;_arena_&lt;entity&gt;_&lt;nonce&gt;_&lt;index&gt;
 *   spill:   mstar_&lt;ns&gt;_spill_&lt;entity&gt;_&lt;nonce&gt;_&lt;uuid, 32 hex digits&gt;
 *   stats:   mstar_&lt;ns&gt;_stats_&lt;entity&gt;_&lt;nonce&gt;[.next]
 *   mailbox: mstar_&lt;ns&gt;_mailbox_&lt;entity&gt;
 *   aeron:   mstar_&lt;ns&gt;_aeron_&lt;entity&gt;_&lt;nonce&gt;  (a directory: the embedded Aeron media driver's, in it)
 *   budget:  mstar_&lt;ns&gt;_budget_node  (the deployment's node budget, shared by its arenas: lifecycle.NodeBudget)
 *   demo:    mstar-demo-&lt;nonce&gt;  (a directory the demo command works in)
 * </pre>
 */
public final class ShmNames {
    private ShmNames() {
    }

    /** What every name of the library starts with. */
    public static final String PREFIX = "mstar_";
    private static final String ENTITY_CHARS = "[A-Za-z0-9_.-]{1,64}";

    /**
     * Entities name a process of the deployment, as M* does: letters, digits, '_', '-' and '.', at most 64
     * ("worker_0", "api_server.data"). Names stay unambiguous to parse because everything after the
     * entity has a fixed shape, matched from the end; and no entity is "." or "..".
     */
    public static final Pattern ENTITY = Pattern.compile(ENTITY_CHARS);
    /** Any segment name, of any namespace: groups namespace, entity, nonce, index. */
    public static final Pattern SEGMENT =
        Pattern.compile(PREFIX + "([0-9a-f]{16})_arena_(" + ENTITY_CHARS + ")_([0-9a-f]{8})_([0-9]{1,10})");
    /** Any spill file name, of any namespace: groups namespace, entity, nonce, uuid. */
    public static final Pattern SPILL =
        Pattern.compile(PREFIX + "([0-9a-f]{16})_spill_(" + ENTITY_CHARS + ")_([0-9a-f]{8})_([0-9a-f]{32})");
    /** Any stats file name ({@code lifecycle.StatsFile}), of any namespace: groups namespace, entity, nonce, and the next-snapshot suffix. */
    public static final Pattern STATS =
        Pattern.compile(PREFIX + "([0-9a-f]{16})_stats_(" + ENTITY_CHARS + ")_([0-9a-f]{8})(\\.next)?");
    /** Any mailbox name, of any namespace: groups namespace, entity. */
    public static final Pattern MAILBOX = Pattern.compile(PREFIX + "([0-9a-f]{16})_mailbox_(" + ENTITY_CHARS + ")");
    /** Any directory of an embedded Aeron media driver, of any namespace: groups namespace, entity, nonce. */
    public static final Pattern AERON =
        Pattern.compile(PREFIX + "([0-9a-f]{16})_aeron_(" + ENTITY_CHARS + ")_([0-9a-f]{8})");
    /** Any node budget file, of any namespace: groups namespace and the fixed word "node" in the entity's place. */
    public static final Pattern BUDGET = Pattern.compile(PREFIX + "([0-9a-f]{16})_budget_(node)");
    /** A working directory of the demo command. */
    public static final Pattern DEMO_DIR = Pattern.compile("mstar-demo-([0-9a-f]{8})");

    /** The kinds of file, each with its pattern; group 1 is the namespace and group 2 the entity in every one. */
    public enum Kind {
        SEGMENT(ShmNames.SEGMENT), SPILL(ShmNames.SPILL), STATS(ShmNames.STATS), MAILBOX(ShmNames.MAILBOX),
        AERON(ShmNames.AERON), BUDGET(ShmNames.BUDGET);

        private final Pattern pattern;

        Kind(Pattern pattern) {
            this.pattern = pattern;
        }
    }

    /**
     * What a file name says of its file: kind, namespace, entity and owner (the nonce, or "mailbox" for a
     * mailbox, whose owner is the entity's mailbox itself); null when the name is none of ours.
     */
    public record Parsed(Kind kind, String namespace, String entity, String owner) {
    }

    /** Parses one of the library's file names, or returns null. */
    public static Parsed parse(String name) {
        if (!name.startsWith(PREFIX)) {
            return null;
        }
        for (Kind kind : Kind.values()) {
            Matcher m = kind.pattern.matcher(name);
            if (m.matches() && isEntity(m.group(2))) {
                return new Parsed(kind, m.group(1), m.group(2), kind == Kind.MAILBOX ? "mailbox"
                    : kind == Kind.BUDGET ? "budget" : m.group(3));
            }
        }
        return null;
    }

    /** Checks an entity name, for use in file names. */
    public static String checkEntity(String entity) {
        if (entity == null || !isEntity(entity)) {
            throw new IllegalArgumentException("entity must be 1 to 64 letters, digits, '_', '-' or '.', and not"
                + " '.' or '..' (it becomes part of file names): entity=" + entity);
        }
        return entity;
    }

    /** The mailbox of the entity that receives descriptors and ACKs through it. */
    public static String mailbox(Namespace ns, String entity) {
        return PREFIX + ns.id() + "_mailbox_" + checkEntity(entity);
    }

    /** The name of the spill file of one tensor of owner {@code nonce}. */
    public static String spill(Namespace ns, String entity, String nonce, UUID uuid) {
        return PREFIX + ns.id() + "_spill_" + checkEntity(entity) + "_" + nonce + "_"
            + uuid.toString().replace("-", "");
    }

    /** The name of segment {@code index} of owner {@code nonce}. */
    public static String segment(Namespace ns, String entity, String nonce, int index) {
        return PREFIX + ns.id() + "_arena_" + checkEntity(entity) + "_" + nonce + "_" + index;
    }

    /** The name of the stats file of owner {@code nonce}. */
    public static String stats(Namespace ns, String entity, String nonce) {
        return PREFIX + ns.id() + "_stats_" + checkEntity(entity) + "_" + nonce;
    }

    /** The deployment's node budget file. */
    public static String budget(Namespace ns) {
        return PREFIX + ns.id() + "_budget_node";
    }

    /** The directory an owner's embedded Aeron media driver runs in. */
    public static String aeron(Namespace ns, String entity, String nonce) {
        return PREFIX + ns.id() + "_aeron_" + checkEntity(entity) + "_" + nonce;
    }

    /** Whether {@code name} is a segment ({@code spill == false}) or spill file of namespace {@code ns} (its id). */
    public static boolean isOurs(String ns, String name, boolean spill) {
        return name.startsWith(PREFIX) && name.startsWith(ns, PREFIX.length())
            && matchesCached(spill ? SPILL : SEGMENT, spill ? SPILL_NAMES : SEGMENT_NAMES, name);
    }

    /** Whether {@code name} is a valid entity name. */
    public static boolean isEntity(String name) {
        return !name.equals(".") && !name.equals("..") && matchesCached(ENTITY, ENTITY_NAMES, name);
    }

    // Descriptors repeat the same few names: remember the ones that matched, so a receive runs no regex.
    private static final int CACHED_NAMES = 4096;
    private static final Set<String> SEGMENT_NAMES = ConcurrentHashMap.newKeySet();
    private static final Set<String> SPILL_NAMES = ConcurrentHashMap.newKeySet();
    private static final Set<String> ENTITY_NAMES = ConcurrentHashMap.newKeySet();

    private static boolean matchesCached(Pattern pattern, Set<String> matched, String name) {
        if (matched.contains(name)) {
            return true;
        }
        Matcher m = pattern.matcher(name);
        if (!m.matches() || (m.groupCount() >= 2 && !isEntity(m.group(2)))) {
            return false;
        }
        if (matched.size() >= CACHED_NAMES) {
            matched.clear();
        }
        matched.add(name);
        return true;
    }
}
