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
    "       nibble quantize IN.gguf OUT.gguf TYPE    quantize (--method rtn|awq|gptq|awq+gptq, --imatrix)\n"
    "       nibble imatrix [-m MODEL] -f CALIB.txt   importance matrix (llama.cpp's format)\n"
    "       nibble ppl [-m MODEL] -f TEXT            perplexity; --kl-base BASE for KL divergence\n"
    "       nibble quant-sweep [-m MODEL] -f TEXT    every type: size, ppl, KL, speed; table + plot\n"
    "       nibble prune IN.gguf OUT.gguf --heads R --neurons R --calib TEXT  remove heads/neurons\n"
    "       nibble report RESULTS.json... -o report.html   the quantization/pruning dashboard\n"
    "       nibble export-ollama MODEL OUTDIR        the GGUF plus an Ollama Modelfile\n"
    "       nibble template -m MODEL --messages M.json  a chat template rendered over a conversation\n"
    "       nibble --version | --help\n"
    "\n"
    "Without -m the embedded default model (stories260K, a tiny story teller)\n"
    "is used. 'nibble COMMAND --help' lists a command's options.\n";

static int chat_sub(int argc, char **argv) { return cmd_chat(argc, argv, 2); }

/* The subcommands by name (argv[1]). */
static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
} commands[] = {
    {"run", cmd_run},         {"info", cmd_info},         {"tokenize", cmd_tokenize},   {"synth", cmd_synth},
    {"score", cmd_score},     {"bench", cmd_bench},       {"quantize", cmd_quantize},   {"ppl", cmd_ppl},
    {"perplexity", cmd_ppl},  {"quant-sweep", cmd_sweep}, {"export-ollama", cmd_export}, {"chat", chat_sub},
    {"prune", cmd_prune},     {"report", cmd_report},
    {"template", cmd_template}, {"imatrix", cmd_imatrix},
};

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
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(cmd, commands[i].name))
            return commands[i].run(argc, argv);
    if (cmd[0] == '-' || cmd[0] == 0) /* no command: the chat, with these flags */
        return cmd_chat(argc, argv, 1);
    fprintf(stderr, "nibble: unknown command '%s'\n\n%s", cmd, usage);
    return 2;
}
