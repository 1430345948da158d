package io.mstar.transport.endpoint;

/**
 * Test-only seams of {@link MailboxReading}: each brings back an order that class once had, so that the usage
 * campaign can show what it did wrong. Off unless the system property says otherwise.
 */
final class ReadingSeams {
    /**
     * {@code -Dmstar.test.handlersHoldTheMailbox=true} runs the handlers under the reading lock, so a stage whose
     * handler waits on its own window is stuck.
     */
    static final boolean HANDLERS_HOLD_THE_MAILBOX = Boolean.getBoolean("mstar.test.handlersHoldTheMailbox");
    /**
     * {@code -Dmstar.test.errorDropsItsPoll=true} drops the rest of a poll, and the ACKs it gathered, when a handler
     * throws an Error, so their outcomes stay untold.
     */
    static final boolean ERROR_DROPS_ITS_POLL = Boolean.getBoolean("mstar.test.errorDropsItsPoll");

    private ReadingSeams() {
    }
}
