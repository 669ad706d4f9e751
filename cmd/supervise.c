/* cmd_supervise: `megasim supervise [flags] -- mpirun ... megasim run ...
 * --save DIR`: keeps a training job alive without people. It starts the
 * job in its own process group and watches it: its exit, and its ranks'
 * heartbeats (real/health.h, DIR/heartbeat unless the job names another).
 * On a crash (the job exits with a failure or a signal) or a hang (no rank
 * has made progress for --heartbeat-timeout) it stops the whole job
 * (SIGTERM, then SIGKILL to its group and to every rank its heartbeats
 * name), names the culprit from the wait-for graph, runs the job's
 * self-check (`run --self-check`: the ranks' collectives and one step),
 * records the incident, and relaunches with --resume from the newest
 * complete checkpoint toward the same final step. With --hosts FILE every
 * launch gets --hostfile DIR/hostfile, the hosts in use; a host whose
 * ranks fail the self-check is left out and a spare takes its place. The
 * job's output passes through. The incident log (JSON lines) ends with
 * the run's ETTR: steps trained x their median time / wall clock,
 * goodput's definition. */
#include "cmd/cli.h"
#include "real/ckpt.h"
#include "real/health.h"
#include "sim/out.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
    int max_restarts, help;
    double timeout_s, start_timeout_s, term_s;
    char incidents[1024], hosts[1024];
} supervise_opts_t;

#define SO(f) offsetof(supervise_opts_t, f)
static const opt_def supervise_defs[] = {
    {"max-restarts", OPT_INT, SO(max_restarts), 0, 100000, "10", 0, "supervise",
     "restarts before giving up (exit 1)"},
    {"heartbeat-timeout", OPT_REAL, SO(timeout_s), 0.1, 86400, "60", 0, "supervise",
     "a job none of whose ranks made progress for this long, s, is hung (longer than its longest op)"},
    {"start-timeout", OPT_REAL, SO(start_timeout_s), 0.1, 86400, "600", 0, "supervise",
     "a launch none of whose ranks has written a heartbeat after this long, s, is hung (the start: mpirun, "
     "imports, communicators)"},
    {"term-s", OPT_REAL, SO(term_s), 0, 600, "3", 0, "supervise",
     "after SIGTERM, the seconds a stopped job gets before SIGKILL"},
    {"incidents", OPT_STR, SO(incidents), 1, 1024, "", 0, "supervise",
     "the incident log, JSON lines (default DIR/incidents.jsonl beside the job's checkpoints)"},
    {"hosts", OPT_STR, SO(hosts), 1, 1024, "", 0, "supervise",
     "the job's hosts, one a line: NAME [slots=N] [spare] (# comments); each launch gets --hostfile "
     "DIR/hostfile of the hosts in use, ranks filling them in order; a host whose ranks fail the self-check is "
     "left out and the first spare with as many slots takes its place"},
    {"help", OPT_BOOL, SO(help), 0, 1, "false", 0, "supervise", "show this help"},
};
const opt_table supervise_opts = {supervise_defs, sizeof supervise_defs / sizeof supervise_defs[0],
                                  "supervise option"};

#define POLL_S 0.05
#define MAX_ARGS 512
#define MAX_HOSTS 4096

/* SIGINT, SIGTERM or SIGHUP to supervise: the job is stopped with it (it
 * runs in its own process group, which a terminal's Ctrl-C misses). */
static volatile sig_atomic_t interrupted;
static void on_signal(int sig) { interrupted = sig; }

typedef struct {
    supervise_opts_t o;
    char **cmd;           /* the job's command */
    int ncmd;
    char save[1024], hbdir[1100];
    int world, target;    /* target: the step the first attempt trains until */
    double t0;
    double *step_s;       /* step times seen in heartbeats */
    long nstep_s, capstep_s;
    int last_step;        /* the furthest step any heartbeat reported done */
    int all_done;         /* every rank has finished (it may still be exiting) */
    FILE *log;
    struct host {         /* --hosts: in file order */
        char name[256];
        int slots, spare; /* spare: not in use (a listed spare, or an evicted host) */
        int evicted;
    } *hosts;
    int nhosts;
    char hostfile[1100];  /* DIR/hostfile, what each launch gets */
} sup_t;

