/** What a transport counts, and the snapshot it reports: one set of counters shared by both transports. */
package io.mstar.transport.metrics;
