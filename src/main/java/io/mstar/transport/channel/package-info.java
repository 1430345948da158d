/** The built-in mailbox between processes: an Agrona many-to-one ring buffer in shared memory per receiving entity. */
package io.mstar.transport.channel;
