/** A file per tensor: the spill store the arena and the file transport share, and the file transport. */
package io.mstar.transport.spill;