/* The heartbeats' clock, s. */
static double now_s(void) { return health_now_ns() * 1e-9; }

/* The value of --flag VALUE or --flag=VALUE in the job's command, or NULL. */
static const char *cmd_flag(const sup_t *S, const char *flag)
{
    size_t n = strlen(flag);
    const char *v = NULL;
    for (int i = 0; i < S->ncmd; i++) {
        if (!strcmp(S->cmd[i], flag) && i + 1 < S->ncmd)
            v = S->cmd[i + 1];
        else if (!strncmp(S->cmd[i], flag, n) && S->cmd[i][n] == '=')
            v = S->cmd[i] + n + 1;
    }
    return v;
}

/* Whether the job's command gives --flag (alone or as --flag=VALUE). */
static int cmd_has(const sup_t *S, const char *flag)
{
    size_t n = strlen(flag);
    for (int i = 0; i < S->ncmd; i++)
        if (!strncmp(S->cmd[i], flag, n) && (!S->cmd[i][n] || S->cmd[i][n] == '='))
            return 1;
    return 0;
}

/* ---- the job's process group ------------------------------------------------ */

static pid_t launch(char **argv)
{
    fflush(stdout), fflush(stderr);
    pid_t p = fork();
    if (p == 0) {
        setpgid(0, 0);
        execvp(argv[0], argv);
        fprintf(stderr, "megasim supervise: error: cannot start %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    if (p > 0)
        setpgid(p, p);
    return p;
}

/* Every rank the heartbeats name that is still a megasim process. */
static void kill_ranks(const sup_t *S)
{
    char path[1300], err[256], comm[64];
    for (int r = 0; r < S->world; r++) {
        hb_record_t h;
        health_path(S->hbdir, r, path, sizeof path);
        if (health_read(path, &h, err, sizeof err) || h.pid <= 1)
            continue;
        snprintf(path, sizeof path, "/proc/%d/comm", h.pid);
        FILE *f = fopen(path, "r");
        if (f && fgets(comm, sizeof comm, f) && !strncmp(comm, "megasim", 7))
            kill(h.pid, SIGKILL);
        if (f)
            fclose(f);
    }
}

/* Stops the job: SIGTERM to its group, SIGKILL after term_s; then every
 * rank left. Returns the exit status. */
static int stop(const sup_t *S, pid_t pid)
{
    int st = 0;
    kill(-pid, SIGTERM);
    for (double t = 0; t < S->o.term_s; t += POLL_S) {
        if (waitpid(pid, &st, WNOHANG) == pid)
            goto done;
        usleep((useconds_t)(POLL_S * 1e6));
    }
    kill(-pid, SIGKILL);
    waitpid(pid, &st, 0);
done:
    kill(-pid, SIGKILL); /* whatever of the group is left */
    kill_ranks(S);
    return st;
}

/* Runs argv to its end, or stops it after limit_s. 0 when it exited 0. */
static int run_bounded(const sup_t *S, char **argv, double limit_s)
{
    pid_t p = launch(argv);
    int st = 0;
    if (p < 0)
        return -1;
    for (double t = 0; t < limit_s && !interrupted; t += POLL_S) {
        if (waitpid(p, &st, WNOHANG) == p)
            return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
        usleep((useconds_t)(POLL_S * 1e6));
    }
    stop(S, p);
    return -1;
}

/* ---- heartbeats ------------------------------------------------------------- */

/* The world's records (rec[S->world]); their latest progress, -1 when
 * rank 0's record is not there yet. */
static int64_t read_world(sup_t *S, hb_record_t *rec, int max)
{
    char err[256];
    S->all_done = 0;
    if (health_read_world(S->hbdir, rec, max, &S->world, err, sizeof err))
        return -1;
    int64_t latest = 0;
    S->all_done = 1;
    for (int r = 0; r < S->world; r++) {
        latest = rec[r].progress_ns > latest ? rec[r].progress_ns : latest;
        S->all_done &= rec[r].state == HB_DONE;
        if (rec[r].target_step > S->target)
            S->target = rec[r].target_step;
        if (rec[r].last_step > S->last_step && rec[r].last_step_s > 0) {
            S->last_step = rec[r].last_step;
            if (S->nstep_s == S->capstep_s) {
                long cap = S->capstep_s ? 2 * S->capstep_s : 256;
                double *b = realloc(S->step_s, sizeof *b * cap);
                if (!b)
                    continue;
                S->step_s = b, S->capstep_s = cap;
            }
            S->step_s[S->nstep_s++] = rec[r].last_step_s;
        }
    }
    return latest;
}

/* ---- incidents -------------------------------------------------------------- */

static void log_line(sup_t *S, cJSON *o)
{
    char *t = cJSON_PrintUnformatted(o);
    if (t && S->log) {
        fprintf(S->log, "%s\n", t);
        fflush(S->log);
    }
    if (t)
        fprintf(stderr, "megasim supervise: %s\n", t);
    cJSON_free(t);
    cJSON_Delete(o);
}

/* The culprit of an incident from the wait-for graph: of its culprits
 * (failed, dead, or waited on and waiting on nobody), the one that
 * recorded an error first (the others' errors follow from it: a peer's
 * death fails their calls), else the lowest rank. */
static void blame(const sup_t *S, const hb_record_t *rec, cJSON *inc)
{
    if (!S->world)
        return;
    hb_wait_t *w = calloc((size_t)S->world, sizeof *w);
    int *chain = calloc((size_t)S->world, sizeof *chain), nchain = 0;
    int64_t now = 0;
    for (int r = 0; r < S->world; r++)
        now = rec[r].beat_ns > now ? rec[r].beat_ns : now;
    int n = w && chain ? health_waitfor(rec, S->world, now, w, chain, &nchain) : 0;
    /* A crash that left no word: the rank whose beat stopped first. */
    int oldest = 0;
    for (int r = 1; w && !n && r < S->world; r++)
        oldest = rec[r].beat_ns < rec[oldest].beat_ns ? r : oldest;
    if (w && !n)
        w[oldest].culprit = 1;
    int first = -1;
    for (int r = 0; w && r < S->world; r++)
        if (w[r].culprit && (first < 0 || (rec[r].error_ns &&
                                           (!rec[first].error_ns || rec[r].error_ns < rec[first].error_ns))))
            first = r;
    if (first >= 0) {
        const hb_record_t *h = &rec[first];
        char op[96];
        snprintf(op, sizeof op, "step %d op %d (%s)", h->step, h->op, health_op_name(h->op_kind));
        cJSON_AddNumberToObject(inc, "rank", first);
        cJSON_AddStringToObject(inc, "host", h->host);
        cJSON_AddStringToObject(inc, "op", op);
        if (h->error[0])
            cJSON_AddStringToObject(inc, "message", h->error);
    }
    free(w), free(chain);
}

/* ---- hosts (--hosts) ---------------------------------------------------------- */

/* Reads FILE: NAME [slots=N] [spare] a line. 0, or -1 with err. */
static int read_hosts(sup_t *S, const char *path, char *err)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, OPT_ERR_LEN, "--hosts %s: %s", path, strerror(errno));
        return -1;
    }
    S->hosts = calloc(MAX_HOSTS, sizeof *S->hosts);
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int ln = 0, rc = S->hosts ? 0 : -1, in_use = 0;
    while (!rc && (len = getline(&line, &cap, f)) >= 0) {
        ln++;
        if ((size_t)len != strlen(line) || len > 1000) {
            snprintf(err, OPT_ERR_LEN, "--hosts %s, line %d: %s; a line is NAME [slots=N] [spare]", path, ln,
                     len > 1000 ? "longer than 1000 bytes" : "a NUL byte");
            rc = -1;
            break;
        }
        char *hash = strchr(line, '#');
        if (hash)
            *hash = 0;
        char name[512] = "", w[2][64] = {"", ""}, extra[8] = "";
        int nw = sscanf(line, "%511s %63s %63s %7s", name, w[0], w[1], extra);
        if (nw <= 0)
            continue;
        struct host h = {.slots = 1};
        int ok = nw <= 3 && strlen(name) < sizeof h.name && strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNO"
                                                                        "PQRSTUVWXYZ0123456789._-:") == strlen(name);
        for (int k = 0; ok && k < nw - 1; k++) {
            char tail;
            if (!strcmp(w[k], "spare") && !h.spare)
                h.spare = 1;
            else if (sscanf(w[k], "slots=%d%c", &h.slots, &tail) != 1 || h.slots < 1 || h.slots > 100000)
                ok = 0;
        }
        for (int k = 0; ok && k < S->nhosts; k++)
            ok = strcmp(S->hosts[k].name, name) != 0;
        if (!ok || S->nhosts == MAX_HOSTS) {
            snprintf(err, OPT_ERR_LEN, "--hosts %s, line %d: '%.200s' is not NAME [slots=N] [spare] (a host named "
                     "once, letters, digits and ._-: only, N from 1 to 100000, at most %d hosts)", path, ln, name,
                     MAX_HOSTS);
            rc = -1;
            break;
        }
        snprintf(h.name, sizeof h.name, "%s", name);
        in_use += !h.spare;
        S->hosts[S->nhosts++] = h;
    }
    free(line);
    fclose(f);
    if (!rc && !in_use) {
        snprintf(err, OPT_ERR_LEN, "--hosts %s: no host to run on (every line is a spare, or the file is empty)",
                 path);
        rc = -1;
    }
    return rc;
}

