package io.mstar.transport.remote;

import io.mstar.transport.RemoteConfig;
import io.mstar.transport.exceptions.ConfigurationException;
import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.AdaptiveRecvByteBufAllocator;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandler;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.IoHandlerFactory;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.WriteBufferWaterMark;
import io.netty.channel.epoll.Epoll;
import io.netty.channel.epoll.EpollIoHandler;
import io.netty.channel.epoll.EpollServerSocketChannel;
import io.netty.channel.epoll.EpollSocketChannel;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.netty.handler.ssl.ClientAuth;
import io.netty.handler.ssl.OpenSsl;
import io.netty.handler.ssl.SslContext;
import io.netty.handler.ssl.SslContextBuilder;
import io.netty.handler.ssl.SslProvider;

import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.TrustManagerFactory;
import java.io.InputStream;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;

/**
 * The TCP engine under the cross-node path: one Netty event loop for this process's connections, the
 * native epoll transport where it loads and NIO otherwise, and with {@value RemoteConfig#TLS_KEYSTORE} TLS 1.3
 * with certificates required on both sides (BoringSSL where netty-tcnative loads, the JDK's engine otherwise).
 */
final class TcpCarrier implements AutoCloseable {
    /** Writes queue up to this many bytes before a sender waits (OutboundConnection's hand-over says why so few). */
    private static final WriteBufferWaterMark WATER_MARK = new WriteBufferWaterMark(256 << 10, 1 << 20);

    private final boolean epoll;
    private final EventLoopGroup group;
    private final SslContext serverTls; // null without TLS
    private final SslContext clientTls;
    private Channel server; // null when this process does not listen

    TcpCarrier(RemoteConfig config) {
        this.epoll = epollLoads();
        IoHandlerFactory io = epoll ? EpollIoHandler.newFactory() : NioIoHandler.newFactory();
        this.group = new MultiThreadIoEventLoopGroup(1, runnable -> {
            Thread t = new Thread(runnable, "mstar-remote-io");
            t.setDaemon(true);
            return t;
        }, io);
        if (config.tls()) {
            KeyManagerFactory keys = keys(config.tlsKeystore(), config.tlsPassword());
            TrustManagerFactory trust = trust(config.tlsTruststore(), config.tlsPassword());
            try {
                serverTls = SslContextBuilder.forServer(keys).trustManager(trust).clientAuth(ClientAuth.REQUIRE)
                    .protocols("TLSv1.3").sslProvider(tlsProvider()).build();
                // No host name check: the truststore says "a node of this deployment", and which entity a
                // connection speaks for is proven by the handshake inside (nodes are often named by address).
                clientTls = SslContextBuilder.forClient().keyManager(keys).trustManager(trust).protocols("TLSv1.3")
                    .endpointIdentificationAlgorithm(null).sslProvider(tlsProvider()).build();
            } catch (Exception e) {
                group.shutdownGracefully(0, 0, TimeUnit.MILLISECONDS);
                throw new ConfigurationException("TLS cannot start with " + RemoteConfig.TLS_KEYSTORE + "="
                    + config.tlsKeystore() + ": " + e.getMessage());
            }
        } else {
            serverTls = null;
            clientTls = null;
        }
    }

    /** Throws {@link NoClassDefFoundError} when Netty is not there (initializing this class loads it). */
    static void requireNetty() {
        // WATER_MARK, a Netty class, was made when this class was initialized
    }

    // BoringSSL (netty-tcnative-boringssl-static) where it loads, the JDK's engine otherwise.
    private static SslProvider tlsProvider() {
        try {
            return OpenSsl.isAvailable() ? SslProvider.OPENSSL : SslProvider.JDK;
        } catch (LinkageError e) {
            return SslProvider.JDK;
        }
    }

    private static boolean epollLoads() {
        try {
            return Epoll.isAvailable();
        } catch (LinkageError e) { // the native transport's jar is optional
            return false;
        }
    }

    /** The host of a {@code host:port} (IPv6 without its brackets). */
    static String host(String endpoint) {
        String host = endpoint.substring(0, endpoint.lastIndexOf(':'));
        return host.startsWith("[") && host.endsWith("]") ? host.substring(1, host.length() - 1) : host;
    }

