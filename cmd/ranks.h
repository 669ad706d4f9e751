/* cmd/ranks: what the ranks of a command launched under mpirun agree on
 * (run's setup and its every fallible step): this rank's place among the
 * ranks on its machine, whether any rank failed, and which message to
 * print for it. Each is collective over MPI_COMM_WORLD. */
#ifndef CMD_RANKS_H
#define CMD_RANKS_H

/* This rank's place among the ranks sharing its machine, and their number. */
void ranks_on_node(int *rank, int *size);

/* 1 when rc is non-zero on any rank, the same on every rank. */
int ranks_any_failed(int rc);

/* ranks_any_failed, and err (OPT_ERR_LEN) on every rank becomes the
 * message of the lowest rank that failed, so that rank 0's one line names
 * the cause. */
int ranks_first_failure(int rc, char *err);

#endif
