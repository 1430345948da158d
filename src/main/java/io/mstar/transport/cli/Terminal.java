package io.mstar.transport.cli;

import java.io.Console;
import java.io.PrintStream;

/** Whether a command talks to a person: progress lines only then, never into a pipe or a file. */
final class Terminal {
    private Terminal() {
    }

    static boolean showsProgress(PrintStream out) {
        Console console = System.console();
        return out == System.out && console != null && console.isTerminal();
    }
}
