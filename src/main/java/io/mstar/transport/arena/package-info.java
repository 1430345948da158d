/**
 * The arena transport and what it is made of: the first-fit allocator, the segmented arena that grows
 * over shared-memory segments, and the transport's roles (the capacity ladder, the in-flight table,
 * consumer liveness, the device path, periodic maintenance), wired together by {@code ArenaTransport}.
 */
package io.mstar.transport.arena;
