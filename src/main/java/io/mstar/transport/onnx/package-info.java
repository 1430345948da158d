/**
 * ONNX Runtime over the arena without copies: a received tensor as an {@code OnnxTensor} over its mapped
 * bytes ({@link io.mstar.transport.onnx.OrtInput}), a session's outputs written by ORT straight into claimed
 * slots ({@link io.mstar.transport.onnx.OrtOutput}), and runs that check every tensor is still backed by
 * live memory before ORT, which checks nothing, touches it ({@link io.mstar.transport.onnx.OrtBridge}).
 * Needs {@code com.microsoft.onnxruntime:onnxruntime} on the class or module path (an optional dependency).
 */
package io.mstar.transport.onnx;
