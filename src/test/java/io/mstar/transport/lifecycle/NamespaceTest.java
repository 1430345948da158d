package io.mstar.transport.lifecycle;

import io.mstar.transport.naming.Namespace;
import io.mstar.transport.naming.ShmNames;
import org.junit.jupiter.api.Test;

import java.util.UUID;

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

    // Computed with sha1sum, not with this code:
    //   printf 'ipc:///run/conductor.sock' | sha1sum            -> e315910833a35f9a...
    //   printf 'tok\0ipc:///run/conductor.sock' | sha1sum       -> 2cbc4166df48c7ca...
    //   printf 'ipc://api.sock' | sha1sum                        -> d9e0b3f4d8470e9a...
    @Test
    void anEndpointGivesM_starsNamespaceWithOrWithoutItsScheme() {
        for (String endpoint : new String[] {"ipc:///run/conductor.sock", "/run/conductor.sock"}) {
            assertEquals("e315910833a35f9a", Namespace.of(null, endpoint).id(), endpoint);
            assertEquals("e315910833a35f9a", Namespace.of("", endpoint).id(), "an empty token is unset: " + endpoint);
            assertEquals("2cbc4166df48c7ca", Namespace.of("tok", endpoint).id(), endpoint);
        }
        assertEquals("d9e0b3f4d8470e9a", Namespace.of(null, "ipc://api.sock").id());
        assertEquals("d9e0b3f4d8470e9a", Namespace.of(null, "api.sock").id());
        assertThrows(IllegalArgumentException.class, () -> Namespace.of(null, "ipc://"));
    }

    /** M*'s entity ids, and ones built to confuse a parser, give names that parse back to what made them. */
    @Test
    void m_starEntityIdsMakeNamesThatParseBackUnambiguously() {
        Namespace ns = Namespace.of(null, "names");
        UUID uuid = new UUID(0x0123456789abcdefL, 0x0fedcba987654321L);
        for (String entity : new String[] {"worker_0", "api_server.data", "a_0a1b2c3d_7", "x.next", "stats_arena",
            "-", "_", "a..b", "E".repeat(64)}) {
            assertEquals(new ShmNames.Parsed(ShmNames.Kind.SEGMENT, ns.id(), entity, "0a1b2c3d"),
                ShmNames.parse(ShmNames.segment(ns, entity, "0a1b2c3d", 12)), entity);
            assertEquals(new ShmNames.Parsed(ShmNames.Kind.SPILL, ns.id(), entity, "0a1b2c3d"),
                ShmNames.parse(ShmNames.spill(ns, entity, "0a1b2c3d", uuid)), entity);
            assertEquals(new ShmNames.Parsed(ShmNames.Kind.STATS, ns.id(), entity, "0a1b2c3d"),
                ShmNames.parse(ShmNames.stats(ns, entity, "0a1b2c3d")), entity);
            assertEquals(new ShmNames.Parsed(ShmNames.Kind.STATS, ns.id(), entity, "0a1b2c3d"),
                ShmNames.parse(ShmNames.stats(ns, entity, "0a1b2c3d") + ".next"), entity);
            assertEquals(new ShmNames.Parsed(ShmNames.Kind.MAILBOX, ns.id(), entity, "mailbox"),
                ShmNames.parse(ShmNames.mailbox(ns, entity)), entity);
            assertTrue(ShmNames.isOurs(ns.id(), ShmNames.segment(ns, entity, "0a1b2c3d", 12), false), entity);
        }
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
        for (String bad : new String[] {"", "a/b", ".", "..", "a b", "a@b", "x".repeat(65), "é"}) {
            assertThrows(IllegalArgumentException.class, () -> ShmNames.segment(ns, bad, "0a1b2c3d", 0), bad);
        }
    }
}