/* --hosts needs the job started by an MPI launcher that takes --hostfile,
 * and no host list of its own. */
static int check_launcher(const sup_t *S, char *err)
{
    const char *base = strrchr(S->cmd[0], '/') ? strrchr(S->cmd[0], '/') + 1 : S->cmd[0];
    if (strcmp(base, "mpirun") && strcmp(base, "mpiexec") && strcmp(base, "orterun")) {
        snprintf(err, OPT_ERR_LEN, "--hosts: the job's command starts with '%s'; allowed: mpirun, mpiexec or "
                 "orterun (supervise gives it --hostfile)", base);
        return -1;
    }
    static const char *const own[] = {"--host", "-host", "-H", "--hostfile", "-hostfile", "--machinefile",
                                      "-machinefile", "--default-hostfile"};
    for (size_t k = 0; k < sizeof own / sizeof *own; k++)
        if (cmd_has(S, own[k])) {
            snprintf(err, OPT_ERR_LEN, "--hosts: the job's command gives %s: the hosts come from --hosts only",
                     own[k]);
            return -1;
        }
    return 0;
}

/* DIR/hostfile: the hosts in use, as the launcher reads them. */
static int write_hostfile(const sup_t *S)
{
    char err[OPT_ERR_LEN];
    out_file_t o;
    if (out_open(&o, S->hostfile, "w", err, sizeof err)) {
        fprintf(stderr, "megasim supervise: error: %s\n", err);
        return -1;
    }
    fprintf(o.f, "# megasim supervise: the hosts in use (from --hosts %s)\n", S->o.hosts);
    for (int k = 0; k < S->nhosts; k++)
        if (!S->hosts[k].spare)
            fprintf(o.f, "%s slots=%d\n", S->hosts[k].name, S->hosts[k].slots);
    if (out_close(&o, 0)) {
        fprintf(stderr, "megasim supervise: error: cannot write %s\n", S->hostfile);
        return -1;
    }
    return 0;
}

