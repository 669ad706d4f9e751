# compare.gp: a measured run against the simulator (megasim compare):
# grouped bars, measured beside simulated seconds per iteration; the first
# group is the iteration itself, then each op class's time on the compute
# stream (mean over ranks), then the compute stream's waiting. The number
# over each group is the error, (simulated - measured) / measured.
# Run by `megasim compare` (cmd/compare.c) with gnuplot -e defining:
#   datafile  PREFIX.dat: "group" measured_s simulated_s error_pct ('?' = none)
#   outfile   PREFIX.png (pngcairo) or PREFIX.svg (svg), by extension
#   title_job the job: TP/PP/DP, GPUs, the measured device
#   subtitle  the headline: measured and simulated iteration, error
if (outfile[strlen(outfile)-2:] eq "svg") {
    set terminal svg size 1100,600 dynamic noenhanced font "Sans,13" background rgb "white"
} else {
    set terminal pngcairo size 1100,600 noenhanced font "Sans,11"
}
set output outfile
set datafile missing '?'

set title sprintf("Measured vs simulated: %s\n%s", title_job, subtitle)
set ylabel "seconds per iteration"
set xlabel "iteration, then time on the compute stream per rank: op classes and waiting"
set style data histogram
set style histogram clustered gap 1
set style fill solid 0.9 border rgb "#ffffff"
set boxwidth 0.9
set yrange [0:*]
set offsets 0, 0, graph 0.08, 0
set grid ytics lt 1 lc rgb "#dddddd" lw 1
set xtics nomirror
set key top right

top(m, s) = m > s ? m : s
plot datafile using 2:xtic(1) lc rgb '#555555' title 'measured', \
     '' using 3 lc rgb '#e8833a' title 'simulated', \
     '' using 0:(top($2, $3)):(sprintf("%+.3g%%", $4)) with labels offset 0, 0.8 font ",9" notitle
