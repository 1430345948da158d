package io.mstar.transport;

/** Where a sent tensor's bytes are. */
public enum Placement {
    /** In a slot of the producer's arena: a segment file and an offset. */
    ARENA(1),
    /** In a file of its own (the file transport, or the arena's spill path). */
    SPILL(2);

    private final int code;

    Placement(int code) {
        this.code = code;
    }

    public int code() {
        return code;
    }

    /** The placement with this wire code, or null. */
    public static Placement ofCode(int code) {
        return switch (code) {
            case 1 -> ARENA;
            case 2 -> SPILL;
            default -> null;
        };
    }
}
