package io.mstar.transport.xbench;

/**
 * A producer's payloads per step of its measured time, with {@code -Dxbench.curveMs=250} (and
 * {@code -Dxbench.warmUpS=0}: a fresh pair from its first payload); printed as {@code CURVE size ms rate...} in
 * payloads/s, read by {@link WarmUp}. Off by default: {@link #at} then costs a comparison.
 */
final class Curve {
    private static final long STEP_NS = Long.getLong("xbench.curveMs", 0) * 1_000_000L;

    private final long[] sentBy;
    private int marks;
    private long nextMark;

    Curve(long startNs, double seconds) {
        sentBy = new long[STEP_NS > 0 ? (int) (seconds * 1e9 / STEP_NS) : 0];
        nextMark = startNs + STEP_NS;
    }

    /** Called before each send, with the clock the loop read and the payloads sent so far in the measured time. */
    void at(long nowNs, long sent) {
        if (marks < sentBy.length && nowNs >= nextMark) {
            sentBy[marks++] = sent;
            nextMark += STEP_NS;
        }
    }

    /** The {@code CURVE} line, or null when curves are off. */
    String line(long size) {
        if (marks == 0) {
            return null;
        }
        StringBuilder line = new StringBuilder("CURVE " + size + " " + STEP_NS / 1_000_000);
        for (int k = 0; k < marks; k++) {
            line.append(' ').append((long) ((sentBy[k] - (k == 0 ? 0 : sentBy[k - 1])) * 1e9 / STEP_NS));
        }
        return line.toString();
    }
}
