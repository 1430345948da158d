/** The file-per-tensor transport: a transport of its own and the arena's spill path. */
package io.mstar.transport.spill;
