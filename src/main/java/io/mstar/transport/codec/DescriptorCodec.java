package io.mstar.transport.codec;

import io.mstar.transport.DType;
import io.mstar.transport.Deployment;
import io.mstar.transport.Placement;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.exceptions.DescriptorFormatException;
import io.mstar.transport.naming.ShmNames;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.UUID;

/**
 * The binary form of a {@link TensorDescriptor}: little-endian, versioned, length-prefixed.
 *
 * <pre>
 *   0                   4         6         8                  12     13     14     15     16
 *  +-------------------+---------+---------+------------------+------+------+------+------+
 *  | magic "MSTD"      | version | 0       | length (bytes)   | dtype| place| rank | 0    |
 *  +-------------------+---------+---------+------------------+------+------+------+------+
 *  16 uuid, most significant 64 bits | 24 uuid, least significant 64 bits
 *  32 nbytes (int64)                 | 40 offset (int64)
 *  48 shape: rank x int64
 *  .. requestId:  uint16 length + UTF-8 bytes (at most 256)
 *  .. producer:   uint16 length + ASCII entity name
 *  .. fileName:   uint16 length + ASCII file name
 * </pre>
 * {@code length} covers the whole record, header included, and must equal what the fields use:
 * records can be concatenated into a batch and a decoder never trusts more than it was given.
 *
 * <p>Decoding validates every field against the reader's namespace and throws a
 * {@link DescriptorFormatException} naming the first bad one; it never reads outside the input.
 * Whether {@code offset + nbytes} fits the segment is checked when the segment is mapped, since only
 * the file knows its size.
 *
 * <p>One class on purpose: the layout above, its encoder, its validating decoder and its in-place field
 * readers share the offsets, and a change to one must be seen beside the others.
 */
public final class DescriptorCodec {
    private DescriptorCodec() {
    }

    public static final int MAGIC = 0x4454534D; // "MSTD" read little-endian
    public static final short VERSION = 2;
    /** Flag bit: the producer learns this tensor was handled from its consumer's handled position, not an ACK. */
    public static final int FLAG_POSITION = 1;
    public static final int MAX_RANK = Tensor.MAX_RANK;
    public static final int MAX_REQUEST_ID_BYTES = 256;
    /** Largest encoded record: header, shape and three maximal strings. */
    public static final int MAX_RECORD_BYTES = 48 + 8 * MAX_RANK + 3 * (2 + 256);

    static final int MAGIC_OFFSET = 0;
    static final int VERSION_OFFSET = 4;
    static final int RESERVED_OFFSET = 6;
    static final int LENGTH_OFFSET = 8;
    static final int DTYPE_OFFSET = 12;
    static final int PLACEMENT_OFFSET = 13;
    static final int RANK_OFFSET = 14;
    public static final int FLAGS_OFFSET = 15;
    static final int UUID_MSB_OFFSET = 16;
    static final int UUID_LSB_OFFSET = 24;
    static final int NBYTES_OFFSET = 32;
    static final int OFFSET_OFFSET = 40;
    static final int SHAPE_OFFSET = 48;

    private static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfShort SHORT = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    /** Bytes {@code d} takes encoded. */
    public static int encodedLength(TensorDescriptor d) {
        return encodedLength(d.requestId(), d.producer(), d.rank(), d.fileName());
    }

    private static int encodedLength(String requestId, String producer, int rank, String fileName) {
        return encodedLength(utf8Length(requestId), producer, rank, fileName);
    }

    private static int encodedLength(int requestIdBytes, String producer, int rank, String fileName) {
        return SHAPE_OFFSET + 8 * rank + 6 + requestIdBytes + producer.length() + fileName.length();
    }

    // A shape without copying it: a tensor's, a descriptor's or an array.
    private static int rank(Object shape) {
        return switch (shape) {
            case Tensor t -> t.rank();
            case TensorDescriptor d -> d.rank();
            case long[] dims -> dims.length;
            default -> throw new IllegalArgumentException("not a shape: " + shape.getClass());
        };
    }

