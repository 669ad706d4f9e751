# fig9-weak-scaling.gp: MegaScale's Figure 9, weak scaling of the 530B
# model (global batch = GPUs) at 2,240 / 4,480 / 11,200 GPUs: MFU bars per
# GPU count, for each system the paper's value, our closed form and our
# simulator.
# Run by `megasim plot` (cmd/plot.c) with gnuplot -e defining:
#   datafile  fig9-weak-scaling.dat: gpus batch, then for system k = 1..nsys
#             the columns 3k 3k+1 3k+2 = paper, closed-form, simulated MFU
#             (%); '?' = no row
#   outfile   NAME.png (pngcairo) or NAME.svg (svg), by extension
#   nsys, sysname1.., hassim (0: no simulated values, reproduce --no-sim)
if (outfile[strlen(outfile)-2:] eq "svg") {
    set terminal svg size 1000,600 dynamic noenhanced font "Sans,13" background rgb "white"
} else {
    set terminal pngcairo size 1000,600 noenhanced font "Sans,11"
}
set output outfile
set datafile missing '?'

# per system: paper (dark), closed form (mid), simulator (light)
shade(k, j) = word("#1d3f75 #4a78c2 #a3c0ea #8b1a1a #d9534f #f4aaa7 #1b6e2d #3fae55 #a8dfb3 #5b2d7e #9a62c5 #d3b8ea", \
                   3 * (k - 1) + j + 1)
sysname(k) = value(sprintf("sysname%d", k))
set title "Figure 9 (MegaScale, NSDI 2024): 530B weak scaling, global batch = GPUs"
set xlabel "GPUs"
set ylabel "MFU (%)"
set style data histogram
set style histogram clustered gap 1.5
set style fill solid 0.95 border rgb "#ffffff"
set boxwidth 0.9
set yrange [0:70]
set ytics 10
set grid ytics lt 1 lc rgb "#dddddd" lw 1
set xtics nomirror
set key outside right center vertical

what(j) = j == 0 ? "paper" : j == 1 ? "closed form" : "simulator"
plot for [k=1:nsys] for [j=0:1+hassim] datafile using (column(3 * k + j)):xtic(1) lc rgb shade(k, j) \
     title sysname(k) . " " . what(j)
