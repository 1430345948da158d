package io.mstar.transport.lifecycle;

import java.util.regex.Pattern;

/**
 * Names of the files the library creates in the shared-memory directory. Every name starts with
 * {@code mstar_<ns>_}; the parts are separated by {@code _}, so entities may not contain one.
 *
 * <pre>
 *   segment: mstar_&lt;ns&gt;_arena_&lt;entity&gt;_&lt;nonce&gt;_&lt;index&gt;
 *   spill:   mstar_&lt;ns&gt;_spill_&lt;entity&gt;_&lt;pid&gt;_&lt;uuid, 32 hex digits&gt;
 *   mailbox: mstar_&lt;ns&gt;_mailbox_&lt;entity&gt;
 *   stats:   mstar_&lt;ns&gt;_stats_&lt;entity&gt;
 *   lock:    mstar_&lt;ns&gt;.lock  (NamespaceLock)
 * </pre>
 */
public final class ShmNames {
    private ShmNames() {
    }

    /** Entities name a process of the deployment: letters, digits and '-', at most 64. */
    public static final Pattern ENTITY = Pattern.compile("[A-Za-z0-9-]{1,64}");
    /** Any segment name, of any namespace. */
    public static final Pattern SEGMENT =
        Pattern.compile("mstar_([0-9a-f]{16})_arena_([A-Za-z0-9-]{1,64})_([0-9a-f]{8})_([0-9]{1,10})");

    /** Any spill file name, of any namespace. */
    public static final Pattern SPILL =
        Pattern.compile("mstar_([0-9a-f]{16})_spill_([A-Za-z0-9-]{1,64})_([0-9]{1,10})_([0-9a-f]{32})");

    /** Any stats file name ({@link StatsFile}), of any namespace. */
    public static final Pattern STATS = Pattern.compile("mstar_([0-9a-f]{16})_stats_([A-Za-z0-9-]{1,64})");

    /** Checks an entity name, for use in file names. */
    public static String checkEntity(String entity) {
        if (entity == null || !ENTITY.matcher(entity).matches()) {
            throw new IllegalArgumentException(
                "entity must be 1 to 64 letters, digits or '-' (it becomes part of file names): entity=" + entity);
        }
        return entity;
    }

    /** The mailbox of the entity that receives descriptors and ACKs through it. */
    public static String mailbox(Namespace ns, String entity) {
        return "mstar_" + ns.id() + "_mailbox_" + checkEntity(entity);
    }

    /** The name of the spill file of one tensor. */
    public static String spill(Namespace ns, String entity, long pid, java.util.UUID uuid) {
        return "mstar_" + ns.id() + "_spill_" + checkEntity(entity) + "_" + pid + "_"
            + uuid.toString().replace("-", "");
    }

    /** Whether {@code name} is a segment ({@code spill == false}) or spill file of namespace {@code ns}. */
    public static boolean isOurs(Namespace ns, String name, boolean spill) {
        return name.length() > 23 && name.startsWith("mstar_") && name.regionMatches(6, ns.id(), 0, 16)
            && name.charAt(22) == '_' && matchesCached(spill ? SPILL : SEGMENT, spill ? SPILL_NAMES : SEGMENT_NAMES, name);
    }

    /** Whether {@code name} is a valid entity name. */
    public static boolean isEntity(String name) {
        return matchesCached(ENTITY, ENTITY_NAMES, name);
    }

    // Descriptors repeat the same few names: remember the ones that matched, so a receive runs no regex.
    private static final int CACHED_NAMES = 4096;
    private static final java.util.Set<String> SEGMENT_NAMES = java.util.concurrent.ConcurrentHashMap.newKeySet();
    private static final java.util.Set<String> SPILL_NAMES = java.util.concurrent.ConcurrentHashMap.newKeySet();
    private static final java.util.Set<String> ENTITY_NAMES = java.util.concurrent.ConcurrentHashMap.newKeySet();

    private static boolean matchesCached(Pattern pattern, java.util.Set<String> matched, String name) {
        if (matched.contains(name)) {
            return true;
        }
        if (!pattern.matcher(name).matches()) {
            return false;
        }
        if (matched.size() >= CACHED_NAMES) {
            matched.clear();
        }
        matched.add(name);
        return true;
    }

    /** The name of segment {@code index} of one arena instance ({@code nonce}, 8 hex digits). */
    public static String segment(Namespace ns, String entity, String nonce, int index) {
        return "mstar_" + ns.id() + "_arena_" + checkEntity(entity) + "_" + nonce + "_" + index;
    }
}
