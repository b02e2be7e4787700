#include "app.h"

#ifdef _WIN32
#include <fcntl.h>
#include <io.h>
#include <windows.h>
int isatty_stdout(void) { return _isatty(1); }

void app_platform_init(void)
{
    /* Text is UTF-8 bytes everywhere, as on Linux: no CRLF translation on
     * the standard streams (a console shows "\n" as a new line anyway),
     * and the console decodes and encodes UTF-8. Arguments and file names
     * are UTF-8 where Windows honours the activeCodePage of the manifest
     * (packaging/windows/nibble.manifest; Windows 10 1903 and later). */
    _setmode(0, _O_BINARY);
    _setmode(1, _O_BINARY);
    _setmode(2, _O_BINARY);
    SetConsoleOutputCP(CP_UTF8);
    SetConsoleCP(CP_UTF8);
}
#else
#include <signal.h>
#include <unistd.h>
int isatty_stdout(void) { return isatty(1); }

void app_platform_init(void)
{
    /* A file size limit (ulimit -f) reached mid-write must be a write
     * error the writer reports (EFBIG: "cannot save ...: File too large",
     * the temporary file removed, the old file kept), as a full disk is,
     * not a signal that kills the chat and loses the reply. */
    signal(SIGXFSZ, SIG_IGN);
}
#endif
