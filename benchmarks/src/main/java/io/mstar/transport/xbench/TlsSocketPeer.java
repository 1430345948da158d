package io.mstar.transport.xbench;

import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLServerSocket;
import javax.net.ssl.SSLSocket;
import javax.net.ssl.TrustManagerFactory;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.lang.foreign.MemorySegment;
import java.net.InetAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;

/**
 * TCP on loopback under TLS 1.3 with both sides authenticated (the JDK's {@code SSLSocket}, Nagle off), the
 * peer for the cross-node path with TLS on: an 8-byte length, then the payload, one byte back per payload.
 * It uses the same stores as the library's TLS run ({@code -Dxbench.tlsDir}: {@code node.p12} and
 * {@code trust.p12}, password {@code xbench-pass}). Streams take arrays, so each side fills or reads a heap
 * buffer, as a user of {@code SSLSocket} does.
 */
final class TlsSocketPeer {
    private static final char[] PASSWORD = "xbench-pass".toCharArray();

    private TlsSocketPeer() {
    }

    private static SSLContext context() throws Exception {
        String dir = System.getProperty("xbench.tlsDir", "");
        if (dir.isEmpty()) {
            throw new IllegalStateException("the tls peer needs -Dxbench.jvmArgs=-Dxbench.tlsDir=DIR (node.p12, trust.p12)");
        }
        KeyStore keys = KeyStore.getInstance("PKCS12");
        try (InputStream in = Files.newInputStream(Path.of(dir, "node.p12"))) {
            keys.load(in, PASSWORD);
        }
        KeyStore trusted = KeyStore.getInstance("PKCS12");
        try (InputStream in = Files.newInputStream(Path.of(dir, "trust.p12"))) {
            trusted.load(in, PASSWORD);
        }
        KeyManagerFactory km = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
        km.init(keys, PASSWORD);
        TrustManagerFactory tm = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
        tm.init(trusted);
        SSLContext context = SSLContext.getInstance("TLSv1.3");
        context.init(km.getKeyManagers(), tm.getTrustManagers(), null);
        return context;
    }

    static void consumer(String dir) throws Exception {
        Protocol.Verifier verifier = new Protocol.Verifier();
        try (SSLServerSocket server = (SSLServerSocket) context().getServerSocketFactory()
            .createServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            server.setNeedClientAuth(true);
            server.setEnabledProtocols(new String[] {"TLSv1.3"});
            Files.writeString(Path.of(dir, "tls.port"), Integer.toString(server.getLocalPort()));
            System.out.println("READY");
            try (SSLSocket socket = (SSLSocket) server.accept()) {
                socket.setTcpNoDelay(true);
                DataInputStream in = new DataInputStream(socket.getInputStream());
                OutputStream acks = socket.getOutputStream();
                byte[] payload = new byte[(int) Protocol.SIZES[Protocol.SIZES.length - 1]];
                while (true) {
                    long size = Long.reverseBytes(in.readLong());
                    if (size == 0) {
                        break;
                    }
                    in.readFully(payload, 0, (int) size);
                    verifier.check(MemorySegment.ofArray(payload).asSlice(0, size));
                    acks.write(1);
                    acks.flush();
                }
            }
        }
        System.out.println(verifier.summary());
    }

    static void producer(String dir, double seconds) throws Exception {
        int port = Integer.parseInt(Files.readString(Path.of(dir, "tls.port")));
        try (SSLSocket socket = (SSLSocket) context().getSocketFactory()
            .createSocket(InetAddress.getLoopbackAddress(), port)) {
            socket.setTcpNoDelay(true);
            socket.setEnabledProtocols(new String[] {"TLSv1.3"});
            socket.startHandshake();
            OutputStream out = socket.getOutputStream();
            byte[] payload = new byte[(int) Protocol.SIZES[Protocol.SIZES.length - 1]];
            byte[] header = new byte[8];
            Producer loop = new Producer() {
                @Override
                void send(long seq, long size) throws IOException {
                    Protocol.fill(MemorySegment.ofArray(payload).asSlice(0, size), seq);
                    writeLength(header, size);
                    out.write(header);
                    out.write(payload, 0, (int) size);
                    out.flush();
                }
            };
            InputStream acks = socket.getInputStream();
            Thread acker = Thread.ofPlatform().daemon().start(() -> {
                byte[] read = new byte[4096];
                try {
                    int n;
                    while ((n = acks.read(read)) > 0) {
                        for (int i = 0; i < n; i++) {
                            loop.acked();
                        }
                    }
                } catch (IOException closed) {
                    // the run is over
                }
            });
            loop.run(seconds);
            writeLength(header, 0);
            out.write(header);
            out.flush();
            acker.join(5000);
        }
    }

    // The length as the consumer reads it: little-endian.
    private static void writeLength(byte[] header, long size) {
        for (int i = 0; i < 8; i++) {
            header[i] = (byte) (size >>> (8 * i));
        }
    }
}
