/** The {@code mstar-shm} command. */
package io.mstar.transport.cli;
