package io.mstar.transport.cli;

import java.io.IOException;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.io.PrintStream;
import java.util.Arrays;
import java.util.jar.Attributes;
import java.util.jar.JarFile;

/**
 * {@code mstar-shm}: the operator's command. Exit codes: 0 success, 1 the command found a problem,
 * 2 usage error.
 */
public final class MstarShm {
    private MstarShm() {
    }

    static final String USAGE = """
        usage: mstar-shm <command> [options]     (mstar-shm --version: the library's version)
        commands:
          demo [--seconds-per-size S] [--batch N] [--json]
              start a consumer process and a producer process, stream tensors of 4 KiB to 16 MiB
              through the arena and then through the file transport, print a table per size
          doctor [--dir DIR] [--all-users] [--json]
              per deployment namespace and owner: live or dead, its files and bytes, the processes
              that map them; totals against the file system. Exit 0 healthy, 1 found files of
              dead owners (and prints the command that removes them), 2 usage error
          reclaim [--dir DIR] [--yes] [--all-users] [--json]
              list (dry run) or remove (--yes) the files of dead owners; your own files only,
              every user's with --all-users (root only)
          stats [--dir DIR] [--map] [--json]
              the latest stats snapshot of each arena that publishes one (stats logging on);
              --map draws each segment's used and free ranges as a bar
          selftest [--dir DIR] [--json]
              move one checksummed tensor through the arena and the mailbox in this JVM, as
              launched, and probe CUDA: exit 0 when the library works here
          churn [--seconds S] [--segment-mb M] [--max-segments N] [--json]
              create an arena in a temporary shared-memory directory, churn it with a mixed
              workload (4 KiB to 16 MiB, copies included), print its stats snapshot and map
        demo and churn show progress on a terminal only; --json prints one JSON document for machines
        """;

    public static void main(String[] args) {
        System.exit(run(args, System.out, System.err));
    }

    static int run(String[] args, PrintStream out, PrintStream err) {
        if (args.length > 0 && (args[0].equals("--version") || args[0].equals("version"))) {
            out.println("mstar-shm " + version());
            return 0;
        }
        if (args.length == 0 || args[0].equals("--help") || args[0].equals("-h")) {
            (args.length == 0 ? err : out).print(USAGE);
            return args.length == 0 ? 2 : 0;
        }
        String[] rest = Arrays.copyOfRange(args, 1, args.length);
        try {
            return switch (args[0]) {
                case "churn" -> ChurnCommand.run(rest, out);
                case "demo" -> DemoCommand.run(rest, out);
                case "doctor" -> DoctorCommand.doctor(rest, out);
                case "reclaim" -> DoctorCommand.reclaim(rest, out);
                case "stats" -> StatsCommand.run(rest, out);
                case "selftest" -> SelfTestCommand.run(rest, out);
                case "demo-consumer" -> DemoCommand.consumer(rest);
                case "demo-producer" -> DemoCommand.producer(rest);
                default -> {
                    err.println("unknown command: " + args[0]);
                    err.print(USAGE);
                    yield 2;
                }
            };
        } catch (UsageException e) {
            err.println(e.getMessage());
            err.print(USAGE);
            return 2;
        } catch (IOException e) {
            err.println("mstar-shm " + args[0] + " failed: " + e);
            return 1;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return 1;
        }
    }

    /** The Implementation-Version in the manifest of the jar this runs from (class path or module path). */
    static String version() {
        try {
            Path jar = Path.of(MstarShm.class.getProtectionDomain().getCodeSource().getLocation().toURI());
            if (Files.isRegularFile(jar)) {
                try (JarFile file = new JarFile(jar.toFile())) {
                    String version = file.getManifest() == null ? null
                        : file.getManifest().getMainAttributes().getValue(Attributes.Name.IMPLEMENTATION_VERSION);
                    if (version != null) {
                        return version;
                    }
                }
            }
        } catch (IOException | URISyntaxException | SecurityException e) {
            // no version to show
        }
        return "unknown (not run from a jar)";
    }

    /** A command line that does not parse. */
    static final class UsageException extends RuntimeException {
        private static final long serialVersionUID = 1L;

        UsageException(String message) {
            super(message);
        }
    }

    /** The value after option {@code args[i]}, as a positive number. */
    static double number(String[] args, int i) {
        if (i + 1 >= args.length) {
            throw new UsageException("option " + args[i] + " needs a value");
        }
        try {
            double value = Double.parseDouble(args[i + 1]);
            if (!(value > 0)) {
                throw new NumberFormatException();
            }
            return value;
        } catch (NumberFormatException e) {
            throw new UsageException("option " + args[i] + " needs a positive number: " + args[i + 1]);
        }
    }
}