/* The host rank r runs on: ranks fill the hosts in use in order, slots
 * each (the launcher's by-slot placement), around again past the last. */
static int host_of(const sup_t *S, int r)
{
    int total = 0;
    for (int k = 0; k < S->nhosts; k++)
        total += S->hosts[k].spare ? 0 : S->hosts[k].slots;
    r = total ? r % total : 0;
    for (int k = 0; k < S->nhosts; k++)
        if (!S->hosts[k].spare && (r -= S->hosts[k].slots) < 0)
            return k;
    return -1;
}

/* After a failed self-check: the hosts of the ranks that failed it (its
 * heartbeats), else of the incident's culprit, are left out, each for the
 * first spare with as many slots; a host with no spare left stays (the
 * job cannot run on fewer). Adds "evicted" and "replaced_by" to inc; rec
 * (max records) is scratch for the self-check's heartbeats. */
static void evict_hosts(sup_t *S, cJSON *inc, hb_record_t *rec, int max)
{
    char err[256];
    int world = 0, *bad = calloc((size_t)S->nhosts, sizeof *bad);
    if (!bad)
        return;
    if (health_read_world(S->hbdir, rec, max, &world, err, sizeof err))
        world = 0;
    for (int r = 0; r < world; r++) {
        int h = rec[r].state == HB_FAILED || rec[r].error[0] ? host_of(S, r) : -1;
        if (h >= 0)
            bad[h] = 1;
    }
    int any = 0;
    for (int k = 0; k < S->nhosts; k++)
        any |= bad[k];
    const cJSON *culprit = cJSON_GetObjectItemCaseSensitive(inc, "rank");
    int h = cJSON_IsNumber(culprit) ? host_of(S, culprit->valueint) : -1;
    if (!any && h >= 0)
        bad[h] = 1;
    cJSON *out = cJSON_AddArrayToObject(inc, "evicted"), *in = cJSON_AddArrayToObject(inc, "replaced_by");
    for (int k = 0; k < S->nhosts; k++) {
        if (!bad[k])
            continue;
        int spare = -1;
        for (int j = 0; j < S->nhosts && spare < 0; j++)
            if (S->hosts[j].spare && !S->hosts[j].evicted && S->hosts[j].slots >= S->hosts[k].slots)
                spare = j;
        if (spare < 0) {
            fprintf(stderr, "megasim supervise: %s failed the self-check and no spare is left: it stays\n",
                    S->hosts[k].name);
            continue;
        }
        S->hosts[k].spare = S->hosts[k].evicted = 1, S->hosts[spare].spare = 0;
        cJSON_AddItemToArray(out, cJSON_CreateString(S->hosts[k].name));
        cJSON_AddItemToArray(in, cJSON_CreateString(S->hosts[spare].name));
    }
    free(bad);
}