    private static long dim(Object shape, int i) {
        return switch (shape) {
            case Tensor t -> t.dim(i);
            case TensorDescriptor d -> d.dim(i);
            case long[] dims -> dims[i];
            default -> throw new IllegalArgumentException("not a shape: " + shape.getClass());
        };
    }

    /** Encodes into a new array. */
    public static byte[] encode(TensorDescriptor d) {
        byte[] out = new byte[encodedLength(d)];
        encode(d, MemorySegment.ofArray(out), 0);
        return out;
    }

    /**
     * Encodes at {@code offset} of {@code dst}.
     *
     * @return the bytes written
     * @throws IllegalArgumentException when a field cannot be encoded (rank, string lengths)
     */
    public static int encode(TensorDescriptor d, MemorySegment dst, long offset) {
        return encode(d.uuid().getMostSignificantBits(), d.uuid().getLeastSignificantBits(), d.requestId(),
            d.producer(), d.dtype(), (Object) d, d.nbytes(), d.placement(), d.fileName(), d.offset(), dst, offset);
    }

    /**
     * Encodes a descriptor from its fields, allocating nothing when the strings are ASCII: the sender's
     * allocation-free path writes straight into a message buffer.
     *
     * @return the bytes written
     */
    public static int encode(long uuidMsb, long uuidLsb, String requestId, String producer, Tensor tensor,
                             long nbytes, Placement placement, String fileName, long tensorOffset,
                             MemorySegment dst, long offset) {
        return encode(uuidMsb, uuidLsb, requestId, producer, tensor.dtype(), (Object) tensor, nbytes, placement, fileName,
            tensorOffset, dst, offset);
    }

    /** As {@link #encode(long, long, String, String, Tensor, long, Placement, String, long, MemorySegment, long)}, for a shape of dimensions. */
    public static int encode(long uuidMsb, long uuidLsb, String requestId, String producer, DType dtype, long[] shape,
                             long nbytes, Placement placement, String fileName, long tensorOffset,
                             MemorySegment dst, long offset) {
        return encode(uuidMsb, uuidLsb, requestId, producer, dtype, (Object) shape, nbytes, placement, fileName,
            tensorOffset, dst, offset);
    }

    private static int encode(long uuidMsb, long uuidLsb, String requestId, String producer, DType dtype, Object shape,
                              long nbytes, Placement placement, String fileName, long tensorOffset,
                              MemorySegment dst, long offset) {
        int rank = rank(shape);
        int requestIdBytes = utf8Length(requestId);
        if (rank > MAX_RANK || requestIdBytes > MAX_REQUEST_ID_BYTES
            || producer.length() > 64 || fileName.length() > 255) {
            throw new IllegalArgumentException("descriptor cannot be encoded: rank=" + rank + " (max " + MAX_RANK
                + "), requestIdBytes=" + requestIdBytes + " (max " + MAX_REQUEST_ID_BYTES + ")");
        }
        int length = encodedLength(requestIdBytes, producer, rank, fileName);
        if (offset < 0 || offset + length > dst.byteSize()) {
            throw new IndexOutOfBoundsException("descriptor of " + length + " bytes does not fit at offset " + offset
                + " of " + dst.byteSize() + " bytes");
        }
        long base = offset;
        dst.set(INT, base + MAGIC_OFFSET, MAGIC);
        dst.set(SHORT, base + VERSION_OFFSET, VERSION);
        dst.set(SHORT, base + RESERVED_OFFSET, (short) 0);
        dst.set(INT, base + LENGTH_OFFSET, length);
        dst.set(ValueLayout.JAVA_BYTE, base + DTYPE_OFFSET, (byte) dtype.code());
        dst.set(ValueLayout.JAVA_BYTE, base + PLACEMENT_OFFSET, (byte) placement.code());
        dst.set(ValueLayout.JAVA_BYTE, base + RANK_OFFSET, (byte) rank);
        dst.set(ValueLayout.JAVA_BYTE, base + FLAGS_OFFSET, (byte) 0);
        dst.set(LONG, base + UUID_MSB_OFFSET, uuidMsb);
        dst.set(LONG, base + UUID_LSB_OFFSET, uuidLsb);
        dst.set(LONG, base + NBYTES_OFFSET, nbytes);
        dst.set(LONG, base + OFFSET_OFFSET, tensorOffset);
        long p = base + SHAPE_OFFSET;
        for (int i = 0; i < rank; i++, p += 8) {
            dst.set(LONG, p, dim(shape, i));
        }
        p = putString(dst, p, requestId, requestIdBytes);
        p = putName(dst, p, producer);
        putName(dst, p, fileName);
        return length;
    }

