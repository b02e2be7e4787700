/* What the machine is and what the process uses: the two questions the
 * engine, the benchmark and the chat's memory meter ask the system. */
#ifndef NIBBLE_ENG_SYS_H
#define NIBBLE_ENG_SYS_H

#include <stddef.h>
#include <stdint.h>

/* Physical cores of this machine (at least 1). */
int eng_physical_cores(void);
/* This process's resident set now, in bytes; 0 where it cannot be read. */
uint64_t eng_rss_bytes(void);
/* A byte count as a person reads it, in powers of 1024: "512 B",
 * "1.5 KiB", "469.5 MiB". Writes at most n bytes to out. */
void eng_format_bytes(double bytes, char *out, size_t n);

#endif
