/** The public API: configuration, statistics snapshots and the exceptions callers can catch. */
package io.mstar.transport;