    /**
     * Decodes and validates one record that fills {@code src} exactly, for a process of {@code deployment}:
     * the file it names must be one of that deployment's.
     *
     * @throws DescriptorFormatException naming the first field that fails
     */
    public static TensorDescriptor decode(byte[] src, Deployment deployment) {
        return decode(MemorySegment.ofArray(src), 0, src.length, deployment);
    }

    /** The length a record at {@code offset} declares, for walking a batch; validated against {@code available}. */
    public static int recordLength(MemorySegment src, long offset, long available) {
        if (available < SHAPE_OFFSET) {
            throw new DescriptorFormatException("length", "truncated: " + available + " bytes, header needs " + SHAPE_OFFSET);
        }
        int length = src.get(INT, offset + LENGTH_OFFSET);
        if (length < SHAPE_OFFSET + 6 || length > MAX_RECORD_BYTES || length > available) {
            throw new DescriptorFormatException("length", "declared " + length + " bytes, available " + available
                + ", accepted " + (SHAPE_OFFSET + 6) + ".." + MAX_RECORD_BYTES);
        }
        return length;
    }

    /**
     * Decodes and validates the record at {@code offset}, which must be exactly {@code length} bytes.
     *
     * @throws DescriptorFormatException naming the first field that fails
     */
    public static TensorDescriptor decode(MemorySegment src, long offset, long length, Deployment deployment) {
        return decode(src, offset, length, deployment.namespace());
    }

    /** As {@link #decode(MemorySegment, long, long, Deployment)}, for the deployment's namespace id. */
    public static TensorDescriptor decode(MemorySegment src, long offset, long length, String namespace) {
        validate(src, offset, length, namespace);
        int rank = src.get(ValueLayout.JAVA_BYTE, offset + RANK_OFFSET);
        long[] shape = new long[rank];
        for (int i = 0; i < rank; i++) {
            shape[i] = src.get(LONG, offset + SHAPE_OFFSET + 8L * i);
        }
        long p = offset + SHAPE_OFFSET + 8L * rank;
        int n = Short.toUnsignedInt(src.get(SHORT, p));
        String requestId = decodeString(src, p + 2, n, STRING_FIELDS[0], true);
        p += 2 + n;
        n = Short.toUnsignedInt(src.get(SHORT, p));
        String producer = KnownNames.decoded(src, p + 2, n, STRING_FIELDS[1]);
        UUID uuid = new UUID(uuidMsb(src, offset), uuidLsb(src, offset));
        return new TensorDescriptor(uuid, requestId, producer, dtype(src, offset), shape, nbytes(src, offset),
            placement(src, offset), fileName(src, offset), tensorOffset(src, offset));
    }

    /**
     * Validates the record at {@code offset}, exactly {@code length} bytes, as {@link #decode} does, without
     * making the descriptor: then its fields can be read in place ({@link #uuidMsb}, {@link #fileName}, ...).
     * Allocates nothing for the names this thread saw last.
     *
     * @throws DescriptorFormatException naming the first field that fails
     */
    public static void validate(MemorySegment src, long offset, long length, Deployment deployment) {
        validate(src, offset, length, deployment.namespace());
    }

