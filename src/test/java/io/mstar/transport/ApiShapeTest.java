package io.mstar.transport;

import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Deque;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.spi.ToolProvider;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The shape of the public surface, as the build measures it: what a user reads first stays small, the
 * transport and the channel stay narrow, no package depends on itself through others (jdeps on the compiled
 * classes), and a long class says why it is one piece.
 */
class ApiShapeTest {
    private static final Path CLASSES = Path.of("target/classes");
    private static final Path SOURCES = Path.of("src/main/java");

    @Test
    void theRootPackageHoldsAtMost22PublicTypes() throws Exception {
        List<String> types = new ArrayList<>();
        try (Stream<Path> files = Files.list(CLASSES.resolve("io/mstar/transport"))) {
            for (Path f : files.filter(f -> f.toString().endsWith(".class") && !f.getFileName().toString().contains("$"))
                .toList()) {
                String name = f.getFileName().toString().replace(".class", "");
                if (Modifier.isPublic(Class.forName("io.mstar.transport." + name).getModifiers())) {
                    types.add(name);
                }
            }
        }
        assertTrue(types.size() <= 22, types.size() + " public types: " + new TreeSet<>(types));
    }

    @Test
    void theTransportAndTheChannelHaveAtMostTenMethodsEach() {
        for (Class<?> type : List.of(TensorTransport.class, TensorChannel.class)) {
            List<String> methods = Arrays.stream(type.getDeclaredMethods()).filter(m -> !m.isSynthetic())
                .map(Method::getName).sorted().toList();
            assertTrue(methods.size() <= 10, type.getSimpleName() + " has " + methods.size() + ": " + methods);
        }
    }

    @Test
    void noPackageDependsOnItselfThroughOthers() {
        Map<String, Set<String>> edges = packageDependencies();
        assertTrue(edges.containsKey("io.mstar.transport.endpoint"), "jdeps read the classes: " + edges.keySet());
        List<List<String>> cycles = cycles(edges);
        assertEquals(List.of(), cycles, "package cycles");
    }

    @Test
    void aClassOver450LinesSaysWhyItIsOnePiece() throws IOException {
        List<String> unexplained = new ArrayList<>();
        try (Stream<Path> files = Files.walk(SOURCES)) {
            for (Path f : files.filter(f -> f.toString().endsWith(".java")).toList()) {
                String source = Files.readString(f);
                if (source.lines().count() > 450 && !source.contains("One class on purpose")) {
                    unexplained.add(f + " (" + source.lines().count() + " lines)");
                }
            }
        }
        assertEquals(List.of(), unexplained);
    }

    // Package -> the packages of this library it uses, from jdeps on the compiled classes (bytecode, not imports).
    private static Map<String, Set<String>> packageDependencies() {
        ToolProvider jdeps = ToolProvider.findFirst("jdeps").orElseThrow();
        StringWriter out = new StringWriter();
        int code = jdeps.run(new PrintWriter(out), new PrintWriter(out), "-verbose:package", "-q",
            "--ignore-missing-deps", CLASSES.toString());
        assertEquals(0, code, out.toString());
        Map<String, Set<String>> edges = new TreeMap<>();
        Matcher m = Pattern.compile("^\\s+(io\\.mstar\\.transport[\\w.]*)\\s+->\\s+(io\\.mstar\\.transport[\\w.]*)\\s",
            Pattern.MULTILINE).matcher(out.toString());
        while (m.find()) {
            edges.computeIfAbsent(m.group(1), k -> new TreeSet<>()).add(m.group(2));
        }
        return edges;
    }

    // The strongly connected components of more than one package (Tarjan's algorithm).
    private static List<List<String>> cycles(Map<String, Set<String>> edges) {
        Map<String, Integer> index = new HashMap<>();
        Map<String, Integer> low = new HashMap<>();
        Deque<String> stack = new ArrayDeque<>();
        Set<String> onStack = new HashSet<>();
        List<List<String>> found = new ArrayList<>();
        for (String p : edges.keySet()) {
            if (!index.containsKey(p)) {
                connect(p, edges, index, low, stack, onStack, found);
            }
        }
        return found;
    }

    private static void connect(String p, Map<String, Set<String>> edges, Map<String, Integer> index,
                                Map<String, Integer> low, Deque<String> stack, Set<String> onStack,
                                List<List<String>> found) {
        index.put(p, index.size());
        low.put(p, index.get(p));
        stack.push(p);
        onStack.add(p);
        for (String q : edges.getOrDefault(p, Set.of())) {
            if (!index.containsKey(q)) {
                connect(q, edges, index, low, stack, onStack, found);
                low.put(p, Math.min(low.get(p), low.get(q)));
            } else if (onStack.contains(q)) {
                low.put(p, Math.min(low.get(p), index.get(q)));
            }
        }
        if (low.get(p).equals(index.get(p))) {
            List<String> component = new ArrayList<>();
            String q;
            do {
                q = stack.pop();
                onStack.remove(q);
                component.add(q);
            } while (!q.equals(p));
            if (component.size() > 1) {
                found.add(component.stream().sorted().toList());
            }
        }
    }
}
