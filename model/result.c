/* model/result.c: freeing an executor's result (model/result.h). */
#include "model/result.h"

#include <stdlib.h>
#include <string.h>

void result_free(result_t *r)
{
    free(r->per_entity), free(r->entity_rank), free(r->entity_count), free(r->timeline);
    memset(r, 0, sizeof *r);
}
