package io.mstar.transport.lifecycle;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class NamespaceTest {
    // Expected values computed independently: hashlib.sha1(b"...").hexdigest()[:16] in Python.
    @Test
    void matchesTheSharedRuleWithAndWithoutToken() {
        assertEquals("1d107e4ffe907c34", Namespace.of(null, "/tmp/conductor.sock").id());
        assertEquals("1d107e4ffe907c34", Namespace.of("", "/tmp/conductor.sock").id());
        assertEquals("88a8226c9b77ae7b", Namespace.of("tok123", "/tmp/conductor.sock").id());
    }

    @Test
    void refusesEmptyEndpointAndBadIds() {
        assertThrows(IllegalArgumentException.class, () -> Namespace.of("t", ""));
        assertThrows(IllegalArgumentException.class, () -> new Namespace("../../etc/passwd"));
    }

    @Test
    void segmentNamesFollowThePatternAndRefuseBadEntities() {
        Namespace ns = Namespace.of(null, "e");
        String name = ShmNames.segment(ns, "worker-1", "0a1b2c3d", 7);
        assertEquals("mstar_" + ns.id() + "_arena_worker-1_0a1b2c3d_7", name);
        assertTrue(ShmNames.SEGMENT.matcher(name).matches());
        for (String bad : new String[] {"", "a_b", "a/b", "..", "a b", "x".repeat(65)}) {
            assertThrows(IllegalArgumentException.class, () -> ShmNames.segment(ns, bad, "0a1b2c3d", 0), bad);
        }
    }
}
