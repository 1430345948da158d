package io.mstar.transport.exceptions;

/**
 * A descriptor that cannot be trusted: truncated, of another version, or with a field out of range.
 * {@link #field()} names the field; nothing was mapped or read on its behalf.
 */
public class DescriptorFormatException extends MstarTransportException {
    private static final long serialVersionUID = 1L;

    private final String field;

    public DescriptorFormatException(String field, String message) {
        super("invalid descriptor: field=" + field + ", " + message);
        this.field = field;
    }

    /** The offending field, e.g. {@code nbytes}. */
    public String field() {
        return field;
    }
}
