/* tests/model/job_of.h: a job from one command line (space-separated
 * flags), parsed and finalized as `megasim predict` would (8 GPUs a
 * node), for the model tests that state their cases as flags. */
#ifndef TESTS_MODEL_JOB_OF_H
#define TESTS_MODEL_JOB_OF_H

#include "model/job.h"

#include <stdio.h>
#include <string.h>

/* 0, or -1 with job_parse's or job_finalize's message in err. */
static inline int job_of(const char *args, job_t *j, char *err)
{
    static char buf[1024];
    char *argv[48];
    int argc = 0;
    snprintf(buf, sizeof buf, "%s", args);
    for (char *s = strtok(buf, " "); s && argc < 48; s = strtok(NULL, " "))
        argv[argc++] = s;
    return job_parse(j, argc, argv, NULL, NULL, err) || job_finalize(j, 8, err);
}

#endif
