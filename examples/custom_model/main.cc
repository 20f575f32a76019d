// my_braid: braid's command line with one more model, "my_net" (my_model.cc). Every process of a job that
// names my_net runs this program instead of `braid`:
//
//   my_braid check examples/custom_model/job.yaml
//   my_braid launch -n 2 -- ./my_braid run examples/custom_model/job.yaml
#include "cli/entry.h"
#include "examples/custom_model/my_model.h"

int main(int argc, char** argv) {
  my_project::register_my_model();
  return braid::cli::run_main(argc, argv);
}
