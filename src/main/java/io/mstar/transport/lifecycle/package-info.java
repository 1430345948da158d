/**
 * Deployment namespaces, the names of every file the library creates under them, each file's owner and
 * its liveness lock, cleanup of dead owners' files, and the one idiom for closing.
 */
package io.mstar.transport.lifecycle;
