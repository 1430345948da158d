/** Deployment namespaces and the names of every file the library creates under them. */
package io.mstar.transport.lifecycle;
