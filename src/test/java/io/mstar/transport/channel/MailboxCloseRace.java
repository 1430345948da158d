package io.mstar.transport.channel;

import io.mstar.transport.testing.ShmTestDir;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.ThreadLocalRandom;

/**
 * A child JVM main: closes mailboxes while other threads poll them and send through them, the way a
 * shutdown hook closes under application threads. An access to an unmapped ring kills this JVM with
 * SIGSEGV; exit 0 means every round ended with the threads' "closed" exceptions only.
 * Arguments: directory, rounds.
 */
public final class MailboxCloseRace {
    private MailboxCloseRace() {
    }

    public static void main(String[] args) throws Exception {
        Path dir = Path.of(args[0]);
        int rounds = Integer.parseInt(args[1]);
        List<UUID> acks = List.of(new UUID(1, 2), new UUID(3, 4));
        for (int round = 0; round < rounds; round++) {
            ShmMailbox receiver = ShmMailbox.open(ShmTestDir.deployment(dir, "close-race", "receiver"));
            ShmMailbox sender = ShmMailbox.open(ShmTestDir.deployment(dir, "close-race", "sender"));
            List<Throwable> unexpected = new ArrayList<>();
            List<Thread> threads = new ArrayList<>();
            threads.add(Thread.ofPlatform().start(() -> run(unexpected,
                () -> receiver.receive(new ShmMailboxTest.Inbox(), Duration.ofMillis(1)))));
            for (int i = 0; i < 2; i++) {
                threads.add(Thread.ofPlatform().start(() -> run(unexpected, () -> sender.sendAcks("receiver", acks))));
            }
            Thread.sleep(ThreadLocalRandom.current().nextInt(1, 4));
            // The sender's mapping of the receiver's ring goes first, then the receiver's own ring.
            sender.close();
            receiver.close();
            for (Thread t : threads) {
                t.join();
            }
            if (!unexpected.isEmpty()) {
                unexpected.getFirst().printStackTrace();
                System.exit(1);
            }
        }
        System.out.println("RESULT rounds=" + rounds);
    }

    // Repeats the action until the mailbox says it is closed.
    private static void run(List<Throwable> unexpected, Runnable action) {
        try {
            while (true) {
                action.run();
            }
        } catch (IllegalStateException closed) {
            // the expected end
        } catch (Throwable e) {
            synchronized (unexpected) {
                unexpected.add(e);
            }
        }
    }
}
