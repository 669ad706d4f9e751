# table2-mfu.gp: MegaScale's Table 2 (175B strong scaling) as MFU vs GPUs,
# log x: the paper's Megatron-LM and MegaScale rows beside our two
# predictions for each (closed form, simulator), with the MegaScale over
# Megatron-LM gap annotated at the largest GPU count (paper: 1.34x at
# 12,288 GPUs).
# Run by `megasim plot` (cmd/plot.c) with gnuplot -e defining:
#   datafile  table2-mfu.dat: gpus batch, then for system k = 1..nsys the
#             columns 3k 3k+1 3k+2 = paper, closed-form, simulated MFU (%),
#             then iteration seconds; '?' = no row
#   outfile   NAME.png (pngcairo) or NAME.svg (svg), by extension
#   nsys, sysname1.., hassim (0: no simulated values, reproduce --no-sim), and if both systems share a GPU count: gap_x gap_lo
#   gap_hi (paper MFU %, the arrow) gap_paper gap_closed gap_sim (ratios)
if (outfile[strlen(outfile)-2:] eq "svg") {
    set terminal svg size 1000,600 dynamic noenhanced font "Sans,13" background rgb "white"
} else {
    set terminal pngcairo size 1000,600 noenhanced font "Sans,11"
}
set output outfile
set datafile missing '?'

syscolor(k) = word("#2b5ca8 #c8372d #2a9d3f #8a4fb3", k)
set title "Table 2 (MegaScale, NSDI 2024): 175B strong scaling, paper vs predicted"
set xlabel "GPUs (log scale)"
set ylabel "MFU (%)"
set logscale x 2
set xtics nomirror font ",9" rotate by -40 offset -1,0  # 768 and 1024, 6144 to 12288 sit close on a log axis
set mxtics 1
set ytics 5
set grid ytics lt 1 lc rgb "#dddddd" lw 1
set key outside right center vertical Left reverse spacing 1.2
set yrange [*:*]
# one GPU count (a reduced set): give the log axis a width of its own
stats datafile using 1 nooutput
if (STATS_min == STATS_max) { set xrange [STATS_min / 2 : STATS_max * 2] }
set offsets graph 0.04, graph 0.45, graph 0.08, graph 0.08

if (exists("gap_x")) {
    set arrow 1 from gap_x, gap_lo to gap_x, gap_hi heads size screen 0.008,90 lw 2 lc rgb "#333333"
    gaptext = sprintf("MegaScale / Megatron-LM\npaper %.2fx", gap_paper)
    if (gap_sim > 0) { gaptext = gaptext . sprintf("\nsimulator %.2fx", gap_sim) }
    if (gap_closed > 0) { gaptext = gaptext . sprintf("\nclosed form %.2fx", gap_closed) }
    set label 1 gaptext at gap_x, (gap_lo + gap_hi) / 2 left offset 1, 0 font ",10" tc rgb "#333333"
}

sysname(k) = value(sprintf("sysname%d", k))
# (an empty `for` still reads its file once in gnuplot 5.4: build the command)
cmd = "plot datafile using 1:(NaN):xtic(1) notitle, " . \
      "for [k=1:nsys] datafile using 1:(column(3*k)) with linespoints lw 2.5 dt 1 pt 7 ps 1.3 " . \
      "lc rgb syscolor(k) title sysname(k) . ' paper', " . \
      "for [k=1:nsys] datafile using 1:(column(3*k+1)) with linespoints lw 1.8 dt 2 pt 4 ps 1.2 " . \
      "lc rgb syscolor(k) title sysname(k) . ' closed form'"
if (hassim) { cmd = cmd . ", for [k=1:nsys] datafile using 1:(column(3*k+2)) with linespoints lw 1.8 dt 3 " . \
                          "pt 6 ps 1.2 lc rgb syscolor(k) title sysname(k) . ' simulator'" }
eval cmd
