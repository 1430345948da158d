package io.mstar.transport.examples;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;

/** The README's pipeline command: two stage JVMs, stage B's outputs bitwise equal to one process's. */
@Timeout(value = 300, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class OnnxPipelineTest {
    @Test
    void twoStagesThroughTheArenaGiveWhatOneProcessGives() throws Exception {
        assertEquals(0, OnnxPipeline.check(20, 64));
    }
}
