package io.mstar.transport.lifecycle;

import io.mstar.transport.exceptions.NativeCallException;
import io.mstar.transport.testing.ChildJvm;
import io.mstar.transport.testing.ShmTestDir;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.io.FileInputStream;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * A process out of file descriptors (EMFILE) makes owned files until it cannot: each file it made is either
 * handed out or removed, none is left at its name with no owner. Runs in a child JVM under {@code prlimit}
 * with a low {@code RLIMIT_NOFILE}, which it then uses up; with the descriptors it held closed, the directory
 * is empty. (Before the fix, the check that a new file was still ours opened it a second time; under EMFILE
 * that open failed, the file was taken for swept, the retry met EEXIST, and the file stayed.)
 */
class DescriptorLimitTest {
    private static final int LIMIT = 256;

    @RegisterExtension
    final ShmTestDir shm = new ShmTestDir();

    @Test
    void filesMadeUnderEmfileAreHandedOutOrRemovedNeverOrphaned() throws Exception {
        assumeTrue(Files.isExecutable(Path.of("/usr/bin/prlimit")), "needs /usr/bin/prlimit (util-linux)");
        ChildJvm child = ChildJvm.startUnder(List.of("/usr/bin/prlimit", "--nofile=" + LIMIT + ":" + LIMIT),
            false, List.of("-XX:-MaxFDLimit"), Map.of(), DescriptorLimitTest.class, shm.path().toString());
        assertEquals(0, child.await(60), child.output());
        String out = child.output();
        assertTrue(out.contains("RESULT ok"), out);
        assertEquals(List.of(), ShmTestDir.list(shm.path()), "files left with no owner:\n" + out);
        child.deleteLog();
    }

    /** Uses up the descriptors, then makes owned files in {@code args[0]} until it cannot; closes them all. */
    public static void main(String[] args) throws IOException {
        Path dir = Path.of(args[0]);
        // Every class the making and the failing need, loaded while the class path can still be opened.
        try (OwnedFile warm = OwnedFile.create(dir, "warm-up")) {
            OwnedFile.create(dir, "warm-up").close();
        } catch (NativeCallException expected) {
            expected.getMessage();
        }
        List<FileInputStream> filler = new ArrayList<>();
        try {
            while (true) {
                filler.add(new FileInputStream("/dev/null"));
            }
        } catch (IOException emfile) {
            // every descriptor is taken now
        }
        for (int i = 0; i < 3; i++) { // room for a couple of files, so that one is made with the last descriptor
            filler.removeLast().close();
        }
        List<OwnedFile> made = new ArrayList<>();
        String stopped = "nothing";
        for (int i = 0; i < 16; i++) {
            try {
                made.add(OwnedFile.create(dir, "owned-" + i));
            } catch (NativeCallException e) {
                stopped = e.getMessage();
                break;
            }
        }
        int madeCount = made.size();
        made.forEach(OwnedFile::close);
        for (FileInputStream f : filler) {
            f.close();
        }
        try (var left = Files.list(dir)) {
            List<Path> files = left.toList();
            System.out.println("made " + madeCount + " files, then: " + stopped + "; left: " + files);
            System.out.println(files.isEmpty() && madeCount > 0 && stopped.contains("EMFILE") ? "RESULT ok" : "RESULT failed");
        }
    }
}
