# search-frontier.gp: predicted MFU against peak memory per GPU of every
# plan `megasim search` found valid and within the memory limit, with the
# Pareto frontier (no other plan has less memory and higher MFU) marked.
# Data: FILE.dat from `megasim search --plot FILE.png`, columns
#   memory_per_gpu_gib  mfu_percent  frontier(0/1)
# usage: gnuplot -e "datafile='plans.png.dat'; outfile='plans.png'" plots/search-frontier.gp
if (!exists("datafile")) datafile = 'search.png.dat'
if (!exists("outfile")) outfile = 'search.png'
set terminal pngcairo size 900,600 noenhanced font ",11"
set output outfile
set title "megasim search: predicted MFU vs memory per GPU"
set xlabel "peak memory per GPU (GiB)"
set ylabel "predicted MFU (%)"
set grid
set key top left
# Block 0: every plan that fits; block 1: the frontier (memory and MFU
# both rise along it, so "smooth unique" orders it by memory).
plot datafile index 0 using 1:2 with points pt 7 ps 0.4 lc rgb "#9aa5b1" title "valid plans", \
     datafile index 1 using 1:2 smooth unique with lines lw 2 lc rgb "#c0392b" notitle, \
     datafile index 1 using 1:2 with points pt 7 ps 0.9 lc rgb "#c0392b" title "Pareto frontier"
