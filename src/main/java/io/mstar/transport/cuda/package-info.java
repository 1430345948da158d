/** The CUDA runtime calls the transports use, bound through JNA direct mapping, and the probe that says whether CUDA is usable. */
package io.mstar.transport.cuda;
