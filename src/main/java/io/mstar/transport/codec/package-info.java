/** The binary descriptor format: encoding, and decoding that validates every field. */
package io.mstar.transport.codec;
