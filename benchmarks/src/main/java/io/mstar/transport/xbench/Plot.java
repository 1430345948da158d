package io.mstar.transport.xbench;

import java.util.List;
import java.util.Locale;
import java.util.Map;

/** GB/s per size per peer (medians over the runs) as an SVG line chart, sizes on a log scale. */
final class Plot {
    private static final String[] COLOURS = {"#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02",
        "#a6761d", "#666666"};
    private static final int WIDTH = 720;
    private static final int HEIGHT = 420;
    private static final int LEFT = 60;
    private static final int RIGHT = 170;
    private static final int TOP = 30;
    private static final int BOTTOM = 50;

    private Plot() {
    }

    static String svg(Map<String, Map<Long, List<double[]>>> results) {
        double max = 0;
        for (Map<Long, List<double[]>> bySize : results.values()) {
            for (List<double[]> rows : bySize.values()) {
                max = Math.max(max, XBench.stats(rows, 1)[0]);
            }
        }
        double top = Math.ceil(max / 5) * 5;
        StringBuilder svg = new StringBuilder();
        svg.append(String.format(Locale.ROOT, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\""
            + " font-family=\"sans-serif\" font-size=\"12\">%n", WIDTH, HEIGHT));
        svg.append("<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n");
        svg.append(String.format(Locale.ROOT, "<text x=\"%d\" y=\"18\">GB/s per payload size, median of the runs"
            + " (cross-process, 2 cores)</text>%n", LEFT));
        for (int i = 0; i <= 5; i++) {
            double y = y(top * i / 5, top);
            svg.append(String.format(Locale.ROOT, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                + "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.0f</text>%n", LEFT, WIDTH - RIGHT, y, y, LEFT - 6,
                y + 4, top * i / 5));
        }
        for (int s = 0; s < Protocol.SIZES.length; s++) {
            svg.append(String.format(Locale.ROOT, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>%n", x(s),
                HEIGHT - BOTTOM + 20, XBench.human(Protocol.SIZES[s])));
        }
        int c = 0;
        for (Map.Entry<String, Map<Long, List<double[]>>> e : results.entrySet()) {
            String colour = COLOURS[c % COLOURS.length];
            StringBuilder points = new StringBuilder();
            for (int s = 0; s < Protocol.SIZES.length; s++) {
                List<double[]> rows = e.getValue().get(Protocol.SIZES[s]);
                if (rows != null) {
                    points.append(String.format(Locale.ROOT, "%.1f,%.1f ", x(s), y(XBench.stats(rows, 1)[0], top)));
                }
            }
            boolean reference = XBench.REFERENCES.contains(e.getKey());
            svg.append(String.format(Locale.ROOT, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s"
                + " points=\"%s\"/>%n", colour, reference ? " stroke-dasharray=\"5,4\"" : "", points.toString().trim()));
            svg.append(String.format(Locale.ROOT, "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"%s\""
                + " stroke-width=\"2\"%s/><text x=\"%d\" y=\"%d\">%s</text>%n", WIDTH - RIGHT + 15, WIDTH - RIGHT + 40,
                TOP + 16 * c, TOP + 16 * c, colour, reference ? " stroke-dasharray=\"5,4\"" : "", WIDTH - RIGHT + 46,
                TOP + 16 * c + 4, e.getKey()));
            c++;
        }
        return svg.append("</svg>\n").toString();
    }

    private static double x(int sizeIndex) {
        return LEFT + 20 + sizeIndex * (WIDTH - LEFT - RIGHT - 40) / (double) (Protocol.SIZES.length - 1);
    }

    private static double y(double gbps, double top) {
        return HEIGHT - BOTTOM - gbps / top * (HEIGHT - TOP - BOTTOM);
    }
}
