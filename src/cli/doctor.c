#include "cli/doctor.h"

#include <stdio.h>

int doctor_main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "hutch doctor: being written\n");
    return 1;
}