/* ---- the loop ----------------------------------------------------------------- */

static int setup(int argc, char **argv, sup_t *S, char *err)
{
    int dash = -1;
    for (int i = 1; i < argc && dash < 0; i++)
        if (!strcmp(argv[i], "--"))
            dash = i;
    if (dash < 0 || dash == argc - 1) {
        snprintf(err, OPT_ERR_LEN, "%s; usage: megasim supervise [flags] -- mpirun -np N megasim run ... --save DIR",
                 dash < 0 ? "no -- before the job's command" : "no command after --");
        return -1;
    }
    int npos = 0;
    if (cli_parse_flags(&supervise_opts, &S->o, dash, argv, NULL, 0, &npos,
                        "'%s' before --: the job's command goes after --", err))
        return -1;
    S->cmd = argv + dash + 1, S->ncmd = argc - dash - 1;
    if (S->ncmd > MAX_ARGS - 8) {
        snprintf(err, OPT_ERR_LEN, "the job's command has %d arguments; allowed at most %d", S->ncmd, MAX_ARGS - 8);
        return -1;
    }
    const char *save = cmd_flag(S, "--save"), *hb = cmd_flag(S, "--heartbeat");
    int has_run = 0;
    for (int i = 0; i < S->ncmd; i++)
        has_run |= !strcmp(S->cmd[i], "run");
    if (!has_run || !save || !*save) {
        snprintf(err, OPT_ERR_LEN, "the job's command must be megasim run with --save DIR (its checkpoints, the "
                 "restarts' starting points; got %s)", has_run ? "no --save" : "no 'run' subcommand");
        return -1;
    }
    if (cmd_has(S, "--resume") || cmd_has(S, "--until-step") || cmd_has(S, "--self-check")) {
        snprintf(err, OPT_ERR_LEN, "the job's command gives --resume, --until-step or --self-check: supervise "
                 "adds them itself when it restarts the job");
        return -1;
    }
    snprintf(S->save, sizeof S->save, "%s", save);
    snprintf(S->hbdir, sizeof S->hbdir, "%s", hb && *hb ? hb : "");
    if (!S->hbdir[0])
        snprintf(S->hbdir, sizeof S->hbdir, "%.1000s/heartbeat", S->save);
    if (S->o.hosts[0] && (read_hosts(S, S->o.hosts, err) || check_launcher(S, err) ||
                          out_make_dir(S->save, err, OPT_ERR_LEN)))
        return -1;
    snprintf(S->hostfile, sizeof S->hostfile, "%.1000s/hostfile", S->save);
    char path[1200];
    snprintf(path, sizeof path, "%s", S->o.incidents[0] ? S->o.incidents : "");
    if (!path[0]) {
        if (out_make_dir(S->save, err, OPT_ERR_LEN))
            return -1;
        snprintf(path, sizeof path, "%.1000s/incidents.jsonl", S->save);
    }
    if (!(S->log = fopen(path, "a"))) {
        snprintf(err, OPT_ERR_LEN, "--incidents %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* The command of attempt k: the job's, with --resume from the newest
 * complete checkpoint (if any) and --until-step the first attempt's end;
 * or with --self-check. With --hosts, the launcher's --hostfile first. */
static void attempt_argv(const sup_t *S, char **av, char *buf, int restart, int self_check)
{
    int n = 0;
    for (int i = 0; i < S->ncmd; i++) {
        av[n++] = S->cmd[i];
        if (i == 0 && S->nhosts)
            av[n++] = "--hostfile", av[n++] = (char *)S->hostfile;
    }
    if (self_check) {
        av[n++] = "--self-check";
    } else if (restart) {
        if (ckpt_newest(S->save, S->world) >= 0)
            av[n++] = "--resume";
        snprintf(buf, 32, "%d", S->target);
        if (S->target > 0) /* known once a rank has started training */
            av[n++] = "--until-step", av[n++] = buf;
    }
    av[n] = NULL;
}

/* A launch starts with no heartbeat of an earlier one: a stale record
 * would name a rank of another run (its incident is already logged). */
static void clear_heartbeats(sup_t *S)
{
    char path[1300];
    for (int r = 0;; r++) {
        health_path(S->hbdir, r, path, sizeof path);
        if (unlink(path) && errno == ENOENT)
            break;
    }
    S->world = 0;
}

/* Before each launch, the job's or its self-check's: no stale heartbeat,
 * and with --hosts the hosts in use written for its --hostfile. */
static int before_launch(sup_t *S)
{
    clear_heartbeats(S);
    return S->nhosts ? write_hostfile(S) : 0;
}

static int supervise(sup_t *S)
{
    static hb_record_t rec[4096];
    char *av[MAX_ARGS], num[32];
    S->t0 = now_s();
    for (int restarts = 0;; restarts++) {
        attempt_argv(S, av, num, restarts > 0, 0);
        if (before_launch(S))
            return 1;
        double t_launch = now_s();
        pid_t pid = launch(av);
        if (pid < 0) {
            fprintf(stderr, "megasim supervise: error: fork: %s\n", strerror(errno));
            return 1;
        }
        int st = 0;
        const char *cause = NULL;
        double last_progress = t_launch;
        for (;;) {
            usleep((useconds_t)(POLL_S * 1e6));
            int64_t p = read_world(S, rec, 4096);
            if (p > 0 && p * 1e-9 > last_progress)
                last_progress = p * 1e-9;
            if (waitpid(pid, &st, WNOHANG) == pid) {
                cause = WIFEXITED(st) && WEXITSTATUS(st) == 0 ? NULL : "crash";
                break;
            }
            /* before any rank has started, and once every rank has finished
             * (MPI_Finalize, exit), the start's own allowance */
            if (now_s() - last_progress > (p > 0 && !S->all_done ? S->o.timeout_s : S->o.start_timeout_s)) {
                cause = "hang";
                break;
            }
            if (interrupted) {
                stop(S, pid);
                fprintf(stderr, "megasim supervise: stopped by signal %d; the job with it\n", (int)interrupted);
                return 128 + interrupted;
            }
        }
        double detected = now_s();
        read_world(S, rec, 4096); /* the ranks' last words */
        if (!cause && S->target && S->last_step < S->target)
            cause = "crash"; /* exited 0 short of its end: not a success */
        if (!cause) {
            kill(-pid, SIGKILL); /* nothing of the group outlives it */
            break;
        }
        if (!restarts && !S->world) {
            /* no rank ever started: its command is wrong, not the machine */
            fprintf(stderr, "megasim supervise: error: the job exited (%s %d) before any rank started; not "
                    "restarted: check its command\n", WIFSIGNALED(st) ? "signal" : "status",
                    WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
            return 2;
        }
        if (!strcmp(cause, "hang"))
            stop(S, pid);
        else
            kill(-pid, SIGKILL), kill_ranks(S);
        cJSON *inc = cJSON_CreateObject();
        cJSON_AddStringToObject(inc, "cause", cause);
        blame(S, rec, inc);
        if (!strcmp(cause, "crash") && WIFSIGNALED(st))
            cJSON_AddNumberToObject(inc, "signal", WTERMSIG(st));
        else if (!strcmp(cause, "crash"))
            cJSON_AddNumberToObject(inc, "exit_code", WEXITSTATUS(st));
        cJSON_AddNumberToObject(inc, "detection_s", detected - last_progress);
        cJSON_AddNumberToObject(inc, "attempt", restarts + 1);
        if (restarts >= S->o.max_restarts) {
            cJSON_AddStringToObject(inc, "action", "gave up (--max-restarts)");
            log_line(S, inc);
            fprintf(stderr, "megasim supervise: error: the job failed %d times; --max-restarts %d reached\n",
                    restarts + 1, S->o.max_restarts);
            return 1;
        }
        attempt_argv(S, av, num, 0, 1);
        int world = S->world; /* the job's (the self-check's heartbeats replace its records) */
        if (before_launch(S))
            return 1;
        int ok = run_bounded(S, av, S->o.timeout_s + 60) == 0;
        S->world = world;
        cJSON_AddStringToObject(inc, "self_check", ok ? "passed" : "failed");
        if (!ok && S->nhosts)
            evict_hosts(S, inc, rec, 4096);
        int ck = ckpt_newest(S->save, S->world);
        cJSON_AddNumberToObject(inc, "resume_step", ck > 0 ? ck : 0);
        cJSON_AddNumberToObject(inc, "steps_redone", S->last_step > ck ? S->last_step - (ck > 0 ? ck : 0) : 0);
        cJSON_AddNumberToObject(inc, "restart_s", now_s() - detected);
        log_line(S, inc);
        /* The redone steps' times are seen again: keep the latest. */
        S->last_step = ck > 0 ? ck : 0;
    }
    double wall = now_s() - S->t0, med = 0;
    if (S->nstep_s) {
        qsort(S->step_s, S->nstep_s, sizeof *S->step_s, cli_cmp_double);
        med = S->step_s[S->nstep_s / 2];
    }
    int steps = S->target; /* the first attempt starts afresh (supervise refuses --resume) */
    cJSON *sum = cJSON_CreateObject();
    cJSON_AddNumberToObject(sum, "ettr", wall > 0 ? fmin(1, steps * med / wall) : 0);
    cJSON_AddNumberToObject(sum, "steps", steps);
    cJSON_AddNumberToObject(sum, "median_step_s", med);
    cJSON_AddNumberToObject(sum, "wall_s", wall);
    log_line(S, sum);
    return 0;
}

int cmd_supervise(int argc, char **argv)
{
    if (cli_wants_help(argc, argv))
        return 0;
    sup_t S;
    char err[OPT_ERR_LEN] = "";
    memset(&S, 0, sizeof S);
    S.last_step = -1;
    if (setup(argc, argv, &S, err)) {
        free(S.hosts);
        if (S.log)
            fclose(S.log);
        return cli_fail("supervise", err);
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL), sigaction(SIGTERM, &sa, NULL), sigaction(SIGHUP, &sa, NULL);
    int rc = supervise(&S);
    fclose(S.log);
    free(S.step_s);
    free(S.hosts);
    return rc;
}
