/* `hutch run`: one program in a fresh sandbox, supervised to its verdict, then thrown away. */
#pragma once

/* argv[0] is "run". Returns the process exit status (0 OK, 1 program failed, 2 hutch failed). */
int run_main(int argc, char **argv);
