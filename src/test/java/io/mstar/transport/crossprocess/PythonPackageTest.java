package io.mstar.transport.crossprocess;

import io.mstar.transport.testing.PythonChild;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The Python package's own tests (pytest with hypothesis, {@code python/tests}) as part of the build: the codecs
 * against docs/format.md's golden blocks, the endpoint's promises and their negative controls.
 */
@Timeout(value = 600, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class PythonPackageTest {
    @Test
    void pytestPasses() throws Exception {
        PythonChild.assumeVenv();
        Path tests = Path.of("python/tests").toAbsolutePath();
        // Run from the tests' folder: the installed package is imported, not the sources beside them.
        Process pytest = new ProcessBuilder(PythonChild.VENV_PYTHON.toAbsolutePath().toString(), "-m", "pytest", "-q",
            "-p", "no:cacheprovider", "-o", "addopts=", tests.toString()).directory(tests.toFile())
            .redirectErrorStream(true).start();
        String output = new String(pytest.getInputStream().readAllBytes());
        assertTrue(pytest.waitFor(540, TimeUnit.SECONDS), output);
        System.out.println(output.lines().reduce((a, b) -> b).orElse(""));
        assertEquals(0, pytest.exitValue(), output);
    }
}
