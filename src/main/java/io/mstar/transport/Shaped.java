package io.mstar.transport;

/** Something with a tensor shape, readable without copying it. */
public interface Shaped {
    int rank();

    /** Dimension {@code i}. */
    long dim(int i);
}
