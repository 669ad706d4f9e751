# table3-ablation.gp: MegaScale's Table 3 ablation (175B on 256 GPUs) as
# cumulative bars: each row adds one technique to the row before; per row
# the paper's MFU, our closed-form and our simulated MFU side by side.
# Run by `megasim plot` (cmd/plot.c) with gnuplot -e defining:
#   datafile  table3-ablation.dat: row paper closed sim (MFU %) "label"
#   outfile   NAME.png (pngcairo) or NAME.svg (svg), by extension
#   hassim    0: no simulated values (reproduce --no-sim)
if (outfile[strlen(outfile)-2:] eq "svg") {
    set terminal svg size 1100,650 dynamic noenhanced font "Sans,13" background rgb "white"
} else {
    set terminal pngcairo size 1100,650 noenhanced font "Sans,11"
}
set output outfile
set datafile missing '?'

set title "Table 3 (MegaScale, NSDI 2024): 175B on 256 GPUs, techniques added cumulatively"
set ylabel "MFU (%)"
set xlabel "row: what it adds to the rows above" offset 0, 1
set style data histogram
set style histogram clustered gap 1
set style fill solid 0.9 border rgb "#ffffff"
set boxwidth 0.9
set yrange [0:75]
set ytics 10
set grid ytics lt 1 lc rgb "#dddddd" lw 1
set xtics nomirror rotate by 25 right font ",10"
set bmargin 10
set rmargin 3
set lmargin 9
set key top left horizontal

rowlabel(r, l) = sprintf("%d  %s", r, strlen(l) > 34 ? l[1:32] . "..." : l)
# (an empty `for` still reads its file once in gnuplot 5.4: build the command)
cmd = "plot datafile using 2:xtic(rowlabel($1, strcol(5))) lc rgb '#555555' title 'paper', " . \
      "datafile using 3 lc rgb '#5b8fd6' title 'closed form'"
if (hassim) { cmd = cmd . ", datafile using 4 lc rgb '#e8833a' title 'simulator'" }
eval cmd
