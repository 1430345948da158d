/**
 * A Micrometer {@code MeterBinder} for a transport ({@link io.mstar.transport.micrometer.TransportMetrics}).
 * Needs {@code io.micrometer:micrometer-core} on the class or module path (an optional dependency).
 */
package io.mstar.transport.micrometer;
