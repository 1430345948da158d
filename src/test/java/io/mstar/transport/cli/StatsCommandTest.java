package io.mstar.transport.cli;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;

/** The stats command's text: one field a line, a quoted value whole (it once split cuda="not used yet" in three). */
class StatsCommandTest {
    @Test
    void aQuotedValueStaysOnOneLine() {
        assertEquals("  tensorsSent=3\n  cuda=\"not used yet\"\n  acks=3",
            StatsCommand.onePerLine("tensorsSent=3 cuda=\"not used yet\" acks=3"));
    }
}
