# timeline.gp: pipeline timeline (Gantt) of the traced ranks of a
# simulation result (/timeline): one lane per rank and stream (compute,
# dp, pp_send, pp_recv), one box per op from its start to its end, coloured
# by kind; grey thin boxes are waits (ready -> start).
# Run by `megasim plot` (cmd/plot.c) with gnuplot -e defining:
#   datafile  timeline.dat: y rank stream kind mb chunk t_ready_s t_start_s
#             t_end_s (y = lane, top to bottom)
#   outfile   NAME.png (pngcairo) or NAME.svg (svg), by extension
#   ytics_cmd (a `set ytics (...)` naming the lanes), kinds and kindids
#   (the kinds present: names and indices), nlanes, nranks, haswait, t_end,
#   subtitle (the job)
if (outfile[strlen(outfile)-2:] eq "svg") {
    set terminal svg size 1400,700 dynamic noenhanced font "Sans,13" background rgb "white"
} else {
    set terminal pngcairo size 1400,700 noenhanced font "Sans,11"
}
set output outfile

kcolor(id) = word("#4a78c2 #e8833a #59a14f #b07aa1 #9c755f #d4b000 #e15759 #76b7b2 #888888", id + 1)
set title sprintf("Pipeline timeline of %d traced ranks (one lane per stream)\n%s", nranks, subtitle)
set xlabel "time from the iteration start (s)"
set ylabel "rank and stream"
set yrange [nlanes + 0.7:-0.7]
eval ytics_cmd
set ytics nomirror font ",9"
set xrange [0:t_end * 1.01]
set xtics nomirror
set grid xtics lt 1 lc rgb "#e5e5e5" lw 1
set style fill solid 0.85 noborder
set key outside right top vertical samplen 2 title "op kind"

# (an empty `for` still reads its file once in gnuplot 5.4: build the command)
cmd = "plot for [i=1:words(kinds)] datafile " . \
      "using ($4 == word(kindids, i) + 0 ? ($8 + $9) / 2 : 1/0):1:(($9 - $8) / 2):(0.38) " . \
      "with boxxyerror lc rgb kcolor(word(kindids, i) + 0) title word(kinds, i)"
if (haswait) { cmd = "plot datafile using (($7 + $8) / 2):1:(($8 - $7) / 2):(0.1) with boxxyerror " . \
                     "lc rgb '#bbbbbb' title 'wait', " . cmd[6:] }
eval cmd
