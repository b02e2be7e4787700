#include "app.h"

#ifdef _WIN32
#include <io.h>
int isatty_stdout(void) { return _isatty(1); }
#else
#include <unistd.h>
int isatty_stdout(void) { return isatty(1); }
#endif