    /** As {@link #validate(MemorySegment, long, long, Deployment)}, for the deployment's namespace id. */
    public static void validate(MemorySegment src, long offset, long length, String namespace) {
        if (length < SHAPE_OFFSET || offset < 0 || offset + length > src.byteSize()) {
            throw new DescriptorFormatException("length", "truncated: " + length + " bytes, header needs " + SHAPE_OFFSET);
        }
        // Read in place at `offset`: every read below is checked against `length` first.
        int magic = src.get(INT, offset + MAGIC_OFFSET);
        if (magic != MAGIC) {
            throw new DescriptorFormatException("magic", "found 0x" + Integer.toHexString(magic) + ", expected 0x"
                + Integer.toHexString(MAGIC));
        }
        short version = src.get(SHORT, offset + VERSION_OFFSET);
        if (version != VERSION) {
            throw new DescriptorFormatException("version", "found " + version + ", this reader understands " + VERSION);
        }
        if (src.get(SHORT, offset + RESERVED_OFFSET) != 0) {
            throw new DescriptorFormatException("reserved", "reserved bytes must be zero");
        }
        int flags = src.get(ValueLayout.JAVA_BYTE, offset + FLAGS_OFFSET);
        if ((flags & ~FLAG_POSITION) != 0) {
            throw new DescriptorFormatException("flags", "unknown flag bits 0x" + Integer.toHexString(flags & 0xFF));
        }
        int declared = src.get(INT, offset + LENGTH_OFFSET);
        if (declared != length) {
            throw new DescriptorFormatException("length", "declared " + declared + " bytes, record has " + length);
        }
        int dtypeCode = src.get(ValueLayout.JAVA_BYTE, offset + DTYPE_OFFSET);
        DType dtype = DType.ofCode(dtypeCode);
        if (dtype == null) {
            throw new DescriptorFormatException("dtype", "unknown code " + dtypeCode);
        }
        int placementCode = src.get(ValueLayout.JAVA_BYTE, offset + PLACEMENT_OFFSET);
        Placement placement = Placement.ofCode(placementCode);
        if (placement == null) {
            throw new DescriptorFormatException("placement", "unknown code " + placementCode);
        }
        int rank = src.get(ValueLayout.JAVA_BYTE, offset + RANK_OFFSET);
        if (rank < 0 || rank > MAX_RANK) {
            throw new DescriptorFormatException("rank", "found " + rank + ", accepted 0.." + MAX_RANK);
        }
        long p = SHAPE_OFFSET + 8L * rank;
        if (p + 6 > length) {
            throw new DescriptorFormatException("shape", "truncated: rank " + rank + " needs " + (p + 6) + " bytes");
        }
        long elements = 1;
        for (int i = 0; i < rank; i++) {
            long dim = src.get(LONG, offset + SHAPE_OFFSET + 8L * i);
            if (dim < 0) {
                throw new DescriptorFormatException("shape", "dimension " + i + " is negative: " + dim);
            }
            elements = multiplyOrMinus(elements, dim);
            if (elements < 0) {
                throw new DescriptorFormatException("shape", "element count overflows");
            }
        }
        long expectedBytes = multiplyOrMinus(elements, dtype.itemBytes());
        long nbytes = src.get(LONG, offset + NBYTES_OFFSET);
        if (expectedBytes < 0 || nbytes != expectedBytes) {
            throw new DescriptorFormatException("nbytes", "found " + nbytes + ", shape x item size is " + expectedBytes);
        }
        long tensorOffset = src.get(LONG, offset + OFFSET_OFFSET);
        if (tensorOffset < 0 || tensorOffset > Long.MAX_VALUE - nbytes) {
            throw new DescriptorFormatException("offset", "found " + tensorOffset + " (negative or overflowing with nbytes)");
        }
        if (placement == Placement.SPILL && tensorOffset != 0) {
            throw new DescriptorFormatException("offset", "spill files start at 0, found " + tensorOffset);
        }
        String producer = null;
        String fileName = null;
        for (int s = 0; s < 3; s++) {
            if (p + 2 > length) {
                throw new DescriptorFormatException(STRING_FIELDS[s], "truncated");
            }
            int n = Short.toUnsignedInt(src.get(SHORT, offset + p));
            p += 2;
            if (n > STRING_LIMITS[s] || p + n > length) {
                throw new DescriptorFormatException(STRING_FIELDS[s], "length " + n + " exceeds the record or the limit "
                    + STRING_LIMITS[s]);
            }
            // Producers and file names repeat (a producer has a few segments): this thread's recent ones are reused.
            switch (s) {
                case 0 -> checkUtf8(src, offset + p, n);
                case 1 -> producer = KnownNames.decoded(src, offset + p, n, STRING_FIELDS[s]);
                default -> fileName = KnownNames.decoded(src, offset + p, n, STRING_FIELDS[s]);
            }
            p += n;
        }
        if (p != length) {
            throw new DescriptorFormatException("length", "record has " + (length - p) + " trailing bytes");
        }
        if (!ShmNames.isEntity(producer)) {
            throw new DescriptorFormatException("producer", "not an entity name: " + printable(producer));
        }
        if (!ShmNames.isOurs(namespace, fileName, placement == Placement.SPILL)) {
            throw new DescriptorFormatException("fileName", "not a " + (placement == Placement.SPILL ? "spill file" : "segment")
                + " of namespace " + namespace + ": " + printable(fileName));
        }
    }

