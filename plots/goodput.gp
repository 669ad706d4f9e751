# goodput.gp: a whole run under faults (megasim goodput --plot PREFIX).
# Left: ETTR against the checkpoint interval, the Monte Carlo's mean with
# its 95% interval and the analytic renewal-reward curve; the interval
# used is marked. Right: hours lost per run, stacked by category, for the
# main run and each what-if (no spares, unlimited spares, slow hosts kept).
# Run by `megasim goodput` (cmd/goodput_out.c) with gnuplot -e defining:
#   datafile    PREFIX-interval.dat: interval_min ettr_pct lo_pct hi_pct analytic_pct
#   lostfile    PREFIX-lost.dat: run category... (a header line names them)
#   outfile     PREFIX.png (pngcairo) or PREFIX.svg (svg), by extension
#   title_job   the job and the headline
#   chosen_min  the interval used, minutes
#   ncats       the number of lost-time categories
if (outfile[strlen(outfile)-2:] eq "svg") {
    set terminal svg size 1400,600 dynamic noenhanced font "Sans,13" background rgb "white"
} else {
    set terminal pngcairo size 1400,600 noenhanced font "Sans,11"
}
set output outfile
set multiplot layout 1,2 title title_job

set title "ETTR against the checkpoint interval"
set xlabel "checkpoint interval (minutes of training)"
set ylabel "ETTR (%)"
set logscale x
set grid
set key bottom center
set arrow 1 from chosen_min, graph 0 to chosen_min, graph 1 nohead dt 2 lc rgb "#555555"
plot datafile using 1:3:4 with filledcurves lc rgb "#cfe0f3" title "Monte Carlo 95% interval", \
     datafile using 1:2 with linespoints pt 7 ps 0.6 lc rgb "#1f5fa8" title "Monte Carlo mean", \
     datafile using 1:5 with lines lw 2 dt 3 lc rgb "#c0392b" title "analytic (renewal-reward)"
unset arrow 1
unset logscale x

set title "hours lost per run, by category"
set xlabel ""
set ylabel "hours"
set style data histogram
set style histogram rowstacked
set style fill solid 0.9 border rgb "#ffffff"
set boxwidth 0.6
set yrange [0:*]
set key outside right top
unset grid
set grid ytics
set xtics rotate by -20
# One row per run (main, then the what-ifs), one column per category.
plot for [c=2:ncats+1] lostfile using c:xtic(1) title columnhead(c)
unset multiplot
