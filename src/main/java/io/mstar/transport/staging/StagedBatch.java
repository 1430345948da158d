package io.mstar.transport.staging;

import io.mstar.transport.Placement;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.TensorTransport;

import java.util.ArrayList;
import java.util.List;

/**
 * What one staging call placed, in two forms: the descriptors of each request, in the order of the
 * requests; and, for a caller that already holds its descriptors, the placements of every tensor in the
 * same order as two primitive columns: the segment it landed in (an index into {@link #segmentNames}, or
 * -1 for a spill file, named by its descriptor) and its offset there.
 */
public record StagedBatch(List<List<TensorDescriptor>> descriptors, List<String> segmentNames, int[] segmentIndex,
                          long[] offset) {

    /**
     * Stages the tensors of many requests in one call: sends each request's tensors with {@code transport},
     * one batch after the other, and returns both forms. Host copies complete before it returns.
     */
    public static StagedBatch stage(TensorTransport transport, List<StagingRequest<Tensor>> requests) {
        List<List<TensorDescriptor>> perRequest = new ArrayList<>(requests.size());
        for (StagingRequest<Tensor> r : requests) {
            perRequest.add(transport.send(r.requestId(), r.tensors()));
        }
        return of(perRequest);
    }

    /** Builds both forms from the descriptors of each request. */
    public static StagedBatch of(List<List<TensorDescriptor>> perRequest) {
        int n = perRequest.stream().mapToInt(List::size).sum();
        List<String> names = new ArrayList<>();
        int[] index = new int[n];
        long[] offsets = new long[n];
        int i = 0;
        for (List<TensorDescriptor> request : perRequest) {
            for (TensorDescriptor d : request) {
                int at = -1;
                if (d.placement() == Placement.ARENA) {
                    at = names.indexOf(d.fileName()); // a few segments: a list beats a map
                    if (at < 0) {
                        at = names.size();
                        names.add(d.fileName());
                    }
                }
                index[i] = at;
                offsets[i++] = d.offset();
            }
        }
        return new StagedBatch(List.copyOf(perRequest), List.copyOf(names), index, offsets);
    }
}