    // Field readers of a record that passed validate().

    /** The most significant half of a validated record's uuid. */
    public static long uuidMsb(MemorySegment src, long offset) {
        return src.get(LONG, offset + UUID_MSB_OFFSET);
    }

    /** The least significant half of a validated record's uuid. */
    public static long uuidLsb(MemorySegment src, long offset) {
        return src.get(LONG, offset + UUID_LSB_OFFSET);
    }

    public static DType dtype(MemorySegment src, long offset) {
        return DType.ofCode(src.get(ValueLayout.JAVA_BYTE, offset + DTYPE_OFFSET));
    }

    public static Placement placement(MemorySegment src, long offset) {
        return Placement.ofCode(src.get(ValueLayout.JAVA_BYTE, offset + PLACEMENT_OFFSET));
    }

    /** Whether a validated record's producer learns of its handling from the consumer's handled position. */
    public static boolean byPosition(MemorySegment src, long offset) {
        return (src.get(ValueLayout.JAVA_BYTE, offset + FLAGS_OFFSET) & FLAG_POSITION) != 0;
    }

    public static long nbytes(MemorySegment src, long offset) {
        return src.get(LONG, offset + NBYTES_OFFSET);
    }

    public static int rank(MemorySegment src, long offset) {
        return src.get(ValueLayout.JAVA_BYTE, offset + RANK_OFFSET);
    }

    /** Dimension {@code i} of a validated record's shape ({@code 0 <= i < rank}). */
    public static long dim(MemorySegment src, long offset, int i) {
        return src.get(LONG, offset + SHAPE_OFFSET + 8L * i);
    }

    /** Where a validated record's request id starts: its UTF-8 bytes, {@link #requestIdLength} of them. */
    public static long requestIdAt(MemorySegment src, long offset) {
        return offset + SHAPE_OFFSET + 8L * src.get(ValueLayout.JAVA_BYTE, offset + RANK_OFFSET) + 2;
    }

    /** How many UTF-8 bytes a validated record's request id has. */
    public static int requestIdLength(MemorySegment src, long offset) {
        return Short.toUnsignedInt(src.get(SHORT, requestIdAt(src, offset) - 2));
    }

    /** Where the tensor starts in its file. */
    public static long tensorOffset(MemorySegment src, long offset) {
        return src.get(LONG, offset + OFFSET_OFFSET);
    }

