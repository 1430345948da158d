/**
 * The public API: the {@link io.mstar.transport.Deployment} a process describes itself with, the
 * transport and channel interfaces with their factories and capabilities, tensors and descriptors,
 * configuration, statistics snapshots and the exceptions callers can catch.
 */
package io.mstar.transport;