    static InetSocketAddress address(String endpoint) {
        return new InetSocketAddress(host(endpoint), Integer.parseInt(endpoint.substring(endpoint.lastIndexOf(':') + 1)));
    }

    /** "epoll" or "nio", and whether TLS is on, for the start-up log. */
    String describe() {
        return (epoll ? "epoll" : "nio") + (serverTls != null ? ", TLS 1.3 (" + tlsProvider() + ")" : ", no TLS");
    }

    /** Accepts connections on {@code address}; each gets the handler {@code connections} makes. */
    void listen(InetSocketAddress address, Supplier<ChannelHandler> connections) {
        ChannelFuture bound = new ServerBootstrap().group(group)
            .channel(epoll ? EpollServerSocketChannel.class : NioServerSocketChannel.class)
            .option(ChannelOption.SO_BACKLOG, 128)
            .childOption(ChannelOption.TCP_NODELAY, true)
            .childOption(ChannelOption.WRITE_BUFFER_WATER_MARK, WATER_MARK)
            .childOption(ChannelOption.RCVBUF_ALLOCATOR, new AdaptiveRecvByteBufAllocator(4096, 64 << 10, 1 << 20))
            .childHandler(initializer(serverTls, connections))
            .bind(address).awaitUninterruptibly();
        if (!bound.isSuccess()) {
            throw new ConfigurationException("the cross-node path cannot listen on " + address + " ("
                + RemoteConfig.LISTEN + "): " + bound.cause() + "; is another process on that port?");
        }
        server = bound.channel();
    }

    /** Starts a connection to {@code remote} from {@code local} (null: the kernel's choice). */
    ChannelFuture connect(InetSocketAddress remote, SocketAddress local, ChannelHandler connection, int timeoutMs) {
        Bootstrap bootstrap = new Bootstrap().group(group)
            .channel(epoll ? EpollSocketChannel.class : NioSocketChannel.class)
            .option(ChannelOption.TCP_NODELAY, true)
            .option(ChannelOption.WRITE_BUFFER_WATER_MARK, WATER_MARK)
            .option(ChannelOption.CONNECT_TIMEOUT_MILLIS, timeoutMs)
            .handler(initializer(clientTls, () -> connection));
        return local == null ? bootstrap.connect(remote) : bootstrap.connect(remote, local);
    }

    /** The event loop, for timers. */
    EventLoopGroup group() {
        return group;
    }

    private static ChannelInitializer<SocketChannel> initializer(SslContext tls, Supplier<ChannelHandler> handler) {
        return new ChannelInitializer<>() {
            @Override
            protected void initChannel(SocketChannel ch) {
                if (tls != null) {
                    ch.pipeline().addLast(tls.newHandler(ch.alloc()));
                }
                ch.pipeline().addLast(handler.get());
            }
        };
    }

    private static KeyManagerFactory keys(Path file, String password) {
        try {
            KeyManagerFactory keys = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
            keys.init(load(file, password), password.toCharArray());
            return keys;
        } catch (Exception e) {
            throw new ConfigurationException("cannot read " + RemoteConfig.TLS_KEYSTORE + "=" + file
                + " (a PKCS12 file with this node's key and certificate, " + RemoteConfig.TLS_PASSWORD + "): " + e);
        }
    }

    private static TrustManagerFactory trust(Path file, String password) {
        try {
            TrustManagerFactory trust = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
            trust.init(load(file, password));
            return trust;
        } catch (Exception e) {
            throw new ConfigurationException("cannot read " + RemoteConfig.TLS_TRUSTSTORE + "=" + file
                + " (a PKCS12 file with the certificates peers present, " + RemoteConfig.TLS_PASSWORD + "): " + e);
        }
    }

    private static KeyStore load(Path file, String password) throws Exception {
        KeyStore store = KeyStore.getInstance("PKCS12");
        try (InputStream in = Files.newInputStream(file)) {
            store.load(in, password.toCharArray());
        }
        return store;
    }

    /** Closes the listening socket and every connection, and waits for the event loop to end. */
    @Override
    public void close() {
        if (server != null) {
            server.close().awaitUninterruptibly();
        }
        group.shutdownGracefully(0, 2, TimeUnit.SECONDS).awaitUninterruptibly(10, TimeUnit.SECONDS);
    }
}
