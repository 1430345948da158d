package io.mstar.transport.endpoint;

import io.mstar.transport.DType;
import io.mstar.transport.IncomingTensor;
import io.mstar.transport.ReceivedTensor;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.TensorHandler;
import io.mstar.transport.TensorRecords;
import io.mstar.transport.TensorTransport;
import io.mstar.transport.codec.DescriptorCodec;
import io.mstar.transport.shm.MappedView;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.CharBuffer;
import java.nio.charset.StandardCharsets;

/**
 * The endpoint's {@link IncomingTensor}: one per endpoint, pointed at each record and its bytes in turn
 * (so a handler's tensor allocates nothing), and the {@link TensorRecords.Reader} the transport hands the bytes to.
 * Used by the thread that holds the endpoint's handling lock ({@link MailboxReading}).
 */
final class Incoming implements IncomingTensor, TensorRecords.Reader, CharSequence {
    private final Endpoint endpoint;
    private TensorHandler handler;
    private String from;
    private MemorySegment record;
    private long at;
    private int length;
    private MemorySegment memory;
    // The handler's views of shared memory live in a scope of its call, made at its first memory() or data() and
    // closed as it returns: a view kept past the handler refuses access instead of showing the slot's next tensor.
    private Arena scope;
    private MemorySegment scopedMemory;
    private long offset;
    private long nbytes;
    private boolean kept;
    private boolean ackedEarly; // ACKed from inside its handler: a handler that closes the endpoint
    private boolean handedOver; // the last record passed every check and reached its handler
    private boolean inHandler;
    // The request id: its bytes in the record, read as ASCII; another text is decoded once.
    private long textAt;
    private int textLength;
    private String decodedText;

    Incoming(Endpoint endpoint) {
        this.endpoint = endpoint;
    }

    /**
     * Hands one validated-on-receive record's tensor to {@code to}; {@link #keptOrAcked} then says whether its ACK is
     * someone else's, whether the handler returned or threw.
     */
    void deliver(String sender, MemorySegment in, long recordAt, int recordLength, TensorHandler to,
                 TensorTransport transport) {
        this.handler = to;
        this.from = sender;
        this.record = in;
        this.at = recordAt;
        this.length = recordLength;
        this.kept = false;
        this.ackedEarly = false;
        this.handedOver = false;
        try {
            transport.records().receive(in, recordAt, recordLength, this); // validates, then calls read()
        } finally {
            this.inHandler = false;
            if (scope != null) {
                scope.close();
                scope = null;
            }
            this.scopedMemory = null;
            this.memory = null;
            this.record = null;
            this.handler = null;
        }
    }

    /** Whether the last tensor handed over was kept (its view's close ACKs it) or ACKed by {@link #ackNow}. */
    boolean keptOrAcked() {
        return kept || ackedEarly;
    }

    /** Whether the last tensor handed over was kept past its handler. */
    boolean kept() {
        return kept;
    }

    /** Whether the last record passed every check and reached its handler (else what it threw refused the record). */
    boolean handedOver() {
        return handedOver;
    }

    /** ACKs the tensor whose handler runs now, unless kept: its handler closes the endpoint, so it is handled. */
    void ackNow() {
        if (inHandler && !kept && !ackedEarly) {
            ackedEarly = true;
            endpoint.ack(from, DescriptorCodec.uuidMsb(record, at), DescriptorCodec.uuidLsb(record, at), false);
        }
    }

    @Override
    public void read(MemorySegment bytes, long bytesAt, long size) {
        this.memory = bytes;
        this.offset = bytesAt;
        this.nbytes = size;
        textAt = DescriptorCodec.requestIdAt(record, at);
        textLength = DescriptorCodec.requestIdLength(record, at);
        decodedText = null;
        for (int i = 0; i < textLength; i++) {
            if (record.get(ValueLayout.JAVA_BYTE, textAt + i) < 0) { // not ASCII: decode it once
                decodedText = new String(record.asSlice(textAt, textLength).toArray(ValueLayout.JAVA_BYTE),
                    StandardCharsets.UTF_8);
                break;
            }
        }
        inHandler = true;
        handedOver = true;
        handler.onTensor(this);
    }

