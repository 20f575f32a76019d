// braid's command line as a function, so that a program of one's own can run it after registering its
// models (runtime::register_model) or module classes:
//
//   int main(int argc, char** argv) {
//     my_project::register_my_model();
//     return braid::cli::run_main(argc, argv);
//   }
//
// The `braid` executable is exactly that with nothing registered (cli/main.cc); examples/custom_model/
// builds such a program. Every process of a job must run the same program, so that each finds the models.
#pragma once

namespace braid::cli {

// Parses argv as `braid` does and runs the subcommand; returns the process's exit code (0 success, 1 a
// failure at run time, 2 a usage error or a bad job file).
int run_main(int argc, char** argv);

}  // namespace braid::cli
