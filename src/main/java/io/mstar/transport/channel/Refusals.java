package io.mstar.transport.channel;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.concurrent.atomic.AtomicLong;

/**
 * What a mailbox refused from its writers: messages that did not decode (or whose listener threw) and
 * ring records of impossible length or type. Each is counted, and said at WARN at most once per ten
 * seconds, the rest at DEBUG: a hostile writer must not flood the log. Written by the polling thread;
 * the counts are readable from any.
 */
final class Refusals {
    private static final Logger LOG = LoggerFactory.getLogger(ShmMailbox.class);
    private static final long WARN_EVERY_NS = 10_000_000_000L;

    private final String entity;
    private final AtomicLong messages = new AtomicLong();
    private final AtomicLong garbageRecords = new AtomicLong();
    private long warnedAtNs;

    Refusals(String entity) {
        this.entity = entity;
    }

    void message(int type, int length, RuntimeException why) {
        long total = messages.incrementAndGet();
        (warnNow() ? LOG.atWarn() : LOG.atDebug()).log("mailbox message refused: entity={}, type={}, length={},"
            + " refused so far={}: {}", entity, type, length, total, why.toString());
    }

    void garbage(long records, long bytesSoFar) {
        long total = garbageRecords.addAndGet(records);
        (warnNow() ? LOG.atWarn() : LOG.atDebug()).log("mailbox skipped records of impossible length or type (a"
            + " writer of this user wrote garbage into the ring): entity={}, skippedRecords={}, skippedBytes={}",
            entity, total, bytesSoFar);
    }

    long messages() {
        return messages.get();
    }

    long garbageRecords() {
        return garbageRecords.get();
    }

    private boolean warnNow() {
        long now = System.nanoTime();
        if (warnedAtNs != 0 && now - warnedAtNs < WARN_EVERY_NS) {
            return false;
        }
        warnedAtNs = now;
        return true;
    }
}