    private void checkInHandler() {
        if (!inHandler) {
            throw new IllegalStateException("an IncomingTensor is valid only during its handler's call; keep() it to"
                + " hold it longer");
        }
    }

    @Override
    public String from() {
        checkInHandler();
        return from;
    }

    @Override
    public CharSequence requestId() {
        checkInHandler();
        return decodedText != null ? CharBuffer.wrap(decodedText) : this; // a view either way, never a String
    }

    @Override
    public long uuidMsb() {
        checkInHandler();
        return DescriptorCodec.uuidMsb(record, at);
    }

    @Override
    public long uuidLsb() {
        checkInHandler();
        return DescriptorCodec.uuidLsb(record, at);
    }

    @Override
    public DType dtype() {
        checkInHandler();
        return DescriptorCodec.dtype(record, at);
    }

    @Override
    public int rank() {
        checkInHandler();
        return DescriptorCodec.rank(record, at);
    }

    @Override
    public long dim(int i) {
        checkInHandler();
        if (i < 0 || i >= rank()) {
            throw new IndexOutOfBoundsException("dimension " + i + " of a rank " + rank() + " tensor");
        }
        return DescriptorCodec.dim(record, at, i);
    }

    @Override
    public long nbytes() {
        checkInHandler();
        return nbytes;
    }

    @Override
    public MemorySegment memory() {
        checkInHandler();
        if (scopedMemory == null) {
            if (memory.isNative()) {
                scope = Arena.ofConfined();
                scopedMemory = memory.reinterpret(scope, null);
            } else {
                scopedMemory = memory; // bytes of their own (a copy): no other tensor's can ever show there
            }
        }
        return scopedMemory;
    }

    @Override
    public long offset() {
        checkInHandler();
        return offset;
    }

    @Override
    public MemorySegment data() {
        return memory().asSlice(offset, nbytes);
    }

    @Override
    public TensorDescriptor descriptor() {
        checkInHandler();
        return DescriptorCodec.decode(record, at, length, endpoint.deployment());
    }

    @Override
    public ReceivedTensor keep() {
        checkInHandler();
        if (kept) {
            throw new IllegalStateException("this tensor is kept already: close the view keep() returned");
        }
        ReceivedTensor view = endpoint.transport().receive(descriptor());
        kept = true;
        return new KeptTensor(view, from, uuidMsb(), uuidLsb(), endpoint);
    }

    // The request id as ASCII text, straight from the record.

    @Override
    public int length() {
        return textLength;
    }

    @Override
    public char charAt(int index) {
        checkInHandler();
        if (index < 0 || index >= textLength) {
            throw new IndexOutOfBoundsException(index);
        }
        return (char) record.get(ValueLayout.JAVA_BYTE, textAt + index);
    }

    @Override
    public CharSequence subSequence(int start, int end) {
        return toString().subSequence(start, end);
    }

    @Override
    public String toString() {
        if (!inHandler) {
            return "IncomingTensor[outside its handler]";
        }
        return new String(record.asSlice(textAt, textLength).toArray(ValueLayout.JAVA_BYTE), StandardCharsets.US_ASCII);
    }

    /** A tensor kept past its handler: the view, and the ACK its close sends. */
    private static final class KeptTensor implements ReceivedTensor {
        private final ReceivedTensor view;
        private final String from;
        private final long msb;
        private final long lsb;
        private final Endpoint endpoint;
        private boolean closed;

        KeptTensor(ReceivedTensor view, String from, long msb, long lsb, Endpoint endpoint) {
            this.view = view;
            this.from = from;
            this.msb = msb;
            this.lsb = lsb;
            this.endpoint = endpoint;
        }

        @Override
        public TensorDescriptor descriptor() {
            return view.descriptor();
        }

        @Override
        public MemorySegment data() {
            return view.data();
        }

        /**
         * Releases the view, then ACKs the tensor to its producer; or refuses it when its slot was reused while it
         * was kept (counted in {@code staleReads}).
         */
        @Override
        public synchronized void close() {
            if (!closed) {
                closed = true;
                boolean intact = !(view instanceof MappedView mapped) || mapped.intact();
                view.close();
                endpoint.ack(from, msb, lsb, !intact);
            }
        }
    }
}
