/* What the machine is and what the process uses: the two questions the
 * engine, the benchmark and the chat's memory meter ask the system. */
#ifndef NIBBLE_ENG_SYS_H
#define NIBBLE_ENG_SYS_H

#include <stdint.h>

/* Physical cores of this machine (at least 1). */
int eng_physical_cores(void);
/* This process's resident set now, in bytes; 0 where it cannot be read. */
uint64_t eng_rss_bytes(void);

#endif
