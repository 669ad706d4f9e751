/* megasim: one program, one subcommand per task. main only dispatches;
 * each subcommand parses, builds, runs and reports. */
#include "cmd/cli.h"

#include <stdio.h>
#include <string.h>

int cmd_predict(int argc, char **argv);
int cmd_hardware(int argc, char **argv);
int cmd_schedule(int argc, char **argv);
int cmd_simulate(int argc, char **argv);
int cmd_plot(int argc, char **argv);
extern const opt_table plot_opts;
int cmd_reproduce(int argc, char **argv);
extern const opt_table reproduce_opts;
extern const opt_table predict_opts, hardware_opts, schedule_opts, simulate_opts;
int cmd_search(int argc, char **argv);
extern const opt_table search_opts;
int cmd_calibrate(int argc, char **argv);
extern const opt_table calibrate_opts;
int cmd_run(int argc, char **argv);
extern const opt_table run_opts;
int cmd_compare(int argc, char **argv);
extern const opt_table compare_opts;
int cmd_goodput(int argc, char **argv);
extern const opt_table goodput_opts;
int cmd_supervise(int argc, char **argv);
extern const opt_table supervise_opts;
int cmd_diagnose(int argc, char **argv);
extern const opt_table diagnose_opts;

const cli_cmd_t cli_cmds[] = {
    {"predict", "Closed-form estimate of one job: iteration time, MFU/HFU, tokens/s, memory per GPU.",
     "[JOB.json ...] [flags]", "megasim predict --preset megatron-lm --num-gpus 12288 --json",
     cmd_predict, 1, &predict_opts},
    {"simulate", "Discrete-event simulation of every rank's op program: iteration time, MFU, where time goes.",
     "[JOB.json ...] [flags] [--no-fold] [--slow-rank R:F] [--slow-link NODE:F] [--slow-hosts FRACTION]",
     "megasim simulate --preset megatron-lm --slow-rank 17:1.2 --json", cmd_simulate, 1, &simulate_opts},
    {"search", "Best parallel plans for a model on a cluster: closed form ranks all, simulator re-ranks the best.",
     "[JOB.json ...] [flags] [--top N] [--rerank K] [--min-batch B --max-batch B] [--out F.h5] [--csv F] [--plot F.png]",
     "megasim search --preset megascale --num-gpus 12288 --global-batch-size 6144", cmd_search, 1, &search_opts},
    {"goodput", "A whole run under faults: ETTR, wall-clock days, restarts and lost time by cause, best checkpoint "
     "interval (Monte Carlo).",
     "[JOB.json ...] [flags] [--tokens N | --train-days D] [--trials N] [--seed S] [--checkpoint-interval-s S] "
     "[--json] [--out F.h5] [--plot PREFIX]",
     "megasim goodput --train-days 30", cmd_goodput, 1, &goodput_opts},
    {"reproduce", "Rebuild MegaScale's Table 2, Table 3 and Figure 9: paper vs closed form vs simulator, with errors.",
     "[all|table2|table3|fig9|quick] [--out FILE.h5] [--no-sim]", "megasim reproduce table3",
     cmd_reproduce, 0, &reproduce_opts},
    {"schedule", "Print one rank's op program, one op a line; --verify checks all stages' programs agree.",
     "[JOB.json ...] [flags] [--rank R] [--layers] [--verify]",
     "megasim schedule --num-gpus 8 --tensor-model-parallel-size 1 --global-batch-size 16 --rank 0",
     cmd_schedule, 1, &schedule_opts},
    {"hardware", "List the built-in hardware profiles, or print one (or check a file) as JSON.",
     "[--gpu NAME] [--cluster NAME] [--hardware FILE]", "megasim hardware --gpu h100-sxm-80gb --cluster fattree",
     cmd_hardware, 0, &hardware_opts},
    {"calibrate", "Measure this machine (kernels, MPI or NCCL collectives), fit the curves, write a hardware profile.",
     "--device cpu|gpu [--quick] --out FILE.json [--raw FILE.h5]",
     "mpirun -np 2 megasim calibrate --device cpu --quick --out cpu.json", cmd_calibrate, 0, &calibrate_opts},
    {"run", "Train a GPT with real maths, playing every rank's op program (CPU+MPI or GPU+NCCL); time every op.",
     "[JOB.json ...] [flags] [--train-iters N] [--seed S] [--device cpu|gpu] [--json] [--out F.h5] [--trace F.json] "
     "[--save DIR [--save-interval N]] [--resume]   (the job's defaults: experiments/real/tiny-gpt.json; "
     "GPUs: the MPI world size)",
     "mpirun -np 8 megasim run --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --sequence-parallel",
     cmd_run, 1, &run_opts},
    {"supervise", "Keep a training job alive: restart it from its checkpoint after a crash or a hang, log each "
     "incident, report ETTR.",
     "[--max-restarts N] [--heartbeat-timeout S] [--incidents FILE] -- mpirun -np N megasim run ... --save DIR",
     "megasim supervise --heartbeat-timeout 30 -- mpirun -np 8 megasim run --save ckpt --save-interval 5",
     cmd_supervise, 0, &supervise_opts},
    {"diagnose", "Which rank a hang comes from (a run directory's heartbeats), which ranks or links are slow (a "
     "result file).",
     "RESULT [--json] [--mads K] [--min-excess F]   (RESULT: run --save DIR, run --out or simulate --out)",
     "megasim diagnose ckpt-dir --json", cmd_diagnose, 0, &diagnose_opts},
    {"compare", "A measured run (run --out) vs the simulator and the closed form: per step, op class, stream, rank.",
     "RUN.h5 [SIM.h5] [--json] [--plot PREFIX] [--plots-dir DIR] [--ranks-shown N]",
     "megasim compare run.h5 --plot run-vs-sim", cmd_compare, 0, &compare_opts},
    {"plot", "Redraw the figures of a result file (simulate --out, run --out, reproduce) with gnuplot, as PNG and SVG.",
     "FILE.h5 [--outdir DIR] [--plots-dir DIR]", "megasim plot results/megascale.h5", cmd_plot, 0, &plot_opts},
};
const int cli_ncmds = sizeof cli_cmds / sizeof cli_cmds[0];

static void usage(FILE *f)
{
    fprintf(f, "usage: megasim SUBCOMMAND [options]   (megasim SUBCOMMAND --help for its options;"
               " megasim --version)\n\n"
               "Cost model and simulator of large-scale LLM training (MegaScale, NSDI 2024).\n\n"
               "subcommands:\n");
    for (int i = 0; i < cli_ncmds; i++)
        fprintf(f, "  %-10s %s\n", cli_cmds[i].name, cli_cmds[i].summary);
    fprintf(f, "\nexample: megasim predict   (MegaScale 175B on 12,288 GPUs, the paper's plan)\n");
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
        printf("megasim %s\n", MEGASIM_VERSION);
        return 0;
    }
    for (int i = 0; i < cli_ncmds; i++)
        if (!strcmp(argv[1], cli_cmds[i].name))
            return cli_cmds[i].run(argc - 1, argv + 1);
    fprintf(stderr, "megasim: error: unknown subcommand '%s'; allowed:", argv[1]);
    for (int i = 0; i < cli_ncmds; i++)
        fprintf(stderr, " %s", cli_cmds[i].name);
    fprintf(stderr, " (megasim --help describes them)\n");
    return 2;
}
