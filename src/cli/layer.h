/* `hutch layer`: the disk layers of persistent roots (hutch run --writable-root NAME), which
 * outlive the runs that use them: their size and use, and their removal. */
#pragma once

/* argv[0] is "layer". Returns 0, 1 when the layer is missing or in use, 2 on a usage error. */
int layer_main(int argc, char **argv);
