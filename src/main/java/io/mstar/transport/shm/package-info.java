/** Shared-memory files: created exclusively, committed, mapped once; and peers' files, checked then mapped. */
package io.mstar.transport.shm;
