package io.mstar.transport.lifecycle;

import io.mstar.transport.naming.Namespace;
import io.mstar.transport.testing.ShmTestDir;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * Eight workers of a node starting at once join its budget file together, 50 times over: one makes it, the others
 * wait for it to be written, none crashes (once, one read the header of a file made and not yet sized). Threads
 * stand for the processes: each join opens the file for itself, and its locks are the open file's own.
 */
class NodeBudgetStartTest {
    @RegisterExtension
    final ShmTestDir shm = new ShmTestDir();

    @Test
    void eightWorkersJoiningAtOnceFiftyTimesNeverCrash() throws Exception {
        long budget = 64L << 20;
        ExecutorService workers = Executors.newFixedThreadPool(8);
        try {
            for (int round = 0; round < 50; round++) {
                Namespace namespace = Namespace.of("budget-start-test-token", "pipe-" + round);
                CyclicBarrier together = new CyclicBarrier(8);
                List<CompletableFuture<NodeBudget>> joins = new ArrayList<>();
                for (int w = 0; w < 8; w++) {
                    joins.add(CompletableFuture.supplyAsync(() -> {
                        try {
                            together.await(10, TimeUnit.SECONDS);
                        } catch (Exception e) {
                            throw new IllegalStateException(e);
                        }
                        return NodeBudget.join(shm.path(), namespace, budget, Owner.newNonce());
                    }, workers));
                }
                List<NodeBudget> joined = new ArrayList<>();
                try {
                    for (CompletableFuture<NodeBudget> j : joins) {
                        joined.add(j.get(60, TimeUnit.SECONDS)); // a crash fails here, with the round
                    }
                    for (NodeBudget b : joined) {
                        assertEquals(budget, b.budgetBytes(), "round " + round);
                    }
                } finally {
                    for (NodeBudget b : joined) {
                        b.close();
                    }
                }
            }
        } finally {
            workers.shutdownNow();
        }
    }
}
