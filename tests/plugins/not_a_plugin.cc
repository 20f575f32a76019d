// A shared library that is not a braid plugin at all: no braid entry points.
extern "C" __attribute__((visibility("default"))) int not_a_braid_plugin() { return 42; }
