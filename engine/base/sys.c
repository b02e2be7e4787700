/* What the machine is: physical core count; what the process uses:
 * resident memory (sys.h). Also the Windows spellings of port.h. */
#include <stdio.h>
#include <string.h>

#include "sys.h"

#ifdef _WIN32
#include <errno.h>
#include <stdlib.h>
#include <windows.h>

#include <psapi.h>

#include "port.h"

int nb_rename(const char *from, const char *to)
{
    if (MoveFileExA(from, to, MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH))
        return 0;
    DWORD w = GetLastError();
    errno = w == ERROR_FILE_NOT_FOUND || w == ERROR_PATH_NOT_FOUND ? ENOENT
          : w == ERROR_ACCESS_DENIED || w == ERROR_SHARING_VIOLATION ? EACCES
          : w == ERROR_DISK_FULL ? ENOSPC : EIO;
    return -1;
}

ssize_t nb_getline(char **line, size_t *cap, FILE *f)
{
    size_t n = 0;
    int c;
    while ((c = getc(f)) != EOF) {
        if (n + 2 > *cap) {
            size_t nc = *cap ? *cap * 2 : 128;
            char *b = realloc(*line, nc);
            if (!b) {
                errno = ENOMEM;
                return -1;
            }
            *line = b;
            *cap = nc;
        }
        (*line)[n++] = (char)c;
        if (c == '\n')
            break;
    }
    if (n == 0)
        return -1;
    (*line)[n] = 0;
    return (ssize_t)n;
}

long long nb_mtime_ns(const char *path, const struct stat *sb)
{
    WIN32_FILE_ATTRIBUTE_DATA fa;
    if (!GetFileAttributesExA(path, GetFileExInfoStandard, &fa))
        return (long long)sb->st_mtime * 1000000000LL;
    /* 100 ns ticks since 1601-01-01; 1970 is 11644473600 s later */
    unsigned long long t = ((unsigned long long)fa.ftLastWriteTime.dwHighDateTime << 32) |
                           fa.ftLastWriteTime.dwLowDateTime;
    return ((long long)t - 116444736000000000LL) * 100;
}

int eng_physical_cores(void)
{
    SYSTEM_INFO si;
    GetSystemInfo(&si);
    return si.dwNumberOfProcessors > 0 ? (int)si.dwNumberOfProcessors : 1;
}
uint64_t eng_rss_bytes(void)
{
    PROCESS_MEMORY_COUNTERS pmc;
    memset(&pmc, 0, sizeof pmc);
    pmc.cb = sizeof pmc;
    if (!GetProcessMemoryInfo(GetCurrentProcess(), &pmc, sizeof pmc))
        return 0;
    return (uint64_t)pmc.WorkingSetSize; /* resident pages, as statm's second field */
}
#else
#include <unistd.h>

/* Count distinct (package, core) pairs in sysfs; hyper-threads share a
 * core and do not speed up bandwidth-bound decoding. */
int eng_physical_cores(void)
{
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    if (online < 1)
        online = 1;
    enum { MAXC = 1024 };
    static long seen[MAXC];
    int n = 0;
    for (long cpu = 0; cpu < online && cpu < MAXC; cpu++) {
        char path[128];
        long core = -1, pkg = -1;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%ld/topology/core_id", cpu);
        FILE *f = fopen(path, "r");
        if (!f)
            return (int)online;
        if (fscanf(f, "%ld", &core) != 1)
            core = cpu;
        fclose(f);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%ld/topology/physical_package_id", cpu);
        if ((f = fopen(path, "r"))) {
            if (fscanf(f, "%ld", &pkg) != 1)
                pkg = 0;
            fclose(f);
        }
        long key = pkg * 65536 + core;
        int dup = 0;
        for (int i = 0; i < n; i++)
            dup |= seen[i] == key;
        if (!dup)
            seen[n++] = key;
    }
    return n > 0 ? n : (int)online;
}

#ifdef __linux__
/* statm's second field: resident pages (file-backed mapped pages, the
 * model's weights among them, included). */
uint64_t eng_rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long size = 0, res = 0;
    if (!f)
        return 0;
    int n = fscanf(f, "%llu %llu", &size, &res);
    fclose(f);
    long pg = sysconf(_SC_PAGESIZE);
    return n == 2 && pg > 0 ? (uint64_t)res * (uint64_t)pg : 0;
}
#elif defined(__APPLE__)
#include <mach/mach.h>
uint64_t eng_rss_bytes(void)
{
    mach_task_basic_info_data_t info;
    mach_msg_type_number_t count = MACH_TASK_BASIC_INFO_COUNT;
    if (task_info(mach_task_self(), MACH_TASK_BASIC_INFO, (task_info_t)&info, &count) != KERN_SUCCESS)
        return 0;
    return (uint64_t)info.resident_size;
}
#else
uint64_t eng_rss_bytes(void) { return 0; }
#endif
#endif

void eng_format_bytes(double bytes, char *out, size_t n)
{
    const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (bytes >= 1024 && u < 4) {
        bytes /= 1024;
        u++;
    }
    snprintf(out, n, u ? "%.1f %s" : "%.0f %s", bytes, unit[u]);
}
