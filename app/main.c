/* nibble: a chat with a quantized language model in a terminal, and the
 * tools around it. main only dispatches to the subcommands. */
#include <stdio.h>
#include <string.h>

#include "app.h"

#ifndef NIBBLE_VERSION
#define NIBBLE_VERSION "0.0.0"
#endif

static const char usage[] =
    "usage: nibble [chat] [-m MODEL] [options]      chat (full screen; --plain: line mode)\n"
    "       nibble run [-m MODEL] -p PROMPT [-n N]   print a continuation\n"
    "       nibble info MODEL | --cpu                what a model file holds; CPU features\n"
    "       nibble tokenize [-m MODEL] -p TEXT       token ids of a text\n"
    "       nibble bench [-m MODEL] [-t 1,2] [--kernel all]  prompt/decode speed, roofline\n"
    "       nibble synth --shape NAME OUT.gguf       a random model of a real shape\n"
    "       nibble score [-m MODEL] --ids \"1 2 3\"     teacher-forced top-1 per position\n"
    "       nibble quantize IN.gguf OUT.gguf TYPE    quantize (RTN, or --awq CALIB.txt)\n"
    "       nibble ppl [-m MODEL] -f TEXT            perplexity; --kl-base BASE for KL divergence\n"
    "       nibble quant-sweep [-m MODEL] -f TEXT    every type: size, ppl, KL, speed; table + plot\n"
    "       nibble export-ollama MODEL OUTDIR        the GGUF plus an Ollama Modelfile\n"
    "       nibble --version | --help\n"
    "\n"
    "Without -m the embedded default model (stories260K, a tiny story teller)\n"
    "is used. 'nibble COMMAND --help' lists a command's options.\n";

int main(int argc, char **argv)
{
    app_platform_init();
    const char *cmd = argc > 1 ? argv[1] : "";
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        fputs(usage, stdout);
        return 0;
    }
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
        printf("nibble %s\n", NIBBLE_VERSION);
        return 0;
    }
    if (!strcmp(cmd, "run"))
        return cmd_run(argc, argv);
    if (!strcmp(cmd, "info"))
        return cmd_info(argc, argv);
    if (!strcmp(cmd, "tokenize"))
        return cmd_tokenize(argc, argv);
    if (!strcmp(cmd, "synth"))
        return cmd_synth(argc, argv);
    if (!strcmp(cmd, "score"))
        return cmd_score(argc, argv);
    if (!strcmp(cmd, "bench"))
        return cmd_bench(argc, argv);
    if (!strcmp(cmd, "quantize"))
        return cmd_quantize(argc, argv);
    if (!strcmp(cmd, "ppl") || !strcmp(cmd, "perplexity"))
        return cmd_ppl(argc, argv);
    if (!strcmp(cmd, "quant-sweep"))
        return cmd_sweep(argc, argv);
    if (!strcmp(cmd, "export-ollama"))
        return cmd_export(argc, argv);
    if (!strcmp(cmd, "chat"))
        return cmd_chat(argc, argv, 2);
    if (cmd[0] == '-' || cmd[0] == 0)
        return cmd_chat(argc, argv, 1);
    fprintf(stderr, "nibble: unknown command '%s'\n\n%s", cmd, usage);
    return 2;
}
