/** Whether an ACK frees a tensor now, and who must still ACK each tensor sent to several consumers (fan-out). */
package io.mstar.transport.acks;
