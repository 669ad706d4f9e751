/* cmd/ranks.c: the ranks' agreements under mpirun (ranks.h). */
#include "cmd/ranks.h"

#include "model/opts.h"

#include <mpi.h>

void ranks_on_node(int *rank, int *size)
{
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, rank);
    MPI_Comm_size(node, size);
    MPI_Comm_free(&node);
}

int ranks_any_failed(int rc)
{
    int bad = rc != 0, any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return any;
}

int ranks_first_failure(int rc, char *err)
{
    int me, world;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    int mine = rc ? me : world, first = world;
    MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (first < world)
        MPI_Bcast(err, OPT_ERR_LEN, MPI_CHAR, first, MPI_COMM_WORLD);
    return first < world;
}
