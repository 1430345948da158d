/** The few libc calls the library needs (open, fallocate, mmap, statvfs, ...), bound through the FFM Linker. */
package io.mstar.transport.posix;
