# heatmap.gp: per-rank heat map of compute time from a simulation result
# (/ranks), in the style of the MegaScale paper's straggler heat map: one
# cell per rank on a grid of nodes (x) by GPUs per node (y), so a slow GPU
# or a slow host stands out; injected --slow-rank cells are labelled with
# their factor.
# Run by `megasim plot` (cmd/plot.c) with gnuplot -e defining:
#   datafile  heatmap.dat: node gpu compute_s rank slow_factor stands_for end_s
#   outfile   NAME.png (pngcairo) or NAME.svg (svg), by extension
#   gpn (GPUs per node), nnodes, folded (1: rows are classes of identical
#   ranks, only their representative ranks are drawn), subtitle, injected
if (outfile[strlen(outfile)-2:] eq "svg") {
    set terminal svg size 1000,600 dynamic noenhanced font "Sans,13" background rgb "white"
} else {
    set terminal pngcairo size 1000,600 noenhanced font "Sans,11"
}
set output outfile

set title sprintf("Compute time per rank: grid of nodes (x) x GPUs per node (y), rank = node x %d + GPU%s\n%s\n%s", \
                  gpn, folded ? " (folded run: representative ranks only)" : "", subtitle, injected)
set xlabel "node"
set ylabel "GPU in node"
set cblabel "compute time of the iteration (s)"
set xrange [-0.5:nnodes - 0.5]
set yrange [gpn - 0.5:-0.5]
set xtics nomirror out
set ytics 1 nomirror out
if (nnodes <= 32) { set xtics 1 }
set palette defined (0 "#fff7ec", 0.35 "#fdd49e", 0.7 "#ef6548", 1 "#7f0000")
set style fill solid 1 noborder
set key off

plot datafile using 1:2:(0.5):(0.5):3 with boxxyerror fc palette, \
     datafile using 1:2:($5 > 1 ? sprintf("x%g", $5) : "") with labels tc rgb "white" font ",10"
