package io.mstar.transport.xbench;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.StandardProtocolFamily;
import java.net.StandardSocketOptions;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * A stream socket, Unix-domain ({@code uds}) or TCP on loopback ({@code tcp}, Nagle off): an 8-byte length,
 * then the payload; one byte back per payload as its ACK.
 */
final class SocketPeer {
    private SocketPeer() {
    }

    static void consumer(String dir, boolean tcp) throws IOException {
        Path path = Path.of(dir, "xbench.sock");
        Files.deleteIfExists(path);
        Protocol.Verifier verifier = new Protocol.Verifier();
        try (ServerSocketChannel server = ServerSocketChannel.open(tcp ? StandardProtocolFamily.INET
            : StandardProtocolFamily.UNIX)) {
            if (tcp) {
                server.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
                Files.writeString(Path.of(dir, "tcp.port"), Integer.toString(((InetSocketAddress) server.getLocalAddress()).getPort()));
            } else {
                server.bind(UnixDomainSocketAddress.of(path));
            }
            System.out.println("READY");
            try (SocketChannel socket = server.accept(); Arena arena = Arena.ofConfined()) {
                if (tcp) {
                    socket.setOption(StandardSocketOptions.TCP_NODELAY, true);
                }
                MemorySegment payload = arena.allocate(Protocol.SIZES[Protocol.SIZES.length - 1], 4096);
                ByteBuffer header = ByteBuffer.allocateDirect(8).order(ByteOrder.LITTLE_ENDIAN);
                ByteBuffer ack = ByteBuffer.allocateDirect(1);
                while (true) {
                    header.clear();
                    readFully(socket, header);
                    long size = header.getLong(0);
                    if (size == 0) {
                        break;
                    }
                    ByteBuffer body = payload.asSlice(0, size).asByteBuffer();
                    readFully(socket, body);
                    verifier.check(payload.asSlice(0, size));
                    ack.clear();
                    socket.write(ack);
                }
            }
        } finally {
            Files.deleteIfExists(path);
        }
        System.out.println(verifier.summary());
    }

    static void producer(String dir, boolean tcp, double seconds) throws Exception {
        try (SocketChannel socket = SocketChannel.open(tcp ? new InetSocketAddress(InetAddress.getLoopbackAddress(),
                Integer.parseInt(Files.readString(Path.of(dir, "tcp.port")))) : UnixDomainSocketAddress.of(Path.of(dir, "xbench.sock")));
             Arena arena = Arena.ofShared()) {
            if (tcp) {
                socket.setOption(StandardSocketOptions.TCP_NODELAY, true);
            }
            MemorySegment source = arena.allocate(Protocol.SIZES[Protocol.SIZES.length - 1], 4096);
            ByteBuffer header = ByteBuffer.allocateDirect(8).order(ByteOrder.LITTLE_ENDIAN);
            Producer loop = new Producer() {
                @Override
                void send(long seq, long size) throws IOException {
                    MemorySegment payload = source.asSlice(0, size);
                    Protocol.fill(payload, seq);
                    header.clear();
                    header.putLong(0, size);
                    ByteBuffer body = payload.asByteBuffer();
                    ByteBuffer[] both = {header, body};
                    while (body.hasRemaining()) {
                        socket.write(both);
                    }
                }
            };
            Thread acker = Thread.ofPlatform().daemon().start(() -> {
                ByteBuffer acks = ByteBuffer.allocateDirect(4096);
                try {
                    while (true) {
                        acks.clear();
                        int n = socket.read(acks);
                        if (n < 0) {
                            return;
                        }
                        for (int i = 0; i < n; i++) {
                            loop.acked();
                        }
                    }
                } catch (IOException closed) {
                    // the run is over
                }
            });
            loop.run(seconds);
            header.clear();
            header.putLong(0, 0);
            socket.write(header);
            acker.join(5000);
        }
    }

    private static void readFully(SocketChannel socket, ByteBuffer buffer) throws IOException {
        while (buffer.hasRemaining()) {
            if (socket.read(buffer) < 0) {
                throw new IOException("the producer closed the socket mid-payload");
            }
        }
    }
}
