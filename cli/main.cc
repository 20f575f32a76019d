// The `braid` executable: braid's command line (cli/entry.h) with the built-in models only.
#include "cli/entry.h"

int main(int argc, char** argv) { return braid::cli::run_main(argc, argv); }
