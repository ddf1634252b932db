// ddprun: launches and supervises the workers of a DDP job, with torchrun's
// flags and worker environment (see core/launch/ddprun.h).
#include "launch/ddprun.h"

int main(int argc, char** argv) { return ddp::launch::ddprun_main(argc, argv); }
