package io.mstar.transport.endpoint;

import io.mstar.transport.Delivery;

import java.time.Duration;

/** The endpoint's {@link Delivery}: decided by the outcomes of its tensors, one by one. */
final class DeliveryHandle implements Delivery {
    private final Endpoint endpoint; // helps read ACKs while a thread waits
    private final String requestId;
    private int undecided;
    private Status status = Status.PENDING;
    private Failure failure;
    private String detail;

    DeliveryHandle(Endpoint endpoint, String requestId, int tensors) {
        this.endpoint = endpoint;
        this.requestId = requestId;
        this.undecided = tensors;
        if (tensors == 0) {
            status = Status.DELIVERED;
        }
    }

    public String requestId() {
        return requestId;
    }

    @Override
    public synchronized Status status() {
        return status;
    }

    @Override
    public boolean isDone() {
        return status() != Status.PENDING;
    }

    @Override
    public synchronized Failure failure() {
        return failure;
    }

    @Override
    public synchronized String detail() {
        return detail;
    }

    @Override
    public Status await(Duration timeout) throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (true) {
            endpoint.readAcksIfIdle();
            synchronized (this) {
                long left = deadline - System.nanoTime();
                if (status != Status.PENDING || left <= 0) {
                    return status;
                }
                wait(1); // then read again: the thread that reads the ACKs may be this one
            }
        }
    }

    synchronized void tensorDelivered() {
        if (--undecided == 0 && status == Status.PENDING) {
            status = Status.DELIVERED;
            notifyAll();
        }
    }

    synchronized void tensorFailed(Failure why, String what) {
        undecided--;
        if (status == Status.PENDING) {
            status = Status.FAILED;
            failure = why;
            detail = what;
            notifyAll();
        }
    }

    @Override
    public synchronized String toString() {
        return "Delivery[requestId=" + requestId + ", " + status + (failure == null ? "" : ", " + failure + ": " + detail) + "]";
    }
}
