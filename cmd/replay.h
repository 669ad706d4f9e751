/* replay: `--replay RESULT` on predict, simulate, schedule, search and run:
 * start from the job, the hardware profile and the subcommand's own
 * options recorded in a result file's configuration (docs/schema.md,
 * "config_json"), with the command line's job files and flags over them.
 * The recorded profile is used field for field (the profile file or
 * built-in it came from may have changed or be gone); --gpu or --cluster
 * replaces its section with that built-in, --hardware FILE the sections
 * FILE has. */
#ifndef CMD_REPLAY_H
#define CMD_REPLAY_H

#include "model/hw.h"
#include "model/job.h"

struct cJSON;


/* The hardware profile recorded in a configuration: every field of its
 * "gpu" and "cluster" sections (a field added since takes its default),
 * checked. `origin` as replay_read_config gives it. */
int replay_hardware(const struct cJSON *config, const char *origin, hw_t *hw, char *err);

/* The path of the last --replay on the command line, or NULL; only when
 * the subcommand's own table `extra` has the option. */
const char *replay_path(int argc, char **argv, const opt_table *extra);

/* The job (not finalized: its plan fields may still be searched) and the
 * hardware from the configuration recorded in `path`, with argv's files
 * and flags over them; config[cmd] as below. 0, or -1 with err. */
int replay_parse(const char *cmd, const char *path, int argc, char **argv, const opt_table *extra, void *extra_obj,
                 job_t *job, hw_t *hw, char *err);

/* cli_job_setup from the configuration recorded in `path`. The
 * subcommand's recorded options (config[cmd]) apply too, less those that
 * name outputs or how to print (out, trace, json, ...), run's checkpoint
 * directories and --resume, and the values a run measured beside its
 * options: a replay writes where and how its command line says. Returns 0,
 * or 2 after printing one error message. */
int replay_job_setup(const char *cmd, const char *path, int argc, char **argv, const opt_table *extra,
                     void *extra_obj, job_t *job, hw_t *hw);

#endif
