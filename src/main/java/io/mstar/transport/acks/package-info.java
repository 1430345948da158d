/** Who must still ACK each tensor sent to several consumers (fan-out). */
package io.mstar.transport.acks;
