package io.mstar.transport.cuda;

import io.mstar.transport.exceptions.CudaException;
import io.mstar.transport.testing.ChildJvm;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The JNA binding against the CPU stand-in, and against the real libcudart of this machine. */
class CudaBindingTest {
    private static CudaRuntime standin() {
        CudaStatus status = CudaProbe.probe(System.getenv("MSTAR_CUDART"));
        assertTrue(status.usable(), status.reason());
        assertEquals(13000, status.runtimeVersion());
        return status.runtime();
    }

    @AfterEach
    void resetDelay() {
        StandinControl.INSTANCE.mstarStandinSetCopyDelayUs(0);
    }

    @Test
    void anEventCompletesOnlyAfterTheCopiesBeforeIt() {
        CudaRuntime cuda = standin();
        long stream = cuda.streamCreate(CudaRuntime.STREAM_NON_BLOCKING);
        long event = cuda.eventCreate(CudaRuntime.EVENT_DISABLE_TIMING);
        long src = cuda.malloc(4096);
        long dst = cuda.malloc(4096);
        MemorySegment source = MemorySegment.ofAddress(src).reinterpret(4096);
        MemorySegment target = MemorySegment.ofAddress(dst).reinterpret(4096);
        source.fill((byte) 7);
        target.fill((byte) 0);
        StandinControl.INSTANCE.mstarStandinSetCopyDelayUs(200_000);
        cuda.memcpyAsync(dst, src, 4096, CudaRuntime.HOST_TO_DEVICE, stream);
        cuda.eventRecord(event, stream);
        assertFalse(cuda.eventQuery(event), "the copy is still pending");
        assertEquals(0, target.get(ValueLayout.JAVA_BYTE, 4095), "nothing landed yet");
        cuda.eventSynchronize(event);
        assertTrue(cuda.eventQuery(event));
        assertEquals(7, target.get(ValueLayout.JAVA_BYTE, 4095));
        cuda.eventDestroy(event);
        cuda.streamDestroy(stream);
        cuda.free(src);
        cuda.free(dst);
    }

    @Test
    void registeringTwiceIsNotAnErrorAndFailuresCarryNameAndText() {
        CudaRuntime cuda = standin();
        long buffer = cuda.malloc(8192);
        assertTrue(cuda.hostRegister(buffer, 8192, CudaRuntime.HOST_REGISTER_PORTABLE));
        assertFalse(cuda.hostRegister(buffer, 8192, CudaRuntime.HOST_REGISTER_PORTABLE), "712 counts as success");
        cuda.hostUnregister(buffer);
        CudaException e = assertThrows(CudaException.class, () -> cuda.hostUnregister(buffer));
        assertEquals(713, e.code());
        assertEquals("cudaHostUnregister", e.call());
        assertTrue(e.getMessage().contains("cudaErrorHostMemoryNotRegistered (713)"), e.getMessage());
        cuda.free(buffer);
    }

    /** Loads this machine's real libcudart in a child JVM (the binding binds once per JVM). */
    @Test
    void theRealRuntimeResolvesEverySymbolAndReportsWhyItCannotRun() throws Exception {
        Path real = Path.of("/usr/local/cuda/lib64/libcudart.so");
        Assumptions.assumeTrue(Files.exists(real), "SKIPPED: no CUDA toolkit at /usr/local/cuda on this machine");
        ChildJvm child = ChildJvm.start(true, Map.of("MSTAR_CUDART", real.toString()), ProbeMain.class);
        int code = child.await(60);
        String out = child.output();
        child.deleteLog();
        assertEquals(0, code, out);
        assertTrue(out.contains("bound " + JnaCudaRuntime.SYMBOLS.length + " symbols"), out);
        if (Files.exists(Path.of("/dev/nvidiactl"))) {
            assertTrue(out.contains("usable=true"), out);
        } else {
            assertTrue(out.contains("usable=false")
                && out.contains("cudaErrorInsufficientDriver (35): CUDA driver version is insufficient for CUDA runtime version"),
                out);
        }
    }

    /** Child JVM: probes the runtime that MSTAR_CUDART names and prints what it found. */
    public static final class ProbeMain {
        public static void main(String[] args) {
            CudaStatus status = CudaProbe.probe(System.getenv("MSTAR_CUDART"));
            System.out.println("bound " + (status.runtime() == null ? 0 : JnaCudaRuntime.SYMBOLS.length) + " symbols from "
                + status.library() + "; usable=" + status.usable() + "; reason=" + status.reason());
        }
    }
}