    /** The file that holds the tensor (this thread's recent names are reused, so a repeated one allocates nothing). */
    public static String fileName(MemorySegment src, long offset) {
        long p = offset + SHAPE_OFFSET + 8L * src.get(ValueLayout.JAVA_BYTE, offset + RANK_OFFSET);
        p += 2 + Short.toUnsignedInt(src.get(SHORT, p)); // requestId
        p += 2 + Short.toUnsignedInt(src.get(SHORT, p)); // producer
        return KnownNames.decoded(src, p + 2, Short.toUnsignedInt(src.get(SHORT, p)), STRING_FIELDS[2]);
    }

    // ASCII goes byte by byte (no allocation); anything else through its UTF-8 bytes.
    private static long putString(MemorySegment out, long p, String s, int encodedBytes) {
        out.set(SHORT, p, (short) encodedBytes);
        if (encodedBytes == s.length()) {
            int n = s.length();
            int i = 0;
            for (; i + 8 <= n; i += 8) { // eight characters per store
                long packed = 0;
                for (int b = 7; b >= 0; b--) {
                    packed = packed << 8 | (s.charAt(i + b) & 0xFF);
                }
                out.set(LONG, p + 2 + i, packed);
            }
            for (; i < n; i++) {
                out.set(ValueLayout.JAVA_BYTE, p + 2 + i, (byte) s.charAt(i));
            }
        } else {
            MemorySegment.copy(MemorySegment.ofArray(utf8(s)), 0, out, p + 2, encodedBytes);
        }
        return p + 2 + encodedBytes;
    }

    // A producer's and a segment's names repeat on every record: their bytes are kept, and copied in one go.
    private static long putName(MemorySegment out, long p, String name) {
        out.set(SHORT, p, (short) name.length());
        MemorySegment.copy(KnownNames.encoded(name), 0, out, p + 2, name.length());
        return p + 2 + name.length();
    }

    private static int utf8Length(String s) {
        for (int i = 0; i < s.length(); i++) {
            if (s.charAt(i) >= 0x80) {
                return utf8(s).length;
            }
        }
        return s.length();
    }

    private static final String[] STRING_FIELDS = {"requestId", "producer", "fileName"};
    private static final int[] STRING_LIMITS = {MAX_REQUEST_ID_BYTES, 64, 255};

    // A request id is checked for valid UTF-8; an ASCII one (the common case) without making a String.
    private static void checkUtf8(MemorySegment src, long offset, int n) {
        for (int i = 0; i < n; i++) {
            if (src.get(ValueLayout.JAVA_BYTE, offset + i) < 0) {
                decodeString(src, offset, n, STRING_FIELDS[0], true);
                return;
            }
        }
    }

    static String decodeString(MemorySegment src, long offset, int n, String field, boolean utf8) {
        byte[] raw = KnownNames.scratch();
        MemorySegment.copy(src, ValueLayout.JAVA_BYTE, offset, raw, 0, n);
        boolean ascii = true;
        for (int i = 0; i < n; i++) {
            ascii &= raw[i] >= 0;
        }
        if (ascii) {
            return new String(raw, 0, n, StandardCharsets.ISO_8859_1); // the common case, without a decoder
        }
        raw = Arrays.copyOf(raw, n);
        if (!utf8) {
            throw new DescriptorFormatException(field, "not valid ASCII");
        }
        try {
            return (utf8 ? StandardCharsets.UTF_8 : StandardCharsets.US_ASCII).newDecoder()
                .onMalformedInput(CodingErrorAction.REPORT).onUnmappableCharacter(CodingErrorAction.REPORT)
                .decode(ByteBuffer.wrap(raw)).toString();
        } catch (CharacterCodingException e) {
            throw new DescriptorFormatException(field, "not valid " + (utf8 ? "UTF-8" : "ASCII"));
        }
    }

    private static long multiplyOrMinus(long a, long b) {
        long hi = Math.multiplyHigh(a, b);
        long lo = a * b;
        return hi != 0 || lo < 0 ? -1 : lo;
    }

    private static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    private static String printable(String s) {
        return s.replaceAll("[^\\x20-\\x7e]", "?");
    }
}
