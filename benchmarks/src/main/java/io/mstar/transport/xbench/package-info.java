/**
 * The cross-process benchmark: the arena (send and claim paths), the file transport, Aeron IPC and a
 * Unix-domain socket, each between a fresh producer JVM and a fresh consumer JVM, under one protocol,
 * beside single-process references ({@link io.mstar.transport.xbench.XBench}).
 */
package io.mstar.transport.xbench;
