/* `hutch doctor`: checks the host feature by feature and says what works and what does not. */
#pragma once

/* argv[0] is "doctor". Returns 0 when everything hutch run needs works, 1 otherwise. */
int doctor_main(int argc, char **argv);
