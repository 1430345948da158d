package io.mstar.transport;

/** Element types of tensors, with the code each has on the wire and its size in bytes. */
public enum DType {
    F32(1, 4),
    F16(2, 2),
    BF16(3, 2),
    F64(4, 8),
    I8(5, 1),
    U8(6, 1),
    I16(7, 2),
    I32(8, 4),
    I64(9, 8),
    BOOL(10, 1),
    /** 8-bit float, 4 exponent bits, 3 mantissa bits, finite only (PyTorch {@code float8_e4m3fn}). */
    F8_E4M3FN(11, 1),
    /** 8-bit float, 5 exponent bits, 2 mantissa bits (PyTorch {@code float8_e5m2}). */
    F8_E5M2(12, 1),
    /** {@code float8_e4m3fnuz}: no negative zero, no infinities. */
    F8_E4M3FNUZ(13, 1),
    /** {@code float8_e5m2fnuz}: no negative zero, no infinities. */
    F8_E5M2FNUZ(14, 1);

    private static final DType[] BY_CODE = new DType[16];

    static {
        for (DType t : values()) {
            BY_CODE[t.code] = t;
        }
    }

    private final int code;
    private final int itemBytes;

    DType(int code, int itemBytes) {
        this.code = code;
        this.itemBytes = itemBytes;
    }

    /** The wire code (1..14). */
    public int code() {
        return code;
    }

    /** Bytes per element. */
    public int itemBytes() {
        return itemBytes;
    }

    /** The type with this wire code, or null. */
    public static DType ofCode(int code) {
        return code > 0 && code < BY_CODE.length ? BY_CODE[code] : null;
    }
}
