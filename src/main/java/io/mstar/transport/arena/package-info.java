/** Shared-memory segments, the first-fit allocator and the segmented arena that grows over them. */
package io.mstar.transport.arena;
