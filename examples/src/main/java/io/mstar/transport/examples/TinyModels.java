package io.mstar.transport.examples;

import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.SplittableRandom;

/**
 * Small ONNX models written by code, so that nothing is downloaded: {@code y = Relu(MatMul(x, W) + b)} with
 * seeded weights, {@code x} of shape {@code [batch, in]} (batch symbolic), {@code y} of shape {@code [batch, out]},
 * float32. The ModelProto is encoded by hand (ir_version 8, opset 17); the field numbers are onnx.proto's.
 */
public final class TinyModels {
    private TinyModels() {
    }

    /** The model's bytes, for {@code OrtEnvironment.createSession(byte[])}; input "x", output "y". */
    public static byte[] denseRelu(int in, int out, long seed) {
        SplittableRandom random = new SplittableRandom(seed);
        float[] w = new float[in * out];
        for (int i = 0; i < w.length; i++) {
            w[i] = (float) (random.nextDouble() * 2 - 1) / (float) Math.sqrt(in);
        }
        float[] b = new float[out];
        for (int i = 0; i < b.length; i++) {
            b[i] = (float) (random.nextDouble() * 0.2 - 0.1);
        }
        Proto graph = new Proto()
            .message(1, node("MatMul", "xw", "x", "W"))
            .message(1, node("Add", "xwb", "xw", "b"))
            .message(1, node("Relu", "y", "xwb"))
            .string(2, "dense_relu")
            .message(5, floats("W", w, in, out))
            .message(5, floats("b", b, out))
            .message(11, matrix("x", in))
            .message(12, matrix("y", out));
        return new Proto()
            .varint(1, 8) // ir_version
            .string(2, "mstar-transport")
            .message(7, graph)
            .message(8, new Proto().string(1, "").varint(2, 17)) // opset_import: the default domain, 17
            .bytes();
    }

    private static Proto node(String op, String output, String... inputs) {
        Proto node = new Proto();
        for (String input : inputs) {
            node.string(1, input);
        }
        return node.string(2, output).string(3, op + "_" + output).string(4, op);
    }

    private static Proto floats(String name, float[] values, long... dims) {
        Proto tensor = new Proto();
        for (long d : dims) {
            tensor.varint(1, d);
        }
        ByteBuffer raw = ByteBuffer.allocate(4 * values.length).order(ByteOrder.LITTLE_ENDIAN);
        raw.asFloatBuffer().put(values);
        return tensor.varint(2, 1).string(8, name).raw(9, raw.array()); // data_type 1 = FLOAT
    }

    // A float tensor of shape [batch, columns], batch symbolic.
    private static Proto matrix(String name, int columns) {
        Proto shape = new Proto()
            .message(1, new Proto().string(2, "batch"))
            .message(1, new Proto().varint(1, columns));
        Proto tensorType = new Proto().varint(1, 1).message(2, shape);
        return new Proto().string(1, name).message(2, new Proto().message(1, tensorType));
    }

    /** Just enough protobuf: varint and length-delimited fields. */
    private static final class Proto {
        private final ByteArrayOutputStream out = new ByteArrayOutputStream();

        Proto varint(int field, long value) {
            writeVarint((long) field << 3);
            writeVarint(value);
            return this;
        }

        Proto raw(int field, byte[] value) {
            writeVarint((long) field << 3 | 2);
            writeVarint(value.length);
            out.writeBytes(value);
            return this;
        }

        Proto string(int field, String value) {
            return raw(field, value.getBytes(StandardCharsets.UTF_8));
        }

        Proto message(int field, Proto value) {
            return raw(field, value.bytes());
        }

        byte[] bytes() {
            return out.toByteArray();
        }

        private void writeVarint(long value) {
            while ((value & ~0x7FL) != 0) {
                out.write((int) (value & 0x7F) | 0x80);
                value >>>= 7;
            }
            out.write((int) value);
        }
    }
}
